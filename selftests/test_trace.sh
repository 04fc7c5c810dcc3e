#!/bin/bash
# The trace events rroce:*: with them enabled, a WRITE with a bad R_Key, a
# SEND without a receive posted (RNR) and a packet to a QP that does not
# exist each leave their events, naming the QP and the reason (the name of
# the counter that counted it, or the NAK that decided an error).
. "$(dirname "$0")/lib.sh"
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs nodev $T 2>/dev/null
modprobe rroce
if [ ! -d $T/events/rroce ]; then
	skip "rroce:* trace events" "the kernel has no event tracing (CONFIG_EVENT_TRACING)"
	finish
fi
rdma link add rroce0 type rroce netdev eth0
check "the events are listed: qp_state cqe_error packet_drop retransmit cnp rate" bash -c \
	"for e in qp_state cqe_error packet_drop retransmit cnp rate; do [ -d $T/events/rroce/\$e ] || exit 1; done"
echo 0 >$T/tracing_on
echo >$T/trace
echo 1 >$T/events/rroce/enable
echo 1 >$T/tracing_on
py_checks env TRACE=$T/trace <<'PY'
import os, re, time
from verbs import Checks, connect_rc, wait_wcs
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
ok = Checks('test_trace').ok
LW, RW = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE
ctx = Context(name='rroce0')
pd = PD(ctx)
gid = ctx.query_gid(1, 1)
mr = MR(pd, 8192, LW | RW)
cq = CQ(ctx, 64)

def qp():
    return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))

def pair(**kw):
    a, b = qp(), qp()
    for me, peer in ((a, b), (b, a)):
        connect_rc(me, peer.qp_num, gid, LW | RW, **kw)
    return a, b

def events(name):
    """The rroce:<name> events traced so far, as dicts of their key=value fields."""
    out = []
    for line in open(os.environ['TRACE']):
        m = re.search(rf' {name}: (.*)$', line)
        if m:
            out.append(dict(re.findall(r'(\w+)=(\S+)', m.group(1))) | {'line': m.group(1)})
    return out

def write(q, rkey, wr_id=1):
    wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
    wr.set_wr_rdma(rkey, mr.buf + 4096)
    q.post_send(wr)

# A WRITE with a wrong R_Key: the responder NAKs it, the requester's WQE
# completes with REM_ACCESS_ERR and both QPs go to the error state.
a, b = pair()
write(a, mr.rkey ^ 0x100)
w = wait_wcs(cq, 1)
ok('the bad-rkey WRITE completes with IBV_WC_REM_ACCESS_ERR', [x.status for x in w] == [e.IBV_WC_REM_ACCESS_ERR])
err = [x for x in events('cqe_error') if x.get('qpn') == str(a.qp_num)]
print(f'# {err}')
ok('cqe_error: the requester, status 10, reason nak_remote_access_error',
   len(err) == 1 and err[0].get('status') == '10' and err[0].get('reason') == 'nak_remote_access_error', err)
drops = [x for x in events('packet_drop') if x.get('qpn') == str(b.qp_num)]
ok('packet_drop: the responder, reason resp_remote_access_errors',
   [x.get('reason') for x in drops] == ['resp_remote_access_errors'], drops)
st = [x['line'] for x in events('qp_state') if x.get('qpn') in (str(a.qp_num), str(b.qp_num))]
ok('qp_state: both QPs went RESET -> INIT -> RTR -> RTS, then to ERR',
   all(any(f'qpn={q.qp_num} {s}' in l for l in st) for q in (a, b)
       for s in ('RESET -> INIT', 'INIT -> RTR', 'RTR -> RTS', 'RTS -> ERR')), st)

# A SEND with no receive posted: RNR NAKs until rnr_retry (1) runs out.
a, b = pair(rnr_retry=1, min_rnr_timer=1)
a.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
w = wait_wcs(cq, 1)
ok('the SEND without a receive completes with IBV_WC_RNR_RETRY_EXC_ERR',
   [x.status for x in w] == [e.IBV_WC_RNR_RETRY_EXC_ERR], [x.status for x in w])
drops = [x for x in events('packet_drop') if x.get('qpn') == str(b.qp_num)]
ok('packet_drop: the responder, reason send_rnr_err (each RNR NAK sent)',
   len(drops) == 2 and all(x.get('reason') == 'send_rnr_err' for x in drops), drops)
rt = [x for x in events('retransmit') if x.get('qpn') == str(a.qp_num)]
ok('retransmit: the requester, once (rnr_retry 1), reason rcvd_rnr_err, PSN 0',
   [(x.get('reason'), int(x.get('psn', '-1'), 16)) for x in rt] == [('rcvd_rnr_err', 0)], rt)
err = [x for x in events('cqe_error') if x.get('qpn') == str(a.qp_num)]
ok('cqe_error: status 13, reason retry_rnr_exceeded_err',
   [(x.get('status'), x.get('reason')) for x in err] == [('13', 'retry_rnr_exceeded_err')], err)

# A packet to a QP that does not exist: dropped, counted in rcvd_no_qp.
c = qp()
connect_rc(c, 0xabcde, gid, LW | RW, retry_cnt=0, timeout=8)
write(c, mr.rkey, wr_id=3)
end = time.time() + 10
while time.time() < end and not [x for x in events('packet_drop') if x.get('qpn') == str(0xabcde)]:
    time.sleep(0.1)
drops = [x for x in events('packet_drop') if x.get('qpn') == str(0xabcde)]
ok('packet_drop: QP 0xabcde, reason rcvd_no_qp', len(drops) >= 1 and drops[0].get('reason') == 'rcvd_no_qp', drops)
w = wait_wcs(cq, 1, 20)
err = [x for x in events('cqe_error') if x.get('qpn') == str(c.qp_num)]
ok('its requester gives up: cqe_error status 12, reason retry_exceeded_err',
   [(x.get('status'), x.get('reason')) for x in err] == [('12', 'retry_exceeded_err')], err)
PY
echo 0 >$T/events/rroce/enable
info "$(grep -c 'rroce\|dev=rroce0' $T/trace) trace lines"
echo >$T/trace
rdma link delete rroce0
finish
