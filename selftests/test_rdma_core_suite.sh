#!/bin/bash
# rdma-core's own test suite (python3-pyverbs ships it) against rroce0, run
# through the stock rxe provider. RROCE_RDMA_CORE_TESTS lists the tests that
# the verbs rroce implements so far exercise; each unittest result becomes
# one KTAP result line (a skip names rdma-core's reason).
. "$(dirname "$0")/lib.sh"

tests=(
	test_device
	test_pd
	test_cq.CQAPITest
	test_cqex
	test_cq_events
	test_qp.QPTest
	test_srq
	test_mr.MRTest.test_reg_mr_bad_flags
	test_mr.MWTest
	test_odp
)
for t in full_rq_bad_flow post_receive_qp_state_bad_flow post_send_qp_state_bad_flow rq_with_larger_sgl_bad_flow \
	qp_ex_rc_send qp_ex_rc_send_imm qp_ex_rc_rdma_write qp_ex_rc_rdma_write_imm qp_ex_rc_rdma_write_zero_length \
	qp_ex_rc_rdma_read qp_ex_rc_rdma_read_zero_size qp_ex_ud_send qp_ex_ud_send_imm qp_ex_ud_zero_size \
	qp_ex_rc_atomic_cmp_swp qp_ex_rc_atomic_fetch_add qp_ex_rc_atomic_write qp_ex_rc_flush qp_ex_rc_flush_type_violate qp_ex_rc_bind_mw; do
	tests+=(test_qpex.QpExTestCase.test_$t)
done
for t in multicast_traffic ex_multicast_traffic ex_leave_multicast_traffic; do
	tests+=(test_rdmacm.CMTestCase.test_rdmacm_async_$t)
done
for t in cmp_and_swap fetch_and_add invalid_qp_access invalid_mr_access non_aligned_addr invalid_lkey invalid_rkey; do
	tests+=(test_atomic.AtomicTest.test_atomic_$t)
done
tests=(${RROCE_RDMA_CORE_TESTS:-${tests[@]}})

src=/usr/share/doc/rdma-core/tests
if [ ! -d $src ]; then
	skip "rdma-core test suite" "python3-pyverbs does not ship $src"
	finish
fi
rm -rf /tmp/rdma-core-tests
cp -r $src /tmp/rdma-core-tests
gunzip -q /tmp/rdma-core-tests/*.gz

# On-demand paging is on by default: rdma-core's test_odp is among the tests.
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
out=/tmp/rdma-core-tests.log
(cd /tmp && timeout 600 python3 -W ignore rdma-core-tests/run_tests.py --dev rroce0 --gid 1 -v "${tests[@]}") >"$out" 2>&1
rc=$?
# "test_name (tests.module.Class.test_name) ... ok" (possibly with a docstring line in between;
# warnings are silenced above so none lands between a test and its result)
PYTHONPATH=$(dirname "$0") python3 - "$out" <<'PY'
import re, sys
from verbs import ktap_line
text = open(sys.argv[1]).read()
seen = 0
for m in re.finditer(r'^(test\w+) \(([\w.]+)\)(?:\n.*?)? \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$',
                     text, re.M):
    name, where, res = m.group(1), m.group(2).replace('tests.', ''), m.group(3)
    label = f"{where.rsplit('.', 1)[0]}.{name}" if not where.endswith(name) else where
    if res == 'ok' or res == 'expected failure':
        ktap_line('pass', 'test_rdma_core_suite', label)
    elif res.startswith('skipped'):
        ktap_line('skip', 'test_rdma_core_suite', label, res[8:].strip(chr(39)) or 'skipped')
    else:
        ktap_line('fail', 'test_rdma_core_suite', f'{label} ({res})')
    seen += 1
ran = re.search(r'^Ran (\d+) tests?', text, re.M)
if ran and int(ran.group(1)) != seen:
    ktap_line('fail', 'test_rdma_core_suite', f'{ran.group(1)} tests ran but {seen} results could be read from the log')
PY
if grep -qE '^(FAIL|ERROR):' "$out"; then
	grep -E -A12 '^(FAIL|ERROR):' "$out" | head -60 | sed 's/^/# | /'
fi
tail -3 "$out" | sed 's/^/# /'
grep -q "^Ran [1-9]" "$out" || fail "rdma-core suite did not run (status $rc)"
rdma link delete rroce0
finish
