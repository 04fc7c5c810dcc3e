# Helpers for rroce's in-guest selftests. Source from a test script.
# Output is KTAP, as kselftests print it: "TAP version 13", one result line
# per check ("ok N <suite>: <what>", "not ok N ...", "ok N ... # SKIP
# <why>"), diagnostics as "# ..." lines, the plan "1..N" and the totals at
# the end (finish). The exit code is kselftest's: 0 passed, 1 a check
# failed, 4 (KSFT_SKIP) only skips. Checks are numbered through the file
# KTAP_RESULTS (one word per result), so the Python helpers (verbs.py)
# number theirs in the same sequence.
set -u
SUITE=${SUITE:-$(basename "$0" .sh)}
KSFT_PASS=0 KSFT_FAIL=1 KSFT_SKIP=4
T_FAILED=0
# on_debug_kernel N M: N on the KASAN/lockdep/kmemleak kernel (scripts/check
# sets RROCE_DEBUG_KERNEL=1 there; about ten times slower under TCG), M
# elsewhere. For repetition counts and time budgets, never for what is checked.
on_debug_kernel() { if [ "${RROCE_DEBUG_KERNEL:-0}" = 1 ]; then echo "$1"; else echo "$2"; fi; }
# kernel_reports [EXTRA-ERE] <log: the kernel reports in a kernel log, by
# the one scan the guest's own check uses (scripts/kernel-reports); empty
# for a clean log. STALL_REPORTS is the extra for tests that let user space
# or a peer drive loops: a task or CPU held up.
KERNEL_REPORTS=$(cd "$(dirname "${BASH_SOURCE[0]}")/../scripts" && pwd)/kernel-reports
kernel_reports() { "$KERNEL_REPORTS" "$@"; }
STALL_REPORTS='hung_task|blocked for more than|soft lockup|rcu.*stall'
# Tools that are not tests (demo, bench) set KTAP_HEADER=0.
if [ -z "${KTAP_RESULTS:-}" ]; then
	KTAP_RESULTS=$(mktemp /tmp/ktap.XXXXXX)
	# Checks run as an unprivileged user (test_hostile_user) record theirs too.
	chmod 666 "$KTAP_RESULTS"
	export KTAP_RESULTS
	[ "${KTAP_HEADER:-1}" = 0 ] || echo "TAP version 13"
fi

ktap_result() { # pass|fail|skip: records one result, prints its number
	echo "$1" >>"$KTAP_RESULTS"
	wc -l <"$KTAP_RESULTS"
}
pass() { echo "ok $(ktap_result pass) $SUITE: $*"; }
fail() { echo "not ok $(ktap_result fail) $SUITE: $*"; T_FAILED=1; }
skip() { echo "ok $(ktap_result skip) $SUITE: $1 # SKIP $2"; }
info() { echo "# $*"; }

# py_checks [prefix...] <<'PY': runs the Python checks on stdin with this
# directory on the module path (a prefix such as `env VAR=value` goes before
# python3). An exception ends them with a failed check of its own
# (verbs.Checks); a crash (a signal) would end them silently, so it is one.
py_checks() {
	PYTHONPATH=$(dirname "$0") "$@" python3 -
	local rc=$?
	if [ $rc -gt 128 ]; then fail "the Python checks were ended by signal $((rc - 128)); the ones after it did not run"; fi
	return 0
}
# check "what" command...: passes when the command succeeds.
check() {
	local what=$1; shift
	local out
	if out=$("$@" 2>&1); then pass "$what"; else fail "$what"; printf '%s\n' "$out" | sed 's/^/# | /' | tail -20; fi
}
# check_fails "what" command...: passes when the command fails.
check_fails() {
	local what=$1; shift
	local out
	if out=$("$@" 2>&1); then fail "$what (unexpectedly succeeded)"; printf '%s\n' "$out" | sed 's/^/# | /' | tail -10
	else pass "$what"; info "error was: $(printf '%s' "$out" | tail -1)"; fi
}
# wait_for SECONDS command...: polls until the command succeeds.
wait_for() {
	local t=$1; shift
	local end=$((SECONDS + t))
	while ! "$@" >/dev/null 2>&1; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.2
	done
}

# helper_module NAME: path of the test-only module NAME.ko, built for the
# kernel booted (scripts/vm puts those in /job/modules), else the tree's build.
helper_module() {
	if [ -f "/job/modules/$1.ko" ]; then echo "/job/modules/$1.ko"
	else echo "$(dirname "$(readlink -f "$0")")/modules/$1.ko"; fi
}

# Device helpers.
have_dev() { rdma link show "$1/1" >/dev/null 2>&1; }
no_dev() { ! have_dev "$1"; }
dev_count() { rdma -j link show 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
# kmemleak_start; ...; kmemleak_check [LABEL: ]: no object leaked since the
# start whose backtrace passes through rroce, ib_core or ib_uverbs (one
# record per "unreferenced object"; frames read "func+0x../0x.. [module]",
# so the modules' frames must still resolve: scan before they unload if the
# leak could be theirs). A skip on kernels without kmemleak.
KMEMLEAK=/sys/kernel/debug/kmemleak
kmemleak_start() { if [ -w $KMEMLEAK ]; then echo clear >$KMEMLEAK; fi; }
kmemleak_check() {
	if [ ! -e $KMEMLEAK ]; then
		skip "${1:-}kmemleak scan for leaks in rroce/ib_core/ib_uverbs" \
			"this kernel has no /sys/kernel/debug/kmemleak (CONFIG_DEBUG_KMEMLEAK is in the debug kernel only)"
		return
	fi
	echo scan >$KMEMLEAK; sleep 5; echo scan >$KMEMLEAK
	local leaks
	leaks=$(awk 'BEGIN {RS = "unreferenced object"} NR > 1 && /\[(rroce|ib_core|ib_uverbs)\]/ {n++} END {print n + 0}' $KMEMLEAK)
	if [ "$leaks" = 0 ]; then pass "${1:-}kmemleak finds no leak in rroce, ib_core or ib_uverbs"
	else fail "${1:-}kmemleak reports $leaks leaked objects from rroce/ib_core/ib_uverbs"; head -40 $KMEMLEAK | sed 's/^/# | /'; fi
}
load_rroce() { lsmod | grep -q '^rroce ' || modprobe rroce; }
unload_all() {
	for d in $(rdma -j link show 2>/dev/null | python3 -c 'import json,sys; print(" ".join(l["ifname"] for l in json.load(sys.stdin)))'); do
		rdma link delete "$d" 2>/dev/null
	done
	modprobe -r rroce 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null
	rmmod rroce_dcb_sim 2>/dev/null
	true
}

# --- devices' counters and settings, and RoCEv2 packets on the wire
cnt() { cat /sys/class/infiniband/$1/ports/1/hw_counters/$2; }
qos() { echo "$3" >/sys/class/infiniband/$1/qos/$2; }

# gid_of DEV NETDEV [PREFIX]: index of the RoCE v2 GID of NETDEV on DEV
# whose text starts with PREFIX (default: IPv4-mapped). One grep reads the
# table's thousand entries; a process per entry takes minutes on the debug kernel.
gid_of() {
	local d=/sys/class/infiniband/$1/ports/1 f i
	for f in $(grep -lx -- "$2" "$d"/gid_attrs/ndevs/* 2>/dev/null); do
		i=${f##*/}
		[ "$(cat "$d/gid_attrs/types/$i" 2>/dev/null)" = "RoCE v2" ] || continue
		case $(cat "$d/gids/$i") in "${3:-0000:0000:0000:0000:0000:ffff:}"*) echo "$i"; return 0 ;; esac
	done
	return 1
}

gid6_of() { gid_of "$1" "$2" fd72:; }

# capture NS IFACE FILE: starts a capture of RoCEv2 traffic; stop with capture_end.
capture() {
	ip netns exec "$1" dumpcap -q -i "$2" -w "$3" -f "udp port 4791" 2>/dev/null &
	CAP=$!
	wait_for 60 test -s "$3"
}
capture_end() { sleep 1; kill $CAP; wait $CAP 2>/dev/null; }
# fields FILE FILTER FIELD...: the fields of the matching packets, one line each.
fields() {
	local f=$1 flt=$2; shift 2
	tshark -r "$f" -Y "$flt" -T fields $(printf -- '-e %s ' "$@") 2>/dev/null
}
check_all() { # WHAT FILE FILTER FIELD VALUE: every matching packet has FIELD = VALUE, and there are some
	local what=$1 f=$2 flt=$3 field=$4 want=$5 vals
	vals=$(fields "$f" "$flt" "$field" | sort | uniq -c | tr -s ' ' | sed 's/^ //' | tr '\n' ';')
	info "$field of '$flt': $vals"
	check "$what" sh -c 'echo "$1" | grep -qxE "[0-9]+ $2;"' _ "$vals" "$want"
}

# The standard two-host topology: namespaces rroce-a and rroce-b joined by a
# veth pair, addresses from the benchmarking range 198.18.0.0/15 and a ULA
# prefix. Prints nothing; undo with topo_down.
TOPO_A=rroce-a TOPO_B=rroce-b
TOPO_A4=198.18.0.1 TOPO_B4=198.18.0.2
TOPO_A6=fd72:6f63:6501::1 TOPO_B6=fd72:6f63:6501::2
topo_up() {
	ip netns add $TOPO_A
	ip netns add $TOPO_B
	ip link add veth-a netns $TOPO_A type veth peer name veth-b netns $TOPO_B
	for side in A B; do
		local ns=TOPO_$side v4=TOPO_${side}4 v6=TOPO_${side}6 dev=veth-${side,,}
		ip -n "${!ns}" link set lo up
		ip -n "${!ns}" addr add "${!v4}/24" dev "$dev"
		ip -n "${!ns}" -6 addr add "${!v6}/64" dev "$dev" nodad
		ip -n "${!ns}" link set "$dev" up
	done
}
topo_down() {
	ip netns del $TOPO_A 2>/dev/null
	ip netns del $TOPO_B 2>/dev/null
	true
}

# The standard topology with one rroce device per namespace: rroce-a on
# veth-a, rroce-b on veth-b. Sets $A and $B, which run a command in either
# namespace. Undo with topo_devices_down.
topo_devices_up() {
	modprobe rroce
	topo_up
	A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
	$A rdma link add rroce-a type rroce netdev veth-a
	$B rdma link add rroce-b type rroce netdev veth-b
}
topo_devices_down() {
	$A rdma link delete rroce-a
	$B rdma link delete rroce-b
	topo_down
}

# slow_disk_up: a slow disk for on-demand paging that faults for long:
# null_blk completing each request from a timer after 3 s (its requests time
# out at 5 s), read without readahead, so that every page faulted in from it
# costs one such read. Sets SLOW_DISK (/dev/nullb0, or empty) and SLOW_WHY
# (why it is empty), exports both, and unloads null_blk at exit.
slow_disk_up() {
	modprobe -r null_blk 2>/dev/null
	SLOW_DISK= SLOW_WHY="null_blk did not load"
	if modprobe null_blk nr_devices=1 gb=1 irqmode=2 completion_nsec=3000000000 && wait_for 10 test -b /dev/nullb0 &&
		echo 0 >/sys/block/nullb0/queue/read_ahead_kb; then
		trap 'modprobe -r null_blk 2>/dev/null' EXIT
		# A null_blk loaded before, which could not be unloaded, keeps its own parameters.
		if [ "$(cat /sys/module/null_blk/parameters/completion_nsec)" = 3000000000 ] &&
			[ "$(cat /sys/module/null_blk/parameters/irqmode)" = 2 ]; then
			SLOW_DISK=/dev/nullb0
		else
			SLOW_WHY="null_blk was loaded already, with other parameters"
		fi
	fi
	export SLOW_DISK SLOW_WHY
}

# The plan, the totals and the exit code, from every result of this script
# (Python's included).
finish() {
	local n p f s
	n=$(wc -l <"$KTAP_RESULTS")
	p=$(grep -c '^pass$' "$KTAP_RESULTS")
	f=$(grep -c '^fail$' "$KTAP_RESULTS")
	s=$(grep -c '^skip$' "$KTAP_RESULTS")
	echo "1..$n"
	echo "# Totals: pass:$p fail:$f xfail:0 xpass:0 skip:$s error:0"
	rm -f "$KTAP_RESULTS"
	if [ "$f" -gt 0 ] || [ "$T_FAILED" != 0 ]; then exit $KSFT_FAIL; fi
	if [ "$p" = 0 ] && [ "$s" -gt 0 ]; then exit $KSFT_SKIP; fi
	exit $KSFT_PASS
}

# report WHAT COMMAND...: runs a check of the provider rroce is compared
# with (rdma_rxe) and prints its outcome; not a result of this test.
report() {
	local what=$1; shift
	if "$@" >/dev/null 2>&1; then info "rdma_rxe: $what: ok"; else info "rdma_rxe: $what: FAILED"; fi
}

# timed_fio LABEL DMESG_PATTERN COMMAND...: runs a fio verify command; sets
# FIO_RC and ELAPSED (its seconds), and on failure prints fio's error lines
# and the kernel's recent lines matching DMESG_PATTERN.
timed_fio() {
	local label=$1 pattern=$2 out start
	shift 2
	start=$SECONDS
	out=$("$@"); FIO_RC=$?
	ELAPSED=$((SECONDS - start))
	info "$label: fio exit $FIO_RC in $ELAPSED s"
	if [ $FIO_RC != 0 ]; then
		printf '%s\n' "$out" | grep -v '^3;' | tail -8 | sed 's/^/# | /'
		dmesg | grep -i "$pattern" | tail -15 | sed 's/^/# | /'
	fi
}

# run_pair WHAT SERVER_CMD... -- CLIENT_CMD...: runs a server in namespace B
# and its client in namespace A (client gets the server's address appended),
# each bounded by PAIR_TIMEOUT seconds, passes when both exit 0, and prints
# the client's last line. PAIR_REVERSE=1 puts the server in A and the client
# in B; with PAIR_EXPECT set, the client must also have printed a line
# matching that extended regular expression, and that line is the one shown.
PAIR_TIMEOUT=${PAIR_TIMEOUT:-300}
run_pair() {
	local what=$1; shift
	local srv=() cli=() srv_ns=$TOPO_B cli_ns=$TOPO_A addr=$TOPO_B4 expect=${PAIR_EXPECT:-}
	if [ "${PAIR_REVERSE:-0}" = 1 ]; then srv_ns=$TOPO_A cli_ns=$TOPO_B addr=$TOPO_A4; fi
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	ip netns exec $srv_ns timeout "$PAIR_TIMEOUT" "${srv[@]}" >/tmp/pair-server.log 2>&1 &
	local pid=$!
	sleep 2
	local t0=$SECONDS
	ip netns exec $cli_ns timeout "$PAIR_TIMEOUT" "${cli[@]}" $addr >/tmp/pair-client.log 2>&1
	local rc=$?
	# A loaded host may start the server later than 2 s: a client that
	# failed at once while the server still waits is tried once more.
	if [ $rc != 0 ] && [ $((SECONDS - t0)) -lt 10 ] && kill -0 $pid 2>/dev/null; then
		info "$what: the client failed at once (status $rc) while the server waited; trying it again in 3 s"
		sed 's/^/# | first client: /' /tmp/pair-client.log | tail -3
		sleep 3
		ip netns exec $cli_ns timeout "$PAIR_TIMEOUT" "${cli[@]}" $addr >/tmp/pair-client.log 2>&1
		rc=$?
	fi
	wait $pid; local src=$?
	if [ $rc = 0 ] && [ $src = 0 ] && { [ -z "$expect" ] || grep -qE "$expect" /tmp/pair-client.log; }; then
		pass "$what"
		if [ -n "$expect" ]; then
			info "$(grep -E "$expect" /tmp/pair-client.log | tail -1 | tr -s ' ')"
		else
			info "$(grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/pair-client.log | tail -1 | tr -s ' ')$(grep -h 'iters in\|bytes in' /tmp/pair-client.log | tail -1)"
		fi
	else
		fail "$what (client $rc, server $src)"
		# Error messages go to stderr, unbuffered, so they sit above the tail.
		grep -ih "error\|fail\|fatal\|couldn't\|status" /tmp/pair-client.log /tmp/pair-server.log | head -6 | sed 's/^/# | /'
		sed 's/^/# | client: /' /tmp/pair-client.log | tail -6
		sed 's/^/# | server: /' /tmp/pair-server.log | tail -6
	fi
}
