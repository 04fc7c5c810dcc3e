#!/bin/bash
# Reliability: RC traffic between the namespaces over a lossy, reordering,
# duplicating link (netem) must complete with the right data; the counters
# show the retransmissions, sequence NAKs and duplicates that got it there.
. "$(dirname "$0")/lib.sh"
modprobe sch_netem
topo_devices_up
$A tc qdisc add dev veth-a root netem loss 3% delay 1ms reorder 10% 50% duplicate 1%
$B tc qdisc add dev veth-b root netem loss 3% delay 1ms
run_pair "ibv_rc_pingpong over 3% loss, reordering and duplication (4 KiB x 200)" \
	ibv_rc_pingpong -d rroce-b -g 1 -n 200 -- ibv_rc_pingpong -d rroce-a -g 1 -n 200
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
