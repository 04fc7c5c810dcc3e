#!/bin/bash
# Where a QP's packets are sent from (docs/data-path.md, "Streams run on
# another CPU"): a streaming poster's doorbells leave the sending to the
# QP's runner on another CPU, so the poster's CPU only posts (but for
# RDMA READs, whose responses weigh more); a ping-pong sends in its own
# system call.
#
# A veth hands each packet to the backlog of the CPU that sends it, and
# /proc/net/softnet_stat counts, per CPU, the packets that CPU's receive
# processing took (nothing else uses the network of this guest meanwhile):
# that says which CPU sent them. The posters are pinned to CPU 0 with
# taskset. Functional checks of placement, not timed.
. "$(dirname "$0")/lib.sh"

if [ "$(nproc)" -lt 2 ]; then
	skip "streams leave the poster's CPU" "one CPU only: nowhere else to send from"
	finish
fi
if [ -n "$(cat /sys/devices/system/cpu/isolated 2>/dev/null)" ]; then
	skip "streams leave the poster's CPU" "CPUs $(cat /sys/devices/system/cpu/isolated) are isolated, and streams keep off them (test_isolated_cpus.sh)"
	finish
fi
topo_devices_up

# Packets the receive processing of CPU 0 ("0"), or of all other CPUs
# ("others"), took: the first column of each online CPU's row, whose 13th
# column is the CPU's number.
backlog() {
	local n=0 processed cpu
	while read -r processed _ _ _ _ _ _ _ _ _ _ _ cpu _; do
		if { [ "$1" = 0 ] && [ $((16#$cpu)) = 0 ]; } || { [ "$1" = others ] && [ $((16#$cpu)) != 0 ]; }; then
			n=$((n + 16#$processed))
		fi
	done </proc/net/softnet_stat
	echo $n
}

N=4000
# A stream: 4000 64-byte WRITEs from a poster pinned to CPU 0, as many
# in flight as the queue holds.
s0=$(backlog 0) s1=$(backlog others) p0=$(cnt rroce-a sent_pkts)
run_pair "ib_write_bw, 64 B, $N WRITEs, poster on CPU 0" \
	ib_write_bw -d rroce-b -x 1 -F -s 64 -n $N -- taskset -c 0 ib_write_bw -d rroce-a -x 1 -F -s 64 -n $N
d0=$(($(backlog 0) - s0)) d1=$(($(backlog others) - s1)) sent=$(($(cnt rroce-a sent_pkts) - p0))
info "stream: rroce-a sent $sent packets; received on CPU 0: $d0 packets, on the others: $d1"
check "the stream's WRITEs were sent from other CPUs than the poster's CPU 0 (received there: $d1 of $sent, at least $N sent)" \
	test "$sent" -ge $N -a "$d1" -ge $((sent * 9 / 10))

# A READ stream: 2000 4 KiB READs from a poster pinned to CPU 0. Its
# responses (4 packets each at the 1024-byte MTU), built by the peer, are
# the heavier half: the requests leave from the poster's CPU and the
# responses from the others.
N=2000
s0=$(backlog 0) s1=$(backlog others)
run_pair "ib_read_bw, 4 KiB, $N READs, poster on CPU 0" \
	ib_read_bw -d rroce-b -x 1 -F -s 4096 -n $N -- taskset -c 0 ib_read_bw -d rroce-a -x 1 -F -s 4096 -n $N
d0=$(($(backlog 0) - s0)) d1=$(($(backlog others) - s1))
info "READ stream: received on CPU 0: $d0 packets, on the others: $d1"
check "the READ stream's requests left from the poster's CPU 0 and the responses from the others (received on CPU 0: $d0, at least $N; on the others: $d1, at least $((3 * N)))" \
	test "$d0" -ge $N -a "$d1" -ge $((3 * N))

# A ping-pong: both ends pinned to CPU 0, one message at a time. Every
# packet is sent where its work is, on CPU 0: a doorbell in its system
# call, a responder and its ACK in the softirq its request arrived in. A
# poster taken for a stream would send from another CPU.
N=1000
s0=$(backlog 0) s1=$(backlog others)
run_pair "ib_write_lat, 2 B, $N round trips, both ends on CPU 0" \
	taskset -c 0 ib_write_lat -d rroce-b -x 1 -F -s 2 -n $N -- taskset -c 0 ib_write_lat -d rroce-a -x 1 -F -s 2 -n $N
d0=$(($(backlog 0) - s0)) d1=$(($(backlog others) - s1))
info "ping-pong: received on CPU 0: $d0 packets, on the others: $d1"
check "the ping-pong's packets were sent on CPU 0, where both ends post (received there: $d0, at least $((2 * N)); on the others: $d1, under $((N / 10)))" \
	test "$d0" -ge $((2 * N)) -a "$d1" -lt $((N / 10))

topo_devices_down
finish
