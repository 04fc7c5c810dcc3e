#!/bin/bash
# Kernel consumers' verbs: posts refused before the QP can take them (sends
# before RTS, receives before INIT), and fast registration as a ULP uses it
# (alloc_mr, map_mr_sg, REG_MR, LOCAL_INV, SEND with Invalidate), data through the registered key
# in both directions, and the error cases: a page list longer than the
# device allows, REG_MR of a valid MR, keys used before registration or after
# invalidation, LOCAL_INV of a wrong key, SEND with Invalidate of a key that
# cannot be invalidated, a REG_MR flushed in the error state (its key stays
# refused, the next REG_MR registers) and REG_MRs of one MR queued together;
# address handles created and destroyed in softirq
# and with interrupts off; a QP whose CQ is another device's refused, and a
# UD send whose AH is another device's refused when posted. The checks run in the test-only kernel module
# selftests/modules/rroce_kverbs_test.ko against an rroce device; each of its
# log lines becomes a check here. NVMe over RDMA (test_nvme) runs the same
# verbs under a real consumer.
. "$(dirname "$0")/lib.sh"
MOD=$(helper_module rroce_kverbs_test)
if [ ! -f "$MOD" ]; then
	skip "kernel verbs" "the test module $MOD was not built"
	finish
fi
cleanup() {
	rmmod rroce_kverbs_test 2>/dev/null
	unload_all
	ip link del kvt0 2>/dev/null
	true
}
trap cleanup EXIT
ip link add kvt0 type veth peer name kvt1
ip addr add 198.18.9.1/24 dev kvt0
ip addr add 198.18.9.2/24 dev kvt1
ip link set kvt0 up
ip link set kvt1 up
modprobe rroce
check "an rroce device on kvt0" rdma link add rroce-k type rroce netdev kvt0
wait_for 30 gid_of rroce-k kvt0 >/dev/null
check "a second rroce device on kvt1" rdma link add rroce-k2 type rroce netdev kvt1
wait_for 30 gid_of rroce-k2 kvt1 >/dev/null
mark="rroce_kverbs_test: start $$"
echo "$mark" >/dev/kmsg
out=$(insmod "$MOD" netdev=kvt0 other=kvt1 2>&1)
check "the test module runs on rroce-k" test $? = 0
[ -n "$out" ] && info "insmod: $out"
log=$(dmesg | sed -n "/$mark/,\$p" | grep -o 'rroce_kverbs_test: .*')
while IFS= read -r line; do
	case $line in
	"rroce_kverbs_test: ok "*) pass "$(echo "${line#rroce_kverbs_test: ok }" | cut -d' ' -f2-)" ;;
	"rroce_kverbs_test: not ok "*) fail "$(echo "${line#rroce_kverbs_test: not ok }" | cut -d' ' -f2-)" ;;
	"rroce_kverbs_test: done "*) info "${line#rroce_kverbs_test: }" ;;
	esac
done <<<"$log"
check "the module reported its checks" sh -c "printf '%s\n' \"\$1\" | grep -q 'done [1-9][0-9]* checks'" _ "$log"
check "the test module unloads" rmmod rroce_kverbs_test
check "the devices are removed" sh -c 'rdma link delete rroce-k && rdma link delete rroce-k2'
check "rroce unloads: the test left nothing behind" modprobe -r rroce
finish
