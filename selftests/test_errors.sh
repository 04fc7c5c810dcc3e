#!/bin/bash
# Bad input gets the IBTA-specified error completion on the right side, the
# QP goes to the error state as specified, and other QPs keep working.
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
import errno
from verbs import Checks, connect_rc, wait_wcs
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
ok = Checks('test_errors').ok
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
ctx = Context(name='rroce0')
pd = PD(ctx)
gid = ctx.query_gid(1, 1)

def rc_pair():
    """Two RC QPs on rroce0 connected to each other (local delivery)."""
    cq = CQ(ctx, 64)
    qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=16, max_recv_wr=16))) for _ in range(2)]
    for me, peer in ((qps[0], qps[1]), (qps[1], qps[0])):
        connect_rc(me, peer.qp_num, gid, LW | RW | RR, psn=100, timeout=10, retry_cnt=3, rnr_retry=3, rd_atomic=4)
    return cq, qps

def write_wr(mr, length, raddr, rkey, wr_id=1, lkey=None, addr=None):
    wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                sg=[SGE(addr if addr is not None else mr.buf, length, lkey if lkey is not None else mr.lkey)])
    wr.set_wr_rdma(rkey, raddr)
    return wr

local = MR(pd, 8192, LW)
remote = MR(pd, 8192, LW | RW | RR)
ro = MR(pd, 8192, LW | RR)

def case(what, make_wr, want_status):
    cq, (a, b) = rc_pair()
    a.post_send(make_wr())
    w = wait_wcs(cq, 1)
    st = [x.status for x in w if x.wr_id == 1]
    ok(what, st == [want_status], [(x.wr_id, x.status) for x in w])
    q, _ = a.query(e.IBV_QP_STATE)
    ok(f'{what}: the requester QP is in the error state', q.qp_state == e.IBV_QPS_ERR, q.qp_state)
    return cq, a, b

case('invalid lkey -> IBV_WC_LOC_PROT_ERR', lambda: write_wr(local, 64, remote.buf, remote.rkey, lkey=local.lkey ^ 0x55), e.IBV_WC_LOC_PROT_ERR)
case('SGE outside its MR -> IBV_WC_LOC_PROT_ERR', lambda: write_wr(local, 64, remote.buf, remote.rkey, addr=local.buf + 8190), e.IBV_WC_LOC_PROT_ERR)
case('remote write with a wrong rkey -> IBV_WC_REM_ACCESS_ERR', lambda: write_wr(local, 64, remote.buf, remote.rkey ^ 0x100), e.IBV_WC_REM_ACCESS_ERR)
case('remote write outside the MR -> IBV_WC_REM_ACCESS_ERR', lambda: write_wr(local, 64, remote.buf + 8160, remote.rkey), e.IBV_WC_REM_ACCESS_ERR)
cq, a, b = case('remote write without REMOTE_WRITE access -> IBV_WC_REM_ACCESS_ERR', lambda: write_wr(local, 64, ro.buf, ro.rkey), e.IBV_WC_REM_ACCESS_ERR)
q, _ = b.query(e.IBV_QP_STATE)
ok('the responder of the bad write moved to the error state too', q.qp_state == e.IBV_QPS_ERR, q.qp_state)

# A send with no receive posted: RNR NAKs until rnr_retry (3) runs out.
cq, (a, b) = rc_pair()
s = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(local.buf, 32, local.lkey)])
a.post_send(s)
w = wait_wcs(cq, 1, 30)
ok('SEND without a posted receive -> IBV_WC_RNR_RETRY_EXC_ERR after rnr_retry', [x.status for x in w] == [e.IBV_WC_RNR_RETRY_EXC_ERR], [(x.wr_id, x.status) for x in w])

# Other QPs keep working: a fresh pair moves data after all of the above.
cq, (a, b) = rc_pair()
local.write(b'z' * 256, 256)
a.post_send(write_wr(local, 256, remote.buf, remote.rkey))
w = wait_wcs(cq, 1)
ok('a healthy pair still writes after the failures', [x.status for x in w] == [e.IBV_WC_SUCCESS] and remote.read(256, 0) == b'z' * 256,
   [(x.wr_id, x.status) for x in w])
# Posting to a QP not ready to send is refused synchronously.
nr = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap()))
try:
    nr.post_send(SendWR(wr_id=9, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(local.buf, 8, local.lkey)]))
    ok('posting a send to a QP in RESET is refused', False, 'succeeded')
except PyverbsRDMAError:
    ok('posting a send to a QP in RESET is refused', True)
PY
check "rdma link delete" rdma link delete rroce0
check "module unloads (nothing leaked)" modprobe -r rroce
finish
