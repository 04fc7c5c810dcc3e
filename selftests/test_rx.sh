#!/bin/bash
# Receive path: the RoCEv2 UDP socket follows the devices of a namespace;
# packets from the wire are checked once (ICRC, headers) and anything
# invalid is dropped and counted, never trusted.
. "$(dirname "$0")/lib.sh"
modprobe rroce
topo_up
A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
listening() { $A ss -Huln "sport = :4791" | grep -c .; }
check "no UDP 4791 socket before a device exists" test "$(listening)" = 0
$A rdma link add rroce-a type rroce netdev veth-a
check "IPv4 and IPv6 sockets on 4791 after rdma link add" test "$(listening)" = 2
ip link add dummy-x netns $TOPO_A type dummy 2>/dev/null || { modprobe dummy; ip link add dummy-x netns $TOPO_A type dummy; }
$A ip link set dummy-x up
$A rdma link add rroce-x type rroce netdev dummy-x
$A rdma link delete rroce-x
check "sockets stay while another device of the namespace exists" test "$(listening)" = 2

cnt() { cat /sys/class/infiniband/rroce-a/ports/1/hw_counters/$1; }
before_ok=$(cnt rcvd_pkts) before_icrc=$(cnt rcvd_icrc_err) before_bad=$(cnt rcvd_malformed)
$B python3 - "$TOPO_B4" "$TOPO_A4" <<'PY'
import socket, struct, sys, zlib, random
src, dst = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF set, IP ID 0
s.bind((src, 49152))
def icrc(payload):
    # The IP and UDP headers the kernel will put in front, variant fields masked.
    tot = 20 + 8 + len(payload) + 4
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0xff, tot, 0, 0x4000, 0xff, 17, 0xffff,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack('!HHHH', 49152, 4791, 8 + len(payload) + 4, 0xffff)
    bth = bytearray(payload[:12]); bth[4] = 0xff
    return struct.pack('<I', zlib.crc32(b'\xff' * 8 + ip + udp + bytes(bth) + payload[12:]))
def bth(opcode, qpn=0x11, psn=0, tver=0):
    return struct.pack('!BBHI I', opcode, tver, 0xffff, qpn, psn)
send = lambda p: s.sendto(p, (dst, 4791))
good = bth(0x04) + b'hello, rroce' # RC SEND ONLY, 12 bytes of payload
for _ in range(3):
    send(good + icrc(good))
send(good + b'\x00\x00\x00\x00')                      # bad ICRC
flip = bytearray(good + icrc(good)); flip[14] ^= 1; send(bytes(flip))  # corrupted payload
bad_op = bth(0x1f)
send(bad_op + icrc(bad_op))                           # unknown opcode, valid ICRC
ver = bth(0x04, tver=1) + b'abcd'
send(ver + icrc(ver))                                 # transport version 1
short = bth(0x11)                                     # ACK without its AETH
send(short + icrc(short))
random.seed(7)
for _ in range(200):                                  # junk of every size
    send(bytes(random.getrandbits(8) for _ in range(random.randrange(0, 120))))
PY
sleep 1
ok=$(( $(cnt rcvd_pkts) - before_ok )) icrc=$(( $(cnt rcvd_icrc_err) - before_icrc )) bad=$(( $(cnt rcvd_malformed) - before_bad ))
info "rcvd_pkts +$ok, rcvd_icrc_err +$icrc, rcvd_malformed +$bad"
check "3 valid packets counted as received" test "$ok" = 3
check "3 malformed packets with a valid ICRC counted as malformed" test "$bad" = 3
check "bad-ICRC and junk packets (202) dropped and counted" test "$icrc" = 202
check "a packet with a bad ICRC never counts as received" test "$((ok + bad + icrc))" = 208

# The socket is namespace-wide: a packet that arrives on veth-a for an
# address of another interface (dummy-x) is not rroce-a's.
$A ip addr add 198.19.5.1/24 dev dummy-x
$B ip route add 198.19.5.0/24 via "$TOPO_A4"
before_ok=$(cnt rcvd_pkts) before_wrong=$(cnt rcvd_wrong_addr)
$B python3 - "$TOPO_B4" 198.19.5.1 <<'PY'
import socket, struct, sys, zlib
src, dst = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_PMTUDISC_DO: DF set, IP ID 0
s.bind((src, 49152))
pkt = struct.pack('!BBHII', 0x04, 0, 0xffff, 0x11, 0) + b'not for rroce-a'
ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0xff, 20 + 8 + len(pkt) + 4, 0, 0x4000, 0xff, 17, 0xffff,
                 socket.inet_aton(src), socket.inet_aton(dst))
udp = struct.pack('!HHHH', 49152, 4791, 8 + len(pkt) + 4, 0xffff)
bth = bytearray(pkt[:12]); bth[4] = 0xff
crc = struct.pack('<I', zlib.crc32(b'\xff' * 8 + ip + udp + bytes(bth) + pkt[12:]))
for _ in range(3):
    s.sendto(pkt + crc, (dst, 4791))
PY
sleep 1
check "packets to an address of another interface are dropped and counted (rcvd_wrong_addr)" \
	test "$(( $(cnt rcvd_wrong_addr) - before_wrong ))" = 3
check "and never count as received" test "$(cnt rcvd_pkts)" = "$before_ok"

# RoCEv2 over IPv6 has no extension headers: one with a hop-by-hop header
# is dropped as malformed before its transport headers are looked at.
before_ok=$(cnt rcvd_pkts) before_bad=$(cnt rcvd_malformed)
$B python3 - "$TOPO_B6" "$TOPO_A6" <<'PY'
import socket, struct, sys
src, dst = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((src, 49152))
# Hop-by-hop header: next header (the kernel fills it), length 0, PadN of 4.
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_HOPOPTS, bytes([0, 0, 1, 4, 0, 0, 0, 0]))
pkt = struct.pack('!BBHII', 0x04, 0, 0xffff, 0x11, 0) + b'hop-by-hop' + bytes(4)
for _ in range(3):
    s.sendto(pkt, (dst, 4791))
PY
sleep 1
check "IPv6 packets with an extension header are dropped as malformed" \
	test "$(( $(cnt rcvd_malformed) - before_bad ))" = 3
check "and never count as received either" test "$(cnt rcvd_pkts)" = "$before_ok"

# Every packet is freed, whatever becomes of it: 4000 valid packets for a
# QP that does not exist (received, then dropped) leave the skb cache
# where it was, give or take what the rest of the system does meanwhile.
skbs() { awk '$1 == "skbuff_head_cache" { print $2 }' /proc/slabinfo; }
if grep -qw kasan_quarantine_put /proc/kallsyms; then
	# Freed objects wait in KASAN's quarantine, still counted as in use.
	skip "received packets are freed" "KASAN's quarantine keeps freed skbs counted; the test kernel checks this"
elif [ -n "$(skbs 2>/dev/null)" ]; then
	before_skbs=$(skbs) before_ok=$(cnt rcvd_pkts)
	$B env PYTHONPATH=$(dirname "$0") python3 - "$TOPO_B4" "$TOPO_A4" <<'PY'
import sys, time
from roce import Peer, packet, RC, SEND_ONLY
peer = Peer(sys.argv[1])
p = packet(RC | SEND_ONLY, 0x7777, 0, bytes(64))
for i in range(4000):
    peer.send(p, sys.argv[2])
    if i % 200 == 199:
        time.sleep(0.01)
PY
	sleep 1
	got=$(( $(cnt rcvd_pkts) - before_ok )) grown=$(( $(skbs) - before_skbs ))
	info "4000 packets sent, $got received; skbuff_head_cache grew by $grown objects"
	check "received packets are freed (skb cache grew by $grown for $got packets)" \
		test "$got" -gt 1000 -a "$grown" -lt $(( got / 4 ))
else
	skip "received packets are freed" "no skbuff_head_cache in /proc/slabinfo"
fi

$A rdma link delete rroce-a
check "sockets closed with the last device of the namespace" test "$(listening)" = 0
$A rdma link add rroce-a type rroce netdev veth-a
check "deleting the namespace with a device in it" ip netns del $TOPO_A
check "the device is gone with its namespace" wait_for 20 no_dev rroce-a
check "module unloads afterwards" bash -c 'sleep 1; modprobe -r rroce'
topo_down
finish
