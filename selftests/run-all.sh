#!/bin/bash
# Runs every selftest (or the ones named) in the guest, one after another in
# the same guest boot, as kselftest's runner does: KTAP at the top, each
# test's own KTAP nested under "# ", one "ok N selftests: rroce: <test>"
# line per test (0 passed, 4 skipped, anything else failed), and the totals
# of all their checks. Each test leaves no device and no module loaded.
cd "$(dirname "$0")"
. ./lib.sh
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(test_*.sh)
echo "1..${#tests[@]}"
all=$(mktemp)
n=0 any_failed=0
for t in "${tests[@]}"; do
	n=$((n + 1))
	t=$(basename "$t")
	echo "# selftests: rroce: $t"
	start=$SECONDS
	results=$(mktemp)
	(unset KTAP_RESULTS; SUITE=${t%.sh} timeout 900 bash "./$t") 2>&1 | sed -u 's/^/# /' | tee "$results"
	rc=${PIPESTATUS[0]}
	cat "$results" >>"$all"
	took="$((SECONDS - start)) s"
	case $rc in
	0) echo "ok $n selftests: rroce: $t ($took)" ;;
	4) echo "ok $n selftests: rroce: $t # SKIP ($took)" ;;
	*)
		any_failed=1
		if grep -q '^# not ok ' "$results"; then
			echo "not ok $n selftests: rroce: $t # exit=$rc ($took)"
		else
			# Counted as a failed check by the tally: no check said why.
			echo "not ok $n selftests: rroce: $t # exit=$rc, no check failed ($took)"
		fi ;;
	esac
	rm -f "$results"
	unload_all
done
p=$(grep -cE '^# ok [0-9]+ ' "$all" || true)
s=$(grep -cE '^# ok [0-9]+ .*# SKIP' "$all" || true)
f=$(grep -cE '^# not ok [0-9]+ ' "$all" || true)
echo "# Totals: pass:$((p - s)) fail:$f xfail:0 xpass:0 skip:$s error:0"
rm -f "$all" "$KTAP_RESULTS"
exit $any_failed
