#!/bin/bash
# What unmodified rdma-core sees: ibv_devices, ibv_devinfo through the stock
# rxe provider, port attributes, GIDs, MTU, counters.
. "$(dirname "$0")/lib.sh"

modprobe rroce
rdma link add rroce0 type rroce netdev eth0
mac=$(cat /sys/class/net/eth0/address)
# modified EUI-64 of the MAC, as ibv_devinfo prints GUIDs (xxxx:xxxx:xxxx:xxxx)
guid=$(python3 -c "
m=[int(x,16) for x in '$mac'.split(':')]
e=[m[0]^2,m[1],m[2],0xff,0xfe,m[3],m[4],m[5]]
print(':'.join('%02x%02x'%(e[i],e[i+1]) for i in range(0,8,2)))")

check "ibv_devices lists rroce0" bash -c 'ibv_devices | grep -q rroce0'
info=$(ibv_devinfo -v -d rroce0 2>&1)
check "ibv_devinfo -v opens rroce0 (rxe provider bound by driver id: the name matches no provider)" test $? = 0
printf '%s\n' "$info" | head -20 | sed 's/^/# /'
has() { printf '%s\n' "$info" | grep -Eq "$1"; }
check "node GUID is the EUI-64 of the MAC ($guid)" has "node_guid:[[:space:]]+$guid"
check "one physical port" has "phys_port_cnt:[[:space:]]+1"
check "vendor id 0xffffff" has "vendor_id:[[:space:]]+0xffffff"
check "port state PORT_ACTIVE" has "state:[[:space:]]+PORT_ACTIVE"
check "physical state LINK_UP" has "phys_state:[[:space:]]+LINK_UP"
check "link layer Ethernet" has "link_layer:[[:space:]]+Ethernet"
check "max_mtu 4096" has "max_mtu:[[:space:]]+4096"
check "active_mtu 1024 on a 1500-byte link" has "active_mtu:[[:space:]]+1024"
check "max_pd advertised" has "max_pd:[[:space:]]+1048576"
check "max_sge 32" has "max_sge:[[:space:]]+32"
check "memory windows advertised (max_mw 524287)" has "max_mw:[[:space:]]+524287$"
check "memory windows advertised (MEM_WINDOW)" has "MEM_WINDOW$"
check "type 2B memory windows advertised (MEM_WINDOW_TYPE_2B)" has "MEM_WINDOW_TYPE_2B"
check "multicast advertised (max_mcast_grp 8192)" has "max_mcast_grp:[[:space:]]+8192$"
check "multicast advertised (max_mcast_qp_attach 56)" has "max_mcast_qp_attach:[[:space:]]+56$"
check "multicast advertised (max_total_mcast_qp_attach 458752)" has "max_total_mcast_qp_attach:[[:space:]]+458752$"
check "memory management extensions advertised (LOCAL_INV, SEND with Invalidate, fast registration)" has "MEM_MGT_EXTENSIONS"
check "atomics advertised, atomic across the QPs of the device (ATOMIC_HCA)" has "atomic_cap:[[:space:]]+ATOMIC_HCA"
v4=$(ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1)
check "IPv4 GID (::ffff:$v4) is RoCE v2" has "::ffff:$v4, RoCE v2"
v6=$(ip -6 -o addr show eth0 scope global | awk '{print $4}' | cut -d/ -f1)
check "IPv6 GID ($v6) is RoCE v2" has "$v6, RoCE v2"
check "link-local GID is RoCE v2" has "fe80:0000:0000:0000:.*, RoCE v2|fe80::.*, RoCE v2"
check_fails "no RoCE v1 GIDs" has "RoCE v1"
check "uverbs ABI version 2" bash -c 'for d in /sys/class/infiniband_verbs/uverbs*; do [ "$(cat $d/ibdev)" = rroce0 ] && [ "$(cat $d/abi_version)" = 2 ] && exit 0; done; exit 1'

ip link set eth0 mtu 9000
check "active_mtu follows a 9000-byte netdev MTU (4096)" bash -c 'ibv_devinfo -d rroce0 | grep -Eq "active_mtu:[[:space:]]+4096"'
ip link set eth0 mtu 1280
check "active_mtu follows a 1280-byte netdev MTU (1024)" bash -c 'ibv_devinfo -d rroce0 | grep -Eq "active_mtu:[[:space:]]+1024"'
ip link set eth0 mtu 1000
check "active_mtu follows a 1000-byte netdev MTU (512)" bash -c 'ibv_devinfo -d rroce0 | grep -Eq "active_mtu:[[:space:]]+512"'
ip link set eth0 mtu 1500

check "rdma statistic shows the port counters" bash -c 'rdma statistic show link rroce0/1 | grep -q link_downed'
check "hw_counters in sysfs" test -f /sys/class/infiniband/rroce0/ports/1/hw_counters/link_downed

py_checks <<'PY'
import sys
from pyverbs.device import Context
from pyverbs.pd import PD
from verbs import Checks
checks = Checks('test_devinfo')
ok = True
with Context(name='rroce0') as ctx:
    a = ctx.query_device()
    p = ctx.query_port(1)
    pds = [PD(ctx) for _ in range(64)]
    for pd in pds:
        pd.close()
    checks.ok('pyverbs query_device/query_port and 64 PD alloc/dealloc',
              a.phys_port_cnt == 1 and p.state == 4, 'ports %d, state %d' % (a.phys_port_cnt, p.state))
    try:
        ctx.query_port(2)
        checks.ok('query_port on a port that does not exist fails', False, 'query_port(2) succeeded')
    except Exception:
        checks.ok('query_port on a port that does not exist fails', True)
PY

check "pkey index 0 is the default key" bash -c 'cat /sys/class/infiniband/rroce0/ports/1/pkeys/0 | grep -qx 0xffff'
check "rdma link delete" rdma link delete rroce0
finish
