#!/bin/bash
# Device lifecycle: rdma link add/delete, duplicates, bad input, netdev
# removal, module unload with devices, with open user contexts and with
# packets held in a qdisc.
. "$(dirname "$0")/lib.sh"

check "modprobe rroce" modprobe rroce
check "module alias rdma-link-rroce resolves" bash -c 'modprobe -R rdma-link-rroce | grep -qx rroce'
check "no device before rdma link add" test "$(dev_count)" = 0

check "rdma link add rroce0 on eth0" rdma link add rroce0 type rroce netdev eth0
check "rroce0 is listed with netdev eth0" bash -c 'rdma link show rroce0/1 | grep -q "netdev eth0"'
check "rroce0 is in /sys/class/infiniband" test -d /sys/class/infiniband/rroce0
check "rroce0 has a uverbs char device" wait_for 30 bash -c 'grep -lx rroce0 /sys/class/infiniband_verbs/uverbs*/ibdev'
check_fails "second add on eth0 is refused" rdma link add rroce1 type rroce netdev eth0
check "refused add says EEXIST" bash -c 'rdma link add rroce1 type rroce netdev eth0 2>&1 | grep -qi "file exists"'
check "refused add left no rroce1" no_dev rroce1
check "dmesg names the existing device" bash -c 'dmesg | grep -q "eth0 already has device rroce0"'

ip link add veth0 type veth peer name veth1
ip link set veth0 up; ip link set veth1 up
check_fails "name collision (rroce0 on veth0) is refused" rdma link add rroce0 type rroce netdev veth0
check "collision says EEXIST and why" bash -c 'rdma link add rroce0 type rroce netdev veth0 2>&1 | grep -qi "file exists" && dmesg | grep -q "cannot add rroce0: another RDMA device has that name"'
check "collision left veth0 without a device" bash -c '! rdma link show | grep -q "netdev veth0"'
check "rroce0 on eth0 survives the collision" have_dev rroce0

check_fails "unknown netdev is refused" rdma link add rroce2 type rroce netdev nosuchdev0
check_fails "loopback is refused" rdma link add rroce2 type rroce netdev lo
check "loopback refusal is explained in dmesg" bash -c 'dmesg | grep -q "cannot add rroce2 on lo: a loopback device"'
ip link add link veth0 name veth0.10 type vlan id 10
check_fails "VLAN device is refused" rdma link add rroce2 type rroce netdev veth0.10
ip link del veth0.10
check "failed adds left nothing behind" test "$(dev_count)" = 1

check "rdma link delete rroce0" rdma link delete rroce0
check "rroce0 is gone" no_dev rroce0
check "delete frees eth0 for a new device" rdma link add rroce0 type rroce netdev eth0
rdma link delete rroce0

check "add rroce1 on veth0" rdma link add rroce1 type rroce netdev veth0
ip link del veth0
check "deleting the netdev removes rroce1" wait_for 10 no_dev rroce1
check "no device left" test "$(dev_count)" = 0

check "add two devices" bash -c 'rdma link add rroce0 type rroce netdev eth0 && ip link add veth2 type veth peer name veth3 && rdma link add rroce3 type rroce netdev veth2'
check "rmmod with devices present" modprobe -r rroce
check "rmmod removed every device" test "$(dev_count)" = 0
ip link del veth2 2>/dev/null

modprobe rroce
rdma link add rroce0 type rroce netdev eth0
# rroce disassociates user contexts: unloading takes the device from a
# process that has it open; its objects are destroyed and its verbs fail.
rm -f /tmp/ctx-open
python3 - <<'PY' &
import sys, time
from pyverbs.device import Context
from pyverbs.pd import PD
ctx = Context(name='rroce0')
pd = PD(ctx)
open('/tmp/ctx-open', 'w').close()
for _ in range(200):
    time.sleep(0.1)
    try:
        PD(ctx).close()
    except Exception as e:
        print(f'verbs fail after the unload: {e}')
        break
else:
    sys.exit('verbs still work 20 s after the unload')
try:
    ctx.close()
except Exception:
    pass
PY
holder=$!
wait_for 20 test -f /tmp/ctx-open
check "rmmod while a user context is open takes the device from it" modprobe -r rroce
check "the device is gone" no_dev rroce0
wait $holder
check "the process's verbs failed after the unload, and it exited cleanly" test $? = 0

# The same with the process's CQ and QP rings mapped and RDMA WRITEs
# running between its two QPs: the teardown destroys the QPs and the CQ,
# then the context, while the process still maps the rings (no file close
# waits for the munmap here). Every mmap entry must be out of the
# context's table before the core frees it (else its WARN, or a use after
# free), and the ring pages stay the process's until it unmaps them.
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
rm -f /tmp/ctx-traffic
PYTHONPATH=$(dirname "$0") python3 - <<'PY' &
import sys, time
import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
from verbs import connect_rc, ipv4_gid_index
ctx = Context(name='rroce0')
pd = PD(ctx)
sgid = ipv4_gid_index(ctx)
gid = ctx.query_gid(1, sgid)
cq = CQ(ctx, 256)
qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=64, max_recv_wr=64)))
       for _ in range(2)]
access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
for qp, peer in zip(qps, reversed(qps)):
    connect_rc(qp, peer.qp_num, gid, access, sgid_index=sgid, timeout=10, retry_cnt=3, rnr_retry=3)
src, dst = MR(pd, 1 << 16, access), MR(pd, 1 << 16, access)
done = 0
end = time.time() + 60
while time.time() < end:
    try:
        for i in range(8):
            wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, 1 << 16, src.lkey)])
            wr.set_wr_rdma(dst.rkey, dst.buf)
            qps[done % 2].post_send(wr)
    except Exception as ex:
        print(f'posting fails after the unload: {ex}')
        break
    # Polling reads the mapped CQ ring: it must stay readable throughout.
    deadline = time.time() + 5
    got = 0
    while got < 8 and time.time() < deadline:
        got += cq.poll(8)[0]
    done += 1
    if done == 4:
        open('/tmp/ctx-traffic', 'w').close()
else:
    sys.exit('posting still works 60 s after the unload')
for _ in range(10):
    cq.poll(8)
try:
    ctx.close()
except Exception:
    pass
PY
holder=$!
check "a process runs RDMA WRITEs with its rings mapped" wait_for 60 test -f /tmp/ctx-traffic
check "rmmod while the process's rings are mapped and traffic runs" modprobe -r rroce
check "the device is gone" no_dev rroce0
wait $holder
check "the process's posts failed after the unload, its mapped CQ stayed readable, and it exited cleanly" test $? = 0

# rdma_rxe registers with the same driver id, and its netdev handler takes
# any device of that id for its own: rroce refuses rdma_rxe's load while it
# has devices, and adds none while rdma_rxe is loaded. Unloading rroce
# removes rroce's devices only. rdma_rxe's device is in a namespace of its
# own: each module binds UDP port 4791 in the namespaces of its devices.
ip netns add rroce-l
ip link add veth4 type veth peer name veth5
ip link set veth4 netns rroce-l
modprobe rroce && rdma link add rroce0 type rroce netdev eth0
if modinfo rdma_rxe >/dev/null 2>&1; then
	check_fails "rdma_rxe may not load while rroce has a device" modprobe rdma_rxe
	check "rroce's device is still there" have_dev rroce0
	rdma link delete rroce0
	check "rdma_rxe loads once rroce has no device" modprobe rdma_rxe
	check_fails "rroce adds no device while rdma_rxe is loaded" rdma link add rroce0 type rroce netdev eth0
	check "rdma_rxe adds a device" ip netns exec rroce-l rdma link add rxe0 type rxe netdev veth4
	check "rmmod rroce with an rdma_rxe device present" modprobe -r rroce
	check "rdma_rxe's device stays" have_dev rxe0
	rdma link delete rxe0 2>/dev/null
	modprobe -r rdma_rxe
	check "rroce adds devices again once rdma_rxe is gone" sh -c \
		'modprobe rroce && rdma link add rroce0 type rroce netdev eth0 && rdma link delete rroce0'
	modprobe -r rroce
else
	skip "rroce and rdma_rxe kept apart" "no rdma_rxe module in this kernel"
	modprobe -r rroce
fi
ip netns del rroce-l

# Unloading while the host holds rroce's packets: a token bucket of 1 kbit/s
# on veth-a keeps them (netem would not: a delaying netem orphans what it
# queues). Their destructor is rroce's code, so the unload waits until each
# has returned into the core (csrc/skb.c); deleting the qdisc frees them
# from process context, and the unload then completes.
held_packets() { $A tc -s qdisc show dev veth-a | sed -n 's/.*backlog [^ ]* \([0-9]*\)p.*/\1/p' | head -1; }
if modprobe sch_tbf 2>/dev/null; then
	mark=$(dmesg | wc -l)
	topo_devices_up
	wait_for 30 gid_of rroce-a veth-a >/dev/null
	wait_for 30 gid_of rroce-b veth-b >/dev/null
	# Neighbours first: an ARP exchange through the qdisc would hold the packets in the neighbour's queue instead.
	$A ping -c 1 -W 2 $TOPO_B4 >/dev/null
	$A tc qdisc add dev veth-a root tbf rate 1kbit burst 1600 limit 1000000
	python3 "$(dirname "$0")/faults.py" rroce-a $TOPO_A4 rroce-b $TOPO_B4 60 /tmp/lc-held.status >/tmp/lc-held.log 2>&1 &
	traffic=$!
	# Until packets are held (a second more), not for a fixed time: on the
	# debug kernel the verbs program can take more than 4 s to start.
	for _ in $(seq 30); do
		[ "$(held_packets)" -gt 0 ] 2>/dev/null && sleep 1 && break
		sleep 1
	done
	kill $traffic 2>/dev/null
	wait $traffic 2>/dev/null
	held=$(held_packets)
	check "RC traffic leaves packets held in veth-a's qdisc (${held:-0})" test "${held:-0}" -gt 0
	$A rdma link delete rroce-a
	$B rdma link delete rroce-b
	modprobe -r rroce &
	unload=$!
	sleep 3
	check "the unload waits while they are held ($(held_packets) packets)" kill -0 $unload
	$A tc qdisc del dev veth-a root
	waited=0
	while kill -0 $unload 2>/dev/null && [ $waited -lt 60 ]; do sleep 1; waited=$((waited + 1)); done
	if kill -0 $unload 2>/dev/null; then
		fail "the unload completes once the qdisc is deleted (still waiting after 60 s)"
	else
		wait $unload
		check "the unload completes once the qdisc is deleted (in $waited s)" test $? = 0
	fi
	topo_down
	check "no kernel report" sh -c '[ -z "$(dmesg | tail -n +$(($1 + 1)) | "$2")" ]' _ "$mark" "$KERNEL_REPORTS"
	check "module is unloaded" bash -c '! lsmod | grep -q "^rroce "'
else
	skip "unloading while the host holds packets" "no tbf qdisc"
fi

cycles=$(on_debug_kernel 3 20)
cycles_ok=1
for i in $(seq 1 "$cycles"); do
	if ! { modprobe rroce && rdma link add rroce0 type rroce netdev eth0 && have_dev rroce0 && modprobe -r rroce && no_dev rroce0; }; then
		cycles_ok=0
		info "cycle $i failed"
		break
	fi
done
check "$cycles load / add / unload cycles" test $cycles_ok = 1
check "module is unloaded at the end" bash -c '! lsmod | grep -q "^rroce "'
finish
