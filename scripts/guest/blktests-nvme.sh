#!/bin/bash
# In the guest: blktests' nvme group over RDMA (nvmet-rdma target and
# nvme-rdma host on soft-RoCE devices of this one host), once per provider
# named (rdma_rxe, rroce), from a writable copy of third_party/blktests.
# blktests drives rdma_rxe itself (USE_RXE=1); for rroce its copy is pointed
# at rroce's module and link type. Each test's result is printed as
# "result: PROVIDER TEST STATUS", then each provider's totals.
#   blktests-nvme.sh [--quick SECONDS] PROVIDER... [-- TEST...]
KTAP_HEADER=0 . /rroce/selftests/lib.sh
quick=()
[ "${1:-}" = --quick ] && { quick=(-q "$2"); shift 2; }
provs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do provs+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(nvme)

# blktests checks kernel options in /boot/config-<release>, which the test
# kernels' read-only root does not have: the harness passes it in /job.
if [ ! -f /proc/config.gz ] && [ ! -f "/boot/config-$(uname -r)" ] && [ -f /job/kernel-config ]; then
	mount -t tmpfs blktests-boot /boot && cp /job/kernel-config "/boot/config-$(uname -r)" && boot_mounted=1
fi
# blktests reads command output through process substitution.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config
# An addressed Ethernet-like netdev with carrier for blktests to bind
# (start_soft_rdma takes every one; the target listens on its address).
ip link add bkt0 type dummy
ip addr add 198.18.9.1/24 dev bkt0
ip link set bkt0 up

declare -A total
for prov in "${provs[@]}"; do
	unload_all
	work=$(mktemp -d /tmp/blktests.XXXXXX)
	cp -r /rroce/third_party/blktests/. "$work"
	case $prov in
	rdma_rxe) ;;
	rroce)
		sed -i -e 's/modprobe rdma_rxe/modprobe rroce/' -e 's/type=rxe$/type=rroce/' \
			-e 's/_patient_rmmod rdma_rxe/_patient_rmmod rroce/' "$work/common/multipath-over-rdma"
		sed -i 's/_have_driver rdma_rxe/_have_driver rroce/' "$work/common/nvme"
		grep -q 'type=rroce$' "$work/common/multipath-over-rdma" ||
			{ echo "blktests: cannot point this copy at rroce"; exit 1; }
		;;
	*) echo "blktests: unknown provider $prov"; exit 1 ;;
	esac
	# The helper programs some tests need; a test whose program did not
	# build is "not run" on every provider alike.
	make -C "$work/src" -k >"$work/src-build.log" 2>&1
	cat >"$work/config" <<-CONF
	NVMET_TRTYPES=rdma
	USE_RXE=1
	NVME_IMG_SIZE=32m
	NVME_NUM_ITER=10
	CONF
	echo "# blktests on $prov: ${tests[*]}"
	start=$SECONDS
	(cd "$work" && ./check "${quick[@]}" -o "$work/results" "${tests[@]}") 2>&1 | tee "$work/out"
	took=$((SECONDS - start))
	# Status lines: "nvme/012 (tr=rdma bd=file) (description) [passed]";
	# a test run in several conditions is named with them: nvme/012[bd=file].
	re='^([a-z]+/[0-9]+) \(([^)]*)\) .*\[(passed|failed|not run)\]$'
	while IFS= read -r line; do
		[[ $line =~ $re ]] || continue
		name=${BASH_REMATCH[1]} cond=${BASH_REMATCH[2]} status=${BASH_REMATCH[3]}
		[[ $cond == *=* ]] || cond=""
		read -ra parts <<<"${cond//tr=rdma/}"
		cond=$(IFS=,; echo "${parts[*]}")
		echo "result: $prov $name${cond:+[$cond]} $status"
	done <"$work/out"
	p=$(grep -c ' \[passed\]$' "$work/out")
	f=$(grep -c ' \[failed\]$' "$work/out")
	n=$(grep -c ' \[not run\]$' "$work/out")
	total[$prov]="$p passed, $f failed, $n not run ($took s)"
	# A failed test's full output, for the log.
	find "$work/results" -name '*.out.bad' | sort | while read -r bad; do
		echo "# $prov ${bad#"$work/results/"} differs from the expected output:"
		diff -u "/rroce/third_party/blktests/tests/nvme/$(basename "${bad%.bad}")" "$bad" | head -30 | sed 's/^/# | /'
	done
	rm -rf "$work"
	unload_all
done
ip link del bkt0
[ -n "${boot_mounted:-}" ] && umount /boot
for prov in "${provs[@]}"; do echo "totals: $prov: ${total[$prov]}"; done
