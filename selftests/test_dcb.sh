#!/bin/bash
# A port whose netdev has DCB: rroce follows its PFC priorities, APP table
# (DSCP to priority), APP trust order and ETS priority-to-class map, refuses
# its own settings for them meanwhile, and goes back to its own when told to
# or when the netdev loses DCB. The netdev is a veth given DCB operations by
# the test-only module selftests/modules/rroce_dcb_sim.ko.
. "$(dirname "$0")/lib.sh"
SIM=$(dirname "$(readlink -f "$0")")/modules/rroce_dcb_sim.ko
if [ ! -f "$SIM" ]; then
	skip "DCB on the wire" "$SIM is not built (scripts/build-module builds it)"
	finish
fi
modprobe rroce
topo_up
A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
QA=/sys/class/infiniband/rroce-a/qos
# setting_is NAME VALUE: rroce-a's qos/NAME reads VALUE (DCB is read once a second).
setting_is() { [ "$(cat "$QA/$1")" = "$2" ]; }
check "the test module gives veth-a DCB operations" insmod "$SIM" ifname=veth-a
$A rdma link add rroce-a type rroce netdev veth-a
$B rdma link add rroce-b type rroce netdev veth-b

check "DCB without settings: trust pcp, no PFC priority" test "$(cat $QA/dcb) $(cat $QA/trust) $(cat $QA/pfc)" = "1 pcp none"
$A dcb pfc set dev veth-a prio-pfc 3:on 5:on
check "PFC enabled through dcbnl is followed" wait_for 5 setting_is pfc 3,5
check_fails "rroce's own PFC setting is refused while DCB sets it" sh -c "echo 4 > $QA/pfc"
$A dcb app add dev veth-a dscp-prio 26:5
check "a DSCP entry in the APP table switches to DSCP trust" wait_for 5 setting_is trust dscp
check "DSCP 26 maps to the APP table's priority 5" grep -q ' 26:5 ' $QA/dscp2prio
check "DSCPs without an entry map to priority 0" grep -q ' 46:0 ' $QA/dscp2prio
$A dcb ets set dev veth-a prio-tc 0:0 1:0 2:0 3:1 4:1 5:2 6:2 7:2
check "the ETS priority-to-class map is shown" wait_for 5 setting_is prio2tc '0:0 1:0 2:0 3:1 4:1 5:2 6:2 7:2'
check_fails "prio2tc is read-only" sh -c "echo 0:1 > $QA/prio2tc"

# On the wire: traffic class 104 is DSCP 26 -> priority 5 (APP table) ->
# PFC on: a VLAN 0 priority tag with PCP 5.
g4a=$(gid_of rroce-a veth-a) g4b=$(gid_of rroce-b veth-b)
before=$(cnt rroce-a tx_prio5_pkts)
capture $TOPO_B veth-b /tmp/dcb-wire.pcap
run_pair "ib_send_bw with traffic class 104 under the netdev's DCB" \
	ib_send_bw -d rroce-b -x "$g4b" -F -s 4096 -n 20 --tclass=104 -- ib_send_bw -d rroce-a -x "$g4a" -F -s 4096 -n 20 --tclass=104
capture_end
check_all "the packets carry a priority tag (VLAN 0)" /tmp/dcb-wire.pcap "ip.src==$TOPO_A4" vlan.id 0
check_all "with the APP table's priority 5 as PCP" /tmp/dcb-wire.pcap "ip.src==$TOPO_A4" vlan.priority 5
check_all "and DSCP 26" /tmp/dcb-wire.pcap "ip.src==$TOPO_A4" ip.dsfield.dscp 26
check "they are counted as priority 5 (tx_prio5_pkts)" test "$(cnt rroce-a tx_prio5_pkts)" -gt "$before"

$A dcb apptrust set dev veth-a order pcp dscp
check "an APP trust order that puts PCP first gives PCP trust" wait_for 5 setting_is trust pcp
$A dcb apptrust set dev veth-a order dscp pcp
check "an APP trust order with DSCP first gives DSCP trust" wait_for 5 setting_is trust dscp

check "dcb 0: rroce's own settings again" sh -c "echo 0 > $QA/dcb && test \"\$(cat $QA/trust) \$(cat $QA/pfc)\" = 'pcp none'"
check "and they can be written" sh -c "echo 4 > $QA/pfc && test \"\$(cat $QA/pfc)\" = 4"
echo 1 >$QA/dcb
check "dcb 1: the netdev's again" test "$(cat $QA/pfc)" = 3,5
$A dcb app del dev veth-a dscp-prio 26:5
rmmod rroce_dcb_sim
check "without DCB operations (module unloaded) rroce's own PFC setting applies" wait_for 5 setting_is pfc 4
check "and its own trust mode" setting_is trust pcp
check "and rroce's own PFC setting is accepted again" sh -c "echo none > $QA/pfc"
check "no ICRC errors on either side" test "$(cnt rroce-a rcvd_icrc_err)$(cnt rroce-b rcvd_icrc_err)" = 00
topo_devices_down
finish
