#!/bin/bash
# The driver's details in `rdma res show qp|cq|mr -dd` and its JSON, while a
# pair of connected QPs exists: PSNs, READ/atomic slots, retries left,
# DCQCN, priority and DSCP, the queue that runs a QP's work; a CQ's depth
# and fill; an MR's memory (pinned or on demand) and pages mapped.
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
import ctypes, json, os, subprocess, time
from verbs import Checks, connect_rc, wait_wcs
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
c = Checks('test_res')
ok = c.ok
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
PAGE = 4096

def res(kind):
    """This process's objects of `kind` in rdma res, with driver details."""
    where = ['link', 'rroce0/1'] if kind == 'qp' else ['dev', 'rroce0']
    r = subprocess.run(['rdma', '-j', '-dd', 'res', 'show', kind] + where, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f'rdma res show {kind}: {r.stderr.strip()}')
    # JSON names the driver's attributes drv_<name>.
    objs = [{k.removeprefix('drv_'): v for k, v in o.items()} for o in json.loads(r.stdout or '[]')]
    return [o for o in objs if o.get('pid') == os.getpid()]

def num(v):
    """A driver value (hex ones may come as strings)."""
    return int(v, 16) if isinstance(v, str) and v.startswith('0x') else v

ctx = Context(name='rroce0')
gid = ctx.query_gid(1, 1)
odp_ok = bool(ctx.query_device_ex().odp_caps.general_caps & e.IBV_ODP_SUPPORT)

# Two QPs of a PD without on-demand memory, one WRITE-ing to the other.
pd = PD(ctx)
scq, rcq = CQ(ctx, 100), CQ(ctx, 16)
mr = MR(pd, 4 * PAGE, LW | RW | RR)
cap = QPCap(max_send_wr=16, max_recv_wr=4)
qa, qb = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=scq, rcq=rcq, cap=cap)) for _ in range(2))
PSN = 0x100
for me, peer in ((qa, qb), (qb, qa)):
    connect_rc(me, peer.qp_num, gid, LW | RW | RR, psn=PSN, retry_cnt=5, rnr_retry=6, rd_atomic=8)
N = 5
for i in range(N):
    wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
    wr.set_wr_rdma(mr.rkey, mr.buf + 2 * PAGE)
    qa.post_send(wr)
# Left unpolled: the CQ shows them as its fill. Waits for the ACKs of all.
end = time.time() + 10
while time.time() < end:
    q = {o['lqpn']: o for o in res('qp')}
    if num(q.get(qa.qp_num, {}).get('sq_acked_psn', -1)) == PSN + N - 1:
        break
    time.sleep(0.1)

qps = {o['lqpn']: o for o in res('qp')}
a, b = qps.get(qa.qp_num, {}), qps.get(qb.qp_num, {})
print(f'# qp {qa.qp_num}: ' + json.dumps(a))
want = {'sq_next_psn', 'sq_acked_psn', 'rq_epsn', 'rd_atomic_out', 'rd_atomic_max', 'dest_rd_atomic_used',
        'dest_rd_atomic_max', 'retry_left', 'rnr_retry_left', 'dcqcn', 'prio', 'dscp', 'pfc', 'work_queue'}
ok('rdma res show qp -dd -j has the driver details of an RC QP', want <= set(a), sorted(want - set(a)))
ok(f'the requester sends PSN {PSN + N:#x} next after {N} WRITEs from {PSN:#x}', num(a.get('sq_next_psn')) == PSN + N,
   a.get('sq_next_psn'))
ok('the requester has every WRITE acknowledged', num(a.get('sq_acked_psn')) == PSN + N - 1, a.get('sq_acked_psn'))
ok(f'the responder expects PSN {PSN + N:#x} next', num(b.get('rq_epsn')) == PSN + N, b.get('rq_epsn'))
ok('the responder of the sending QP expects its first PSN still', num(a.get('rq_epsn')) == PSN, a.get('rq_epsn'))
ok('no READ or atomic outstanding, 8 allowed', (a.get('rd_atomic_out'), a.get('rd_atomic_max')) == (0, 8),
   (a.get('rd_atomic_out'), a.get('rd_atomic_max')))
ok('the responder answers none of 8', (b.get('dest_rd_atomic_used'), b.get('dest_rd_atomic_max')) == (0, 8),
   (b.get('dest_rd_atomic_used'), b.get('dest_rd_atomic_max')))
ok('retries left are the retry_cnt and rnr_retry set (5, 6)', (a.get('retry_left'), a.get('rnr_retry_left')) == (5, 6),
   (a.get('retry_left'), a.get('rnr_retry_left')))
ok('DCQCN does not limit a QP that got no CNP', a.get('dcqcn') == 'unlimited' and 'dcqcn_rate_kbps' not in a,
   a.get('dcqcn'))
ok('priority 0-7, DSCP 0-63, PFC 0/1 (default QoS: 0, 0, 0)', (a.get('prio'), a.get('dscp'), a.get('pfc')) == (0, 0, 0),
   (a.get('prio'), a.get('dscp'), a.get('pfc')))
ok("a QP without on-demand memory runs on the module's queue", a.get('work_queue') == 'module', a.get('work_queue'))
gsi = subprocess.run(['rdma', '-j', '-dd', 'res', 'show', 'qp', 'link', 'rroce0/1', 'lqpn', '1'],
                     capture_output=True, text=True).stdout
g = {k.removeprefix('drv_'): v for k, v in (json.loads(gsi or '[]') or [{}])[0].items()}
ok('the GSI QP (a datagram QP of the kernel) shows its queue, no PSNs', g.get('work_queue') == 'module'
   and 'sq_next_psn' not in g, g)

cqs = [o for o in res('cq') if o.get('cqe') == scq.cqe]
cq = cqs[0] if cqs else {}
print('# cq: ' + json.dumps(cq))
ok(f'rdma res show cq -dd -j: depth {scq.cqe}, fill {N} (the unpolled completions)',
   (cq.get('depth'), cq.get('fill'), cq.get('ring')) == (scq.cqe, N, 'user'), cq)
ok('the CQ empties as it is polled', len(wait_wcs(scq, N)) == N and
   [o.get('fill') for o in res('cq') if o.get('cqe') == scq.cqe] == [0])

mrs = {o.get('mrlen'): o for o in res('mr')}
m = mrs.get(4 * PAGE, {})
print('# mr: ' + json.dumps(m))
ok('rdma res show mr -dd -j: a pinned MR of 4 pages has them all mapped',
   m.get('mem') == 'pinned' and m.get('pages_mapped') in (4, 5), m)

if not odp_ok:
    c.skip('an ODP MR shows its pages as they are faulted in', 'the device offers no ODP')
else:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    addr = libc.mmap(None, 8 * PAGE, 3, 0x22, -1, 0)
    pd2 = PD(ctx)
    src = MR(pd2, PAGE, LW)
    odp = MR(pd2, 8 * PAGE, LW | RW | e.IBV_ACCESS_ON_DEMAND, address=addr)
    m = {o.get('mrlen'): o for o in res('mr')}.get(8 * PAGE, {})
    ok('an ODP MR of 8 untouched pages has none mapped', (m.get('mem'), m.get('pages_mapped')) == ('odp', 0), m)
    qc, qd = (QP(pd2, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=rcq, rcq=rcq, cap=cap)) for _ in range(2))
    for me, peer in ((qc, qd), (qd, qc)):
        connect_rc(me, peer.qp_num, gid, LW | RW)
    for page in (1, 5):
        wr = SendWR(wr_id=page, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, 8, src.lkey)])
        wr.set_wr_rdma(odp.rkey, addr + page * PAGE)
        qc.post_send(wr)
    wcs = wait_wcs(rcq, 2)
    m = {o.get('mrlen'): o for o in res('mr')}.get(8 * PAGE, {})
    print('# odp mr: ' + json.dumps(m))
    ok('after WRITEs into 2 of its pages, the ODP MR has those 2 mapped',
       len(wcs) == 2 and all(w.status == 0 for w in wcs) and m.get('pages_mapped') == 2, (len(wcs), m))
    d = {o['lqpn']: o for o in res('qp')}.get(qc.qp_num, {})
    ok("a QP of a PD with on-demand memory runs on the PD's queue", d.get('work_queue') == 'pd', d.get('work_queue'))
    for o in (qc, qd, odp, src, pd2):
        o.close()
for o in (qa, qb, mr, scq, rcq, pd):
    o.close()
ctx.close()
PY
rdma link delete rroce0
check "no user QP left in rdma res" bash -c '[ "$(rdma res show qp | grep lqpn | grep -c " pid ")" = 0 ]'
finish
