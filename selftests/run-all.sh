#!/bin/bash
# Runs every selftest (or the ones named) in the guest and prints the
# tally. Tests run one after another in the same guest boot; each leaves
# no device and no module loaded behind.
cd "$(dirname "$0")"
. ./lib.sh
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test_*.sh)
log=$(mktemp)
for t in "${tests[@]}"; do
	echo "=== $t"
	start=$SECONDS
	SUITE=$(basename "$t" .sh) timeout 900 bash "./$(basename "$t")" 2>&1 | tee -a "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" != 0 ] && ! grep -q "^FAIL $(basename "$t" .sh):" "$log"; then
		echo "FAIL $(basename "$t" .sh): exited with status $rc" | tee -a "$log"
	fi
	echo "=== $t done in $((SECONDS - start)) s"
	unload_all
done
passed=$(grep -c '^PASS ' "$log" || true)
failed=$(grep -c '^FAIL ' "$log")
skipped=$(grep -c '^SKIP ' "$log")
echo "guest selftests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
