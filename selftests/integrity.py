#!/usr/bin/env python3
"""Data integrity over rroce: RDMA WRITE, RDMA READ and SEND of random sizes
at random offsets (crossing page boundaries) between two RC QPs, checking
every byte. Usage: integrity.py DEVICE_A DEVICE_B TOTAL_MIB [SEED] (the same
device twice uses local delivery; two devices send over their netdevs)."""
import os, random, sys, time
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e
from verbs import connect_rc

dev_a, dev_b, total_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
rnd = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
BUF = 4 << 20
ACC = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
ends = []
for name in (dev_a, dev_b):
    ctx = Context(name=name)
    pd = PD(ctx)
    cq = CQ(ctx, 256)
    mr = MR(pd, BUF, ACC)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=64, max_recv_wr=64)))
    ends.append((ctx, pd, cq, mr, qp, ctx.query_gid(1, 1)))
(_, _, cq_a, a_mr, qa, gid_a), (_, _, cq_b, b_mr, qb, gid_b) = ends
for me, peer, gid in ((qa, qb, gid_b), (qb, qa, gid_a)):
    connect_rc(me, peer.qp_num, gid, ACC, psn=0xfffff0)

def wait(cq, n):
    got = []
    end = time.time() + 120
    while len(got) < n:
        k, w = cq.poll(16)
        got += w
        if time.time() > end:
            raise SystemExit(f'timeout waiting for {n} completions, got {len(got)}')
    for w in got:
        if w.status != e.IBV_WC_SUCCESS:
            raise SystemExit(f'completion error: wr_id {w.wr_id} status {w.status}')
    return got

moved = errors = 0
ops = {'write': 0, 'read': 0, 'send': 0}
start = time.time()
while moved < total_mib << 20:
    op = rnd.choice(('write', 'read', 'send'))
    size = rnd.choice((1, 7, 4095, 4096, 4097)) if rnd.random() < 0.2 else rnd.randrange(1, 1 << 20)
    src_off = rnd.randrange(0, BUF - size)
    dst_off = rnd.randrange(0, BUF - size)
    data = os.urandom(size)
    if op == 'write':
        a_mr.write(data, size, src_off)
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(a_mr.buf + src_off, size, a_mr.lkey)])
        wr.set_wr_rdma(b_mr.rkey, b_mr.buf + dst_off)
        qa.post_send(wr)
        wait(cq_a, 1)
        got = b_mr.read(size, dst_off)
    elif op == 'read':
        b_mr.write(data, size, src_off)
        wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(a_mr.buf + dst_off, size, a_mr.lkey)])
        wr.set_wr_rdma(b_mr.rkey, b_mr.buf + src_off)
        qa.post_send(wr)
        wait(cq_a, 1)
        got = a_mr.read(size, dst_off)
    else:
        a_mr.write(data, size, src_off)
        qb.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(b_mr.buf + dst_off, size, b_mr.lkey)]))
        qa.post_send(SendWR(wr_id=4, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a_mr.buf + src_off, size, a_mr.lkey)]))
        wait(cq_a, 1)
        wait(cq_b, 1)
        got = b_mr.read(size, dst_off)
    if got != data:
        errors += 1
        print(f'MISMATCH {op} size {size} src {src_off} dst {dst_off}')
    moved += size
    ops[op] += 1
secs = time.time() - start
print(f'moved {moved} bytes in {sum(ops.values())} transfers {ops} in {secs:.1f} s, {errors} mismatches')
sys.exit(1 if errors else 0)
