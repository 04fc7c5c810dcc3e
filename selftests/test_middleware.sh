#!/bin/bash
# Middleware over rroce, run as its users run it, between the two namespaces
# of the standard topology: UCX (ucx_perftest's UCP tests over ud_verbs, and
# over rc_verbs with ud_verbs for wire-up, in both directions) and rsockets
# under an unmodified socket program (rstream -T s with librspreload), which
# must move its data over RDMA, not TCP; libfabric's verbs provider
# (fi_pingpong over MSG endpoints, and over ofi_rxm's RDM endpoints, its data
# checked). The settings each needs on RoCE, and why, are in
# docs/middleware.md.
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

# libfabric: fi_pingpong (Debian's libfabric-bin has no other test program;
# fabtests is not packaged). libfabric 2.1 takes every '-' in a device name
# for the start of a domain suffix ("-xrc", "-dgram") and then matches no
# domain to the device (ENODATA): the devices get names without one for
# this part. Each namespace sees both devices (shared netns mode), so each
# end names its own with -d. -c checks every message's bytes.
if ! command -v fi_pingpong >/dev/null; then
	skip "libfabric fi_pingpong" "fi_pingpong is not installed (Debian's libfabric-bin)"
else
	info "libfabric $(fi_info --version | sed -n 's/^libfabric: //p'), device named rroce-a: $($A env FI_UNIVERSE_SIZE=64 fi_info -p verbs -t FI_EP_MSG -n $TOPO_B4 2>&1 | grep -c '^provider:') MSG endpoint(s) towards $TOPO_B4 (0: fi_getinfo's ENODATA)"
	$A rdma dev set rroce-a name rroce_a
	$B rdma dev set rroce-b name rroce_b
	FI="env FI_UNIVERSE_SIZE=64 fi_pingpong -c"
	for prov in "verbs msg" "verbs;ofi_rxm rdm"; do
		set -- $prov
		PAIR_EXPECT='^64 +100 +=100 '
		run_pair "libfabric $1, $2 endpoints: fi_pingpong -c, 64 B, 100 messages" \
			$FI -p "$1" -e $2 -d rroce_b -S 64 -I 100 -- \
			$FI -p "$1" -e $2 -d rroce_a -S 64 -I 100
		PAIR_EXPECT='^1m +10 +=10 '
		run_pair "libfabric $1, $2 endpoints: fi_pingpong -c, 1 B to 1 MiB, 10 messages each" \
			$FI -p "$1" -e $2 -d rroce_b -I 10 -- \
			$FI -p "$1" -e $2 -d rroce_a -I 10
		PAIR_REVERSE=1 run_pair "libfabric $1, $2 endpoints: fi_pingpong -c, 1 B to 1 MiB, from the other side" \
			$FI -p "$1" -e $2 -d rroce_a -I 10 -- \
			$FI -p "$1" -e $2 -d rroce_b -I 10
	done
	$A rdma dev set rroce_a name rroce-a
	$B rdma dev set rroce_b name rroce-b
fi

topo_devices_down
finish
