#!/usr/bin/env python3
"""A hostile writer of rroce's shared rings, for test_ring_hostile.sh.

It creates CQs, RC, UC and UD QPs and an SRQ through the raw uverbs
commands (uverbs_raw.py), maps their rings and then rewrites them the way
a malicious process may: indices out of range and moving while the kernel
works, WQEs with edge-case SGE counts, lengths, keys of another PD, random
keys, unknown opcodes, memory windows bound, used, invalidated and freed
with hostile fields (and their region deregistered under them), inline flags with huge lengths, UD WQEs with random
AH numbers and QPNs, WQEs rewritten right after the doorbell, a CQ
consumer index ahead of the producer, scribbles on the rings of destroyed
QPs. Each mutation ends with at least one doorbell. QPs in the error state
are brought back up, so the kernel's send and receive paths keep running.

The kernel must neither crash, warn, hang nor leak; the writer itself
checks what it can see: completions only ever name its own QPs, the
kernel never writes into a send slot, a CQ in use cannot be destroyed,
and no doorbell blocks for long. It prints its seed so a run can be
replayed, and exits 1 on an anomaly, 2 if it could not set up.

    ring_writer.py [--dev rroce0] [--seed N] [--mutations N] [--seconds S] [--trace]
"""
import argparse
import errno
import os
import random
import struct
import sys
import threading
import time

import uverbs_raw as u

EDGE32 = (0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x3ff, 0x400, 0x401, 0xfff, 0x1000, 0xffff, 0x10000,
          0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff)
QKEY = 0x1234
BUF = 1 << 16
# A doorbell or verb taking this long means the kernel is stuck or spinning.
SLOW_SECS = 5.0


class Q:
    """One QP of the writer and how it is wired."""

    def __init__(self, name, kind, peer, scq, rcq, srq, caps):
        self.name, self.kind, self.peer = name, kind, peer
        self.scq, self.rcq, self.srq, self.caps = scq, rcq, srq, caps
        self.qp = None


class Writer:
    def __init__(self, dev, rng):
        self.rng = rng
        self.ctx = u.Context(dev)
        self.sgid, self.gid = u.gid_of(dev)
        ctx = self.ctx
        self.pd, self.pd_other = ctx.alloc_pd(), ctx.alloc_pd()
        self.buf = u.Mapping(BUF)
        self.buf.write(0, bytes(rng.getrandbits(8) for _ in range(256)) * (BUF // 256))
        _, self.lkey, self.rkey = ctx.reg_mr(self.pd, self.buf.addr, BUF, u.LOCAL_WRITE | u.REMOTE_WRITE | u.REMOTE_READ)
        self.obuf = u.Mapping(4096)
        _, self.other_lkey, self.other_rkey = ctx.reg_mr(self.pd_other, self.obuf.addr, 4096,
                                                         u.LOCAL_WRITE | u.REMOTE_WRITE | u.REMOTE_READ)
        # Regions windows bind to, in both PDs, and windows of both types in both.
        self.bind_mr = ctx.reg_mr(self.pd, self.buf.addr, BUF, u.LOCAL_WRITE | u.MW_BIND)
        self.other_bind_lkey = ctx.reg_mr(self.pd_other, self.obuf.addr, 4096, u.LOCAL_WRITE | u.MW_BIND)[1]
        self.mws = []
        for pd in (self.pd, self.pd, self.pd_other):
            for ty in (1, 2):
                self.mws.append(list(ctx.alloc_mw(pd, ty)))
        dead = ctx.reg_mr(self.pd, self.buf.addr, 4096, u.LOCAL_WRITE | u.REMOTE_WRITE)
        ctx.dereg_mr(dead[0])
        self.dead_key = dead[1]
        self.cqs = [ctx.create_cq(4), ctx.create_cq(256)]
        self.ahs = [ctx.create_ah(self.pd, self.gid, self.sgid), ctx.create_ah(self.pd_other, self.gid, self.sgid)]
        # Multicast groups UD QPs attach to, and an address handle for one.
        self.groups = [bytes(10) + b'\xff\xff' + bytes([239, 9, 9, g]) for g in (1, 2)]
        self.mcast_ah = ctx.create_ah(self.pd, self.groups[0], self.sgid)
        try:
            self.srq = ctx.create_srq(self.pd, 32, 2)
        except OSError as ex:
            print(f'ring_writer: no SRQ ({ex}); going on without', flush=True)
            self.srq = None
        self.qpns = set()
        self.zombies = []          # rings of destroyed QPs, still mapped
        self.dead_handles = []     # handles of destroyed QPs
        self.stats, self.errs, self.wc_status = {}, {}, {}
        self.anomalies = []
        self.doorbells = 0
        self.max_call = 0.0
        self.qs = {}
        pick = lambda: rng.choice(self.cqs)
        spec = [('rc0', 'rc', 'rc1', None), ('rc1', 'rc', 'rc0', None),
                ('uc0', 'uc', 'uc1', None), ('uc1', 'uc', 'uc0', None),
                ('ud0', 'ud', 'ud1', None), ('ud1', 'ud', 'ud0', None)]
        if self.srq:
            spec += [('rs0', 'rc', 'rs1', None), ('rs1', 'rc', 'rs0', self.srq), ('uds', 'ud', 'ud0', self.srq)]
        for name, kind, peer, srq in spec:
            caps = rng.choice(((16, 16, 1, 1, 0), (16, 16, 4, 4, 64), (8, 8, 32, 32, 512), (64, 64, 2, 2, 16)))
            self.qs[name] = Q(name, kind, peer, pick(), pick(), srq, caps)
            self.create(self.qs[name])
        for q in self.qs.values():
            self.bring_up(q)

    # Plumbing -------------------------------------------------------------
    def call(self, what, fn, *args, **kw):
        """Runs a verb, timing it and counting its errno; returns success."""
        t = time.monotonic()
        try:
            fn(*args, **kw)
            res = True
        except OSError as ex:
            name = errno.errorcode.get(ex.errno, str(ex.errno))
            self.errs[f'{what} {name}'] = self.errs.get(f'{what} {name}', 0) + 1
            res = False
        dt = time.monotonic() - t
        self.max_call = max(self.max_call, dt)
        if dt > SLOW_SECS:
            self.anomaly(f'{what} took {dt:.1f} s')
        return res

    def anomaly(self, what):
        print(f'ring_writer: ANOMALY: {what}', flush=True)
        self.anomalies.append(what)

    def ring(self, q):
        self.doorbells += 1
        return self.call('doorbell', self.ctx.doorbell, q.qp)

    def create(self, q):
        mw, mr, ms, mrs, mi = q.caps
        if q.srq:
            mr = mrs = 0
        qt = {'rc': u.QPT_RC, 'uc': u.QPT_UC, 'ud': u.QPT_UD}[q.kind]
        q.qp = self.ctx.create_qp(self.pd, q.scq, q.rcq, qt, mw, mr, ms, mrs, mi, srq=q.srq)
        self.qpns.add(q.qp.qpn)

    def bring_up(self, q):
        """RESET (from any state) and up to RTS towards the peer's current QPN."""
        self.call('modify', self.ctx.modify_qp, q.qp, u.QP_STATE, state=u.RESET)
        if q.kind == 'ud':
            return self.call('modify', self.ctx.ud_ready, q.qp, QKEY)
        return self.call('modify', self.ctx.connect, q.qp, self.qs[q.peer].qp.qpn, self.gid, self.sgid,
                         timeout=8, retry_cnt=2, rnr_retry=2, min_rnr_timer=1)

    def recycle_errored(self, qs=None):
        """Brings QPs in the error state (or any other than RTS) back up, so
        the next WQEs reach the send path rather than the flush."""
        for q in qs or self.qs.values():
            try:
                st = self.ctx.query_qp_state(q.qp)
            except OSError:
                continue
            if st != u.RTS:
                self.bring_up(q)

    # WQE material ---------------------------------------------------------
    def u32(self):
        r = self.rng
        return r.choice(EDGE32) if r.random() < 0.6 else r.getrandbits(32)

    def addr(self):
        r = self.rng
        return r.choice((self.buf.addr, self.buf.addr + BUF - 1, self.buf.addr + BUF, self.buf.addr + r.randrange(BUF),
                         0, (1 << 64) - 1, r.getrandbits(64), self.obuf.addr))

    def key(self):
        r = self.rng
        guess = (self.lkey & ~0xff) | ((self.lkey + r.randrange(1, 256)) & 0xff)
        return r.choice((self.lkey, self.other_lkey, self.other_rkey, self.dead_key, guess, 0,
                         r.getrandbits(32), r.getrandbits(8) << 8 | (self.lkey & 0xff)))

    def good_sges(self, n=1, maxlen=4096):
        r = self.rng
        out = []
        for _ in range(n):
            off = r.randrange(BUF - 1)
            out.append((self.buf.addr + off, r.randrange(1, min(maxlen, BUF - off) + 1), self.lkey))
        return out

    def valid_send(self, q):
        """A well-formed WQE of an opcode the QP type supports."""
        r = self.rng
        wr_id = r.getrandbits(64)
        if q.kind == 'ud':
            return u.send_wqe(wr_id, u.WR_SEND, sges=self.good_sges(1, 512), ud=(self.qs[q.peer].qp.qpn, QKEY, self.ahs[0][1]))
        ops = [u.WR_SEND, u.WR_SEND_IMM, u.WR_RDMA_WRITE, u.WR_RDMA_WRITE_IMM]
        if q.kind == 'rc':
            ops.append(u.WR_RDMA_READ)
        op = r.choice(ops)
        sges = self.good_sges(r.randint(1, min(2, q.qp.max_send_sge)))
        return u.send_wqe(wr_id, op, sges=sges, raddr=self.buf.addr + r.randrange(BUF // 2), rkey=self.rkey,
                          imm=r.getrandbits(32))

    def valid_recv(self, q):
        return u.recv_wqe(self.rng.getrandbits(64), self.good_sges(1, BUF))

    def feed_peer(self, q):
        """Posts a sane receive where `q`'s messages land, so sends reach the receive path."""
        p = self.qs[q.peer]
        ring = p.srq.ring if p.srq else p.qp.rq
        ring.post(self.valid_recv(p))

    def put(self, ring, wqe):
        """Writes at the producer slot and advances the producer, whatever state the header is in."""
        p = ring.producer
        ring.write_slot(p, wqe)
        ring.producer = (p + 1) & ring.mask

    # Mutations ------------------------------------------------------------
    def m_valid(self, q):
        """A good WQE; also checks the kernel leaves the slot's bytes alone."""
        self.feed_peer(q)
        wqe = self.valid_send(q)
        slot = q.qp.sq.producer & q.qp.sq.mask
        self.put(q.qp.sq, wqe)
        self.ring(q)
        if q.qp.sq.read_slot(slot, len(wqe)) != wqe:
            self.anomaly(f'the kernel changed send slot {slot} of QP {q.qp.qpn:#x}')

    def m_num_sge(self, q):
        w = bytearray(self.valid_send(q))
        n = self.rng.choice((0, q.qp.max_send_sge, q.qp.max_send_sge + 1, 33, 64) + EDGE32)
        struct.pack_into('=I', w, u.SWQE_NUM_SGE, n)
        self.put(q.qp.sq, w + bytes(16 * min(n, 32)))
        self.ring(q)

    def m_sge_fields(self, q):
        r = self.rng
        n = r.randint(1, max(1, min(q.qp.max_send_sge, 4)))
        sges = [(self.addr(), self.u32(), self.key()) for _ in range(n)]
        w = self.valid_send(q)
        op = struct.unpack_from('=I', w, u.SWQE_OPCODE)[0]
        if q.kind == 'ud':
            new = u.send_wqe(1, op, sges=sges, ud=(self.qs[q.peer].qp.qpn, QKEY, self.ahs[0][1]))
        else:
            new = u.send_wqe(1, op, sges=sges, raddr=self.addr(), rkey=self.key())
        if r.random() < 0.3:
            new = bytearray(new)
            struct.pack_into('=I', new, u.SWQE_DMA_LENGTH, self.u32())
        self.feed_peer(q)
        self.put(q.qp.sq, new)
        self.ring(q)

    def m_opcode(self, q):
        r = self.rng
        w = bytearray(self.valid_send(q))
        struct.pack_into('=I', w, u.SWQE_OPCODE, r.choice(tuple(range(17)) + EDGE32))
        struct.pack_into('=QQQI', w, 24, self.addr(), r.getrandbits(64), r.getrandbits(64), self.key())
        self.feed_peer(q)
        self.put(q.qp.sq, w)
        self.ring(q)

    def m_inline(self, q):
        r = self.rng
        data = bytes(r.getrandbits(8) for _ in range(r.choice((0, 1, 16, q.qp.max_inline, q.qp.max_inline + 1, 600))))
        w = bytearray(self.valid_send(q))[:u.SWQE_HDR_BYTES]
        struct.pack_into('=I', w, u.SWQE_FLAGS, u.SEND_INLINE | u.SEND_SIGNALED)
        n = r.choice((len(data), q.qp.max_inline, q.qp.max_inline + 1) + EDGE32)
        struct.pack_into('=IIII', w, u.SWQE_DMA_LENGTH, n, n, r.getrandbits(32), r.choice((0, 1) + EDGE32))
        self.feed_peer(q)
        self.put(q.qp.sq, bytes(w) + data)
        self.ring(q)

    def m_flags_and_dma(self, q):
        r = self.rng
        w = bytearray(self.valid_send(q))
        struct.pack_into('=I', w, u.SWQE_FLAGS, r.getrandbits(32) if r.random() < 0.5 else r.choice(EDGE32))
        struct.pack_into('=IIIII', w, u.SWQE_DMA_LENGTH, *(self.u32() for _ in range(5)))
        struct.pack_into('=IIIIIII', w, 144, *(self.u32() for _ in range(7)))  # status, state, iova, mask, psns
        self.feed_peer(q)
        self.put(q.qp.sq, w)
        self.ring(q)

    def m_ud_dest(self, q):
        if q.kind != 'ud':
            return self.m_sge_fields(q)
        r = self.rng
        ah = r.choice((0, self.ahs[0][1], self.ahs[1][1], r.randint(1, 64), 0xffffffff, r.getrandbits(32)))
        qpn = r.choice(tuple(self.qpns) + (0, 1, 2, 0xffffff, 0x1000000, r.getrandbits(32)))
        qkey = r.choice((QKEY, 0, 0x80000000 | QKEY, 0x80010000, r.getrandbits(32)))
        self.feed_peer(q)
        self.put(q.qp.sq, u.send_wqe(r.getrandbits(64), r.choice((u.WR_SEND, u.WR_SEND_IMM, u.WR_RDMA_WRITE)),
                                     sges=self.good_sges(1, r.choice((16, 1024, 4096, BUF))), ud=(qpn, qkey, ah)))
        self.ring(q)

    def m_rewrite_after_doorbell(self, q):
        """A valid WQE, the doorbell, then the same slot overwritten and another doorbell."""
        r = self.rng
        self.feed_peer(q)
        slot = q.qp.sq.producer
        self.put(q.qp.sq, self.valid_send(q))
        self.ring(q)
        garbage = bytes(r.getrandbits(8) for _ in range(q.qp.sq.elem))
        if r.random() < 0.5:
            garbage = bytearray(self.valid_send(q))
            struct.pack_into('=II', garbage, u.SWQE_NUM_SGE, self.u32(), 0)
            struct.pack_into('=I', garbage, u.SWQE_OPCODE, self.u32())
        q.qp.sq.write_slot(slot, garbage)
        self.ring(q)

    def m_garbage_slots(self, q):
        r = self.rng
        for _ in range(r.randint(1, 4)):
            self.put(q.qp.sq, bytes(r.getrandbits(8) for _ in range(q.qp.sq.elem)))
        self.ring(q)

    def m_sq_indices(self, q):
        r = self.rng
        sq = q.qp.sq
        what = r.randrange(4)
        if what == 0:
            sq.producer = self.u32()
        elif what == 1:
            sq.consumer = self.u32()
        elif what == 2:
            # A full ring and then some: the producer laps the consumer.
            for _ in range(sq.mask + r.randint(1, 3)):
                self.put(sq, self.valid_send(q))
        else:
            sq.map.set_u32(0, self.u32())
            sq.map.set_u32(4, self.u32())
        self.ring(q)

    def m_race(self, q):
        """Doorbells while another thread rewrites the producer and the slots."""
        r = self.rng
        sq = q.qp.sq
        for _ in range(r.randint(1, sq.mask)):
            self.feed_peer(q)
            self.put(sq, self.valid_send(q))
        stop = threading.Event()
        seed = r.getrandbits(32)

        def scribble():
            rr = random.Random(seed)
            for _ in range(20000):
                if stop.is_set():
                    break
                k = rr.randrange(4)
                if k == 0:
                    sq.producer = rr.getrandbits(32)
                elif k == 1:
                    sq.map.set_u32(sq.slot_off(rr.getrandbits(32)) + u.SWQE_NUM_SGE, rr.choice(EDGE32))
                elif k == 2:
                    sq.map.set_u32(sq.slot_off(rr.getrandbits(32)) + u.SWQE_OPCODE, rr.randrange(17))
                else:
                    sq.map.set_u32(sq.slot_off(rr.getrandbits(32)) + u.SWQE_SGES + 8, rr.choice(EDGE32))
        t = threading.Thread(target=scribble)
        t.start()
        for _ in range(r.randint(2, 8)):
            self.ring(q)
        stop.set()
        t.join(timeout=30)
        if t.is_alive():
            self.anomaly('the scribbler thread did not stop')

    def m_recv_garbage(self, q):
        """Hostile receive WQEs (or indices) where the peer's sends land."""
        r = self.rng
        p = self.qs[q.peer]
        ring = p.srq.ring if p.srq else p.qp.rq
        what = r.randrange(3)
        if what == 0:
            sges = [(self.addr(), self.u32(), self.key()) for _ in range(r.randint(0, 4))]
            w = u.recv_wqe(r.getrandbits(64), sges, num_sge=r.choice((len(sges), 0, 27, 28, 32, 33) + EDGE32),
                           length=self.u32())
            self.put(ring, w)
        elif what == 1:
            ring.producer = self.u32()
        else:
            self.put(ring, bytes(r.getrandbits(8) for _ in range(ring.elem)))
        self.put(q.qp.sq, self.valid_send(q))
        self.ring(q)

    def m_cq(self, q):
        r = self.rng
        cq = r.choice(self.cqs)
        what = r.randrange(4)
        if what == 0:
            cq.ring.consumer = (cq.ring.producer + r.randint(1, cq.ring.mask)) if r.random() < 0.5 else self.u32()
        elif what == 1:
            self.drain(cq)
        elif what == 2:
            cq.ring.map.set_u32(0, self.u32())
            cq.ring.map.set_u32(4, self.u32())
        else:
            self.call('notify', self.ctx.req_notify_cq, cq, r.randrange(2))
        self.feed_peer(q)
        self.put(q.qp.sq, self.valid_send(q))
        self.ring(q)

    def drain(self, cq):
        """Honest poll of a CQ; completions must name QPs of this process."""
        for wc in self.ctx.poll_cq(cq, cq.ring.mask + 1):
            self.wc_status[wc.status] = self.wc_status.get(wc.status, 0) + 1
            if wc.qp_num and wc.qp_num not in self.qpns:
                self.anomaly(f'a completion names QP {wc.qp_num:#x}, not one of this process')

    def m_lifecycle(self, q):
        r = self.rng
        what = r.randrange(6)
        if what == 0:
            # Destroy and recreate; the old rings stay mapped and get scribbled on.
            old = q.qp
            if self.call('destroy_qp', self.ctx.destroy_qp, old, unmap=False):
                self.zombies += [x for x in (old.sq, old.rq) if x]
                self.dead_handles.append(old)
                self.create(q)
                self.bring_up(q)
                self.bring_up(self.qs[q.peer])
        elif what == 1 and self.zombies:
            z = r.choice(self.zombies)
            z.producer, z.consumer = self.u32(), self.u32()
            z.write_slot(r.getrandbits(32), bytes(r.getrandbits(8) for _ in range(z.elem)))
            self.ring(q)
            if len(self.zombies) > 8:
                self.zombies.pop(0).close()
        elif what == 2 and self.dead_handles:
            # The doorbell of a destroyed QP's handle (which the core may have
            # handed to a new object meanwhile).
            self.call('doorbell (old handle)', self.ctx.doorbell, r.choice(self.dead_handles))
        elif what == 3:
            if self.call('destroy_cq (in use)', self.ctx.destroy_cq, q.scq, unmap=False):
                self.anomaly('a CQ in use was destroyed')
        elif what == 4:
            # To the error state with WQEs posted: the flush reads the hostile ring.
            for _ in range(r.randint(1, 4)):
                self.put(q.qp.sq, self.valid_send(q) if r.random() < 0.5 else bytes(r.getrandbits(8) for _ in range(q.qp.sq.elem)))
            self.call('modify', self.ctx.modify_qp, q.qp, u.QP_STATE, state=u.ERR)
            self.ring(q)
        else:
            self.bring_up(q)
            self.bring_up(self.qs[q.peer])

    def window_key(self):
        """A window's key as it may be now: bound keys change their low byte."""
        r = self.rng
        k = r.choice(self.mws)[1] if self.mws else self.key()
        return r.choice((k, (k & ~0xff) | r.getrandbits(8), k ^ 0x100, self.key()))

    def m_windows(self, q):
        """BIND_MW with hostile fields, then accesses, invalidations, frees
        and deregistrations that name windows."""
        if q.kind == 'ud':
            return self.m_sge_fields(q)
        r = self.rng
        what = r.randrange(6)
        if what == 0 or not self.mws:
            # Free a window and make another (binds to freed ones must fail).
            if self.mws and r.random() < 0.8:
                h = self.mws.pop(r.randrange(len(self.mws)))
                self.call('dealloc_mw', self.ctx.dealloc_mw, h[0])
            if len(self.mws) < 12:
                got = []
                if self.call('alloc_mw', lambda: got.append(self.ctx.alloc_mw(r.choice((self.pd, self.pd_other)), r.choice((1, 2))))):
                    self.mws.append(list(got[0]))
            return
        if what == 1:
            # Deregister the bound region: refused while a window holds it.
            got = []
            if self.call('dereg_mr', self.ctx.dereg_mr, self.bind_mr[0]) and self.call(
                    'reg_mr', lambda: got.append(self.ctx.reg_mr(self.pd, self.buf.addr, BUF, u.LOCAL_WRITE | u.MW_BIND))):
                self.bind_mr = got[0]
            return
        self.feed_peer(q)
        if what == 2:
            w = r.choice(self.mws)
            wqe = bytearray(u.send_wqe(r.getrandbits(64), u.WR_BIND_MW, flags=r.choice((u.SEND_SIGNALED, 0, u.SEND_FENCE))))
            addr = r.choice((self.buf.addr, self.buf.addr + r.randrange(BUF), self.obuf.addr, self.addr()))
            length = r.choice((0, 1, 8, BUF // 2, BUF, BUF + 1, r.getrandbits(64), (1 << 64) - 1))
            access = r.choice((u.REMOTE_WRITE | u.REMOTE_READ | u.REMOTE_ATOMIC, u.REMOTE_READ | u.ZERO_BASED,
                               u.LOCAL_WRITE | u.REMOTE_WRITE, 0, r.getrandbits(32)))
            lkey = r.choice((self.bind_mr[1], self.bind_mr[1], self.other_bind_lkey, self.lkey, self.key()))
            mw_rkey = r.choice((w[1], w[1], self.window_key()))
            new = r.getrandbits(32)
            struct.pack_into('=QQIIII', wqe, u.SWQE_MW, addr, length, lkey, mw_rkey, new, access)
            # If the bind goes through, the window answers to the new low byte.
            if mw_rkey == w[1] and r.random() < 0.7:
                w[1] = (w[1] & ~0xff) | (new & 0xff)
            self.put(q.qp.sq, wqe)
        elif what == 3:
            op = r.choice((u.WR_RDMA_WRITE, u.WR_RDMA_READ, u.WR_FETCH_ADD, u.WR_CMP_SWP, u.WR_RDMA_WRITE_IMM))
            n = 8 if op in (u.WR_FETCH_ADD, u.WR_CMP_SWP) else r.choice((1, 8, 1024, 4096))
            raddr = r.choice((self.buf.addr + r.randrange(BUF) // 8 * 8, r.randrange(BUF) // 8 * 8, 0, self.addr()))
            wqe = bytearray(u.send_wqe(r.getrandbits(64), op, sges=[(self.buf.addr, n, self.lkey)], raddr=raddr,
                                       rkey=self.window_key()))
            if op in (u.WR_FETCH_ADD, u.WR_CMP_SWP):
                struct.pack_into('=QQQI', wqe, 24, raddr, 1, 2, self.window_key())
            self.put(q.qp.sq, wqe)
        else:
            op = u.WR_LOCAL_INV if what == 4 else u.WR_SEND_INV
            self.put(q.qp.sq, u.send_wqe(r.getrandbits(64), op, sges=[(self.buf.addr, 16, self.lkey)],
                                         imm=self.window_key()))
        self.ring(q)

    def m_mcast(self, q):
        """Attaches and detaches QPs to groups (and to GIDs that are none),
        and sends datagrams to QPN 0xFFFFFF."""
        r = self.rng
        what = r.randrange(3)
        gid = r.choice(self.groups + [self.gid, bytes(16), bytes([0xff]) + bytes(r.getrandbits(8) for _ in range(15))])
        if what == 0:
            self.call('attach_mcast', self.ctx.attach_mcast, q.qp, gid)
        elif what == 1:
            self.call('detach_mcast', self.ctx.detach_mcast, q.qp, gid)
        else:
            if q.kind != 'ud':
                return self.m_sge_fields(q)
            for p in self.qs.values():
                if p.kind == 'ud' and not p.srq:
                    p.qp.rq.post(self.valid_recv(p))
            ah = r.choice((self.mcast_ah[1], self.ahs[0][1]))
            self.put(q.qp.sq, u.send_wqe(r.getrandbits(64), r.choice((u.WR_SEND, u.WR_SEND_IMM)),
                                         sges=self.good_sges(1, r.choice((16, 512, 4096))), ud=(0xffffff, QKEY, ah)))
            self.ring(q)

    MUTATIONS = (('valid', m_valid, 6), ('num_sge', m_num_sge, 4), ('sge_fields', m_sge_fields, 6),
                 ('opcode', m_opcode, 4), ('inline', m_inline, 4), ('flags_dma', m_flags_and_dma, 3),
                 ('ud_dest', m_ud_dest, 4), ('rewrite', m_rewrite_after_doorbell, 4), ('garbage', m_garbage_slots, 2),
                 ('sq_indices', m_sq_indices, 4), ('race', m_race, 2), ('recv', m_recv_garbage, 4),
                 ('cq', m_cq, 4), ('lifecycle', m_lifecycle, 2), ('windows', m_windows, 5),
                 ('mcast', m_mcast, 3))

    def run(self, mutations, seconds, trace=False):
        names = [m[0] for m in self.MUTATIONS]
        funcs = {m[0]: m[1] for m in self.MUTATIONS}
        weights = [m[2] for m in self.MUTATIONS]
        start = time.monotonic()
        n = 0
        while n < mutations and time.monotonic() - start < seconds:
            name = self.rng.choices(names, weights)[0]
            q = self.rng.choice(list(self.qs.values()))
            if trace:
                print(f'ring_writer: #{n} {name} on {q.name} ({q.qp.qpn:#x})', flush=True)
            funcs[name](self, q)
            self.stats[name] = self.stats.get(name, 0) + 1
            n += 1
            if self.rng.random() < 0.5:
                self.recycle_errored((q, self.qs[q.peer]))
            if n % 20 == 0:
                for cq in self.cqs:
                    if self.rng.random() < 0.7:
                        self.drain(cq)
                self.recycle_errored()
            if n % 2000 == 0:
                print(f'ring_writer: {n} mutations, {time.monotonic() - start:.0f} s', flush=True)
        return n, time.monotonic() - start

    def teardown(self, explicit):
        """Either destroys everything in order or leaves it to the closing of the file."""
        if explicit:
            for q in self.qs.values():
                self.call('destroy_qp', self.ctx.destroy_qp, q.qp)
            if self.srq:
                self.call('destroy_srq', self.ctx.destroy_srq, self.srq)
            for cq in self.cqs:
                self.call('destroy_cq', self.ctx.destroy_cq, cq)
            for ah, _ in self.ahs + [self.mcast_ah]:
                self.call('destroy_ah', self.ctx.destroy_ah, ah)
            for h, _ in self.mws:
                self.call('dealloc_mw', self.ctx.dealloc_mw, h)
        for z in self.zombies:
            z.close()
        self.ctx.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--dev', default='rroce0')
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--mutations', type=int, default=100000)
    ap.add_argument('--seconds', type=float, default=120)
    ap.add_argument('--trace', action='store_true', help='print each mutation before applying it')
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), 'little')
    print(f'ring_writer: seed {seed} (replay: ring_writer.py --seed {seed} --mutations {args.mutations}), '
          f'uid {os.getuid()}', flush=True)
    rng = random.Random(seed)
    try:
        w = Writer(args.dev, rng)
    except OSError as ex:
        print(f'ring_writer: set-up failed: {ex}', flush=True)
        return 2
    print(f'ring_writer: QPs ' + ', '.join(f'{q.name}={q.qp.qpn:#x}' for q in w.qs.values()), flush=True)
    n, secs = w.run(args.mutations, args.seconds, args.trace)
    w.teardown(explicit=rng.random() < 0.5)
    print(f'ring_writer: {n} mutations in {secs:.1f} s ({n / max(secs, 1e-9):.1f}/s), {w.doorbells} doorbells, '
          f'slowest verb {w.max_call * 1000:.0f} ms', flush=True)
    print('ring_writer: by kind: ' + ', '.join(f'{k} {v}' for k, v in sorted(w.stats.items())))
    print('ring_writer: refused verbs: ' + (', '.join(f'{k} {v}' for k, v in sorted(w.errs.items())) or 'none'))
    names = {0: 'SUCCESS', 1: 'LOC_LEN_ERR', 2: 'LOC_QP_OP_ERR', 4: 'LOC_PROT_ERR', 5: 'WR_FLUSH_ERR', 6: 'MW_BIND_ERR',
             9: 'REM_INV_REQ_ERR', 10: 'REM_ACCESS_ERR', 11: 'REM_OP_ERR', 12: 'RETRY_EXC_ERR', 13: 'RNR_RETRY_EXC_ERR'}
    print('ring_writer: completions polled: ' + (', '.join(f'{names.get(k, k)} {v}' for k, v in sorted(w.wc_status.items())) or 'none'))
    print(f'ring_writer: {len(w.anomalies)} anomalies', flush=True)
    return 1 if w.anomalies else 0


if __name__ == '__main__':
    sys.exit(main())
