#!/bin/bash
# In the guest: scripts/guest/incast.py (arguments passed on); the JSON of
# all samples follows an "incast-json:" line.
python3 /rroce/scripts/guest/incast.py --json /tmp/incast.json "$@"
rc=$?
[ -f /tmp/incast.json ] && { echo "incast-json:"; tr -d '\n' </tmp/incast.json; echo; }
exit $rc
