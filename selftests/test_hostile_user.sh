#!/bin/bash
# The local user's input surface: what an unprivileged process can do with
# the verbs it is allowed to call. (a) rereg_mr must not turn a read-only
# pin of a file the user cannot write into a writable region; (b) keys of
# another PD, deregistered keys and guessed keys never reach memory; (c)
# verbs in the wrong order (destroy, reset, dereg, kill mid-transfer,
# destroying a CQ in use) leave the device healthy.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$HERE PYTHONDONTWRITEBYTECODE=1 DEV=rroce0
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }

# The kernel log as it comes (rate-limited driver messages may rotate the
# ring buffer before the end of the test).
dmesg --follow-new >/tmp/hostile-dmesg.log 2>/dev/null &
dmesg_pid=$!
modprobe rroce
# libibverbs has the core load ib_uverbs when it asks netlink for the char
# device; a raw client has to load it itself.
modprobe ib_uverbs
rdma link add $DEV type rroce netdev eth0
wait_for 30 bash -c "grep -qx $DEV /sys/class/infiniband_verbs/uverbs*/ibdev" || fail "no uverbs device for $DEV"
uverbs=$(python3 -c 'import uverbs_raw, os; print(uverbs_raw.find_uverbs(os.environ["DEV"]))')
if ! as_nobody test -r "$uverbs" -a -w "$uverbs"; then
	skip "all checks as an unprivileged user" "$uverbs is $(stat -c %a "$uverbs"), not usable by nobody"
	kill $dmesg_pid; rdma link delete $DEV; modprobe -r rroce; finish
fi

# (a) Two root-owned 0644 files of 8 KiB; user nobody may read and map them only.
F1=/tmp/hostile-ro-1 F2=/tmp/hostile-ro-2
for f in $F1 $F2; do
	python3 -c 'import sys; open(sys.argv[1], "wb").write(bytes(range(256)) * 32)' $f
	chmod 0644 $f; cp $f $f.orig; chmod 0600 $f.orig
done
as_nobody timeout 300 python3 -u - $F1 $F2 <<'PY'
import errno, mmap, os, sys
import uverbs_raw as u
from verbs import Checks
c = Checks('test_hostile_user')
ok, dev = c.ok, os.environ['DEV']
f1, f2 = sys.argv[1:3]
PAYLOAD = b'written by nobody through a read-only pin'.ljust(64, b'!')

def attempt(fn):
    """(result, 0) or (None, errno)."""
    try:
        return fn(), 0
    except OSError as ex:
        return None, ex.errno

def err_name(n):
    return 'succeeded' if n == 0 else errno.errorcode.get(n, str(n))

ctx = u.Context(dev)
sgid, gid = u.gid_of(dev)
pd = ctx.alloc_pd()
cq = ctx.create_cq(64)

def pair():
    """Two RC QPs of this process connected to each other (local delivery)."""
    a, b = ctx.create_qp(pd, cq, cq), ctx.create_qp(pd, cq, cq)
    for me, peer in ((a, b), (b, a)):
        ctx.connect(me, peer.qpn, gid, sgid, timeout=12, retry_cnt=3, rnr_retry=3)
    return a, b

src = u.Mapping(8192)
src.write(0, PAYLOAD)
_, src_lkey, _ = ctx.reg_mr(pd, src.addr, 8192, u.LOCAL_WRITE)

_, e = attempt(lambda: os.open(f1, os.O_RDWR))
ok('nobody cannot open the root-owned file for writing (set-up)', e == errno.EACCES, err_name(e))
maps = []
for f in (f1, f2):
    maps.append(u.Mapping(8192, mmap.PROT_READ, mmap.MAP_SHARED, os.open(f, os.O_RDONLY)))
m1, m2 = maps
ro1, e = attempt(lambda: ctx.reg_mr(pd, m1.addr, 8192, 0))
ok('a read-only shared mapping of the file registers with access 0', e == 0, err_name(e))
if ro1 is None:
    sys.exit(1)
_, e = attempt(lambda: ctx.reg_mr(pd, m1.addr, 8192, u.LOCAL_WRITE))
ok('registering the read-only mapping with LOCAL_WRITE is refused', e != 0, err_name(e))

# A new translation re-pins the pages: writable pinning of the read-only mapping must fail.
tmp, _ = attempt(lambda: ctx.reg_mr(pd, m1.addr, 8192, 0))
_, e = attempt(lambda: ctx.rereg_mr(tmp[0], u.REREG_TRANS | u.REREG_ACCESS, addr=m1.addr, length=8192, access=u.LOCAL_WRITE))
ok('rereg with a new translation and LOCAL_WRITE on the read-only mapping is refused', e != 0, err_name(e))
attempt(lambda: ctx.dereg_mr(tmp[0]))

_, e = attempt(lambda: ctx.rereg_mr(ro1[0], u.REREG_ACCESS, access=0))
ok('rereg keeping access 0 on the read-only pin works', e == 0, err_name(e))

# The defect: rights change in place, so the read-only pin becomes writable.
keys, e = attempt(lambda: ctx.rereg_mr(ro1[0], u.REREG_ACCESS, access=u.LOCAL_WRITE))
ok('rereg of a read-only pin to LOCAL_WRITE is refused with EACCES', e == errno.EACCES, err_name(e))
lkey = keys[0] if keys else ro1[1]
a, b = pair()
ctx.post_recv(b, u.recv_wqe(0xb1, [(m1.addr, 64, lkey)]))
ctx.post_send(a, u.send_wqe(0xa1, u.WR_SEND, sges=[(src.addr, 64, src_lkey)]))
w = {x.wr_id: x.status for x in ctx.wait_wcs(cq, 2)}
ok('a SEND into the read-only pin does not complete successfully at the receiver',
   w.get(0xb1, -1) != u.WC_SUCCESS, f'completions {w}')
if m1.read(0, 64) == PAYLOAD:
    print('# the read-only mapping of nobody now shows the sent bytes')

ro2 = ctx.reg_mr(pd, m2.addr, 8192, 0)
keys, e = attempt(lambda: ctx.rereg_mr(ro2[0], u.REREG_ACCESS, access=u.LOCAL_WRITE | u.REMOTE_WRITE))
ok('rereg of a read-only pin to LOCAL_WRITE|REMOTE_WRITE is refused with EACCES', e == errno.EACCES, err_name(e))
# Refused or not, the WRITE aims at the read-only pin's rkey.
rkey = keys[1] if keys else ro2[2]
a, b = pair()
ctx.post_send(a, u.send_wqe(0xa2, u.WR_RDMA_WRITE, sges=[(src.addr, 64, src_lkey)], raddr=m2.addr, rkey=rkey))
w = {x.wr_id: x.status for x in ctx.wait_wcs(cq, 1)}
ok('an RDMA WRITE into the read-only pin fails with REM_ACCESS_ERR', w.get(0xa2) == u.WC_REM_ACCESS_ERR, f'completions {w}')

ro3, _ = attempt(lambda: ctx.reg_mr(pd, m1.addr, 8192, 0))
_, e = attempt(lambda: ctx.rereg_mr(ro3[0], u.REREG_ACCESS, access=u.REMOTE_READ))
print(f'# rereg of a read-only pin to REMOTE_READ (no write right): {err_name(e)}')

# Rights that do not exceed the pin stay changeable.
buf = u.Mapping(8192)
wmr = ctx.reg_mr(pd, buf.addr, 8192, u.LOCAL_WRITE | u.REMOTE_WRITE | u.REMOTE_READ)
_, e = attempt(lambda: ctx.rereg_mr(wmr[0], u.REREG_ACCESS, access=u.LOCAL_WRITE | u.REMOTE_WRITE | u.REMOTE_READ))
ok('rereg keeping the rights of a writable MR works', e == 0, err_name(e))
_, e = attempt(lambda: ctx.rereg_mr(wmr[0], u.REREG_ACCESS, access=u.LOCAL_WRITE))
ok('rereg reducing LOCAL_WRITE|REMOTE_WRITE|REMOTE_READ to LOCAL_WRITE works', e == 0, err_name(e))
_, e = attempt(lambda: ctx.rereg_mr(wmr[0], u.REREG_ACCESS, access=0))
ok('rereg reducing LOCAL_WRITE to no rights works', e == 0, err_name(e))
keys, e = attempt(lambda: ctx.rereg_mr(wmr[0], u.REREG_ACCESS, access=u.LOCAL_WRITE | u.REMOTE_WRITE))
ok('rereg adding LOCAL_WRITE|REMOTE_WRITE back to an MR registered writable works', e == 0, err_name(e))
if keys:
    a, b = pair()
    ctx.post_recv(b, u.recv_wqe(0xb3, [(buf.addr, 64, keys[0])]))
    ctx.post_send(a, u.send_wqe(0xa3, u.WR_SEND, sges=[(src.addr, 64, src_lkey)]))
    ctx.post_send(a, u.send_wqe(0xa4, u.WR_RDMA_WRITE, sges=[(src.addr, 64, src_lkey)], raddr=buf.addr + 4096, rkey=keys[1]))
    w = {x.wr_id: x.status for x in ctx.wait_wcs(cq, 3)}
    ok('the re-widened MR receives a SEND and an RDMA WRITE',
       w == {0xa3: 0, 0xb3: 0, 0xa4: 0} and buf.read(0, 64) == PAYLOAD and buf.read(4096, 64) == PAYLOAD, f'completions {w}')

# Region addresses at the top of the 64-bit space: one whose iova + length
# wraps is refused (a WRITE of its last bytes computed the address after
# them and overflowed in the responder); one ending a page below 2^64 works
# to its last byte (the core wants iova and address in the same page offset).
top = u.Mapping(8192)
_, e = attempt(lambda: ctx.reg_mr(pd, top.addr, 4096, u.LOCAL_WRITE | u.REMOTE_WRITE, iova=(1 << 64) - 4096))
ok('a region whose iova + length wraps past 2^64 is refused (EINVAL)', e == errno.EINVAL, err_name(e))
hi, e = attempt(lambda: ctx.reg_mr(pd, top.addr, 4096, u.LOCAL_WRITE | u.REMOTE_WRITE, iova=(1 << 64) - 8192))
ok('a region ending at 2^64 - 4096 registers', e == 0, err_name(e))
if hi:
    a, b = pair()
    big = u.Mapping(4096)
    big.write(0, PAYLOAD * 64)
    _, big_lkey, _ = ctx.reg_mr(pd, big.addr, 4096, u.LOCAL_WRITE)
    ctx.post_send(a, u.send_wqe(0xa5, u.WR_RDMA_WRITE, sges=[(big.addr, 4096, big_lkey)], raddr=(1 << 64) - 8192, rkey=hi[2]))
    w = {x.wr_id: x.status for x in ctx.wait_wcs(cq, 1)}
    ok('a 4 KiB WRITE to its last byte (4 packets) completes and lands',
       w == {0xa5: 0} and top.read(0, 4096) == PAYLOAD * 64, f'completions {w}')

# A user's request list, which uverbs builds for POST_SEND and POST_RECV
# with work requests (the rxe provider never sends one): its SGEs hold user
# addresses, here a kernel one in an inline SEND, which read as a kernel
# consumer's would send kernel memory to the peer. Both are refused.
import struct, time
a, b = pair()
ctx.poll_cq(cq)  # what earlier checks left
ctx.post_recv(b, u.recv_wqe(0xb6, [(src.addr + 4096, 64, src_lkey)]))
KADDR = 0xffffffff81000000
wr = struct.pack('=QIIII', 0xa6, 1, u.WR_SEND, u.SEND_SIGNALED | u.SEND_INLINE, 0).ljust(u.SEND_WR_BYTES, b'\0')
sge = struct.pack('=QII', KADDR, 64, 0)
_, e = attempt(lambda: ctx.command(u.POST_SEND, struct.pack('=IIII', a.handle, 1, 1, u.SEND_WR_BYTES) + wr + sge, 4))
ok('a POST_SEND with a request list (an inline SGE at a kernel address) is refused with EINVAL',
   e == errno.EINVAL, err_name(e))
POST_RECV = 29
rwr = struct.pack('=QII', 0xb7, 1, 0)
_, e = attempt(lambda: ctx.command(POST_RECV, struct.pack('=IIII', b.handle, 1, 1, len(rwr)) + rwr + sge, 4))
# The core has the command off (rroce enables only POST_SEND's, the
# doorbell); should it be on, the ib layer refuses the list.
ok('a POST_RECV with a request list is refused (EOPNOTSUPP, or EINVAL)',
   e in (errno.EOPNOTSUPP, errno.EINVAL), err_name(e))
time.sleep(1)
w = {x.wr_id: x.status for x in ctx.poll_cq(cq)}
ok('neither completes, and the receiver gets nothing', w == {}, f'completions {w}')
ctx.close()
PY
check "root-owned file unchanged after rereg to LOCAL_WRITE and a SEND" cmp $F1 $F1.orig
check "root-owned file unchanged after rereg to LOCAL_WRITE|REMOTE_WRITE and an RDMA WRITE" cmp $F2 $F2.orig
rm -f $F1 $F2 $F1.orig $F2.orig

# (b) Process X (root) owns an MR with every right; process Y (nobody) knows
# its address and keys and tries them from its own PD.
timeout 600 python3 -u - <<'PY'
import json, os, select, sys
from verbs import Checks, connect_rc, wait_wcs
import uverbs_raw as u
c = Checks('test_hostile_user')
ok, dev = c.ok, os.environ['DEV']
keys_r, keys_w = os.pipe()
done_r, done_w = os.pipe()
pid = os.fork()
if pid == 0:
    # Y: drop to nobody first, then open a context of its own.
    os.close(keys_w); os.close(done_r)
    try:
        os.setgroups([]); os.setgid(65534); os.setuid(65534)
        from pyverbs.device import Context
        from pyverbs.pd import PD
        from pyverbs.cq import CQ
        from pyverbs.mr import MR
        from pyverbs.qp import QP, QPCap, QPInitAttr
        from pyverbs.wr import RecvWR, SendWR, SGE
        import pyverbs.enums as e
        x = json.loads(os.fdopen(keys_r).readline())
        LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
        ctx = Context(name=dev)
        pd = PD(ctx)
        sgid, _ = u.gid_of(dev)
        gid = ctx.query_gid(1, sgid)
        mine = MR(pd, 8192, LW | RW | RR)
        mine.write(b'y' * 8192, 8192)

        def case(what, op, lkey, addr, raddr=0, rkey=0, want=e.IBV_WC_SUCCESS):
            """One work request on a fresh pair of Y's QPs; passes on status `want`."""
            cq = CQ(ctx, 16)
            qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
                   for _ in range(2)]
            for me, peer in ((qps[0], qps[1]), (qps[1], qps[0])):
                connect_rc(me, peer.qp_num, gid, LW | RW | RR, sgid_index=sgid, timeout=10, retry_cnt=3, rnr_retry=3)
            if op == e.IBV_WR_SEND:
                qps[1].post_recv(RecvWR(wr_id=2, num_sge=1, sg=[SGE(mine.buf + 4096, 64, mine.lkey)]))
            wr = SendWR(wr_id=1, opcode=op, num_sge=1, sg=[SGE(addr, 64, lkey)])
            if op != e.IBV_WR_SEND:
                wr.set_wr_rdma(rkey, raddr)
            qps[0].post_send(wr)
            w = wait_wcs(cq, 2 if op == e.IBV_WR_SEND and want == e.IBV_WC_SUCCESS else 1)
            st = [x.status for x in w if x.wr_id == 1]
            ok(what, st == [want], f'status {st}')
            for q in qps:
                q.close()
            cq.close()

        W, S, R = e.IBV_WR_RDMA_WRITE, e.IBV_WR_SEND, e.IBV_WR_RDMA_READ
        LOC, REM = e.IBV_WC_LOC_PROT_ERR, e.IBV_WC_REM_ACCESS_ERR
        case('control: Y writes with its own keys', W, mine.lkey, mine.buf, mine.buf + 4096, mine.rkey)
        case("Y cannot SEND from X's lkey -> LOC_PROT_ERR", S, x['lkey'], x['addr'], want=LOC)
        case("Y cannot RDMA WRITE from X's lkey -> LOC_PROT_ERR", W, x['lkey'], x['addr'], mine.buf + 4096, mine.rkey, want=LOC)
        case("a QP of Y is no target for a WRITE with X's rkey -> REM_ACCESS_ERR", W, mine.lkey, mine.buf, x['addr'], x['rkey'], want=REM)
        case("a QP of Y is no target for a READ with X's rkey -> REM_ACCESS_ERR", R, mine.lkey, mine.buf, x['addr'], x['rkey'], want=REM)
        ok("no byte of X's memory reached Y", b'X' * 16 not in mine.read(8192, 0))

        dead = MR(pd, 4096, LW | RW | RR)
        dl, dr, daddr = dead.lkey, dead.rkey, dead.buf
        dead.close()
        case("a deregistered MR's lkey fails -> LOC_PROT_ERR", S, dl, daddr, want=LOC)
        case("a deregistered MR's rkey fails -> REM_ACCESS_ERR", W, mine.lkey, mine.buf, daddr, dr, want=REM)
        reuse = [MR(pd, 4096, LW | RW | RR) for _ in range(8)]
        same = [m for m in reuse if m.lkey >> 8 == dl >> 8]
        print(f'# {len(same)} of 8 new MRs reuse the deregistered index {dl >> 8:#x}')
        case('a deregistered lkey still fails after 8 new registrations -> LOC_PROT_ERR', S, dl,
             same[0].buf if same else daddr, want=LOC)
        case('a deregistered rkey still fails after 8 new registrations -> REM_ACCESS_ERR', W, mine.lkey, mine.buf,
             same[0].buf if same else daddr, dr, want=REM)
        for k in (1, 0x80, 0xff):
            g = (mine.lkey & ~0xff) | ((mine.lkey + k) & 0xff)
            case(f'an lkey with a guessed low byte (+{k:#x}) fails -> LOC_PROT_ERR', S, g, mine.buf, want=LOC)
            case(f'an rkey with a guessed low byte (+{k:#x}) fails -> REM_ACCESS_ERR', W, mine.lkey, mine.buf, mine.buf + 4096, g, want=REM)
    except Exception as ex:
        ok('process Y ran its checks', False, repr(ex))
    sys.stdout.flush()
    os.write(done_w, b'.')
    os._exit(0)

os.close(keys_r); os.close(done_w)
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.mr import MR
import pyverbs.enums as e
ctx = Context(name=dev)
pd = PD(ctx)
mr = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ)
mr.write(b'X' * 8192, 8192)
os.write(keys_w, (json.dumps({'addr': mr.buf, 'lkey': mr.lkey, 'rkey': mr.rkey}) + '\n').encode())
finished = select.select([done_r], [], [], 300)[0]
ok('process Y finished within 300 s', bool(finished))
if not finished:
    os.kill(pid, 9)
os.waitpid(pid, 0)
ok("X's memory is unchanged after Y's attempts", mr.read(8192, 0) == b'X' * 8192)
mr.close(); pd.close(); ctx.close()
PY

# (c) Verbs in the wrong order; after each, a fresh pair must still move data.
timeout 600 python3 -u - <<'PY'
import errno, os, random, re, select, signal, subprocess, sys, time
from verbs import Checks, connect_rc, wait_wcs
import uverbs_raw as u
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e
c = Checks('test_hostile_user')
ok, dev = c.ok, os.environ['DEV']
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
N, BIG = 32, 65536
sgid, _ = u.gid_of(dev)

ctx = Context(name=dev)
pd = PD(ctx)
gid = ctx.query_gid(1, sgid)

def survives(what, fn):
    """Passes when fn() returns; an exception is a failure, not the end of the script."""
    try:
        fn()
        ok(what, True)
    except Exception as ex:
        ok(what, False, repr(ex))

def pair(psn=0, timeout=10, retry_cnt=3):
    """A connected RC pair. The short ACK timeout (4 ms) and few retries let
    requesters whose responder is gone give up quickly."""
    cq = CQ(ctx, 4 * N)
    qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=N, max_recv_wr=N)))
           for _ in range(2)]
    for me, peer in ((qps[0], qps[1]), (qps[1], qps[0])):
        connect_rc(me, peer.qp_num, gid, LW | RW | RR, psn=psn, sgid_index=sgid, timeout=timeout,
                   retry_cnt=retry_cnt, rnr_retry=3)
    return cq, qps[0], qps[1]

def flood(a, src, raddr, rkey, n=N):
    """n signaled RDMA WRITEs of BIG bytes, one doorbell each, without waiting."""
    for i in range(n):
        wr = SendWR(wr_id=100 + i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, BIG, src.lkey)])
        wr.set_wr_rdma(rkey, raddr)
        a.post_send(wr)

def moves_data(cq, a, b):
    """A WRITE of 64 KiB and a SEND of 4 KiB of random bytes arrive intact.
    Returns what went wrong, or '' if nothing did."""
    src, dst = MR(pd, BIG, LW), MR(pd, BIG, LW | RW)
    data = random.randbytes(BIG)
    src.write(data, BIG)
    wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, BIG, src.lkey)])
    wr.set_wr_rdma(dst.rkey, dst.buf)
    b.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(dst.buf, 4096, dst.lkey)]))
    a.post_send(wr)
    w = wait_wcs(cq, 1, 30)
    wrong = ''
    if [x.status for x in w] != [e.IBV_WC_SUCCESS]:
        wrong = f'WRITE completions {[(x.wr_id, x.status) for x in w]}'
    elif dst.read(BIG, 0) != data:
        wrong = 'WRITE data differs'
    a.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf + 8192, 4096, src.lkey)]))
    w = wait_wcs(cq, 2, 30)
    if not wrong and sorted((x.wr_id, x.status) for x in w) != [(2, 0), (3, 0)]:
        wrong = f'SEND completions {[(x.wr_id, x.status) for x in w]}'
    elif not wrong and dst.read(4096, 0) != data[8192:12288]:
        wrong = 'SEND data differs'
    src.close(); dst.close()
    return wrong

def healthy(after):
    # The usual ACK timeout (67 ms) and retries: the check is that the device
    # still works, not how fast a slow (debug) kernel answers.
    cq, a, b = pair(timeout=14, retry_cnt=7)
    wrong = moves_data(cq, a, b)
    ok(f'after {after}: a fresh pair moves data intact', not wrong, wrong)
    a.close(); b.close(); cq.close()

def drained(cq, secs=30):
    """Completions of all N flooded WQEs: {status: count}."""
    st = {}
    for x in wait_wcs(cq, N, secs):
        st[x.status] = st.get(x.status, 0) + 1
    return st

src, dst = MR(pd, BIG, LW), MR(pd, BIG, LW | RW)

# Destroying QPs with WQEs posted and traffic running.
cq, a, b = pair()
flood(a, src, dst.buf, dst.rkey)
survives('destroying the requester, then the responder, mid-transfer succeeds', lambda: (a.close(), b.close(), cq.close()))
healthy('destroying QPs mid-transfer')
cq, a, b = pair()
flood(a, src, dst.buf, dst.rkey)
b.close()
st = drained(cq)
ok('after its responder is destroyed mid-transfer, every WQE of the requester completes', sum(st.values()) == N, st)
a.close(); cq.close()
healthy('destroying the responder mid-transfer')

# RESET during traffic, then the same QPs again.
cq, a, b = pair()
flood(a, src, dst.buf, dst.rkey)
survives('moving both QPs to RESET mid-transfer succeeds',
         lambda: [q.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE) for q in (a, b)])
wait_wcs(cq, 4 * N, 1)
for me, peer in ((a, b), (b, a)):
    connect_rc(me, peer.qp_num, gid, LW | RW | RR, psn=5000, sgid_index=sgid, timeout=14, retry_cnt=7, rnr_retry=3)
wrong = moves_data(cq, a, b)
ok('the reset pair moves data again after reconnecting', not wrong, wrong)
a.close(); b.close(); cq.close()
healthy('RESET mid-transfer')

# Deregistering MRs that posted WQEs use (the local source, then the remote target).
for which in ('local source', 'remote target'):
    cq, a, b = pair()
    s2, d2 = MR(pd, BIG, LW), MR(pd, BIG, LW | RW)
    flood(a, s2, d2.buf, d2.rkey)
    try:
        (s2 if which == 'local source' else d2).close()
        print(f'# dereg of the {which} MR in use: accepted')
    except Exception as ex:
        print(f'# dereg of the {which} MR in use: refused ({ex})')
    st = drained(cq)
    ok(f'after the {which} MR is deregistered mid-transfer, every WQE completes', sum(st.values()) == N, st)
    a.close(); b.close(); cq.close()
    s2.close(); d2.close()
    healthy(f'deregistering the {which} MR in use')

# SIGKILL of a process mid-transfer: first one that owns both QPs, then the
# owner of the responder of this process's requester.
def has_qps_of(pid):
    out = subprocess.run(['rdma', 'res', 'show', 'qp', 'link', f'{dev}/1'], capture_output=True, text=True).stdout
    return re.search(rf'\bpid {pid}\b', out) is not None

child = r'''
import os, sys, time
sys.path.insert(0, os.environ['PYTHONPATH'])
from verbs import connect_rc
import uverbs_raw as u
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SendWR, SGE
import pyverbs.enums as e
dev, mode = os.environ['DEV'], sys.argv[1]
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ
sgid, _ = u.gid_of(dev)
ctx = Context(name=dev); pd = PD(ctx); gid = ctx.query_gid(1, sgid)
cq = CQ(ctx, 256)
mk = lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=64, max_recv_wr=64)))
src, dst = MR(pd, 1 << 20, LW), MR(pd, 1 << 20, LW | RW)
if mode == 'both':
    a, b = mk(), mk()
    for me, peer in ((a, b), (b, a)):
        connect_rc(me, peer.qp_num, gid, LW | RW | RR, sgid_index=sgid, timeout=10, retry_cnt=3, rnr_retry=3)
    print('running', flush=True)
    end, posted, done = time.time() + 120, 0, 0
    while time.time() < end:
        while posted - done < 32:
            wr = SendWR(wr_id=posted, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(src.buf, 1 << 20, src.lkey)])
            wr.set_wr_rdma(dst.rkey, dst.buf)
            a.post_send(wr)
            posted += 1
        done += cq.poll(32)[0]
else:
    b = mk()
    print(b.qp_num, dst.buf, dst.rkey, flush=True)
    peer = int(sys.stdin.readline())
    connect_rc(b, peer, gid, LW | RW | RR, sgid_index=sgid, timeout=10, retry_cnt=3, rnr_retry=3)
    print('running', flush=True)
    time.sleep(120)
'''
# The exit of a killed process tears its context down while packets and
# timers of its QPs are in flight: a few times, at different moments.
for delay in (0.2, 0.5, 1.0):
    p = subprocess.Popen([sys.executable, '-c', child, 'both'], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    running = select.select([p.stdout], [], [], 60)[0] and p.stdout.readline().strip() == 'running'
    ok(f'a child process runs a transfer loop (killed after {delay} s)', bool(running))
    time.sleep(delay)
    p.send_signal(signal.SIGKILL)
    p.wait()
    end = time.time() + 20
    while has_qps_of(p.pid) and time.time() < end:
        time.sleep(0.2)
    ok(f'the QPs of the process killed mid-transfer after {delay} s are gone', not has_qps_of(p.pid))
healthy('SIGKILL of processes mid-transfer')

p = subprocess.Popen([sys.executable, '-c', child, 'responder'], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
line = p.stdout.readline().split() if select.select([p.stdout], [], [], 60)[0] else []
if len(line) == 3:
    qpn, raddr, rkey = map(int, line)
    cq = CQ(ctx, 4 * N)
    a = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=N, max_recv_wr=N)))
    connect_rc(a, qpn, gid, LW | RW | RR, sgid_index=sgid, timeout=10, retry_cnt=3, rnr_retry=3)
    p.stdin.write(f'{a.qp_num}\n'); p.stdin.flush()
    p.stdout.readline()
    flood(a, src, raddr, rkey)
    p.send_signal(signal.SIGKILL)
    p.wait()
    st = drained(cq)
    ok('the requester of a responder killed mid-transfer completes every WQE', sum(st.values()) == N, st)
    a.close(); cq.close()
else:
    ok('the responder process started', False, line)
    p.kill(); p.wait()
healthy('SIGKILL of the responder process mid-transfer')

# Destroying a CQ or PD that a QP still uses: the core refuses with EBUSY.
r = u.Context(dev)
rpd = r.alloc_pd()
rcq = r.create_cq(16)
rqp = r.create_qp(rpd, rcq, rcq)
for what, fn in (('a CQ a QP still uses', lambda: r.destroy_cq(rcq, unmap=False)),
                 ('a PD a QP still uses', lambda: r.dealloc_pd(rpd))):
    try:
        fn()
        ok(f'destroying {what} is refused with EBUSY', False, 'succeeded')
    except OSError as ex:
        ok(f'destroying {what} is refused with EBUSY', ex.errno == errno.EBUSY, errno.errorcode.get(ex.errno))
try:
    r.destroy_qp(rqp); r.destroy_cq(rcq); r.dealloc_pd(rpd)
    ok('once the QP is gone, its CQ and PD are destroyed', True)
except OSError as ex:
    ok('once the QP is gone, its CQ and PD are destroyed', False, ex)
r.close()
healthy('refused CQ and PD destruction')
src.close(); dst.close(); pd.close(); ctx.close()
PY

sleep 1
kill $dmesg_pid
r=$(kernel_reports "$STALL_REPORTS" </tmp/hostile-dmesg.log)
if [ -z "$r" ]; then pass "no kernel report in dmesg"
else fail "kernel reports in dmesg"; grep -F -A15 -f <(printf '%s\n' "$r") /tmp/hostile-dmesg.log | head -60 | sed 's/^/# | /'; fi
check "no user QP left in rdma res" bash -c "[ \"\$(rdma res show qp link $DEV/1 | grep lqpn | grep -c ' pid ')\" = 0 ]"
check "no user CQ left in rdma res" bash -c "[ \"\$(rdma res show cq dev $DEV | grep cqn | grep -c ' pid ')\" = 0 ]"
check "no user MR left in rdma res" bash -c "[ \"\$(rdma res show mr dev $DEV | grep mrn | grep -c ' pid ')\" = 0 ]"
check "rdma link delete" rdma link delete $DEV
check "module unloads (nothing leaked)" modprobe -r rroce
finish
