#!/bin/bash
# The GID table follows the netdev's addresses; the port follows carrier and
# raises IB_EVENT_PORT_ERR / IB_EVENT_PORT_ACTIVE; link_downed counts drops.
. "$(dirname "$0")/lib.sh"

modprobe rroce
ip link add veth0 type veth peer name veth1
ip link set veth0 up; ip link set veth1 up
rdma link add rroce1 type rroce netdev veth0
gids() { cat /sys/class/infiniband/rroce1/ports/1/gids/* 2>/dev/null; }

ip addr add 198.19.7.1/24 dev veth0
check "added IPv4 address appears as a GID" wait_for 10 bash -c "cat /sys/class/infiniband/rroce1/ports/1/gids/* | grep -q '0000:0000:0000:0000:0000:ffff:c613:0701'"
ip -6 addr add fd72:6f63:6502::7/64 dev veth0 nodad
check "added IPv6 address appears as a GID" wait_for 10 bash -c "cat /sys/class/infiniband/rroce1/ports/1/gids/* | grep -q 'fd72:6f63:6502:0000:0000:0000:0000:0007'"
check "GID type is RoCE v2" bash -c 'grep -l . /sys/class/infiniband/rroce1/ports/1/gid_attrs/types/* 2>/dev/null | head -1 | xargs cat | grep -q "RoCE v2"'
ip addr del 198.19.7.1/24 dev veth0
check "removed IPv4 address leaves the GID table" wait_for 10 bash -c "! cat /sys/class/infiniband/rroce1/ports/1/gids/* | grep -q 'ffff:c613:0701'"
ip -6 addr del fd72:6f63:6502::7/64 dev veth0
check "removed IPv6 address leaves the GID table" wait_for 10 bash -c "! cat /sys/class/infiniband/rroce1/ports/1/gids/* | grep -q 'fd72:6f63:6502'"

state() { ibv_devinfo -d rroce1 | awk '/state:/ {print $2; exit}'; }
counter() { cat /sys/class/infiniband/rroce1/ports/1/hw_counters/link_downed; }
before=$(counter)
ibv_asyncwatch -d rroce1 >/tmp/events 2>&1 &
watch=$!
sleep 1
ip link set veth1 down
check "carrier loss: port goes DOWN" wait_for 10 bash -c '[ "$(ibv_devinfo -d rroce1 | awk "/state:/ {print \$2; exit}")" = PORT_DOWN ]'
check "carrier loss raises IBV_EVENT_PORT_ERR" wait_for 10 grep -q PORT_ERR /tmp/events
check "link_downed counted the drop" test "$(counter)" -eq $((before + 1))
ip link set veth1 up
check "carrier back: port goes ACTIVE" wait_for 10 bash -c '[ "$(ibv_devinfo -d rroce1 | awk "/state:/ {print \$2; exit}")" = PORT_ACTIVE ]'
check "carrier back raises IBV_EVENT_PORT_ACTIVE" wait_for 10 grep -q PORT_ACTIVE /tmp/events
ip link set veth0 down
check "admin down: phys_state DISABLED" wait_for 10 bash -c 'ibv_devinfo -v -d rroce1 | grep -Eq "phys_state:[[:space:]]+DISABLED"'
ip link set veth0 up
check "admin up: port ACTIVE again" wait_for 10 bash -c 'ibv_devinfo -d rroce1 | grep -q PORT_ACTIVE'
kill $watch 2>/dev/null; wait $watch 2>/dev/null
info "events seen: $(tr '\n' ';' </tmp/events)"
rdma link delete rroce1
ip link del veth0
finish
