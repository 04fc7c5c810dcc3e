#!/bin/bash
# Packet fuzzing of live QPs (selftests/fuzz_packets.py): a fake peer in
# rroce-a sends valid-looking, mutated RoCEv2 packets with correct ICRCs to
# RC, UC and UD QPs of rroce-b while a healthy RC pair on rroce-b keeps
# moving verified data. Short run by default (at most 100000 packets or
# 120 s, 40 s on the debug kernel: about 800 packets/s under TCG, so the
# time bound ends it);
# FUZZ_PACKETS, FUZZ_SECONDS and FUZZ_SEED change it. A long run (10^6
# packets) calls this script directly, as run-all.sh stops a test after 900 s:
#   scripts/vm run --no-build --timeout 14400 -- \
#       env FUZZ_PACKETS=1000000 FUZZ_SECONDS=13000 bash /rroce/selftests/test_fuzz.sh
. "$(dirname "$0")/lib.sh"
packets=${FUZZ_PACKETS:-100000} secs=${FUZZ_SECONDS:-$(on_debug_kernel 40 120)}
modprobe rroce
topo_up
B="ip netns exec $TOPO_B"
$B rdma link add rroce-b type rroce netdev veth-b
ip -n $TOPO_A addr add 198.18.0.3/24 dev veth-a
mark="rroce selftest test_fuzz start $$"
echo "$mark" >/dev/kmsg
info "long run: scripts/vm run --no-build --timeout 14400 -- env FUZZ_PACKETS=1000000 FUZZ_SECONDS=13000 bash /rroce/selftests/test_fuzz.sh"

PYTHONPATH=$(dirname "$0") timeout $((secs + 300)) python3 "$(dirname "$0")/fuzz_packets.py" \
	--packets "$packets" --seconds "$secs" ${FUZZ_SEED:+--seed "$FUZZ_SEED"}
rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || fail "fuzz_packets.py exited with status $rc"
r=$(dmesg | sed -n "/$mark/,\$p" | kernel_reports)
check "no kernel warning, BUG or Oops while fuzzing" test -z "$r"
[ -z "$r" ] || printf '%s\n' "$r" | head -20 | sed 's/^/# | /'
check "rdma link delete" $B rdma link delete rroce-b
topo_down
check "module unloads (nothing leaked)" modprobe -r rroce
finish
