#!/bin/bash
# UD over RoCEv2 between the two namespaces of the standard topology, with
# rdma-core's unmodified ibv_ud_pingpong: AHs, UD SEND on the rxe rings,
# ICRC on the wire, GRH delivery, completions.
. "$(dirname "$0")/lib.sh"
modprobe rroce
topo_up
A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
$A rdma link add rroce-a type rroce netdev veth-a
$B rdma link add rroce-b type rroce netdev veth-b
cnt() { cat /sys/class/infiniband/$1/ports/1/hw_counters/$2; }

pingpong() { # what, extra args
	local what=$1; shift
	$B timeout 120 ibv_ud_pingpong -d rroce-b -g 1 "$@" >/tmp/ud-server.log 2>&1 &
	local srv=$!
	sleep 2
	$A timeout 120 ibv_ud_pingpong -d rroce-a -g 1 "$@" $TOPO_B4 >/tmp/ud-client.log 2>&1
	local rc=$?
	wait $srv; local src=$?
	if [ $rc = 0 ] && [ $src = 0 ]; then
		pass "$what"
		info "$(grep -h 'bytes in' /tmp/ud-client.log | head -1)"
	else
		fail "$what (client $rc, server $src)"
		sed 's/^/     | client: /' /tmp/ud-client.log | tail -5
		sed 's/^/     | server: /' /tmp/ud-server.log | tail -5
	fi
}
pingpong "ibv_ud_pingpong, 512-byte messages, 200 iterations" -s 512 -n 200
pingpong "ibv_ud_pingpong, 1024-byte messages (the path MTU)" -s 1024 -n 50
pingpong "ibv_ud_pingpong, 4-byte messages" -s 4 -n 50
info "rroce-a: sent $(cnt rroce-a sent_pkts), received $(cnt rroce-a rcvd_pkts); rroce-b: sent $(cnt rroce-b sent_pkts), received $(cnt rroce-b rcvd_pkts)"
check "every packet sent was received (no ICRC errors)" test "$(cnt rroce-a rcvd_icrc_err)$(cnt rroce-b rcvd_icrc_err)" = 00
$B timeout 60 tshark -c 4 -i veth-b -f "udp port 4791" -d udp.port==4791,infiniband -T fields -e ip.src -e infiniband.bth.opcode -e infiniband.deth.srcqp -e infiniband.invariant.crc.status >/tmp/ud-cap.txt 2>/dev/null &
cap=$!
sleep 8
$B timeout 60 ibv_ud_pingpong -d rroce-b -g 1 -s 64 -n 5 >/dev/null 2>&1 &
sleep 2
$A timeout 60 ibv_ud_pingpong -d rroce-a -g 1 -s 64 -n 5 $TOPO_B4 >/dev/null 2>&1
wait $cap
info "tshark: $(tr '\t\n' ' ;' </tmp/ud-cap.txt)"
check "tshark decodes UD SEND ONLY (opcode 100) from rroce" grep -q "100" /tmp/ud-cap.txt
$A rdma link delete rroce-a; $B rdma link delete rroce-b
topo_down
finish
