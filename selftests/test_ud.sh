#!/bin/bash
# UD over RoCEv2 between the two namespaces of the standard topology, with
# rdma-core's unmodified ibv_ud_pingpong: AHs, UD SEND on the rxe rings,
# ICRC on the wire, GRH delivery, completions.
. "$(dirname "$0")/lib.sh"
topo_devices_up

pingpong() { # what, extra ibv_ud_pingpong args
	local what=$1; shift
	run_pair "$what" ibv_ud_pingpong -d rroce-b -g 1 "$@" -- ibv_ud_pingpong -d rroce-a -g 1 "$@"
}
pingpong "ibv_ud_pingpong, 512-byte messages, 200 iterations" -s 512 -n 200
pingpong "ibv_ud_pingpong, 1024-byte messages (the path MTU)" -s 1024 -n 50
pingpong "ibv_ud_pingpong, 4-byte messages" -s 4 -n 50
info "rroce-a: sent $(cnt rroce-a sent_pkts), received $(cnt rroce-a rcvd_pkts); rroce-b: sent $(cnt rroce-b sent_pkts), received $(cnt rroce-b rcvd_pkts)"
check "every packet sent was received (no ICRC errors)" test "$(cnt rroce-a rcvd_icrc_err)$(cnt rroce-b rcvd_icrc_err)" = 00
$B dumpcap -q -i veth-b -w /tmp/ud.pcap -f "udp port 4791" 2>/dev/null &
cap=$!
wait_for 60 test -s /tmp/ud.pcap
$B timeout 60 ibv_ud_pingpong -d rroce-b -g 1 -s 64 -n 5 >/dev/null 2>&1 &
sleep 2
$A timeout 60 ibv_ud_pingpong -d rroce-a -g 1 -s 64 -n 5 $TOPO_B4 >/dev/null 2>&1
sleep 1; kill $cap; wait $cap 2>/dev/null
tshark -r /tmp/ud.pcap -T fields -e ip.src -e udp.srcport -e infiniband.bth.opcode -e infiniband.deth.srcqp -e data.len 2>/dev/null >/tmp/ud-cap.txt
info "tshark: $(head -4 /tmp/ud-cap.txt | tr '\t\n' ' ;')"
check "tshark decodes rroce's packets as RoCEv2 UD SEND ONLY (opcode 100) with 64 bytes of data" \
	bash -c "awk '\$3 == 100 && \$5 == 64' /tmp/ud-cap.txt | grep -q ."
check "UDP source ports lie in the RoCEv2 range 0xC000-0xFFFF" awk 'NF && $2 < 49152 {exit 1}' /tmp/ud-cap.txt
topo_devices_down
finish
