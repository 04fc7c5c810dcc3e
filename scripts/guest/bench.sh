#!/bin/bash
# In the guest: the two-namespace topology, then scripts/guest/bench.py
# (arguments passed on); the JSON of all samples follows a "bench-json:" line.
KTAP_HEADER=0 . /rroce/selftests/lib.sh
topo_up
python3 /rroce/scripts/guest/bench.py --json /tmp/bench.json "$@"
rc=$?
[ -f /tmp/bench.json ] && { echo "bench-json:"; tr -d '\n' </tmp/bench.json; echo; }
topo_down
exit $rc
