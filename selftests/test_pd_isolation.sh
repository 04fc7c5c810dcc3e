#!/bin/bash
# Protection domains keep their objects apart however many PDs came before:
# a PD never takes the identity of an older one (which could be a kernel
# PD whose DMA MR covers all memory), and memory keys cannot be derived
# from one another.
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
from verbs import Checks, connect_rc, wait_wcs
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
ok = Checks('test_pd_isolation').ok
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
SKIP_KNOB = '/sys/module/rroce/parameters/pd_id_skip'
ctx = Context(name='rroce0')
gid = ctx.query_gid(1, 1)

def rc_pair(pd):
    cq = CQ(ctx, 16)
    qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4))) for _ in range(2)]
    for me, peer in ((qps[0], qps[1]), (qps[1], qps[0])):
        connect_rc(me, peer.qp_num, gid, LW | RW | RR, timeout=10, retry_cnt=2, rnr_retry=2)
    return cq, qps

def write(qp, cq, lkey, laddr, rkey, raddr):
    wr = SendWR(wr_id=7, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(laddr, 64, lkey)])
    wr.set_wr_rdma(rkey, raddr)
    qp.post_send(wr)
    return [w.status for w in wait_wcs(cq, 1)]

old_pd = PD(ctx)
old_mr = MR(old_pd, 4096, LW | RW | RR)
old_mr.write(b'o' * 64, 64)
# Age the identities by 2^32 - 1 values, as that many allocations would: a
# 32-bit counter would now hand the next PD the identity of `old_pd`.
try:
    with open(SKIP_KNOB, 'w') as f:
        f.write(str(2**32 - 1))
    aged = True
except OSError as ex:
    aged = False
ok('the pd_id_skip test knob exists (root only)', aged)
new_pd = PD(ctx)
new_mr = MR(new_pd, 4096, LW | RW | RR)
cq, (a, b) = rc_pair(new_pd)
st = write(a, cq, old_mr.lkey, old_mr.buf, new_mr.rkey, new_mr.buf)
ok("after 2^32-1 PD identities, a new PD cannot use an older PD's lkey (IBV_WC_LOC_PROT_ERR)",
   st == [e.IBV_WC_LOC_PROT_ERR], st)
ok('and nothing was copied', new_mr.read(64, 0) != b'o' * 64)
cq, (a, b) = rc_pair(new_pd)
st = write(a, cq, new_mr.lkey, new_mr.buf, old_mr.rkey, old_mr.buf)
ok("nor be the target of a WRITE with an older PD's rkey (IBV_WC_REM_ACCESS_ERR)",
   st == [e.IBV_WC_REM_ACCESS_ERR], st)
ok('and the older region is unchanged', old_mr.read(64, 0) == b'o' * 64)

# Keys carry a random byte: consecutive registrations do not count up.
mrs = [MR(old_pd, 4096, LW) for _ in range(32)]
low = [m.lkey & 0xff for m in mrs]
steps = {(y - x) & 0xff for x, y in zip(low, low[1:])}
ok('key bytes of consecutive registrations are not a sequence', steps != {1}, [hex(k) for k in low])
for m in mrs + [new_mr, old_mr]:
    m.close()
PY
check "rdma link delete" rdma link delete rroce0
check "module unloads (nothing leaked)" modprobe -r rroce
finish
