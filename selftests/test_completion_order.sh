#!/bin/bash
# A send-queue WQE completes only when what it asked for happened: an
# earlier WQE still on the wire is not completed as successful because a
# later one failed locally, and a WRITE with immediate that met an RNR NAK
# on its last packet completes once the receiver posts a buffer.
. "$(dirname "$0")/lib.sh"
topo_devices_up
py_checks <<'PY'
import subprocess, time
from verbs import Checks, connect_rc, open_devices, wait_wcs
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE
import pyverbs.enums as e
ok = Checks('test_completion_order').ok
LW, RW, RR = e.IBV_ACCESS_LOCAL_WRITE, e.IBV_ACCESS_REMOTE_WRITE, e.IBV_ACCESS_REMOTE_READ

side = open_devices()

def pair():
    """An RC QP on rroce-a connected over the veth link to one on rroce-b."""
    qps = {}
    for name, (ctx, pd, idx, gid) in side.items():
        cq = CQ(ctx, 16)
        qps[name] = (QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=8, max_recv_wr=8))), cq)
    for me, peer in (('rroce-a', 'rroce-b'), ('rroce-b', 'rroce-a')):
        connect_rc(qps[me][0], qps[peer][0].qp_num, side[peer][3], LW | RW | RR, sgid_index=side[me][2],
                   timeout=16, retry_cnt=7, rnr_retry=7, min_rnr_timer=4, rd_atomic=4)
    return qps['rroce-a'], qps['rroce-b']

def netem(args):
    subprocess.run(['ip', 'netns', 'exec', 'rroce-a', 'tc', 'qdisc'] + args + ['dev', 'veth-a', 'root'] +
                   (['netem', 'delay', '400ms'] if args == ['add'] else []), check=True)

pd_a, pd_b = side['rroce-a'][1], side['rroce-b'][1]
local = MR(pd_a, 8192, LW)
remote = MR(pd_b, 8192, LW | RW | RR)
pattern = bytes(range(256)) * 16
remote.write(pattern, 4096)

# 1. An RDMA READ whose request is delayed on the wire, then a SEND that fails
#    to build (bad lkey). The READ must not complete successfully without its data.
(qa, cqa), (qb, cqb) = pair()
netem(['add'])
rd = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(local.buf, 4096, local.lkey)])
rd.set_wr_rdma(remote.rkey, remote.buf)
qa.post_send(rd)
qa.post_send(SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(local.buf, 64, local.lkey ^ 0x5a)]))
wcs = wait_wcs(cqa, 2, 20)
netem(['del'])
got = {w.wr_id: w.status for w in wcs}
read_ok = got.get(1) == e.IBV_WC_SUCCESS
ok('a READ delayed on the wire, then a SEND with a bad lkey: the READ completes only with its data or flushed',
   (read_ok and local.read(4096, 0) == pattern) or got.get(1) == e.IBV_WC_WR_FLUSH_ERR,
   f'completions {got}, data {"present" if local.read(4096, 0) == pattern else "missing"}')
ok('the SEND with the bad lkey completes with IBV_WC_LOC_PROT_ERR', got.get(2) == e.IBV_WC_LOC_PROT_ERR, got)
ok('its completion comes after the READ\'s', [w.wr_id for w in wcs] == [1, 2], [(w.wr_id, w.status) for w in wcs])

# 2. RDMA WRITE with immediate over four packets with no receive posted: RNR
#    NAK on the last packet; once a receive is posted the message completes.
(qa, cqa), (qb, cqb) = pair()
wr = SendWR(wr_id=3, opcode=e.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1, sg=[SGE(local.buf, 4000, local.lkey)], imm_data=0x1234)
wr.set_wr_rdma(remote.rkey, remote.buf + 100)
local.write(b'w' * 4000, 4000)
qa.post_send(wr)
time.sleep(0.5)
recv = MR(pd_b, 64, LW)
qb.post_recv(RecvWR(wr_id=4, num_sge=1, sg=[SGE(recv.buf, 64, recv.lkey)]))
ws = wait_wcs(cqa, 1, 20)
wr_ = wait_wcs(cqb, 1, 20)
ok('WRITE_WITH_IMM (4 packets) after an RNR NAK: the requester completes successfully',
   [w.status for w in ws] == [e.IBV_WC_SUCCESS], [(w.wr_id, w.status) for w in ws])
ok('the receiver gets RECV_RDMA_WITH_IMM with the immediate data',
   [(w.status, w.opcode) for w in wr_] == [(e.IBV_WC_SUCCESS, e.IBV_WC_RECV_RDMA_WITH_IMM)],
   [(w.wr_id, w.status, w.opcode) for w in wr_])
ok('its byte_len is the length of the whole WRITE (4000)', [w.byte_len for w in wr_] == [4000], [w.byte_len for w in wr_])
ok('the data landed', remote.read(4000, 100) == b'w' * 4000)
PY
topo_devices_down
finish
