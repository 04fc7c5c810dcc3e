#!/bin/bash
# NFS over RDMA end to end: the kernel's NFS server (nfsd with the
# RPC-over-RDMA transport, svcrdma) exports a tmpfs on port 20049 in
# namespace B over rroce-b; the kernel's NFS client (NFSv4.2, xprtrdma)
# mounts it with proto=rdma from namespace A over rroce-a. Unlike nvme,
# both open their RDMA connections in their own network namespace. The
# client registers its buffers with fast-registration MRs; the server
# pulls written data with RDMA READ and pushes read data with RDMA WRITE.
# fio writes with checksums and reads back with O_DIRECT, so every byte
# crosses the wire both ways; the file's hash read over NFS must equal the
# hash of what the server holds in its tmpfs. IPv4 moves 128 MiB each way,
# IPv6 (proto=rdma6) 64 MiB. Then unmount, stop the server, and every
# module lets go. The same IPv4 run on rdma_rxe in this boot is reported
# for comparison (not a check of rroce).
. "$(dirname "$0")/lib.sh"
EXPORT=/srv/rroce-nfs MNT=/mnt/rroce-nfs
SIZE=$(on_debug_kernel 32M 128M) SIZE6=$(on_debug_kernel 16M 64M)

for m in nfsd nfsv4 rpcrdma; do
	if ! modprobe -n "$m" 2>/dev/null; then
		skip "NFS over RDMA" "module $m is not available in this kernel"
		finish
	fi
done
for t in exportfs rpc.mountd mount.nfs fio nsenter; do
	command -v "$t" >/dev/null || { skip "NFS over RDMA" "$t is not installed"; finish; }
done

# The server's control files live in an nfsd file system mounted by a
# process of namespace B (nfsd keeps one instance per network namespace);
# `ip netns exec` gives each command a private mount namespace for it.
# nfsd stops its threads when the last mount of a namespace's instance goes.
in_server() { ip netns exec $TOPO_B bash -euc 'mount -t nfsd nfsd /proc/fs/nfsd; '"$1"; }

# server_up: nfsd in namespace B, NFSv4 only (no lockd, so no rpcbind),
# short lease and grace so the first OPEN is not held for 90 s, listening
# on RDMA port 20049 only; rpc.mountd answers the kernel's export upcalls.
# One process configures the server and becomes rpc.mountd: its mount of
# the control files keeps the server up until it is killed.
server_up() {
	# Not through in_server: $! must be the process that becomes rpc.mountd.
	ip netns exec $TOPO_B bash -euc 'mount -t nfsd nfsd /proc/fs/nfsd
		echo "-3 +4" >/proc/fs/nfsd/versions
		echo 10 >/proc/fs/nfsd/nfsv4leasetime
		echo 10 >/proc/fs/nfsd/nfsv4gracetime
		exportfs -o rw,sync,no_root_squash,insecure,no_subtree_check,fsid=0 "*:'$EXPORT'"
		echo "rdma 20049" >/proc/fs/nfsd/portlist
		echo 4 >/proc/fs/nfsd/threads
		echo "server configured"
		exec rpc.mountd -F -N 2 -N 3' >/tmp/rroce-nfsd.log 2>&1 &
	SERVER=$!
	wait_for 60 grep -q "server configured" /tmp/rroce-nfsd.log || return 1
	in_server 'cat /proc/fs/nfsd/portlist' | grep -q rdma
}
server_down() {
	[ -n "${SERVER:-}" ] && { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; SERVER=; }
	true
}
server_threads() { in_server 'cat /proc/fs/nfsd/threads'; }
# Without a running server the threads file reads empty (or 0).
no_threads() { local t; t=$(server_threads) && [ "${t:-0}" = 0 ]; }

# The mount lives in the initial mount namespace; only its transport is
# created in namespace A, where mount.nfs runs.
client_mount() { nsenter --net=/run/netns/$TOPO_A mount -t nfs -o "vers=4.2,$1" "$2" $MNT; }
mounted_over() { grep " $MNT nfs4 " /proc/mounts | grep -q "proto=$1[,\ ]"; }

# fio_verify FILE SIZE: writes SIZE with checksums, then reads it back with
# O_DIRECT (past the client's cache, from the server) and verifies.
fio_verify() {
	timeout 600 fio --name=verify --filename="$1" --size="$2" --rw=write --bs=256k \
		--ioengine=psync --direct=1 --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--output-format=terse 2>&1
}

# transfer LABEL SIZE PROVIDER: fio verify, then the hash read over NFS
# against the hash of the server's copy. Sets ELAPSED to fio's seconds.
transfer() {
	local label=$1 size=$2 ck=check over local_hash
	[ "$3" = rroce ] || ck=report
	timed_fio "$label" 'nfs\|rpc\|rdma\|rroce' fio_verify $MNT/data "$size"
	$ck "$label: fio writes $size and reads it back with matching crc32c" test $FIO_RC = 0
	over=$(dd if=$MNT/data iflag=direct bs=1M 2>/dev/null | sha256sum | cut -c1-64)
	local_hash=$(sha256sum <$EXPORT/data | cut -c1-64)
	info "$label: sha256 over NFS ${over:0:16}..., on the server ${local_hash:0:16}..."
	$ck "$label: the file read over NFS is the server's file" test "$over" = "$local_hash"
	rm -f $MNT/data
}

cleanup() {
	umount -f $MNT 2>/dev/null
	server_down
	umount $EXPORT 2>/dev/null
	modprobe -r nfsv4 nfsd rpcrdma 2>/dev/null
	unload_all
	topo_down
}
trap cleanup EXIT

mkdir -p $EXPORT $MNT
check "a tmpfs to export" mount -t tmpfs -o size=320M rroce-nfs $EXPORT
modprobe nfsd && modprobe rpcrdma && modprobe nfsv4
topo_devices_up
check "the rroce devices" sh -c "$A rdma link show rroce-a/1 && $B rdma link show rroce-b/1"
# Not through check: that runs its command in a subshell, and SERVER must be set here.
if server_up; then pass "nfsd in namespace B listens on RDMA port 20049"
else fail "nfsd in namespace B listens on RDMA port 20049"; tail -5 /tmp/rroce-nfsd.log | sed 's/^/# | /'; fi
info "server threads: $(server_threads 2>&1); $(tr '\n' ' ' </tmp/rroce-nfsd.log | head -c 300)"
before_reg=$(cnt rroce-a fast_reg) before_rinv=$(cnt rroce-a remote_inv) before_linv=$(cnt rroce-a local_inv)
before_b=$(cnt rroce-b sent_pkts) rroce_s=?

check "mount -t nfs -o proto=rdma from namespace A" client_mount proto=rdma,port=20049 $TOPO_B4:/
if mounted_over rdma; then
	pass "the mount uses the RDMA transport"
	info "$(grep " $MNT " /proc/mounts | cut -d' ' -f4 | tr ',' '\n' | grep -E '^(vers|proto|port|rsize|wsize|addr)=' | tr '\n' ' ')"
	transfer "IPv4" "$SIZE" rroce
	rroce_s=$ELAPSED
	check "umount" umount $MNT
else
	fail "the mount uses the RDMA transport"
	dmesg | grep -i 'nfs\|rpc\|rdma' | tail -15 | sed 's/^/# | /'
fi
reg=$(( $(cnt rroce-a fast_reg) - before_reg ))
rinv=$(( $(cnt rroce-a remote_inv) - before_rinv ))
linv=$(( $(cnt rroce-a local_inv) - before_linv ))
info "client: fast_reg +$reg, remote_inv +$rinv, local_inv +$linv; server sent $(( $(cnt rroce-b sent_pkts) - before_b )) packets"
check "the client registered its buffers with REG_MR (fast_reg counted)" test "$reg" -gt 0
check "and invalidated them, remotely or locally" test $((rinv + linv)) -gt 0

check "mount -t nfs -o proto=rdma6 from namespace A" client_mount proto=rdma6,port=20049 "[$TOPO_B6]:/"
if mounted_over rdma6; then
	pass "the IPv6 mount uses the RDMA transport"
	transfer "IPv6" "$SIZE6" rroce
	check "umount (IPv6)" umount $MNT
else
	fail "the IPv6 mount uses the RDMA transport"
fi
for d in rroce-a rroce-b; do
	check "$d: no malformed packets, no ICRC errors" test "$(cnt $d rcvd_malformed)" = 0 -a "$(cnt $d rcvd_icrc_err)" = 0
done

server_down
check "the server stops: no nfsd threads in namespace B" no_threads
if ! wait_for 30 modprobe -r nfsv4 nfsd rpcrdma; then
	info "$(lsmod | grep -E '^(nfsd|nfsv4|rpcrdma|sunrpc|nfs) ' | tr -s ' ' | tr '\n' ';')"
fi
check "nfsv4, nfsd and rpcrdma unload: they let go of every rroce resource" sh -c "! lsmod | grep -qE '^(nfsd|nfsv4|rpcrdma) '"
check "the rroce devices are removed" topo_devices_down
check "the module unloads" modprobe -r rroce

if [ "$(on_debug_kernel 1 0)" = 0 ] && modprobe rdma_rxe 2>/dev/null; then
	modprobe nfsd && modprobe rpcrdma && modprobe nfsv4
	topo_up
	ip netns exec $TOPO_A rdma link add rxe-a type rxe netdev veth-a
	ip netns exec $TOPO_B rdma link add rxe-b type rxe netdev veth-b
	if server_up && client_mount proto=rdma,port=20049 $TOPO_B4:/; then
		transfer "rdma_rxe IPv4" "$SIZE" rxe
		info "fio verify of $SIZE over IPv4: rroce $rroce_s s, rdma_rxe $ELAPSED s"
		umount $MNT
	else
		info "rdma_rxe: the NFS mount failed"
	fi
	server_down
	modprobe -r nfsv4 nfsd rpcrdma 2>/dev/null
fi
finish
