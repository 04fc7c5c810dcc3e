#!/bin/bash
# On-demand paging through unmodified rdma-core: regions registered with
# IBV_ACCESS_ON_DEMAND are not pinned; rroce faults their pages in as
# transfers reach them, and the MMU notifier takes them away again. Every
# transfer below starts with the buffers' pages dropped (MADV_DONTNEED), so
# data that lands in or comes from the right pages proves both directions.
# Also: the advertised capabilities, prefetch (ibv_advise_mr, checked with
# mincore), pages dropped while WRITEs stream in, a fault that waits on a
# slow disk holding up its own QP only, and the errors: memory made
# inaccessible under a region, a read-only mapping registered for writing,
# implicit ODP, bad prefetch requests; one user's QPs stalled on faults
# leave room for another user's packets. Then, the queue a PD gets for them
# goes with the PD, also after its QPs used another PD's SRQ. Last, one
# user's regions span at most its share of the address space.
. "$(dirname "$0")/lib.sh"
# On by default; the module parameter odp=0 turns it off: nothing
# advertised, nothing registered.
modprobe -r rroce 2>/dev/null
modprobe rroce odp=0
topo_devices_up
py_checks <<'PY'
import errno
from verbs import Checks, open_devices
from pyverbs.mr import MR
import pyverbs.enums as e
c = Checks('test_odp')
ctx, pd = open_devices(('rroce-a',))['rroce-a'][:2]
caps = ctx.query_device_ex().odp_caps
c.ok('with odp=0: no ODP capability advertised', caps.general_caps == 0 and caps.rc_odp_caps == 0, caps.general_caps)
c.fails('with odp=0: an ODP registration is refused with EOPNOTSUPP',
        lambda: MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND), errno.EOPNOTSUPP)
PY
topo_devices_down
modprobe -r rroce
# A slow disk (section 7).
slow_disk_up
# Loaded without parameters: on by default.
modprobe rroce
topo_devices_up
py_checks <<'PY'
import ctypes, errno, struct, threading
from verbs import Checks, connect_rc, open_devices, wait_wcs
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e
c = Checks('test_odp')
ok = c.ok
LW, RW, RR, RA = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_ATOMIC
ODP = e.IBV_ACCESS_ON_DEMAND
ALL = LW | RW | RR | RA

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
PROT_READ, PROT_WRITE, MAP_PRIVATE, MAP_ANONYMOUS, MAP_NORESERVE, MADV_DONTNEED = 1, 2, 2, 0x20, 0x4000, 4
PAGE = 4096

class Mem:
    """Anonymous memory of this process, at a known address."""
    def __init__(self, pages, prot=PROT_READ | PROT_WRITE, flags=0):
        self.len = pages * PAGE
        self.addr = libc.mmap(None, self.len, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0)
        assert self.addr not in (None, ctypes.c_void_p(-1).value)
    def drop(self):
        """Takes the pages away: the next access sees fresh zero pages."""
        assert libc.madvise(self.addr, self.len, MADV_DONTNEED) == 0
    def revoke(self):
        """Replaces the memory with an inaccessible mapping (PROT_NONE), which,
        unlike munmap, no later mapping of this process can take over."""
        MAP_FIXED = 0x10
        assert libc.mmap(self.addr, self.len, 0, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == self.addr
    def put(self, off, data):
        ctypes.memmove(self.addr + off, data, len(data))
    def get(self, off, n):
        return ctypes.string_at(self.addr + off, n)
    def resident(self):
        """How many of the pages are in memory."""
        vec = ctypes.create_string_buffer(self.len // PAGE)
        assert libc.mincore(self.addr, self.len, vec) == 0
        raw_vec = vec.raw
        return len(raw_vec) - raw_vec.count(0)
    def resident_at(self, off):
        """Whether the page at `off` is in memory."""
        vec = ctypes.create_string_buffer(1)
        assert libc.mincore(self.addr + off, PAGE, vec) == 0
        return vec.raw[0] & 1 == 1

side = open_devices()
(ctx_a, pd_a, gi_a, gid_a), (ctx_b, pd_b, gi_b, gid_b) = side['rroce-a'], side['rroce-b']

# 1. What the device advertises.
odp = ctx_a.query_device_ex().odp_caps
RC_WANT = (e.IBV_ODP_SUPPORT_SEND | e.IBV_ODP_SUPPORT_RECV | e.IBV_ODP_SUPPORT_WRITE | e.IBV_ODP_SUPPORT_READ
           | e.IBV_ODP_SUPPORT_ATOMIC | e.IBV_ODP_SUPPORT_SRQ_RECV)
ok('ODP advertised by default (IBV_ODP_SUPPORT), implicit ODP not', odp.general_caps & e.IBV_ODP_SUPPORT
   and not odp.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT, odp.general_caps)
ok('RC: SEND, RECV, WRITE, READ, ATOMIC, SRQ_RECV on demand', odp.rc_odp_caps & RC_WANT == RC_WANT, odp.rc_odp_caps)
ok('UD: SEND and RECV on demand', odp.ud_odp_caps & (e.IBV_ODP_SUPPORT_SEND | e.IBV_ODP_SUPPORT_RECV)
   == (e.IBV_ODP_SUPPORT_SEND | e.IBV_ODP_SUPPORT_RECV), odp.ud_odp_caps)

def rc_pair(access=ALL, depth=64):
    qps = {}
    for name, (ctx, pd, idx, gid) in side.items():
        cq = CQ(ctx, 2 * depth)
        qps[name] = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                       cap=QPCap(max_send_wr=depth, max_recv_wr=depth))), cq)
    for me, peer in (('rroce-a', 'rroce-b'), ('rroce-b', 'rroce-a')):
        connect_rc(qps[me][0], qps[peer][0].qp_num, side[peer][3], access, sgid_index=side[me][2], timeout=16)
    return qps['rroce-a'], qps['rroce-b']

def statuses(wcs):
    return [(w.wr_id, w.status) for w in wcs]

# 2. RC transfers between two on-demand regions of three pages, 9000 bytes
#    from offset 100 (three pages touched), every page dropped first.
N, OFF, LEN = 8, 100, 9000
ma, mb = Mem(3), Mem(3)
mra = MR(pd_a, ma.len, ALL | ODP, address=ma.addr)
mrb = MR(pd_b, mb.len, ALL | ODP, address=mb.addr)
ok('an ODP region registers without touching its pages', ma.resident() == 0 and mb.resident() == 0,
   (ma.resident(), mb.resident()))
(qa, cqa), (qb, cqb) = rc_pair()
pattern = lambda i: bytes((i * 7 + k) & 0xff for k in range(LEN))

good = []
for i in range(N):
    ma.drop(); mb.drop()
    ma.put(OFF, pattern(i))
    qb.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mb.addr + OFF, LEN, mrb.lkey)]))
    qa.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(ma.addr + OFF, LEN, mra.lkey)]))
    sa, sb = wait_wcs(cqa, 1), wait_wcs(cqb, 1)
    good.append(statuses(sa) == [(i, 0)] and [(w.status, w.byte_len) for w in sb] == [(0, LEN)]
                and mb.get(OFF, LEN) == pattern(i))
ok(f'SEND/RECV, {N} times into just-dropped pages: completions and data right', all(good), good)

# WRITE from A's region into B's, READ from B's into A's: the source's
# pages dropped before it is filled, the target's before the transfer.
for what, op, first_id, src, dst, seed in (('RDMA WRITE', e.IBV_WR_RDMA_WRITE, 100, ma, mb, 50),
                                           ('RDMA READ', e.IBV_WR_RDMA_READ, 200, mb, ma, 90)):
    good = []
    for i in range(N):
        src.drop()
        src.put(OFF, pattern(i + seed))
        dst.drop()
        w = SendWR(wr_id=first_id + i, opcode=op, num_sge=1, sg=[SGE(ma.addr + OFF, LEN, mra.lkey)])
        w.set_wr_rdma(mrb.rkey, mb.addr + OFF)
        qa.post_send(w)
        good.append(statuses(wait_wcs(cqa, 1)) == [(first_id + i, 0)] and dst.get(OFF, LEN) == pattern(i + seed))
    ok(f'{what}, {N} times into just-dropped pages: data right', all(good), good)

def atomic(wr_id, op, off, compare_add, swap=0):
    w = SendWR(wr_id=wr_id, opcode=op, num_sge=1, sg=[SGE(ma.addr + off, 8, mra.lkey)], send_flags=e.IBV_SEND_SIGNALED)
    w.set_wr_atomic(mrb.rkey, mb.addr + 2 * PAGE + 8, compare_add, swap)
    qa.post_send(w)
    return statuses(wait_wcs(cqa, 1))
mb.drop(); ma.drop()
r1 = atomic(300, e.IBV_WR_ATOMIC_FETCH_AND_ADD, 16, 5)
v1 = (struct.unpack('=Q', ma.get(16, 8))[0], struct.unpack('=Q', mb.get(2 * PAGE + 8, 8))[0])
ok('FETCH_ADD 5 on a dropped page: found 0, memory 5', r1 == [(300, 0)] and v1 == (0, 5), (r1, v1))
mb.drop(); mb.put(2 * PAGE + 8, struct.pack('=Q', 11)); ma.drop()
r2 = atomic(301, e.IBV_WR_ATOMIC_CMP_AND_SWP, 24, 11, 99)
v2 = (struct.unpack('=Q', ma.get(24, 8))[0], struct.unpack('=Q', mb.get(2 * PAGE + 8, 8))[0])
ok('COMPARE_SWAP 11 -> 99 after the local page was dropped: found 11, memory 99', r2 == [(301, 0)] and v2 == (11, 99),
   (r2, v2))

# 3. Pages dropped while WRITEs stream in: every WRITE completes, the last
#    one's data is there once the dropping stops.
stop = threading.Event()
def dropper():
    while not stop.is_set():
        mb.drop()
t = threading.Thread(target=dropper)
t.start()
M = 200
ma.put(OFF, pattern(7))
done, bad = 0, []
try:
    for i in range(M):
        w = SendWR(wr_id=400 + i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(ma.addr + OFF, LEN, mra.lkey)])
        w.set_wr_rdma(mrb.rkey, mb.addr + OFF)
        qa.post_send(w)
        got = wait_wcs(cqa, 1, 20)
        done += len(got)
        bad += [x.status for x in got if x.status]
finally:
    stop.set()
    t.join()
ok(f'{M} WRITEs while another thread drops the target pages: all complete', done == M and not bad, (done, bad[:4]))
w = SendWR(wr_id=999, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(ma.addr + OFF, LEN, mra.lkey)])
w.set_wr_rdma(mrb.rkey, mb.addr + OFF)
qa.post_send(w)
ok('then one more WRITE lands whole', statuses(wait_wcs(cqa, 1)) == [(999, 0)] and mb.get(OFF, LEN) == pattern(7))

# 4. UD SEND from an on-demand region into a pinned one.
def ud_qp(ctx, pd, recvs=8):
    cq = CQ(ctx, max(16, recvs))
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=QPCap(max_send_wr=8, max_recv_wr=recvs)))
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.qkey = 0x1234
    a.pkey_index = 0
    a.port_num = 1
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    s = QPAttr(qp_state=e.IBV_QPS_RTS)
    s.sq_psn = 0
    qp.modify(s, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    return qp, cq
ua, ucqa = ud_qp(ctx_a, pd_a)
ub, ucqb = ud_qp(ctx_b, pd_b)
ah = AH(pd_a, attr=AHAttr(gr=GlobalRoute(dgid=gid_b, sgid_index=gi_a), is_global=1, port_num=1))
recv = MR(pd_b, 1024 + 40, LW)
good = []
for i in range(4):
    ma.drop()
    ma.put(0, pattern(i)[:1000])
    if i % 2:
        ma.drop()
    ub.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(recv.buf, 1040, recv.lkey)]))
    w = SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(ma.addr, 1000, mra.lkey)])
    w.set_wr_ud(ah, ub.qp_num, 0x1234)
    ua.post_send(w)
    sa, sb = wait_wcs(ucqa, 1), wait_wcs(ucqb, 1)
    want = pattern(i)[:1000] if i % 2 == 0 else bytes(1000)
    good.append(statuses(sa) == [(i, 0)] and [x.status for x in sb] == [0] and recv.read(1000, 40) == want)
ok('UD SEND from an ODP region (present, then dropped pages read as zeros): data right', all(good), good)

# 5. Prefetch (ibv_advise_mr), through the raw ioctl: rdma-core's rxe
#    provider does not implement it, so this is what a process can send.
import uverbs_raw as raw
rc = raw.Context('rroce-b')
rpd, other_pd = rc.alloc_pd(), rc.alloc_pd()
mp = Mem(3)
odp_mr = rc.reg_mr(rpd, mp.addr, mp.len, raw.LOCAL_WRITE | raw.REMOTE_WRITE | raw.ON_DEMAND)
def advise(advice, flags, sges, pd=rpd):
    rc.advise_mr(pd, advice, flags, sges)
advise(raw.ADVISE_PREFETCH_WRITE, raw.ADVISE_FLAG_FLUSH, [(mp.addr, mp.len, odp_mr[1])])
ok('synchronous PREFETCH_WRITE faults every page in', mp.resident() == 3, mp.resident())
mp.drop()
advise(raw.ADVISE_PREFETCH, 0, [(mp.addr + PAGE, 10, odp_mr[1])])
ok('PREFETCH (asynchronous) of 10 bytes faults their page in', mp.resident() == 1, mp.resident())
mp.drop()
advise(raw.ADVISE_PREFETCH_NO_FAULT, raw.ADVISE_FLAG_FLUSH, [(mp.addr, mp.len, odp_mr[1])])
ok('PREFETCH_NO_FAULT faults nothing in', mp.resident() == 0, mp.resident())
advise(raw.ADVISE_PREFETCH_WRITE, raw.ADVISE_FLAG_FLUSH,
       [(mp.addr, 8, odp_mr[1]), (mp.addr + 2 * PAGE, 0, odp_mr[1]), (mp.addr + 2 * PAGE + 8, 8, odp_mr[1])])
ok('three ranges at once (one empty): the two pages named are in', mp.resident() == 2, mp.resident())
pinned = rc.reg_mr(rpd, recv.buf, 1024, raw.LOCAL_WRITE)
reads_only = rc.reg_mr(rpd, mp.addr, mp.len, raw.REMOTE_READ | raw.ON_DEMAND)
theirs = rc.reg_mr(other_pd, mp.addr, mp.len, raw.LOCAL_WRITE | raw.ON_DEMAND)
def refused(what, advice, sges, code, flags=raw.ADVISE_FLAG_FLUSH):
    try:
        advise(advice, flags, sges)
        ok(f'prefetch of {what} is refused', False, 'succeeded')
    except OSError as ex:
        ok(f'prefetch of {what} is refused ({errno.errorcode.get(code)})', ex.errno == code, ex.errno)
refused('a wrong L_Key', raw.ADVISE_PREFETCH, [(mp.addr, 8, odp_mr[1] ^ 0x40)], errno.EINVAL)
refused('a range beyond the region', raw.ADVISE_PREFETCH, [(mp.addr + PAGE, 3 * PAGE, odp_mr[1])], errno.EINVAL)
refused('a range before the region', raw.ADVISE_PREFETCH, [(mp.addr - PAGE, 8, odp_mr[1])], errno.EINVAL)
refused('a range that wraps around', raw.ADVISE_PREFETCH, [(2**64 - 8, 16, odp_mr[1])], errno.EINVAL)
refused('a pinned region', raw.ADVISE_PREFETCH, [(recv.buf, 8, pinned[1])], errno.EINVAL)
refused("another PD's region", raw.ADVISE_PREFETCH, [(mp.addr, 8, theirs[1])], errno.EINVAL)
refused('a region without local write, for writing', raw.ADVISE_PREFETCH_WRITE, [(mp.addr, 8, reads_only[1])], errno.EINVAL)
refused('an unknown advice (9)', 9, [(mp.addr, 8, odp_mr[1])], errno.EOPNOTSUPP)
refused('an unknown flag', raw.ADVISE_PREFETCH, [(mp.addr, 8, odp_mr[1])], errno.EINVAL, flags=2)
refused('a good range after a bad one', raw.ADVISE_PREFETCH, [(mp.addr, 8, 0), (mp.addr, 8, odp_mr[1])], errno.EINVAL)
mp.drop()
refused('a region read-only for writing, asynchronously (the check is not a fault)', raw.ADVISE_PREFETCH_WRITE,
        [(mp.addr, 8, reads_only[1])], errno.EINVAL, flags=0)
many = [(mp.addr + (i % 3) * PAGE, 64, odp_mr[1]) for i in range(4000)]
advise(raw.ADVISE_PREFETCH_WRITE, raw.ADVISE_FLAG_FLUSH, many)
ok('4000 ranges in one advice: done, the three pages in', mp.resident() == 3, mp.resident())

# A synchronous prefetch of a large range walks it a chunk at a time, each
# chunk a turn of the region: a WRITE into the range's last page, posted
# once the walk has begun, completes before the walk ends instead of waiting
# for all of it (on the receive lane other QPs share).
import time
# Reading faults in the shared zero page, so the walk costs page tables
# only (2 KiB a MiB), not the range's memory, and needs no commit
# (NORESERVE). The range is nearly all of this user's share of the address
# space on-demand regions may span (an eighth of 4 times the memory: half
# of it), less room for the few small regions here, at most 4 GiB.
mem_total = int(next(l for l in open('/proc/meminfo') if l.startswith('MemTotal:')).split()[1]) * 1024
USER_SPAN = mem_total // PAGE * 4 // 8 * PAGE
BIG = min(4 << 30, (USER_SPAN - (16 << 20)) & ~((2 << 20) - 1))
SPAN = min(BIG, (4 << 30) - PAGE)  # one SGE's length has 32 bits
big = Mem(BIG // PAGE, flags=MAP_NORESERVE)
big_mr = rc.reg_mr(rpd, big.addr, big.len, raw.LOCAL_WRITE | raw.REMOTE_WRITE | raw.ON_DEMAND)
rcq = rc.create_cq(16)
rqp = rc.create_qp(rpd, rcq, rcq)
cqw = CQ(ctx_a, 16)
qw = QP(pd_a, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cqw, rcq=cqw, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
rc.connect(rqp, qw.qp_num, raw.gid_of("rroce-a")[1], raw.gid_of("rroce-b")[0], access=raw.REMOTE_WRITE, timeout=16)
connect_rc(qw, rqp.qpn, gid_b, ALL, sgid_index=gi_a, timeout=16)
walk = {}
def prefetch_big():
    start = time.monotonic()
    try:
        advise(raw.ADVISE_PREFETCH, raw.ADVISE_FLAG_FLUSH, [(big.addr, SPAN, big_mr[1])])
        walk['errno'] = 0
    except OSError as ex:
        walk['errno'] = ex.errno
    walk['start'], walk['end'] = start, time.monotonic()
th = threading.Thread(target=prefetch_big)
th.start()
# Posted once the walk's first page is in rather than after a fixed time,
# which a fast machine's walk would outrun.
deadline = time.monotonic() + 30
while not big.resident_at(0) and 'end' not in walk and time.monotonic() < deadline:
    time.sleep(0.002)
target = SPAN - PAGE
ma.put(0, b'\xa5' * 64)
w = SendWR(wr_id=600, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(ma.addr, 64, mra.lkey)])
w.set_wr_rdma(big_mr[2], big.addr + target)
qw.post_send(w)
got = statuses(wait_wcs(cqw, 1, 600))
written = time.monotonic()
in_when_written = big.resident()
th.join()
print(f'# a synchronous prefetch of {SPAN >> 20} MiB took {walk["end"] - walk["start"]:.2f} s; the WRITE completed '
      f'{written - walk["start"]:.2f} s after it started, with {in_when_written} of {SPAN // PAGE} pages in',
      flush=True)
ok(f'a WRITE into a range under a synchronous prefetch of {SPAN >> 20} MiB completes before the walk ends, data right',
   got == [(600, 0)] and written < walk['end'] and big.get(target, 64) == b'\xa5' * 64,
   (got, round(walk['end'] - written, 2)))
ok(f'the {SPAN >> 20} MiB prefetch itself succeeds, every page of it in', walk.get('errno') == 0 and big.resident() == SPAN // PAGE,
   (walk.get('errno'), big.resident()))
rc.close()

# 6. Errors.
c.fails('implicit ODP (the whole address space) is refused with EOPNOTSUPP',
        lambda: MR(pd_a, 0, ALL | ODP, implicit=True), errno.EOPNOTSUPP)
# The core keeps a page list for every page a region spans: address space
# alone (5 times the guest's memory) gets no region.
huge = Mem(5 * mem_total // PAGE, flags=MAP_NORESERVE)
c.fails('a region spanning more than 4 times the memory is refused with ENOMEM',
        lambda: MR(pd_a, huge.len, ALL | ODP, address=huge.addr), errno.ENOMEM)
# A read-only mapping registered for writing: ODP registration does not
# look at the mapping, the write fault fails and the WRITE with it.
ro = Mem(1, PROT_READ)
mro = MR(pd_b, ro.len, ALL | ODP, address=ro.addr)
(q, cq), _ = rc_pair()
ma.put(0, b'\x55' * 64)
w = SendWR(wr_id=500, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(ma.addr, 64, mra.lkey)])
w.set_wr_rdma(mro.rkey, ro.addr)
q.post_send(w)
got = statuses(wait_wcs(cq, 1, 20))
ok('WRITE into a read-only mapping registered on demand for writing: IBV_WC_REM_ACCESS_ERR, memory unchanged',
   got == [(500, e.IBV_WC_REM_ACCESS_ERR)] and ro.get(0, 64) == bytes(64), got)
(q, cq), _ = rc_pair()
w = SendWR(wr_id=501, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(ma.addr, 64, mra.lkey)])
w.set_wr_rdma(mro.rkey, ro.addr)
q.post_send(w)
got = statuses(wait_wcs(cq, 1, 20))
ok('READ from it works (zeros)', got == [(501, 0)] and ma.get(0, 64) == bytes(64), got)
# Memory taken away under a region: nothing to fault in.
gone = Mem(2)
mgone = MR(pd_b, gone.len, ALL | ODP, address=gone.addr)
gone.revoke()
(q, cq), _ = rc_pair()
w = SendWR(wr_id=502, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(ma.addr, 64, mra.lkey)])
w.set_wr_rdma(mgone.rkey, gone.addr + 100)
q.post_send(w)
got = statuses(wait_wcs(cq, 1, 20))
ok('WRITE into a region whose memory became inaccessible: IBV_WC_REM_ACCESS_ERR', got == [(502, e.IBV_WC_REM_ACCESS_ERR)], got)
lgone = Mem(1)
mlgone = MR(pd_a, lgone.len, ALL | ODP, address=lgone.addr)
lgone.revoke()
(q, cq), _ = rc_pair()
q.post_send(SendWR(wr_id=503, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(lgone.addr, 64, mlgone.lkey)]))
got = statuses(wait_wcs(cq, 1, 20))
ok('SEND from a local region whose memory became inaccessible: IBV_WC_LOC_PROT_ERR', got == [(503, e.IBV_WC_LOC_PROT_ERR)], got)
for m in (mgone, mlgone, mro, mra, mrb):
    m.close()

# 7. A fault that waits long holds up its own QP only. The region lies on a
#    slow disk (3 s a page); a WRITE of its 4 pages waits 12 s for them.
#    Meanwhile another PD's QP moves data before the disk has finished a
#    single read, and QPs and MRs of that PD are created and destroyed
#    (destroying waits for the work in progress on the module's queue). The
#    slow WRITE's QPs exist before the region, so its registration moves
#    their work to the PD's queue. A QP of the slow PD that took its
#    receives from an SRQ of a third PD, destroyed, leaves no link: a
#    region of the third PD deregisters at once, without waiting for the
#    slow PD's queue.
import os, time
from pyverbs.pd import PD
S = 'a fault waiting on a slow disk'
disk = os.environ.get('SLOW_DISK')
if not disk:
    c.skip(f'{S}: holds up its own QP only', os.environ.get('SLOW_WHY', ''))
else:
    MAP_SHARED, DISK_OFF, SLOW_LEN = 1, 256 << 20, 4 * PAGE
    fd = os.open(disk, os.O_RDWR)
    slow_addr = libc.mmap(None, SLOW_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, DISK_OFF)
    assert slow_addr not in (None, ctypes.c_void_p(-1).value)
    pd_slow, pd_other = PD(ctx_b), PD(ctx_b)
    def pair(pd_here, depth=8, spares=0):
        cq_a, cq_b = CQ(ctx_a, depth), CQ(ctx_b, depth)
        qa_ = QP(pd_a, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_a, rcq=cq_a, cap=QPCap(max_send_wr=depth, max_recv_wr=depth)))
        # QPs more of the same PD, destroyed while the slow WRITE waits.
        spare = [QP(pd_here, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_b, rcq=cq_b,
                                        cap=QPCap(max_send_wr=depth, max_recv_wr=depth))) for _ in range(spares)]
        qb_ = QP(pd_here, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_b, rcq=cq_b,
                                      cap=QPCap(max_send_wr=depth, max_recv_wr=depth)))
        # A retransmission timeout of 34 s, longer than the WRITE's wait.
        connect_rc(qa_, qb_.qp_num, gid_b, ALL, sgid_index=gi_a, timeout=23)
        connect_rc(qb_, qa_.qp_num, gid_a, ALL, sgid_index=gi_b, timeout=23)
        return qa_, cq_a, qb_, spare
    sqa, scqa, sqb, _ = pair(pd_slow)
    oqa, ocqa, oqb, spare = pair(pd_other, spares=4)
    mr_slow = MR(pd_slow, SLOW_LEN, LW | RW | ODP, address=slow_addr)
    def disk_reads():
        """Reads the disk has completed, once none is in flight."""
        for _ in range(500):
            f = open('/sys/block/nullb0/stat').read().split()
            if f[8] == '0':
                return int(f[0])
            time.sleep(0.02)
        return int(f[0])
    reads_before = disk_reads()
    other_mr = MR(pd_other, PAGE, LW | RW)
    src = MR(pd_a, SLOW_LEN + PAGE, LW)
    slow_data = pattern(3) * 2
    slow_data = (slow_data * (SLOW_LEN // len(slow_data) + 1))[:SLOW_LEN]
    src.write(slow_data, SLOW_LEN)
    w = SendWR(wr_id=700, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, SLOW_LEN, src.lkey)])
    w.set_wr_rdma(mr_slow.rkey, slow_addr)
    t0 = time.monotonic()
    sqa.post_send(w)
    # Let the WRITE reach its first fault.
    time.sleep(0.5)
    early = []
    def slow_pending():
        """Whether the slow WRITE has not completed yet (a completion found is kept)."""
        k, w = scqa.poll(1)
        early.extend(w)
        return not early
    others = []
    for i in range(8):
        src.write(bytes([i]) * 64, 64, SLOW_LEN)
        w = SendWR(wr_id=710 + i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf + SLOW_LEN, 64, src.lkey)])
        w.set_wr_rdma(other_mr.rkey, other_mr.buf)
        oqa.post_send(w)
        others.append(statuses(wait_wcs(ocqa, 1, 30)) == [(710 + i, 0)] and other_mr.read(64, 0) == bytes([i]) * 64)
    pending_after_writes = slow_pending()
    writes_done = time.monotonic()
    reads_when_written = int(open('/sys/block/nullb0/stat').read().split()[0]) - reads_before
    extra_cq = CQ(ctx_b, 4)
    for _ in range(4):
        QP(pd_other, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=extra_cq, rcq=extra_cq,
                                cap=QPCap(max_send_wr=4, max_recv_wr=4))).close()
        MR(pd_other, PAGE, LW | RW).close()
    for q in spare:
        q.close()
    pending_after_objects = slow_pending()
    from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
    pd_third = PD(ctx_b)
    srq_third = SRQ(pd_third, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
    QP(pd_slow, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=extra_cq, rcq=extra_cq, srq=srq_third,
                           cap=QPCap(max_send_wr=4, max_recv_wr=4))).close()
    third_mr = MR(pd_third, PAGE, LW | RW)
    t_dereg = time.monotonic()
    third_mr.close()
    third_dereg = time.monotonic() - t_dereg
    pending_after_unlinked = slow_pending()
    print(f'# a region of the third PD deregistered in {third_dereg * 1000:.1f} ms', flush=True)
    srq_third.close()
    pd_third.close()
    slow = statuses(early or wait_wcs(scqa, 1, 60))
    slow_done = time.monotonic()
    print(f'# the other WRITEs were done {writes_done - t0:.2f} s after the slow WRITE was posted, '
          f'which completed after {slow_done - t0:.2f} s', flush=True)
    ok(f'{S}: WRITEs of another PD complete, data right, before its first read is done',
       all(others) and pending_after_writes and reads_when_written == 0,
       (others, pending_after_writes, reads_when_written))
    ok(f'{S}: QPs and MRs of another PD are created and destroyed while it waits',
       pending_after_objects, pending_after_objects)
    ok(f'{S}: a region of a PD whose SRQ a QP of its PD used deregisters at once once that QP is gone',
       pending_after_unlinked and third_dereg < 1, (pending_after_unlinked, round(third_dereg, 2)))
    ok(f'{S}: then the slow WRITE completes, data right',
       slow == [(700, 0)] and ctypes.string_at(slow_addr, SLOW_LEN) == slow_data, slow)
    for o in (sqa, sqb, oqa, oqb, mr_slow, other_mr, src):
        o.close()
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.munmap(slow_addr, SLOW_LEN)
    os.close(fd)

# 8. Nothing of a QP waits on a fault on a queue other users share, even a
#    QP created before its PD's first on-demand region. A WRITE from a
#    region whose first 4 pages are in memory and whose last page lies on
#    the slow disk: the poster's own call sends the first 64 packets (its
#    budget, 256 bytes each), and the QP's runner, which goes on with the
#    65th, waits 3 s for the last page. Meanwhile every kernel worker that
#    waits (state D) is sampled: the waiting one runs on the PD's own queue
#    (rroce_pd), none on the module's or the system's shared queues.
S = 'a run of the requester that waits on a fault'
if not disk:
    c.skip(f"{S}: waits on its PD's queue only", os.environ.get('SLOW_WHY', ''))
else:
    SHARED_QUEUES = {'rroce_rx', 'events', 'events_highpri', 'events_unbound', 'events_dfl', 'events_long'}
    FAST, MAP_FIXED = 4, 0x10
    pd_src = PD(ctx_a)
    cq8a, cq8b = CQ(ctx_a, 8), CQ(ctx_b, 8)
    q8a = QP(pd_src, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq8a, rcq=cq8a, cap=QPCap(max_send_wr=8, max_recv_wr=8)))
    q8b = QP(pd_b, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq8b, rcq=cq8b, cap=QPCap(max_send_wr=8, max_recv_wr=8)))
    connect_rc(q8a, q8b.qp_num, gid_b, ALL, sgid_index=gi_a, timeout=23, path_mtu=e.IBV_MTU_256)
    connect_rc(q8b, q8a.qp_num, gid_a, ALL, sgid_index=gi_b, timeout=23, path_mtu=e.IBV_MTU_256)
    src8 = Mem(FAST + 1)
    fast_data = (pattern(8) * (FAST * PAGE // len(pattern(8)) + 1))[:FAST * PAGE]
    src8.put(0, fast_data)
    fd8 = os.open(disk, os.O_RDWR)
    # A page far from section 7's, so no read-ahead of then brought it in.
    last = src8.addr + FAST * PAGE
    assert libc.mmap(last, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd8, 768 << 20) == last
    mr_src8 = MR(pd_src, (FAST + 1) * PAGE, LW | ODP, address=src8.addr)
    dst8 = MR(pd_b, (FAST + 1) * PAGE, LW | RW)
    waiting, sampling = [], threading.Event()
    def sample_waiting_workers():
        """The workqueue of every kernel worker found waiting, every 20 ms."""
        while not sampling.is_set():
            for pid in os.listdir('/proc'):
                try:
                    stat = open(f'/proc/{pid}/stat').read() if pid.isdigit() else ''
                except OSError:
                    continue
                if ')' not in stat:
                    continue
                comm, state = stat[stat.index('(') + 1:stat.rindex(')')], stat[stat.rindex(')') + 2]
                # A worker's name gives the queue of the item it runs: kworker/u4:2+rroce_pd.
                if state == 'D' and comm.startswith('kworker/') and '+' in comm:
                    waiting.append(comm.split('+', 1)[1])
            time.sleep(0.02)
    sampler = threading.Thread(target=sample_waiting_workers)
    sampler.start()
    w = SendWR(wr_id=800, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src8.addr, (FAST + 1) * PAGE, mr_src8.lkey)])
    w.set_wr_rdma(dst8.rkey, dst8.buf)
    t0 = time.monotonic()
    q8a.post_send(w)
    got = statuses(wait_wcs(cq8a, 1, 60))
    took = time.monotonic() - t0
    sampling.set()
    sampler.join()
    queues = sorted(set(waiting))
    print(f'# the WRITE took {took:.2f} s; workers seen waiting, by queue: {queues}', flush=True)
    ok(f"{S}: waits on its PD's own queue", 'rroce_pd' in waiting, queues)
    ok(f'{S}: no worker of a shared queue waits meanwhile', not SHARED_QUEUES & set(waiting), queues)
    ok(f'{S}: then the WRITE completes, data right',
       got == [(800, 0)] and dst8.read((FAST + 1) * PAGE, 0) == fast_data + ctypes.string_at(last, PAGE), got)
    for o in (q8a, q8b, mr_src8, dst8, cq8a, cq8b, pd_src):
        o.close()
    libc.munmap(src8.addr, (FAST + 1) * PAGE)
    os.close(fd8)

# 10. The packets waiting for the QPs of one user's PDs whose memory may
#     fault have a bound of their own. Ten PDs of this process (root), each
#     with a UD QP whose receives lie on pages of the slow disk (3 s each,
#     as many as the datagrams below take to send, and 6 at least), stall
#     on their first fault while 1100 datagrams for each come in, in turns;
#     meanwhile a UD QP of user nobody (a child process), whose memory may
#     fault too, receives each of its datagrams. Without the user's bound
#     eight such PDs held all the 8192 packets that QPs whose memory may
#     fault may have waiting, and the other user's datagrams were dropped.
S = "one user's QPs stalled on faults"
if not disk:
    c.skip(f"{S}: another user's UD QP still receives", os.environ.get('SLOW_WHY', ''))
else:
    import math
    from pyverbs.pyverbs_error import PyverbsRDMAError
    NPD, EACH, VICTIM_N = 10, 1100, 8
    USER_WAITING = 8192 // 8
    SPACING = 16 * PAGE                 # no two receives' pages near each other
    def hw(name):
        return int(open(f'/sys/class/infiniband/rroce-b/ports/1/hw_counters/{name}').read())
    # The sender: root's, on the other device.
    scq10 = CQ(ctx_a, 256)
    sqp10 = QP(pd_a, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=scq10, rcq=scq10, sq_sig_all=0,
                                cap=QPCap(max_send_wr=256, max_recv_wr=1)))
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.qkey, a.pkey_index, a.port_num = 0x1234, 0, 1
    sqp10.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    sqp10.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = 0
    sqp10.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    ah10 = AH(pd_a, attr=AHAttr(gr=GlobalRoute(dgid=gid_b, sgid_index=gi_a), is_global=1, port_num=1))
    payload = MR(pd_a, 64, LW)
    def wr_to(qpn, signaled):
        w = SendWR(wr_id=1000, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(payload.buf, 1, payload.lkey)],
                   send_flags=e.IBV_SEND_SIGNALED if signaled else 0)
        w.set_wr_ud(ah10, qpn, 0x1234)
        return w
    def send_all(wrs, n):
        """Posts n datagrams, taking wrs in turns; every 64th is signaled and waited for."""
        for k in range(n):
            signaled = k % 64 == 63 or k == n - 1
            sqp10.post_send(wrs[k % len(wrs)][signaled])
            if signaled:
                assert statuses(wait_wcs(scq10, 1, 20)) == [(1000, 0)]
    # How long the datagrams take to send here (a debug kernel is slower):
    # 512 to a QP without receives.
    tqp, tcq = ud_qp(ctx_b, pd_b)
    t = time.monotonic()
    send_all([(wr_to(tqp.qp_num, False), wr_to(tqp.qp_num, True))], 512)
    need = (time.monotonic() - t) * NPD * EACH / 512
    tqp.close()
    tcq.close()
    RECVS = min(60, max(6, math.ceil((1.5 * need + 6) / 3)))
    fd10 = os.open(disk, os.O_RDWR)
    stalled = []
    for i in range(NPD):
        pd10 = PD(ctx_b)
        length = RECVS * SPACING
        addr = libc.mmap(None, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd10, (512 << 20) + i * length)
        assert addr not in (None, ctypes.c_void_p(-1).value)
        mr10 = MR(pd10, length, LW | ODP, address=addr)
        qp10, cq10 = ud_qp(ctx_b, pd10, RECVS)
        for r in range(RECVS):
            qp10.post_recv(RecvWR(wr_id=r, num_sge=1, sg=[SGE(addr + r * SPACING, PAGE, mr10.lkey)]))
        stalled.append((qp10, cq10, mr10, pd10, addr, length))
    # The other user: a child process as user nobody, with a UD QP on a PD
    # whose memory may fault; it reports its QP number, then how many of
    # its datagrams arrived, with what data.
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(to_child_w)
        os.close(from_child_r)
        try:
            os.setgroups([]); os.setgid(65534); os.setuid(65534)
            from pyverbs.device import Context
            vctx = Context(name='rroce-b')
            vpd = PD(vctx)
            vmem = Mem(1)
            vmr = MR(vpd, PAGE, LW | ODP, address=vmem.addr)
            vqp, vcq = ud_qp(vctx, vpd)
            for r in range(VICTIM_N):
                vqp.post_recv(RecvWR(wr_id=r, num_sge=1, sg=[SGE(vmem.addr + 64 * r, 64, vmr.lkey)]))
            os.write(from_child_w, f'{vqp.qp_num}\n'.encode())
            os.read(to_child_r, 1)          # the datagrams were sent
            got = wait_wcs(vcq, VICTIM_N, 5)
            res = f'{sum(w.status == 0 for w in got)}'
        except PyverbsRDMAError as ex:
            res = f'errno {ex.error_code}'
        except Exception as ex:
            res = f'skip: {ex!r}'
        os.write(from_child_w, f'{res}\n'.encode())
        os._exit(0)
    os.close(to_child_r)
    os.close(from_child_w)
    from_child = os.fdopen(from_child_r)
    first = from_child.readline().strip()
    victim = int(first) if first.isdigit() else None
    pkts0, full0 = hw('rcvd_pkts'), hw('rcvd_queue_full')
    t0 = time.monotonic()
    if victim is not None:
        send_all([(wr_to(q.qp_num, False), wr_to(q.qp_num, True)) for q, *_ in stalled], NPD * EACH)
    flood_took = time.monotonic() - t0
    arrived, refused = hw('rcvd_pkts') - pkts0, hw('rcvd_queue_full') - full0
    if victim is not None:
        for _ in range(VICTIM_N):
            send_all([(wr_to(victim, True), wr_to(victim, True))], 1)
            time.sleep(0.02)
    victim_sent = time.monotonic() - t0
    # Whether the stalls lasted until then: a QP that has not completed
    # its last receive still holds what waits for it (a completion found
    # is kept for the check further down).
    early10 = [cq10.poll(RECVS)[1] for _, cq10, *_ in stalled]
    pending = [w for w in early10 if len(w) < RECVS]
    os.write(to_child_w, b'x')
    os.close(to_child_w)
    res = (from_child.readline().strip() if victim is not None else first) or 'no answer'
    from_child.close()
    os.waitpid(pid, 0)
    print(f'# stalls of {RECVS} faults; {arrived} of the {NPD * EACH} datagrams to the stalled QPs arrived in {flood_took:.2f} s, '
          f'{refused} refused, {arrived - refused} queued; the other user\'s {VICTIM_N} sent by {victim_sent:.2f} s, '
          f'received: {res}; stalled QPs still waiting: {len(pending)}', flush=True)
    if res.startswith('skip'):
        c.skip(f"{S}: another user's UD QP still receives", res)
    else:
        ok(f"{S}: another user's UD QP whose memory may fault receives each datagram meanwhile",
           res == str(VICTIM_N) and len(pending) == NPD, (res, len(pending)))
    ok(f"{S}: at most the user's share ({USER_WAITING}) of theirs wait, the rest are refused (rcvd_queue_full)",
       arrived >= NPD * EACH * 9 // 10 and arrived - refused <= USER_WAITING + NPD * RECVS,
       (arrived, refused))
    # Each stalled QP gets its receives once the disk answers.
    done = [statuses(w + wait_wcs(cq10, RECVS - len(w), 3 * RECVS + 30)) == [(r, 0) for r in range(RECVS)]
            for w, (_, cq10, *_) in zip(early10, stalled)]
    ok(f'{S}: then their receives complete', all(done), done)
    for qp10, cq10, mr10, pd10, addr, length in stalled:
        for o in (qp10, cq10, mr10, pd10):
            o.close()
        libc.munmap(addr, length)
    for o in (sqp10, ah10, payload, scq10):
        o.close()
    os.close(fd10)
PY
topo_devices_down
check "module unloads (nothing held)" modprobe -r rroce
modprobe -r null_blk 2>/dev/null

# 9. What a PD with on-demand regions holds goes with it: its queue (one of
#    the 512 PDs with one, over all devices), also when its QPs took their
#    receives from an SRQ of another PD, which lives on. PD B is made and
#    freed more than 512 times, each time with a QP on PD A's SRQ, an SRQ
#    that a QP of PD A uses, and an on-demand region (the QPs link the two
#    PDs' queues, until they go: a link kept would keep PD B's queue); then one user's PDs, taken in turn on both devices,
#    get one up to its share of the module's (64) in all, no further, while
#    another user's PD still gets one. On a freshly loaded module, where no
#    other PD has a queue.
modprobe rroce
topo_devices_up
py_checks <<'PY'
from verbs import Checks, open_devices
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
import errno
import pyverbs.enums as e
c = Checks('test_odp')
PAGING_PDS = 512
CYCLES = PAGING_PDS + 8
ACC = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND
devs = open_devices()
ctx, pd_a = devs['rroce-a'][:2]
ctx_b = devs['rroce-b'][0]
cq = CQ(ctx, 4)
srq = SRQ(pd_a, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
refused = None
for i in range(CYCLES):
    pd_b = PD(ctx)
    qp = QP(pd_b, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq, cap=QPCap(max_send_wr=1, max_recv_wr=1)))
    srq_b = SRQ(pd_b, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
    qp_a = QP(pd_a, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq_b, cap=QPCap(max_send_wr=1, max_recv_wr=1)))
    try:
        MR(pd_b, 4096, ACC).close()
    except PyverbsRDMAError as ex:
        refused = (i, ex.error_code)
    qp.close()
    qp_a.close()
    srq_b.close()
    pd_b.close()
    if refused:
        break
c.ok(f'{CYCLES} PDs in turn, each with QPs on and for another PD\'s SRQ: each gets an on-demand region',
     refused is None, f'refused (cycle, errno): {refused}')
USER_PAGING_PDS = PAGING_PDS // 8
# The share is the user's on all devices together, not on each: its PDs
# alternate between the two.
held, refused = [], None
while len(held) <= USER_PAGING_PDS:
    pd = PD((ctx, ctx_b)[len(held) % 2])
    try:
        held.append((MR(pd, 4096, ACC), pd))
    except PyverbsRDMAError as ex:
        refused = ex.error_code
        pd.close()
        break
print(f'# then {len(held)} PDs of one user at once on two devices got an on-demand region, the next one errno {refused}',
      flush=True)
c.ok(f"then one user's PDs on two devices get one up to its share in all ({USER_PAGING_PDS}), the next is refused (ENOMEM): "
     "no queue of a PD gone is left",
     len(held) == USER_PAGING_PDS and refused == errno.ENOMEM, (len(held), refused))
# Meanwhile another user's PD gets one (a child process as user nobody).
import os
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    try:
        os.setgroups([]); os.setgid(65534); os.setuid(65534)
        from pyverbs.device import Context
        octx = Context(name='rroce-a')
        opd = PD(octx)
        MR(opd, 4096, ACC).close()
        res = 'ok'
    except PyverbsRDMAError as ex:
        res = f'errno {ex.error_code}'
    except Exception as ex:
        res = f'skip: {ex!r}'
    os.write(w, res.encode())
    os._exit(0)
os.close(w)
res = os.fdopen(r).read()
os.waitpid(pid, 0)
if res.startswith('skip'):
    c.skip("another user's PD gets an on-demand region meanwhile", res)
else:
    c.ok("another user's PD gets an on-demand region meanwhile", res == 'ok', res)
for mr, pd in held:
    mr.close()
    pd.close()
def another_pd_registers():
    """True if a new PD gets an on-demand region, else the errno."""
    try:
        pd = PD(ctx)
        MR(pd, 4096, ACC).close()
        pd.close()
        return True
    except PyverbsRDMAError as ex:
        return ex.error_code
again = another_pd_registers()
c.ok('and once they are freed, another PD gets one', again is True, again)
# A registration refused before it got anywhere (a region spanning more
# than 4 times the memory, and than the user's share) gives its PD no queue: 512 PDs so refused, all
# held, leave room for another PD's region.
import ctypes, errno, mmap
MAP_NORESERVE = 0x4000                  # x86-64
mem_total = int(next(l for l in open('/proc/meminfo') if l.startswith('MemTotal:')).split()[1]) * 1024
huge = mmap.mmap(-1, 5 * mem_total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)
huge_addr = ctypes.addressof(ctypes.c_char.from_buffer(huge))
held, codes = [], set()
for _ in range(PAGING_PDS):
    pd = PD(ctx)
    held.append(pd)
    try:
        MR(pd, len(huge), ACC, address=huge_addr).close()
        codes.add(0)
    except PyverbsRDMAError as ex:
        codes.add(ex.error_code)
again = another_pd_registers()
c.ok(f'{PAGING_PDS} PDs whose on-demand registration was refused (ENOMEM) leave room for another PD\'s region',
     codes == {errno.ENOMEM} and again is True, f'refused with {codes}, the other PD: {again}')
for pd in held:
    pd.close()
srq.close()
cq.close()
PY
topo_devices_down
check "module unloads after the PD cycles (nothing held)" modprobe -r rroce

# 11. The address space on-demand regions span (the core keeps a page list
#     for each of their pages, in memory charged to no one) has a bound of
#     each user's: an eighth of the module's (4 times the memory), on all
#     devices together. User A (a child process, uid 60001) registers its
#     whole share: its next page is refused, and so is the rest of the
#     module's bound, which alone it took before, refusing every other
#     user's registrations. User B still gets its share; once A's regions
#     are deregistered A gets its share again. Eight users' shares fill the
#     module's bound, which stays: a ninth user (root) is refused until one
#     of them goes. On a freshly loaded module, where no region is left.
topo_devices_up
py_checks <<'PY'
import ctypes, errno, os
from verbs import Checks
c = Checks('test_odp')
PAGE = 4096
mem_pages = int(next(l for l in open('/proc/meminfo') if l.startswith('MemTotal:')).split()[1]) * 1024 // PAGE
TOTAL = mem_pages * 4
SHARE = TOTAL // 8
print(f'# {mem_pages} pages of memory: on-demand regions may span {TOTAL} pages, {SHARE} of one user', flush=True)

class User:
    """A child process as user `uid`, with a PD on rroce-a, that registers
    on-demand regions over fresh address space (NORESERVE: no memory) as
    told: `reg(pages)` answers 'ok' or 'errno N', `dereg()` deregisters all
    it holds."""
    parent_fds = []

    def __init__(self, uid):
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(to_w)
            os.close(from_r)
            # The other users' pipes: held here, they would keep those
            # users from seeing their end.
            for fd in User.parent_fds:
                os.close(fd)
            self._serve(uid, os.fdopen(to_r), os.fdopen(from_w, 'w', buffering=1))
            os._exit(0)
        os.close(to_r)
        os.close(from_w)
        User.parent_fds += [to_w, from_r]
        self.to, self.frm = os.fdopen(to_w, 'w', buffering=1), os.fdopen(from_r)
        self.ready = self.frm.readline().strip() or 'no answer'

    @staticmethod
    def _serve(uid, cmds, out):
        try:
            os.setgroups([]); os.setgid(uid); os.setuid(uid)
            from pyverbs.device import Context
            from pyverbs.mr import MR
            from pyverbs.pd import PD
            from pyverbs.pyverbs_error import PyverbsRDMAError
            import pyverbs.enums as e
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
            libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            ctx = Context(name='rroce-a')
            pd = PD(ctx)
            held = []
        except Exception as ex:
            out.write(f'skip: {ex!r}\n')
            return
        out.write('ready\n')
        for line in cmds:
            op, *arg = line.split()
            if op == 'reg':
                n = int(arg[0]) * PAGE
                # PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
                addr = libc.mmap(None, n, 3, 0x4022, -1, 0)
                if addr in (None, ctypes.c_void_p(-1).value):
                    out.write(f'mmap errno {ctypes.get_errno()}\n')
                    continue
                try:
                    held.append((MR(pd, n, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND, address=addr), addr, n))
                    out.write('ok\n')
                except PyverbsRDMAError as ex:
                    libc.munmap(addr, n)
                    out.write(f'errno {ex.error_code}\n')
            elif op == 'dereg':
                for mr, addr, n in held:
                    mr.close()
                    libc.munmap(addr, n)
                held = []
                out.write('ok\n')

    def ask(self, line):
        self.to.write(line + '\n')
        return self.frm.readline().strip() or 'no answer'

    def reg(self, pages):
        return self.ask(f'reg {pages}')

    def dereg(self):
        return self.ask('dereg')

    def end(self):
        self.to.close()
        self.frm.close()
        os.waitpid(self.pid, 0)

NOMEM = f'errno {errno.ENOMEM}'
users = [User(60001 + i) for i in range(8)]
a, b = users[0], users[1]
if a.ready != 'ready':
    c.skip("one user's on-demand regions span at most its share", a.ready)
else:
    got = a.reg(SHARE)
    c.ok(f'user A registers its whole share ({SHARE} pages)', got == 'ok', got)
    got = a.reg(1)
    c.ok("user A's next page is refused (ENOMEM)", got == NOMEM, got)
    got = a.reg(TOTAL - SHARE - 1)
    c.ok("user A's registration of the rest of the module's bound is refused (ENOMEM)", got == NOMEM, got)
    got = b.reg(SHARE)
    c.ok('user B still registers its whole share meanwhile', got == 'ok', got)
    got = (a.dereg(), a.reg(SHARE))
    c.ok('once user A deregisters, its share is back: it registers its whole share again', got == ('ok', 'ok'), got)
    got = [u.reg(SHARE) for u in users[2:]]
    c.ok('six more users register their whole shares: eight users fill the module\'s bound',
         got == ['ok'] * 6, got)
    # The ninth user: this process (root), with a region of its own.
    from verbs import open_devices
    from pyverbs.mr import MR
    from pyverbs.pyverbs_error import PyverbsRDMAError
    import mmap
    import pyverbs.enums as e
    pd = open_devices(('rroce-a',))['rroce-a'][1]
    acc = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND
    room = mmap.mmap(-1, SHARE * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)
    room_addr = ctypes.addressof(ctypes.c_char.from_buffer(room))
    c.fails("a ninth user's registration of its share is refused then (ENOMEM): the module's bound stays",
            lambda: MR(pd, SHARE * PAGE, acc, address=room_addr), errno.ENOMEM)
    got = users[7].dereg()
    try:
        MR(pd, SHARE * PAGE, acc, address=room_addr).close()
        res = 'ok'
    except PyverbsRDMAError as ex:
        res = f'errno {ex.error_code}'
    c.ok('and gets it once one of the eight deregisters', (got, res) == ('ok', 'ok'), (got, res))
for u in users:
    u.end()
PY
topo_devices_down
check "module unloads after the users' regions (nothing held)" modprobe -r rroce
finish
