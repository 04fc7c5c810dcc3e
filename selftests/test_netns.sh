#!/bin/bash
# RDMA devices in network namespaces (exclusive netns mode, `rdma system
# set netns exclusive`): `rdma dev set DEV netns NS` moves an rroce device
# to a namespace, even while a process uses it. rroce disassociates user
# contexts: the core destroys the process's objects and the move does not
# wait for it to close the device; the process gets errors and exits. In
# its namespace a device is the only one its processes see, and verbs and
# rdma_cm traffic run between two namespaces. A device added from inside a
# namespace belongs to it; deleting a namespace brings its devices back to
# the initial one; `rdma link delete` from inside the namespace removes one;
# a netdev removed while its device is between namespaces takes the device
# along; a netdev that moves on under RC traffic, its old and new namespaces
# deleted at once, leaves no kernel report. The mode goes back to shared at
# the end.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
INIT=rroce-init

visible_in() { # NS DEV: whether DEV is listed in namespace NS ("init": the initial one)
	if [ "$1" = init ]; then rdma dev show "$2" >/dev/null 2>&1
	else ip netns exec "$1" rdma dev show "$2" >/dev/null 2>&1; fi
}
hidden_in() { ! visible_in "$@"; }
verbs_devices() { ip netns exec "$1" ibv_devices 2>/dev/null | awk 'NR > 2 {print $1}' | sort | tr '\n' ' '; }
mode() { rdma system show 2>/dev/null | sed -n 's/.*netns \([a-z]*\).*/\1/p'; }
# The mode changes only while no namespace but the initial one exists, and
# deleted namespaces go away asynchronously.
set_mode() { wait_for 60 sh -c "rdma system set netns $1 2>/dev/null; rdma system show | grep -q 'netns $1'"; }
fstat() { awk -v k="$2" '$1 == k {print $2}' "$1" 2>/dev/null; }
gid_hex() { local IFS=.; set -- $1; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"; }
gidx() { # NS DEV ADDR
	local want f
	want=$(gid_hex "$3")
	for f in $(ip netns exec "$1" sh -c "ls -d /sys/class/infiniband/$2/ports/1/gids/*"); do
		[ "$(ip netns exec "$1" cat "$f" 2>/dev/null)" = "$want" ] && { basename "$f"; return 0; }
	done
	return 1
}
listening() { ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q .; }

cleanup() {
	[ -n "${HOLDER:-}" ] && kill "$HOLDER" 2>/dev/null
	for ns in $TOPO_A $TOPO_B; do
		for d in rroce-a rroce-b; do ip netns exec $ns rdma link delete $d 2>/dev/null; done
	done
	rmmod rroce_stall_devices rroce_hold_device 2>/dev/null
	ip link del rroce-x0 2>/dev/null
	ip link del rroce-y0 2>/dev/null
	ip netns del rroce-c 2>/dev/null
	topo_down
	umount /run/netns/$INIT 2>/dev/null; rm -f /run/netns/$INIT
	unload_all
	set_mode shared
}
trap cleanup EXIT

modprobe rroce
info "netns mode before: $(mode)"
if ! wait_for 120 sh -c "rdma system set netns exclusive 2>/dev/null; rdma system show | grep -q 'netns exclusive'"; then
	# Namespaces of earlier tests can take a while to be torn down.
	skip "network namespace mode" "cannot switch to exclusive mode: other network namespaces still exist ($(lsns -t net -n -o NSFS,PID 2>/dev/null | tr -s ' ' | tr '\n' ';'))"
	finish
fi
pass "exclusive netns mode"
topo_up
A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
# A name for the initial namespace, for moving devices back to it.
touch /run/netns/$INIT && mount --bind /proc/1/ns/net /run/netns/$INIT
check "rdma link add in namespace A" $A rdma link add rroce-a type rroce netdev veth-a
$B rdma link add rroce-b type rroce netdev veth-b
check "the device belongs to the namespace it was added in" sh -c \
	"$A rdma dev show rroce-a && ! rdma dev show rroce-a 2>/dev/null && ! $B rdma dev show rroce-a 2>/dev/null"
check "both devices move to the initial namespace (idle)" sh -c \
	"$A rdma dev set rroce-a netns $INIT && $B rdma dev set rroce-b netns $INIT"
check "they are listed there" sh -c "rdma dev show rroce-a && rdma dev show rroce-b"

# --- moving a device a process holds with traffic ---------------------------
HSTAT=/tmp/netns-holder.status HLOG=/tmp/netns-holder.log
# start_holder LIMIT SECS WAIT WHAT: RC traffic between rroce-a and rroce-b
# for SECS seconds (faults.py, killed after LIMIT) in the background
# (HOLDER); passes WHAT once more than 20 completions are in, within WAIT.
start_holder() {
	rm -f $HSTAT
	timeout "$1" python3 "$HERE/faults.py" rroce-a $TOPO_A4 rroce-b $TOPO_B4 "$2" $HSTAT >$HLOG 2>&1 &
	HOLDER=$!
	if wait_for "$3" sh -c "[ \"\$(awk '\$1 == \"ok\" {print \$2}' $HSTAT 2>/dev/null)\" -gt 20 ]"; then
		pass "$4"
	else
		fail "$4"
		tail -5 $HLOG | sed 's/^/# | /'
	fi
}
start_holder 200 40 90 "a process holds both devices with RC traffic"
start=$SECONDS
check "rdma dev set rroce-b netns $TOPO_B while the process uses it" timeout 60 rdma dev set rroce-b netns $TOPO_B
info "the move took $((SECONDS - start)) s; holder: $(fstat $HSTAT ok) completions, $(fstat $HSTAT state)"
check "the holder got errors and exited (its objects were destroyed under it)" wait_for 90 sh -c "! kill -0 $HOLDER"
wait $HOLDER 2>/dev/null; hrc=$?; HOLDER=
info "holder exit $hrc: $(grep -h RESULT $HLOG | tail -1)"
check "the holder's QPs and MRs on rroce-a were released" wait_for 20 sh -c \
	"[ \$(( \$(rdma res show qp link rroce-a/1 | grep -c ' pid ') + \$(rdma res show mr dev rroce-a | grep -c ' pid ') )) = 0 ]"

# --- each device in its own namespace ---------------------------------------
check "rdma dev set rroce-a netns $TOPO_A (idle)" rdma dev set rroce-a netns $TOPO_A
check "namespace A sees rroce-a only" sh -c "[ \"$(verbs_devices $TOPO_A)\" = 'rroce-a ' ]"
info "ibv_devices in A: $(verbs_devices $TOPO_A); in B: $(verbs_devices $TOPO_B)"
check "namespace B sees rroce-b only" sh -c "[ \"\$(ip netns exec $TOPO_B ibv_devices | awk 'NR > 2 {print \$1}' | tr '\n' ' ')\" = 'rroce-b ' ]"
check "the initial namespace sees neither" sh -c "! rdma dev show rroce-a 2>/dev/null && ! rdma dev show rroce-b 2>/dev/null"
check "rroce-b's port is ACTIVE in namespace B" wait_for 20 sh -c "$B rdma link show rroce-b/1 | grep -q 'state ACTIVE'"

pingpong() { # WHAT: ibv_rc_pingpong from A to B
	local ga gb spid rc src
	ga=$(gidx $TOPO_A rroce-a $TOPO_A4) gb=$(gidx $TOPO_B rroce-b $TOPO_B4)
	$B timeout 90 ibv_rc_pingpong -d rroce-b -g "$gb" -n 100 >/tmp/netns-pp-server.log 2>&1 &
	spid=$!
	wait_for 20 listening $TOPO_B 18515
	$A timeout 90 ibv_rc_pingpong -d rroce-a -g "$ga" -n 100 $TOPO_B4 >/tmp/netns-pp-client.log 2>&1
	rc=$?
	wait $spid; src=$?
	if [ $rc = 0 ] && [ $src = 0 ]; then pass "$1"; info "$(tail -1 /tmp/netns-pp-client.log)"
	else
		fail "$1 (client $rc, server $src)"
		tail -3 /tmp/netns-pp-client.log /tmp/netns-pp-server.log | sed 's/^/# | /'
	fi
}
wait_for 30 gidx $TOPO_A rroce-a $TOPO_A4
wait_for 30 gidx $TOPO_B rroce-b $TOPO_B4
pingpong "ibv_rc_pingpong between the devices in their namespaces"
run_pair "rping (rdma_cm) between the namespaces" rping -s -a $TOPO_B4 -C 20 -V -- rping -c -C 20 -V -a

# --- moving back, and again --------------------------------------------------
check "rdma dev set rroce-b netns back to the initial namespace (from B)" $B rdma dev set rroce-b netns $INIT
check "rroce-b is listed in the initial namespace again" visible_in init rroce-b
check "and no longer in B" hidden_in $TOPO_B rroce-b
check "rroce-b moves to B a second time" rdma dev set rroce-b netns $TOPO_B
wait_for 30 gidx $TOPO_B rroce-b $TOPO_B4
pingpong "ibv_rc_pingpong after the device went back and forth"

# --- namespace deletion, and delete from inside --------------------------------
check "rdma link delete rroce-a from inside namespace A" $A rdma link delete rroce-a
check "rroce-a is gone" sh -c "! $A rdma dev show rroce-a 2>/dev/null && ! rdma dev show rroce-a 2>/dev/null"
# A namespace that holds only an RDMA device (its netdev lives elsewhere).
ip netns add rroce-c
check "rroce-b moves on to a third namespace" $B rdma dev set rroce-b netns rroce-c
ip netns del rroce-c
check "deleting that namespace brings rroce-b back to the initial one" wait_for 30 visible_in init rroce-b
check "rdma link delete rroce-b" rdma link delete rroce-b

# --- a netdev removed while its device is between namespaces ----------------
# A move takes the device's reference count to zero once every holder lets
# go, and only then enables the device again in its new namespace. Two test
# modules hold the move there: one keeps a reference on the device until its
# netdev is unregistered (and lets go first thing then), the other keeps the
# core's device list locked, which the move takes next. rroce's handler of
# the netdev's unregistration so runs with the device unreferenced and
# between namespaces, where the core's lookup by netdev cannot see it; it
# finds it in rroce's own list and queues its removal, which the move's end
# lets run.
ip netns add rroce-c
ip link add rroce-x0 type veth peer name rroce-x1
ip link add rroce-y0 type veth peer name rroce-y1
rdma link add rroce-x type rroce netdev rroce-x0
# A registered device for the stalling module's callback.
rdma link add rroce-y type rroce netdev rroce-y0
if insmod "$(helper_module rroce_hold_device)" ifname=rroce-x0; then
	rdma dev set rroce-x netns rroce-c &
	MV=$!
	check "the move waits for the held reference" wait_for 20 sh -c "! rdma dev show rroce-x 2>/dev/null && kill -0 $MV"
	insmod "$(helper_module rroce_stall_devices)" stall_ms=4000 &
	STALL=$!
	wait_for 20 grep -q '^rroce_stall_devices ' /proc/modules
	# Into its callback (and the lock) well before the stall ends.
	sleep 1
	ip link del rroce-x0 &
	DEL=$!
	wait $STALL
	check "the move completes once the reference is dropped" wait_for 30 sh -c "! kill -0 $MV"
	check "the netdev's removal completes" wait_for 60 sh -c "! kill -0 $DEL"
	check "and took the device with it" wait_for 30 sh -c \
		"! rdma dev show rroce-x 2>/dev/null && ! ip netns exec rroce-c rdma dev show rroce-x 2>/dev/null"
	rmmod rroce_stall_devices rroce_hold_device
else
	fail "holding rroce-x with the test module"
	rdma link delete rroce-x
	ip link del rroce-x0
fi
rdma link delete rroce-y
ip link del rroce-y0
ip netns del rroce-c

# --- the netdev's namespaces deleted under RC traffic ------------------------
# Every packet uses its netdev's namespace (the route on send, the check of
# the local address on receive), which neither RTNL nor a reference holds:
# the netdev moves on (its device is removed, in a queued work, while the
# QPs still send) and both namespaces are deleted at once. Nothing may use
# either after it is freed.
$A rdma link add rroce-a type rroce netdev veth-a
$B rdma link add rroce-b type rroce netdev veth-b
$A rdma dev set rroce-a netns $INIT
$B rdma dev set rroce-b netns $INIT
mark=$(dmesg | wc -l)
start_holder 100 60 60 "RC traffic runs between rroce-a and rroce-b"
ip netns add rroce-d
check "veth-a moves to another namespace under traffic" ip -n $TOPO_A link set veth-a netns rroce-d
ip netns del $TOPO_A
ip netns del rroce-d
check "rroce-a goes with its netdev" wait_for 30 sh -c "! rdma dev show rroce-a 2>/dev/null"
check "the traffic process exits" wait_for 60 sh -c "! kill -0 $HOLDER"
wait $HOLDER 2>/dev/null; HOLDER=
info "traffic: $(fstat $HSTAT ok) completions; $(grep -h RESULT $HLOG | tail -1)"
rdma link delete rroce-b 2>/dev/null
topo_down
umount /run/netns/$INIT 2>/dev/null; rm -f /run/netns/$INIT
check "the module unloads" modprobe -r rroce
# Only once every other namespace is gone: so also after the deleted ones'
# teardown (a work item) has run.
check "shared netns mode again" set_mode shared
r=$(dmesg | tail -n +$((mark + 1)) | kernel_reports)
if [ -z "$r" ]; then
	pass "no kernel report from deleting the namespaces under traffic"
else
	fail "no kernel report from deleting the namespaces under traffic"
	echo "$r" | head -20 | sed 's/^/# | /'
fi
finish
