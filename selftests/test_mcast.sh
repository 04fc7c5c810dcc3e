#!/bin/bash
# UD multicast between the namespaces: UD QPs attached to a group (IPv4
# 239.1.2.3 and IPv6 ff0e::7265) each get a copy of a datagram sent to the
# group's GID and QPN 0xFFFFFF, with the GRH and the sender's QPN; QPs not
# attached, detached or of another Q_Key get none. The first attach joins
# the IP group on the netdev (IGMP/MLD), the last detach leaves it; a QP of
# the sending device attached to the group gets its copy too (the IP stack
# loops it back). Attaching a non-UD QP or a unicast GID is refused; a QP
# attached with two LIDs needs two detaches. One user's QPs are in at most
# 512 groups of a device and create 64 at once, then 64 a second; another
# user still joins. A user namespace root creates is charged as the host
# uid its uid 0 maps to; one an unprivileged user creates is that user's.
. "$(dirname "$0")/lib.sh"
topo_devices_up
m0=$(cnt rroce-b rcvd_mcast_pkts)
py_checks env TOPO_B=$TOPO_B <<'PY'
import errno, os, struct, subprocess
import uverbs_raw as u
from verbs import Checks
c = Checks('test_mcast')
ok = c.ok
QKEY = 0x11111111
G4 = bytes(10) + b'\xff\xff' + bytes([239, 1, 2, 3])
G6 = bytes.fromhex('ff0e0000000000000000000000007265')


def maddrs():
    return subprocess.run(['ip', 'netns', 'exec', os.environ['TOPO_B'], 'ip', 'maddr', 'show', 'dev', 'veth-b'],
                          capture_output=True, text=True).stdout


class Side:
    def __init__(self, dev, ipv4):
        self.ctx = u.Context(dev)
        self.sgid, self.gid = u.gid_of(dev, ipv4)
        self.pd = self.ctx.alloc_pd()
        self.cq = self.ctx.create_cq(256)
        self.buf = u.Mapping(1 << 16)
        _, self.lkey, _ = self.ctx.reg_mr(self.pd, self.buf.addr, 1 << 16, u.LOCAL_WRITE)

    def ud_qp(self, qkey=QKEY):
        qp = self.ctx.create_qp(self.pd, self.cq, self.cq, u.QPT_UD, max_send_wr=16, max_recv_wr=16)
        self.ctx.ud_ready(qp, qkey)
        return qp

    def post_recvs(self, qp, n, slot):
        for i in range(n):
            off = slot * 4096 + i * 1024
            self.ctx.post_recv(qp, u.recv_wqe(slot << 8 | i, [(self.buf.addr + off, 1024, self.lkey)]))

    def drain(self, secs=3):
        return self.ctx.wait_wcs(self.cq, 1000, secs)


def run(family, ipv4, group):
    a, b = Side('rroce-a', ipv4), Side('rroce-b', ipv4)
    sender = a.ud_qp()
    r1, r2, other, wrong_qkey = b.ud_qp(), b.ud_qp(), b.ud_qp(), b.ud_qp(qkey=0x2222)
    local = a.ud_qp()
    for side, qp, slot in ((b, r1, 1), (b, r2, 2), (b, other, 3), (b, wrong_qkey, 4), (a, local, 5)):
        side.post_recvs(qp, 2, slot)
    for side, qp in ((b, r1), (b, r2), (b, wrong_qkey), (a, local)):
        side.ctx.attach_mcast(qp, group)
    shown = maddrs()
    # The group's multicast MAC is in the netdev's filter; the test kernel
    # lists IPv4 groups only with CONFIG_IP_MULTICAST, which it leaves out.
    want = '01:00:5e:01:02:03' if ipv4 else 'ff0e::7265'
    ok(f'{family}: attaching joins the IP group on the netdev ({want} in ip maddr)', want in shown, shown.replace('\n', ' | '))
    ah = a.ctx.create_ah(a.pd, group, a.sgid)
    a.buf.write(0, b'multicast ' + family.encode() + bytes(100))
    a.ctx.post_send(sender, u.send_wqe(0x5e, u.WR_SEND_IMM, sges=[(a.buf.addr, 64, a.lkey)], imm=0x1234,
                                       ud=(0xffffff, QKEY, ah[1])))
    got_a = a.drain()
    got_b = b.drain()
    sent = [w for w in got_a if w.wr_id == 0x5e]
    ok(f'{family}: the send to the group completes', len(sent) == 1 and sent[0].status == u.WC_SUCCESS,
       [(hex(w.wr_id), w.status) for w in got_a])
    # QP numbers are per device: completions are told apart by their CQ.
    by_qp = {}
    for side, ws in ((b, got_b), (a, [w for w in got_a if w.wr_id != 0x5e])):
        for w in ws:
            by_qp.setdefault((side, w.qp_num), []).append(w)
    for name, side, qp, slot in (('first', b, r1, 1), ('second', b, r2, 2), ('sending device\'s', a, local, 5)):
        ws = by_qp.get((side, qp.qpn), [])
        # The immediate travels as the WQE holds it, and comes back so.
        good = (len(ws) == 1 and ws[0].status == u.WC_SUCCESS and ws[0].byte_len == 40 + 64
                and ws[0].src_qp == sender.qpn and ws[0].imm == 0x1234
                and side.buf.read(slot * 4096 + 40, 64) == a.buf.read(0, 64))
        ok(f'{family}: the {name} attached QP gets one copy (GRH, data, sender QPN, immediate)', good,
           [(w.status, w.byte_len, hex(w.src_qp), hex(w.imm)) for w in ws])
    if ipv4:
        ok(f'{family}: the GRH holds the IPv4 header to the group (RoCEv2 A17.4.5.1)',
           b.buf.read(4096 + 20 + 16, 4) == bytes([239, 1, 2, 3]), b.buf.read(4096 + 20, 20).hex())
    else:
        ok(f'{family}: the GRH holds the group as destination GID', b.buf.read(4096 + 24, 16) == group,
           b.buf.read(4096, 40).hex())
    ok(f'{family}: a QP not attached gets nothing', (b, other.qpn) not in by_qp)
    ok(f'{family}: an attached QP with another Q_Key gets nothing', (b, wrong_qkey.qpn) not in by_qp)

    # Detach one: only the other gets the next datagram; detaching twice fails.
    b.ctx.detach_mcast(r1, group)
    try:
        b.ctx.detach_mcast(r1, group)
        e = 0
    except OSError as ex:
        e = ex.errno
    ok(f'{family}: detaching a QP that is not attached fails (EINVAL)', e == errno.EINVAL, e)
    a.ctx.post_send(sender, u.send_wqe(0x5f, u.WR_SEND, sges=[(a.buf.addr, 64, a.lkey)], ud=(0xffffff, QKEY, ah[1])))
    a.drain()
    got = {w.qp_num for w in b.drain()}
    ok(f'{family}: after a detach only the QPs still attached get the next datagram', got == {r2.qpn}, [hex(q) for q in got])
    for side, qp in ((b, r2), (b, wrong_qkey), (a, local)):
        side.ctx.detach_mcast(qp, group)
    shown = maddrs()
    ok(f'{family}: the last detach leaves the IP group', want not in shown, shown.strip()[-200:])
    a.ctx.post_send(sender, u.send_wqe(0x60, u.WR_SEND, sges=[(a.buf.addr, 64, a.lkey)], ud=(0xffffff, QKEY, ah[1])))
    a.drain()
    ok(f'{family}: with no QP attached, nothing is received', b.drain(1) == [])
    return a, b


a, b = run('IPv4', True, G4)
rc = b.ctx.create_qp(b.pd, b.cq, b.cq, u.QPT_RC)
for what, qp, gid, want in (('an RC QP', rc, G4, errno.EINVAL), ('a unicast GID', b.ud_qp(), b.gid, errno.EINVAL)):
    try:
        b.ctx.attach_mcast(qp, gid)
        e = 0
    except OSError as ex:
        e = ex.errno
    ok(f'attaching {what} is refused (EINVAL)', e == want, e)
run('IPv6', False, G6)

# The core passes each (GID, LID) pair on: a QP attached with two LIDs
# stays a member until both are detached, and can be destroyed after.
a, b = Side('rroce-a', True), Side('rroce-b', True)
sender, q = a.ud_qp(), b.ud_qp()
b.post_recvs(q, 2, 1)
b.ctx.attach_mcast(q, G4, 0)
b.ctx.attach_mcast(q, G4, 1)
b.ctx.detach_mcast(q, G4, 0)
ah = a.ctx.create_ah(a.pd, G4, a.sgid)
a.ctx.post_send(sender, u.send_wqe(0x61, u.WR_SEND, sges=[(a.buf.addr, 64, a.lkey)], ud=(0xffffff, QKEY, ah[1])))
a.drain()
ok('a QP attached with two LIDs is still a member after one detach', [w.qp_num for w in b.drain()] == [q.qpn])
b.ctx.detach_mcast(q, G4, 1)
try:
    b.ctx.destroy_qp(q)
    e = 0
except OSError as ex:
    e = ex.errno
ok('... and after the second it can be destroyed', e == 0, e)
# One left attached twice when the process exits: the core's cleanup
# detaches both, and the devices then go away (test_devices_down).
q2 = b.ud_qp()
b.ctx.attach_mcast(q2, G4, 0)
b.ctx.attach_mcast(q2, G4, 7)
PY
rc=$?
[ $rc = 0 ] || fail "the Python part exited with status $rc"
got=$(($(cnt rroce-b rcvd_mcast_pkts) - m0))
info "rroce-b delivered $got multicast datagrams"
check "rroce-b counted the 5 datagrams it delivered to attached QPs (rcvd_mcast_pkts)" test $got = 5

# One user cannot take a device's groups from the others: a user's QPs are
# in at most 512 groups of a device, and it creates new ones (each an IGMP
# or MLD join under RTNL) 64 at once, then 64 a second; each refusal counts
# in mcast_join_refused. Root creates groups as fast as it can until a
# join is refused for the rate (EAGAIN), then paced up to its bound, where
# the next group is refused (ENOMEM) while a group root is already in still
# takes another of its QPs. Root then fills one of its groups with the 56
# QPs a user may have in a group (max_mcast_qp_attach); user nobody creates
# a group of its own and still joins that one.
py_checks <<'PY'
import ctypes, errno, os, time
import uverbs_raw as u
from verbs import Checks
c = Checks('test_mcast')
ok = c.ok
PER_USER, BURST, PER_SEC = 512, 64, 64
DEV = 'rroce-b'
COUNTER = f'/sys/class/infiniband/{DEV}/ports/1/hw_counters/mcast_join_refused'


def group(i):
    return bytes(10) + b'\xff\xff' + bytes([239, 2, i >> 8, i & 255])


def attach(ctx, qp, gid):
    try:
        ctx.attach_mcast(qp, gid)
        return 0
    except OSError as ex:
        return ex.errno


def refused_count():
    try:
        return int(open(COUNTER).read())
    except OSError:
        return None


# The earlier part's joins used some of the budget: a second refills it.
time.sleep(BURST / PER_SEC)
r0 = refused_count()
ctx = u.Context(DEV)
pd, cq = ctx.alloc_pd(), ctx.create_cq(16)
qp, qp2 = (ctx.create_qp(pd, cq, cq, u.QPT_UD, max_send_wr=4, max_recv_wr=4) for _ in range(2))
refusals = 0
# As fast as it can: the first refusal is for the rate, within the budget.
n, first, t0 = 0, 0, time.monotonic()
while n < PER_USER:
    first = attach(ctx, qp, group(n))
    if first:
        break
    n += 1
took = time.monotonic() - t0
refusals += first != 0
print(f'# {n} groups created in {took:.3f} s before the first refusal ({errno.errorcode.get(first, first)})', flush=True)
ok('a user creating groups back to back is refused for the rate (EAGAIN) after its burst, not before',
   first == errno.EAGAIN and BURST <= n <= BURST + PER_SEC * took + 1, (n, round(took, 3), first))
# Paced: up to the bound, then refused.
last, deadline = 0, time.monotonic() + 60
while time.monotonic() < deadline:
    last = attach(ctx, qp, group(n))
    if last == 0:
        n += 1
    elif last == errno.EAGAIN:
        refusals += 1
        time.sleep(1 / PER_SEC)
    else:
        refusals += 1
        break
ok(f'the same user, paced, gets {PER_USER} groups and the next one is refused (ENOMEM)',
   n == PER_USER and last == errno.ENOMEM, (n, errno.errorcode.get(last, last)))
e = attach(ctx, qp2, group(0))
ok("another QP of the user still joins a group the user is in", e == 0, errno.errorcode.get(e, e))
e = attach(ctx, qp2, group(PER_USER + 1))
refusals += e != 0
ok('... but no new group (ENOMEM)', e == errno.ENOMEM, errno.errorcode.get(e, e))
r1 = refused_count()
ok('each refusal counted in mcast_join_refused', r0 is not None and r1 - r0 == refusals, (r0, r1, refusals))

# A group holds as many QPs of one user as the device advertises
# (max_mcast_qp_attach), and no more, but that leaves room for other users':
# root fills group 0 (qp and qp2 are in it), then user nobody joins it below.
PER_GROUP = 56
more = [ctx.create_qp(pd, cq, cq, u.QPT_UD, max_send_wr=1, max_recv_wr=1) for _ in range(PER_GROUP - 1)]
got = [attach(ctx, q, group(0)) for q in more]
ok(f"a user attaches {PER_GROUP} of its QPs to one group, the next is refused (ENOMEM)",
   got == [0] * (PER_GROUP - 2) + [errno.ENOMEM], [errno.errorcode.get(x, x) for x in got])

# Another user: its own group, and one of root's.
uverbs = u.find_uverbs(DEV)


def other_user_attaches(groups, who):
    """In a child that is another user now: a UD QP of its own attached to
    each of `groups` (the errnos), or why it cannot open the device."""
    if not os.access(uverbs, os.R_OK | os.W_OK):
        return ['skip', f'{uverbs} is {oct(os.stat(uverbs).st_mode & 0o777)}, not usable by {who}']
    other = u.Context(DEV)
    opd, ocq = other.alloc_pd(), other.create_cq(4)
    oqp = other.create_qp(opd, ocq, ocq, u.QPT_UD, max_send_wr=4, max_recv_wr=4)
    res = [attach(other, oqp, g) for g in groups]
    other.close()
    return res


r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    res = []
    try:
        os.setgroups([]); os.setgid(65534); os.setuid(65534)
        res = other_user_attaches([group(9000), group(0)], 'nobody')
    except Exception as ex:
        res = ['error', repr(ex)]
    os.write(w, repr(res).encode())
    os._exit(0)
os.close(w)
res = eval(os.fdopen(r).read() or "['error', 'no answer']")
os.waitpid(pid, 0)
if res and res[0] == 'skip':
    c.skip('another user creates a group and joins one of the first user\'s', res[1])
else:
    ok(f"another user creates a group and joins one of the first user's, which holds {PER_GROUP} of its QPs",
       res == [0, 0], [errno.errorcode.get(x, x) for x in res])
for q in more[:PER_GROUP - 2]:
    ctx.detach_mcast(q, group(0))

# User namespaces. One an unprivileged user creates is charged to that
# user: the ids it maps there (itself as uid 0) get no share of their own.
# One root creates (a container runtime's) is charged as the host uid its
# uid 0 maps to: with a range of its own (100000) it gets a share of its
# own, bounded like any user's, though root's groups are all taken; mapped
# to root (a setuid helper maps its caller's uid the same way) it has
# root's full share. The children report their errnos through a pipe.
def in_child(body, maps_for=None):
    """body() in a forked child: its result. With `maps_for` (the id
    outside for the child's uid 0), body gets a function to call once it
    has left for its new user namespace, and this parent, root in the
    initial one, writes the child's id maps (a process inside cannot map an
    id other than its own)."""
    r, w = os.pipe()
    ns_r, ns_w = os.pipe()  # the child has left the initial namespace
    go_r, go_w = os.pipe()  # the parent has written the child's id maps

    def entered():
        os.write(ns_w, b'x')
        os.read(go_r, 1)
    pid = os.fork()
    if pid == 0:
        os.close(r); os.close(ns_r); os.close(go_w)
        try:
            res = body(entered) if maps_for is not None else body()
        except Exception as ex:
            res = ['error', repr(ex)]
        os.write(w, repr(res).encode())
        os._exit(0)
    os.close(w); os.close(ns_w); os.close(go_r)
    if maps_for is not None:
        try:
            if os.read(ns_r, 1) == b'x':
                for f, line in (('setgroups', 'deny'), ('uid_map', f'0 {maps_for} 1'), ('gid_map', f'0 {maps_for} 1')):
                    with open(f'/proc/{pid}/{f}', 'w') as m:
                        m.write(line)
        except OSError as ex:
            print(f'# writing the id maps of the child: {ex!r}', flush=True)
        finally:
            os.write(go_w, b'x')
    os.close(go_w); os.close(ns_r)
    res = eval(os.fdopen(r).read() or "['error', 'no answer']")
    os.waitpid(pid, 0)
    return res


def qps_attached(n, gid):
    """A context with `n` UD QPs, each attached to `gid`: the errnos."""
    ctx = u.Context(DEV)
    pd, cq = ctx.alloc_pd(), ctx.create_cq(4)
    qps = [ctx.create_qp(pd, cq, cq, u.QPT_UD, max_send_wr=1, max_recv_wr=1) for _ in range(n)]
    return ctx, [attach(ctx, q, gid) for q in qps]


def unprivileged_namespace():
    if not os.access(uverbs, os.R_OK | os.W_OK):
        return ['skip', f'{uverbs} is not usable by nobody']
    os.setgroups([]); os.setgid(65534); os.setuid(65534)
    # Nobody fills its share of a group, then asks for one more from a
    # namespace of its own, as uid 0 there.
    _ctx, got = qps_attached(PER_GROUP, group(9002))
    if got != [0] * PER_GROUP:
        return ['error', f'nobody attaching {PER_GROUP} QPs: {got}']
    # Changing uid made the process undumpable, which gives its /proc
    # files to root: undo that, so it can write its own id maps.
    ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    try:
        os.unshare(os.CLONE_NEWUSER)
    except OSError as ex:
        return ['skip', f'an unprivileged user cannot create a user namespace here: {ex!r}']
    for f, line in (('setgroups', 'deny'), ('uid_map', '0 65534 1'), ('gid_map', '0 65534 1')):
        with open(f'/proc/self/{f}', 'w') as m:
            m.write(line)
    os.setgid(0); os.setuid(0)
    return qps_attached(1, group(9002))[1]


def root_created_namespace(entered, group_too=True):
    try:
        os.unshare(os.CLONE_NEWUSER)
    finally:
        entered()
    os.setgid(0); os.setuid(0)
    # Root's groups are all taken. A new group, then a group's worth of QPs
    # in one group and one more.
    _ctx, first = qps_attached(1, group(9001))
    if not group_too:
        return first
    _ctx2, got = qps_attached(PER_GROUP + 1, group(9003))
    return first + [got.count(0), got[-1]]


if not os.path.exists('/proc/self/setgroups'):
    c.skip("a user's own user namespace counts as the user", 'the kernel has no user namespaces (CONFIG_USER_NS)')
    c.skip('a namespace root created is charged as the uid it maps to', 'the kernel has no user namespaces (CONFIG_USER_NS)')
else:
    res = in_child(unprivileged_namespace)
    if res and res[0] == 'skip':
        c.skip("a user's own user namespace counts as the user", res[1])
    else:
        ok(f"a user's own user namespace counts as the user: with {PER_GROUP} of nobody's QPs in a group, "
           "nobody's uid 0 in its namespace cannot attach one more (ENOMEM)",
           res == [errno.ENOMEM], [errno.errorcode.get(x, x) if isinstance(x, int) else x for x in res])
    res = in_child(root_created_namespace, maps_for=100000)
    ok("a namespace root created with uid 0 mapped to 100000 is that user: with root's groups all taken, "
       "it creates a group", len(res) == 3 and res[0] == 0, res)
    ok(f"... and is bounded like any user: {PER_GROUP} of its QPs attach to one group, the next is refused (ENOMEM)",
       len(res) == 3 and res[1:] == [PER_GROUP, errno.ENOMEM], res)
    res = in_child(lambda entered: root_created_namespace(entered, group_too=False), maps_for=0)
    ok("a namespace root created with uid 0 mapped to root is root: its new group is refused (root's are all taken)",
       len(res) == 1 and res[0] in (errno.ENOMEM, errno.EAGAIN), [errno.errorcode.get(x, x) if isinstance(x, int) else x for x in res])

# Leaving a group gives it back: one more may be created.
ctx.detach_mcast(qp, group(5))
time.sleep(2 * BURST / PER_SEC)
e = attach(ctx, qp, group(PER_USER + 2))
ok('after leaving one group the user may create another', e == 0, errno.errorcode.get(e, e))
# Leaving them all gives them all back (the core refuses to destroy a QP
# still attached).
ctx.detach_mcast(qp2, group(0))
for i in [i for i in range(PER_USER + 3) if i not in (5, PER_USER, PER_USER + 1)]:
    ctx.detach_mcast(qp, group(i))
time.sleep(2 * BURST / PER_SEC)
got = [attach(ctx, qp, group(1000 + i)) for i in range(BURST)]
ok('once it left its groups the user gets a burst of new groups again', got == [0] * BURST,
   [(i, errno.errorcode.get(x, x)) for i, x in enumerate(got) if x])
ctx.close()
PY
$A rdma link delete rroce-a

# From the wire, with namespace A's device gone: a fake peer there sends
# hand-built datagrams. Only a UD datagram to both the group's address and
# QPN 0xFFFFFF reaches the attached QP; one to the group with the QP's own
# QPN, one to the device's own address with QPN 0xFFFFFF, and an RC SEND
# to the group are dropped.
d0=$(cnt rroce-b rcvd_dropped)
py_checks env TOPO_A=$TOPO_A <<'PY'
import socket, struct
import roce
import uverbs_raw as u
from roce import Peer, packet
from verbs import Checks
c = Checks('test_mcast')
QKEY = 0x11111111
G4 = bytes(10) + b'\xff\xff' + bytes([239, 1, 2, 3])
import os
roce.enter_netns(os.environ['TOPO_A'])
peer = Peer('198.18.0.1')
peer.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton('198.18.0.1'))
ctx = u.Context('rroce-b')
pd, cq = ctx.alloc_pd(), ctx.create_cq(64)
buf = u.Mapping(65536)
_, lkey, _ = ctx.reg_mr(pd, buf.addr, 65536, u.LOCAL_WRITE)
qp = ctx.create_qp(pd, cq, cq, u.QPT_UD, max_recv_wr=16)
ctx.ud_ready(qp, QKEY)
for i in range(8):
    ctx.post_recv(qp, u.recv_wqe(i, [(buf.addr + i * 2048, 2048, lkey)]))
ctx.attach_mcast(qp, G4)
for what, opcode, qpn, dst, tag in (
        ('to the group with its own QPN', roce.UD | roce.SEND_ONLY, qp.qpn, '239.1.2.3', b'own qpn'),
        ('to the device\'s address with QPN 0xFFFFFF', roce.UD | roce.SEND_ONLY, 0xffffff, '198.18.0.2', b'unicast'),
        ('RC SEND to the group', roce.RC | roce.SEND_ONLY, 0xffffff, '239.1.2.3', b'rc send'),
        ('to the group and QPN 0xFFFFFF', roce.UD | roce.SEND_ONLY, 0xffffff, '239.1.2.3', b'good')):
    p = packet(opcode, qpn, 0, tag.ljust(32, b'.'), deth_=(QKEY, 0x77))
    c.ok(f'the fake peer sends a datagram {what}', peer.send(p, dst))
wcs = ctx.wait_wcs(cq, 4, 5)
got = [buf.read(w.wr_id * 2048 + 40, 7) for w in wcs]
c.ok('only the UD datagram to the group and QPN 0xFFFFFF reaches the attached QP',
     len(wcs) == 1 and got[0].startswith(b'good') and wcs[0].src_qp == 0x77, got)
ctx.close()
PY
rc=$?
[ $rc = 0 ] || fail "the second Python part exited with status $rc"
dropped=$(($(cnt rroce-b rcvd_dropped) - d0))
check "rroce-b counted the 3 others dropped (rcvd_dropped)" test $dropped = 3
check "rroce-b goes away after a process exited with a QP attached twice" timeout 60 $B rdma link delete rroce-b
topo_down
finish
