#!/bin/bash
# Per-QP counters (`rdma statistic qp`): QPs bound to counter objects by hand
# (bind/unbind) and in auto mode; a counter shows what its QPs counted while
# bound, and only theirs (RNR NAKs on one pair of QPs, none on the other);
# the port's counters stay the true totals (nothing counted twice).
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
import json, subprocess
from verbs import Checks, connect_rc, wait_wcs
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
ok = Checks('test_qp_counters').ok
LW, RW = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE
LINK = 'rroce0/1'
PER_QP = {'completer_retry_err', 'retry_exceeded_err', 'rcvd_rnr_err', 'send_rnr_err', 'retry_rnr_exceeded_err',
          'rcvd_seq_err', 'out_of_seq_request', 'duplicate_request', 'np_ecn_marked_roce_packets', 'np_cnp_sent',
          'rp_cnp_handled', 'rp_cnp_ignored', 'tx_local_drop', 'rcvd_no_wqe', 'rcvd_qkey_err',
          'resp_remote_access_errors', 'resp_invalid_request', 'resp_remote_operational_errors'}

def rdma(*args):
    r = subprocess.run(['rdma'] + list(args), capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()

def counters():
    """The counter objects of the port: {cntn: {'qps': [...], name: value}}."""
    rc, out = rdma('-j', 'statistic', 'qp', 'show', 'link', LINK)
    if rc != 0:
        raise RuntimeError(f'rdma statistic qp show: {out}')
    cs = {}
    for o in json.loads(out or '[]'):
        for k, v in list(o.items()):
            if isinstance(v, dict):
                o.update(v)
        qps = o.get('lqpn', [])
        qps = [qps] if isinstance(qps, int) else qps
        vals = {k: v for k, v in o.items() if isinstance(v, int) and k not in
                ('ifindex', 'port', 'cntn', 'pid', 'lqpn')}
        cs[o['cntn']] = {'qps': [int(q) for q in qps], **vals}
    return cs

def counter_of(qpn):
    return next(((n, c) for n, c in counters().items() if qpn in c['qps']), (None, None))

def port(name):
    return int(open(f'/sys/class/infiniband/rroce0/ports/1/hw_counters/{name}').read())

ctx = Context(name='rroce0')
pd = PD(ctx)
gid = ctx.query_gid(1, 1)
mr = MR(pd, 8192, LW | RW)
cq = CQ(ctx, 64)

def pair(**kw):
    a, b = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
            for _ in range(2))
    for me, peer in ((a, b), (b, a)):
        connect_rc(me, peer.qp_num, gid, LW | RW, **kw)
    return a, b

def send_rnr(q):
    """A SEND to a peer without a receive posted: RNR NAKs until rnr_retry runs out."""
    q.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
    return [w.status for w in wait_wcs(cq, 1)]

def writes(q, n):
    for i in range(n):
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
        wr.set_wr_rdma(mr.rkey, mr.buf + 4096)
        q.post_send(wr)
    return [w.status for w in wait_wcs(cq, n)]

port0 = {n: port(n) for n in ('rcvd_rnr_err', 'send_rnr_err', 'retry_rnr_exceeded_err')}

# By hand: each QP of two pairs bound to a counter of its own.
a1, b1 = pair(rnr_retry=2)
a2, b2 = pair()
binds = [rdma('statistic', 'qp', 'bind', 'link', LINK, 'lqpn', str(q.qp_num)) for q in (a1, b1, a2, b2)]
ok('rdma statistic qp bind: each QP to a new counter', all(rc == 0 for rc, _ in binds), binds)
cs = counters()
print(f'# {json.dumps(cs)}')
cn = {q.qp_num: counter_of(q.qp_num)[0] for q in (a1, b1, a2, b2)}
ok('the four QPs are in four counters', None not in cn.values() and len(set(cn.values())) == 4, cn)
shown = set(next(iter(cs.values()), {})) - {'qps'}
ok('a counter shows the per-QP counters only', shown == PER_QP, sorted(shown ^ PER_QP))

# RNR on the first pair (rnr_retry 2: three RNR NAKs), WRITEs on the second.
ok('the SEND without a receive ends in IBV_WC_RNR_RETRY_EXC_ERR', send_rnr(a1) == [e.IBV_WC_RNR_RETRY_EXC_ERR])
ok('the WRITEs of the other pair succeed', writes(a2, 4) == [e.IBV_WC_SUCCESS] * 4)
cs = counters()
print(f'# {json.dumps(cs)}')
c = {q: cs.get(cn[q.qp_num], {}) for q in (a1, b1, a2, b2)}
ok('the requester\'s counter: rcvd_rnr_err 3, retry_rnr_exceeded_err 1',
   (c[a1].get('rcvd_rnr_err'), c[a1].get('retry_rnr_exceeded_err')) == (3, 1), c[a1])
ok('the responder\'s counter: send_rnr_err 3', c[b1].get('send_rnr_err') == 3, c[b1])
ok('the other pair\'s counters stay 0', all(v == 0 for q in (a2, b2) for k, v in c[q].items() if k != 'qps'),
   (c[a2], c[b2]))
ok('nothing else counted for the RNR pair',
   all(v == 0 for q, keep in ((a1, ('rcvd_rnr_err', 'retry_rnr_exceeded_err')), (b1, ('send_rnr_err',)))
       for k, v in c[q].items() if k not in keep + ('qps',)), (c[a1], c[b1]))
delta = {n: port(n) - v for n, v in port0.items()}
ok('the port counted each RNR NAK once (3 sent, 3 received, 1 exceeded)',
   delta == {'rcvd_rnr_err': 3, 'send_rnr_err': 3, 'retry_rnr_exceeded_err': 1}, delta)
rc, out = rdma('statistic', 'show', 'link', LINK)
ok('rdma statistic show link agrees', rc == 0 and f'rcvd_rnr_err {port0["rcvd_rnr_err"] + 3}' in out, out)

# Unbind: the QP leaves its counter (which goes away with its last QP).
rc, out = rdma('statistic', 'qp', 'unbind', 'link', LINK, 'cntn', str(cn[a1.qp_num]), 'lqpn', str(a1.qp_num))
ok('rdma statistic qp unbind', rc == 0, out)
ok('the QP is in no counter now, and its counter is gone',
   counter_of(a1.qp_num) == (None, None) and cn[a1.qp_num] not in counters(), counters())
ok('the port still counts each RNR NAK once', port('rcvd_rnr_err') - port0['rcvd_rnr_err'] == 3,
   port('rcvd_rnr_err') - port0['rcvd_rnr_err'])
# Bound to an existing counter, a QP adds only what it counts from then on.
rc, out = rdma('statistic', 'qp', 'bind', 'link', LINK, 'lqpn', str(a1.qp_num), 'cntn', str(cn[b1.qp_num]))
ok('rdma statistic qp bind ... cntn: to the counter of another QP', rc == 0, out)
n, cb = counter_of(a1.qp_num)
ok('that counter has both QPs and shows send_rnr_err 3, rcvd_rnr_err 0',
   n == cn[b1.qp_num] and sorted(cb['qps']) == sorted([a1.qp_num, b1.qp_num])
   and (cb.get('send_rnr_err'), cb.get('rcvd_rnr_err')) == (3, 0), cb)
for q in (a1, b1, a2, b2):
    n, _ = counter_of(q.qp_num)
    rdma('statistic', 'qp', 'unbind', 'link', LINK, 'cntn', str(n), 'lqpn', str(q.qp_num))
ok('all unbound: no counter left', counters() == {}, counters())

# Auto mode: every new QP of a type is bound to that type's counter.
rc, out = rdma('statistic', 'qp', 'set', 'link', LINK, 'auto', 'type', 'on')
ok('rdma statistic qp set ... auto type on', rc == 0, out)
rc, out = rdma('statistic', 'qp', 'mode', 'link', LINK)
ok('the port is in auto mode', rc == 0 and 'auto' in out, out)
a3, b3 = pair(rnr_retry=1)
n3, c3 = counter_of(a3.qp_num)
ok('the new QPs were bound to one counter', n3 is not None and sorted(c3['qps']) == sorted([a3.qp_num, b3.qp_num]), c3)
ok('the QPs created before are not', all(counter_of(q.qp_num) == (None, None) for q in (a1, b1, a2, b2)))
ok('RNR on the new pair', send_rnr(a3) == [e.IBV_WC_RNR_RETRY_EXC_ERR])
c3 = counters().get(n3, {})
ok('their counter: rcvd_rnr_err 2, send_rnr_err 2', (c3.get('rcvd_rnr_err'), c3.get('send_rnr_err')) == (2, 2), c3)
for q in (a3, b3):
    q.close()
ok('destroying its QPs took the counter away', counters() == {}, counters())
delta = {n: port(n) - v for n, v in port0.items()}
ok('the port counted every RNR NAK once (5 sent, 5 received, 2 exceeded)',
   delta == {'rcvd_rnr_err': 5, 'send_rnr_err': 5, 'retry_rnr_exceeded_err': 2}, delta)
rc, out = rdma('statistic', 'qp', 'set', 'link', LINK, 'auto', 'off')
ok('auto off', rc == 0, out)
PY
rdma link delete rroce0
finish
