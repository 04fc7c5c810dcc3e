#!/bin/bash
# rroce on Debian's own kernel (scripts/check-distro boots it with
# scripts/vm --distro): the module DKMS built and installed in the
# distribution root loads into the unmodified kernel, makes a device and
# carries traffic between two network namespaces.
. "$(dirname "$0")/lib.sh"
SUITE=distro
kver=$(uname -r)
case $kver in
*+deb*) pass "booted Debian's kernel $kver ($(cut -d' ' -f1-3 /proc/version))" ;;
*) skip "Debian kernel" "booted $kver, not a Debian kernel: run through scripts/check-distro"; finish ;;
esac

ko=$(modinfo -n rroce 2>/dev/null)
case $ko in
*/updates/dkms/*) pass "rroce.ko comes from DKMS: $ko" ;;
*) fail "rroce.ko is not DKMS's: '$ko'" ;;
esac
check "rroce's vermagic names this kernel" test "$(modinfo -F vermagic rroce | cut -d' ' -f1)" = "$kver"
# Rust symbols of the kernel crate are resolved by name: a metadata build
# that does not match the kernel's leaves them unresolved and the load fails.
check "modprobe rroce" modprobe rroce
info "$(dmesg | grep -m1 'rroce: module verification failed' || echo 'no signature message')"
info "taint: $(cat /proc/sys/kernel/tainted)"
check "rdma link add on eth0" rdma link add rroce0 type rroce netdev eth0
check "ibv_devinfo sees rroce0 through the rxe provider" bash -c 'ibv_devinfo -d rroce0 | grep -q "transport:.*InfiniBand"'
rdma link delete rroce0

topo_devices_up
run_pair "ibv_rc_pingpong, 4 KiB messages, 100 iterations" \
	ibv_rc_pingpong -d rroce-b -g 1 -n 100 -- ibv_rc_pingpong -d rroce-a -g 1 -n 100
run_pair "ibv_ud_pingpong, 1 KiB messages, 100 iterations" \
	ibv_ud_pingpong -d rroce-b -g 1 -s 1024 -n 100 -- ibv_ud_pingpong -d rroce-a -g 1 -s 1024 -n 100
run_pair "ib_write_bw, 64 KiB, 200 iterations" \
	ib_write_bw -d rroce-b -x 1 -F -s 65536 -n 200 -- ib_write_bw -d rroce-a -x 1 -F -s 65536 -n 200
run_pair "ib_read_bw, 64 KiB, 200 iterations" \
	ib_read_bw -d rroce-b -x 1 -F -s 65536 -n 200 -- ib_read_bw -d rroce-a -x 1 -F -s 65536 -n 200
topo_devices_down
check "modprobe -r rroce" modprobe -r rroce
finish
