#!/bin/bash
# Every byte of random-size WRITE, READ and SEND transfers at random offsets
# arrives intact, over the veth pair of the standard topology and over local
# delivery (RROCE_INTEGRITY_MIB sets the volume; the PSNs start just before
# the 24-bit wrap, so the runs cross it).
. "$(dirname "$0")/lib.sh"
modprobe rroce
topo_up
ip netns exec $TOPO_A rdma link add rroce-a type rroce netdev veth-a
ip netns exec $TOPO_B rdma link add rroce-b type rroce netdev veth-b
rdma link add rroce0 type rroce netdev eth0
mib=${RROCE_INTEGRITY_MIB:-1024}
verify() { # what devA devB MiB
	local out rc
	out=$(python3 "$(dirname "$0")/integrity.py" "$2" "$3" "$4" 2>&1)
	rc=$?
	info "$(printf '%s' "$out" | tail -1)"
	if [ $rc = 0 ]; then pass "$1: $4 MiB of WRITE/READ/SEND verified byte for byte"
	else fail "$1: data integrity ($4 MiB)"; printf '%s\n' "$out" | tail -5 | sed 's/^/# | /'; fi
}
verify "two hosts over veth" rroce-a rroce-b "$mib"
verify "local delivery" rroce0 rroce0 $((mib / 8))
rdma link delete rroce-a; rdma link delete rroce-b; rdma link delete rroce0
topo_down
finish
