#!/bin/bash
# Priority and congestion on the wire: skb priority, VLAN PCP, priority tags,
# DSCP and ECN from a QP's SL and traffic class under each trust mode; CNPs
# answering CE marks and the rate cut they cause; the qos/ sysfs settings.
. "$(dirname "$0")/lib.sh"
topo_devices_up
QA=/sys/class/infiniband/rroce-a/qos

# --- settings through sysfs
check "qos/ directory with the defaults: trust pcp, no PFC priority, cc on" \
	test "$(cat $QA/trust) $(cat $QA/pfc) $(cat $QA/cc)" = "pcp none 1"
check "default DSCP table maps DSCP 26 to priority 3" grep -q ' 26:3 ' $QA/dscp2prio
check "DCQCN parameters carry mlx5's names and defaults" \
	test "$(cat $QA/rp_time_reset) $(cat $QA/rp_ai_rate) $(cat $QA/rp_dce_tcp_g) $(cat $QA/np_min_time_between_cnps)" = "300 5 1019 4"
for bad in "trust:fifo" "pfc:8" "dscp2prio:64:1" "dscp2prio:26" "rp_time_reset:1000001" "np_cnp_prio:9" "cc:2" "rp_gd:-1"; do
	attr=${bad%%:*} val=${bad#*:}
	check_fails "writing '$val' to $attr is refused" sh -c "echo '$val' > $QA/$attr"
done
check "a refused write changed nothing" test "$(cat $QA/trust) $(cat $QA/pfc) $(cat $QA/rp_time_reset)" = "pcp none 300"
check_fails "an unprivileged user cannot change the settings" runuser -u nobody -- sh -c "echo dscp > $QA/trust"
check "values written are read back" sh -c "echo '3,5' > $QA/pfc && test \"\$(cat $QA/pfc)\" = 3,5 && echo none > $QA/pfc"

# --- SL through a VLAN device's egress map; VLAN GIDs send tagged
$A ip link add link veth-a name veth-a.10 type vlan id 10 egress-qos-map 3:5
$B ip link add link veth-b name veth-b.10 type vlan id 10
$A ip addr add 198.19.10.1/24 dev veth-a.10
$B ip addr add 198.19.10.2/24 dev veth-b.10
$A ip link set veth-a.10 up
$B ip link set veth-b.10 up
wait_for 20 gid_of rroce-a veth-a.10
wait_for 20 gid_of rroce-b veth-b.10
ga=$(gid_of rroce-a veth-a.10) gb=$(gid_of rroce-b veth-b.10) g4a=$(gid_of rroce-a veth-a) g4b=$(gid_of rroce-b veth-b)
info "GID indexes: VLAN a=$ga b=$gb, base a=$g4a b=$g4b"
capture $TOPO_B veth-b /tmp/qos-vlan.pcap
run_pair "RC over a VLAN's GIDs with SL 3" \
	ibv_rc_pingpong -d rroce-b -g "$gb" -l 3 -n 20 -- ibv_rc_pingpong -d rroce-a -g "$ga" -l 3 -n 20
capture_end
check_all "packets of a VLAN GID leave tagged with its VLAN id" /tmp/qos-vlan.pcap "ip.src==198.19.10.1" vlan.id 10
check_all "SL 3 -> priority 3 -> PCP 5 through the VLAN's egress map" /tmp/qos-vlan.pcap "ip.src==198.19.10.1" vlan.priority 5
check_all "data and ACKs are ECN-capable (ECT(0)) with cc on" /tmp/qos-vlan.pcap "ip.src==198.19.10.1" ip.dsfield.ecn 2
check "the priority is counted (tx_prio3_pkts)" test "$(cnt rroce-a tx_prio3_pkts)" -gt 0

# --- PFC priority on an untagged port: a VLAN 0 priority tag
qos rroce-a pfc 3
capture $TOPO_B veth-b /tmp/qos-tag.pcap
run_pair "RC with SL 3 while priority 3 has PFC" \
	ibv_rc_pingpong -d rroce-b -g "$g4b" -l 3 -n 20 -- ibv_rc_pingpong -d rroce-a -g "$g4a" -l 3 -n 20
capture_end
check_all "a PFC priority leaves an untagged port with a priority tag (VLAN 0)" /tmp/qos-tag.pcap "ip.src==198.18.0.1" vlan.id 0
check_all "the priority tag carries priority 3" /tmp/qos-tag.pcap "ip.src==198.18.0.1" vlan.priority 3
qos rroce-a pfc none

# --- DSCP trust: the traffic class picks the priority (qdisc band) and DSCP
qos rroce-a trust dscp
$A tc qdisc add dev veth-a root handle 1: prio bands 8 priomap 0 1 2 3 4 5 6 7 0 0 0 0 0 0 0 0
capture $TOPO_B veth-b /tmp/qos-dscp.pcap
run_pair "ib_send_bw with traffic class 104 (DSCP 26) under DSCP trust" \
	ib_send_bw -d rroce-b -x "$g4b" -F -s 4096 -n 50 --tclass=104 -- ib_send_bw -d rroce-a -x "$g4a" -F -s 4096 -n 50 --tclass=104
capture_end
band() { $A tc -s class show dev veth-a | awk -v c="1:$1" '$1 == "class" && $3 == c {getline; print $4; exit}'; }
info "prio qdisc bands 1:1..1:8 packets: $(for b in 1 2 3 4 5 6 7 8; do printf '%s ' "$(band $b)"; done)"
check "DSCP 26 -> priority 3: the packets fill the qdisc's band for priority 3" test "$(band 4)" -gt 50
check_all "DSCP 26 on the wire" /tmp/qos-dscp.pcap "ip.src==198.18.0.1" ip.dsfield.dscp 26
qos rroce-a dscp2prio 26:6
run_pair "the DSCP table changed at run time (26 -> 6)" \
	ib_send_bw -d rroce-b -x "$g4b" -F -s 4096 -n 20 --tclass=104 -- ib_send_bw -d rroce-a -x "$g4a" -F -s 4096 -n 20 --tclass=104
check "DSCP 26 -> priority 6 after the change" test "$(band 7)" -gt 20
qos rroce-a dscp2prio 26:3
qos rroce-a trust pcp

# --- rdma_cm's ToS: the traffic class, and under PCP trust the priority the
# IP stack gives the ToS (104 -> 2)
$A tc qdisc del dev veth-a root
$A tc qdisc add dev veth-a root handle 1: prio bands 8 priomap 0 1 2 3 4 5 6 7 0 0 0 0 0 0 0 0
capture $TOPO_B veth-b /tmp/qos-tos.pcap
run_pair "ib_send_bw through rdma_cm with ToS 104 (-R -T 104)" \
	ib_send_bw -d rroce-b -R -F -s 4096 -n 50 -T 104 -- ib_send_bw -d rroce-a -R -F -s 4096 -n 50 -T 104
capture_end
info "prio qdisc bands 1:1..1:8 packets: $(for b in 1 2 3 4 5 6 7 8; do printf '%s ' "$(band $b)"; done)"
check "ToS 104 -> priority 2: the packets fill the qdisc's band for priority 2" test "$(band 3)" -gt 50
check_all "ToS 104 -> DSCP 26 on the wire (the 1 KiB SEND packets)" /tmp/qos-tos.pcap "ip.src==198.18.0.1 && udp.length > 1000" ip.dsfield.dscp 26
$A tc qdisc del dev veth-a root

# --- IPv6: the traffic class field carries the same DSCP and ECN
g6a=$(gid6_of rroce-a veth-a) g6b=$(gid6_of rroce-b veth-b)
capture $TOPO_B veth-b /tmp/qos-v6.pcap
run_pair "ib_send_bw over IPv6 GIDs with traffic class 104" \
	ib_send_bw -d rroce-b -x "$g6b" -F -s 4096 -n 20 --tclass=104 -- ib_send_bw -d rroce-a -x "$g6a" -F -s 4096 -n 20 --tclass=104
capture_end
check_all "IPv6: DSCP 26" /tmp/qos-v6.pcap "ipv6.src==fd72:6f63:6501::1" ipv6.tclass.dscp 26
check_all "IPv6: ECT(0)" /tmp/qos-v6.pcap "ipv6.src==fd72:6f63:6501::1" ipv6.tclass.ecn 2

# --- congestion control off: the traffic class's own ECN bits
qos rroce-a cc 0
capture $TOPO_B veth-b /tmp/qos-noecn.pcap
run_pair "RC with congestion control off" \
	ibv_rc_pingpong -d rroce-b -g "$g4b" -n 10 -- ibv_rc_pingpong -d rroce-a -g "$g4a" -n 10
capture_end
check_all "with cc off packets are not ECN-capable" /tmp/qos-noecn.pcap "ip.src==198.18.0.1" ip.dsfield.ecn 0
qos rroce-a cc 1

# --- CE marks: the receiver sends CNPs, the sender cuts its rate (to 10
# Mbit/s on the first CNP and recovering slowly, below what the emulated
# guest reaches, so pacing shows)
qos rroce-a rp_rate_to_set_on_first_cnp 10
qos rroce-a rp_time_reset 100000
qos rroce-a rp_byte_reset 10000000
$A tc qdisc add dev veth-a root netem loss 5% ecn
before_np=$(cnt rroce-b np_cnp_sent) before_rp=$(cnt rroce-a rp_cnp_handled) before_retx=$(cnt rroce-a completer_retry_err)
capture $TOPO_A veth-a /tmp/qos-cnp.pcap
# perftest's default ACK timeout (67 ms): a paced QP asks for an ACK on
# every packet, so a cut rate causes no spurious retransmission.
run_pair "ib_write_bw 64 KiB with 5 % of packets marked CE (netem ecn)" \
	ib_write_bw -d rroce-b -x "$g4b" -F -s 65536 -n 30 --report_gbits -- ib_write_bw -d rroce-a -x "$g4a" -F -s 65536 -n 30 --report_gbits
capture_end
check "paced at 10 Mbit/s with the default ACK timeout: no retransmission (completer_retry_err)" test "$(cnt rroce-a completer_retry_err)" = "$before_retx"
$A tc qdisc del dev veth-a root
for c in np_ecn_marked_roce_packets np_cnp_sent rp_cnp_handled rp_cnp_ignored rp_pacing_waits; do
	info "$c: rroce-a $(cnt rroce-a $c), rroce-b $(cnt rroce-b $c)"
done
check "the receiver counts CE-marked packets" test "$(cnt rroce-b np_ecn_marked_roce_packets)" -gt 0
check "the receiver answers them with CNPs (np_cnp_sent)" test "$(cnt rroce-b np_cnp_sent)" -gt "$before_np"
check "the sender's rate is cut by them (rp_cnp_handled)" test "$(cnt rroce-a rp_cnp_handled)" -gt "$before_rp"
check "the sender waits for its rate (rp_pacing_waits)" test "$(cnt rroce-a rp_pacing_waits)" -gt 0
cnps=$(fields /tmp/qos-cnp.pcap "infiniband.bth.opcode==129" frame.number | wc -l)
check "CNPs on the wire (BTH opcode 0x81): $cnps, as np_cnp_sent counts" test "$cnps" = "$(( $(cnt rroce-b np_cnp_sent) - before_np ))"
check_all "CNPs carry the CNP DSCP (48)" /tmp/qos-cnp.pcap "infiniband.bth.opcode==129" ip.dsfield.dscp 48
check_all "CNPs are not ECN-capable" /tmp/qos-cnp.pcap "infiniband.bth.opcode==129" ip.dsfield.ecn 0
# BTH byte 4 holds FECN and BECN (0x40); the dissector names neither.
check_all "CNPs have BECN set" /tmp/qos-cnp.pcap "infiniband.bth.opcode==129" udp.payload '81(:?[0-9a-f]{2}){3}:?40.*'
acks_to=$(fields /tmp/qos-cnp.pcap "ip.src==198.18.0.2 && infiniband.bth.opcode==17" infiniband.bth.destqp | sort -u | tr '\n' ' ')
check_all "CNPs go to the sending QP ($acks_to)" /tmp/qos-cnp.pcap "infiniband.bth.opcode==129" infiniband.bth.destqp "${acks_to% }"
qos rroce-a rp_rate_to_set_on_first_cnp 0
qos rroce-a rp_time_reset 300
qos rroce-a rp_byte_reset 32767
# READ data flows from the responder: CE marks on it make the requester
# send CNPs, and the responder's READ responses are paced.
qos rroce-b rp_rate_to_set_on_first_cnp 10
qos rroce-b rp_time_reset 100000
qos rroce-b rp_byte_reset 10000000
before_np=$(cnt rroce-a np_cnp_sent) before_rp=$(cnt rroce-b rp_cnp_handled) before_wait=$(cnt rroce-b rp_pacing_waits)
$B tc qdisc add dev veth-b root netem loss 5% ecn
run_pair "ib_read_bw 64 KiB with 5 % of READ responses marked CE" \
	ib_read_bw -d rroce-b -x "$g4b" -F -s 65536 -n 30 -u 20 --report_gbits -- ib_read_bw -d rroce-a -x "$g4a" -F -s 65536 -n 30 -u 20 --report_gbits
$B tc qdisc del dev veth-b root
info "READ: rroce-a np_cnp_sent +$(( $(cnt rroce-a np_cnp_sent) - before_np )), rroce-b rp_cnp_handled +$(( $(cnt rroce-b rp_cnp_handled) - before_rp )) rp_pacing_waits +$(( $(cnt rroce-b rp_pacing_waits) - before_wait ))"
check "the READ requester sends CNPs for marked responses" test "$(cnt rroce-a np_cnp_sent)" -gt "$before_np"
check "the READ responder cuts its rate and paces its responses" \
	test "$(cnt rroce-b rp_cnp_handled)" -gt "$before_rp" -a "$(cnt rroce-b rp_pacing_waits)" -gt "$before_wait"
qos rroce-b rp_rate_to_set_on_first_cnp 0
qos rroce-b rp_time_reset 300
qos rroce-b rp_byte_reset 32767

# UD: the receiver answers a marked datagram with a CNP to its source QP.
before_np=$(cnt rroce-b np_cnp_sent) before_rp=$(cnt rroce-a rp_cnp_handled)
$A tc qdisc add dev veth-a root netem loss 5% ecn
run_pair "ib_send_bw over UD, 1 KiB, with 5 % of datagrams marked CE" \
	ib_send_bw -d rroce-b -x "$g4b" -c UD -s 1024 -n 200 -- ib_send_bw -d rroce-a -x "$g4a" -c UD -s 1024 -n 200
$A tc qdisc del dev veth-a root
info "UD: rroce-b np_cnp_sent +$(( $(cnt rroce-b np_cnp_sent) - before_np )), rroce-a rp_cnp_handled +$(( $(cnt rroce-a rp_cnp_handled) - before_rp ))"
check "UD: CE-marked datagrams are answered with CNPs that reach the sending QP" \
	test "$(cnt rroce-b np_cnp_sent)" -gt "$before_np" -a "$(cnt rroce-a rp_cnp_handled)" -gt "$before_rp"

qos rroce-b cc 0
before=$(cnt rroce-b np_cnp_sent)
$A tc qdisc add dev veth-a root netem loss 5% ecn
run_pair "ib_write_bw with CE marks while the receiver's cc is off" \
	ib_write_bw -d rroce-b -x "$g4b" -F -s 65536 -n 30 -- ib_write_bw -d rroce-a -x "$g4a" -F -s 65536 -n 30
$A tc qdisc del dev veth-a root
check "with cc off the receiver sends no CNP" test "$(cnt rroce-b np_cnp_sent)" = "$before"
qos rroce-b cc 1

# --- pause emulation: a plugged priority (a prio qdisc band holding a plug
# qdisc) stalls only its QPs; held packets are not lost, so the retry timer
# does not count them; after release the stalled QP completes
$A tc qdisc add dev veth-a root handle 1: prio bands 8 priomap 0 1 2 3 4 5 6 7 0 0 0 0 0 0 0 0
$A tc qdisc add dev veth-a parent 1:4 handle 40: plug limit 100000000
$A tc qdisc change dev veth-a parent 1:4 handle 40: plug block
before_retx=$(cnt rroce-a completer_retry_err) before_held=$(cnt rroce-a tx_held_timeouts) before_held_ms=$(cnt rroce-a tx_held_ms)
$B timeout 300 ib_write_bw -d rroce-b -x "$g4b" -F -s 65536 -n 20 -S 3 -p 18600 >/tmp/qos-paused-srv.log 2>&1 &
paused_srv=$!
sleep 2
$A timeout 300 ib_write_bw -d rroce-a -x "$g4a" -F -s 65536 -n 20 -S 3 -p 18600 $TOPO_B4 >/tmp/qos-paused-cli.log 2>&1 &
paused_cli=$!
sleep 2
run_pair "SL 0 traffic completes while priority 3 is paused" \
	ib_write_bw -d rroce-b -x "$g4b" -F -s 65536 -n 10 -p 18601 -- ib_write_bw -d rroce-a -x "$g4a" -F -s 65536 -n 10 -p 18601
check "the SL 3 transfer waits while its priority is paused" kill -0 $paused_cli
info "plug qdisc while paused: $($A tc -s qdisc show dev veth-a parent 1:4 | tr -s ' ' | sed -n 's/^ Sent/Sent/p') backlog: $($A tc -s qdisc show dev veth-a parent 1:4 | sed -n 's/^ *backlog //p')"
$A tc qdisc change dev veth-a parent 1:4 handle 40: plug release_indefinite
wait $paused_cli; cli_rc=$?
wait $paused_srv; srv_rc=$?
check "after release the SL 3 transfer completes with no error (client $cli_rc, server $srv_rc)" test "$cli_rc$srv_rc" = 00
info "tx_held_timeouts +$(( $(cnt rroce-a tx_held_timeouts) - before_held )), tx_held_ms +$(( $(cnt rroce-a tx_held_ms) - before_held_ms )), completer_retry_err +$(( $(cnt rroce-a completer_retry_err) - before_retx ))"
check "the pause cost no retransmission (completer_retry_err unchanged)" test "$(cnt rroce-a completer_retry_err)" = "$before_retx"
check "timeouts during the pause were not counted (tx_held_timeouts)" test "$(cnt rroce-a tx_held_timeouts)" -gt "$before_held"
check "the time held by the pause is counted (tx_held_ms)" test "$(cnt rroce-a tx_held_ms)" -gt "$before_held_ms"
$A tc qdisc del dev veth-a root

# --- a tiny local queue drops: losses sent again at once, never a QP error
$A tc qdisc add dev veth-a root tbf rate 50mbit burst 10kb limit 10kb
before_retx=$(cnt rroce-a completer_retry_err)
run_pair "ib_write_bw 64 KiB through a rate-limited 10 KB local queue" \
	ib_write_bw -d rroce-b -x "$g4b" -F -s 65536 -n 30 -- ib_write_bw -d rroce-a -x "$g4a" -F -s 65536 -n 30
info "qdisc: $($A tc -s qdisc show dev veth-a | tr -s ' ' | sed -n 's/^ Sent/Sent/p')"
info "rroce-a tx_local_drop $(cnt rroce-a tx_local_drop) tx_local_drop_retries $(cnt rroce-a tx_local_drop_retries) completer_retry_err +$(( $(cnt rroce-a completer_retry_err) - before_retx ))"
check "the qdisc dropped packets locally (tx_local_drop)" test "$(cnt rroce-a tx_local_drop)" -gt 0
check "they were sent again at once (tx_local_drop_retries)" test "$(cnt rroce-a tx_local_drop_retries)" -gt 0
$A tc qdisc del dev veth-a root
check "no ICRC errors on either side" test "$(cnt rroce-a rcvd_icrc_err)$(cnt rroce-b rcvd_icrc_err)" = 00
topo_devices_down

# For comparison, not a check: rdma_rxe through the same tiny local queue.
if modprobe -r rroce 2>/dev/null && modprobe rdma_rxe 2>/dev/null; then
	topo_up
	A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
	$A rdma link add rxe-a type rxe netdev veth-a
	$B rdma link add rxe-b type rxe netdev veth-b
	$A tc qdisc add dev veth-a root tbf rate 50mbit burst 10kb limit 10kb
	$B timeout 120 ib_write_bw -d rxe-b -x 1 -F -s 65536 -n 30 >/tmp/qos-rxe-srv.log 2>&1 &
	sleep 2
	$A timeout 120 ib_write_bw -d rxe-a -x 1 -F -s 65536 -n 30 $TOPO_B4 >/tmp/qos-rxe-cli.log 2>&1
	rc=$?
	wait
	info "rdma_rxe through the 10 KB local queue: client exit $rc; $(grep -ih 'status\|error\|fail' /tmp/qos-rxe-cli.log | head -2 | tr '\n' ' ')"
	info "rdma_rxe qdisc: $($A tc -s qdisc show dev veth-a | tr -s ' ' | sed -n 's/^ Sent/Sent/p')"
	$A rdma link delete rxe-a
	$B rdma link delete rxe-b
	topo_down
	modprobe -r rdma_rxe
else
	info "rdma_rxe comparison not run: could not swap the modules"
fi
finish
