#!/bin/bash
# Middleware over rroce, run as its users run it, between the two namespaces
# of the standard topology: UCX (ucx_perftest's UCP tests over ud_verbs, and
# over rc_verbs with ud_verbs for wire-up, in both directions) and rsockets
# under an unmodified socket program (rstream -T s with librspreload), which
# must move its data over RDMA, not TCP. The settings each needs on RoCE,
# and why, are in docs/middleware.md (libfabric's are there too; its
# fi_pingpong finds no endpoint in this topology yet, see that page).
. "$(dirname "$0")/lib.sh"
RSPRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so

# Each pair has 120 s; a run passes when both ends exit 0 and the client
# printed its result line ($PAIR_EXPECT, see run_pair).
PAIR_TIMEOUT=120

topo_devices_up

# UCX: UCP tests (UCT's would name one transport: UCP picks and wires up as
# applications do). Debian's ucx_perftest is built with MPI: -P 0 runs it
# as a plain client and server.
if ! command -v ucx_perftest >/dev/null; then
	skip "UCX ucx_perftest" "ucx_perftest is not installed (Debian's ucx-utils)"
else
	PAIR_EXPECT='^Final:'
	UCX="UCX_UD_VERBS_ETH_DGID_CHECK=n ucx_perftest -P 0 -p 13337 -n 100 -w 10"
	for tls in ud_verbs,self rc_verbs,ud_verbs,self; do
		for run in "tag_lat 64" "tag_bw 64" "tag_bw 1048576" "ucp_put_bw 65536" "ucp_am_bw 4096"; do
			set -- $run
			run_pair "UCX $tls: $1, $2 B, 100 messages" \
				env UCX_NET_DEVICES=rroce-b:1 UCX_TLS=$tls $UCX -- \
				env UCX_NET_DEVICES=rroce-a:1 UCX_TLS=$tls $UCX -t $1 -s $2
		done
		# The other way: namespace B's process sends.
		PAIR_REVERSE=1 run_pair "UCX $tls: tag_bw, 1 MiB, 100 messages, from the other side" \
			env UCX_NET_DEVICES=rroce-a:1 UCX_TLS=$tls $UCX -- \
			env UCX_NET_DEVICES=rroce-b:1 UCX_TLS=$tls $UCX -t tag_bw -s 1048576
	done
fi

# rsockets: a plain socket program, its TCP connection turned into an RDMA one.
tcp_out() { $A awk '/^Tcp:/ && n++ {print $12}' /proc/net/snmp; }
if [ ! -e "$RSPRELOAD" ]; then
	skip "rsockets under an unmodified socket program" "$RSPRELOAD is missing (Debian's librdmacm1)"
else
	t0=$(tcp_out) p0=$(cnt rroce-a sent_pkts)
	PAIR_EXPECT='^custom +[0-9]+[kmg]? +200 '
	run_pair "rstream -T s (socket calls) under librspreload, 200 x 4 KiB" \
		env LD_PRELOAD=$RSPRELOAD rstream -T s -S 4096 -C 200 -- \
		env LD_PRELOAD=$RSPRELOAD rstream -T s -S 4096 -C 200 -s
	t1=$(tcp_out) p1=$(cnt rroce-a sent_pkts)
	info "namespace A: TCP segments sent $t0 -> $t1; rroce-a packets sent $p0 -> $p1"
	check "its data went over rroce (rroce-a sent at least 200 packets), not TCP (no TCP segment sent)" \
		test $((p1 - p0)) -ge 200 -a "$t1" = "$t0"
fi

topo_devices_down
finish
