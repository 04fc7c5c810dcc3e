#!/bin/bash
# Tenant isolation under a noisy neighbour (docs/security.md, "One user
# against the others"): a victim, root's ib_write_bw and ib_write_lat from
# rroce-a to rroce-b, runs alone, then while user nobody, at nice 19 (so
# that sharing the CPUs is not taken for a stall), runs each attack in turn:
#  (a) RDMA READs of on-demand regions on a slow disk (null_blk, 3 s a
#      page), each from a page not read yet, by QPs created before their
#      PD's first on-demand region: their work waits on faults all along;
#  (b) UD QPs of 9 PDs stalled on faults of their receives on that disk,
#      flooded with datagrams: the user's waiting packets are at its cap;
#  (c) churn: PD + QP on another PD's SRQ + on-demand region + teardown,
#      with memory windows allocated and freed, in a loop;
#  (d) CNPs from a fake peer (a third address on the link) sprayed at the
#      QP numbers the victim's device hands out next.
# The victim's memory is on demand too (perftest --odp): its QPs' work then
# runs on its PDs' own queues, where the attackers' faults would hold it up
# were those queues shared, and its packets count in the totals the stalled
# ones fill. The victim must complete every operation and keep at least
# half of its alone bandwidth: a functional check that it is not stalled,
# not a performance target. Each attack is checked to be in effect during
# the victim's run (a check of a victim that met no attack proves nothing),
# then stopped, and its objects freed, before the next one.
. "$(dirname "$0")/lib.sh"

# The slow disk of attacks (a) and (b), as test_odp.sh has it (lib.sh).
slow_disk_up
modprobe rroce
topo_devices_up
# The fake peer of attack (d): an address on rroce-b's side of the link.
FAKE_PEER4=198.18.0.3
ip -n $TOPO_B addr add $FAKE_PEER4/24 dev veth-b
mark="rroce selftest test_noisy_neighbour start $$"
echo "$mark" >/dev/kmsg

py_checks env TOPO_A=$TOPO_A TOPO_B=$TOPO_B TOPO_A4=$TOPO_A4 TOPO_B4=$TOPO_B4 FAKE_PEER4=$FAKE_PEER4 \
	SLOW_DISK="$SLOW_DISK" SLOW_WHY="$SLOW_WHY" <<'PY'
import ctypes, json, math, os, re, select, subprocess, threading, time, traceback
from verbs import Checks
c = Checks('test_noisy_neighbour')
ok = c.ok
NS_A, NS_B = os.environ['TOPO_A'], os.environ['TOPO_B']
A4, B4, FAKE4 = os.environ['TOPO_A4'], os.environ['TOPO_B4'], os.environ['FAKE_PEER4']
DISK, SLOW_WHY = os.environ.get('SLOW_DISK', ''), os.environ.get('SLOW_WHY', '')
NOBODY = 65534
PAGE = 4096
# The victim: 64 KiB WRITEs, a few seconds' worth under TCG; 2-byte
# round trips for the latency.
BW_SIZE, BW_ITERS = 65536, 2000
LAT_SIZE, LAT_ITERS = 2, 300
MIN_SHARE = 0.5

# --- the victim ---------------------------------------------------------------
ROW = re.compile(r'^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)')
PERFTEST_PORT = 18515


def listening(pid):
    """Whether a process in the network namespace of `pid` listens on perftest's port."""
    for table in ('tcp', 'tcp6'):
        try:
            for line in open(f'/proc/{pid}/net/{table}').read().splitlines()[1:]:
                f = line.split()
                if f[1].endswith(f':{PERFTEST_PORT:04X}') and f[3] == '0A':
                    return True
        except OSError:
            pass
    return False


def perftest(tool, size, iters, limit):
    """Runs perftest's `tool` with memory on demand, server on rroce-b, client
    on rroce-a, each bounded by `limit` seconds. Returns a dict: done (both
    exited 0 and the client reported all iterations), the client's row
    (bandwidth tests: BW peak, BW average in MiB/s, Mpps; latency tests:
    t_min, t_max, t_typical in us), the client's seconds, a tail of the logs."""
    args = [tool, '-x', '1', '-F', '--odp', '-s', str(size), '-n', str(iters)]
    srv = subprocess.Popen(['ip', 'netns', 'exec', NS_B, 'timeout', str(limit), *args, '-d', 'rroce-b'],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 60
    while srv.poll() is None and not listening(srv.pid) and time.monotonic() < end:
        time.sleep(0.05)
    t0 = time.monotonic()
    cli = subprocess.run(['ip', 'netns', 'exec', NS_A, 'timeout', str(limit), *args, '-d', 'rroce-a', B4],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - t0
    try:
        sout = srv.communicate(timeout=limit)[0]
    except subprocess.TimeoutExpired:
        srv.kill()
        sout = srv.communicate()[0]
    rows = [m for m in map(ROW.match, cli.stdout.splitlines()) if m and int(m.group(1)) == size]
    row = [float(x) for x in rows[-1].groups()[2:]] if rows else None
    done = cli.returncode == 0 and srv.returncode == 0 and bool(rows) and int(rows[-1].group(2)) == iters
    tail = [f'client exit {cli.returncode}, server exit {srv.returncode}']
    if not done:
        tail += ['client: ' + l for l in cli.stdout.splitlines()[-6:]] + ['server: ' + l for l in sout.splitlines()[-4:]]
    return {'done': done, 'row': row, 'secs': took, 'tail': tail}


def show_tail(r):
    for l in r['tail']:
        print(f'# | {l}', flush=True)


def victim(limit):
    """One ib_write_bw and one ib_write_lat of the victim."""
    bw = perftest('ib_write_bw', BW_SIZE, BW_ITERS, limit)
    lat = perftest('ib_write_lat', LAT_SIZE, LAT_ITERS, limit)
    return bw, lat


def bw_of(r):
    return r['row'][1] if r['row'] else 0.0


# --- the attackers --------------------------------------------------------------
# Each runs in a child process: what needs root (the slow disk opened, the
# fake peer's socket in rroce-b's namespace) first, then it becomes user
# nobody at nice 19, sets its attack up and says "ready"; it keeps the
# attack going, counts from "mark", and on "stop" reports, stops, frees
# everything and says "done". Lines of JSON: [tag, {figures}].
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
PROT_READ, PROT_WRITE, MAP_SHARED = 1, 2, 1
SPACING = 16 * PAGE                     # no two faults' pages near each other


def map_disk(fd, length, offset, prot):
    addr = libc.mmap(None, length, prot, MAP_SHARED, fd, offset)
    assert addr not in (None, ctypes.c_void_p(-1).value), f'mmap errno {ctypes.get_errno()}'
    return addr


class SlowReads:
    """(a) READs that wait on faults: 2 PDs on rroce-b, 4 RC QPs each, created
    and connected before the PD's first on-demand region; then a region
    per QP on the slow disk (a region's faults wait in turn). A QP on
    rroce-a per QP keeps 2 READs of 64 bytes in flight, each from a page
    not read yet."""
    PDS, QPS, IN_FLIGHT, PAGES = 2, 4, 2, 48

    @staticmethod
    def as_root(params):
        return os.open(DISK, os.O_RDONLY)

    def __init__(self, params, fd):
        from verbs import connect_rc, open_devices
        from pyverbs.cq import CQ
        from pyverbs.mr import MR
        from pyverbs.pd import PD
        from pyverbs.qp import QP, QPCap, QPInitAttr
        import pyverbs.enums as e
        self.e = e
        side = open_devices()
        self.side = side
        (ctx_a, pd_a, gi_a, gid_a), (ctx_b, _, gi_b, gid_b) = side['rroce-a'], side['rroce-b']
        acc = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ
        self.objs, self.flows = [], []
        self.local = MR(pd_a, self.PDS * self.QPS * 64, e.IBV_ACCESS_LOCAL_WRITE)
        pds = [PD(ctx_b) for _ in range(self.PDS)]
        self.length = self.QPS * self.PAGES * SPACING
        for i, pd in enumerate(pds):
            cq_b = CQ(ctx_b, 4 * self.QPS)
            self.objs.append(cq_b)
            for j in range(self.QPS):
                cq_a = CQ(ctx_a, 2 * self.IN_FLIGHT)
                qa = QP(pd_a, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_a, rcq=cq_a,
                                         cap=QPCap(max_send_wr=2 * self.IN_FLIGHT, max_recv_wr=1)))
                qb = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq_b, rcq=cq_b, cap=QPCap(max_send_wr=4, max_recv_wr=1)))
                # A retransmission timeout of 34 s: READs wait 3 s a page.
                connect_rc(qa, qb.qp_num, gid_b, acc, sgid_index=gi_a, timeout=23)
                connect_rc(qb, qa.qp_num, gid_a, acc, sgid_index=gi_b, timeout=23)
                self.flows.append({'qa': qa, 'cq': cq_a, 'qb': qb, 'pd': i, 'base': j * self.PAGES * SPACING,
                                   'next': 0, 'posted': {}, 'slot': len(self.flows)})
                self.objs = [qa, qb, cq_a] + self.objs
        # Only now the PDs' first on-demand regions: the QPs exist already.
        self.maps, self.mrs = [], []
        for i, pd in enumerate(pds):
            self.maps.append(map_disk(fd, self.length, (128 << 20) + i * self.length, PROT_READ))
        for f in self.flows:
            f['va'] = self.maps[f['pd']] + f['base']
            f['mr'] = MR(pds[f['pd']], self.PAGES * SPACING, e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_ON_DEMAND,
                         address=f['va'])
            self.mrs.append(f['mr'])
        self.pds = pds
        self.fd = fd
        self.done = self.errors = 0
        self.marked_done = 0
        self.slowest = 0.0
        self.posting = True
        for f in self.flows:
            for _ in range(self.IN_FLIGHT):
                self.post(f)

    def post(self, f):
        from pyverbs.wr import SendWR, SGE
        if f['next'] >= self.PAGES:
            return
        k = f['next']
        f['next'] += 1
        w = SendWR(wr_id=k, opcode=self.e.IBV_WR_RDMA_READ, num_sge=1,
                   sg=[SGE(self.local.buf + 64 * f['slot'], 64, self.local.lkey)])
        w.set_wr_rdma(f['mr'].rkey, f['va'] + k * SPACING)
        f['qa'].post_send(w)
        f['posted'][k] = time.monotonic()

    def info(self):
        return {'qps': len(self.flows), 'reads_in_flight': sum(len(f['posted']) for f in self.flows)}

    def step(self):
        for f in self.flows:
            n, wcs = f['cq'].poll(4)
            for w in wcs:
                t = f['posted'].pop(w.wr_id, None)
                if t is not None:
                    self.slowest = max(self.slowest, time.monotonic() - t)
                self.done += 1
                self.errors += w.status != 0
                if self.posting:
                    self.post(f)
        time.sleep(0.05)

    def mark(self):
        self.marked_done = self.done

    def stats(self):
        return {'reads_done_meanwhile': self.done - self.marked_done, 'in_flight': sum(len(f['posted']) for f in self.flows),
                'slowest_read_s': round(self.slowest, 2), 'errors': self.errors,
                'pages_left': sum(self.PAGES - f['next'] for f in self.flows)}

    def close(self):
        self.posting = False
        t = time.monotonic()
        end = t + 60
        while any(f['posted'] for f in self.flows) and time.monotonic() < end:
            self.step()
        left = sum(len(f['posted']) for f in self.flows)
        waited = time.monotonic() - t
        for o in self.objs + self.mrs + [self.local] + self.pds:
            o.close()
        for addr in self.maps:
            libc.munmap(addr, self.length)
        os.close(self.fd)
        for ctx, pd, _, _ in self.side.values():
            pd.close()
            ctx.close()
        return {'reads_left_unfinished': left, 'waited_for_reads_s': round(waited, 1)}


class StalledFlood:
    """(b) 9 PDs on rroce-b, each with a UD QP whose RECVS receives lie on
    pages of the slow disk, stalled on their first fault while a UD QP on
    rroce-a floods them with datagrams in turns: the user's waiting
    packets stay at its cap (test_odp.sh section 10)."""
    NPD, FIRST_FLOOD, BURST = 9, 3000, 128

    @staticmethod
    def as_root(params):
        return os.open(DISK, os.O_RDWR)

    def __init__(self, params, fd):
        from verbs import open_devices
        from pyverbs.addr import AH, AHAttr, GlobalRoute
        from pyverbs.cq import CQ
        from pyverbs.mr import MR
        from pyverbs.pd import PD
        from pyverbs.wr import RecvWR, SendWR, SGE
        import pyverbs.enums as e
        self.recvs = params['recvs']
        side = open_devices()
        self.side = side
        (ctx_a, pd_a, gi_a, gid_a), (ctx_b, _, gi_b, gid_b) = side['rroce-a'], side['rroce-b']
        self.scq = CQ(ctx_a, 256)
        self.sqp = ud_qp(ctx_a, pd_a, self.scq, 1, send=256)
        self.ah = AH(pd_a, attr=AHAttr(gr=GlobalRoute(dgid=gid_b, sgid_index=gi_a), is_global=1, port_num=1))
        self.payload = MR(pd_a, 64, e.IBV_ACCESS_LOCAL_WRITE)
        self.length = self.recvs * SPACING
        self.fd = fd
        self.stalled = []
        for i in range(self.NPD):
            pd = PD(ctx_b)
            addr = map_disk(fd, self.length, (512 << 20) + i * self.length, PROT_READ | PROT_WRITE)
            mr = MR(pd, self.length, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND, address=addr)
            cq = CQ(ctx_b, self.recvs)
            qp = ud_qp(ctx_b, pd, cq, self.recvs)
            for r in range(self.recvs):
                qp.post_recv(RecvWR(wr_id=r, num_sge=1, sg=[SGE(addr + r * SPACING, PAGE, mr.lkey)]))
            self.stalled.append({'qp': qp, 'cq': cq, 'mr': mr, 'pd': pd, 'addr': addr, 'got': 0})
        self.wrs = []
        for s in self.stalled:
            pair = []
            for signaled in (False, True):
                w = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(self.payload.buf, 1, self.payload.lkey)],
                           send_flags=e.IBV_SEND_SIGNALED if signaled else 0)
                w.set_wr_ud(self.ah, s['qp'].qp_num, 0x1234)
                pair.append(w)
            self.wrs.append(pair)
        self.sent = self.marked_sent = 0
        self.send(self.FIRST_FLOOD)

    def send(self, n):
        from verbs import wait_wcs
        for k in range(n):
            signaled = k % 64 == 63 or k == n - 1
            self.sqp.post_send(self.wrs[self.sent % len(self.wrs)][signaled])
            self.sent += 1
            if signaled:
                got = wait_wcs(self.scq, 1, 20)
                assert [w.status for w in got] == [0], f'send completion {[w.status for w in got]}'

    def info(self):
        return {'pds': self.NPD, 'faults_each': self.recvs, 'datagrams': self.sent}

    def step(self):
        self.send(self.BURST)
        time.sleep(0.01)

    def mark(self):
        self.marked_sent = self.sent

    def pending(self):
        """QPs still waiting for a receive to complete (completions found are counted)."""
        for s in self.stalled:
            s['got'] += len(s['cq'].poll(self.recvs)[1])
        return sum(s['got'] < self.recvs for s in self.stalled)

    def stats(self):
        return {'datagrams_meanwhile': self.sent - self.marked_sent, 'qps_still_stalled': self.pending()}

    def close(self):
        # Each stalled QP gets its receives once the disk answers (3 s a page).
        t = time.monotonic()
        end = t + 3 * self.recvs + 30
        while self.pending() and time.monotonic() < end:
            time.sleep(0.2)
        left = self.pending()
        waited = time.monotonic() - t
        for s in self.stalled:
            for k in ('qp', 'cq', 'mr', 'pd'):
                s[k].close()
            libc.munmap(s['addr'], self.length)
        for o in (self.sqp, self.ah, self.payload, self.scq):
            o.close()
        os.close(self.fd)
        for ctx, pd, _, _ in self.side.values():
            pd.close()
            ctx.close()
        return {'qps_left_stalled': left, 'waited_for_receives_s': round(waited, 1)}


def ud_qp(ctx, pd, cq, recvs, send=4):
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
    import pyverbs.enums as e
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, sq_sig_all=0,
                           cap=QPCap(max_send_wr=send, max_recv_wr=max(recvs, 1))))
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.qkey, a.pkey_index, a.port_num = 0x1234, 0, 1
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    return qp


class Churn:
    """(c) On rroce-b, in a loop: a PD with a QP on an SRQ of another PD and an
    on-demand region (its own queue, linked to the SRQ's PD), then all of it
    torn down; and memory windows of both PDs allocated and freed (their
    deallocation waits for the linked PDs' queues)."""
    WINDOWS = 4

    @staticmethod
    def as_root(params):
        return None

    def __init__(self, params, _):
        from pyverbs.cq import CQ
        from pyverbs.device import Context
        from pyverbs.pd import PD
        from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
        self.ctx = Context(name='rroce-b')
        self.pd_a = PD(self.ctx)
        self.cq = CQ(self.ctx, 4)
        self.srq = SRQ(self.pd_a, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
        self.cycles = self.marked = 0
        for _ in range(20):
            self.step()

    def step(self):
        from pyverbs.mr import MR, MW
        from pyverbs.pd import PD
        from pyverbs.qp import QP, QPCap, QPInitAttr
        import pyverbs.enums as e
        pd_b = PD(self.ctx)
        qp = QP(pd_b, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, srq=self.srq,
                                 cap=QPCap(max_send_wr=1, max_recv_wr=1)))
        mr = MR(pd_b, PAGE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_ON_DEMAND)
        mws = [MW(pd, t) for pd in (self.pd_a, pd_b) for t in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2)
               for _ in range(self.WINDOWS // 2)]
        for o in mws + [mr, qp, pd_b]:
            o.close()
        self.cycles += 1

    def info(self):
        return {'cycles': self.cycles}

    def mark(self):
        self.marked = self.cycles

    def stats(self):
        return {'cycles_meanwhile': self.cycles - self.marked, 'cycles': self.cycles}

    def close(self):
        for o in (self.srq, self.cq, self.pd_a, self.ctx):
            o.close()
        return {}


class CnpSpray:
    """(d) A fake peer at FAKE4 (rroce-b's side of the link, not a peer of any
    QP) sends CNPs to rroce-a for the QP numbers after one the attacker
    just created there: the ones the victim's QPs get next."""
    WINDOW, BURST = 32, 256

    @staticmethod
    def as_root(params):
        import roce
        roce.enter_netns(NS_B)
        # Not port 4791, which rroce-b's own socket holds in this namespace.
        return roce.Peer(FAKE4, port=0)

    def __init__(self, params, peer):
        import roce
        from pyverbs.cq import CQ
        from pyverbs.device import Context
        from pyverbs.pd import PD
        self.roce, self.peer = roce, peer
        self.ctx = Context(name='rroce-a')
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 4)
        self.qp = ud_qp(self.ctx, self.pd, self.cq, 1)
        first = self.qp.qp_num + 1
        self.targets = [(first + i) & 0xffffff for i in range(self.WINDOW)]
        # Built once, ICRC included: the flood is as fast as sending.
        self.cnps = [(p + roce.icrc(p, FAKE4, A4, peer.port)) for p in
                     (roce.packet(roce.CNP, qpn, 0, bytes(16), becn=True) for qpn in self.targets)]
        self.sent = self.marked = 0

    def info(self):
        return {'qpns': f'{self.targets[0]:#x}..{self.targets[-1]:#x}'}

    def step(self):
        for _ in range(self.BURST):
            self.peer.send(self.cnps[self.sent % len(self.cnps)], A4, crc=False)
            self.sent += 1
        time.sleep(0.005)

    def mark(self):
        self.marked = self.sent

    def stats(self):
        return {'cnps_meanwhile': self.sent - self.marked, 'send_errors': self.peer.send_errors}

    def close(self):
        for o in (self.qp, self.cq, self.pd, self.ctx):
            o.close()
        self.peer.close()
        return {}


def attacker(kind, params, cmd_fd, out_fd):
    """The child: never returns."""
    def say(tag, **kw):
        os.write(out_fd, (json.dumps([tag, kw]) + '\n').encode())
    try:
        os.nice(19)
        held = kind.as_root(params)
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        att = kind(params, held)
        say('ready', **att.info())
        buf = b''
        stop = False
        while not stop:
            r, _, _ = select.select([cmd_fd], [], [], 0)
            if r:
                chunk = os.read(cmd_fd, 256)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b'\n')
                for l in lines:
                    if l == b'mark':
                        att.mark()
                        say('marked')
                    elif l == b'stop':
                        say('stats', **att.stats())
                        stop = True
            if not stop:
                att.step()
        t = time.monotonic()
        left = att.close()
        say('done', cleanup_s=round(time.monotonic() - t, 1), **left)
    except Exception as ex:
        say('error', what=repr(ex), where=traceback.format_exc().splitlines()[-3:])
    os._exit(0)


class Attack:
    def __init__(self, kind, params):
        cmd_r, self.cmd_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.cmd_w)
            os.close(self.out_r)
            attacker(kind, params, cmd_r, out_w)
        os.close(cmd_r)
        os.close(out_w)
        self.buf = b''
        self.exited = False

    def tell(self, what):
        try:
            os.write(self.cmd_w, what.encode() + b'\n')
        except OSError:
            pass

    def expect(self, tags, secs):
        """The next report, if it is one of `tags` within `secs`: (tag, figures);
        else ('timeout' or 'gone' or what came, ...)."""
        end = time.monotonic() + secs
        while b'\n' not in self.buf:
            r, _, _ = select.select([self.out_r], [], [], max(0, end - time.monotonic()))
            if not r:
                return 'timeout', {}
            chunk = os.read(self.out_r, 4096)
            if not chunk:
                return 'gone', {}
            self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        tag, figures = json.loads(line)
        return tag, figures

    def end(self, secs):
        """Waits for the child to exit (killed after `secs`); whether it exited by itself."""
        os.close(self.cmd_w)
        end = time.monotonic() + secs
        while time.monotonic() < end:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return True
            time.sleep(0.1)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        return False


def hw(dev, name):
    return int(open(f'/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}').read())


class DiskSampler:
    """The slow disk's reads in flight, every 0.1 s, in a thread."""
    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append(int(open('/sys/block/nullb0/inflight').read().split()[0]))
            except (OSError, ValueError, IndexError):
                pass
            time.sleep(0.1)

    def end(self):
        self.stop.set()
        self.t.join()
        return sum(1 for s in self.samples if s > 0), len(self.samples)


# --- alone ----------------------------------------------------------------------
t_start = time.monotonic()
alone = [perftest('ib_write_bw', BW_SIZE, BW_ITERS, 180) for _ in range(2)]
lat_alone = perftest('ib_write_lat', LAT_SIZE, LAT_ITERS, 180)
base = max(bw_of(r) for r in alone)
base_secs = max(r['secs'] for r in alone)
for i, r in enumerate(alone):
    print(f'# alone, run {i + 1}: ib_write_bw {BW_ITERS} x {BW_SIZE} B: {bw_of(r):.1f} MiB/s in {r["secs"]:.1f} s', flush=True)
if lat_alone['row']:
    print(f'# alone: ib_write_lat {LAT_ITERS} x {LAT_SIZE} B: typical {lat_alone["row"][2]:.1f} us, '
          f'max {lat_alone["row"][1]:.1f} us, in {lat_alone["secs"]:.1f} s', flush=True)
print(f'# baseline (the better of the two): {base:.1f} MiB/s', flush=True)
ok(f'alone: the victim\'s ib_write_bw ({BW_ITERS} x {BW_SIZE} B, memory on demand) completes, twice',
   all(r['done'] for r in alone) and base > 0)
for r in alone:
    if not r['done']:
        show_tail(r)
ok(f'alone: the victim\'s ib_write_lat ({LAT_ITERS} x {LAT_SIZE} B) completes', lat_alone['done'])
if not lat_alone['done']:
    show_tail(lat_alone)
# Under an attack the victim may be slower, not stalled: room for 10 times
# its alone time, and a minute at least.
LIMIT = int(max(60, 10 * base_secs + 10))

uverbs = []
try:
    import uverbs_raw
    uverbs = [uverbs_raw.find_uverbs(d) for d in ('rroce-a', 'rroce-b')]
    NO_NOBODY = next((f'{p} is {oct(os.stat(p).st_mode & 0o777)}, not usable by nobody'
                      for p in uverbs if os.stat(p).st_mode & 0o006 != 0o006), '')
except Exception as ex:
    NO_NOBODY = f'no uverbs device found: {ex!r}'

# The stalls of (b) last 3 s a receive: long enough for the victim's two
# runs under the flood at half their alone speed, and room.
RECVS = min(24, max(6, math.ceil((2 * (base_secs + lat_alone['secs']) + 8) / 3)))


def attack_in_effect_a(st, sampler, before, after):
    busy, n = sampler
    good = st.get('in_flight', 0) > 0 and busy >= n * 0.8 and n > 0
    return good, (f"the slow disk had reads in flight in {busy} of {n} samples; {st.get('reads_done_meanwhile')} "
                  f"READs completed meanwhile, {st.get('in_flight')} still waiting, slowest {st.get('slowest_read_s')} s, "
                  f"{st.get('errors')} failed")


def attack_in_effect_b(st, sampler, before, after):
    full = after['rcvd_queue_full'] - before['rcvd_queue_full']
    good = full > 0 and st.get('qps_still_stalled') == StalledFlood.NPD
    return good, (f"{st.get('datagrams_meanwhile')} datagrams sent meanwhile, rroce-b refused {full} "
                  f"(rcvd_queue_full); stalled QPs still waiting at the end: {st.get('qps_still_stalled')} of {StalledFlood.NPD}")


def attack_in_effect_c(st, sampler, before, after):
    n = st.get('cycles_meanwhile', 0)
    return n > 0, f"{n} churn cycles meanwhile ({st.get('cycles')} in all)"


def attack_in_effect_d(st, sampler, before, after):
    d = {k: after[k] - before[k] for k in before}
    arrived = sum(d.values())
    return st.get('cnps_meanwhile', 0) > 0 and arrived > 0, (
        f"{st.get('cnps_meanwhile')} CNPs sent meanwhile; rroce-a: rcvd_no_qp +{d['rcvd_no_qp']}, "
        f"rcvd_wrong_addr +{d['rcvd_wrong_addr']}, "
        f"rp_cnp_ignored +{d['rp_cnp_ignored']}, rp_cnp_handled +{d['rp_cnp_handled']}")


ATTACKS = [
    ('(a) READs waiting on faults of a slow disk', SlowReads, {}, DISK and not NO_NOBODY, SLOW_WHY or NO_NOBODY,
     attack_in_effect_a, ()),
    ('(b) UD QPs stalled on faults, flooded up to the user\'s cap', StalledFlood, {'recvs': RECVS},
     DISK and not NO_NOBODY, SLOW_WHY or NO_NOBODY, attack_in_effect_b, (('rroce-b', 'rcvd_queue_full'),)),
    ('(c) PD, QP on another PD\'s SRQ, on-demand region and window churn', Churn, {}, not NO_NOBODY, NO_NOBODY,
     attack_in_effect_c, ()),
    ('(d) CNPs from a fake peer sprayed at the QP numbers handed out next', CnpSpray, {}, not NO_NOBODY, NO_NOBODY,
     attack_in_effect_d, (('rroce-a', 'rcvd_no_qp'), ('rroce-a', 'rcvd_wrong_addr'), ('rroce-a', 'rp_cnp_ignored'), ('rroce-a', 'rp_cnp_handled'))),
]

summary = []
for name, kind, params, can, why, in_effect, counters in ATTACKS:
    what = ('the attack is in effect during the victim\'s run',
            f'the victim\'s ib_write_bw completes all {BW_ITERS} WRITEs and keeps at least {MIN_SHARE:.0%} of its alone bandwidth',
            f'the victim\'s ib_write_lat completes all {LAT_ITERS} round trips',
            'the attacker stops and frees everything')
    if not can:
        for w in what:
            c.skip(f'{name}: {w}', why)
        continue
    t0 = time.monotonic()
    att = Attack(kind, params)
    tag, info = att.expect(('ready',), 180)
    if tag != 'ready':
        ok(f'{name}: the attacker sets up (as user nobody)', False, f'{tag}: {info}')
        att.end(120)
        continue
    print(f'# {name}: attacker ready after {time.monotonic() - t0:.1f} s: {info}', flush=True)
    att.tell('mark')
    att.expect(('marked',), 60)
    before = {n: hw(d, n) for d, n in counters}
    sampler = DiskSampler() if kind is SlowReads else None
    bw, lat = victim(LIMIT)
    seen = sampler.end() if sampler else None
    after = {n: hw(d, n) for d, n in counters}
    att.tell('stop')
    tag, st = att.expect(('stats',), 120)
    t1 = time.monotonic()
    dtag, done = att.expect(('done',), 240)
    exited = att.end(60)
    cleanup = time.monotonic() - t1
    good, evidence = in_effect(st, seen, before, after) if tag == 'stats' else (False, f'{tag}: {st}')
    share = bw_of(bw) / base if base else 0.0
    print(f'# {name}: {evidence}', flush=True)
    print(f'# {name}: victim {bw_of(bw):.1f} MiB/s in {bw["secs"]:.1f} s = {share:.2f} of alone ({base:.1f} MiB/s); '
          + (f'latency typical {lat["row"][2]:.1f} us, max {lat["row"][1]:.1f} us, in {lat["secs"]:.1f} s'
             if lat['row'] else f'latency test: no result in {lat["secs"]:.1f} s'), flush=True)
    summary.append(f'{name[:3]} {share:.2f}')
    ok(f'{name}: {what[0]}', good, evidence)
    ok(f'{name}: {what[1]} ({bw_of(bw):.1f} of {base:.1f} MiB/s)', bw['done'] and share >= MIN_SHARE,
       f"{'completed' if bw['done'] else 'did not complete'}, {share:.2f} of alone")
    if not bw['done']:
        show_tail(bw)
    ok(f'{name}: {what[2]}', lat['done'])
    if not lat['done']:
        show_tail(lat)
    ok(f'{name}: {what[3]}', dtag == 'done' and exited, f'{dtag}: {done}, exited: {exited}')
    print(f'# {name}: attacker stopped and cleaned up in {cleanup:.1f} s ({done}); round took {time.monotonic() - t0:.1f} s',
          flush=True)
print(f'# victim under attack / alone: {", ".join(summary)}; all of it took {time.monotonic() - t_start:.0f} s', flush=True)
PY
r=$(dmesg | sed -n "/$mark/,\$p" | kernel_reports "$STALL_REPORTS")
check "no kernel warning, stall report, BUG or Oops meanwhile" test -z "$r"
[ -z "$r" ] || printf '%s\n' "$r" | head -20 | sed 's/^/# | /'
topo_devices_down
check "module unloads (nothing held)" modprobe -r rroce
if [ -n "$SLOW_DISK" ]; then
	check "the slow disk unloads (nothing of it held)" modprobe -r null_blk
fi
finish
