#!/bin/bash
# RC atomics between two rroce devices through unmodified rdma-core:
# compare-and-swap and fetch-and-add return the value found into the local
# buffer and complete with their own opcodes; they are atomic across QPs
# (concurrent FETCH_ADDs from several QPs to one address lose no update),
# take their place among READs and WRITEs in order, and fail with the
# specified statuses on a region or key without the right. perftest's
# ib_atomic_bw runs both operations. (Responder checks from the wire,
# duplicates included, are in test_wire_hostile.)
. "$(dirname "$0")/lib.sh"
topo_devices_up
py_checks <<'PY'
import struct
from verbs import Checks, connect_rc, open_devices, wait_wcs
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
ok = Checks('test_atomic').ok
LW, RW, RR, RA = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_ATOMIC
ALL = LW | RW | RR | RA

side = open_devices()
ctx_a, pd_a = side['rroce-a'][:2]
pd_b = side['rroce-b'][1]

cap = ctx_a.query_device().atomic_caps
ok('the device advertises atomics (atomic_cap not ATOMIC_NONE)', cap != e.IBV_ATOMIC_NONE, cap)

def pair(access=ALL, rd_atomic=4, depth=64):
    qps = {}
    for name, (ctx, pd, idx, gid) in side.items():
        cq = CQ(ctx, 2 * depth)
        qps[name] = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                       cap=QPCap(max_send_wr=depth, max_recv_wr=4))), cq)
    for me, peer in (('rroce-a', 'rroce-b'), ('rroce-b', 'rroce-a')):
        connect_rc(qps[me][0], qps[peer][0].qp_num, side[peer][3], access, sgid_index=side[me][2],
                   timeout=16, rd_atomic=rd_atomic)
    return qps['rroce-a'], qps['rroce-b']

def atomic_wr(wr_id, op, local, off, remote, roff, compare_add, swap=0, lkey=None, rkey=None, flags=e.IBV_SEND_SIGNALED):
    w = SendWR(wr_id=wr_id, opcode=op, num_sge=1, sg=[SGE(local.buf + off, 8, local.lkey if lkey is None else lkey)],
               send_flags=flags)
    w.set_wr_atomic(remote.rkey if rkey is None else rkey, remote.buf + roff, compare_add, swap)
    return w

u64 = lambda mr, off: struct.unpack('=Q', mr.read(8, off))[0]
local = MR(pd_a, 4096, LW)
remote = MR(pd_b, 4096, ALL)
remote.write(struct.pack('=Q', 5) + bytes(4088), 4096)
(qa, cqa), (qb, cqb) = pair()

# 1. Each operation: the value found comes back, memory changes as specified.
cases = (
    ('COMPARE_SWAP that matches', e.IBV_WR_ATOMIC_CMP_AND_SWP, 5, 9, e.IBV_WC_COMP_SWAP, 5, 9),
    ('COMPARE_SWAP that does not match', e.IBV_WR_ATOMIC_CMP_AND_SWP, 1, 7, e.IBV_WC_COMP_SWAP, 9, 9),
    ('FETCH_ADD', e.IBV_WR_ATOMIC_FETCH_AND_ADD, 3, 0, e.IBV_WC_FETCH_ADD, 9, 12),
    ('FETCH_ADD that wraps around', e.IBV_WR_ATOMIC_FETCH_AND_ADD, 2**64 - 10, 0, e.IBV_WC_FETCH_ADD, 12, 2),
)
for i, (what, op, ca, sw, wc_op, found, after) in enumerate(cases):
    local.write(b'\xee' * 8, 8)
    qa.post_send(atomic_wr(10 + i, op, local, 0, remote, 0, ca, sw))
    wcs = wait_wcs(cqa, 1)
    got = [(w.wr_id, w.status, w.opcode, w.byte_len) for w in wcs]
    ok(f'{what}: completes with its opcode and byte_len 8', got == [(10 + i, e.IBV_WC_SUCCESS, wc_op, 8)], got)
    ok(f'{what}: the value found ({found}) is in the local buffer, memory holds {after}',
       (u64(local, 0), u64(remote, 0)) == (found, after), (u64(local, 0), u64(remote, 0)))

# 2. In order among READs and WRITEs: WRITE 100, FETCH_ADD 1, READ, then
#    COMPARE_SWAP 101 -> 7 with a fence (IBTA lets the responder execute a
#    later request before it reads a READ's data; the fence keeps the
#    COMPARE_SWAP back until the READ completed).
local.write(struct.pack('=Q', 100), 8)
w = SendWR(wr_id=20, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(local.buf, 8, local.lkey)])
w.set_wr_rdma(remote.rkey, remote.buf + 64)
qa.post_send(w)
qa.post_send(atomic_wr(21, e.IBV_WR_ATOMIC_FETCH_AND_ADD, local, 8, remote, 64, 1))
r = SendWR(wr_id=22, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(local.buf + 16, 8, local.lkey)])
r.set_wr_rdma(remote.rkey, remote.buf + 64)
qa.post_send(r)
qa.post_send(atomic_wr(23, e.IBV_WR_ATOMIC_CMP_AND_SWP, local, 24, remote, 64, 101, 7,
                       flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_FENCE))
wcs = wait_wcs(cqa, 4)
ok('WRITE, FETCH_ADD, READ, fenced COMPARE_SWAP: all complete, in order',
   [(w.wr_id, w.status) for w in wcs] == [(i, e.IBV_WC_SUCCESS) for i in (20, 21, 22, 23)],
   [(w.wr_id, w.status) for w in wcs])
ok('each saw the one before it (found 100, read 101, found 101; memory 7)',
   (u64(local, 8), u64(local, 16), u64(local, 24), u64(remote, 64)) == (100, 101, 101, 7),
   (u64(local, 8), u64(local, 16), u64(local, 24), u64(remote, 64)))

# 3. Atomic across QPs: four QPs each add 1 to one counter 64 times, several
#    in flight at once. No update is lost and every FETCH_ADD saw its own value.
pairs = [pair() for _ in range(4)]
results = MR(pd_a, 4 * 64 * 8, LW)
PER = 64
for k, ((q, c), _) in enumerate(pairs):
    for j in range(PER):
        q.post_send(atomic_wr(j, e.IBV_WR_ATOMIC_FETCH_AND_ADD, results, (k * PER + j) * 8, remote, 128, 1))
done = [wait_wcs(c, PER, 60) for (q, c), _ in pairs]
good = all(len(d) == PER and all(w.status == e.IBV_WC_SUCCESS for w in d) for d in done)
seen = sorted(struct.unpack(f'={4 * PER}Q', results.read(4 * PER * 8, 0)))
start = seen[0] if seen else 0
ok(f'4 QPs x {PER} concurrent FETCH_ADDs of 1 all complete', good, [len(d) for d in done])
ok('no update is lost: the counter grew by 256', u64(remote, 128) - start == 4 * PER, u64(remote, 128) - start)
ok('every FETCH_ADD saw a different value (256 consecutive ones)', seen == list(range(start, start + 4 * PER)),
   seen[:8])

# 3b. The same from two processes pinned to different CPUs, so the requesters,
#     the softirqs and the receive lanes (and with them the responder's
#     atomics) run on both CPUs at once.
import json, os, subprocess, sys
WORKER = r"""
import json, struct, sys
from verbs import connect_rc, open_devices, wait_wcs
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
peer_qpn, rkey, addr, n = (int(x) for x in sys.argv[1:5])
ctx, pd, gid_index, _ = open_devices(('rroce-a',))['rroce-a']
cq = CQ(ctx, 64)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=32, max_recv_wr=1)))
print(qp.qp_num, flush=True)
from pyverbs.addr import GID
dgid = GID(sys.stdin.readline().strip())
connect_rc(qp, peer_qpn, dgid, e.IBV_ACCESS_LOCAL_WRITE, sgid_index=gid_index, timeout=16, rd_atomic=16)
sys.stdin.readline()
res = MR(pd, 8 * n, e.IBV_ACCESS_LOCAL_WRITE)
posted = done = 0
bad = []
while done < n:
    while posted < n and posted - done < 16:
        w = SendWR(wr_id=posted, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1, sg=[SGE(res.buf + 8 * posted, 8, res.lkey)])
        w.set_wr_atomic(rkey, addr, 1, 0)
        qp.post_send(w)
        posted += 1
    got = wait_wcs(cq, 1, 30)
    if not got:
        break
    bad += [x.status for x in got if x.status != e.IBV_WC_SUCCESS]
    done += len(got)
print(json.dumps({'done': done, 'bad': bad, 'found': list(struct.unpack(f'={n}Q', res.read(8 * n, 0)))}), flush=True)
"""
N2 = 200
cpus = sorted(os.sched_getaffinity(0))[:2]
ctx_b = side['rroce-b'][0]
remote.write(struct.pack('=Q', 1000), 8, 512)
workers = []
for cpu in cpus:
    cq = CQ(ctx_b, 4)
    qb = QP(pd_b, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=1, max_recv_wr=1)))
    w = subprocess.Popen(['taskset', '-c', str(cpu), sys.executable, '-c', WORKER, str(qb.qp_num), str(remote.rkey), str(remote.buf + 512), str(N2)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    qpn_a = int(w.stdout.readline())
    connect_rc(qb, qpn_a, side['rroce-a'][3], ALL, sgid_index=side['rroce-b'][2], timeout=16, rd_atomic=16)
    w.stdin.write(str(side['rroce-b'][3]) + '\n')
    w.stdin.flush()
    workers.append((w, qb, cq))
for w, _, _ in workers:
    w.stdin.write('go\n')
    w.stdin.flush()
outs = []
for w, _, _ in workers:
    try:
        out, _ = w.communicate(timeout=300)
        outs.append(json.loads(out.strip().splitlines()[-1]))
    except Exception as ex:
        w.kill()
        outs.append({'done': 0, 'bad': [repr(ex)], 'found': []})
found = sorted(v for o in outs for v in o['found'])
total = N2 * len(workers)
ok(f'{len(workers)} processes on CPUs {cpus}, {N2} FETCH_ADDs each to one address: all complete',
   all(o['done'] == N2 and not o['bad'] for o in outs), [(o['done'], o['bad'][:3]) for o in outs])
ok(f'no update lost across CPUs: the counter went from 1000 to {1000 + total}', u64(remote, 512) == 1000 + total,
   u64(remote, 512))
ok('every one of them found a different value', found == list(range(1000, 1000 + total)), found[:6])

# 4. The errors: the responder refuses, memory is unchanged, the QP ends in error.
plain = MR(pd_b, 4096, LW | RW | RR)
for what, target, roff, rkey, want in (
        ('a region registered without remote atomic access', plain, 0, None, e.IBV_WC_REM_ACCESS_ERR),
        ('an address beyond the region', remote, 4096, None, e.IBV_WC_REM_ACCESS_ERR),
        ('a wrong R_Key', remote, 0, remote.rkey ^ 0x80, e.IBV_WC_REM_ACCESS_ERR)):
    (q, c), _ = pair()
    before = target.read(4096, 0)
    q.post_send(atomic_wr(30, e.IBV_WR_ATOMIC_FETCH_AND_ADD, local, 0, target, roff, 1, rkey=rkey))
    wcs = wait_wcs(c, 1, 20)
    ok(f'FETCH_ADD to {what}: IBV_WC_REM_ACCESS_ERR and memory unchanged',
       [w.status for w in wcs] == [want] and target.read(4096, 0) == before, [w.status for w in wcs])
# An atomic, then a WRITE the responder refuses: the atomic was executed, so
# it completes with the value found; only the WRITE fails.
(q, c), _ = pair()
remote.write(struct.pack('=Q', 40), 8, 256)
q.post_send(atomic_wr(33, e.IBV_WR_ATOMIC_FETCH_AND_ADD, local, 40, remote, 256, 2))
w = SendWR(wr_id=34, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(local.buf, 8, local.lkey)])
w.set_wr_rdma(remote.rkey ^ 0x80, remote.buf)
q.post_send(w)
wcs = wait_wcs(c, 2, 20)
got = [(w.wr_id, w.status) for w in wcs]
ok('FETCH_ADD then a WRITE with a wrong R_Key: the FETCH_ADD succeeds, the WRITE gets IBV_WC_REM_ACCESS_ERR',
   got == [(33, e.IBV_WC_SUCCESS), (34, e.IBV_WC_REM_ACCESS_ERR)], got)
ok('the FETCH_ADD returned what it found (40) and added (42)', (u64(local, 40), u64(remote, 256)) == (40, 42),
   (u64(local, 40), u64(remote, 256)))
(q, c), _ = pair(access=LW | RW | RR)
q.post_send(atomic_wr(31, e.IBV_WR_ATOMIC_FETCH_AND_ADD, local, 0, remote, 0, 1))
wcs = wait_wcs(c, 1, 20)
ok('FETCH_ADD to a QP without remote atomic access: IBV_WC_REM_ACCESS_ERR',
   [w.status for w in wcs] == [e.IBV_WC_REM_ACCESS_ERR], [w.status for w in wcs])
(q, c), _ = pair()
q.post_send(atomic_wr(32, e.IBV_WR_ATOMIC_FETCH_AND_ADD, local, 0, remote, 0, 1, lkey=local.lkey ^ 0x5a))
wcs = wait_wcs(c, 1, 20)
ok('a local buffer with a wrong L_Key: IBV_WC_LOC_PROT_ERR', [w.status for w in wcs] == [e.IBV_WC_LOC_PROT_ERR],
   [w.status for w in wcs])
PY
for op in FETCH_AND_ADD CMP_AND_SWAP; do
	run_pair "ib_atomic_bw -A $op x 500" \
		ib_atomic_bw -d rroce-b -x "$(gid_of rroce-b veth-b)" -F -A $op -n 500 -- \
		ib_atomic_bw -d rroce-a -x "$(gid_of rroce-a veth-a)" -F -A $op -n 500
done
topo_devices_down
finish
