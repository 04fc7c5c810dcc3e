#!/bin/bash
# Completion queues on the rxe ABI: sizes as the rings round them, limits,
# resize, notification arming, completion channels, no leaks.
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
PYTHONPATH=$(dirname "$0") python3 - <<'PY'
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
# The MAD layer's own CQ stays: count the ones a process owns.
check "no user CQ left in rdma res" bash -c '[ "$(rdma res show cq dev rroce0 | grep cqn | grep -c " pid ")" = 0 ]'
check "rdma link delete" rdma link delete rroce0
finish
