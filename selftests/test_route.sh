#!/bin/bash
# Where a connected QP's packets go (docs/data-path.md, "Routes"): a QP
# keeps its route and the knowledge that its peer is not a local address,
# so a packet needs neither lookup; once the peer's address becomes local
# (here: added to a dummy device in the sender's namespace) the next packet
# is delivered locally, as the IP stack would loop it back, and not sent to
# the old peer; once the address is gone again, traffic flows as before.
# IPv4 and IPv6 GIDs.
. "$(dirname "$0")/lib.sh"
topo_devices_up
$A ip link add rroce-dum type dummy
$A ip link set rroce-dum up
export TOPO_B4 TOPO_B6
py_checks <<'PY'
import os, subprocess
from verbs import Checks, connect_rc, open_devices, wait_wcs
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
c = Checks('test_route')
ok = c.ok
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE


def cnt(dev, name):
    with open(f'/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}') as f:
        return int(f.read())


def gid_index(ctx, prefix):
    for i in range(16):
        if ctx.query_gid(1, i).gid.startswith(prefix):
            return i
    raise RuntimeError(f'no GID {prefix}')


def on_a(*cmd):
    subprocess.run(['ip', '-n', 'rroce-a', *cmd], check=True)


side = open_devices()
src = MR(side['rroce-a'][1], 4096, ACCESS)
dst = MR(side['rroce-b'][1], 4096, ACCESS)
# IPv4-mapped GIDs, and the ULA ones of the topology (fd72:6f63:6501::/64).
families = [('IPv4', '0000:0000:0000:0000:0000:ffff:', os.environ['TOPO_B4'], '32'),
            ('IPv6', 'fd72:6f63:6501:', os.environ['TOPO_B6'], '128')]
for family, prefix, peer_addr, plen in families:
    idx = {n: gid_index(side[n][0], prefix) for n in side}
    qps = {}
    for name, (ctx, pd, _, _) in side.items():
        cq = CQ(ctx, 16)
        qps[name] = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, sq_sig_all=1,
                                       cap=QPCap(max_send_wr=8, max_recv_wr=1))), cq)

    def connect():
        for me, peer in (('rroce-a', 'rroce-b'), ('rroce-b', 'rroce-a')):
            qps[me][0].modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
            # timeout 10 (about 4 ms), one retry: a lost WRITE fails quickly.
            connect_rc(qps[me][0], qps[peer][0].qp_num, side[peer][0].query_gid(1, idx[peer]), ACCESS,
                       sgid_index=idx[me], timeout=10, retry_cnt=1)

    def write(i):
        qp, cq = qps['rroce-a']
        src.write(bytes([i]) * 64, 64, 0)
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, 64, src.lkey)])
        wr.set_wr_rdma(dst.rkey, dst.buf)
        qp.post_send(wr)
        got = wait_wcs(cq, 1, secs=20)
        return got[0].status if got else None

    connect()
    ok(f'{family}: a WRITE to the peer completes', write(1) == e.IBV_WC_SUCCESS and dst.read(64, 0) == bytes([1]) * 64)
    ok(f'{family}: and a second, on the kept route', write(2) == e.IBV_WC_SUCCESS and dst.read(64, 0) == bytes([2]) * 64)
    err0, rcvd0 = cnt('rroce-a', 'send_err'), cnt('rroce-b', 'rcvd_pkts')
    on_a('addr', 'add', f'{peer_addr}/{plen}', 'dev', 'rroce-dum', *(['nodad'] if family == 'IPv6' else []))
    status = write(3)
    ok(f'{family}: once the peer address is local, the WRITE is not sent to the old peer',
       status == e.IBV_WC_RETRY_EXC_ERR and cnt('rroce-b', 'rcvd_pkts') == rcvd0 and dst.read(64, 0) == bytes([2]) * 64,
       f'status {status}, rroce-b received {cnt("rroce-b", "rcvd_pkts") - rcvd0}')
    # The local owner of the address (the dummy device) has no rroce device:
    # each attempt at local delivery counts as a send error.
    ok(f'{family}: it went to local delivery (send_err counts each attempt)', cnt('rroce-a', 'send_err') > err0,
       f'send_err {err0} -> {cnt("rroce-a", "send_err")}')
    on_a('addr', 'del', f'{peer_addr}/{plen}', 'dev', 'rroce-dum')
    connect()
    ok(f'{family}: once it is gone again, WRITEs reach the peer', write(4) == e.IBV_WC_SUCCESS and dst.read(64, 0) == bytes([4]) * 64)
PY
$A ip link del rroce-dum
topo_devices_down
finish
