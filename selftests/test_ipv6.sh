#!/bin/bash
# RoCEv2 over IPv6 between the namespaces: GIDs of the ULA addresses
# (index 2) and of the link-local addresses (index 0).
. "$(dirname "$0")/lib.sh"
topo_devices_up
gid_of() { cat /sys/class/infiniband/$1/ports/1/gids/$2; }
check "GID 2 of rroce-b is its IPv6 ULA address" bash -c "[ \"$(gid_of rroce-b 2)\" = fd72:6f63:6501:0000:0000:0000:0000:0002 ]"
run_pair "ibv_rc_pingpong over IPv6 (ULA GIDs), 4 KiB x 100" \
	ibv_rc_pingpong -d rroce-b -g 2 -n 100 -- ibv_rc_pingpong -d rroce-a -g 2 -n 100
run_pair "ibv_ud_pingpong over IPv6, 512 B x 100" \
	ibv_ud_pingpong -d rroce-b -g 2 -s 512 -n 100 -- ibv_ud_pingpong -d rroce-a -g 2 -s 512 -n 100
run_pair "ib_write_bw over IPv6, 64 KiB x 100" \
	ib_write_bw -d rroce-b -x 2 -F -s 65536 -n 100 -- ib_write_bw -d rroce-a -x 2 -F -s 65536 -n 100
run_pair "ib_read_bw over IPv6, 64 KiB x 100" \
	ib_read_bw -d rroce-b -x 2 -F -s 65536 -n 100 -- ib_read_bw -d rroce-a -x 2 -F -s 65536 -n 100
run_pair "ibv_rc_pingpong over IPv6 link-local GIDs, 4 KiB x 50" \
	ibv_rc_pingpong -d rroce-b -g 0 -n 50 -- ibv_rc_pingpong -d rroce-a -g 0 -n 50
check "no ICRC errors over IPv6" test "$(cnt rroce-a rcvd_icrc_err)$(cnt rroce-b rcvd_icrc_err)" = 00
topo_devices_down
finish
