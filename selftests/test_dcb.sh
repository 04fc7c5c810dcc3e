#!/bin/bash
# A port whose netdev has DCB: rroce follows its PFC priorities, APP table
# (DSCP to priority), APP trust order and ETS priority-to-class map, refuses
# its own settings for them meanwhile, and goes back to its own when told to
# or when the netdev loses DCB. The netdev is a veth given DCB operations by
# the test-only module selftests/modules/rroce_dcb_sim.ko.
. "$(dirname "$0")/lib.sh"
SIM=$(helper_module rroce_dcb_sim)
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
# write_error NAME VALUE: the error name a write to rroce-a's qos/NAME gets ("ok" if none).
write_error() {
	python3 -c 'import errno, sys
try:
    with open(sys.argv[1], "w") as f:
        f.write(sys.argv[2])
    print("ok")
except OSError as e:
    print(errno.errorcode[e.errno])' "$QA/$1" "$2"
}
$A rdma link add rroce-a type rroce netdev veth-a
$B rdma link add rroce-b type rroce netdev veth-b
echo dscp >$QA/trust
echo 2 >$QA/pfc
check "the test module gives veth-a DCB operations" insmod "$SIM" ifname=veth-a
check "a device reporting PFC governs PFC: none enabled, not rroce's 2" wait_for 5 setting_is pfc none
check "with no trust order and no DSCP in its APP table, rroce's DSCP trust stays" setting_is trust dscp
check "and rroce's trust setting can still be written" test "$(write_error trust pcp)" = ok
$A dcb pfc set dev veth-a prio-pfc 3:on 5:on
check "PFC enabled through dcbnl is followed" wait_for 5 setting_is pfc 3,5
check "rroce's own PFC setting is refused with EBUSY while DCB sets it" test "$(write_error pfc 4)" = EBUSY
$A dcb app add dev veth-a dscp-prio 26:5
check "a DSCP entry in the APP table switches to DSCP trust" wait_for 5 setting_is trust dscp
check "and then rroce's trust setting is refused with EBUSY" test "$(write_error trust pcp)" = EBUSY
check "DSCP 26 maps to the APP table's priority 5" grep -q ' 26:5 ' $QA/dscp2prio
check "DSCPs without an entry map to priority 0 (rroce's own table: 46 -> 5)" grep -q ' 46:0 ' $QA/dscp2prio
$A dcb ets set dev veth-a prio-tc 0:0 1:0 2:0 3:1 4:1 5:2 6:2 7:2
check "the ETS priority-to-class map is shown" wait_for 5 setting_is prio2tc '0:0 1:0 2:0 3:1 4:1 5:2 6:2 7:2'
check "prio2tc is read-only, for root too" test "$(write_error prio2tc 0:1)" = EACCES

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

check "dcb 0: rroce's own settings again (trust pcp, PFC 2)" sh -c "echo 0 > $QA/dcb && test \"\$(cat $QA/trust) \$(cat $QA/pfc)\" = 'pcp 2'"
check "and they can be written" sh -c "echo 4 > $QA/pfc && test \"\$(cat $QA/pfc)\" = 4"
echo 1 >$QA/dcb
check "dcb 1: the netdev's again" test "$(cat $QA/pfc)" = 3,5
$A dcb app del dev veth-a dscp-prio 26:5
rmmod rroce_dcb_sim
check "without DCB operations (module unloaded) rroce's own PFC setting applies" wait_for 5 setting_is pfc 4
check "and its own trust mode" setting_is trust pcp
check "the switches were logged" sh -c "dmesg | grep -q 'veth-a: following its DCB settings' && dmesg | grep -q 'veth-a: DCB settings no longer followed'"
check "and rroce's own PFC setting is accepted again" sh -c "echo none > $QA/pfc"
check "no ICRC errors on either side" test "$(cnt rroce-a rcvd_icrc_err)$(cnt rroce-b rcvd_icrc_err)" = 00
topo_devices_down
finish
