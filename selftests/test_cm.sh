#!/bin/bash
# The kernel's connection manager over rroce: rdma_cm resolves addresses and
# the IB CM exchanges its MADs through rroce's GSI QP (QPN 1, kernel verbs),
# while the data moves on user QPs. librdmacm's own tools, unmodified.
. "$(dirname "$0")/lib.sh"
topo_devices_up
check "the MAD layer opened a GSI QP (QPN 1) on rroce-b" \
	wait_for 30 bash -c "$B rdma resource show qp | grep -q 'rroce-b/1 lqpn 1 type GSI state RTS'"
run_pair "rping, 100 pings of 1000 bytes, verified" \
	rping -s -C 100 -S 1000 -V -a $TOPO_B4 -- rping -c -C 100 -S 1000 -V -a
run_pair "rping over IPv6, 20 pings, verified" \
	rping -s -C 20 -V -a $TOPO_B6 -- bash -c "rping -c -C 20 -V -a $TOPO_B6"
run_pair "ucmatose: 4 RC connections, 20 messages each" ucmatose -c 4 -C 20 -- ucmatose -c 4 -C 20 -s
run_pair "udaddy: 4 UD endpoints through SIDR, 20 messages each" udaddy -c 4 -C 20 -- udaddy -c 4 -C 20 -s
run_pair "rdma_server / rdma_client (rdma_getaddrinfo, SEND/RECV)" rdma_server -- rdma_client -s
run_pair "rstream: rsockets stream, 200 x 4 KiB" rstream -S 4096 -C 200 -- rstream -S 4096 -C 200 -s
run_pair "riostream: rsockets RDMA writes, 100 x 4 KiB" riostream -S 4096 -C 100 -- riostream -S 4096 -C 100 -s
check "no CM ids left behind" bash -c "[ -z \"\$($B rdma resource show cm_id)\" ]"
topo_devices_down
finish
