#!/bin/bash
# Reliability: RC traffic between the namespaces over a lossy, reordering,
# duplicating link (netem) must complete with the right data; the counters
# show the retransmissions, sequence NAKs and duplicates that got it there.
. "$(dirname "$0")/lib.sh"
modprobe sch_netem
modprobe sch_prio
modprobe cls_u32
topo_devices_up
LOSSY_A="loss 3% delay 1ms reorder 10% 50% duplicate 1%"
LOSSY_B="loss 3% delay 1ms"

# lossy NS DEV NETEM...: netem on all of DEV's traffic.
lossy() {
	local ns=$1 dev=$2; shift 2
	$ns tc qdisc replace dev "$dev" root netem "$@"
}

# lossy_but_acks NS DEV NETEM...: netem on DEV's traffic except RoCEv2
# acknowledgements (BTH opcode 0x11 right after the IPv4 and UDP headers),
# which bypass it through the first band of a prio qdisc.
lossy_but_acks() {
	local ns=$1 dev=$2; shift 2
	$ns tc qdisc del dev "$dev" root 2>/dev/null
	$ns tc qdisc add dev "$dev" root handle 1: prio bands 2 priomap 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 &&
	$ns tc qdisc add dev "$dev" parent 1:2 handle 20: netem "$@" &&
	$ns tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
		match ip protocol 17 0xff match ip dport 4791 0xffff match u8 0x11 0xff at 28 flowid 1:1
}

# In a ping-pong the last message's acknowledgement may be lost after its
# receiver has seen the message, finished and destroyed its QP: the sender
# then retries into nothing and fails, on any RC transport. Acknowledgements
# are spared here; the bandwidth runs below lose them too.
lossy_but_acks "$A" veth-a $LOSSY_A || fail "tc: netem with acknowledgements spared on veth-a"
lossy_but_acks "$B" veth-b $LOSSY_B || fail "tc: netem with acknowledgements spared on veth-b"
run_pair "ibv_rc_pingpong over 3% loss, reordering and duplication (4 KiB x 200)" \
	ibv_rc_pingpong -d rroce-b -g 1 -n 200 -- ibv_rc_pingpong -d rroce-a -g 1 -n 200
info "acknowledgements spared on veth-a: $($A tc -s filter show dev veth-a parent 1: | grep -o 'success [0-9]*' | head -1)"
lossy "$A" veth-a $LOSSY_A
lossy "$B" veth-b $LOSSY_B
run_pair "ib_write_bw over the lossy link (64 KiB x 100)" \
	ib_write_bw -d rroce-b -x 1 -F -s 65536 -n 100 -- ib_write_bw -d rroce-a -x 1 -F -s 65536 -n 100
run_pair "ib_read_bw over the lossy link (64 KiB x 100)" \
	ib_read_bw -d rroce-b -x 1 -F -s 65536 -n 100 -- ib_read_bw -d rroce-a -x 1 -F -s 65536 -n 100
for side in rroce-a rroce-b; do
	info "$side: retransmits $(cnt $side completer_retry_err) seq_nak $(cnt $side rcvd_seq_err) dup $(cnt $side duplicate_request) out_of_seq $(cnt $side out_of_seq_request) retry_exceeded $(cnt $side retry_exceeded_err)"
done
check "the losses were recovered by the transport (retransmits or sequence NAKs seen)" \
	test $(( $(cnt rroce-a completer_retry_err) + $(cnt rroce-a rcvd_seq_err) + $(cnt rroce-b completer_retry_err) + $(cnt rroce-b rcvd_seq_err) )) -gt 0
check "no WQE ran out of retries" test "$(cnt rroce-a retry_exceeded_err)$(cnt rroce-b retry_exceeded_err)" = 00
$A tc qdisc del dev veth-a root; $B tc qdisc del dev veth-b root
topo_devices_down
finish
