#!/bin/bash
# Runs the same perftest workloads over rroce and over the kernel's rdma_rxe
# in one guest boot (one driver loaded at a time: both claim
# RDMA_DRIVER_RXE) across the two-namespace topology, and prints ratios.
KTAP_HEADER=0 . /rroce/selftests/lib.sh
topo_up
A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
declare -A result
measure() { # driver linktype
	local drv=$1 type=$2
	modprobe "$drv"
	$A rdma link add bench-a type "$type" netdev veth-a
	$B rdma link add bench-b type "$type" netdev veth-b
	for t in write_bw read_bw send_bw; do
		$B timeout 300 ib_$t -d bench-b -x 1 -F -s 65536 -n 3000 --report_gbits >/dev/null 2>&1 &
		sleep 2
		result[$drv,$t]=$($A timeout 300 ib_$t -d bench-a -x 1 -F -s 65536 -n 3000 --report_gbits $TOPO_B4 2>/dev/null |
			awk '$1 == 65536 {print $4}')
		wait
	done
	for t in write_lat send_lat; do
		$B timeout 300 ib_$t -d bench-b -x 1 -F -s 2 -n 2000 >/dev/null 2>&1 &
		sleep 2
		result[$drv,$t]=$($A timeout 300 ib_$t -d bench-a -x 1 -F -s 2 -n 2000 $TOPO_B4 2>/dev/null |
			awk '$1 == 2 {print $5}')
		wait
	done
	$A rdma link delete bench-a; $B rdma link delete bench-b
	modprobe -r "$drv"
}
measure rroce rroce
measure rdma_rxe rxe
printf '%-10s %14s %14s %10s\n' test rroce rdma_rxe ratio
for t in write_bw read_bw send_bw write_lat send_lat; do
	unit=Gb/s; [[ $t == *lat ]] && unit=usec
	r=${result[rroce,$t]:-0} x=${result[rdma_rxe,$t]:-0}
	ratio=$(python3 -c "r,x=float('$r' or 0),float('$x' or 0); print(f'{r/x:.2f}' if x else 'n/a')")
	printf '%-10s %10s %-4s %10s %-4s %8s\n' "$t" "$r" "$unit" "$x" "$unit" "$ratio"
done
echo "(bandwidth: higher is better; latency: typical, lower is better; TCG guest, so relative numbers only)"
topo_down
