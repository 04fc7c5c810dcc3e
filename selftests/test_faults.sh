#!/bin/bash
# Faults while RC traffic runs and a process holds the device: link down/up,
# READ responses lost for a second, MTU changes, rdma link delete (under a verbs user, an rdma_cm user, and a
# user killed mid-traffic), netdev removal, the netdev moving to another
# namespace, namespace deletion, module unload under a user (rroce
# disassociates: the user is told DEVICE_FATAL); then many create /
# traffic / delete cycles and a leak scan. (test_lifecycle and
# test_gids_carrier cover the same events on idle devices.) Every wait is
# bounded; a hang fails the check that waited. The traffic comes from
# perftest, rping and faults.py (one process holding both devices).
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
FAULTS="python3 $HERE/faults.py"

# --- helpers ------------------------------------------------------------------
port_state() { rdma link show "$1/1" 2>/dev/null | sed -n 's/.* state \([A-Z_]*\) .*/\1/p'; }
port_is() { [ "$(port_state "$1")" = "$2" ]; }
devinfo_state() { ibv_devinfo -d "$1" 2>/dev/null | awk '/state:/ {print $2; exit}'; }
devinfo_is() { [ "$(devinfo_state "$1")" = "$2" ]; }
active_mtu() { ibv_devinfo -d "$1" 2>/dev/null | awk '/active_mtu:/ {print $2; exit}'; }
mtu_is() { [ "$(active_mtu "$1")" = "$2" ]; }
gid_hex() { local IFS=.; set -- $1; printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$1" "$2" "$3" "$4"; }
# gidx DEV ADDR: index of the GID of IPv4 address ADDR in DEV's table.
gidx() {
	local want f
	want=$(gid_hex "$2")
	for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		[ "$(cat "$f" 2>/dev/null)" = "$want" ] && { basename "$f"; return 0; }
	done
	return 1
}
have_gids() { gidx rroce-a $TOPO_A4 >/dev/null && gidx rroce-b $TOPO_B4 >/dev/null; }
listening() { ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null | grep -q .; }
# wait_exit SECONDS PID: whether PID exits within SECONDS.
wait_exit() {
	local end=$((SECONDS + $1))
	while kill -0 "$2" 2>/dev/null; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.2
	done
}
# reap VAR SECONDS PID: waits for the background job PID and stores its exit
# status in VAR, or "hung" after killing it when it outlives SECONDS.
reap() {
	local __var=$1 __t=$2 __pid=$3 __rc
	if wait_exit "$__t" "$__pid"; then
		wait "$__pid"; __rc=$?
	else
		kill "$__pid" 2>/dev/null
		wait_exit 5 "$__pid" || kill -9 "$__pid" 2>/dev/null
		wait "$__pid" 2>/dev/null
		__rc=hung
	fi
	printf -v "$__var" %s "$__rc"
}
# Status file of a faults.py run.
fstat() { awk -v k="$2" '$1 == k {print $2}' "$1" 2>/dev/null; }
f_ok_above() { [ "$(fstat "$1" ok)" -gt "$2" ] 2>/dev/null; }
f_result() { grep -h 'RESULT' "$1" 2>/dev/null | tail -1 | sed 's/^faults.py: RESULT //'; }
# side_rates STATUS SECONDS: completions of each end's own requests over the
# next SECONDS; sets RA (rroce-a's) and RB (rroce-b's).
side_rates() {
	local a0 b0
	a0=$(fstat "$1" ok_rroce-a) b0=$(fstat "$1" ok_rroce-b)
	sleep "$2"
	RA=$(( $(fstat "$1" ok_rroce-a) - ${a0:-0} )) RB=$(( $(fstat "$1" ok_rroce-b) - ${b0:-0} ))
}
# start_holder WHAT SECONDS [faults.py options]: traffic between rroce-a and
# rroce-b from one process in the root namespace, for SECONDS; sets HOLDER
# (its pid), HLOG and HSTAT (its output and status files). Passes when
# completions flow within 90 s, else fails and returns 1.
start_holder() {
	local what=$1 secs=$2; shift 2
	HLOG=/tmp/holder-${what// /-}.log HSTAT=/tmp/holder-${what// /-}.status
	rm -f "$HSTAT"
	timeout $((secs + 150)) $FAULTS rroce-a $TOPO_A4 rroce-b $TOPO_B4 "$secs" "$HSTAT" "$@" >"$HLOG" 2>&1 &
	HOLDER=$!
	if wait_for 90 f_ok_above "$HSTAT" 20; then
		pass "$what: holder process opened both devices, RC traffic flows"
		return 0
	fi
	fail "$what: holder process opened both devices, RC traffic flows"
	sed 's/^/# | /' "$HLOG" | tail -5
	return 1
}
# pingpong WHAT [ibv_rc_pingpong options]: a fresh RC pingpong between the
# namespaces (rroce-b serves, rroce-a connects).
pingpong() {
	local what=$1; shift
	if ! wait_for 30 have_gids; then
		fail "$what (no IPv4 GID on rroce-a/rroce-b)"
		return
	fi
	local ga gb spid rc src
	ga=$(gidx rroce-a $TOPO_A4) gb=$(gidx rroce-b $TOPO_B4)
	$B timeout 90 ibv_rc_pingpong -d rroce-b -g "$gb" "$@" >/tmp/pp-server.log 2>&1 &
	spid=$!
	wait_for 20 listening $TOPO_B 18515
	$A timeout 90 ibv_rc_pingpong -d rroce-a -g "$ga" "$@" $TOPO_B4 >/tmp/pp-client.log 2>&1
	rc=$?
	reap src 30 $spid
	if [ $rc = 0 ] && [ "$src" = 0 ]; then
		pass "$what"
	else
		fail "$what (client $rc, server $src)"
		sed 's/^/# | client: /' /tmp/pp-client.log | tail -4
		sed 's/^/# | server: /' /tmp/pp-server.log | tail -4
	fi
}
# bg_perftest WHAT TAG TOOL ARGS...: a perftest pair in the background
# (server in rroce-b's namespace); sets SPID and CPID; passes when the
# client's QP is up on rroce-a. perftest busy-polls: at nice 19 it leaves the
# guest's two CPUs to the other processes and the driver's work.
bg_perftest() {
	local what=$1 tag=$2 tool=$3; shift 3
	local ga gb
	ga=$(gidx rroce-a $TOPO_A4) gb=$(gidx rroce-b $TOPO_B4)
	$B timeout 150 nice -n 19 "$tool" -d rroce-b -x "$gb" -F "$@" >/tmp/$tag-server.log 2>&1 &
	SPID=$!
	wait_for 30 listening $TOPO_B 18515
	$A timeout 150 nice -n 19 "$tool" -d rroce-a -x "$ga" -F "$@" $TOPO_B4 >/tmp/$tag-client.log 2>&1 &
	CPID=$!
	if wait_for 60 bash -c "rdma res show qp link rroce-a/1 | grep 'comm $tool' | grep -q 'state RTS'"; then
		pass "$what: $tool is running between the namespaces"
	else
		fail "$what: $tool is running between the namespaces"
		sed 's/^/# | client: /' /tmp/$tag-client.log | tail -4
	fi
}
# Kernel reports since a mark: those the guest's check counts, a blocked
# task, and a netdev whose references are not released.
dmesg_mark() { dmesg | wc -l; }
no_reports_since() {
	local new
	new=$(dmesg | tail -n +$(($1 + 1)) | kernel_reports 'blocked for more than|waiting for .* to become free')
	[ -z "$new" ] && return 0
	printf '%s\n' "$new" | head -8 | sed 's/^/# | /'
	return 1
}
ok_exit() { # RC: a holder's bounded, clean end: success, or errors all flushed, or a failed verbs call
	case $1 in 0|1|2) return 0 ;; *) return 1 ;; esac
}
describe() { # RC of faults.py
	case $1 in
	0) echo "finished without error" ;; 1) echo "completion error, all work flushed" ;;
	2) echo "a verbs call failed or a device was taken away" ;; 3) echo "STALL" ;; 4) echo "LOST FLUSH" ;; 124|hung) echo "HUNG (killed)" ;;
	*) echo "exit $1" ;;
	esac
}

START=$SECONDS
# On the debug kernel (about ten times slower under TCG) only the create /
# traffic / delete cycles and the kmemleak scan run (section 6).
if [ "${RROCE_DEBUG_KERNEL:-0}" = 1 ]; then
	info "debug kernel: sections 1 to 5b (faults under load) are left to the test kernel"
else
topo_devices_up
wait_for 30 have_gids || info "IPv4 GIDs did not appear"

# --- 1. link down/up under traffic --------------------------------------------
S="link flap"
mark=$(dmesg_mark) sec=$SECONDS
bg_perftest "$S" flap ib_write_bw -s 65536 -D 20
# A long transport timeout (2^19 * 4.096 us = 2.1 s, 7 retries: 17 s): the
# holder's QPs can ride out the 3-second outage.
start_holder "$S" 40 --timeout 19 --stall 60
sleep 3
$B ip link set veth-b down
check "$S: rroce-a's port goes DOWN on carrier loss (rdma link)" wait_for 15 port_is rroce-a DOWN
check "$S: rroce-b's port goes DOWN on admin down (rdma link)" wait_for 15 port_is rroce-b DOWN
check "$S: ibv_devinfo shows PORT_DOWN on rroce-a" devinfo_is rroce-a PORT_DOWN
sleep 3
$B ip link set veth-b up
up_at=$SECONDS
check "$S: rroce-a's port is ACTIVE again" wait_for 15 port_is rroce-a ACTIVE
check "$S: rroce-b's port is ACTIVE again" wait_for 15 port_is rroce-b ACTIVE
check "$S: ibv_devinfo shows PORT_ACTIVE on both" wait_for 10 bash -c \
	'[ "$(ibv_devinfo -d rroce-a | grep -c PORT_ACTIVE)$(ibv_devinfo -d rroce-b | grep -c PORT_ACTIVE)" = 11 ]'
# Recovered means back at work in both directions a few timeouts after the
# link came back, not one request per timeout.
wait_exit $((up_at + 10 - SECONDS)) $HOLDER
side_rates "$HSTAT" 4
reap crc 90 $CPID
reap src 30 $SPID
reap hrc 120 $HOLDER
info "ib_write_bw client: exit $crc$(grep -ih 'error\|fail' /tmp/flap-client.log | head -1 | sed 's/^/ — /')"
info "ib_write_bw server: exit $src"
info "holder (2.1 s x 7 retries): $(describe $hrc): $(f_result "$HLOG")"
check "$S: ib_write_bw client and server ended within bounded time (done or error, no hang)" \
	test "$crc" != hung -a "$crc" != 124 -a "$src" != hung -a "$src" != 124
check "$S: holder's QPs failed with all work flushed, or recovered in both directions (4 s window 10 s after link up: rroce-a $RA, rroce-b $RB requests completed)" \
	bash -c "[ '$hrc' = 1 ] || [ '$hrc' = 2 ] || { [ '$hrc' = 0 ] && [ $RA -ge 20 ] && [ $RB -ge 20 ]; }"
pingpong "$S: a new ibv_rc_pingpong works after the flap (4 KiB x 50)" -n 50
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 1b. READ responses lost for a second -------------------------------------
# Both ends issue RDMA READs; for one second everything rroce-b sends is
# dropped (netem), so rroce-a's READ requests arrive but their responses are
# lost. Well within the retry budget, the READs must be recovered and READ
# traffic go on at its normal rate in both directions.
S="read responses lost"
mark=$(dmesg_mark) sec=$SECONDS
modprobe sch_netem 2>/dev/null
if ! $B tc qdisc add dev veth-b root netem loss 0% 2>/dev/null; then
	skip "$S: READ traffic across a one-way outage" "no netem qdisc"
else
	$B tc qdisc del dev veth-b root
	start_holder "$S" 16 --timeout 19 --stall 60 --ops read
	sleep 2
	$B tc qdisc add dev veth-b root netem loss 100%
	sleep 1
	$B tc qdisc del dev veth-b root
	sleep 8
	side_rates "$HSTAT" 4
	check "$S: READs from both ends run at their normal rate again 9 s after the outage (4 s window: rroce-a $RA, rroce-b $RB completed)" \
		test $RA -ge 20 -a $RB -ge 20
	reap hrc 120 $HOLDER
	info "holder: $(describe $hrc): $(f_result "$HLOG")"
	drain=$(fstat "$HSTAT" drain)
	check "$S: the READs outstanding when posting stopped completed within 6 s (took ${drain:-?} s; a READ per transport timeout would take much longer)" \
		bash -c "[ '$hrc' = 0 ] && awk -v d='${drain:--1}' 'BEGIN {exit !(d >= 0 && d <= 6)}'"
fi
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 2. MTU changes under traffic ---------------------------------------------
S="mtu change"
mark=$(dmesg_mark) sec=$SECONDS
bg_perftest "$S" mtu ib_send_bw -s 16384 -D 30
# Transport timeout 2^17 * 4.096 us = 0.5 s: a guest CPU busy for a moment
# under TCG does not exhaust the retries.
start_holder "$S" 40 --timeout 17
setmtu() { $A ip link set veth-a mtu "$1" && $B ip link set veth-b mtu "$1"; }
# 80 bytes of RoCEv2 headers: the IB MTU is the largest that fits. The QPs
# in flight keep their path MTU of 1024: their packets (at most 1084 bytes)
# fit every MTU but 1000, where they are too big for the link (the transfer
# may fail there or recover at 1500; both are allowed).
progress=""
for step in 1280:1024 9000:4096 1100:512 1000:512 1500:1024; do
	m=${step%:*} want=${step#*:}
	before=$(fstat "$HSTAT" ok)
	setmtu "$m"
	check "$S: netdev MTU $m under traffic -> active_mtu $want on both ports" \
		wait_for 10 bash -c "[ \"\$(ibv_devinfo -d rroce-a | awk '/active_mtu:/ {print \$2}')\$(ibv_devinfo -d rroce-b | awk '/active_mtu:/ {print \$2}')\" = $want$want ]"
	sleep 3
	progress="$progress MTU $m: +$(( $(fstat "$HSTAT" ok) - ${before:-0} )) ($(fstat "$HSTAT" state));"
done
info "holder's completions at each MTU:$progress"
reap crc 90 $CPID
reap src 30 $SPID
reap hrc 90 $HOLDER
info "ib_send_bw client: exit $crc$(grep -ih 'error\|fail' /tmp/mtu-client.log | head -1 | sed 's/^/ — /'), server: exit $src"
info "holder (path MTU 1024; at MTU 1000 its packets no longer fit): $(describe $hrc): $(f_result "$HLOG")"
check "$S: ib_send_bw client and server ended within bounded time" \
	test "$crc" != hung -a "$crc" != 124 -a "$src" != hung -a "$src" != 124
check "$S: holder ended within bounded time (done, or errors with all work flushed)" ok_exit "$hrc"
setmtu 9000
check "$S: at MTU 9000 the port offers 4096" wait_for 10 mtu_is rroce-a 4096
pingpong "$S: ibv_rc_pingpong with path MTU 4096 at netdev MTU 9000 (16 KiB x 20)" -m 4096 -s 16384 -n 20
setmtu 1500
check "$S: back at MTU 1500 the port offers 1024" wait_for 10 mtu_is rroce-a 1024
pingpong "$S: ibv_rc_pingpong at MTU 1500 afterwards (4 KiB x 50)" -n 50
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 3. rdma link delete while a process holds the device with traffic -------
S="link delete"
mark=$(dmesg_mark) sec=$SECONDS
if start_holder "$S" 15; then
	sleep 2
	before=$(fstat "$HSTAT" ok)
	rdma link delete rroce-a >/tmp/delete.log 2>&1 &
	del=$!
	t0=$SECONDS
	sleep 4
	if ! kill -0 $del 2>/dev/null; then
		info "the delete returned at once (the driver disassociates user contexts)"
		reap hrc 60 $HOLDER
		check "$S: the holder got errors and exited after the disassociation" test "$hrc" = 1 -o "$hrc" = 2
	else
		info "the delete waits for the holder to close the device (no disassociate_ucontext: the core waits for its users)"
		info "rroce-a listed while its delete waits: $(have_dev rroce-a && echo yes || echo no)"
		now=$(fstat "$HSTAT" ok)
		info "traffic while the delete waited: $((now - before)) completions"
		reap hrc 90 $HOLDER
		info "holder: $(describe $hrc): $(f_result "$HLOG")"
		check "$S: the holder ended within bounded time (done or errors, no stall)" ok_exit "$hrc"
	fi
	held=$((SECONDS - t0))
	reap drc 30 $del
	check "$S: rdma link delete returned within 30 s of the holder's exit (after $held s)" test "$drc" = 0
	check "$S: rroce-a is gone" no_dev rroce-a
	check "$S: rroce-b is unaffected (ACTIVE)" port_is rroce-b ACTIVE
	check "$S: the holder's QPs, CQs and MRs on rroce-b were released" wait_for 20 bash -c \
		"[ \$(( \$(rdma res show qp link rroce-b/1 | grep lqpn | grep -c ' pid ') + \$(rdma res show mr dev rroce-b | grep mrn | grep -c ' pid ') )) = 0 ]"
else
	kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
	rdma link delete rroce-a
fi
check "$S: rroce-a can be created again with the same name on the same netdev" $A rdma link add rroce-a type rroce netdev veth-a
pingpong "$S: the new rroce-a carries traffic (4 KiB x 50)" -n 50
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 3b. rdma link delete under an rdma_cm application (rping) ----------------
S="link delete under rping"
mark=$(dmesg_mark) sec=$SECONDS
# rdma_cm tells rping DEVICE_REMOVAL; ib_uverbs disassociates the context
# rping's librdmacm opened, so the delete waits for neither.
$B timeout 120 rping -s -C 1000000 -S 4096 -a $TOPO_B4 >/tmp/rping-server.log 2>&1 &
spid=$!
wait_for 30 bash -c "$B rdma res show cm_id | grep -q LISTEN" || sleep 3
$A timeout 120 rping -c -C 1000000 -S 4096 -a $TOPO_B4 >/tmp/rping-client.log 2>&1 &
cpid=$!
if wait_for 60 bash -c "rdma res show qp link rroce-a/1 | grep -q 'comm rping'"; then
	sleep 3
	kill -0 $cpid 2>/dev/null && info "rping is running" || info "rping ended early: $(tail -2 /tmp/rping-client.log | tr '\n' ' ')"
	t0=$SECONDS
	rdma link delete rroce-a >/tmp/delete.log 2>&1 &
	del=$!
	reap drc 60 $del
	check "$S: rdma link delete returns within 60 s (rdma_cm reports DEVICE_REMOVAL, rping lets go; took $((SECONDS - t0)) s)" test "$drc" = 0
	reap crc 30 $cpid
	info "rping client: exit $crc: $(grep -h 'removal\|error\|fail' /tmp/rping-client.log | head -2 | tr '\n' ' ')"
	check "$S: the rping client exited within bounded time" test "$crc" != hung -a "$crc" != 124
	reap src 60 $spid
	info "rping server: exit $src: $(tail -2 /tmp/rping-server.log | tr '\n' ' ')"
	check "$S: the rping server on rroce-b ended within bounded time" test "$src" != hung -a "$src" != 124
	check "$S: rroce-a is gone" no_dev rroce-a
else
	fail "$S: rping connected (client: $(tail -2 /tmp/rping-client.log | tr '\n' ' '))"
	kill $cpid $spid 2>/dev/null; wait $cpid $spid 2>/dev/null
	rdma link delete rroce-a 2>/dev/null
fi
check "$S: rroce-a can be created again" $A rdma link add rroce-a type rroce netdev veth-a
pingpong "$S: the new rroce-a carries traffic (4 KiB x 20)" -n 20
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 3c. the holder is killed (SIGKILL) while its device is being deleted -----
# The kill and the disassociation of its contexts race.
S="holder killed"
mark=$(dmesg_mark) sec=$SECONDS
if start_holder "$S" 60 --stall 30; then
	hpid=$(fstat "$HSTAT" pid)
	rdma link delete rroce-b >/tmp/delete.log 2>&1 &
	del=$!
	kill -9 "$hpid" 2>/dev/null
	reap hrc 30 $HOLDER
	check "$S: the holder is gone after SIGKILL mid-traffic ($(describe $hrc))" test "$hrc" != hung
	t0=$SECONDS
	reap drc 30 $del
	check "$S: rdma link delete rroce-b returned (status $drc, $((SECONDS - t0)) s after the holder ended)" test "$drc" = 0
	check "$S: rroce-b is gone" no_dev rroce-b
	check "$S: the killed holder's objects on rroce-a were released" wait_for 20 bash -c "[ \$(( \$(rdma res show qp link rroce-a/1 | grep lqpn | grep -c ' pid ') + \$(rdma res show mr dev rroce-a | grep mrn | grep -c ' pid ') + \$(rdma res show cq dev rroce-a | grep cqn | grep -c ' pid ') )) = 0 ]"
else
	kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
	rdma link delete rroce-b
fi
check "$S: rroce-b can be created again" $B rdma link add rroce-b type rroce netdev veth-b
pingpong "$S: the new rroce-b carries traffic (4 KiB x 20)" -n 20
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 3d. the netdev moves to another namespace under traffic -------------------
# A netdev leaving its namespace is unregistered there: rroce-a goes away
# (once its user lets go) and nothing of it may stay tied to veth-a.
S="netdev netns move"
mark=$(dmesg_mark) sec=$SECONDS
ip netns add rroce-c
if start_holder "$S" 60 --stall 30; then
	t0=$SECONDS
	check "$S: veth-a moves to namespace rroce-c under traffic" $A ip link set veth-a netns rroce-c
	reap hrc 60 $HOLDER
	info "holder: $(describe $hrc) after $((SECONDS - t0)) s: $(f_result "$HLOG")"
	check "$S: the holder got errors (not a hang) and exited" test "$hrc" = 1 -o "$hrc" = 2
	check "$S: rroce-a went away" wait_for 30 no_dev rroce-a
else
	kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
	ip netns exec $TOPO_A ip link set veth-a netns rroce-c
fi
ip -n rroce-c link set veth-a netns $TOPO_A
$A ip addr add $TOPO_A4/24 dev veth-a 2>/dev/null
$A ip link set veth-a up
check "$S: rroce-a can be created again on veth-a back home" $A rdma link add rroce-a type rroce netdev veth-a
pingpong "$S: the new rroce-a carries traffic (4 KiB x 20)" -n 20
ip netns del rroce-c
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 4. module unload attempts while user contexts are live --------------------
S="unload while held"
mark=$(dmesg_mark) sec=$SECONDS
# rroce disassociates user contexts, so the module unloads under a process
# that uses it: the process is told its devices are gone (DEVICE_FATAL).
if start_holder "$S" 30; then
	check "$S: modprobe -r rroce succeeds while the holder's contexts are open" timeout 60 modprobe -r rroce
	reap hrc 60 $HOLDER
	info "holder: $(describe $hrc): $(f_result "$HLOG")"
	check "$S: the holder learned its devices were taken away and exited" test "$hrc" = 2
else
	kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
	modprobe -r rroce
fi
check "$S: unloading removed both devices" test "$(dev_count)" = 0
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

# --- 5. netdev removal while a process holds the device with traffic ----------
S="netdev removal"
mark=$(dmesg_mark) sec=$SECONDS
modprobe rroce
$A rdma link add rroce-a type rroce netdev veth-a
$B rdma link add rroce-b type rroce netdev veth-b
wait_for 30 have_gids
if start_holder "$S" 60 --stall 30; then
	$A ip link del veth-a >/tmp/linkdel.log 2>&1 &
	ipdel=$!
	t0=$SECONDS
	reap hrc 60 $HOLDER
	info "holder: $(describe $hrc) after $((SECONDS - t0)) s: $(f_result "$HLOG")"
	check "$S: the holder got errors (not a hang) and exited" test "$hrc" = 1 -o "$hrc" = 2
	reap irc 60 $ipdel
	check "$S: ip link del returned within 60 s of the holder's exit (after $((SECONDS - t0)) s)" test "$irc" = 0
	check "$S: rroce-a and rroce-b went away with the veth pair" wait_for 30 bash -c "! rdma link show rroce-a/1 && ! rdma link show rroce-b/1"
else
	kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
	$A ip link del veth-a
fi
info "module refcount: $(cat /sys/module/rroce/refcnt 2>/dev/null)"
check "$S: modprobe -r rroce then succeeds (nothing leaked a reference)" wait_for 10 modprobe -r rroce
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"
topo_down

# --- 5b. namespace deletion while a process holds the device with traffic ------
S="netns removal"
mark=$(dmesg_mark) sec=$SECONDS
topo_devices_up
wait_for 30 have_gids
if start_holder "$S" 60 --stall 30; then
	t0=$SECONDS
	ip netns del $TOPO_A
	reap hrc 60 $HOLDER
	info "holder: $(describe $hrc) after $((SECONDS - t0)) s: $(f_result "$HLOG")"
	check "$S: the holder got errors (not a hang) and exited" test "$hrc" = 1 -o "$hrc" = 2
	check "$S: rroce-a and rroce-b went away with the namespace's veth" wait_for 60 bash -c "! rdma link show rroce-a/1 && ! rdma link show rroce-b/1"
else
	kill $HOLDER 2>/dev/null; wait $HOLDER 2>/dev/null
	ip netns del $TOPO_A
fi
ip netns del $TOPO_B 2>/dev/null
check "$S: both namespaces are gone" wait_for 30 bash -c "! ip netns list | grep -q rroce-"
# Unloading waits for the namespaces' teardown (pernet exit): a teardown stuck
# on a netdev reference would hang it.
modprobe -r rroce &
rm_pid=$!
reap rmrc 90 $rm_pid
check "$S: modprobe -r rroce after the namespaces' teardown (returned: $rmrc)" test "$rmrc" = 0
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"

fi # sections 1 to 5b

# --- 6. create / traffic / delete cycles ----------------------------------------
S="cycles"
mark=$(dmesg_mark) sec=$SECONDS
budget=${RROCE_FAULT_CYCLE_SECONDS:-60}
topo_up
A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
modprobe rroce
mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
kmemleak_start
n=0 bad="" uv=""
cstart=$SECONDS
while [ $n -lt 100 ] && [ $((SECONDS - cstart)) -lt "$budget" ]; do
	if ! $A rdma link add rroce-a type rroce netdev veth-a || ! $B rdma link add rroce-b type rroce netdev veth-b; then
		bad="cycle $((n + 1)): rdma link add failed"; break
	fi
	if ! wait_for 20 have_gids; then bad="cycle $((n + 1)): no IPv4 GID within 20 s"; break; fi
	ga=$(gidx rroce-a $TOPO_A4) gb=$(gidx rroce-b $TOPO_B4)
	$B timeout 60 ibv_rc_pingpong -d rroce-b -g "$gb" -n 20 >/tmp/cyc-server.log 2>&1 &
	spid=$!
	wait_for 20 listening $TOPO_B 18515
	$A timeout 60 ibv_rc_pingpong -d rroce-a -g "$ga" -n 20 $TOPO_B4 >/tmp/cyc-client.log 2>&1
	rc=$?
	reap src 30 $spid
	if [ $rc != 0 ] || [ "$src" != 0 ]; then
		bad="cycle $((n + 1)): ibv_rc_pingpong failed (client $rc, server $src): $(tail -2 /tmp/cyc-client.log | tr '\n' ' ')"; break
	fi
	uv=$(ls /sys/class/infiniband_verbs 2>/dev/null | grep uverbs | tr '\n' ' ')
	if ! rdma link delete rroce-a || ! rdma link delete rroce-b; then
		bad="cycle $((n + 1)): rdma link delete failed"; break
	fi
	n=$((n + 1))
done
info "$n cycles in $((SECONDS - cstart)) s (bound: 100 cycles or $budget s); uverbs devices in the last cycle: $uv"
if [ -z "$bad" ]; then pass "$S: $n x (create two devices, ibv_rc_pingpong 4 KiB x 20, delete)"
else fail "$S: create / traffic / delete cycles ($bad; $n cycles succeeded)"; fi
check "$S: uverbs minors are reused (no leaked char device): the last cycle had uverbs0 and uverbs1 only" \
	test "$uv" = "uverbs0 uverbs1 "
check "$S: no rroce device left" test "$(dev_count)" = 0
# The module stayed loaded through the cycles, so its frames resolve.
kmemleak_check "$S: "
check "$S: the module unloads at the end" modprobe -r rroce
check "$S: no kernel report" no_reports_since "$mark"
info "($S: $((SECONDS - sec)) s)"
topo_down
info "total $((SECONDS - START)) s"
finish
