#!/bin/bash
# NVMe over RDMA end to end: an nvmet target exporting a memory-backed
# null_blk namespace through nvmet-rdma, and the kernel's nvme-rdma host
# connected to it, both over rroce, then fio writing and reading back with
# checksums. The host registers every data buffer with a fast-registration
# MR (alloc_mr, map_mr_sg, REG_MR); the target moves the data with RDMA
# READ and WRITE on that key and answers with SEND with Invalidate, or the
# host invalidates locally (LOCAL_INV). Kernel consumers open their
# connections in the initial network namespace, so target and host share
# one rroce device there (as blktests runs them on rdma_rxe), and their
# packets go from one QP to the other without the network. IPv4 moves 256 MiB
# each way, IPv6 64 MiB with the target receiving through shared receive
# queues (nvmet-rdma use_srq=1: kernel SRQs, post_srq_recv, and the
# last-WQE event its queue teardown waits for). The same run on rdma_rxe in
# this boot is reported for comparison (its result is not a check of rroce).
. "$(dirname "$0")/lib.sh"
NQN=nqn.2026-12.io.rroce:selftest
CFG=/sys/kernel/config/nvmet
T4=198.18.7.1 T6=fd72:6f63:6507::1
SIZE=$(on_debug_kernel 32M 256M) SIZE6=$(on_debug_kernel 16M 64M)

for m in nvmet nvmet-rdma nvme-rdma null_blk; do
	if ! modprobe -n "$m" 2>/dev/null; then
		skip "NVMe over RDMA" "module $m is not available in this kernel"
		finish
	fi
done
for t in nvme fio; do
	command -v "$t" >/dev/null || { skip "NVMe over RDMA" "$t is not installed"; finish; }
done

net_up() {
	ip link add nvt0 type veth peer name nvh0
	ip addr add $T4/24 dev nvt0
	ip -6 addr add $T6/64 dev nvt0 nodad
	ip link set nvt0 up
	ip link set nvh0 up
}
net_down() { ip link del nvt0 2>/dev/null; true; }

# target_up ADDR FAMILY: exports /dev/nullb0 on ADDR port 4420.
target_up() {
	mkdir -p $CFG/subsystems/$NQN/namespaces/1 $CFG/ports/1 || return 1
	echo 1 >$CFG/subsystems/$NQN/attr_allow_any_host
	echo /dev/nullb0 >$CFG/subsystems/$NQN/namespaces/1/device_path
	echo 1 >$CFG/subsystems/$NQN/namespaces/1/enable
	echo rdma >$CFG/ports/1/addr_trtype
	echo "$2" >$CFG/ports/1/addr_adrfam
	echo "$1" >$CFG/ports/1/addr_traddr
	echo 4420 >$CFG/ports/1/addr_trsvcid
	ln -s $CFG/subsystems/$NQN $CFG/ports/1/subsystems/$NQN
}
target_down() {
	rm -f $CFG/ports/1/subsystems/$NQN
	rmdir $CFG/ports/1 2>/dev/null
	[ -d $CFG/subsystems/$NQN/namespaces/1 ] && echo 0 >$CFG/subsystems/$NQN/namespaces/1/enable
	rmdir $CFG/subsystems/$NQN/namespaces/1 $CFG/subsystems/$NQN 2>/dev/null
	true
}

# The block device of the connected namespace of $NQN.
host_disk() {
	local b
	for b in /sys/block/nvme*; do
		[ -e "$b" ] || continue
		if grep -qx "$NQN" "$b/device/subsysnqn" 2>/dev/null; then
			echo "/dev/${b##*/}"
			return 0
		fi
	done
	return 1
}

# fio_verify DISK SIZE: writes SIZE with checksums, then reads it back and verifies.
fio_verify() {
	timeout 600 fio --name=verify --filename="$1" --size="$2" --rw=randwrite --bsrange=4k-128k \
		--ioengine=libaio --iodepth=8 --direct=1 --verify=crc32c --verify_fatal=1 \
		--do_verify=1 --randrepeat=0 --output-format=terse 2>&1
}

# run PROVIDER ADDR FAMILY SIZE LABEL: one connect, verify,
# disconnect cycle; records checks when PROVIDER is rroce, prints results
# otherwise. Sets ELAPSED to the fio run's seconds.
run() {
	local prov=$1 at=$2 fam=$3 size=$4 label=$5 disk
	local ck=check
	[ "$prov" = rroce ] || ck=report
	target_up "$at" "$fam"
	# A keep-alive timeout well above the default 5 s: under TCG a busy
	# guest can hold one back that long, and the target would drop the host.
	$ck "$label: nvme connect over RDMA" nvme connect -t rdma -a "$at" -s 4420 -n $NQN \
		--ctrl-loss-tmo 10 --reconnect-delay 2 --keep-alive-tmo 30
	if ! wait_for 60 host_disk; then
		$ck "$label: the namespace appears on the host" false
		dmesg | grep -i 'nvme\|rdma\|rroce' | tail -15 | sed 's/^/# | /'
		ELAPSED=0
		target_down
		return
	fi
	disk=$(host_disk)
	info "$label: $disk"
	if [ "$(cat /sys/module/nvmet_rdma/parameters/use_srq 2>/dev/null)" = Y ] && [ "$prov" = rroce ]; then
		info "$label: $(rdma res show srq 2>&1 | head -3 | tr '\n' ';')"
		$ck "$label: the target receives through kernel SRQs" sh -c "rdma res show srq | grep -q nvmet"
	fi
	timed_fio "$label" 'nvme\|rdma\|rroce\|blk' fio_verify "$disk" "$size"
	$ck "$label: fio writes $size and reads it back with matching crc32c" test $FIO_RC = 0
	$ck "$label: nvme disconnect" nvme disconnect -n $NQN
	$ck "$label: the namespace is gone from the host" wait_for 30 sh -c "! ls /sys/block | grep -q nvme"
	target_down
}

cleanup() {
	nvme disconnect -n $NQN >/dev/null 2>&1
	target_down
	modprobe -r nvme-rdma nvmet-rdma 2>/dev/null
	unload_all
	modprobe -r null_blk 2>/dev/null
	net_down
}
trap cleanup EXIT

net_up
check "null_blk: a memory-backed disk" modprobe null_blk nr_devices=1 memory_backed=1 gb=1 bs=4096
modprobe nvmet && modprobe nvmet-rdma && modprobe nvme-rdma
modprobe rroce
check "an rroce device on the target's interface" rdma link add rroce-n type rroce netdev nvt0
before_reg=$(cnt rroce-n fast_reg) before_rinv=$(cnt rroce-n remote_inv) before_linv=$(cnt rroce-n local_inv)
run rroce $T4 ipv4 "$SIZE" "rroce IPv4"
rroce_s=$ELAPSED
reg=$(( $(cnt rroce-n fast_reg) - before_reg ))
rinv=$(( $(cnt rroce-n remote_inv) - before_rinv ))
linv=$(( $(cnt rroce-n local_inv) - before_linv ))
info "fast_reg +$reg, remote_inv +$rinv, local_inv +$linv"
check "the host registered its buffers with REG_MR (fast_reg counted)" test "$reg" -gt 0
check "the target invalidated them with SEND with Invalidate (remote_inv counted)" test "$rinv" -gt 0
check "every registration was invalidated, remotely or locally" test $((rinv + linv)) -ge "$reg"
check "no malformed packets" test "$(cnt rroce-n rcvd_malformed)" = 0
modprobe -r nvmet-rdma && modprobe nvmet-rdma use_srq=1
start=$SECONDS
run rroce $T6 ipv6 "$SIZE6" "rroce IPv6, target on SRQs"
info "IPv6 with SRQs: $((SECONDS - start)) s from connect to the end of the teardown"
check "nvme-rdma and nvmet-rdma unload: they let go of every rroce resource" modprobe -r nvme-rdma nvmet-rdma
check "the rroce device is removed" rdma link delete rroce-n
check "the module unloads" modprobe -r rroce

if [ "$(on_debug_kernel 1 0)" = 0 ] && modprobe rdma_rxe 2>/dev/null; then
	modprobe nvmet-rdma && modprobe nvme-rdma
	rdma link add rxe-n type rxe netdev nvt0
	run rxe $T4 ipv4 "$SIZE" "rdma_rxe IPv4"
	info "fio verify of $SIZE over IPv4: rroce $rroce_s s, rdma_rxe $ELAPSED s"
	modprobe -r nvme-rdma nvmet-rdma 2>/dev/null
fi
finish
