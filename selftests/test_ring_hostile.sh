#!/bin/bash
# A hostile process rewrites its mapped send, receive, SRQ and CQ rings
# (ring_writer.py) as user nobody while a healthy pair of QPs in another
# process moves data with a byte-for-byte check. Afterwards: no kernel
# report, the healthy pair never failed, nothing leaked, the module unloads.
#
# The short run here mutates for a minute (about 27,000 mutations on the
# test kernel under TCG, 3,000 on the debug kernel). The long run is
# 10^5 mutations (about 4 minutes under TCG at 460 mutations/s); run it
# directly, as run-all.sh stops a test after 900 s:
#   scripts/vm run --no-build --timeout 3600 -- env RING_MUTATIONS=100000 \
#     RING_SECONDS=3000 bash /rroce/selftests/test_ring_hostile.sh
# RING_SEED=N replays the mutation sequence of a run (kernel timing aside);
# ring_writer.py --trace prints each mutation before it is applied.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$HERE PYTHONDONTWRITEBYTECODE=1 DEV=rroce0
SECONDS_BUDGET=${RING_SECONDS:-60}
MUTATIONS=${RING_MUTATIONS:-100000}
info "this run: up to $MUTATIONS mutations in ${SECONDS_BUDGET} s; the long run is 10^5 mutations (RING_MUTATIONS=100000 RING_SECONDS=3000, see the script's header)"

modprobe rroce
# A raw uverbs client needs ib_uverbs loaded (libibverbs gets it loaded itself).
modprobe ib_uverbs
rdma link add $DEV type rroce netdev eth0
wait_for 30 bash -c "grep -qx $DEV /sys/class/infiniband_verbs/uverbs*/ibdev"
# The kernel log as it comes: the driver's rate-limited messages may rotate
# the ring buffer before anyone reads it.
dmesg --follow-new >/tmp/ring-dmesg.log 2>/dev/null &
dmesg_pid=$!

# The healthy pair: RDMA WRITEs and SENDs of random sizes and bytes, each
# checked, until the stop file appears (bounded by time and count).
stop=/tmp/ring-hostile.stop
rm -f $stop
python3 - $stop $((SECONDS_BUDGET + 240)) >/tmp/ring-healthy.log 2>&1 <<'PY' &
import os, random, sys, time
from verbs import connect_rc, wait_wcs
import uverbs_raw as u
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e
stop, budget = sys.argv[1], float(sys.argv[2])
dev = os.environ['DEV']
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
sgid, _ = u.gid_of(dev)
ctx = Context(name=dev)
pd = PD(ctx)
gid = ctx.query_gid(1, sgid)
cq = CQ(ctx, 64)
a, b = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=8, max_recv_wr=8))) for _ in range(2)]
for me, peer in ((a, b), (b, a)):
    connect_rc(me, peer.qp_num, gid, LW | RW | RR, sgid_index=sgid)
print(f'healthy pair: QPs {a.qp_num:#x} {b.qp_num:#x}', flush=True)
BIG = 1 << 16
src, dst = MR(pd, BIG, LW), MR(pd, BIG, LW | RW)
rng = random.Random(os.getpid())
end, n, bad = time.time() + budget, 0, 0
while time.time() < end and not os.path.exists(stop) and n < 1000000:
    size = rng.randint(1, BIG)
    data = rng.randbytes(size)
    src.write(data, size)
    if n % 2:
        b.post_recv(RecvWR(wr_id=n, num_sge=1, sg=[SGE(dst.buf, BIG, dst.lkey)]))
        a.post_send(SendWR(wr_id=n, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, size, src.lkey)]))
        want = 2
    else:
        wr = SendWR(wr_id=n, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, size, src.lkey)])
        wr.set_wr_rdma(dst.rkey, dst.buf)
        a.post_send(wr)
        want = 1
    w = wait_wcs(cq, want, 60)
    if [x.status for x in w] != [e.IBV_WC_SUCCESS] * want or dst.read(size, 0) != data:
        print(f'healthy pair: transfer {n} of {size} bytes failed: {[(x.wr_id, x.status) for x in w]}', flush=True)
        bad += 1
        break
    n += 1
print(f'healthy pair: {n} transfers checked byte for byte, {bad} failed', flush=True)
sys.exit(1 if bad or n == 0 else 0)
PY
healthy=$!

seed_arg=()
[ -n "${RING_SEED:-}" ] && seed_arg=(--seed "$RING_SEED")
# The writer bounds itself; the outer timeout catches a hung verb. Its
# output goes to the console as it comes, so a guest that dies still shows
# the seed and how far the run got.
timeout $((SECONDS_BUDGET + 180)) setpriv --reuid=nobody --regid=nogroup --clear-groups \
	python3 -u "$HERE/ring_writer.py" --dev $DEV --mutations "$MUTATIONS" --seconds "$SECONDS_BUDGET" "${seed_arg[@]}" \
	2>&1 | tee /tmp/ring-writer.log | sed -u 's/^/# /'
rc=${PIPESTATUS[0]}
case $rc in
0) pass "the ring writer ran its mutations with no anomaly" ;;
124) fail "the ring writer hung (killed after $((SECONDS_BUDGET + 180)) s)" ;;
1) fail "the ring writer saw anomalies" ;;
*) fail "the ring writer failed (exit $rc)" ;;
esac
grep -q 'mutations in' /tmp/ring-writer.log && info "mutation rate: $(grep -o '([0-9.]*/s)' /tmp/ring-writer.log)"
info "memory windows bound by the writer's hostile BIND_MWs: $(cnt $DEV mw_bind)"

touch $stop
wait $healthy
hrc=$?
sed 's/^/# /' /tmp/ring-healthy.log | tail -5
if [ $hrc = 0 ]; then pass "a healthy pair in another process moved data intact throughout"
else fail "the healthy pair failed (exit $hrc)"; fi

sleep 1
kill $dmesg_pid
r=$(kernel_reports "$STALL_REPORTS" </tmp/ring-dmesg.log)
if [ -z "$r" ]; then pass "no kernel report in dmesg"
else fail "kernel reports in dmesg"; grep -F -A15 -f <(printf '%s\n' "$r") /tmp/ring-dmesg.log | head -60 | sed 's/^/# | /'; fi
info "kernel log during the run: $(wc -l </tmp/ring-dmesg.log) lines, $(grep -c 'CQ overrun' /tmp/ring-dmesg.log) of them CQ overruns"

check "no user QP left in rdma res" wait_for 20 bash -c "[ \"\$(rdma res show qp link $DEV/1 | grep lqpn | grep -c ' pid ')\" = 0 ]"
check "no user CQ left in rdma res" bash -c "[ \"\$(rdma res show cq dev $DEV | grep cqn | grep -c ' pid ')\" = 0 ]"
check "no user MR left in rdma res" bash -c "[ \"\$(rdma res show mr dev $DEV | grep mrn | grep -c ' pid ')\" = 0 ]"
check "rdma link delete" rdma link delete $DEV
check "module unloads (nothing leaked)" modprobe -r rroce
finish
