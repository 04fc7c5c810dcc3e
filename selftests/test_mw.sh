#!/bin/bash
# Memory windows between two rroce devices through unmodified rdma-core:
# type 1 windows bound with ibv_bind_mw, type 2B windows bound through the
# send queue, both letting a peer WRITE, READ and run atomics on exactly the
# range and with exactly the rights they grant; rebinding, LOCAL_INV, a
# peer's SEND with Invalidate and deallocation take the rights back. Every
# refused bind completes with IBV_WC_MW_BIND_ERR, every refused access with
# IBV_WC_REM_ACCESS_ERR, and memory stays unchanged. A region with a window
# bound to it cannot be deregistered.
. "$(dirname "$0")/lib.sh"
topo_devices_up
b0=$(cnt rroce-b mw_bind)
py_checks <<'PY'
import errno, struct
from verbs import Checks, connect_rc, open_devices, wait_wcs
from pyverbs.cq import CQ
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e
c = Checks('test_mw')
ok = c.ok
LW, RW, RR, RA, BIND = (e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ,
                        e.IBV_ACCESS_REMOTE_ATOMIC, e.IBV_ACCESS_MW_BIND)
ZERO_BASED = e.IBV_ACCESS_ZERO_BASED
QP_ACCESS = LW | RW | RR | RA
T1, T2 = e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2
WC_BIND_MW, WC_LOCAL_INV = 5, 6
SIZE = 16384

side = open_devices()
ctx_a, pd_a = side['rroce-a'][:2]
ctx_b, pd_b = side['rroce-b'][:2]

attr = ctx_b.query_device()
ok('the device advertises memory windows of type 1 and 2B',
   attr.device_cap_flags & e.IBV_DEVICE_MEM_WINDOW and attr.device_cap_flags & e.IBV_DEVICE_MEM_WINDOW_TYPE_2B,
   hex(attr.device_cap_flags))
ok('the device advertises max_mw', attr.max_mw > 0, attr.max_mw)

# The peers' QPs stay alive as long as the test.
keep = []


def pair(pd=None):
    """An RC pair: (requester on rroce-a, its CQ, responder on rroce-b, its CQ)."""
    qps = {}
    for name, (ctx, dpd, idx, gid) in side.items():
        cq = CQ(ctx, 64)
        init = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=32, max_recv_wr=8))
        qps[name] = (QP(pd if pd is not None and name == 'rroce-b' else dpd, init), cq)
    for me, peer in (('rroce-a', 'rroce-b'), ('rroce-b', 'rroce-a')):
        connect_rc(qps[me][0], qps[peer][0].qp_num, side[peer][3], QP_ACCESS, sgid_index=side[me][2], timeout=16, rd_atomic=4)
    keep.append(qps)
    return qps['rroce-a'] + qps['rroce-b']


def one(cq, secs=20):
    """The next completion of `cq` as (wr_id, status, opcode), or None."""
    w = wait_wcs(cq, 1, secs)
    return (w[0].wr_id, w[0].status, w[0].opcode) if w else None


def bind1(qp, cq, mw, mr, addr, length, access, wr_id=1):
    """ibv_bind_mw of a type 1 window; the completion."""
    qp.bind_mw(mw, MWBind(MWBindInfo(mr, addr, length, access), e.IBV_SEND_SIGNALED, wr_id))
    return one(cq)


def bind2(qp, cq, mw, mr, addr, length, access, wr_id=2):
    """BIND_MW of a type 2B window through the send queue; (completion, new R_Key)."""
    w = SendWR(wr_id=wr_id, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
    w.set_bind_wr(mw, MWBindInfo(mr, addr, length, access))
    qp.post_send(w)
    return one(cq), w.rkey


local = MR(pd_a, SIZE, LW)


def rdma(qp, cq, op, rkey, addr, n, off=0, wr_id=10):
    """A WRITE or READ of `n` bytes between `local` at `off` and (rkey, addr); its completion."""
    w = SendWR(wr_id=wr_id, opcode=op, num_sge=1, sg=[SGE(local.buf + off, n, local.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_rdma(rkey, addr)
    qp.post_send(w)
    return one(cq)


def fetch_add(qp, cq, rkey, addr, add, wr_id=11):
    w = SendWR(wr_id=wr_id, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1, sg=[SGE(local.buf, 8, local.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_atomic(rkey, addr, add, 0)
    qp.post_send(w)
    return one(cq)


def local_inv(qp, rkey, wr_id=3):
    inv = SendWR(wr_id=wr_id, opcode=e.IBV_WR_LOCAL_INV, send_flags=e.IBV_SEND_SIGNALED)
    inv.imm_data = rkey
    qp.post_send(inv)


def send_with_inv(qp, rkey, wr_id):
    """A 16-byte SEND with Invalidate of `rkey` from `local`."""
    s = SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND_WITH_INV, num_sge=1, sg=[SGE(local.buf, 16, local.lkey)],
               send_flags=e.IBV_SEND_SIGNALED)
    s.imm_data = rkey
    qp.post_send(s)


W, R = e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_READ
OK_W, OK_R = (10, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE), (10, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_READ)
DENIED_W, DENIED_R = (10, e.IBV_WC_REM_ACCESS_ERR, e.IBV_WC_RDMA_WRITE), (10, e.IBV_WC_REM_ACCESS_ERR, e.IBV_WC_RDMA_READ)
BIND_ERR = e.IBV_WC_MW_BIND_ERR


def fresh(mr):
    mr.write(bytes(SIZE), SIZE)


mr_b = MR(pd_b, SIZE, LW | BIND)
fresh(mr_b)
local.write(b'\x5a' * SIZE, SIZE)

# 1. Type 1: bound by ibv_bind_mw over 4 KiB in the middle, read and write.
qa, cqa, qb, cqb = pair()
mw1 = MW(pd_b, T1)
key0 = mw1.rkey
got = bind1(qb, cqb, mw1, mr_b, mr_b.buf + 4096, 4096, RW | RR)
ok('type 1: ibv_bind_mw completes with IBV_WC_BIND_MW', got == (1, e.IBV_WC_SUCCESS, WC_BIND_MW), got)
ok('type 1: the bind gives the window a new key, with the same index', mw1.rkey != key0 and mw1.rkey >> 8 == key0 >> 8,
   f'{key0:#x} -> {mw1.rkey:#x}')
got = rdma(qa, cqa, W, mw1.rkey, mr_b.buf + 4096 + 100, 1000)
ok('type 1: a WRITE through the window succeeds', got == OK_W, got)
ok('type 1: the bytes land where addressed, nothing around them changes',
   mr_b.read(SIZE, 0) == bytes(4196) + b'\x5a' * 1000 + bytes(SIZE - 5196))
mr_b.write(b'\xc3' * 64, 64, 4096 + 4032)
got = rdma(qa, cqa, R, mw1.rkey, mr_b.buf + 4096 + 4032, 64, off=8192)
ok('type 1: a READ of the window\'s last bytes succeeds with their data',
   got == OK_R and local.read(64, 8192) == b'\xc3' * 64, got)

# Rights and range: each refusal ends the QP, so each gets a fresh pair.
for what, op, key, addr, n in (
        ('a WRITE one byte past the window (inside the region)', W, lambda: mw1.rkey, lambda: mr_b.buf + 8192, 1),
        ('a WRITE starting before the window', W, lambda: mw1.rkey, lambda: mr_b.buf + 4095, 2),
        ('a READ spanning the window\'s end', R, lambda: mw1.rkey, lambda: mr_b.buf + 8000, 500),
        ('a WRITE with the key from before the bind', W, lambda: key0, lambda: mr_b.buf + 4096, 8),
        ('a WRITE with the region\'s own key (no remote rights)', W, lambda: mr_b.rkey, lambda: mr_b.buf + 4096, 8)):
    before = mr_b.read(SIZE, 0)
    qa, cqa, _, _ = pair()
    got = rdma(qa, cqa, op, key(), addr(), n)
    ok(f'type 1: {what}: IBV_WC_REM_ACCESS_ERR, memory unchanged',
       got == (DENIED_W if op == W else DENIED_R) and mr_b.read(SIZE, 0) == before, got)
qa, cqa, _, _ = pair()
got = fetch_add(qa, cqa, mw1.rkey, mr_b.buf + 4096, 1)
ok('type 1: an atomic through a window without the atomic right: IBV_WC_REM_ACCESS_ERR',
   got == (11, e.IBV_WC_REM_ACCESS_ERR, e.IBV_WC_FETCH_ADD), got)

# Rebinding moves the window and retires the old key; length 0 unbinds.
qa, cqa, qb, cqb = pair()
old = mw1.rkey
got = bind1(qb, cqb, mw1, mr_b, mr_b.buf, 1024, RW | RA)
ok('type 1: a rebind to another range completes', got == (1, e.IBV_WC_SUCCESS, WC_BIND_MW), got)
got = fetch_add(qa, cqa, mw1.rkey, mr_b.buf + 8, 5)
ok('type 1: an atomic through the rebound window (now with the atomic right) succeeds',
   got == (11, e.IBV_WC_SUCCESS, e.IBV_WC_FETCH_ADD) and struct.unpack('=Q', mr_b.read(8, 8))[0] == 5, got)
got = rdma(qa, cqa, W, old, mr_b.buf + 8, 8)
ok('type 1: the key from before the rebind is refused', got == DENIED_W, got)
qa, cqa, qb, cqb = pair()
got = bind1(qb, cqb, mw1, mr_b, mr_b.buf, 0, 0)
ok('type 1: a bind of length 0 completes', got == (1, e.IBV_WC_SUCCESS, WC_BIND_MW), got)
got = rdma(qa, cqa, W, mw1.rkey, mr_b.buf, 8)
ok('type 1: after a bind of length 0, the window lets nothing through', got == DENIED_W, got)
qa, cqa, qb, cqb = pair()
local_inv(qb, mw1.rkey)
got = one(cqb)
ok('type 1: LOCAL_INV of a type 1 window fails (IBV_WC_LOC_QP_OP_ERR)', got and got[:2] == (3, e.IBV_WC_LOC_QP_OP_ERR), got)

# 2. Type 2B: bound through the send queue, to that QP.
fresh(mr_b)
local.write(b'\x5a' * SIZE, SIZE)
qa, cqa, qb, cqb = pair()
mw2 = MW(pd_b, T2)
got, k2 = bind2(qb, cqb, mw2, mr_b, mr_b.buf + 2048, 8192, RW | RR | RA)
ok('type 2B: BIND_MW completes with IBV_WC_BIND_MW', got == (2, e.IBV_WC_SUCCESS, WC_BIND_MW), got)
got = rdma(qa, cqa, W, k2, mr_b.buf + 2048, 8192)
ok('type 2B: a WRITE of the whole window succeeds', got == OK_W and mr_b.read(8192, 2048) == b'\x5a' * 8192, got)
got = fetch_add(qa, cqa, k2, mr_b.buf + 2048 + 8, 3)
ok('type 2B: an atomic through the window returns the value found',
   got == (11, e.IBV_WC_SUCCESS, e.IBV_WC_FETCH_ADD) and local.read(8, 0) == b'\x5a' * 8, got)
# Another QP of the same PD: its peer may not use a window bound to qb.
qa2, cqa2, _, _ = pair()
got = rdma(qa2, cqa2, W, k2, mr_b.buf + 2048, 8)
ok('type 2B: the peer of another QP is refused the window', got == DENIED_W, got)
got = rdma(qa, cqa, W, mw2.rkey, mr_b.buf + 2048, 8)
ok('type 2B: the key from before the bind is refused', got == DENIED_W, got)

# A second bind of a bound window, and the refused binds.
qa, cqa, qb, cqb = pair()
got, _ = bind2(qb, cqb, mw2, mr_b, mr_b.buf, 64, RW)
ok('type 2B: binding a bound window again: IBV_WC_MW_BIND_ERR', got and got[:2] == (2, BIND_ERR), got)
no_bind = MR(pd_b, SIZE, LW | RW)
bind_only = MR(pd_b, SIZE, BIND)
pd_c = PD(ctx_b)
other_pd_mr = MR(pd_c, SIZE, LW | BIND)
for what, mr, addr, length, access, pd in (
        ('to a region registered without IBV_ACCESS_MW_BIND', no_bind, lambda m: m.buf, 64, RW, None),
        ('past the end of the region', mr_b, lambda m: m.buf + SIZE - 64, 65, RW, None),
        ('starting before the region', mr_b, lambda m: m.buf - 1, 64, RR, None),
        ('of length 0', mr_b, lambda m: m.buf, 0, RW, None),
        ('with remote write to a region without local write', bind_only, lambda m: m.buf, 64, RW, None),
        ('to a region of another PD', other_pd_mr, lambda m: m.buf, 64, RW, None),
        ('of a window of another PD', mr_b, lambda m: m.buf, 64, RW, pd_c),
        ('with IBV_ACCESS_MW_BIND for the window', mr_b, lambda m: m.buf, 64, RW | BIND, None)):
    mw = MW(pd if pd is not None else pd_b, T2)
    _, _, qb, cqb = pair()
    got, key = bind2(qb, cqb, mw, mr, addr(mr), length, access)
    ok(f'type 2B: a bind {what}: IBV_WC_MW_BIND_ERR', got and got[:2] == (2, BIND_ERR), got)
    qa, cqa, _, _ = pair()
    got = rdma(qa, cqa, W, key, addr(mr), 1)
    ok(f'type 2B: ... and the key it named lets nothing through', got == DENIED_W, got)
    mw.close()

# LOCAL_INV takes the window back; the peer's SEND with Invalidate too.
fresh(mr_b)
qa, cqa, qb, cqb = pair()
mw3 = MW(pd_b, T2)
got, k3 = bind2(qb, cqb, mw3, mr_b, mr_b.buf, 4096, RW)
local_inv(qb, k3)
got = one(cqb)
ok('type 2B: LOCAL_INV completes with IBV_WC_LOCAL_INV', got == (3, e.IBV_WC_SUCCESS, WC_LOCAL_INV), got)
got = rdma(qa, cqa, W, k3, mr_b.buf, 8)
ok('type 2B: after LOCAL_INV the window lets nothing through', got == DENIED_W and mr_b.read(8, 0) == bytes(8), got)

qa, cqa, qb, cqb = pair()
mw4 = MW(pd_b, T2)
got, k4 = bind2(qb, cqb, mw4, mr_b, mr_b.buf, 4096, RW)
recv_buf = MR(pd_b, 64, LW)
qb.post_recv(RecvWR(wr_id=30, num_sge=1, sg=[SGE(recv_buf.buf, 64, recv_buf.lkey)]))
send_with_inv(qa, k4, 31)
sent = one(cqa)
wcs = wait_wcs(cqb, 1, 20)
ok('type 2B: a SEND with Invalidate of the window completes at both ends',
   sent == (31, e.IBV_WC_SUCCESS, e.IBV_WC_SEND) and len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS,
   (sent, [(w.wr_id, w.status) for w in wcs]))
# The rxe provider hands the kernel's flags through: IB_WC_WITH_INVALIDATE
# is 1 << 2 there (as with rdma_rxe), not libibverbs' IBV_WC_WITH_INV.
ok('type 2B: the receive says which key was invalidated',
   len(wcs) == 1 and wcs[0].wc_flags & (1 << 2) and wcs[0].imm_data == k4,
   (hex(k4), [(w.wc_flags, hex(w.imm_data)) for w in wcs]))
got = rdma(qa, cqa, W, k4, mr_b.buf, 8)
ok('type 2B: after the SEND with Invalidate the window lets nothing through', got == DENIED_W, got)

# Remote invalidation from the peer of another QP is refused.
qa5, cqa5, qb, cqb = pair()
mw5 = MW(pd_b, T2)
got, k5 = bind2(qb, cqb, mw5, mr_b, mr_b.buf, 4096, RW)
qa2, cqa2, qb2, cqb2 = pair()
qb2.post_recv(RecvWR(wr_id=40, num_sge=1, sg=[SGE(recv_buf.buf, 64, recv_buf.lkey)]))
send_with_inv(qa2, k5, 41)
got = one(cqa2)
ok('type 2B: a SEND with Invalidate from another QP\'s peer: IBV_WC_REM_INV_REQ_ERR',
   got and got[:2] == (41, e.IBV_WC_REM_INV_REQ_ERR), got)
got = rdma(qa5, cqa5, W, k5, mr_b.buf, 8)
ok('type 2B: ... and the window still works for its own QP\'s peer', got == OK_W, got)

# 3. Zero-based: the peer addresses the window from 0.
fresh(mr_b)
qa, cqa, qb, cqb = pair()
mw6 = MW(pd_b, T2)
got, k6 = bind2(qb, cqb, mw6, mr_b, mr_b.buf + 1000, 3000, RW | RR | ZERO_BASED)
ok('type 2B zero-based: the bind completes', got == (2, e.IBV_WC_SUCCESS, WC_BIND_MW), got)
got = rdma(qa, cqa, W, k6, 0, 100)
ok('type 2B zero-based: a WRITE to address 0 lands at the window\'s start',
   got == OK_W and mr_b.read(1200, 0) == bytes(1000) + b'\x5a' * 100 + bytes(100), got)
got = rdma(qa, cqa, W, k6, 2900, 101)
ok('type 2B zero-based: a WRITE past the window\'s length is refused', got == DENIED_W, got)

# 4. Lifetimes: a region with a bound window stays; deallocating the
#    window takes its rights back and frees the region.
try:
    mr_b.close()
    ok('deregistering a region with windows bound to it fails (EBUSY)', False, 'succeeded')
except PyverbsRDMAError as ex:
    ok('deregistering a region with windows bound to it fails (EBUSY)', ex.error_code == errno.EBUSY, ex.error_code)
qa, cqa, qb, cqb = pair()
mw7 = MW(pd_b, T2)
got, k7 = bind2(qb, cqb, mw7, mr_b, mr_b.buf, 64, RW)
mw7.close()
got = rdma(qa, cqa, W, k7, mr_b.buf, 8)
ok('a deallocated window lets nothing through', got == DENIED_W, got)
for mw in (mw1, mw2, mw3, mw4, mw5, mw6):
    mw.close()
try:
    mr_b.close()
    ok('with its windows deallocated, the region deregisters', True)
except PyverbsRDMAError as ex:
    ok('with its windows deallocated, the region deregisters', False, ex.error_code)

# 5. Numbering: window numbers come from the device's index set. Numbers
#    are reused late (a stale key rarely meets a new window), holes are
#    found again once the range wraps, and no number is handed out twice.
N = 2000
many = [MW(pd_b, T1) for _ in range(N)]
idx = [m.rkey >> 8 for m in many]
ok('%d windows get %d distinct numbers' % (N, N), len(set(idx)) == N, len(set(idx)))
freed = set(idx[0::2])
for m in many[0::2]:
    m.close()
live = set(idx[1::2])
more = [MW(pd_b, T1) for _ in range(N // 2)]
new = [m.rkey >> 8 for m in more]
ok('windows allocated after half were freed take no live number',
   not (set(new) & live) and len(set(new)) == len(new), sorted(set(new) & live)[:4])
ok('and none of the numbers just freed (reused late)', not (set(new) & freed), sorted(set(new) & freed)[:4])
for m in many[1::2] + more:
    m.close()
PY
rc=$?
[ $rc = 0 ] || fail "the Python part exited with status $rc"
binds=$(($(cnt rroce-b mw_bind) - b0))
info "the device counted $binds binds"
check "the device counted the 9 binds that succeeded, not the refused ones" test $binds = 9
topo_devices_down
finish
