#!/bin/bash
# Captures RoCEv2 packets that the kernel's rdma_rxe sends between the two
# namespaces of the standard topology (RC SEND, RDMA WRITE, READ, ACKs) and
# prints them as hex, one packet a line, starting at the IP header. The
# output is rroce's independent ICRC/header test vector
# (rust/proto/testdata/rxe-packets.hex); regenerate it with
#   scripts/vm run --script scripts/guest/capture-rxe-vectors.sh > FILE
set -e
KTAP_HEADER=0 . /rroce/selftests/lib.sh
modprobe rdma_rxe
topo_up
ip netns exec $TOPO_A rdma link add rxe-a type rxe netdev veth-a
ip netns exec $TOPO_B rdma link add rxe-b type rxe netdev veth-b
ip netns exec $TOPO_B dumpcap -q -i veth-b -w /tmp/cap.pcap -P -f "udp port 4791" 2>/dev/null &
cap=$!
wait_for 60 test -s /tmp/cap.pcap
ip netns exec $TOPO_B ibv_rc_pingpong -d rxe-b -g 1 -n 4 -s 3000 -m 1024 >/dev/null 2>&1 &
sleep 1
ip netns exec $TOPO_A ibv_rc_pingpong -d rxe-a -g 1 -n 4 -s 3000 -m 1024 $TOPO_B4 >/dev/null 2>&1
ip netns exec $TOPO_B ib_read_bw -d rxe-b -x 1 -n 2 -s 1500 -F >/dev/null 2>&1 &
sleep 1
ip netns exec $TOPO_A ib_read_bw -d rxe-a -x 1 -n 2 -s 1500 -F $TOPO_B4 >/dev/null 2>&1 || true
sleep 1
kill $cap; wait $cap 2>/dev/null || true
# IP header onwards: strip the 14-byte Ethernet header.
python3 - <<'PY'
import struct
data = open('/tmp/cap.pcap', 'rb').read()
magic = struct.unpack('<I', data[:4])[0]
if magic == 0x0a0d0d0a:
    # pcapng: walk Enhanced Packet Blocks
    off = 0
    while off + 12 <= len(data):
        btype, blen = struct.unpack('<II', data[off:off+8])
        if btype == 6:
            caplen = struct.unpack('<I', data[off+20:off+24])[0]
            pkt = data[off+28:off+28+caplen]
            print(pkt[14:].hex())
        off += blen
else:
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack('<IIII', data[off:off+16])
        print(data[off+16:off+16+caplen][14:].hex())
        off += 16 + caplen
PY
topo_down
