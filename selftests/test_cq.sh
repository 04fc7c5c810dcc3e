#!/bin/bash
# Completion queues on the rxe ABI: sizes as the rings round them, limits,
# resize, notification arming, completion channels, no leaks.
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
from verbs import Checks
from pyverbs.device import Context
from pyverbs.cq import CQ, CompChannel
from pyverbs.pyverbs_error import PyverbsRDMAError
c = Checks('test_cq')
ok, fails = c.ok, c.fails
with Context(name='rroce0') as ctx:
    cq = CQ(ctx, 100)
    ok('a CQ of 100 holds 127 entries (power-of-two ring, one slot free)', cq.cqe == 127, cq.cqe)
    big = CQ(ctx, 32767)
    ok('the largest CQ (max_cqe 32767) is created', big.cqe == 32767, big.cqe)
    big.close()
    fails('a CQ above max_cqe is refused', lambda: CQ(ctx, 32768))
    fails('a CQ of 0 entries is refused', lambda: CQ(ctx, 0))
    cq.resize(500)
    ok('resize to 500 gives 511 entries', cq.cqe == 511, cq.cqe)
    cq.resize(10)
    ok('shrinking an empty CQ to 10 gives 15 entries', cq.cqe == 15, cq.cqe)
    fails('resize above max_cqe is refused', lambda: cq.resize(40000))
    ok('the CQ still has 15 entries after a refused resize', cq.cqe == 15, cq.cqe)
    ch = CompChannel(ctx)
    ccq = CQ(ctx, 16, None, ch, 0)
    ccq.req_notify()
    ccq.req_notify(True)
    ok('req_notify (next and solicited) on a CQ with a completion channel', True)
    many = [CQ(ctx, 64) for _ in range(200)]
    for c in many:
        c.close()
    ok('200 CQs created and destroyed', True)
    ccq.close(); ch.close(); cq.close()
PY
# A process that never polls its CQ loses completions at will: each loss is
# reported, but the kernel log must not flood.
before=$(dmesg | grep -c 'CQ overrun')
py_checks <<'PY'
import time
from verbs import Checks, connect_rc
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
ok = Checks('test_cq').ok
ctx = Context(name='rroce0')
pd = PD(ctx)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
small, other = CQ(ctx, 1), CQ(ctx, 16)
qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=other, cap=QPCap(max_send_wr=16, max_recv_wr=1)))
       for cq in (small, other)]
gid = ctx.query_gid(1, 1)
for me, peer in ((qps[0], qps[1]), (qps[1], qps[0])):
    connect_rc(me, peer.qp_num, gid, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
sent = 0
for _ in range(25):
    for _ in range(8):
        wr = SendWR(wr_id=sent, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)])
        wr.set_wr_rdma(mr.rkey, mr.buf + 2048)
        qps[0].post_send(wr)
        sent += 1
    time.sleep(0.02)
time.sleep(0.5)
ok(f'{sent} signaled WRITEs into a CQ of {small.cqe} that is never polled', sent == 200)
PY
after=$(dmesg | grep -c 'CQ overrun')
lines=$((after - before))
info "CQ overrun lines in the kernel log: $lines"
if [ "$lines" -ge 1 ] && [ "$lines" -le 20 ]; then pass "lost completions are reported, ratelimited ($lines lines for ~190 losses)"
else fail "lost completions are reported, ratelimited ($lines lines for ~190 losses)"; fi

# The MAD layer's own CQ stays: count the ones a process owns.
check "no user CQ left in rdma res" bash -c '[ "$(rdma res show cq dev rroce0 | grep cqn | grep -c " pid ")" = 0 ]'
check "rdma link delete" rdma link delete rroce0
finish
