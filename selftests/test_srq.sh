#!/bin/bash
# Shared receive queues on the rxe ABI: ibv_srq_pingpong between the two
# namespaces, and the SRQ verbs through pyverbs (sizes, resize with WQEs
# posted, the limit event, refused attributes, the last-WQE event of a QP
# in error, destroy while in use). Kernel SRQs: test_kverbs, test_nvme.
. "$(dirname "$0")/lib.sh"
topo_devices_up
run_pair "ibv_srq_pingpong, 16 QPs on one SRQ, 4 KiB, 100 iterations" \
	ibv_srq_pingpong -d rroce-b -g 1 -n 100 -- ibv_srq_pingpong -d rroce-a -g 1 -n 100
run_pair "ibv_srq_pingpong, 4 QPs, 1 MiB messages, 10 iterations" \
	ibv_srq_pingpong -d rroce-b -g 1 -q 4 -s 1048576 -r 16 -n 10 -- \
	ibv_srq_pingpong -d rroce-a -g 1 -q 4 -s 1048576 -r 16 -n 10
run_pair "ibv_srq_pingpong, 1-byte messages, 500 iterations" \
	ibv_srq_pingpong -d rroce-b -g 1 -q 2 -s 1 -n 500 -- ibv_srq_pingpong -d rroce-a -g 1 -q 2 -s 1 -n 500
topo_devices_down

rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
import errno, threading, time
from verbs import Checks, async_event, connect_rc, wait_wcs
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e
c = Checks('test_srq')
ok = c.ok
LW = e.IBV_ACCESS_LOCAL_WRITE
ctx = Context(name='rroce0')
pd = PD(ctx)
gid = ctx.query_gid(1, 1)
dev = ctx.query_device()
ok('the device advertises SRQ resize', dev.device_cap_flags & e.IBV_DEVICE_SRQ_RESIZE != 0)

srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=10, max_sge=2)))
a = srq.query()
ok('an SRQ holds at least the WQEs asked for', a.max_wr >= 10, a.max_wr)
ok('an SRQ keeps the SGEs asked for', a.max_sge == 2, a.max_sge)
ok('a new SRQ has no limit armed', a.srq_limit == 0, a.srq_limit)
c.fails('max_sge above the device limit is refused',
        lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=dev.max_srq_sge + 1))), errno.EINVAL)
c.fails('max_wr above the device limit is refused',
        lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=dev.max_srq_wr + 1, max_sge=1))), errno.EINVAL)
c.fails('arming a limit above the SRQ size is refused',
        lambda: srq.modify(SrqAttr(srq_limit=a.max_wr + 1), e.IBV_SRQ_LIMIT), errno.EINVAL)
c.fails('resizing to 0 WQEs is refused', lambda: srq.modify(SrqAttr(max_wr=0), e.IBV_SRQ_MAX_WR), errno.EINVAL)

# Two RC QPs on one device; the receiver takes its WQEs from the SRQ.
cq = CQ(ctx, 256)
tx = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=64, max_recv_wr=4)))
rx = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq, cap=QPCap(max_send_wr=4, max_recv_wr=0)))
connect_rc(tx, rx.qp_num, gid, LW, psn=7)
connect_rc(rx, tx.qp_num, gid, LW, psn=7)
size = 3000
rmr = MR(pd, 64 * size, LW)
smr = MR(pd, 64 * size, LW)

def post_recvs(ids):
    for i in ids:
        srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(rmr.buf + (i % 64) * size, size, rmr.lkey)]))

def send(ids):
    for i in ids:
        smr.write(bytes([i % 251]) * size, size, (i % 64) * size)
        tx.post_send(SendWR(wr_id=1000 + i, opcode=e.IBV_WR_SEND, num_sge=1,
                            sg=[SGE(smr.buf + (i % 64) * size, size, smr.lkey)], send_flags=e.IBV_SEND_SIGNALED))

# Posted WQEs survive a resize, in order.
post_recvs(range(8))
srq.modify(SrqAttr(max_wr=40), e.IBV_SRQ_MAX_WR)
a = srq.query()
ok('resize grows the SRQ to at least 40 WQEs', a.max_wr >= 40, a.max_wr)
post_recvs(range(8, 20))
send(range(20))
wcs = wait_wcs(cq, 40, 20)
recvs = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
ok('20 SENDs complete through the resized SRQ', len(recvs) == 20 and all(w.status == 0 for w in wcs), [(w.wr_id, w.status) for w in wcs if w.status])
ok('receives complete in posting order across the resize', [w.wr_id for w in recvs] == list(range(20)), [w.wr_id for w in recvs])
ok('receive completions name the receiving QP', all(w.qp_num == rx.qp_num for w in recvs))
good = all(rmr.read(size, (w.wr_id % 64) * size) == bytes([w.wr_id % 251]) * size for w in recvs)
ok('every received byte is the one sent', good)

# The limit event: armed at 5 with 8 posted, it fires once fewer than 5 remain.
post_recvs(range(20, 28))
srq.modify(SrqAttr(srq_limit=5), e.IBV_SRQ_LIMIT)
ok('query reports the armed limit', srq.query().srq_limit == 5, srq.query().srq_limit)
send(range(20, 23))
wait_wcs(cq, 6, 20)
ok('the limit stays armed while 5 WQEs remain', srq.query().srq_limit == 5)
send(range(23, 24))
wait_wcs(cq, 2, 20)
events = []
def read_event():
    ev = ctx.get_async_event()
    ev.ack()
    events.append(ev.event_type)
threading.Thread(target=read_event, daemon=True).start()
end = time.time() + 10
while not events and time.time() < end:
    time.sleep(0.05)
ok('IBV_EVENT_SRQ_LIMIT_REACHED once fewer than 5 remain', events == [e.IBV_EVENT_SRQ_LIMIT_REACHED], events or 'no event')
ok('the limit is disarmed after the event', srq.query().srq_limit == 0, srq.query().srq_limit)
post_recvs(range(28, 44))
# The refused resize lets go of the ring it made with the SRQ's lock held
# (softirqs off): the removal of its mmap entry, which sleeps, must wait
# for process context (the debug kernel reports a sleep in atomic context).
c.fails('shrinking below the 20 posted WQEs is refused', lambda: srq.modify(SrqAttr(max_wr=8), e.IBV_SRQ_MAX_WR), errno.EINVAL)
ok('a refused resize leaves the SRQ as it was', srq.query().max_wr >= 40, srq.query().max_wr)
send(range(24, 44))
recvs = [w for w in wait_wcs(cq, 40, 20) if w.opcode == e.IBV_WC_RECV]
ok('the 20 WQEs posted before the refused resize all complete', [w.wr_id for w in recvs] == list(range(24, 44)), [w.wr_id for w in recvs])

# The error state: a QP on the SRQ reports its last WQE (consumers wait for
# this before reclaiming what the QP took), once; the SRQ keeps its WQEs,
# which a new QP then receives into.
post_recvs(range(44, 48))
rx.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
ev = async_event(ctx)
ok('a QP on an SRQ moved to ERR raises IBV_EVENT_QP_LAST_WQE_REACHED', ev == e.IBV_EVENT_QP_LAST_WQE_REACHED,
   'no event' if ev is None else ev)
flushed = wait_wcs(cq, 1, 1)
ok('the SRQ\'s WQEs are not flushed with the QP', flushed == [], [(w.wr_id, w.status) for w in flushed])
rx2 = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq, cap=QPCap(max_send_wr=4, max_recv_wr=0)))
tx2 = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=64, max_recv_wr=4)))
connect_rc(tx2, rx2.qp_num, gid, LW, psn=7)
connect_rc(rx2, tx2.qp_num, gid, LW, psn=7)
tx = tx2
send(range(44, 48))
recvs = [w for w in wait_wcs(cq, 8, 20) if w.opcode == e.IBV_WC_RECV]
ok('a new QP on the SRQ receives into the WQEs the failed one left', [w.wr_id for w in recvs] == list(range(44, 48)),
   [w.wr_id for w in recvs])
ev = async_event(ctx, 1)
ok('and no second event came', ev is None, ev)
for q in (tx2, rx2, rx):
    q.close()
srq.close()
PY
rdma link delete rroce0
finish
