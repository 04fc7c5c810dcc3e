#!/bin/bash
# The memory placement extensions between two rroce devices through
# unmodified rdma-core's extended QP API: ATOMIC WRITE stores its 8 bytes as
# they were given, in order behind earlier WRITEs, and completes with
# IBV_WC_ATOMIC_WRITE; FLUSH of a range or of a whole region completes with
# IBV_WC_FLUSH. The device advertises global-visibility FLUSH and ATOMIC
# WRITE but not persistence, and refuses regions asking for it. Every
# refused request gets the specified error completion with memory unchanged.
# (Duplicates and malformed requests from the wire: test_wire_hostile.)
. "$(dirname "$0")/lib.sh"
topo_devices_up
a0=$(cnt rroce-b atomic_write)
f0=$(cnt rroce-b flush)
py_checks <<'PY'
import errno, struct
from verbs import Checks, connect_rc, open_devices, wait_wcs
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPCap, QPEx, QPInitAttrEx
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
c = Checks('test_placement')
ok = c.ok
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
FG, FP = e.IBV_ACCESS_FLUSH_GLOBAL, e.IBV_ACCESS_FLUSH_PERSISTENT
QP_ACCESS = LW | RW | RR | FG | FP
GLOBAL, PERSISTENT = e.IBV_FLUSH_GLOBAL, e.IBV_FLUSH_PERSISTENT
RANGE, WHOLE_MR = e.IBV_FLUSH_RANGE, e.IBV_FLUSH_MR
WC_FLUSH, WC_ATOMIC_WRITE = 8, 9

side = open_devices()
ctx_a, pd_a = side['rroce-a'][:2]
ctx_b, pd_b = side['rroce-b'][:2]

# IBV_DEVICE_FLUSH_GLOBAL, _PERSISTENT and ATOMIC_WRITE (pyverbs has no names for them).
DEV_FLUSH_GLOBAL, DEV_FLUSH_PERSISTENT, DEV_ATOMIC_WRITE = 1 << 38, 1 << 39, 1 << 40
caps = ctx_a.query_device_ex().device_cap_flags_ex
ok('the device advertises FLUSH for global visibility', caps & DEV_FLUSH_GLOBAL != 0, hex(caps))
ok('the device advertises ATOMIC WRITE', caps & DEV_ATOMIC_WRITE != 0, hex(caps))
ok('the device does not advertise FLUSH for persistence (no persistent memory support)',
   caps & DEV_FLUSH_PERSISTENT == 0, hex(caps))
c.fails('a region asking for FLUSH_PERSISTENT is refused (EOPNOTSUPP)', lambda: MR(pd_b, 4096, LW | FP), errno.EOPNOTSUPP)

OPS = e.IBV_QP_EX_WITH_FLUSH | e.IBV_QP_EX_WITH_ATOMIC_WRITE | e.IBV_QP_EX_WITH_RDMA_WRITE


# The responders' QPs, kept alive as long as their requesters.
responders = []


def pair(access=QP_ACCESS, rd_atomic=4, depth=64):
    qps = {}
    for name, (ctx, pd, idx, gid) in side.items():
        cq = CQ(ctx, 2 * depth)
        attr = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, pd=pd, send_ops_flags=OPS,
                            cap=QPCap(max_send_wr=depth, max_recv_wr=4),
                            comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
        qps[name] = (QPEx(ctx, attr), cq)
    for me, peer in (('rroce-a', 'rroce-b'), ('rroce-b', 'rroce-a')):
        connect_rc(qps[me][0], qps[peer][0].qp_num, side[peer][3], access if me == 'rroce-b' else QP_ACCESS,
                   sgid_index=side[me][2], timeout=16, rd_atomic=rd_atomic)
    responders.append(qps['rroce-b'])
    return qps['rroce-a']


def post(qp, *ops):
    """Posts (wr_id, kind, args) work requests in one wr_start/wr_complete batch."""
    qp.wr_start()
    for wr_id, kind, args in ops:
        qp.wr_id = wr_id
        qp.wr_flags = e.IBV_SEND_SIGNALED
        if kind == 'aw':
            qp.wr_atomic_write(*args)
        elif kind == 'flush':
            qp.wr_flush(*args)
        else:
            rkey, addr, mr, off, n = args
            qp.wr_rdma_write(rkey, addr)
            qp.wr_set_sge(SGE(mr.buf + off, n, mr.lkey))
    qp.wr_complete()


def results(cq, n, secs=20):
    return [(w.wr_id, w.status, w.opcode) for w in wait_wcs(cq, n, secs)]


remote = MR(pd_b, 8192, LW | RW | RR | FG)
remote.write(bytes(8192), 8192)
local = MR(pd_a, 4096, LW)
qa, cqa = pair()

# 1. ATOMIC WRITE: the 8 bytes land verbatim at the address.
value = bytes(range(0x11, 0x19))
post(qa, (1, 'aw', (remote.rkey, remote.buf + 64, value)))
wcs = wait_wcs(cqa, 1)
got = [(w.wr_id, w.status, w.opcode, w.byte_len) for w in wcs]
ok('ATOMIC WRITE completes with IBV_WC_ATOMIC_WRITE and byte_len 8', got == [(1, e.IBV_WC_SUCCESS, WC_ATOMIC_WRITE, 8)], got)
ok('the 8 bytes are stored as given, nothing around them changes',
   remote.read(24, 56) == bytes(8) + value + bytes(8), remote.read(24, 56).hex())

# 2. In order behind a WRITE: a 4 KiB WRITE, then ATOMIC WRITE of a flag.
#    When the flag completes, the data is there.
local.write(b'\xa5' * 4096, 4096)
post(qa, (2, 'w', (remote.rkey, remote.buf + 4096, local, 0, 4096)),
     (3, 'aw', (remote.rkey, remote.buf + 128, struct.pack('=Q', 0xf1a9))))
got = results(cqa, 2)
ok('WRITE then ATOMIC WRITE of a flag: both complete, in order',
   got == [(2, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE), (3, e.IBV_WC_SUCCESS, WC_ATOMIC_WRITE)], got)
ok('the flag and the data before it are both in place',
   struct.unpack('=Q', remote.read(8, 128))[0] == 0xf1a9 and remote.read(4096, 4096) == b'\xa5' * 4096)

# 3. More than max_rd_atomic (4) in flight: each takes a responder resource
#    in turn; the last value stays.
post(qa, *[(100 + i, 'aw', (remote.rkey, remote.buf + 192, struct.pack('=Q', i))) for i in range(32)])
got = results(cqa, 32, 60)
ok('32 ATOMIC WRITEs to one address with 4 responder resources all complete in order',
   got == [(100 + i, e.IBV_WC_SUCCESS, WC_ATOMIC_WRITE) for i in range(32)], got[:3])
ok('the address holds the last value (31)', struct.unpack('=Q', remote.read(8, 192))[0] == 31,
   remote.read(8, 192).hex())

# 4. FLUSH of a range and of the whole region (whose length names nothing).
post(qa, (4, 'flush', (remote.rkey, remote.buf, 8192, GLOBAL, RANGE)),
     (5, 'flush', (remote.rkey, remote.buf + 100, 12345678, GLOBAL, WHOLE_MR)),
     (6, 'flush', (remote.rkey, remote.buf + 8192, 0, GLOBAL, RANGE)))
got = results(cqa, 3)
ok('FLUSH of a range, of the whole region and of an empty range: IBV_WC_FLUSH, success',
   got == [(i, e.IBV_WC_SUCCESS, WC_FLUSH) for i in (4, 5, 6)], got)
# WRITE, FLUSH, ATOMIC WRITE mixed: all complete in order.
post(qa, (7, 'w', (remote.rkey, remote.buf + 2048, local, 0, 1000)),
     (8, 'flush', (remote.rkey, remote.buf + 2048, 1000, GLOBAL, RANGE)),
     (9, 'aw', (remote.rkey, remote.buf + 3000, struct.pack('=Q', 7))))
got = results(cqa, 3)
ok('WRITE, FLUSH of what it wrote, ATOMIC WRITE: all complete in order',
   [g[:2] for g in got] == [(7, 0), (8, 0), (9, 0)], got)

# 5. The errors: the responder refuses, memory is unchanged, the QP ends in error.
no_flush = MR(pd_b, 4096, LW | RW | RR)
read_only = MR(pd_b, 4096, LW | RR | FG)
for what, mr, access, kind, args, want in (
        ('ATOMIC WRITE to a misaligned address', remote, QP_ACCESS, 'aw',
         lambda m: (m.rkey, m.buf + 4, b'x' * 8), e.IBV_WC_REM_INV_REQ_ERR),
        ('ATOMIC WRITE beyond the region', remote, QP_ACCESS, 'aw',
         lambda m: (m.rkey, m.buf + 8192, b'x' * 8), e.IBV_WC_REM_ACCESS_ERR),
        ('ATOMIC WRITE to a region without remote write', read_only, QP_ACCESS, 'aw',
         lambda m: (m.rkey, m.buf, b'x' * 8), e.IBV_WC_REM_ACCESS_ERR),
        ('ATOMIC WRITE through a QP without remote write', remote, LW | RR | FG, 'aw',
         lambda m: (m.rkey, m.buf, b'x' * 8), e.IBV_WC_REM_ACCESS_ERR),
        ('ATOMIC WRITE with a wrong R_Key', remote, QP_ACCESS, 'aw',
         lambda m: (m.rkey ^ 0x80, m.buf, b'x' * 8), e.IBV_WC_REM_ACCESS_ERR),
        ('FLUSH for persistence', remote, QP_ACCESS, 'flush',
         lambda m: (m.rkey, m.buf, 64, PERSISTENT, RANGE), e.IBV_WC_REM_ACCESS_ERR),
        ('FLUSH of a region registered without the FLUSH right', no_flush, QP_ACCESS, 'flush',
         lambda m: (m.rkey, m.buf, 64, GLOBAL, RANGE), e.IBV_WC_REM_ACCESS_ERR),
        ('FLUSH of a whole region registered without the FLUSH right', no_flush, QP_ACCESS, 'flush',
         lambda m: (m.rkey, m.buf, 0, GLOBAL, WHOLE_MR), e.IBV_WC_REM_ACCESS_ERR),
        ('FLUSH of a range past the region', remote, QP_ACCESS, 'flush',
         lambda m: (m.rkey, m.buf + 4096, 8192, GLOBAL, RANGE), e.IBV_WC_REM_ACCESS_ERR),
        ('FLUSH through a QP without the FLUSH right', remote, LW | RW | RR, 'flush',
         lambda m: (m.rkey, m.buf, 64, GLOBAL, RANGE), e.IBV_WC_REM_ACCESS_ERR)):
    q, cq = pair(access)
    before = (remote.read(8192, 0), no_flush.read(4096, 0), read_only.read(4096, 0))
    post(q, (50, kind, args(mr)))
    got = results(cq, 1)
    after = (remote.read(8192, 0), no_flush.read(4096, 0), read_only.read(4096, 0))
    ok(f'{what}: {e.ibv_wc_status(want).name} and memory unchanged', got == [(50, want, WC_ATOMIC_WRITE if kind == "aw" else WC_FLUSH)]
       and after == before, got)
PY
rc=$?
[ $rc = 0 ] || fail "the Python part exited with status $rc"
aw=$(($(cnt rroce-b atomic_write) - a0)) fl=$(($(cnt rroce-b flush) - f0))
info "the responder counted $aw ATOMIC WRITEs and $fl FLUSHes"
check "the responder counted the 35 ATOMIC WRITEs that succeeded" test $aw = 35
check "the responder counted the 4 FLUSHes that succeeded" test $fl = 4
topo_devices_down
finish
