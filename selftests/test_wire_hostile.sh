#!/bin/bash
# Hostile input from the wire: a fake RoCE peer (a UDP socket on 4791 in
# namespace rroce-a, which has no rroce device) sends hand-built packets with
# valid ICRCs to real QPs of rroce-b and checks what the responder does:
# WRITE payload bounded by the RETH length, WRITE_WITH_IMM byte counts,
# packets from an address that is not the QP's peer, duplicate READs with
# new parameters, READs beyond max_dest_rd_atomic, atomics (duplicates,
# misaligned, out of range, unauthorised), FLUSH and ATOMIC WRITE (the
# same, and malformed ones), and QP/CQ/context destruction
# while packets for the QP keep arriving.
. "$(dirname "$0")/lib.sh"
modprobe rroce
topo_up
B="ip netns exec $TOPO_B"
$B rdma link add rroce-b type rroce netdev veth-b
# A third address on the peer's side: a host on the link that is not the QP's peer.
ip -n $TOPO_A addr add 198.18.0.3/24 dev veth-a
mark="rroce selftest test_wire_hostile start $$"
echo "$mark" >/dev/kmsg
kreports() {
	dmesg | sed -n "/$mark/,\$p" | kernel_reports
}

PYTHONPATH=$(dirname "$0") timeout 600 python3 - <<'PY'
import os, random, select, struct, sys, time, traceback
import roce
from roce import Peer, packet, RC, NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS
from verbs import Checks, connect_rc, wait_wcs

checks = Checks('test_wire_hostile')
ok = checks.ok
PEER4, DEV4, THIRD4 = '198.18.0.1', '198.18.0.2', '198.18.0.3'
PEER6, DEV6 = 'fd72:6f63:6501::1', 'fd72:6f63:6501::2'

# Sockets first, in the peer's namespace; then the flooder of case f is forked
# before any verbs object exists (a child of a process with registered memory
# is best avoided); then the verbs side opens in rroce-b.
roce.enter_netns('rroce-a')
peer, third, peer6 = Peer(PEER4), Peer(THIRD4), Peer(PEER6)


def flooder(cmd_fd, out_fd):
    """Child process of case f: sends valid SEND_ONLY and WRITE_ONLY packets (and
    some for the neighbouring QPNs) to the target the parent names on `cmd_fd`
    ("go QPN RKEY VA"), until "quit"; reports the count on `out_fd`."""
    rng = random.Random(6)
    target, psn, sent, buf = None, 0, 0, b''
    end = time.time() + 300
    while time.time() < end:
        r, _, _ = select.select([cmd_fd], [], [], 0 if target else 0.5)
        if r:
            chunk = os.read(cmd_fd, 4096)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b'\n')
            for l in lines:
                w = l.split()
                if w and w[0] == b'go':
                    target, psn = tuple(int(x) for x in w[1:4]), 0
                elif w and w[0] == b'quit':
                    end = 0
        if target is None:
            continue
        qpn, rkey, va = target
        for _ in range(16):
            q = qpn if rng.random() < 0.8 else (qpn + rng.choice((-1, 1, 2))) & 0xffffff
            if rng.random() < 0.5:
                p = packet(RC | roce.SEND_ONLY, q, psn, rng.randbytes(rng.choice((0, 8, 256, 1024))), ack_req=True)
            else:
                p = packet(RC | roce.WRITE_ONLY, q, psn, rng.randbytes(64), reth_=(va, rkey, 64), ack_req=True)
            peer.send(p, DEV4)
            sent += 1
            psn = (psn + 1) & roce.PSN_MASK
        peer.drain()
    os.write(out_fd, f'{sent}\n'.encode())
    os._exit(0)


cmd_r, cmd_w = os.pipe()
out_r, out_w = os.pipe()
child = os.fork()
if child == 0:
    os.close(cmd_w)
    os.close(out_r)
    try:
        flooder(cmd_r, out_w)
    finally:
        os._exit(1)
os.close(cmd_r)
os.close(out_w)

roce.enter_netns('rroce-b')
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.wr import RecvWR, SGE
import pyverbs.enums as e

LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
ctx = Context(name='rroce-b')
pd = PD(ctx)
SGID4, SGID6 = roce.gid_index(ctx, DEV4), roce.gid_index(ctx, DEV6)
print(f'# GID indexes on rroce-b: {DEV4} -> {SGID4}, {DEV6} -> {SGID6}')
peer_qpns = iter(range(0x100, 0x1000))
P = 100  # first PSN of every QP below
MTU = 1024
FILL = 0x5a


def rc_qp(access=LW | RW | RR, rd_atomic=16, addr=PEER4, psn=P):
    """An RC QP of rroce-b (with its own CQ) connected to the fake peer at `addr`.
    Each gets its own peer QPN, so the peer tells the responses apart."""
    cq = CQ(ctx, 64)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=16, max_recv_wr=16)))
    me = next(peer_qpns)
    connect_rc(qp, me, roce.gid(addr), access, psn=psn, rd_atomic=rd_atomic,
               sgid_index=SGID6 if ':' in addr else SGID4)
    return qp, cq, me


def filled_mr(size, access=LW | RW | RR, pattern=None):
    mr = MR(pd, size, access)
    mr.write(pattern if pattern is not None else bytes([FILL]) * size, size)
    return mr


def offset_pattern(size):
    """Every 8 bytes hold their own offset: data read back names its address."""
    return b''.join(struct.pack('<Q', o) for o in range(0, size, 8))


def state(qp):
    return qp.query(e.IBV_QP_STATE)[0].qp_state


STATE_NAMES = {e.IBV_QPS_RESET: 'RESET', e.IBV_QPS_INIT: 'INIT', e.IBV_QPS_RTR: 'RTR', e.IBV_QPS_RTS: 'RTS',
               e.IBV_QPS_SQD: 'SQD', e.IBV_QPS_SQE: 'SQE', e.IBV_QPS_ERR: 'ERR'}


def fmt(pkts, limit=8):
    s = ', '.join(f'{p.name} psn {p.psn}' + (f' {roce.syndrome_name(p.syndrome)}' if p.aeth else '')
                  + (f' +{len(p.payload)}B' if p.payload else '') for p in pkts[:limit])
    return (s + (f', ... ({len(pkts)} in all)' if len(pkts) > limit else '')) or 'nothing'


def acks(pkts, syndrome=None, psn=None):
    return [p for p in pkts if p.opcode == RC | roce.ACKNOWLEDGE
            and (syndrome is None or p.syndrome == syndrome) and (psn is None or p.psn == psn)]


def positive_acks(pkts):
    return [p for p in pkts if p.opcode == RC | roce.ACKNOWLEDGE and p.syndrome & 0x60 == 0]


def naks(pkts):
    return [p for p in pkts if p.aeth and p.syndrome & 0x60 == 0x60]


def answered(psn):
    """Stop condition: a NAK, or an ACK for `psn`, arrived."""
    return lambda got: any(p.aeth and (p.syndrome & 0x60 == 0x60 or p.psn == psn) for p in got)


def wr(op, qpn, psn, payload=b'', **kw):
    return packet(RC | op, qpn, psn, payload, **kw)


def changed(mr, start, end):
    """(count, first offset) of bytes in [start, end) of `mr` that are no longer FILL."""
    data = mr.read(end - start, start)
    diff = [i for i, b in enumerate(data) if b != FILL]
    return len(diff), (start + diff[0] if diff else None)


def case(fn):
    """Runs one case; an exception is that case's failure, not the end of the suite.
    WIRE_CASES="name ..." in the environment runs only the cases named."""
    only = os.environ.get('WIRE_CASES', '').split()
    if only and fn.__name__ not in only:
        return fn
    try:
        fn()
    except Exception as ex:
        ok(f'{fn.__name__} ran', False, f'{type(ex).__name__}: {ex}')
        traceback.print_exc(file=sys.stdout)
    return fn


@case
def baseline():
    """The harness itself: valid WRITEs from the fake peer land and are ACKed, over IPv4 and IPv6."""
    for addr, sock, dst in ((PEER4, peer, DEV4), (PEER6, peer6, DEV6)):
        if addr == PEER6 and SGID6 is None:
            checks.skip('WRITE_ONLY from an IPv6 peer', 'no GID for the ULA address')
            continue
        qp, cq, me = rc_qp(addr=addr)
        mr = filled_mr(4096)
        sock.send(wr(roce.WRITE_ONLY, qp.qp_num, P, b'\x42' * 64, reth_=(mr.buf, mr.rkey, 64), ack_req=True), dst)
        got = sock.collect(3, qpn=me, until=answered(P))
        ok(f'baseline: WRITE_ONLY from the fake peer over IPv{6 if ":" in addr else 4} lands and is ACKed',
           mr.read(64, 0) == b'\x42' * 64 and acks(got, psn=P) and not naks(got), fmt(got))


@case
def write_beyond_reth():
    """(a) FIRST with RETH length 2048, then MIDDLE, MIDDLE, LAST of 1024 bytes each."""
    qp, cq, me = rc_qp()
    mr = filled_mr(64 << 10)
    pkts = [wr(roce.WRITE_FIRST, qp.qp_num, P, b'\xa1' * MTU, reth_=(mr.buf, mr.rkey, 2048)),
            wr(roce.WRITE_MIDDLE, qp.qp_num, P + 1, b'\xa2' * MTU),
            wr(roce.WRITE_MIDDLE, qp.qp_num, P + 2, b'\xa3' * MTU),
            wr(roce.WRITE_LAST, qp.qp_num, P + 3, b'\xa4' * MTU, ack_req=True)]
    for p in pkts:
        peer.send(p, DEV4)
    got = peer.collect(3, qpn=me, until=answered(P + 3))
    n, first = changed(mr, 2048, 64 << 10)
    what = 'WRITE of 4 KiB under a RETH length of 2048'
    ok(f'{what}: nothing past va+2048 changes', n == 0, f'{n} bytes beyond overwritten, from offset {first}')
    ok(f'{what}: NAK Invalid Request (syndrome 0x61) and no ACK', acks(got, NAK_INVALID_REQUEST) and not positive_acks(got), fmt(got))
    ok(f'{what}: the responder QP is in the error state', state(qp) == e.IBV_QPS_ERR, f'state {STATE_NAMES[state(qp)]}')

    # A LAST that ends the message short of the RETH length.
    qp, cq, me = rc_qp()
    mr = filled_mr(8192)
    peer.send(wr(roce.WRITE_FIRST, qp.qp_num, P, b'\xb1' * MTU, reth_=(mr.buf, mr.rkey, 3072)), DEV4)
    peer.send(wr(roce.WRITE_LAST, qp.qp_num, P + 1, b'\xb2' * MTU, ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P + 1))
    what = 'WRITE ending after 2048 of its RETH length 3072'
    ok(f'{what}: NAK Invalid Request and no ACK', acks(got, NAK_INVALID_REQUEST) and not positive_acks(got), fmt(got))
    ok(f'{what}: the responder QP is in the error state', state(qp) == e.IBV_QPS_ERR, f'state {STATE_NAMES[state(qp)]}')

    # A WRITE_ONLY carrying more payload than its RETH length.
    qp, cq, me = rc_qp()
    mr = filled_mr(8192)
    peer.send(wr(roce.WRITE_ONLY, qp.qp_num, P, b'\xc1' * 512, reth_=(mr.buf + 4096, mr.rkey, 64), ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P))
    n, first = changed(mr, 4096 + 64, 8192)
    what = 'WRITE_ONLY of 512 bytes under a RETH length of 64'
    ok(f'{what}: nothing past va+64 changes', n == 0, f'{n} bytes beyond overwritten, from offset {first}')
    ok(f'{what}: NAK Invalid Request and no ACK', acks(got, NAK_INVALID_REQUEST) and not positive_acks(got), fmt(got))

    # va + len wraps around 2^64.
    qp, cq, me = rc_qp()
    mr = filled_mr(8192)
    peer.send(wr(roce.WRITE_ONLY, qp.qp_num, P, b'\xd1' * 64, reth_=(2**64 - 32, mr.rkey, 64), ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P))
    what = 'WRITE_ONLY with va 2^64-32 and length 64 (va+len overflows)'
    ok(f'{what}: NAK (remote access error or invalid request), no ACK',
       (acks(got, NAK_REMOTE_ACCESS) or acks(got, NAK_INVALID_REQUEST)) and not positive_acks(got), fmt(got))
    ok(f'{what}: the MR is untouched', changed(mr, 0, 8192)[0] == 0)


@case
def write_imm_byte_len():
    """(b) WRITE_WITH_IMM in FIRST, MIDDLE, LAST_WITH_IMM with RETH length 3000."""
    qp, cq, me = rc_qp()
    mr = filled_mr(8192)
    sink = MR(pd, 64, LW)
    qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(sink.buf, 64, sink.lkey)]))
    data = random.Random(2).randbytes(3000)
    peer.send(wr(roce.WRITE_FIRST, qp.qp_num, P, data[:1024], reth_=(mr.buf, mr.rkey, 3000)), DEV4)
    peer.send(wr(roce.WRITE_MIDDLE, qp.qp_num, P + 1, data[1024:2048]), DEV4)
    peer.send(wr(roce.WRITE_LAST_IMM, qp.qp_num, P + 2, data[2048:], imm=0x12345678, ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P + 2))
    wcs = wait_wcs(cq, 1, 5)
    what = 'WRITE_WITH_IMM of 3000 bytes in 3 packets'
    ok(f'{what}: the data lands and the LAST is ACKed', mr.read(3000, 0) == data and acks(got, psn=P + 2)
       and changed(mr, 3000, 8192)[0] == 0, fmt(got))
    w = wcs[0] if wcs else None
    desc = f'byte_len {w.byte_len}, status {w.status}, opcode {w.opcode}, imm {w.imm_data:#x}' if w else 'no completion'
    ok(f'{what}: one successful RECV_RDMA_WITH_IMM completion',
       w is not None and w.status == e.IBV_WC_SUCCESS and w.opcode == e.IBV_WC_RECV_RDMA_WITH_IMM, desc)
    ok(f'{what}: the completion reports byte_len 3000', w is not None and w.byte_len == 3000, desc)
    ok(f'{what}: the completion carries the immediate', w is not None and w.wc_flags & e.IBV_WC_WITH_IMM
       and struct.unpack('>I', struct.pack('=I', w.imm_data))[0] == 0x12345678, desc)


@case
def send_with_invalidate():
    """SEND_ONLY_INV naming the rkey of a registered MR: no region here can be
    invalidated remotely (no memory windows or fast-registration MRs), so the
    request fails and the MR keeps working."""
    qp, cq, me = rc_qp()
    mr = filled_mr(4096)
    sink = MR(pd, 64, LW)
    qp.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(sink.buf, 64, sink.lkey)]))
    peer.send(wr(roce.SEND_ONLY_INV, qp.qp_num, P, b'\x5a' * 32, ieth=mr.rkey, ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P))
    wcs = wait_wcs(cq, 1, 3)
    what = 'SEND_ONLY_INV naming a user MR'
    ok(f'{what}: NAK Invalid Request and no ACK', acks(got, NAK_INVALID_REQUEST) and not positive_acks(got), fmt(got))
    ok(f'{what}: no successful receive completion', not any(w.status == e.IBV_WC_SUCCESS for w in wcs),
       ', '.join(f'status {w.status} opcode {w.opcode}' for w in wcs) or 'none')
    qp, cq, me = rc_qp()
    peer.send(wr(roce.WRITE_ONLY, qp.qp_num, P, b'\x33' * 64, reth_=(mr.buf, mr.rkey, 64), ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P))
    ok(f'{what}: the MR\'s rkey still works afterwards', mr.read(64, 0) == b'\x33' * 64 and acks(got, psn=P), fmt(got))


@case
def third_address():
    """(c) A valid WRITE_ONLY from an address that is not the QP's peer."""
    qp, cq, me = rc_qp()
    mr = filled_mr(4096)
    pkt = wr(roce.WRITE_ONLY, qp.qp_num, P, b'\xee' * 64, reth_=(mr.buf, mr.rkey, 64), ack_req=True)
    third.send(pkt, DEV4)
    got = peer.collect(1.5, qpn=me) + third.collect(0.2, qpn=me)
    what = f'WRITE_ONLY with the right rkey and PSN from {THIRD4} (not the peer)'
    ok(f'{what}: dropped, memory unchanged', changed(mr, 0, 4096)[0] == 0,
       'the spoofed data was written' if mr.read(64, 0) == b'\xee' * 64 else 'memory changed')
    ok(f'{what}: no ACK or NAK for it', not got, fmt(got))
    if SGID6 is not None:
        peer6.send(wr(roce.WRITE_ONLY, qp.qp_num, P, b'\xef' * 64, reth_=(mr.buf, mr.rkey, 64), ack_req=True), DEV6)
        got = peer.collect(1.5, qpn=me) + peer6.collect(0.2, qpn=me)
        what = 'the same WRITE_ONLY from the peer host\'s IPv6 address'
        ok(f'{what}: dropped, memory unchanged, no response', changed(mr, 0, 4096)[0] == 0 and not got,
           f'memory starts {mr.read(4, 0).hex()}, responses: {fmt(got)}')
    peer.send(wr(roce.WRITE_ONLY, qp.qp_num, P, b'\x77' * 64, reth_=(mr.buf, mr.rkey, 64), ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P))
    ok('the real peer\'s WRITE_ONLY with that PSN then lands and is ACKed',
       mr.read(64, 0) == b'\x77' * 64 and acks(got, psn=P) and not naks(got) and changed(mr, 64, 4096)[0] == 0,
       f'memory starts {mr.read(4, 0).hex()}, responses: {fmt(got)}')


@case
def duplicate_read():
    """(d) A READ answered, then "duplicates" of its PSN with other parameters."""
    big = 1 << 20
    mr1 = filled_mr(big, pattern=offset_pattern(big))
    mr2 = filled_mr(64 << 10, pattern=b'\x22' * (64 << 10))
    want = mr1.read(64, 0)

    def read(qp, me, va, rkey, length, until=None, secs=3):
        peer.send(wr(roce.READ_REQUEST, qp.qp_num, P, reth_=(va, rkey, length)), DEV4)
        return peer.collect(secs, qpn=me, until=until, quiet=1.0)

    only = lambda got: any(p.opcode == RC | roce.READ_RESPONSE_ONLY or p.aeth and p.syndrome & 0x60 == 0x60 for p in got)
    qp, cq, me = rc_qp()
    got = read(qp, me, mr1.buf, mr1.rkey, 64, only)
    ok('READ of 64 bytes is answered with the data', [(p.opcode, p.psn, p.payload) for p in got]
       == [(RC | roce.READ_RESPONSE_ONLY, P, want)], fmt(got))
    got = read(qp, me, mr1.buf, mr1.rkey, 64, only)
    ok('a duplicate READ with the same parameters is answered again (its response may have been lost)',
       [(p.opcode, p.psn, p.payload) for p in got] == [(RC | roce.READ_RESPONSE_ONLY, P, want)], fmt(got))
    got = read(qp, me, mr2.buf, mr2.rkey, 64)
    leaked = [p for p in got if p.payload and b'\x22' * 8 in p.payload]
    ok('a "duplicate" READ naming another MR (rkey/va) is not executed with the new parameters',
       not leaked, f'{len(leaked)} responses carry the other region\'s data: {fmt(got)}')
    got = read(qp, me, mr1.buf + 4096, mr1.rkey, 64)
    moved = [p for p in got if p.payload and p.payload != want]
    ok('a "duplicate" READ naming another va of the same MR is not executed with the new va',
       not moved, fmt(got))

    qp, cq, me = rc_qp()
    read(qp, me, mr1.buf, mr1.rkey, 64, only)
    got = read(qp, me, mr1.buf, mr1.rkey, big, secs=10)
    total = sum(len(p.payload or b'') for p in got)
    ok('a "duplicate" READ with a 1 MiB length gets no oversized response (at most the original 64 bytes)',
       total <= 64, f'{len(got)} packets, {total} bytes of payload')


@case
def read_beyond_rd_atomic():
    """(e) Four READs back to back at a responder with max_dest_rd_atomic=1, and one with 0."""
    mr = filled_mr(8192, pattern=offset_pattern(8192))
    qp, cq, me = rc_qp(rd_atomic=1)
    for i in range(4):
        peer.send(wr(roce.READ_REQUEST, qp.qp_num, P + i, reth_=(mr.buf + 64 * i, mr.rkey, 64)), DEV4)
    got = peer.collect(3, qpn=me, quiet=1.0)
    print(f'# 4 READs at max_dest_rd_atomic=1: {fmt(got)}; QP state {STATE_NAMES[state(qp)]}')
    seen, bad = set(), []
    for p in got:
        i = (p.psn - P) & roce.PSN_MASK
        if p.opcode == RC | roce.READ_RESPONSE_ONLY and i < 4 and i not in seen and p.payload == mr.read(64, 64 * i):
            seen.add(i)
        elif not (p.aeth and p.syndrome == NAK_INVALID_REQUEST and p.opcode == RC | roce.ACKNOWLEDGE):
            bad.append(p)
    ok('READs beyond max_dest_rd_atomic=1: each answered at most once with its own data, or NAKed Invalid Request',
       not bad, f'unexpected: {fmt(bad)}')
    # No responder resources at all: rdma_rxe NAKs such a READ with Invalid
    # Request (check_resource, RESPST_ERR_TOO_MANY_RDMA_ATM_REQ).
    try:
        qp, cq, me = rc_qp(rd_atomic=0)
    except Exception as ex:
        checks.skip('READ at max_dest_rd_atomic=0', f'QP not accepted: {ex}')
        return
    peer.send(wr(roce.READ_REQUEST, qp.qp_num, P, reth_=(mr.buf, mr.rkey, 64)), DEV4)
    got = peer.collect(3, qpn=me, quiet=1.0)
    ok('a READ at a responder with max_dest_rd_atomic=0 is NAKed Invalid Request, no data',
       acks(got, NAK_INVALID_REQUEST) and not any(p.payload for p in got), fmt(got))


@case
def atomics():
    """(g) Atomics from the fake peer: executed once and answered with the value
    found; a duplicate is answered again, not executed again; misaligned,
    out-of-range and unauthorised ones are NAKed and change nothing."""
    RA = e.IBV_ACCESS_REMOTE_ATOMIC
    full = LW | RW | RR | RA
    mr = filled_mr(4096, full, pattern=struct.pack('=Q', 5) + bytes([FILL]) * 4088)
    value = lambda: struct.unpack('=Q', mr.read(8, 0))[0]

    def atomic(qp, me, op, psn, va, rkey, swap_add, compare=0):
        peer.send(wr(op, qp.qp_num, psn, atmeth_=(va, rkey, swap_add, compare)), DEV4)
        got = peer.collect(3, qpn=me, until=answered(psn), quiet=1.0)
        found = [p.atmack for p in got if p.opcode == RC | roce.ATOMIC_ACKNOWLEDGE and p.psn == psn and p.syndrome & 0x60 == 0]
        return got, found

    qp, cq, me = rc_qp(access=full)
    got, found = atomic(qp, me, roce.COMPARE_SWAP, P, mr.buf, mr.rkey, 9, 5)
    ok('COMPARE_SWAP that matches swaps and is acknowledged with the value found', (value(), found) == (9, [5]), f'memory {value()}: {fmt(got)}')
    got, found = atomic(qp, me, roce.COMPARE_SWAP, P + 1, mr.buf, mr.rkey, 1, 7)
    ok('COMPARE_SWAP that does not match leaves memory as it was and returns it', (value(), found) == (9, [9]), f'memory {value()}: {fmt(got)}')
    got, found = atomic(qp, me, roce.FETCH_ADD, P + 2, mr.buf, mr.rkey, 3)
    ok('FETCH_ADD adds and is acknowledged with the value found', (value(), found) == (12, [9]), f'memory {value()}: {fmt(got)}')
    got, found = atomic(qp, me, roce.FETCH_ADD, P + 2, mr.buf, mr.rkey, 3)
    ok('a duplicate FETCH_ADD is answered with the original value and not executed again',
       (value(), found) == (12, [9]), f'memory {value()}: {fmt(got)}')
    got, found = atomic(qp, me, roce.FETCH_ADD, P + 2, mr.buf + 8, mr.rkey, 3)
    ok('a "duplicate" FETCH_ADD naming another address is neither executed nor answered',
       (value(), found, mr.read(8, 8)) == (12, [], bytes([FILL]) * 8), fmt(got))
    ok('the QP is still in RTS after all this', state(qp) == e.IBV_QPS_RTS, STATE_NAMES[state(qp)])

    plain = filled_mr(4096, LW | RW | RR)
    for what, access, region, va_off, key_xor, want in (
            ('an address that is not 8-byte aligned', full, mr, 4, 0, NAK_INVALID_REQUEST),
            ('an address beyond the region', full, mr, 4096, 0, NAK_REMOTE_ACCESS),
            ('a wrong R_Key', full, mr, 0, 0x80, NAK_REMOTE_ACCESS),
            ('a region registered without remote atomic access', full, plain, 0, 0, NAK_REMOTE_ACCESS),
            ('a QP without remote atomic access', LW | RW | RR, mr, 0, 0, NAK_REMOTE_ACCESS)):
        qp, cq, me = rc_qp(access=access)
        before = region.read(4096, 0)
        got, found = atomic(qp, me, roce.FETCH_ADD, P, region.buf + va_off, region.rkey ^ key_xor, 1)
        ok(f'FETCH_ADD to {what}: NAK {roce.syndrome_name(want)}, memory unchanged',
           acks(got, want, P) and not found and region.read(4096, 0) == before, fmt(got))

    # An atomic and, right behind it, a WRITE the responder refuses: the
    # atomic was executed, so its acknowledgement must reach the requester
    # before the NAK that ends the QP.
    qp, cq, me = rc_qp(access=full)
    start = value()
    peer.send(wr(roce.FETCH_ADD, qp.qp_num, P, atmeth_=(mr.buf, mr.rkey, 1, 0)), DEV4)
    peer.send(wr(roce.WRITE_ONLY, qp.qp_num, P + 1, b'\x55' * 8, reth_=(mr.buf + 64, mr.rkey ^ 0x80, 8), ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P + 1), quiet=1.0)
    order = [(p.opcode & 0x1f, p.psn) for p in got if p.aeth]
    ok('FETCH_ADD, then a refused WRITE: the atomic acknowledgement (with the value found) comes before the NAK',
       order[:2] == [(roce.ATOMIC_ACKNOWLEDGE, P), (roce.ACKNOWLEDGE, P + 1)] and got[0].atmack == start
       and acks(got, NAK_REMOTE_ACCESS, P + 1) and value() == start + 1, fmt(got))

    # Atomics hold responder resources as READs do.
    try:
        qp, cq, me = rc_qp(access=full, rd_atomic=0)
    except Exception as ex:
        checks.skip('FETCH_ADD at max_dest_rd_atomic=0', f'QP not accepted: {ex}')
        return
    before = value()
    got, found = atomic(qp, me, roce.FETCH_ADD, P, mr.buf, mr.rkey, 1)
    ok('FETCH_ADD at a responder with max_dest_rd_atomic=0: NAK Invalid Request, not executed',
       acks(got, NAK_INVALID_REQUEST, P) and not found and value() == before, fmt(got))


@case
def placement():
    """(h) FLUSH and ATOMIC WRITE from the fake peer: executed once and answered
    with a READ RESPONSE ONLY without data; a duplicate is answered again, not
    executed again; malformed ones (wrong length, pad, placement type or
    level) are NAKed Invalid Request and change nothing."""
    FG = e.IBV_ACCESS_FLUSH_GLOBAL
    full = LW | RW | RR | FG
    mr = filled_mr(4096, full)
    u64 = lambda off: mr.read(8, off)

    def answers(got, psn):
        return [p for p in got if p.opcode == RC | roce.READ_RESPONSE_ONLY and p.psn == psn
                and p.syndrome == roce.SYN_ACK and not p.payload]

    def aw(qp, me, psn, va, value, length=8, rkey=None, pad=None):
        peer.send(wr(roce.ATOMIC_WRITE, qp.qp_num, psn, value, reth_=(va, mr.rkey if rkey is None else rkey, length),
                     pad=pad, ack_req=True), DEV4)
        return peer.collect(3, qpn=me, until=answered(psn), quiet=1.0)

    def flush(qp, me, psn, va, length, placement=1, level=0):
        peer.send(wr(roce.FLUSH, qp.qp_num, psn, reth_=(va, mr.rkey, length), feth_=(placement, level), ack_req=True), DEV4)
        return peer.collect(3, qpn=me, until=answered(psn), quiet=1.0)

    qp, cq, me = rc_qp(access=full)
    got = aw(qp, me, P, mr.buf + 8, b'\x01' * 8)
    ok('ATOMIC WRITE stores its 8 bytes and is answered by an empty READ RESPONSE ONLY',
       u64(8) == b'\x01' * 8 and answers(got, P), fmt(got))
    got = aw(qp, me, P, mr.buf + 8, b'\x02' * 8)
    ok('a duplicate ATOMIC WRITE (another value) is answered again and not executed again',
       u64(8) == b'\x01' * 8 and answers(got, P), f'memory {u64(8).hex()}: {fmt(got)}')
    got = aw(qp, me, P, mr.buf + 16, b'\x03' * 8)
    ok('a "duplicate" ATOMIC WRITE naming another address is neither executed nor answered',
       u64(16) == bytes([FILL]) * 8 and not answers(got, P), fmt(got))
    got = flush(qp, me, P + 1, mr.buf, 4096)
    ok('FLUSH of a range is answered by an empty READ RESPONSE ONLY', answers(got, P + 1), fmt(got))
    got = flush(qp, me, P + 1, mr.buf, 4096)
    ok('a duplicate FLUSH is answered again', answers(got, P + 1), fmt(got))
    got = flush(qp, me, P + 2, 0, 0, level=1)
    ok('FLUSH of the whole region (no address, no length) is answered', answers(got, P + 2), fmt(got))
    ok('the QP is still in RTS after all this', state(qp) == e.IBV_QPS_RTS, STATE_NAMES[state(qp)])

    for what, send in (
            ('ATOMIC WRITE of 4 bytes', lambda q, m: aw(q, m, P, mr.buf, b'\x04' * 4, length=4)),
            ('ATOMIC WRITE whose RETH says 16 bytes', lambda q, m: aw(q, m, P, mr.buf, b'\x04' * 8, length=16)),
            ('ATOMIC WRITE of 12 bytes', lambda q, m: aw(q, m, P, mr.buf, b'\x04' * 12)),
            ('ATOMIC WRITE of 8 bytes with a pad count', lambda q, m: aw(q, m, P, mr.buf, b'\x04' * 8, pad=3)),
            ('ATOMIC WRITE to an address that is not 8-byte aligned', lambda q, m: aw(q, m, P, mr.buf + 4, b'\x04' * 8)),
            ('FLUSH with no placement type', lambda q, m: flush(q, m, P, mr.buf, 64, placement=0)),
            ('FLUSH with an undefined placement type bit', lambda q, m: flush(q, m, P, mr.buf, 64, placement=4)),
            ('FLUSH with an undefined selectivity level', lambda q, m: flush(q, m, P, mr.buf, 64, level=2))):
        qp, cq, me = rc_qp(access=full)
        before = mr.read(4096, 0)
        got = send(qp, me)
        ok(f'{what}: NAK Invalid Request, nothing executed', acks(got, NAK_INVALID_REQUEST, P)
           and not answers(got, P) and mr.read(4096, 0) == before, fmt(got))
    for what, access, send, want in (
            ('ATOMIC WRITE with a wrong R_Key', full, lambda q, m: aw(q, m, P, mr.buf, b'\x05' * 8, rkey=mr.rkey ^ 0x80),
             NAK_REMOTE_ACCESS),
            ('ATOMIC WRITE beyond the region', full, lambda q, m: aw(q, m, P, mr.buf + 4096, b'\x05' * 8), NAK_REMOTE_ACCESS),
            ('FLUSH for persistence', full, lambda q, m: flush(q, m, P, mr.buf, 64, placement=2), NAK_REMOTE_ACCESS),
            ('FLUSH through a QP without the FLUSH right', LW | RW | RR, lambda q, m: flush(q, m, P, mr.buf, 64),
             NAK_REMOTE_ACCESS)):
        qp, cq, me = rc_qp(access=access)
        before = mr.read(4096, 0)
        got = send(qp, me)
        ok(f'{what}: NAK {roce.syndrome_name(want)}, nothing executed',
           acks(got, want, P) and not answers(got, P) and mr.read(4096, 0) == before, fmt(got))
    # ATOMIC WRITEs hold responder resources as READs do; FLUSHes take one
    # beyond max_dest_rd_atomic (rdma_rxe's requester does not count them).
    try:
        qp, cq, me = rc_qp(access=full, rd_atomic=0)
    except Exception as ex:
        checks.skip('ATOMIC WRITE at max_dest_rd_atomic=0', f'QP not accepted: {ex}')
        return
    got = flush(qp, me, P, mr.buf, 64)
    ok('FLUSH at a responder with max_dest_rd_atomic=0 is answered', answers(got, P), fmt(got))
    got = aw(qp, me, P + 1, mr.buf + 24, b'\x06' * 8)
    ok('ATOMIC WRITE at a responder with max_dest_rd_atomic=0: NAK Invalid Request, not executed',
       acks(got, NAK_INVALID_REQUEST, P + 1) and u64(24) == bytes([FILL]) * 8, fmt(got))
    # A READ of 64 responses holds the one resource; FLUSHes right behind it
    # are answered after it, in order.
    qp, cq, me = rc_qp(access=full, rd_atomic=1)
    big = filled_mr(64 * MTU, full)
    peer.send(wr(roce.READ_REQUEST, qp.qp_num, P, reth_=(big.buf, big.rkey, 64 * MTU), ack_req=True), DEV4)
    for k in range(3):
        peer.send(wr(roce.FLUSH, qp.qp_num, P + 64 + k, reth_=(mr.buf, mr.rkey, 64), feth_=(1, 0), ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P + 66), quiet=1.0)
    order = [p.psn for p in got if p.opcode & 0x1f in (roce.READ_RESPONSE_FIRST, roce.READ_RESPONSE_MIDDLE,
                                                       roce.READ_RESPONSE_LAST, roce.READ_RESPONSE_ONLY)]
    ok('a READ at max_dest_rd_atomic=1 and three FLUSHes behind it: all answered, in PSN order',
       order == list(range(P, P + 67)) and not naks(got), fmt(got[-4:]))


@case
def destroy_under_flood():
    """(f) QP, CQ and context destroyed while valid packets for the QP keep arriving."""
    rounds, done = 30, 0
    start = time.time()
    try:
        for i in range(rounds):
            if time.time() - start > 240:
                break
            c = Context(name='rroce-b')
            p = PD(c)
            cq = CQ(c, 64)
            mr = MR(p, 4096, LW | RW)
            qp = QP(p, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=8, max_recv_wr=8)))
            os.write(cmd_w, f'go {qp.qp_num} {mr.rkey} {mr.buf}\n'.encode())
            connect_rc(qp, 0xff0, roce.gid(PEER4), LW | RW, psn=0, sgid_index=SGID4)
            for k in range(4):
                qp.post_recv(RecvWR(wr_id=k, num_sge=1, sg=[SGE(mr.buf, 1024, mr.lkey)]))
            time.sleep((0, 0.05, 0.3)[i % 3])
            if i % 2:
                qp.close()
                cq.close()
            c.close()  # whatever is left: MR, PD (and QP, CQ on even rounds)
            done += 1
    finally:
        os.write(cmd_w, b'quit\n')
    r, _, _ = select.select([out_r], [], [], 20)
    flooded = int(os.read(out_r, 64).split()[0]) if r else -1
    os.waitpid(child, 0)
    ok(f'QP, CQ and context destroyed under a flood, {done} of {rounds} rounds', done == rounds,
       f'time ran out after {time.time() - start:.0f} s')
    print(f'# flooder sent {flooded} packets in {time.time() - start:.1f} s')
    # The device still works.
    peer.drain()
    qp, cq, me = rc_qp()
    mr = filled_mr(4096)
    peer.send(wr(roce.WRITE_ONLY, qp.qp_num, P, b'\x31' * 64, reth_=(mr.buf, mr.rkey, 64), ack_req=True), DEV4)
    got = peer.collect(3, qpn=me, until=answered(P))
    ok('after the flood a fresh QP executes and ACKs a WRITE', mr.read(64, 0) == b'\x31' * 64 and acks(got, psn=P), fmt(got))


ctx.close()
PY
rc=$?
[ $rc = 0 ] || fail "the Python part exited with status $rc"

# CNPs to a UD QP: a CNP names only the QP, so one from an address the QP
# never sent to is counted and ignored (rp_cnp_ignored); one from the
# address it sends to cuts its rate (rp_cnp_handled).
py_checks env TOPO_A=$TOPO_A <<'PY'
import os, time
import roce
import uverbs_raw as u
from roce import Peer, packet
from verbs import Checks
c = Checks('test_wire_hostile')
QKEY = 0x11111111
PEER4, DEV4, THIRD4 = '198.18.0.1', '198.18.0.2', '198.18.0.3'
roce.enter_netns(os.environ['TOPO_A'])
peer, third = Peer(PEER4), Peer(THIRD4)
ctx = u.Context('rroce-b')
pd, cq = ctx.alloc_pd(), ctx.create_cq(64)
buf = u.Mapping(4096)
_, lkey, _ = ctx.reg_mr(pd, buf.addr, 4096, u.LOCAL_WRITE)
qp = ctx.create_qp(pd, cq, cq, u.QPT_UD)
ctx.ud_ready(qp, QKEY)
sgid, _ = u.gid_of('rroce-b')
_, ah = ctx.create_ah(pd, bytes.fromhex(roce.gid_str(PEER4).replace(':', '')), sgid)


def cnt(name):
    with open(f'/sys/class/infiniband/rroce-b/ports/1/hw_counters/{name}') as f:
        return int(f.read())


def cnp():
    return packet(roce.CNP, qp.qpn, 0, bytes(16), becn=True)


def send_datagram(wr_id):
    """The QP sends to the peer; a CNP is then what its receiver would send."""
    ctx.post_send(qp, u.send_wqe(wr_id, u.WR_SEND, sges=[(buf.addr, 64, lkey)], ud=(0x99, QKEY, ah)))
    done = len(ctx.wait_wcs(cq, 1, 5)) == 1
    got = peer.collect(2, until=lambda g: g)
    return done and any(p.opcode == roce.UD | roce.SEND_ONLY for p in got)


def settle(before, name):
    """Waits (up to 2 s) for counter `name` to move past `before`."""
    end = time.time() + 2
    while time.time() < end and cnt(name) == before:
        time.sleep(0.05)


c.ok('the UD QP sends a datagram to the peer, which receives it', send_datagram(1))
handled, ignored = cnt('rp_cnp_handled'), cnt('rp_cnp_ignored')
third.send(cnp(), DEV4)
settle(ignored, 'rp_cnp_ignored')
c.ok('a CNP from an address the UD QP never sent to is ignored (rp_cnp_ignored +1)',
     cnt('rp_cnp_ignored') == ignored + 1 and cnt('rp_cnp_handled') == handled,
     f'handled +{cnt("rp_cnp_handled") - handled}, ignored +{cnt("rp_cnp_ignored") - ignored}')
send_datagram(2)
handled, ignored = cnt('rp_cnp_handled'), cnt('rp_cnp_ignored')
peer.send(cnp(), DEV4)
settle(handled, 'rp_cnp_handled')
c.ok('a CNP from the address it sends to cuts its rate (rp_cnp_handled +1)',
     cnt('rp_cnp_handled') == handled + 1,
     f'handled +{cnt("rp_cnp_handled") - handled}, ignored +{cnt("rp_cnp_ignored") - ignored}')
ctx.close()
PY
r=$(kreports)
check "no kernel warning, BUG or Oops during the hostile-wire tests" test -z "$r"
[ -z "$r" ] || printf '%s\n' "$r" | head -20 | sed 's/^/# | /'
check "rdma link delete" $B rdma link delete rroce-b
topo_down
check "module unloads (nothing leaked)" modprobe -r rroce
finish
