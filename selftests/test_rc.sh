#!/bin/bash
# RC and UC over RoCEv2 between the two namespaces of the standard topology,
# with rdma-core's unmodified pingpong tools and perftest.
. "$(dirname "$0")/lib.sh"
topo_devices_up
for t in rc uc; do
	run_pair "ibv_${t}_pingpong, 4 KiB messages (4 packets each), 100 iterations" \
		ibv_${t}_pingpong -d rroce-b -g 1 -n 100 -- ibv_${t}_pingpong -d rroce-a -g 1 -n 100
done
run_pair "ibv_rc_pingpong, 1 MiB messages, 10 iterations" \
	ibv_rc_pingpong -d rroce-b -g 1 -s 1048576 -n 10 -- ibv_rc_pingpong -d rroce-a -g 1 -s 1048576 -n 10
run_pair "ibv_rc_pingpong, 1-byte messages, 500 iterations" \
	ibv_rc_pingpong -d rroce-b -g 1 -s 1 -n 500 -- ibv_rc_pingpong -d rroce-a -g 1 -s 1 -n 500
for t in write read send; do
	run_pair "ib_${t}_bw, 64 KiB, 200 iterations" \
		ib_${t}_bw -d rroce-b -x 1 -F -s 65536 -n 200 --report_gbits -- ib_${t}_bw -d rroce-a -x 1 -F -s 65536 -n 200 --report_gbits
done
for t in write read send; do
	run_pair "ib_${t}_lat, 2 bytes, 100 iterations" \
		ib_${t}_lat -d rroce-b -x 1 -F -s 2 -n 100 -- ib_${t}_lat -d rroce-a -x 1 -F -s 2 -n 100
done
for t in write read send; do
	run_pair "ib_${t}_bw with 8 QPs, 64 KiB, 100 iterations" \
		ib_${t}_bw -d rroce-b -x 1 -F -q 8 -s 65536 -n 100 --report_gbits -- ib_${t}_bw -d rroce-a -x 1 -F -q 8 -s 65536 -n 100 --report_gbits
done
for size in 2 4095 1048576; do
	run_pair "ib_write_bw and ib_read_bw ($size bytes, 40 iterations each)" \
		bash -c "ib_write_bw -d rroce-b -x 1 -F -s $size -n 40 && ib_read_bw -d rroce-b -x 1 -F -s $size -n 40" -- \
		bash -c "ib_write_bw -d rroce-a -x 1 -F -s $size -n 40 \$0 && sleep 2 && ib_read_bw -d rroce-a -x 1 -F -s $size -n 40 \$0"
done
# The wire format, as an independent decoder reads it.
$B dumpcap -q -i veth-b -w /tmp/rc.pcap -f "udp port 4791" 2>/dev/null &
cap=$!
wait_for 60 test -s /tmp/rc.pcap
run_pair "ibv_rc_pingpong 3000 bytes x 2 (captured)" ibv_rc_pingpong -d rroce-b -g 1 -s 3000 -n 2 -- ibv_rc_pingpong -d rroce-a -g 1 -s 3000 -n 2
run_pair "ib_read_bw 2 KiB x 5 (captured)" ib_read_bw -d rroce-b -x 1 -F -s 2048 -n 5 -- ib_read_bw -d rroce-a -x 1 -F -s 2048 -n 5
sleep 1; kill $cap; wait $cap 2>/dev/null
tshark -r /tmp/rc.pcap -T fields -e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.aeth.syndrome \
	-e infiniband.reth.dmalen -e data.len 2>/dev/null >/tmp/rc-cap.txt
ops=$(cut -f1 /tmp/rc-cap.txt | sort -n | uniq | tr '\n' ' ')
info "opcodes on the wire: $ops"
info "first packets: $(head -5 /tmp/rc-cap.txt | tr '\t\n' ' ;')"
for want in "0:SEND FIRST" "1:SEND MIDDLE" "2:SEND LAST" "17:ACKNOWLEDGE" "12:RDMA READ REQUEST" "13:READ RESPONSE FIRST" "15:READ RESPONSE LAST"; do
	check "tshark decodes RC ${want#*:} (opcode ${want%%:*})" awk -v op="${want%%:*}" '$1 == op {found=1} END {exit !found}' /tmp/rc-cap.txt
done
check "READ requests carry a RETH with the 2048-byte length" awk -F'\t' '$1 == 12 && $4 == 2048 {found=1} END {exit !found}' /tmp/rc-cap.txt
check "SEND FIRST/MIDDLE carry exactly the 1024-byte path MTU" awk -F'\t' '($1 == 0 || $1 == 1) && $5 != 1024 {bad=1} END {exit bad}' /tmp/rc-cap.txt
for side in rroce-a rroce-b; do
	info "$side: sent $(cnt $side sent_pkts) received $(cnt $side rcvd_pkts) icrc_err $(cnt $side rcvd_icrc_err) dup $(cnt $side duplicate_request) seq_nak $(cnt $side rcvd_seq_err) rnr $(cnt $side send_rnr_err)"
done
check "no ICRC errors on either side" test "$(cnt rroce-a rcvd_icrc_err)$(cnt rroce-b rcvd_icrc_err)" = 00
topo_devices_down
finish
