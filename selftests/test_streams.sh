#!/bin/bash
# Where a QP's packets are sent from (docs/data-path.md, "Streams run on
# another CPU"): a streaming poster's doorbells leave the sending to the
# QP's runner on another CPU, so the poster's CPU only posts; a ping-pong
# sends in its own system call.
#
# A veth hands each packet to the backlog of the CPU that sends it, and
# /proc/net/softnet_stat counts, per CPU, the packets each backlog
# processed: that says which CPU sent them. The posters are pinned with
# taskset. Functional checks of placement, not timed.
. "$(dirname "$0")/lib.sh"

if [ "$(nproc)" -lt 2 ]; then
	skip "streams leave the poster's CPU" "one CPU only: nowhere else to send from"
	finish
fi
topo_devices_up

# Packets the backlog of CPU $1 has processed (the first column of its row).
backlog() { local row; row=$(sed -n "$(($1 + 1))p" /proc/net/softnet_stat); echo $((16#${row%% *})); }

N=4000
# A stream: 4000 64-byte WRITEs from a poster pinned to CPU 0, as many
# in flight as the queue holds.
s0=$(backlog 0) s1=$(backlog 1) p0=$(cnt rroce-a sent_pkts)
run_pair "ib_write_bw, 64 B, $N WRITEs, poster on CPU 0" \
	ib_write_bw -d rroce-b -x 1 -F -s 64 -n $N -- taskset -c 0 ib_write_bw -d rroce-a -x 1 -F -s 64 -n $N
d0=$(($(backlog 0) - s0)) d1=$(($(backlog 1) - s1)) sent=$(($(cnt rroce-a sent_pkts) - p0))
info "stream: rroce-a sent $sent packets; backlog of CPU 0: $d0 packets, of CPU 1: $d1"
check "the stream's WRITEs were sent from CPU 1, not the poster's CPU 0 (CPU 1's backlog: $d1 of $sent)" \
	test "$d1" -ge $((sent * 9 / 10))

# A ping-pong: both ends pinned to CPU 0, one message at a time. Every
# packet is sent where its work is, on CPU 0: a doorbell in its system
# call, a responder and its ACK in the softirq its request arrived in. A
# poster taken for a stream would send from CPU 1.
N=1000
s0=$(backlog 0) s1=$(backlog 1)
run_pair "ib_write_lat, 2 B, $N round trips, both ends on CPU 0" \
	taskset -c 0 ib_write_lat -d rroce-b -x 1 -F -s 2 -n $N -- taskset -c 0 ib_write_lat -d rroce-a -x 1 -F -s 2 -n $N
d0=$(($(backlog 0) - s0)) d1=$(($(backlog 1) - s1))
info "ping-pong: backlog of CPU 0: $d0 packets, of CPU 1: $d1"
check "the ping-pong's packets were sent on CPU 0, where both ends post (CPU 1's backlog: $d1, under $((N / 10)))" \
	test "$d1" -lt $((N / 10))

topo_devices_down
finish
