#!/usr/bin/env python3
"""Packet fuzzer aimed at live QPs of rroce-b.

A fake RoCE peer in namespace rroce-a (UDP 4791 on 198.18.0.1, plus
198.18.0.3 and the IPv6 address fd72:6f63:6501::1) sends packets with a
correct ICRC to real QPs of rroce-b: RC QPs connected to it over IPv4 and
IPv6, a UC QP and a UD QP. The packets look valid (right QPNs, PSNs near the
expected one, real and forged rkeys and addresses) and are mutated field by
field: every opcode 0-255 and broken opcode sequences, truncated and
oversized headers and payloads, RETH lengths 0..2^32-1, duplicate and future
PSNs, READ responses and ACKs with and without a request, CNPs, packets from
a third address, wrong P_Key/TVer, UD packets with a wrong Q_Key, bad ICRCs.
The fuzzed QPs also post requests to the fake peer, so forged responses meet
a requester that waits for them.

Meanwhile a healthy RC pair on the same device (local delivery between two
QPs of rroce-b) keeps moving data with a byte-for-byte check. At the end:
the healthy pair's data is verified, the fuzzed QPs are in a defined state
and work again after a reset, no memory outside registered windows and
posted SGEs changed, every byte that changed in a remote window lay in the
RETH range of a WRITE sent to it (a payload running past its RETH length
shows up here), and the device counters moved. Kernel reports are checked
by test_fuzz.sh. One KTAP result line per check (verbs.Checks), exit
status 0 when all pass.

Needs the standard topology (selftests/lib.sh topo_up) with rroce-b on
veth-b, no rroce device in rroce-a, 198.18.0.3/24 on veth-a; run as root.
Usage: fuzz_packets.py [--packets N] [--seconds S] [--seed X]"""
import argparse
import ctypes
import mmap
import os
import random
import struct
import sys
import time

import roce
from roce import Peer, packet, RC, UC, UD, PSN_MASK

PEER4, DEV4, THIRD4 = '198.18.0.1', '198.18.0.2', '198.18.0.3'
PEER6, DEV6 = 'fd72:6f63:6501::1', 'fd72:6f63:6501::2'
DEV = 'rroce-b'
MTU = 1024
QKEY = 0x11111111
CANARY = 0xcc
WIN = 64 << 10           # remote window of each fuzzed QP
RECV_SLOT, RECV_OFF, RECV_LEN, RECV_SLOTS = 2048, 512, 1024, 16
READ_OFF, READ_MAX = 16 << 10, 8 << 10  # where the fuzzed QPs' own READs land in their sink
SEND_WR_ID = 100         # wr_ids of the fuzzed QPs' own requests; receives use their slot number
MAX_UDP = 1400           # stays under the veth MTU with IPv6 and DF

ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
ap.add_argument('--packets', type=int, default=20000, help='stop after this many packets (default 20000)')
ap.add_argument('--seconds', type=float, default=150, help='stop after this many seconds (default 150)')
ap.add_argument('--seed', type=int, default=None, help='RNG seed (default: from the clock; printed)')
args = ap.parse_args()
seed = args.seed if args.seed is not None else int(time.time() * 1000) % (1 << 32)
print(f'# fuzz seed {seed} (repeat with --seed {seed}), bounds: {args.packets} packets, {args.seconds:.0f} s', flush=True)
rng = random.Random(seed)

roce.enter_netns('rroce-a')
peer4, third, peer6 = Peer(PEER4), Peer(THIRD4), Peer(PEER6)
roce.enter_netns('rroce-b')

from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.wr import RecvWR, SendWR, SGE
from pyverbs.pyverbs_error import PyverbsError
import pyverbs.enums as e
from verbs import Checks, connect_rc

checks = Checks('test_fuzz')
failed = []


def check(what, cond, detail=''):
    checks.ok(what, cond, detail)
    if not cond:
        failed.append(what)


LW, RW, RR, RA = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ, e.IBV_ACCESS_REMOTE_ATOMIC
ctx = Context(name=DEV)
pd = PD(ctx)
SGID4, SGID6 = roce.gid_index(ctx, DEV4), roce.gid_index(ctx, DEV6)


def counters():
    """The device's hw_counters by name (none if the device is gone)."""
    d = f'/sys/class/infiniband/{DEV}/ports/1/hw_counters'
    out = {}
    for n in sorted(os.listdir(d) if os.path.isdir(d) else ()):
        try:
            out[n] = int(open(f'{d}/{n}').read())
        except (OSError, ValueError):
            pass
    return out


class Guarded:
    """An MR over the middle of an anonymous mapping whose other bytes (a
    guard page on each side, and whatever the caller declares outside its
    windows) hold a canary: a write outside the registered range or the
    posted SGEs shows up as a changed canary."""

    def __init__(self, size, access, guard=4096):
        self.size, self.guard = size, guard
        self.map = mmap.mmap(-1, size + 2 * guard)
        self.map.write(bytes([CANARY]) * (size + 2 * guard))
        self._cbuf = ctypes.c_char.from_buffer(self.map)  # keeps the mapping's address valid
        base = ctypes.addressof(self._cbuf)
        try:
            self.mr = MR(pd, size, access, address=base + guard)
        except PyverbsError:
            self.mr = MR(pd, size, access & ~RA, address=base + guard)
        self.buf, self.rkey, self.lkey = self.mr.buf, self.mr.rkey, self.mr.lkey

    def outside(self, windows=()):
        """Offsets (relative to the MR) of changed canary bytes outside the MR
        and outside `windows` [(start, end)] inside it: (count, first)."""
        data = self.map[:]
        keep = bytearray(len(data))
        for s, t in windows:
            keep[self.guard + s:self.guard + t] = b'\1' * (t - s)
        bad = [i for i, b in enumerate(data) if b != CANARY and not keep[i]]
        return len(bad), (bad[0] - self.guard if bad else None)


def to_rts(qp, kind, peer_qpn, addr, psn):
    """RESET -> RTS for a fuzzed QP of `kind` (rc, uc, ud) talking to the fake peer."""
    if kind == 'rc':
        connect_rc(qp, peer_qpn, roce.gid(addr), LW | RW | RR | RA, psn=psn, timeout=17, retry_cnt=7, rnr_retry=7,
                   rd_atomic=4, sgid_index=SGID6 if ':' in addr else SGID4)
        return
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index, a.port_num = 0, 1
    mask = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
    if kind == 'uc':
        a.qp_access_flags = LW | RW
        mask |= e.IBV_QP_ACCESS_FLAGS
    else:
        a.qkey = QKEY
        mask |= e.IBV_QP_QKEY
    qp.modify(a, mask)
    r = QPAttr(qp_state=e.IBV_QPS_RTR)
    mask = e.IBV_QP_STATE
    if kind == 'uc':
        r.path_mtu, r.dest_qp_num, r.rq_psn = e.IBV_MTU_1024, peer_qpn, psn
        r.ah_attr = AHAttr(gr=GlobalRoute(dgid=roce.gid(addr), sgid_index=SGID4), is_global=1, port_num=1)
        mask |= e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN
    qp.modify(r, mask)
    t = QPAttr(qp_state=e.IBV_QPS_RTS)
    t.sq_psn = psn
    qp.modify(t, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)


class Target:
    """A fuzzed QP, its memory, and what the fuzzer knows of its PSNs. A
    'requester' target is mostly sent responses, so its own requests live
    long enough to meet forged ones."""

    def __init__(self, kind, peer_qpn, addr, role='both'):
        self.kind, self.peer_qpn, self.addr, self.role = kind, peer_qpn, addr, role
        self.sock = peer6 if ':' in addr else peer4
        self.dst = DEV6 if ':' in addr else DEV4
        self.cq = CQ(ctx, 1024)
        qpt = {'rc': e.IBV_QPT_RC, 'uc': e.IBV_QPT_UC, 'ud': e.IBV_QPT_UD}[kind]
        self.qp = QP(pd, QPInitAttr(qp_type=qpt, scq=self.cq, rcq=self.cq,
                                    cap=QPCap(max_send_wr=16, max_recv_wr=RECV_SLOTS, max_send_sge=1, max_recv_sge=1)))
        self.qpn = self.qp.qp_num
        self.win = Guarded(WIN, LW | RW | RR | RA)
        self.win.map[self.win.guard:self.win.guard + WIN] = rng.randbytes(WIN)
        self.recv = Guarded(RECV_SLOT * RECV_SLOTS, LW)
        self.sink = Guarded(64 << 10, LW)
        self.revivals = 0
        self.reset(first=True)

    def reset(self, first=False):
        """(Re)connects with a fresh PSN and reposts every receive. Fuzz
        packets keep arriving meanwhile: one that is fatal in RTR moves the QP
        to the error state before it reaches RTS, and the move to RTS fails;
        then it starts over (a few times, then the next round retries)."""
        for attempt in range(4):
            try:
                if not first or attempt:
                    self.qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
                self.drain_cq()
                self.epsn = rng.getrandbits(24)
                to_rts(self.qp, self.kind, self.peer_qpn, self.addr, self.epsn)
                break
            except PyverbsError:
                stats.reset_races += 1
        if not first:
            self.revivals += 1
        self.req = []          # requests its requester sent: (first psn, psns, opcode)
        self.outstanding = 0
        for i in range(RECV_SLOTS):
            self.qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(self.recv.buf + i * RECV_SLOT + RECV_OFF, RECV_LEN, self.recv.lkey)]))

    def drain_cq(self):
        n = 0
        for _ in range(64):
            k, wcs = self.cq.poll(32)
            for w in wcs:
                stats.wc[int(w.status)] = stats.wc.get(int(w.status), 0) + 1
                if w.wr_id >= SEND_WR_ID:  # its own request (flushed ones carry no valid opcode)
                    self.outstanding = max(0, self.outstanding - 1)
            n += k
            if k == 0:
                break
        return n

    def state(self):
        return self.qp.query(e.IBV_QP_STATE)[0].qp_state

    def recv_windows(self):
        return [(i * RECV_SLOT + RECV_OFF, i * RECV_SLOT + RECV_OFF + RECV_LEN) for i in range(RECV_SLOTS)]


class Stats:
    def __init__(self):
        self.sent = 0
        self.by_kind = {}
        self.resp = {}
        self.wc = {}
        self.posted = 0
        self.reset_races = 0


stats = Stats()
targets = [Target('rc', 0x200, PEER4), Target('rc', 0x201, PEER4), Target('rc', 0x202, PEER4, 'requester'),
           Target('uc', 0x210, PEER4), Target('ud', 0x220, PEER4)]
if SGID6 is not None:
    targets.append(Target('rc', 0x230, PEER6))
by_peer_qpn = {t.peer_qpn: t for t in targets}


class Healthy:
    """Two RC QPs of rroce-b connected to each other (local delivery) moving
    data with a byte-for-byte check, one operation at a time, advanced by
    step() between fuzz batches."""
    SIZE = 256 << 10

    def __init__(self):
        self.cq = CQ(ctx, 64)
        self.mrs = [MR(pd, self.SIZE, LW | RW | RR) for _ in range(2)]
        self.qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq,
                                      cap=QPCap(max_send_wr=8, max_recv_wr=8))) for _ in range(2)]
        g, psn = roce.gid(DEV4), rng.getrandbits(24)
        for me, other in ((self.qps[0], self.qps[1]), (self.qps[1], self.qps[0])):
            # A 1 s ACK timeout: under emulation and fuzz load, 67 ms without progress is not a loss.
            connect_rc(me, other.qp_num, g, LW | RW | RR, psn=psn, sgid_index=SGID4, timeout=18)
        self.op = None
        self.done = self.bytes = self.errors = 0
        self.notes = []

    def qpns(self):
        return {q.qp_num for q in self.qps}

    def start(self):
        a, b = self.mrs
        kind = rng.choice(('write', 'read', 'send'))
        size = rng.choice((1, 3, 1024, 1025, 4096)) if rng.random() < 0.3 else rng.randrange(1, 64 << 10)
        so, do = rng.randrange(0, self.SIZE - size), rng.randrange(0, self.SIZE - size)
        data = rng.randbytes(size)
        if kind == 'read':
            b.write(data, size, so)
            wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(a.buf + do, size, a.lkey)])
            wr.set_wr_rdma(b.rkey, b.buf + so)
            check_at = (a, do)
            want = 1
        else:
            a.write(data, size, so)
            if kind == 'send':
                self.qps[1].post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(b.buf + do, size, b.lkey)]))
                wr = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a.buf + so, size, a.lkey)])
                want = 2
            else:
                wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(a.buf + so, size, a.lkey)])
                wr.set_wr_rdma(b.rkey, b.buf + do)
                want = 1
            check_at = (b, do)
        self.qps[0].post_send(wr)
        self.op = (kind, size, data, check_at, want, [], time.time() + 60)

    def step(self):
        """Starts an operation or checks the one in flight; returns False once it failed."""
        if self.op is None:
            self.start()
            return True
        kind, size, data, (mr, off), want, got, deadline = self.op
        _, wcs = self.cq.poll(4)
        got += wcs
        if len(got) < want:
            if time.time() > deadline:
                self.fail(f'{kind} of {size} bytes: no completion within 60 s')
                return False
            return True
        bad = [w.status for w in got if w.status != e.IBV_WC_SUCCESS]
        if bad:
            self.fail(f'{kind} of {size} bytes completed with status {bad}')
            return False
        if mr.read(size, off) != data:
            self.fail(f'{kind} of {size} bytes: data mismatch')
            return False
        self.done += 1
        self.bytes += size
        self.op = None
        return True

    def fail(self, what):
        self.errors += 1
        self.notes.append(what)
        self.op = None

    def finish(self, secs=90):
        """Completes the operation in flight, then three more; True if all verified."""
        end = time.time() + secs
        for _ in range(4):
            if self.op is None:
                self.start()
            while self.op is not None and time.time() < end:
                if not self.step():
                    return False
                time.sleep(0.002)
            if self.op is not None:
                self.fail('final operation did not complete')
                return False
        return self.errors == 0


healthy = Healthy()
HEALTHY_QPNS = healthy.qpns()

# --- packet generation -------------------------------------------------------------

REQ_OPS = {
    'rc': [RC | o for o in (roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST, roce.SEND_LAST_IMM, roce.SEND_ONLY,
                            roce.SEND_ONLY_IMM, roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST,
                            roce.WRITE_LAST_IMM, roce.WRITE_ONLY, roce.WRITE_ONLY_IMM, roce.READ_REQUEST,
                            roce.COMPARE_SWAP, roce.FETCH_ADD, roce.SEND_LAST_INV, roce.SEND_ONLY_INV,
                            roce.FLUSH, roce.ATOMIC_WRITE)],
    'uc': [UC | o for o in range(roce.SEND_FIRST, roce.WRITE_ONLY_IMM + 1)],
    'ud': [UD | roce.SEND_ONLY, UD | roce.SEND_ONLY_IMM],
}
RESP_OPS = [RC | o for o in (roce.READ_RESPONSE_FIRST, roce.READ_RESPONSE_MIDDLE, roce.READ_RESPONSE_LAST,
                             roce.READ_RESPONSE_ONLY, roce.ACKNOWLEDGE, roce.ATOMIC_ACKNOWLEDGE)]
# Correct multi-packet messages, so the responder's state machine goes deep too.
MESSAGES = [(roce.SEND_FIRST, roce.SEND_MIDDLE, roce.SEND_LAST), (roce.SEND_FIRST, roce.SEND_LAST_IMM),
            (roce.WRITE_FIRST, roce.WRITE_MIDDLE, roce.WRITE_LAST), (roce.WRITE_FIRST, roce.WRITE_LAST_IMM),
            (roce.SEND_FIRST, roce.SEND_LAST_INV)]


def position(opcode):
    """'first', 'middle', 'last', 'only' for payload-carrying request opcodes."""
    o = opcode & 0x1f
    if o in (roce.SEND_FIRST, roce.WRITE_FIRST):
        return 'first'
    if o in (roce.SEND_MIDDLE, roce.WRITE_MIDDLE):
        return 'middle'
    if o in (roce.SEND_LAST, roce.SEND_LAST_IMM, roce.WRITE_LAST, roce.WRITE_LAST_IMM, roce.SEND_LAST_INV):
        return 'last'
    return 'only'


def payload_len(opcode):
    layout = roce.op_layout(opcode)
    if not layout or not layout[1]:
        return 0 if rng.random() < 0.95 else rng.randrange(1, 16)  # payload where none belongs
    pos, c = position(opcode), rng.random()
    if c < 0.1:  # wrong for its position
        return rng.choice((0, 1, MTU - 1, MTU + 4, MAX_UDP - 80))
    if pos in ('first', 'middle'):
        return MTU
    if pos == 'last':
        return rng.randrange(1, MTU + 1)
    return rng.choice((0, 1, 8, 64, MTU, rng.randrange(0, MTU + 1)))


def pick_rkey(t):
    c = rng.random()
    if c < 0.7:
        return t.win.rkey
    if c < 0.8:
        return rng.choice((t.recv.rkey, t.sink.rkey, rng.choice(targets).win.rkey))  # no remote access, or another QP's
    if c < 0.9:
        return (t.win.rkey + rng.choice((1, -1, 0x100, -0x100))) & 0xffffffff
    return roce.pick32(rng)


def pick_va(t, length):
    c = rng.random()
    base = t.win.buf
    if c < 0.6:
        return base + rng.randrange(0, max(1, WIN - min(length, WIN)) + 1)
    if c < 0.8:
        return base + rng.choice((-8, -1, WIN - 1, WIN, WIN - 8, WIN + 4096, -4096))
    return roce.pick64(rng, (base,))


def pick_len(n):
    c = rng.random()
    if c < 0.5:
        return n
    if c < 0.8:
        return rng.choice((0, 1, 64, MTU, 2 * MTU, 3000, WIN, WIN + 1, 1 << 31, (1 << 31) - 1, 0xffffffff))
    return roce.pick32(rng, (n, WIN))


def request(t, opcode=None, psn=None):
    """A valid-looking request for `t`'s responder."""
    if opcode is None:
        opcode = rng.choice(REQ_OPS[t.kind])
    n = payload_len(opcode)
    psn = roce.psn_near(rng, t.epsn) if psn is None else psn
    length = pick_len(n)
    if (opcode & 0x1f) == roce.READ_REQUEST:
        length = rng.choice((0, 1, 64, MTU, 4 * MTU, WIN, rng.randrange(0, WIN))) if rng.random() < 0.8 else length
    va = pick_va(t, length)
    atomic_va = (va & ~7) if rng.random() < 0.8 else va
    return packet(opcode, t.qpn, psn, rng.randbytes(n), reth_=(va, pick_rkey(t), length),
                  atmeth_=(atomic_va, pick_rkey(t), rng.getrandbits(64), rng.getrandbits(64)),
                  deth_=(QKEY if rng.random() < 0.7 else roce.pick32(rng, (QKEY,)), rng.getrandbits(24)),
                  aeth_=(rng.choice((roce.SYN_ACK, roce.NAK_PSN_SEQ, rng.getrandbits(8))), rng.getrandbits(24)),
                  imm=rng.getrandbits(32), ieth=pick_rkey(t), ack_req=rng.random() < 0.7, se=rng.random() < 0.2,
                  feth_=(rng.choice((1, 1, 2, 3, rng.getrandbits(4))), rng.choice((0, 1, rng.getrandbits(2)))))


def responses(t):
    """READ responses, ACKs and NAKs for `t`'s requester: for what it asked
    (learned from its requests) or for nothing."""
    out = []
    if t.req and rng.random() < 0.7:
        first, psns, opcode = rng.choice(t.req)
        if (opcode & 0x1f) == roce.READ_REQUEST and rng.random() < 0.8:
            # The READ's responses: correct, or with wrong sizes, count or PSNs.
            ops = ([roce.READ_RESPONSE_ONLY] if psns == 1 else
                   [roce.READ_RESPONSE_FIRST] + [roce.READ_RESPONSE_MIDDLE] * (psns - 2) + [roce.READ_RESPONSE_LAST])
            if rng.random() < 0.3:
                ops = [rng.choice(RESP_OPS) & 0x1f for _ in range(rng.randrange(1, 5))]
            for i, o in enumerate(ops[:8]):
                n = MTU if o in (roce.READ_RESPONSE_FIRST, roce.READ_RESPONSE_MIDDLE) else rng.randrange(0, MTU + 1)
                if rng.random() < 0.1:
                    n = rng.choice((0, MTU + 4, MAX_UDP - 60))
                psn = (first + i) & PSN_MASK if rng.random() < 0.85 else roce.psn_near(rng, first + i)
                out.append(packet(RC | o, t.qpn, psn, rng.randbytes(n), aeth_=(roce.SYN_ACK, rng.getrandbits(24))))
            return out
        psn = roce.psn_near(rng, (first + psns - 1) & PSN_MASK, 2)
    else:
        psn = rng.getrandbits(24) if rng.random() < 0.3 else roce.psn_near(rng, t.epsn, 64)
    opcode = rng.choice(RESP_OPS)
    syndrome = rng.choice((roce.SYN_ACK, 0x00, 0x20 | rng.randrange(32), 0x60, 0x61, 0x62, 0x63, 0x64,
                           0x60 | rng.randrange(32), 0x40 | rng.randrange(32), 0x80 | rng.randrange(128)))
    n = rng.randrange(0, MTU + 1) if roce.op_layout(opcode)[1] else 0
    out.append(packet(opcode, t.qpn, psn, rng.randbytes(n), aeth_=(syndrome, rng.getrandbits(24)),
                      atmack=rng.getrandbits(64)))
    return out


def mutate(p):
    """A packet with one kind of damage; its ICRC is computed afterwards, so it
    passes the ICRC check and reaches the parser and the transport."""
    c = rng.randrange(10)
    if c == 0:
        return roce.truncate(p, rng, 1)
    if c == 1:
        return roce.extend(p, rng, 200)
    if c == 2:
        return roce.flip_bits(p[:roce.BTH_LEN + 32], rng, rng.randrange(1, 4)) + p[roce.BTH_LEN + 32:]
    if c == 3:
        return roce.set_bytes(p, rng, rng.randrange(1, 4))
    b = bytearray(p)
    if c == 4:
        b[1] = (b[1] & 0xcf) | rng.randrange(4) << 4      # pad count
    elif c == 5:
        b[1] = (b[1] & 0xf0) | rng.randrange(1, 16)       # transport version
    elif c == 6:
        b[2:4] = struct.pack('!H', rng.choice((0, 0x7fff, 0x8000, 0xfffe, rng.getrandbits(16))))  # P_Key
    elif c == 7:
        b[4] |= rng.getrandbits(8)                        # FECN/BECN and resv8a
        b[8] |= rng.getrandbits(7)                        # resv7
    elif c == 8:
        b[1] ^= 0xc0                                      # SE, MigReq
    else:
        b[5:8] = struct.pack('!I', rng.getrandbits(24))[1:]  # destination QP
    return bytes(b)


op_cycle = 0


def clean(t):
    """A request the responder should accept: the expected PSN, the real
    rkey, a range inside the window; sometimes a RETH length that does not
    match the payload. Advances the expected PSN, as the device will."""
    opcode = rng.choice([o for o in REQ_OPS[t.kind] if o & 0x1f in (roce.SEND_ONLY, roce.SEND_ONLY_IMM, roce.WRITE_ONLY,
                                                                   roce.WRITE_ONLY_IMM, roce.READ_REQUEST)])
    n = 0 if opcode & 0x1f == roce.READ_REQUEST else rng.randrange(0, MTU + 1)
    length = n if opcode & 0x1f != roce.READ_REQUEST else rng.randrange(0, 8 * MTU)
    va = t.win.buf + rng.randrange(0, WIN - length + 1)
    if rng.random() < 0.2:
        length = rng.choice((0, rng.randrange(0, n + 1), n + rng.randrange(1, 4096)))  # a RETH that lies
    p = packet(opcode, t.qpn, t.epsn, rng.randbytes(n), reth_=(va, t.win.rkey, length), deth_=(QKEY, rng.getrandbits(24)),
               imm=rng.getrandbits(32), ack_req=rng.random() < 0.5)
    t.epsn = (t.epsn + (max(1, -(-length // MTU)) if opcode & 0x1f == roce.READ_REQUEST else 1)) & PSN_MASK
    return [(t.sock, p, t.dst, True)]


def message(t):
    """A whole multi-packet SEND or WRITE at the expected PSNs: FIRST, MIDDLEs,
    LAST, with the real rkey and, mostly, the right RETH length."""
    ops = [(UC if t.kind == 'uc' else RC) | o for o in rng.choice(MESSAGES)]
    ops = [o for o in ops if roce.is_known(o)]
    if len(ops) == 3:
        ops[1:2] = ops[1:2] * rng.randrange(0, 4)
    sizes = [MTU] * (len(ops) - 1) + [rng.randrange(1, MTU + 1)]
    total = sum(sizes)
    length = total if rng.random() < 0.7 else rng.choice((0, rng.randrange(0, total), total + rng.randrange(1, 4096)))
    va = t.win.buf + rng.randrange(0, WIN - total + 1)
    out = []
    for i, (o, n) in enumerate(zip(ops, sizes)):
        out.append((t.sock, packet(o, t.qpn, (t.epsn + i) & PSN_MASK, rng.randbytes(n), reth_=(va, t.win.rkey, length),
                                   imm=rng.getrandbits(32), ieth=t.win.rkey, ack_req=i == len(ops) - 1), t.dst, True))
    t.epsn = (t.epsn + len(ops)) & PSN_MASK
    return out


def case_request(t):
    if rng.random() < 0.5:
        return clean(t)
    return [(t.sock, request(t), t.dst, True)]


def case_sequence(t):
    """A run of consecutive PSNs: a correct message, or opcodes in a random
    order (FIRST without LAST, LAST without FIRST, families mixed, ...)."""
    if t.kind != 'ud' and rng.random() < 0.5:
        return message(t)
    base = t.epsn if rng.random() < 0.8 else roce.psn_near(rng, t.epsn)
    ops = [rng.choice(REQ_OPS[t.kind]) for _ in range(rng.randrange(2, 6))]
    return [(t.sock, request(t, o, (base + i) & PSN_MASK), t.dst, True) for i, o in enumerate(ops)]


def case_opcode(t):
    """Every opcode value 0-255 in turn, with the headers it would carry (or junk)."""
    global op_cycle
    op_cycle = (op_cycle + 1) % 256
    if roce.is_known(op_cycle):
        p = request(t, op_cycle)
    else:
        p = packet(op_cycle, t.qpn, roce.psn_near(rng, t.epsn), rng.randbytes(rng.randrange(0, 64)), pad=0)
    return [(t.sock, p, t.dst, True)]


def case_mutated(t):
    return [(t.sock, mutate(request(t)), t.dst, True)]


def case_response(t):
    return [(t.sock, p, t.dst, True) for p in responses(t)]


def case_cnp(t):
    """RoCEv2 CNP: BECN set and 16 reserved bytes, sometimes other lengths or QPs."""
    n = 16 if rng.random() < 0.7 else rng.randrange(0, 64)
    q = t.qpn if rng.random() < 0.7 else rng.getrandbits(24)
    return [(t.sock, packet(roce.CNP, q, rng.getrandbits(24), bytes(n), becn=True, pad=0), t.dst, True)]


def case_third(t):
    """A request from an address that is not the QP's peer."""
    if t.addr == PEER6:
        return [(rng.choice((peer4, third)), request(t), DEV4, True)]
    s, d = rng.choice(((third, DEV4), (peer6, DEV6)))
    return [(s, request(t), d, True)]


def case_qpn(t):
    """A request for a QP number that is not this QP's: none, a neighbour, QP0/QP1."""
    p = bytearray(request(t))
    q = rng.choice((0, 1, 2, 0xffffff, t.qpn + 1, t.qpn - 1, rng.getrandbits(24))) & PSN_MASK
    p[5:8] = struct.pack('!I', q)[1:]
    return [(t.sock, bytes(p), t.dst, True)]


def case_bad_icrc(t):
    """A wrong or missing ICRC, or junk: dropped before parsing."""
    p = request(t)
    k = rng.randrange(3)
    if k == 2:
        return [(t.sock, rng.randbytes(rng.randrange(0, 80)), t.dst, False)]
    crc = b'\0\0\0\0' if k == 0 else roce.flip_bits(roce.icrc(p, t.sock.addr, t.dst), rng)
    return [(t.sock, p, t.dst, crc)]


def case_atomic(t):
    return [(t.sock, request(t, RC | rng.choice((roce.COMPARE_SWAP, roce.FETCH_ADD))), t.dst, True)]


def case_transport(t):
    """The wrong transport for the QP: UD to RC/UC, RC/UC to UD, UC to RC."""
    other = rng.choice([k for k in REQ_OPS if k != t.kind])
    return [(t.sock, request(t, rng.choice(REQ_OPS[other])), t.dst, True)]


# (weight, case, QP kinds it applies to)
CASES = [(25, case_request, 'rc uc ud'), (12, case_sequence, 'rc uc ud'), (8, case_opcode, 'rc uc ud'),
         (15, case_mutated, 'rc uc ud'), (12, case_response, 'rc'), (3, case_cnp, 'rc uc ud'),
         (6, case_third, 'rc uc ud'), (6, case_qpn, 'rc uc ud'), (3, case_bad_icrc, 'rc uc ud'),
         (5, case_atomic, 'rc'), (5, case_transport, 'rc uc ud')]


def generate():
    """One fuzz case for a random fuzzed QP: (name, [(sock, udp_payload, dst, crc)])."""
    t = rng.choice(targets)
    if t.role == 'requester' and rng.random() < 0.8:
        return 'response', case_response(t)
    fits = [(w, f) for w, f, kinds in CASES if t.kind in kinds.split()]
    f = rng.choices([f for _, f in fits], [w for w, _ in fits])[0]
    return f.__name__[5:], f(t)


def learn(p):
    """Updates the fuzzer's view of a QP from what it sent to the fake peer."""
    t = by_peer_qpn.get(p.qpn)
    name = p.name if not p.aeth else f'{p.name}:{roce.syndrome_name(p.syndrome)}'
    stats.resp[name] = stats.resp.get(name, 0) + 1
    if t is None:
        return
    if p.opcode & 0x1f <= roce.READ_REQUEST or p.opcode & 0x1f in (roce.COMPARE_SWAP, roce.FETCH_ADD):
        # A request of its requester: the PSNs a response may name.
        psns = 1
        if p.reth and (p.opcode & 0x1f) == roce.READ_REQUEST:
            psns = max(1, -(-p.reth[2] // MTU))
        t.req = (t.req + [(p.psn, psns, p.opcode)])[-8:]
    elif p.opcode == RC | roce.ACKNOWLEDGE:
        # Its responder: an ACK names the last PSN done, a sequence NAK the expected one.
        if p.syndrome == roce.NAK_PSN_SEQ:
            t.epsn = p.psn
        elif p.syndrome & 0x60 == 0:
            t.epsn = (p.psn + 1) & PSN_MASK
    elif p.opcode & 0x1f in (roce.READ_RESPONSE_LAST, roce.READ_RESPONSE_ONLY):
        t.epsn = (p.psn + 1) & PSN_MASK


def post_request(t):
    """Lets a fuzzed RC/UC QP send something to the fake peer (which answers only by fuzz)."""
    if t.kind == 'ud' or t.outstanding >= 4:
        return
    kind = rng.choice(('read', 'write', 'send')) if t.kind == 'rc' else rng.choice(('write', 'send'))
    size = rng.randrange(1, READ_MAX + 1)
    if kind == 'read':
        wr = SendWR(wr_id=SEND_WR_ID, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(t.sink.buf + READ_OFF, size, t.sink.lkey)])
        wr.set_wr_rdma(0x1234, 0x10000)
    else:
        op = e.IBV_WR_RDMA_WRITE if kind == 'write' else e.IBV_WR_SEND
        wr = SendWR(wr_id=SEND_WR_ID + 1, opcode=op, num_sge=1, sg=[SGE(t.sink.buf, min(size, MTU * 2), t.sink.lkey)])
        if kind == 'write':
            wr.set_wr_rdma(0x1234, 0x10000)
    try:
        t.qp.post_send(wr)
        t.outstanding += 1
        stats.posted += 1
    except PyverbsError:
        pass


class WriteOracle:
    """Checks that WRITE payloads stay inside the range their RETH names.
    Every packet sent is parsed as the device will see it; the RETH (or
    atomic ETH) ranges that name a fuzzed QP's window are marked allowed.
    At each checkpoint every window byte that changed since the previous one
    must lie in a range marked during the last EPOCHS checkpoints (packets
    still queued in the device land later) or in one of the last WRITE_FIRST
    ranges sent to a QP (its MIDDLE and LAST packets may come much later)."""
    EPOCHS = 4
    NONZERO = bytes([0] + [1] * 255)  # bytes.translate: changed byte -> 1

    def __init__(self):
        self.wins = {t.win.rkey: t.win for t in targets}
        for w in self.wins.values():
            w.snap = w.map[w.guard:w.guard + WIN]
            w.masks = [bytearray(WIN)]
        self.firsts = {}     # destination QPN -> recent (window, start, end) of WRITE_FIRSTs
        self.violations = []
        self.checked = 0

    def _range(self, va, rkey, length):
        w = self.wins.get(rkey)
        if w is None:
            return None
        a, b = max(0, va - w.buf), min(WIN, va - w.buf + length)
        return (w, a, b) if a < b else None

    def note(self, udp_payload):
        """Called for every packet sent with a correct ICRC."""
        p = roce.parse(udp_payload + b'\0\0\0\0')
        if p is None:
            return
        r = None
        if p.reth:
            r = self._range(p.reth[0], p.reth[1], p.reth[2])
        elif p.atmeth:
            r = self._range(p.atmeth[0], p.atmeth[1], 8)
        if r is None:
            return
        w, a, b = r
        w.masks[-1][a:b] = b'\1' * (b - a)
        if p.opcode & 0x1f == roce.WRITE_FIRST:
            self.firsts[p.qpn] = (self.firsts.get(p.qpn, []) + [r])[-8:]

    def check(self):
        """Compares every window with its last snapshot; starts a new epoch."""
        self.checked += 1
        for rkey, w in self.wins.items():
            cur = w.map[w.guard:w.guard + WIN]
            if cur != w.snap:
                x = int.from_bytes(cur, 'big') ^ int.from_bytes(w.snap, 'big')
                changed = int.from_bytes(x.to_bytes(WIN, 'big').translate(self.NONZERO), 'big')
                allowed = 0
                for m in w.masks:
                    allowed |= int.from_bytes(m, 'big')
                extra = bytearray(WIN)
                for ranges in self.firsts.values():
                    for fw, a, b in ranges:
                        if fw is w:
                            extra[a:b] = b'\1' * (b - a)
                allowed |= int.from_bytes(extra, 'big')
                bad = changed & ~allowed
                if bad:
                    n = bin(bad).count('1')
                    first = WIN - 1 - (bad.bit_length() - 1) // 8
                    self.violations.append(f'window rkey {rkey:#x}: {n} bytes outside every RETH range, first at offset {first}')
                w.snap = cur
            w.masks = (w.masks + [bytearray(WIN)])[-self.EPOCHS:]


oracle = WriteOracle()

# --- the run ------------------------------------------------------------------------

before = counters()
start = time.time()
healthy_ok = True
batch = 0
while stats.sent < args.packets and time.time() - start < args.seconds:
    batch += 1
    for _ in range(32):
        name, pkts = generate()
        stats.by_kind[name] = stats.by_kind.get(name, 0) + 1
        for sock, p, dst, crc in pkts:
            if len(p) > MAX_UDP:
                p = p[:MAX_UDP]
            if len(p) >= 8 and int.from_bytes(p[5:8], 'big') in HEALTHY_QPNS:
                # Mutations may land on the healthy pair's QPNs: it is the control, keep it out.
                p = p[:5] + b'\xff\xff\xf0' + p[8:]
            if crc is True:
                oracle.note(p)
            sock.send(p, dst, crc)
            stats.sent += 1
    for s in (peer4, peer6, third):
        for _ in range(256):
            r = s.recv(0)
            if r is None:
                break
            if r[0] is not None:
                learn(r[0])
    if healthy_ok:
        healthy_ok = healthy.step()
    if batch % 2 == 0:
        # Fuzzed QPs die often (that is the point): bring them back, and keep
        # their requesters busy so that forged responses find a request.
        for t in targets:
            t.drain_cq()
            if t.state() == e.IBV_QPS_ERR:
                t.reset()
            if rng.random() < (0.8 if t.role == 'requester' else 0.3):
                post_request(t)
    if batch % 16 == 0:
        oracle.check()
    if batch % 64 == 0:
        el = time.time() - start
        print(f'# ... {stats.sent} packets in {el:.0f} s ({stats.sent / el:.0f}/s), healthy transfers {healthy.done}',
              flush=True)
elapsed = time.time() - start
rate = stats.sent / elapsed if elapsed else 0
time.sleep(2)  # the receive work catches up
for s in (peer4, peer6, third):
    while (r := s.recv(0)) is not None:
        if r[0] is not None:
            learn(r[0])
after = counters()
delta = {k: after[k] - before.get(k, 0) for k in after}
oracle.check()

print(f'# sent {stats.sent} packets in {elapsed:.1f} s: {rate:.0f} packets/s (seed {seed})')
print('# cases: ' + ', '.join(f'{k} {v}' for k, v in sorted(stats.by_kind.items())))
print('# device answered: ' + (', '.join(f'{k} {v}' for k, v in sorted(stats.resp.items(), key=lambda x: -x[1])[:14]) or 'nothing'))
print('# counters: ' + ', '.join(f'{k} +{v}' for k, v in delta.items() if v))
print(f'# fuzzed QPs: revived {sum(t.revivals for t in targets)} times ({stats.reset_races} moves to RTS lost to a '
      f'fatal packet in RTR), {stats.posted} requests posted; '
      f'completions by status {dict(sorted(stats.wc.items()))}')
send_errors = sum(s.send_errors for s in (peer4, peer6, third))
check(f'fuzzer sent {stats.sent} packets within its bounds', 0 < stats.sent <= args.packets + 64 and send_errors < stats.sent // 10,
      f'{send_errors} refused by the kernel')

# The healthy pair kept working and its data is right.
final_ok = healthy_ok and healthy.finish()
check(f'healthy RC pair moved data during the fuzzing, every byte verified ({healthy.done} transfers, '
      f'{healthy.bytes} bytes)', final_ok and healthy.done > 0, '; '.join(healthy.notes[:3]))

# Fuzzed QPs: a defined state, then reset and usable again.
states = {}
for t in targets:
    t.drain_cq()
    try:
        states[t.qpn] = t.state()
    except Exception as ex:
        states[t.qpn] = f'query failed: {ex}'
defined = (e.IBV_QPS_RTR, e.IBV_QPS_RTS, e.IBV_QPS_SQD, e.IBV_QPS_SQE, e.IBV_QPS_ERR)
check('every fuzzed QP is in a defined state', all(s in defined for s in states.values()), states)
usable = []
for t in targets:
    try:
        t.reset()
        for s in (peer4, peer6):
            s.drain()
        data = rng.randbytes(64)
        if t.kind == 'ud':
            t.sock.send(packet(UD | roce.SEND_ONLY, t.qpn, 0, data, deth_=(QKEY, 0x300)), t.dst)
            end, wcs = time.time() + 5, []
            while not wcs and time.time() < end:
                wcs = t.cq.poll(1)[1]
                time.sleep(0.01)
            good = bool(wcs) and wcs[0].status == e.IBV_WC_SUCCESS and wcs[0].byte_len == 40 + 64
        else:
            off = rng.randrange(0, WIN - 64)
            p = packet((RC if t.kind == 'rc' else UC) | roce.WRITE_ONLY, t.qpn, t.epsn, data,
                       reth_=(t.win.buf + off, t.win.rkey, 64), ack_req=t.kind == 'rc')
            t.sock.send(p, t.dst)
            got = t.sock.collect(5, qpn=t.peer_qpn, until=lambda g: g, quiet=0.5) if t.kind == 'rc' else (time.sleep(1) or [])
            landed = t.win.mr.read(64, off) == data
            good = landed and (t.kind == 'uc' or any(x.opcode == RC | roce.ACKNOWLEDGE and x.syndrome & 0x60 == 0 for x in got))
        usable.append(good)
        if not good:
            print(f'# fuzzed {t.kind} QP {t.qpn:#x} did not work after its reset')
    except Exception as ex:
        print(f'# fuzzed {t.kind} QP {t.qpn:#x}: {type(ex).__name__}: {ex}')
        usable.append(False)
check('every fuzzed QP works again after a reset (a valid WRITE or UD SEND from the peer lands)', all(usable),
      f'{usable.count(False)} of {len(usable)} did not')

# Nothing outside registered memory, posted SGEs or READ windows changed.
bad = []
for t in targets:
    for what, g, win in (('remote window', t.win, [(0, WIN)]), ('receive buffers', t.recv, t.recv_windows()),
                         ('READ sink', t.sink, [(READ_OFF, READ_OFF + READ_MAX)])):
        n, first = g.outside(win)
        if n:
            bad.append(f'{t.kind} QP {t.qpn:#x} {what}: {n} bytes from offset {first}')
check('no byte outside registered windows and posted SGEs changed', not bad, '; '.join(bad[:4]))

check(f'every changed byte of the remote windows lay in the RETH range of a WRITE sent ({oracle.checked} checkpoints)',
      not oracle.violations, '; '.join(oracle.violations[:3]) + (f' ({len(oracle.violations)} checkpoints in all)' if oracle.violations else ''))

want = [k for k in ('rcvd_pkts', 'rcvd_malformed', 'rcvd_icrc_err', 'rcvd_no_qp', 'rcvd_qkey_err',
                    'out_of_seq_request', 'duplicate_request') if k in after]
still = [k for k in want if delta.get(k, 0) <= 0]
check(f'device counters moved ({", ".join(want)})', want and not still, f'unchanged: {still}' if want else 'no counters found')
print(f'# packet rate under this guest: {rate:.0f} packets/s')
ctx.close()
sys.exit(1 if failed else 0)
