#!/bin/bash
# One side of the rroce-to-rroce middleware run (scripts/interop
# --rroce-pair): ROLE is a or b, PEER the other guest's eth0 address. Both
# guests run rroce and walk the same list of steps; in each, one guest serves
# and the other connects (retrying until the server listens), guest a
# serving first, then b. UCX, libfabric and rsockets run as in
# test_middleware.sh, with the settings docs/middleware.md gives, but across
# a real (virtual) Ethernet link between two kernels. The device is named
# rroce0: libfabric 2.1 matches no device whose name has a '-'.
. /rroce/selftests/lib.sh
SUITE=interop-middleware
role=$1 peer=$2
RSPRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
wait_for 10 test -e /sys/class/infiniband/rroce0/ports/1/gids/1 || true

# A client that fails only because its server is not listening yet.
NOT_YET="Couldn't connect|Unable to open|Connection refused|Failed to connect|connect\(\) failed|ECONNREFUSED|Connection reset"
# rroce0's counters as "name value" lines; step_counters prints the ones a
# step changed, and its seconds (packets, and any drop or retry behind a slow step).
counters() { grep -H . /sys/class/infiniband/rroce0/ports/1/hw_counters/* | sed 's|.*/||; s/:/ /' | grep -v '^tx_prio'; }
step_counters() {
	local delta
	delta=$(counters | awk 'NR == FNR {v[$1] = $2; next} $2 != v[$1] {printf " %s +%d", $1, $2 - v[$1]}' /tmp/counters.before -)
	info "guest $role, $((SECONDS - t0)) s, rroce0:${delta:- no counter changed}"
}
# pair SERVER-ROLE WHAT [EXPECT-ERE] SERVER-CMD... -- CLIENT-CMD...: the guest
# with SERVER-ROLE runs the server command, the other the client command
# with PEER appended; the client passes when it exits 0 and, with an
# EXPECT-ERE (given as expect=ERE), printed a line matching it, shown as the
# result.
pair() {
	local server=$1 what=$2 expect=; shift 2
	case $1 in expect=*) expect=${1#expect=}; shift ;; esac
	local srv=() cli=()
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift; cli=("$@")
	counters >/tmp/counters.before; t0=$SECONDS
	if [ "$server" = "$role" ]; then
		if timeout 240 "${srv[@]}" >/tmp/step.log 2>&1; then pass "$what (guest $role serves)"
		else fail "$what (guest $role serves)"; tail -4 /tmp/step.log | sed 's/^/# | /'; fi
	else
		local ok=0 i
		for i in $(seq 1 60); do
			if timeout 240 "${cli[@]}" "$peer" >/tmp/step.log 2>&1; then ok=1; break; fi
			grep -qE "$NOT_YET" /tmp/step.log || break
			sleep 2
		done
		if [ $ok = 1 ] && [ -n "$expect" ] && ! grep -qE "$expect" /tmp/step.log; then ok=0; fi
		if [ $ok = 1 ]; then
			pass "$what (guest $role connects)"
			if [ -n "$expect" ]; then info "$(grep -E "$expect" /tmp/step.log | tail -1 | tr -s ' ')"
			else info "$(grep -E '^ *65536 |iters in' /tmp/step.log | tail -1 | tr -s ' ')"; fi
		else
			fail "$what (guest $role connects, attempt $i)"
			grep -ih "error\|fail\|fatal\|couldn't" /tmp/step.log | head -4 | sed 's/^/# | /'
			tail -4 /tmp/step.log | sed 's/^/# | /'
		fi
	fi
	step_counters
	sleep 1
}
# same SERVER-ROLE WHAT [expect=ERE] CMD...: server and client run CMD alike.
same() {
	local server=$1 what=$2 expect=(); shift 2
	case $1 in expect=*) expect=("$1"); shift ;; esac
	pair "$server" "$what" "${expect[@]}" "$@" -- "$@"
}

UCX="env UCX_NET_DEVICES=rroce0:1 UCX_UD_VERBS_ETH_DGID_CHECK=n ucx_perftest -P 0 -p 13337 -w 10"
FI="env FI_UNIVERSE_SIZE=64 fi_pingpong -c -d rroce0"
ucx_runs() { # SERVER-ROLE LABEL: the UCP tests over both transport sets
	local server=$1 label=$2 tls run bw_n
	for tls in rc_verbs,ud_verbs,self ud_verbs,self; do
		# ud_verbs' 1 MiB tag_bw from guest a to b ran at 0.25 MB/s (50
		# messages in 205 s, every packet received, 6,350 sent again by
		# UCX), 13.7 MB/s the other way: 20 messages keep it in its time.
		bw_n=50; [ $tls = ud_verbs,self ] && bw_n=20
		for run in "tag_lat 64 100" "tag_bw 1048576 $bw_n" "ucp_put_bw 65536 100"; do
			set -- $run
			pair "$server" "UCX $tls$label: $1, $2 B, $3 messages" expect='^Final:' \
				env UCX_TLS=$tls $UCX -n $3 -- env UCX_TLS=$tls $UCX -n $3 -t $1 -s $2
		done
	done
}
# The client's side of rstream under librspreload: its TCP segments and
# rroce0's packets sent over this one (successful) attempt.
cat >/tmp/rstream-client <<EOF
#!/bin/bash
outsegs() { awk '/^Tcp:/ && n++ {print \$12}' /proc/net/snmp; }
t0=\$(outsegs) p0=\$(cat /sys/class/infiniband/rroce0/ports/1/hw_counters/sent_pkts)
LD_PRELOAD=$RSPRELOAD rstream -T s -S 4096 -C 200 -s "\$1"; rc=\$?
t1=\$(outsegs) p1=\$(cat /sys/class/infiniband/rroce0/ports/1/hw_counters/sent_pkts)
echo "rstream-counters: tcp_outsegs \$((t1 - t0)) rroce_sent_pkts \$((p1 - p0))"
exit \$rc
EOF
chmod +x /tmp/rstream-client

for server in a b; do
	same $server "ibv_rc_pingpong 4 KiB x 100" ibv_rc_pingpong -d rroce0 -g 1 -n 100
	same $server "ib_write_bw 64 KiB x 200" ib_write_bw -d rroce0 -x 1 -F -s 65536 -n 200
	ucx_runs $server ""
	for prov in "verbs msg" "verbs;ofi_rxm rdm"; do
		set -- $prov
		same $server "libfabric $1, $2 endpoints: fi_pingpong -c, 64 B, 100 messages" expect='^64 +100 +=100 ' \
			$FI -p "$1" -e $2 -S 64 -I 100
		same $server "libfabric $1, $2 endpoints: fi_pingpong -c, 1 B to 1 MiB, 10 messages each" expect='^1m +10 +=10 ' \
			$FI -p "$1" -e $2 -I 10
	done
	pair $server "rstream -T s (socket calls) under librspreload, 200 x 4 KiB" expect='^custom +[0-9]+[kmg]? +200 ' \
		env LD_PRELOAD=$RSPRELOAD rstream -T s -S 4096 -C 200 -- /tmp/rstream-client
	if [ $server != $role ]; then
		read -r tcp pkts < <(sed -n 's/^rstream-counters: tcp_outsegs \([0-9-]*\) rroce_sent_pkts \([0-9-]*\)/\1 \2/p' /tmp/step.log)
		info "rstream client: TCP segments sent ${tcp:-?}, rroce0 packets sent ${pkts:-?}"
		check "rstream's data went over rroce (at least 200 packets sent), not TCP (no segment sent)" \
			test "${pkts:-0}" -ge 200 -a "${tcp:-x}" = 0
	fi
done

# Jumbo frames: eth0 at MTU 9000 on both guests gives RoCE's 4096-byte MTU.
ip link set eth0 mtu 9000
wait_for 10 sh -c "ibv_devinfo -d rroce0 | grep -q 'active_mtu:.*4096'" || true
check "eth0 MTU 9000: rroce0's active MTU is 4096" sh -c "ibv_devinfo -d rroce0 | grep 'active_mtu:.*4096'"
sleep 3
pair a "UCX rc_verbs,ud_verbs,self, MTU 4096: tag_bw, 1048576 B, 50 messages" expect='^Final:' \
	env UCX_TLS=rc_verbs,ud_verbs,self $UCX -n 50 -- env UCX_TLS=rc_verbs,ud_verbs,self $UCX -n 50 -t tag_bw -s 1048576
ip link set eth0 mtu 1500

for c in rcvd_pkts sent_pkts rcvd_icrc_err rcvd_malformed; do
	info "rroce0 $c $(cnt rroce0 $c)"
done
check "every packet from the other rroce passed the ICRC check" test "$(cnt rroce0 rcvd_icrc_err)" = 0
rdma link delete rroce0
finish
