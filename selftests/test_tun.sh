#!/bin/bash
# rroce on netdevs without Ethernet: two tun devices joined by a user-space
# relay (tun_relay.py, a VPN in miniature), one per namespace. The devices
# have no MAC address, so each rroce device takes a random locally
# administered GUID; GIDs come from the tun devices' addresses, and RoCEv2
# packets travel as plain IP packets. RC, UD and rdma_cm traffic over IPv4
# and IPv6, data verified.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
TA4=198.18.9.1 TB4=198.18.9.2 TA6=fd72:6f63:6509::1 TB6=fd72:6f63:6509::2

cleanup() {
	[ -n "${RELAY:-}" ] && kill "$RELAY" 2>/dev/null
	unload_all
	topo_down
}
trap cleanup EXIT

modprobe tun
modprobe rroce
ip netns add $TOPO_A
ip netns add $TOPO_B
A="ip netns exec $TOPO_A" B="ip netns exec $TOPO_B"
python3 "$HERE/tun_relay.py" $TOPO_A tun-a $TOPO_B tun-b >/tmp/tun-relay.log 2>&1 &
RELAY=$!
check "a tun device in each namespace, joined by a relay" wait_for 20 sh -c "$A ip link show tun-a && $B ip link show tun-b"
for side in A B; do
	ns=TOPO_$side dev=tun-${side,,} v4=T${side}4 v6=T${side}6
	ip -n "${!ns}" link set lo up
	ip -n "${!ns}" addr add "${!v4}/24" dev $dev
	ip -n "${!ns}" -6 addr add "${!v6}/64" dev $dev nodad
	ip -n "${!ns}" link set $dev up
done
check "IP over the tun link" $A ping -c 2 -W 5 $TB4

check "rdma link add on a tun device" $A rdma link add rroce-ta type rroce netdev tun-a
$B rdma link add rroce-tb type rroce netdev tun-b
check "the device's port is ACTIVE with the link up" wait_for 10 sh -c "$A rdma link show rroce-ta/1 | grep -q 'state ACTIVE'"
guid_a=$(cat /sys/class/infiniband/rroce-ta/node_guid) guid_b=$(cat /sys/class/infiniband/rroce-tb/node_guid)
info "node GUIDs: $guid_a, $guid_b"
# A locally administered MAC has bit 1 of its first byte set; EUI-64 flips it.
check "GUIDs from random local addresses, different" sh -c \
	"[ '$guid_a' != '$guid_b' ] && [ \$(( 0x${guid_a:0:2} & 2 )) = 0 ] && [ \$(( 0x${guid_b:0:2} & 2 )) = 0 ]"

gid_a=$(wait_for 20 gid_of rroce-ta tun-a; gid_of rroce-ta tun-a)
gid_b=$(gid_of rroce-tb tun-b)
check "RoCE v2 GIDs from the tun devices' IPv4 addresses" test -n "$gid_a" -a -n "$gid_b"
gid6_a=$(wait_for 20 gid6_of rroce-ta tun-a; gid6_of rroce-ta tun-a)
gid6_b=$(gid6_of rroce-tb tun-b)
check "and from their IPv6 addresses" test -n "$gid6_a" -a -n "$gid6_b"
info "GID indexes: IPv4 $gid_a/$gid_b, IPv6 $gid6_a/$gid6_b; active_mtu $(ibv_devinfo -d rroce-ta | awk '/active_mtu/ {print $2}')"

# The pair tools of lib.sh, with the tun link's addresses (run_pair appends
# the server's to each client command).
TOPO_A4=$TA4 TOPO_B4=$TB4 PAIR_TIMEOUT=120
run_pair "ibv_rc_pingpong over tun (IPv4, 4 KiB x 100, checked)" \
	ibv_rc_pingpong -d rroce-tb -g "$gid_b" -n 100 -c -- ibv_rc_pingpong -d rroce-ta -g "$gid_a" -n 100 -c
run_pair "ibv_rc_pingpong over tun (IPv6)" \
	ibv_rc_pingpong -d rroce-tb -g "$gid6_b" -n 50 -c -- ibv_rc_pingpong -d rroce-ta -g "$gid6_a" -n 50 -c
run_pair "ibv_ud_pingpong over tun" \
	ibv_ud_pingpong -d rroce-tb -g "$gid_b" -n 100 -s 512 -- ibv_ud_pingpong -d rroce-ta -g "$gid_a" -n 100 -s 512
run_pair "rping (rdma_cm) over tun, 50 verified pings" \
	rping -s -a $TB4 -C 50 -V -- rping -c -C 50 -V -a
# bash -c ignores the appended IPv4 address (it becomes $0).
run_pair "rping (rdma_cm) over tun, IPv6" \
	rping -s -a $TB6 -C 20 -V -- bash -c "rping -c -a $TB6 -C 20 -V"
run_pair "ib_write_bw over tun (rdma_cm, 64 KiB x 200)" \
	ib_write_bw -d rroce-tb -R -s 65536 -n 200 -- ib_write_bw -d rroce-ta -R -s 65536 -n 200
for d in rroce-ta rroce-tb; do
	check "$d: no malformed packets, no ICRC errors" test "$(cnt $d rcvd_malformed)" = 0 -a "$(cnt $d rcvd_icrc_err)" = 0
done

kill $RELAY; wait $RELAY 2>/dev/null; RELAY=
check "closing the relay deletes the tun devices" wait_for 10 sh -c "! $A ip link show tun-a 2>/dev/null"
check "rroce-ta is gone with tun-a" wait_for 20 sh -c "! rdma dev show rroce-ta 2>/dev/null"
check "rroce-tb is gone with tun-b" wait_for 20 sh -c "! rdma dev show rroce-tb 2>/dev/null"
check "the module unloads" modprobe -r rroce
finish
