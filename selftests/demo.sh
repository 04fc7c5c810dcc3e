#!/bin/bash
# The demo job run inside the guest by `make demo`.
set -e
KTAP_HEADER=0 . /rroce/selftests/lib.sh
echo "### modprobe rroce"
modprobe rroce
echo "### rdma link add rroce0 type rroce netdev eth0"
rdma link add rroce0 type rroce netdev eth0
rdma link show
echo "### ibv_devices"
ibv_devices
echo "### ibv_devinfo -v -d rroce0 (rdma-core's unmodified rxe provider)"
ibv_devinfo -v -d rroce0
echo "### two hosts: namespaces $TOPO_A / $TOPO_B joined by a veth pair"
topo_up
ip netns exec $TOPO_A rdma link add rroce-a type rroce netdev veth-a
ip netns exec $TOPO_B rdma link add rroce-b type rroce netdev veth-b
rdma link show
echo "### ibv_rc_pingpong between rroce-a and rroce-b (4 KiB messages)"
ip netns exec $TOPO_B ibv_rc_pingpong -d rroce-b -g 1 -n 200 >/tmp/pp-server.log 2>&1 &
sleep 2
ip netns exec $TOPO_A ibv_rc_pingpong -d rroce-a -g 1 -n 200 $TOPO_B4
wait
echo "### ib_write_bw between rroce-a and rroce-b (64 KiB messages; TCG guest: numbers are functional, not performance)"
ip netns exec $TOPO_B ib_write_bw -d rroce-b -x 1 -F -s 65536 -n 2000 --report_gbits >/tmp/bw-server.log 2>&1 &
sleep 2
ip netns exec $TOPO_A ib_write_bw -d rroce-a -x 1 -F -s 65536 -n 2000 --report_gbits $TOPO_B4
wait
echo "### rdma statistic show link rroce-a/1"
rdma statistic show link rroce-a/1
rdma link delete rroce-a; rdma link delete rroce-b; rdma link delete rroce0
topo_down
modprobe -r rroce
echo "### dmesg (rroce)"
dmesg | grep "rroce:" | tail -20
