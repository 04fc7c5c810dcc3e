#!/bin/bash
# Work rroce spreads over the CPUs (a stream's runner, docs/data-path.md)
# never goes to an isolated CPU (isolcpus=, nohz_full=, cpuset isolated
# partitions), as unbound workqueues keep off them. Needs a boot with an
# isolated CPU: RROCE_VM_CMDLINE=isolcpus=1 scripts/vm run -- \
#   /rroce/selftests/run-all.sh test_isolated_cpus.sh
# A stream from a poster pinned to CPU 0 would send from another CPU;
# with CPU 1 isolated, it sends from CPU 0 (counted, as in test_streams,
# by the CPU each packet's receive processing ran on).
. "$(dirname "$0")/lib.sh"

isolated=$(cat /sys/devices/system/cpu/isolated 2>/dev/null)
if [ -z "$isolated" ] || [ "$(nproc --all)" -lt 2 ]; then
	skip "a stream keeps off isolated CPUs" "no isolated CPU in this boot (boot with isolcpus=1 to run it)"
	finish
fi
topo_devices_up

# Packets the receive processing of the isolated CPUs took, by the CPU
# number in column 13 of each online CPU's row.
on_isolated() {
	local n=0 processed cpu
	while read -r processed _ _ _ _ _ _ _ _ _ _ _ cpu _; do
		if cpu_in_list $((16#$cpu)) "$isolated"; then n=$((n + 16#$processed)); fi
	done </proc/net/softnet_stat
	echo $n
}
# cpu_in_list N LIST: N is in a CPU list such as "1,3-5".
cpu_in_list() {
	local part
	for part in ${2//,/ }; do
		case $part in
		*-*) [ "$1" -ge "${part%-*}" ] && [ "$1" -le "${part#*-}" ] && return 0 ;;
		*) [ "$1" = "$part" ] && return 0 ;;
		esac
	done
	return 1
}

N=4000
i0=$(on_isolated) p0=$(cnt rroce-a sent_pkts)
run_pair "ib_write_bw, 64 B, $N WRITEs, poster on CPU 0, CPUs $isolated isolated" \
	taskset -c 0 ib_write_bw -d rroce-b -x 1 -F -s 64 -n $N -- taskset -c 0 ib_write_bw -d rroce-a -x 1 -F -s 64 -n $N
iso=$(($(on_isolated) - i0)) sent=$(($(cnt rroce-a sent_pkts) - p0))
info "stream: rroce-a sent $sent packets; received on the isolated CPUs: $iso"
check "the stream's packets kept off the isolated CPUs (received there: $iso of $sent, at least $N sent)" \
	test "$sent" -ge $N -a "$iso" -lt $((N / 10))

topo_devices_down
finish
