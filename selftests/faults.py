#!/usr/bin/env python3
"""RC traffic for test_faults.sh: one process opens two rroce devices,
connects an RC QP on each to the other and keeps RDMA WRITEs, SENDs and
RDMA READs in flight in both directions until SECONDS have passed or a
completion fails.

  faults.py DEV_A ADDR_A DEV_B ADDR_B SECONDS STATUS_FILE [--timeout N] [--stall S]

ADDR_x is the IPv4 address of DEV_x's netdev (its GID is looked up; the QPs
address each other by it). --timeout is the QPs' transport timeout exponent
(4.096 us * 2^N per try, 7 retries), --stall how long nothing may complete
while work is outstanding. After a completion error both QPs are moved to
ERR and every outstanding work request must complete (flushed).

Exit status:
  0  ran SECONDS without an error, everything posted completed
  1  a completion failed; afterwards every outstanding WR completed
  2  a verbs call failed, or a device was taken from the process
     (IBV_EVENT_DEVICE_FATAL: its context was disassociated, its objects
     destroyed; the work outstanding there never completes, the other
     device's must)
  3  stall: nothing completed for --stall seconds with work outstanding
  4  after a completion error, outstanding WRs never completed (lost flush)
STATUS_FILE is rewritten twice a second with "key value" lines: pid, state
(connecting|running|draining|done|stalled), ok (successful completions),
errors, drain (seconds the work outstanding at the deadline took to
complete; -1 until then), ok_DEV (successful completions of DEV's own
requests, per end). Completion gaps of 2 s or more are logged.
"""
import argparse
import ipaddress
import os
import select
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verbs import async_event_fds, connect_rc  # noqa: E402

WC_STATUS = {
    0: 'SUCCESS', 1: 'LOC_LEN_ERR', 2: 'LOC_QP_OP_ERR', 3: 'LOC_EEC_OP_ERR', 4: 'LOC_PROT_ERR',
    5: 'WR_FLUSH_ERR', 6: 'MW_BIND_ERR', 7: 'BAD_RESP_ERR', 8: 'LOC_ACCESS_ERR', 9: 'REM_INV_REQ_ERR',
    10: 'REM_ACCESS_ERR', 11: 'REM_OP_ERR', 12: 'RETRY_EXC_ERR', 13: 'RNR_RETRY_EXC_ERR',
    14: 'LOC_RDD_VIOL_ERR', 15: 'REM_INV_RD_REQ_ERR', 16: 'REM_ABORT_ERR', 17: 'INV_EECN_ERR',
    18: 'INV_EEC_STATE_ERR', 19: 'FATAL_ERR', 20: 'RESP_TIMEOUT_ERR', 21: 'GENERAL_ERR',
}
ACC = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
BUF = 1 << 20
WRITE_SIZE = 16 << 10
SEND_SIZE = 2 << 10
SEND_WINDOW = 8
RECV_DEPTH = 32
WRITE_BASE = 0  # WRITEs land in the peer's first 256 KiB
READ_BASE = 256 << 10  # READs land here, from the peer's first 256 KiB
RECV_BASE = 512 << 10  # receives land here


def gid_of(addr):
    mapped = ipaddress.IPv6Address('::ffff:' + addr)
    return ':'.join(mapped.packed[i:i + 2].hex() for i in range(0, 16, 2))


def gid_index(ctx, addr):
    want = ipaddress.IPv6Address(gid_of(addr))
    for i in range(16):
        try:
            g = ctx.query_gid(1, i)
            if ipaddress.IPv6Address(str(g.gid)) == want:
                return i, g
        except (PyverbsError, ValueError):
            continue
    raise SystemExit(f'no GID for {addr}')


class End:
    def __init__(self, name, addr):
        self.name = name
        before = async_event_fds()
        self.ctx = Context(name=name)
        new = async_event_fds() - before
        self.async_fd = new.pop() if len(new) == 1 else None
        self.fatal = None  # when the device was taken from the process
        self.sgid_index, self.gid = gid_index(self.ctx, addr)
        self.pd = PD(self.ctx)
        self.scq = CQ(self.ctx, 64)
        self.rcq = CQ(self.ctx, 64)
        self.mr = MR(self.pd, BUF, ACC)
        self.qp = QP(self.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.scq, rcq=self.rcq, sq_sig_all=1,
                                         cap=QPCap(max_send_wr=SEND_WINDOW * 2, max_recv_wr=RECV_DEPTH * 2)))
        self.sends_out = 0
        self.recvs_out = 0
        self.ok = 0  # successful send-queue completions: this end's own requests
        self.posted = 0
        self.peer = None

    def check_fatal(self, elapsed):
        """Reads pending async events; notes IBV_EVENT_DEVICE_FATAL."""
        while self.async_fd is not None and select.select([self.async_fd], [], [], 0)[0]:
            try:
                ev = self.ctx.get_async_event()
            except PyverbsError:
                self.async_fd = None
                break
            ev.ack()
            if ev.event_type == e.IBV_EVENT_DEVICE_FATAL and self.fatal is None:
                self.fatal = elapsed
        return self.fatal is not None

    def post_recv(self, slot):
        off = RECV_BASE + (slot % RECV_DEPTH) * SEND_SIZE
        self.qp.post_recv(RecvWR(wr_id=slot, num_sge=1, sg=[SGE(self.mr.buf + off, SEND_SIZE, self.mr.lkey)]))
        self.recvs_out += 1

    def post_one(self):
        n = self.posted
        op = self.ops[n % len(self.ops)]
        slot = (n // len(self.ops) % 16) * WRITE_SIZE
        if op == 'write':
            wr = SendWR(wr_id=n, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                        sg=[SGE(self.mr.buf, WRITE_SIZE, self.mr.lkey)])
            wr.set_wr_rdma(self.peer.mr.rkey, self.peer.mr.buf + WRITE_BASE + slot)
        elif op == 'read':
            wr = SendWR(wr_id=n, opcode=e.IBV_WR_RDMA_READ, num_sge=1,
                        sg=[SGE(self.mr.buf + READ_BASE + slot, WRITE_SIZE, self.mr.lkey)])
            wr.set_wr_rdma(self.peer.mr.rkey, self.peer.mr.buf + WRITE_BASE + slot)
        else:
            wr = SendWR(wr_id=n, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(self.mr.buf + WRITE_SIZE, SEND_SIZE, self.mr.lkey)])
        self.qp.post_send(wr)
        self.posted += 1
        self.sends_out += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dev_a')
    ap.add_argument('addr_a')
    ap.add_argument('dev_b')
    ap.add_argument('addr_b')
    ap.add_argument('seconds', type=float)
    ap.add_argument('status')
    ap.add_argument('--timeout', type=int, default=14)
    ap.add_argument('--stall', type=float, default=30)
    ap.add_argument('--ops', default='write,read,send', help='operations to cycle through, comma-separated')
    args = ap.parse_args()

    counts = {'ok': 0, 'errors': 0}
    drain = [-1.0]
    ends_l = []
    state = ['connecting']
    last_write = [0.0]

    def status(force=False):
        now = time.time()
        if not force and now - last_write[0] < 0.5:
            return
        last_write[0] = now
        tmp = args.status + '.tmp'
        with open(tmp, 'w') as f:
            f.write(f'pid {os.getpid()}\nstate {state[0]}\nok {counts["ok"]}\nerrors {counts["errors"]}\n'
                    f'drain {drain[0]:.1f}\n' + ''.join(f'ok_{m.name} {m.ok}\n' for m in ends_l))
        os.replace(tmp, args.status)

    def out(msg):
        print(f'faults.py: {msg}', flush=True)

    status(True)
    a = End(args.dev_a, args.addr_a)
    b = End(args.dev_b, args.addr_b)
    a.peer, b.peer = b, a
    ops = args.ops.split(',')
    if not ops or any(o not in ('write', 'read', 'send') for o in ops):
        raise SystemExit(f'bad --ops {args.ops}')
    a.ops = b.ops = ops
    for me in (a, b):
        connect_rc(me.qp, me.peer.qp.qp_num, me.peer.gid, ACC, sgid_index=me.sgid_index,
                   timeout=args.timeout, retry_cnt=7, rnr_retry=7)
        for i in range(RECV_DEPTH):
            me.post_recv(i)
    ends = (a, b)
    ends_l.extend(ends)
    first_error = None
    state[0] = 'running'
    status(True)
    start = time.time()
    deadline = start + args.seconds
    last_progress = start
    gaps = []
    last_ok = start
    try:
        # Traffic until the deadline or the first failed completion.
        while True:
            now = time.time()
            stopping = now >= deadline or first_error is not None
            got = 0
            for me in ends:
                while not stopping and me.sends_out < SEND_WINDOW:
                    me.post_one()
                for cq, is_send in ((me.scq, True), (me.rcq, False)):
                    n, wcs = cq.poll(16)
                    got += n
                    for w in wcs:
                        if is_send:
                            me.sends_out -= 1
                        else:
                            me.recvs_out -= 1
                        if w.status == e.IBV_WC_SUCCESS:
                            counts['ok'] += 1
                            if is_send:
                                me.ok += 1
                            last_ok = now
                            if not is_send and first_error is None:
                                me.post_recv(w.wr_id + RECV_DEPTH)
                        else:
                            counts['errors'] += 1
                            if first_error is None:
                                first_error = (f'{me.name} {"send" if is_send else "recv"} wr {w.wr_id}: '
                                               f'{WC_STATUS.get(w.status, w.status)} after {now - start:.1f} s')
            for me in ends:
                if first_error is None and me.check_fatal(now - start):
                    first_error = f'{me.name} was taken away (IBV_EVENT_DEVICE_FATAL) after {now - start:.1f} s'
            if got:
                if now - last_progress >= 2:
                    gaps.append(f'{last_progress - start:.1f}-{now - start:.1f} s')
                    out(f'no completion from {last_progress - start:.1f} s to {now - start:.1f} s')
                last_progress = now
            status()
            if first_error is not None:
                break
            if stopping and all(me.sends_out == 0 for me in ends):
                # How long the last work posted took to complete: a fraction
                # of a second unless something waits out transport timeouts.
                drain[0] = now - deadline
                state[0] = 'done'
                status(True)
                out(f'RESULT ok: {counts["ok"]} completions in {time.time() - start:.1f} s '
                    f'({", ".join(f"{m.name} {m.ok} requests" for m in ends)}), no error; '
                    f'the last work posted completed {drain[0]:.1f} s after the deadline'
                    + (f'; stalls of 2 s or more: {", ".join(gaps)}' if gaps else ''))
                return 0
            if now - last_progress > args.stall:
                state[0] = 'stalled'
                status(True)
                out(f'RESULT stall: nothing completed for {args.stall:.0f} s with '
                    f'{sum(m.sends_out for m in ends)} sends and {sum(m.recvs_out for m in ends)} receives '
                    f'outstanding ({counts["ok"]} completions before)')
                return 3
            if not got:
                time.sleep(0.002)

        # A completion failed: both QPs to ERR; everything outstanding must complete.
        state[0] = 'draining'
        status(True)
        for me in ends:
            if me.fatal is not None:
                continue
            try:
                me.qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
            except PyverbsError as ex:
                out(f'moving {me.name} to ERR failed: {ex}')
        end = time.time() + 30

        def outstanding():
            # A device taken away completes nothing more: its objects are gone.
            return [m for m in ends if (m.sends_out or m.recvs_out) and not m.check_fatal(time.time() - start)]
        while time.time() < end and outstanding():
            got = 0
            for me in outstanding():
                for cq, is_send in ((me.scq, True), (me.rcq, False)):
                    n, wcs = cq.poll(16)
                    got += n
                    for w in wcs:
                        if is_send:
                            me.sends_out -= 1
                        else:
                            me.recvs_out -= 1
                        if w.status != e.IBV_WC_SUCCESS:
                            counts['errors'] += 1
            if not got:
                time.sleep(0.005)
        left = ', '.join(f'{m.name}: {m.sends_out} sends {m.recvs_out} receives' for m in ends)
        state[0] = 'done'
        status(True)
        if outstanding():
            out(f'RESULT lost-flush: first error {first_error}; 30 s later still outstanding: {left}')
            return 4
        taken = [m.name for m in ends if m.fatal is not None]
        if taken:
            out(f'RESULT device-fatal: {first_error}; {", ".join(taken)} taken away; {counts["ok"]} completions '
                f'before, the work outstanding on the other device completed')
            return 2
        out(f'RESULT error: {first_error}; {counts["ok"]} completions before, {counts["errors"]} failed/flushed, '
            f'all outstanding work completed; last successful completion at {last_ok - start:.1f} s'
            + (f'; earlier stalls: {", ".join(gaps)}' if gaps else ''))
        return 1
    except PyverbsError as ex:
        state[0] = 'done'
        status(True)
        out(f'RESULT verbs-error after {time.time() - start:.1f} s ({counts["ok"]} completions): {ex}')
        return 2


if __name__ == '__main__':
    sys.exit(main())
