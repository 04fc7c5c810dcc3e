#!/bin/bash
# rdma-core's test suite, module by module, on rroce and then on rdma_rxe
# in the same guest boot (never both loaded): one line per module with the
# passes, failures, errors and skips of each driver, then the totals. Vendor
# modules (mlx5, efa, ...) and ones needing a GPU are left out. Run by
# scripts/rdma-core-compare; the table in docs/testing.md comes from its output.
#   rdma_core_compare.sh [module...]
. "$(dirname "$0")/lib.sh"
src=/usr/share/doc/rdma-core/tests
[ -d $src ] || { echo "rdma_core_compare: python3-pyverbs does not ship $src"; exit 4; }
rm -rf /tmp/rdma-core-tests
cp -r $src /tmp/rdma-core-tests
gunzip -q /tmp/rdma-core-tests/*.gz 2>/dev/null
modules=("$@")
if [ ${#modules[@]} = 0 ]; then
	for f in /tmp/rdma-core-tests/test_*.py; do
		m=$(basename "$f" .py)
		case $m in test_mlx5_* | test_efa* | test_hns* | test_mana* | test_bnxt* | test_cuda*) continue ;; esac
		modules+=("$m")
	done
fi

# run DRIVER: every module against DRIVER's device; "module pass fail error skip" lines.
run() {
	local drv=$1 dev
	if [ "$drv" = rroce ]; then
		dev=rroce0
		modprobe rroce && rdma link add $dev type rroce netdev eth0
	else
		dev=rxe0
		modprobe rdma_rxe && rdma link add $dev type rxe netdev eth0
	fi
	for m in "${modules[@]}"; do
		(cd /tmp && timeout 900 python3 -W ignore rdma-core-tests/run_tests.py --dev $dev --gid 1 -v "$m") >/tmp/rcc-$drv-$m.log 2>&1
		local rc=$?
		python3 - "$m" "$rc" /tmp/rcc-$drv-$m.log <<'PY'
import re, sys
m, rc, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(path, errors='replace').read()
n = {'ok': 0, 'FAIL': 0, 'ERROR': 0, 'skipped': 0}
for r in re.findall(r' \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)', text):
    n['ok' if r == 'expected failure' else 'FAIL' if r == 'unexpected success' else r] += 1
# A run that died (a crash, a timeout) counts one error beyond what it printed.
if rc not in (0, 1):
    n['ERROR'] += 1
print(m, n['ok'], n['FAIL'], n['ERROR'], n['skipped'])
PY
	done
	rdma link delete $dev
	modprobe -r $drv
}

run rroce >/tmp/rcc-rroce.txt
run rdma_rxe >/tmp/rcc-rxe.txt
printf '%-24s %28s   %28s\n' module 'rroce pass/fail/error/skip' 'rdma_rxe pass/fail/error/skip'
join /tmp/rcc-rroce.txt /tmp/rcc-rxe.txt | while read -r m p f e s P F E S; do
	printf '%-24s %28s   %28s\n' "$m" "$p/$f/$e/$s" "$P/$F/$E/$S"
done
awk '{p+=$2; f+=$3; e+=$4; s+=$5} END {printf "%-24s %28s", "total", p "/" f "/" e "/" s}' /tmp/rcc-rroce.txt
awk '{p+=$2; f+=$3; e+=$4; s+=$5} END {printf "   %28s\n", p "/" f "/" e "/" s}' /tmp/rcc-rxe.txt
# Failures and errors, named, for each driver; then the skips of the
# modules where the two drivers' counts differ, with their reasons.
for drv in rroce rdma_rxe; do
	for m in "${modules[@]}"; do
		grep -E '^(FAIL|ERROR): ' /tmp/rcc-$drv-$m.log 2>/dev/null | sed "s/^/$drv: /"
	done
done
join /tmp/rcc-rroce.txt /tmp/rcc-rxe.txt | while read -r m p f e s P F E S; do
	[ "$p $f $e $s" = "$P $F $E $S" ] && continue
	for drv in rroce rdma_rxe; do
		python3 - "$drv" /tmp/rcc-$drv-$m.log <<'PY'
import re, sys
drv, text = sys.argv[1], open(sys.argv[2], errors='replace').read()
for name, why in re.findall(r'^(test\w+) \([\w.]+\)(?:\n.*?)? \.\.\. skipped (.*)$', text, re.M):
    print(f'{drv}: skip: {name}: {why}')
PY
	done
done
