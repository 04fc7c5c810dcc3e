#!/bin/bash
# An MPI program over rroce: Open MPI (PML ucx) runs selftests/mpi_pingpong.c,
# compiled here with mpicc, as two ranks, one in each namespace of the
# standard topology. Open MPI's launcher treats the namespaces as hosts:
# selftests/netns_rsh is its remote shell. The ping-pong (64 B to 1 MiB)
# and an MPI_Allreduce are checked by the program on both ranks. The
# launcher's own traffic goes by TCP over the veth; the MPI data must go
# over rroce: each device sends at least one packet per 4 KiB (the largest
# RoCE MTU) of the messages, and neither namespace sends that many TCP
# segments. Settings and why: docs/middleware.md.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
RSH=$HERE/netns_rsh
MPI_TIMEOUT=$(on_debug_kernel 600 120)

if ! command -v mpirun >/dev/null || ! command -v mpicc >/dev/null; then
	skip "MPI over rroce" "mpirun or mpicc is missing (Debian's openmpi-bin, libopenmpi-dev)"
	finish
fi
if ! ompi_info 2>/dev/null | grep -q 'MCA pml: ucx'; then
	skip "MPI over rroce" "this Open MPI has no UCX PML (ompi_info lists no 'MCA pml: ucx')"
	finish
fi

work=$(mktemp -d /tmp/mpi.XXXXXX)
trap 'rm -rf "$work"' EXIT
check "mpicc compiles mpi_pingpong.c" mpicc -O2 -Wall -o "$work/mpi_pingpong" "$HERE/mpi_pingpong.c"
[ -x "$work/mpi_pingpong" ] || finish

topo_devices_up
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export UCX_UD_VERBS_ETH_DGID_CHECK=n
tcp_out() { ip netns exec "$1" awk '/^Tcp:/ && n++ {print $12}' /proc/net/snmp; }

# mpi TLS [mpirun option...]: runs the program, one rank per namespace, with
# UCX_TLS=TLS; mpirun starts in namespace A through the same agent, so that
# A is its local host. Output in $work/out; sets MPI_RC.
mpi() {
	local tls=$1; shift
	UCX_TLS=$tls timeout "$MPI_TIMEOUT" "$RSH" $TOPO_A mpirun -np 2 --host $TOPO_A,$TOPO_B \
		--prtemca plm_ssh_agent "$RSH" \
		--mca pml ucx --mca btl self --mca osc ^ucx \
		-x UCX_TLS -x UCX_UD_VERBS_ETH_DGID_CHECK "$@" \
		"$work/mpi_pingpong" >"$work/out" 2>&1
	MPI_RC=$?
}

for tls in rc_verbs,ud_verbs,self ud_verbs,self; do
	pa0=$(cnt rroce-a sent_pkts) pb0=$(cnt rroce-b sent_pkts)
	ta0=$(tcp_out $TOPO_A) tb0=$(tcp_out $TOPO_B)
	start=$SECONDS
	# UCX names the transport of each tagged-message protocol it selects.
	UCX_PROTO_INFO='*tag*' mpi $tls -x UCX_PROTO_INFO
	took=$((SECONDS - start))
	pa1=$(cnt rroce-a sent_pkts) pb1=$(cnt rroce-b sent_pkts)
	ta1=$(tcp_out $TOPO_A) tb1=$(tcp_out $TOPO_B)
	if [ $MPI_RC = 0 ] && grep -q '^PASS mpi_pingpong' "$work/out"; then
		pass "UCX_TLS=$tls: ping-pong 64 B to 1 MiB and allreduce, verified on both ranks ($took s)"
		grep -E '^(rank 0 on|pingpong +(64|4096|65536|1048576) B|allreduce|each rank)' "$work/out" | sed 's/^/# /'
	else
		fail "UCX_TLS=$tls: ping-pong and allreduce (mpirun exit $MPI_RC after $took s)"
		grep -v '^\[' "$work/out" | tail -15 | sed 's/^/# | /'
		continue
	fi
	# UCX_PROTO_INFO's table rows end with the transport/device of each range.
	t=${tls%%,*}
	grep -E "\| $t/rroce-a:1 \|" "$work/out" | head -3 | sed 's/^\[[^]]*\] */# /'
	check "UCX_TLS=$tls: UCX sent the tagged messages by $t on rroce-a:1 and rroce-b:1" \
		sh -c "grep -qE '\| $t/rroce-a:1 \|' '$work/out' && grep -qE '\| $t/rroce-b:1 \|' '$work/out'"
	check "UCX_TLS=$tls: rank 0 ran in namespace $TOPO_A on rroce-a, rank 1 in $TOPO_B on rroce-b" \
		grep -q "^rank 0 on $TOPO_A (UCX_NET_DEVICES=rroce-a:1), rank 1 on $TOPO_B (UCX_NET_DEVICES=rroce-b:1)" "$work/out"
	bytes=$(sed -n 's/^each rank sent \([0-9]*\) B.*/\1/p' "$work/out")
	min=$((${bytes:-0} / 4096))
	info "rroce packets sent: rroce-a $((pa1 - pa0)), rroce-b $((pb1 - pb0)); TCP segments sent: $TOPO_A $((ta1 - ta0)), $TOPO_B $((tb1 - tb0)); each rank sent $bytes B"
	check "UCX_TLS=$tls: the messages went over rroce (each device sent at least $min packets), not TCP (fewer than $min segments in each namespace)" \
		test "$min" -gt 1000 -a $((pa1 - pa0)) -ge "$min" -a $((pb1 - pb0)) -ge "$min" \
		-a $((ta1 - ta0)) -lt "$min" -a $((tb1 - tb0)) -lt "$min"
done

# The program's check can fail: rank 1 flips one byte of its first answer.
mpi rc_verbs,ud_verbs,self -x MPI_PINGPONG_CORRUPT=1
check "a byte corrupted by rank 1 fails the run (exit 1, FAIL line)" \
	sh -c "[ $MPI_RC = 1 ] && grep -q '^FAIL mpi_pingpong' '$work/out'"
grep -m1 'byte .* is 0x' "$work/out" | sed 's/^/# /'

topo_devices_down
finish
