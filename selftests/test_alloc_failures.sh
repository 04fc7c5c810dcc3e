#!/bin/bash
# Every error path of the verbs that create objects, one allocation at a
# time: the kernel's fail-nth fault injection (/proc/thread-self/fail-nth
# with failslab) makes the Nth slab allocation of one uverbs command fail,
# for N = 1, 2, ... until the command gets through without reaching an Nth.
# Each round the command must fail cleanly or succeed, and the context must
# still work. Two passes: first only the allocations that cannot sleep
# (failslab's ignore-gfp-wait, the ones made under spinlocks: a failure
# there must not free sleeping resources under the lock), then every slab
# allocation. Then reg_mr and rereg_mr once more: after each failure no
# memory stays pinned and no key of the failed registration answers a
# READ. Afterwards: no object left in the device's resource tracking,
# no kernel report (DEBUG_ATOMIC_SLEEP catches sleeping under a spinlock),
# no leak kmemleak can see, the module unloads.
# Needs CONFIG_FAILSLAB and CONFIG_FAULT_INJECTION_DEBUG_FS: the debug kernel.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$HERE PYTHONDONTWRITEBYTECODE=1 DEV=rroce0
FS=/sys/kernel/debug/failslab
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
if [ ! -e /proc/self/fail-nth ] || [ ! -d $FS ]; then
	skip "slab allocation failures in every verb that creates objects" \
		"this kernel has no fail-nth/failslab (CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS: the debug kernel only)"
	finish
fi
# A failed vmalloc (a ring) prints the allocator's warning with a stack dump:
# expected here, so the sweep is marked as a window scripts/kernel-reports
# forgives those in.
EXPECTED='rroce-selftest: expected allocation failures'
mark=$(dmesg | wc -l)
# An injected failure is not itself a report: no "forcing a failure" stack.
echo 0 >$FS/verbose
kmemleak_start

modprobe rroce
# A raw uverbs client needs ib_uverbs loaded (libibverbs gets it loaded itself).
modprobe ib_uverbs
rdma link add $DEV type rroce netdev eth0
wait_for 30 bash -c "grep -qx $DEV /sys/class/infiniband_verbs/uverbs*/ibdev" || fail "no uverbs device for $DEV"
wait_for 30 python3 -c 'import os, uverbs_raw as u; u.gid_of(os.environ["DEV"])' || fail "no RoCEv2 IPv4 GID on $DEV"
baseline=$(rdma -j resource show "$DEV" 2>/dev/null)

echo "$EXPECTED begin" >/dev/kmsg
for pass in atomic all; do
	if [ $pass = atomic ]; then echo Y >$FS/ignore-gfp-wait; else echo N >$FS/ignore-gfp-wait; fi
	timeout 600 python3 - $pass <<'PY'
import errno, mmap, os, sys
import uverbs_raw as u
from verbs import Checks
c = Checks('test_alloc_failures')
which = sys.argv[1]
dev = os.environ['DEV']
sgid, gid = u.gid_of(dev)
ctx = u.Context(dev)
LIMIT = 400                 # more allocations than any one command makes

inj = u.FailNth()

# Long-lived objects the swept commands use, made without injection.
pd = ctx.alloc_pd()
cq = ctx.create_cq(64)
buf = mmap.mmap(-1, 1 << 16)
buf_addr = u.ctypes.addressof(u.ctypes.c_char.from_buffer(buf))
mr = ctx.reg_mr(pd, buf_addr, 1 << 16, u.LOCAL_WRITE | u.REMOTE_WRITE)

def qp(qp_type=u.QPT_RC, srq=None):
    return ctx.create_qp(pd, cq, cq, qp_type=qp_type, srq=srq)

# Each case: (name, setup, the swept command, undo, teardown). Only the
# command's own uverbs write runs under injection; its result, if it
# succeeded, goes to undo, and setup's result to teardown either way. The
# rings of a QP, CQ or SRQ are mapped after the command, outside it.
def init_qp():
    q = qp()
    ctx.modify_qp(q, u.QP_STATE | u.QP_PKEY_INDEX | u.QP_PORT | u.QP_ACCESS_FLAGS, state=u.INIT, port=1,
                  access=u.LOCAL_WRITE | u.REMOTE_WRITE)
    return q

def to_rtr(q):
    ctx.modify_qp(q, u.QP_STATE | u.QP_AV | u.QP_PATH_MTU | u.QP_DEST_QPN | u.QP_RQ_PSN | u.QP_MAX_DEST_RD_ATOMIC
                  | u.QP_MIN_RNR_TIMER, state=u.RTR, path_mtu=u.MTU_1024, dest_qpn=q.qpn, max_dest_rd_atomic=4,
                  min_rnr_timer=1, dgid=gid, sgid_index=sgid)

last_ud_qp = None
def ud_qp():
    global last_ud_qp
    last_ud_qp = q = qp(u.QPT_UD)
    ctx.ud_ready(q, 0x11111111)
    return q

def nothing(*_):
    pass

REREG_TRANS, REREG_ACCESS = 2, 4
MGID = bytes.fromhex('ff0e0000000000000000ffffef010203')
cases = [
    ('alloc_pd', nothing, lambda _: ctx.alloc_pd(), ctx.dealloc_pd, nothing),
    ('create_cq', nothing, lambda _: ctx.create_cq(256), ctx.destroy_cq, nothing),
    ('reg_mr', nothing, lambda _: ctx.reg_mr(pd, buf_addr, 1 << 16, u.LOCAL_WRITE | u.REMOTE_READ),
     lambda m: ctx.dereg_mr(m[0]), nothing),
    ('rereg_mr to a new translation', lambda: ctx.reg_mr(pd, buf_addr, 1 << 16, u.LOCAL_WRITE),
     lambda m: ctx.rereg_mr(m[0], REREG_TRANS | REREG_ACCESS, addr=buf_addr + 4096, length=8192,
                            access=u.LOCAL_WRITE | u.REMOTE_WRITE),
     nothing, lambda m: ctx.dereg_mr(m[0])),
    ('alloc_mw type 1', nothing, lambda _: ctx.alloc_mw(pd, 1), lambda w: ctx.dealloc_mw(w[0]), nothing),
    ('alloc_mw type 2', nothing, lambda _: ctx.alloc_mw(pd, 2), lambda w: ctx.dealloc_mw(w[0]), nothing),
    ('create_srq', nothing, lambda _: ctx.create_srq(pd, 64, 2), ctx.destroy_srq, nothing),
    ('create_qp RC', nothing, lambda _: qp(), ctx.destroy_qp, nothing),
    ('create_qp UD', nothing, lambda _: qp(u.QPT_UD), ctx.destroy_qp, nothing),
    ('create_qp RC on an SRQ', lambda: ctx.create_srq(pd, 16, 1), lambda s: qp(srq=s), ctx.destroy_qp,
     ctx.destroy_srq),
    ('modify_qp INIT to RTR (address resolution)', init_qp, to_rtr, nothing, ctx.destroy_qp),
    ('create_ah', nothing, lambda _: ctx.create_ah(pd, gid, sgid), lambda a: ctx.destroy_ah(a[0]), nothing),
    ('attach_mcast (group join)', ud_qp, lambda q: ctx.attach_mcast(q, MGID),
     lambda _: ctx.detach_mcast(last_ud_qp, MGID), ctx.destroy_qp),
]
for name, setup, command, undo, teardown in cases:
    rounds = failed = 0
    errors = set()
    finished = False
    for nth in range(1, LIMIT + 1):
        arg = setup()
        ctx.around_next_command = inj.around(nth)
        try:
            res, ok = command(arg), True
        except OSError as e:
            res, ok = None, False
            errors.add(errno.errorcode.get(e.errno, str(e.errno)))
        assert ctx.around_next_command is None, 'the command never reached the kernel'
        rounds += 1
        failed += not ok
        if ok:
            undo(res)
        teardown(arg)
        if not inj.injected:
            # Fewer than nth allocations: every one has failed in turn.
            finished = ok
            break
    c.ok(f'{which}: {name}: each of its allocations failing in turn ends in an error or is tolerated',
         finished, f'{rounds} rounds, {failed} failed with {sorted(errors)}' +
         ('' if rounds < LIMIT else f', no clean run within {LIMIT} rounds'))
    print(f'# {which}: {name}: {rounds - 1} allocations failed in turn, {failed} times the command failed '
          f'({", ".join(sorted(errors)) or "-"})', flush=True)

# The context still does everything after all the failures.
try:
    s = ctx.create_srq(pd, 16, 1)
    q1, q2 = qp(), qp(u.QPT_UD)
    for q in (q1, q2):
        ctx.destroy_qp(q)
    ctx.destroy_srq(s)
    sane = True
except OSError as e:
    sane = e
c.ok(f'{which}: the context still creates and destroys QPs and SRQs', sane is True, sane)
ctx.dereg_mr(mr[0])
ctx.destroy_cq(cq)
ctx.dealloc_pd(pd)
ctx.close()
PY
	rc=$?
	# 1: an exception, which the script reports as a failed check itself.
	[ $rc = 0 ] || [ $rc = 1 ] || fail "$pass: the sweep ended without a result (exit $rc)"
done

# A registration that fails leaves nothing registered: the same sweep over
# reg_mr and rereg_mr to a new translation, and after each failure the
# registering process has no more pages pinned than before the command
# (VmPin), and no key of the index the command may have taken answers an
# RDMA READ (the index is the one between a probe registration's just
# before and just after; the byte below it is random, so all 256 are
# tried). Failures of the driver's allocations after the key was placed
# (the MR's container) would leave the region live until the device goes.
echo N >$FS/ignore-gfp-wait
timeout 1200 python3 - <<'PY'
import errno, mmap, os
import uverbs_raw as u
from verbs import Checks
c = Checks('test_alloc_failures')
dev = os.environ['DEV']
sgid, gid = u.gid_of(dev)
ctx = u.Context(dev)
LIMIT = 400
LEN = 16 * mmap.PAGESIZE
inj = u.FailNth()

def vm_pin():
    """Memory the process has pinned, in kB (the RDMA core counts it in pinned_vm)."""
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmPin:'))

pd = ctx.alloc_pd()
cq = ctx.create_cq(64)
buf = mmap.mmap(-1, 2 * LEN)
addr = u.ctypes.addressof(u.ctypes.c_char.from_buffer(buf))
buf[:LEN] = bytes(range(256)) * (LEN // 256)

def probe_index():
    """The key index the next registration would have taken."""
    h, lkey, _ = ctx.reg_mr(pd, addr, mmap.PAGESIZE, u.LOCAL_WRITE)
    ctx.dereg_mr(h)
    return lkey >> 8

def answering_keys(index):
    """The keys of `index` with which an RDMA READ of the test's buffer
    succeeds, between two QPs of the PD connected to each other."""
    sink = ctx.reg_mr(pd, addr + LEN, 64, u.LOCAL_WRITE)
    qps = [ctx.create_qp(pd, cq, cq) for _ in range(2)]
    live = []
    try:
        for byte in range(256):
            key = index << 8 | byte
            for a, b in ((0, 1), (1, 0)):
                ctx.connect(qps[a], qps[b].qpn, gid, sgid)
            ctx.post_send(qps[0], u.send_wqe(wr_id=byte, opcode=u.WR_RDMA_READ, raddr=addr, rkey=key,
                                             sges=[(addr + LEN, 64, sink[1])]))
            wcs = ctx.wait_wcs(cq, 1)
            if wcs and wcs[0].status == u.WC_SUCCESS:
                live.append(hex(key))
            # Back to RESET (a failed READ left the QPs in error), the CQ emptied.
            for q in qps:
                ctx.modify_qp(q, u.QP_STATE, state=u.RESET)
            while ctx.poll_cq(cq):
                pass
    finally:
        for q in qps:
            ctx.destroy_qp(q)
        ctx.dereg_mr(sink[0])
    return live

old = None
def rereg_setup():
    global old
    old = ctx.reg_mr(pd, addr, LEN, u.LOCAL_WRITE)
cases = [
    ('reg_mr', lambda: None, lambda: ctx.reg_mr(pd, addr, LEN, u.LOCAL_WRITE | u.REMOTE_READ),
     lambda m: ctx.dereg_mr(m[0]), lambda: None),
    ('rereg_mr to a new translation', rereg_setup,
     lambda: ctx.rereg_mr(old[0], u.REREG_TRANS | u.REREG_ACCESS, addr=addr, length=LEN,
                          access=u.LOCAL_WRITE | u.REMOTE_READ),
     lambda _: None, lambda: ctx.dereg_mr(old[0])),
]
for name, setup, command, undo, teardown in cases:
    failures, pinned, answered, finished = 0, [], [], False
    for nth in range(1, LIMIT + 1):
        setup()
        pin_before = vm_pin()
        before = probe_index()
        ctx.around_next_command = inj.around(nth)
        try:
            res, ok = command(), True
        except OSError as e:
            res, ok = None, False
        assert ctx.around_next_command is None, 'the command never reached the kernel'
        if not ok:
            failures += 1
            left = vm_pin() - pin_before
            if left:
                pinned.append((nth, left))
            after = probe_index()
            # The index the failed command took, if it took one.
            if after == before + 2:
                live = answering_keys(before + 1)
                if live:
                    answered.append((nth, live))
        else:
            undo(res)
        teardown()
        if not inj.injected:
            finished = ok
            break
    print(f'# {name}: {failures} injected failures; pinned kB left after one: {pinned or "none"}; '
          f'keys answering a READ after one: {answered or "none"}', flush=True)
    c.ok(f'{name}: after each failed allocation, the process has no more memory pinned than before',
         finished and not pinned, f'(nth, kB) {pinned}' if pinned else f'no clean run within {LIMIT}')
    c.ok(f'{name}: after each failed allocation, no key of the index it took answers a READ',
         finished and not answered, f'(nth, keys) {answered}' if answered else f'no clean run within {LIMIT}')
ctx.destroy_cq(cq)
ctx.dealloc_pd(pd)
ctx.close()
PY
rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "registrations: the sweep ended without a result (exit $rc)"
echo Y >$FS/ignore-gfp-wait
echo "$EXPECTED end" >/dev/kmsg

# Nothing of the test's is left in the device once the context is closed:
# the counts are back to those of the device's own (the MAD layer's PD, CQ
# and GSI QP).
res=$(rdma -j resource show "$DEV" 2>/dev/null)
check "no PD, CQ, QP, MR or other object left in $DEV's resource tracking" \
	python3 -c 'import json, sys
kinds = ("pd", "cq", "qp", "mr", "cm_id", "ctx", "srq")
before, after = (json.loads(a)[0] for a in sys.argv[1:])
left = {k: (before.get(k), after.get(k)) for k in kinds if before.get(k) != after.get(k)}
print("before, after:", left); sys.exit(1 if left else 0)' "$baseline" "$res"
check "the device is deleted" rdma link delete $DEV
# Before the unload: a leak's backtrace names rroce only while it is loaded.
kmemleak_check
check "the module unloads" modprobe -r rroce
new=$(dmesg | tail -n +$((mark + 1)) | kernel_reports 'blocked for more than')
if [ -z "$new" ]; then pass "no kernel report (sleeping under a spinlock, KASAN, lockdep)"
else fail "kernel reports"; printf '%s\n' "$new" | head -12 | sed 's/^/# | /'; fi
finish
