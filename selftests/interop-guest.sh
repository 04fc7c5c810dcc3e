#!/bin/bash
# One side of the interop run (scripts/interop): DRIVER is rroce or rdma_rxe,
# PEER is the other guest's eth0 address. Both guests walk the same list of
# steps; in each, one serves and the other connects (retrying until the
# server listens), so they stay in step.
. /rroce/selftests/lib.sh
SUITE=interop
drv=$1 peer=$2
if [ "$drv" = rroce ]; then modprobe rroce; rdma link add dev0 type rroce netdev eth0
else modprobe rdma_rxe; rdma link add dev0 type rxe netdev eth0; fi
step() { # server-side ("rroce"/"rdma_rxe") what cmd...
	local server=$1 what=$2; shift 2
	if [ "$server" = "$drv" ]; then
		if timeout 240 "$@" >/tmp/step.log 2>&1; then pass "$what ($drv serves)"
		else fail "$what ($drv serves)"; tail -4 /tmp/step.log | sed 's/^/# | /'; fi
	else
		local ok=0
		for i in $(seq 1 60); do
			if timeout 240 "$@" "$peer" >/tmp/step.log 2>&1; then ok=1; break; fi
			grep -q "Couldn't connect\|Unable to open\|Connection refused\|Failed to connect" /tmp/step.log || break
			sleep 2
		done
		if [ $ok = 1 ]; then pass "$what ($drv connects)"; info "$(grep -E '^ *65536 |iters in' /tmp/step.log | tail -1)"
		else fail "$what ($drv connects)"; tail -4 /tmp/step.log | sed 's/^/# | /'; fi
	fi
	sleep 1
}
for server in rroce rdma_rxe; do
	step $server "ibv_rc_pingpong 4 KiB x 100" ibv_rc_pingpong -d dev0 -g 1 -n 100
	step $server "ib_write_bw 64 KiB x 200" ib_write_bw -d dev0 -x 1 -F -s 65536 -n 200
	step $server "ib_read_bw 64 KiB x 200" ib_read_bw -d dev0 -x 1 -F -s 65536 -n 200
	step $server "ibv_ud_pingpong 512 B x 100" ibv_ud_pingpong -d dev0 -g 1 -s 512 -n 100
	step $server "ibv_rc_pingpong over IPv6 GIDs 4 KiB x 50" ibv_rc_pingpong -d dev0 -g 2 -n 50
	# rdma_rxe drops FLUSHes with the specified ICRC (it sums FLUSH headers
	# twice; rroce takes its FLUSHes): from rroce to rdma_rxe, no FLUSH.
	if [ $server = rdma_rxe ]; then flush=--no-flush what="WRITE and ATOMIC WRITE, no FLUSH"
	else flush=--flush what="WRITE, FLUSH and ATOMIC WRITE"; fi
	step $server "$what (pyverbs)" env PYTHONPATH=/rroce/selftests \
		python3 /rroce/selftests/placement_peer.py --dev dev0 $flush
done
if [ "$drv" = rroce ]; then
	for c in rcvd_pkts rcvd_icrc_err rcvd_rdma_rxe_flush_icrc rcvd_malformed sent_pkts; do
		info "rroce $c $(cat /sys/class/infiniband/dev0/ports/1/hw_counters/$c)"
	done
	check "rdma_rxe's FLUSHes were taken with its own ICRC" test "$(cat /sys/class/infiniband/dev0/ports/1/hw_counters/rcvd_rdma_rxe_flush_icrc)" -gt 0
	check "rdma_rxe's packets all passed rroce's ICRC check" test "$(cat /sys/class/infiniband/dev0/ports/1/hw_counters/rcvd_icrc_err)" = 0
fi
rdma link delete dev0
finish
