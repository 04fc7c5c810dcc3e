#!/usr/bin/env python3
"""FLUSH and ATOMIC WRITE between two hosts, one side each (the interop run
puts rroce on one and rdma_rxe on the other):
    placement_peer.py [--dev DEV] [--no-flush]           serves: a region the peer writes
    placement_peer.py [--dev DEV] [--no-flush] ADDRESS   connects and writes it
The two exchange QP numbers, GIDs and the region's key over TCP, the client
WRITEs 4 KiB, FLUSHes it, ATOMIC WRITEs a flag, FLUSHes the whole region and
ATOMIC WRITEs 16 values in a row; then the server checks its memory and
tells the client. Exits 0 when every completion and byte is as expected.
--no-flush leaves the FLUSHes out (rdma_rxe drops FLUSHes whose ICRC is
the specified one)."""
import json
import socket
import struct
import sys
import time
from verbs import connect_rc, ipv4_gid_index, wait_wcs
from pyverbs.addr import GID
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPEx, QPInitAttr, QPInitAttrEx
from pyverbs.wr import SGE
import pyverbs.enums as e

PORT = 18711
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_FLUSH_GLOBAL
SIZE = 8192
DATA = bytes((i * 7 + 3) & 0xff for i in range(4096))
FLAG = struct.pack('=Q', 0x0123456789abcdef)
WC_FLUSH, WC_ATOMIC_WRITE = 8, 9


def send_json(conn, obj):
    conn.sendall((json.dumps(obj) + '\n').encode())


def recv_json(f):
    line = f.readline()
    if not line:
        raise ConnectionError('peer closed the connection')
    return json.loads(line)


def expected():
    """The server's region after the client's work requests."""
    mem = bytearray(SIZE)
    mem[4096:8192] = DATA
    mem[64:72] = FLAG
    mem[128:136] = struct.pack('=Q', 15)
    return bytes(mem)


def main():
    args = sys.argv[1:]
    dev = 'dev0'
    if args[:1] == ['--dev']:
        dev, args = args[1], args[2:]
    flush = True
    if args[:1] in (['--flush'], ['--no-flush']):
        flush, args = args[0] == '--flush', args[1:]
    ctx = Context(name=dev)
    pd = PD(ctx)
    gid_index = ipv4_gid_index(ctx)
    gid = ctx.query_gid(1, gid_index)
    cq = CQ(ctx, 64)
    cap = QPCap(max_send_wr=32, max_recv_wr=4)
    if not args:
        mr = MR(pd, SIZE, ACCESS)
        mr.write(bytes(SIZE), SIZE)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
        srv = socket.create_server(('', PORT), family=socket.AF_INET)
        conn, _ = srv.accept()
        f = conn.makefile()
        send_json(conn, {'qpn': qp.qp_num, 'gid': str(gid), 'rkey': mr.rkey, 'addr': mr.buf})
        peer = recv_json(f)
        connect_rc(qp, peer['qpn'], GID(peer['gid']), ACCESS, sgid_index=gid_index, timeout=16, rd_atomic=4)
        send_json(conn, {'ready': True})
        result = recv_json(f)
        got = mr.read(SIZE, 0)
        good = got == expected()
        diff = next((i for i in range(SIZE) if got[i] != expected()[i]), None)
        send_json(conn, {'memory_ok': good, 'first_difference': diff})
        print(f'client reported: {result}; memory as expected: {good}' + ('' if good else f' (differs at {diff})'))
        return 0 if good and result.get('ok') else 1
    try:
        conn = socket.create_connection((args[0], PORT), timeout=10)
    except OSError as ex:
        print(f'Connection refused: {ex}')
        return 1
    f = conn.makefile()
    attr = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, pd=pd, cap=cap,
                        send_ops_flags=e.IBV_QP_EX_WITH_FLUSH | e.IBV_QP_EX_WITH_ATOMIC_WRITE | e.IBV_QP_EX_WITH_RDMA_WRITE,
                        comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
    qp = QPEx(ctx, attr)
    local = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    local.write(DATA, 4096)
    srv = recv_json(f)
    send_json(conn, {'qpn': qp.qp_num, 'gid': str(gid)})
    connect_rc(qp, srv['qpn'], GID(srv['gid']), ACCESS, sgid_index=gid_index, timeout=16, rd_atomic=4)
    recv_json(f)
    rkey, base = srv['rkey'], srv['addr']
    qp.wr_start()
    plan = []

    def wr(wr_id, opcode):
        qp.wr_id = wr_id
        qp.wr_flags = e.IBV_SEND_SIGNALED
        plan.append((wr_id, opcode))

    wr(1, e.IBV_WC_RDMA_WRITE)
    qp.wr_rdma_write(rkey, base + 4096)
    qp.wr_set_sge(SGE(local.buf, 4096, local.lkey))
    if flush:
        wr(2, WC_FLUSH)
        qp.wr_flush(rkey, base + 4096, 4096, e.IBV_FLUSH_GLOBAL, e.IBV_FLUSH_RANGE)
    wr(3, WC_ATOMIC_WRITE)
    qp.wr_atomic_write(rkey, base + 64, FLAG)
    if flush:
        wr(4, WC_FLUSH)
        qp.wr_flush(rkey, base, 0, e.IBV_FLUSH_GLOBAL, e.IBV_FLUSH_MR)
    for i in range(16):
        wr(10 + i, WC_ATOMIC_WRITE)
        qp.wr_atomic_write(rkey, base + 128, struct.pack('=Q', i))
    qp.wr_complete()
    wcs = [(w.wr_id, w.status, w.opcode) for w in wait_wcs(cq, len(plan), 60)]
    want = [(i, e.IBV_WC_SUCCESS, op) for i, op in plan]
    ok = wcs == want
    print(f'{len(wcs)} of {len(want)} completions as expected: {ok}' + ('' if ok else f' (got {wcs[:6]})'))
    send_json(conn, {'ok': ok})
    verdict = recv_json(f)
    print(f'server memory as expected: {verdict["memory_ok"]}')
    return 0 if ok and verdict['memory_ok'] else 1


if __name__ == '__main__':
    sys.exit(main())
