#!/bin/bash
# Memory regions: registration of pinned user memory, access rights, keys
# that change on every registration, limits, deregistration without leaks.
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
from verbs import Checks
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
c = Checks('test_mr')
ok, fails = c.ok, c.fails
LW, RW, RR, RA = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_ATOMIC
with Context(name='rroce0') as ctx:
    pd = PD(ctx)
    mr = MR(pd, 4096, LW)
    ok('register 4 KiB with local write', mr.lkey != 0, mr.lkey)
    big = MR(pd, 64 << 20, LW | RW | RR | RA)
    ok('register 64 MiB with all remote rights', big.rkey == big.lkey, (big.lkey, big.rkey))
    ok('keys of two regions differ', mr.lkey != big.lkey)
    old = mr.lkey
    mr.close()
    again = MR(pd, 4096, LW)
    ok('a new registration never reuses a stale key', again.lkey != old, (hex(old), hex(again.lkey)))
    fails('remote write without local write is refused', lambda: MR(pd, 4096, RW))
    fails('remote atomic without local write is refused', lambda: MR(pd, 4096, RA))
    r = MR(pd, 4096, LW | e.IBV_ACCESS_ON_DEMAND)
    ok('on-demand paging registers (on by default; test_odp covers it)', r.lkey != 0)
    r.close()
    r = MR(pd, 4096, LW | e.IBV_ACCESS_RELAXED_ORDERING)
    ok('relaxed ordering (an optional hint) is accepted', r.lkey != 0)
    r.close()
    odd = MR(pd, 1000, LW)
    odd.write(b'x' * 1000, 1000)
    ok('an unaligned 1000-byte buffer registers', odd.read(1000, 0) == b'x' * 1000)
    odd.close()
    regs = [MR(pd, 8192, LW) for _ in range(500)]
    ok('500 regions registered', len({m.lkey for m in regs}) == 500)
    for m in regs:
        m.close()
    again.close(); big.close(); pd.close()
PY
check "no user MR left in rdma res" bash -c '[ "$(rdma res show mr dev rroce0 | grep mrn | grep -c " pid ")" = 0 ]'
check "rdma link delete" rdma link delete rroce0
finish
