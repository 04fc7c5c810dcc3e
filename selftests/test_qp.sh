#!/bin/bash
# Queue pairs on the rxe ABI: capacities rounded as the rings hold them, the
# state machine and attribute checks, query, flush of posted receives and
# sends with IBV_WC_WR_FLUSH_ERR in the error state, no leaks.
. "$(dirname "$0")/lib.sh"
modprobe rroce
rdma link add rroce0 type rroce netdev eth0
py_checks <<'PY'
import errno, time
from verbs import Checks
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.wr import RecvWR, SendWR, SGE
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
c = Checks('test_qp')
ok, fails = c.ok, c.fails
with Context(name='rroce0') as ctx:
    pd = PD(ctx)
    cq = CQ(ctx, 64)
    cap = QPCap(max_send_wr=10, max_recv_wr=20, max_send_sge=3, max_recv_sge=2, max_inline_data=100)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    ok('RC QP created in RESET', qp.qp_state == e.IBV_QPS_RESET)
    attr, init = qp.query(e.IBV_QP_CAP)
    c = init.cap
    ok('send queue rounds 10 up to 15 WRs', c.max_send_wr == 15, c.max_send_wr)
    ok('receive queue rounds 20 up to 31 WRs', c.max_recv_wr == 31, c.max_recv_wr)
    ok('inline room of 100 gives 6 SGEs and 100 inline bytes', (c.max_send_sge, c.max_inline_data) == (6, 100), (c.max_send_sge, c.max_inline_data))
    ok('QP numbers start at 16', qp.qp_num >= 16, qp.qp_num)
    fails('a QP with 33 send SGEs is refused',
          lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_sge=33))), errno.EINVAL)
    fails('a QP with 513 bytes of inline data is refused',
          lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_inline_data=513))), errno.EINVAL)
    fails('XRC is refused as unsupported',
          lambda: QP(pd, QPInitAttr(qp_type=e.IBV_QPT_XRC_SEND, scq=cq, rcq=cq)))
    mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
    # Posting in RESET is refused by the provider; INIT accepts receives.
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index = 0; a.port_num = 1; a.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    ok('RESET -> INIT', qp.qp_state == e.IBV_QPS_INIT)
    bad = QPAttr(qp_state=e.IBV_QPS_RTS)
    fails('INIT -> RTS (skipping RTR) is refused', lambda: qp.modify(bad, e.IBV_QP_STATE), errno.EINVAL)
    bad_port = QPAttr(qp_state=e.IBV_QPS_INIT); bad_port.port_num = 2
    fails('port 2 does not exist', lambda: qp.modify(bad_port, e.IBV_QP_PORT), errno.EINVAL)
    for i in range(5):
        qp.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
    r = QPAttr(qp_state=e.IBV_QPS_RTR)
    r.path_mtu = e.IBV_MTU_1024; r.dest_qp_num = qp.qp_num; r.rq_psn = 0xabcdef
    r.max_dest_rd_atomic = 4; r.min_rnr_timer = 12
    gr = GlobalRoute(dgid=ctx.query_gid(1, 1), sgid_index=1)
    r.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
    qp.modify(r, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN
              | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    ok('INIT -> RTR with an address vector to its own IPv4 GID', qp.qp_state == e.IBV_QPS_RTR)
    t = QPAttr(qp_state=e.IBV_QPS_RTS)
    t.sq_psn = 0xabcdef; t.timeout = 14; t.retry_cnt = 7; t.rnr_retry = 7; t.max_rd_atomic = 4
    qp.modify(t, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY
              | e.IBV_QP_MAX_QP_RD_ATOMIC)
    q, _ = qp.query(0x1fffff)
    ok('RTR -> RTS and query returns the attributes',
       (q.qp_state, q.sq_psn, q.rq_psn, q.dest_qp_num, q.path_mtu, q.timeout, q.max_rd_atomic, q.max_dest_rd_atomic)
       == (e.IBV_QPS_RTS, 0xabcdef, 0xabcdef, qp.qp_num, e.IBV_MTU_1024, 14, 4, 4),
       (q.qp_state, hex(q.sq_psn), hex(q.rq_psn), q.dest_qp_num, q.path_mtu, q.timeout))
    want = ctx.query_gid(1, 1).gid
    ok('query returns the address vector (GID, SGID index, GRH)',
       (str(q.ah_attr.dgid), q.ah_attr.sgid_index, q.ah_attr.is_global) == (str(want), 1, 1),
       (str(q.ah_attr.dgid), str(want), q.ah_attr.sgid_index))
    # The QP is connected to itself: a SEND lands in its own first receive.
    mr.write(b'0123456789abcdef', 16)
    qp.post_send(SendWR(wr_id=7, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 16, mr.lkey)]))
    got = []
    for _ in range(2000):
        n, w = cq.poll(4)
        got += w
        if len(got) >= 2:
            break
        time.sleep(0.005)
    ok('a SEND to itself completes on both queues',
       sorted((w.wr_id, w.status, w.opcode) for w in got) == [(7, e.IBV_WC_SUCCESS, e.IBV_WC_SEND), (100, e.IBV_WC_SUCCESS, e.IBV_WC_RECV)],
       [(w.wr_id, w.status, w.opcode, w.byte_len) for w in got])
    ok('the receive got the 16 bytes', any(w.wr_id == 100 and w.byte_len == 16 for w in got))
    er = QPAttr(qp_state=e.IBV_QPS_ERR)
    qp.modify(er, e.IBV_QP_STATE)
    wcs = []
    while True:
        n, w = cq.poll(16)
        if n == 0:
            break
        wcs += w
    ok('moving to ERR flushes the 4 receives left',
       sorted(w.wr_id for w in wcs) == [101, 102, 103, 104]
       and all(w.status == e.IBV_WC_WR_FLUSH_ERR and w.opcode == e.IBV_WC_RECV for w in wcs),
       [(w.wr_id, w.status, w.opcode) for w in wcs])
    qp.post_recv(RecvWR(wr_id=200, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
    qp.post_send(SendWR(wr_id=201, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 16, mr.lkey)]))
    n, w = cq.poll(4)
    ok('a send posted in ERR completes with WR_FLUSH_ERR at once',
       n >= 1 and any(x.wr_id == 201 and x.status == e.IBV_WC_WR_FLUSH_ERR and x.opcode == e.IBV_WC_RDMA_WRITE for x in w),
       [(x.wr_id, x.status, x.opcode) for x in w])
    rs = QPAttr(qp_state=e.IBV_QPS_RESET)
    qp.modify(rs, e.IBV_QP_STATE)
    ok('ERR -> RESET', qp.qp_state == e.IBV_QPS_RESET)
    ud = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, cap=QPCap()))
    ua = QPAttr(qp_state=e.IBV_QPS_INIT); ua.qkey = 0x11111111; ua.pkey_index = 0; ua.port_num = 1
    ud.modify(ua, e.IBV_QP_STATE | e.IBV_QP_QKEY | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT)
    ud.to_rtr(QPAttr()); ud.to_rts(QPAttr())
    q, _ = ud.query(e.IBV_QP_QKEY | e.IBV_QP_STATE)
    ok('UD QP to RTS keeps its Q_Key', (q.qp_state, q.qkey) == (e.IBV_QPS_RTS, 0x11111111), (q.qp_state, hex(q.qkey)))
    uc = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=cq, rcq=cq, cap=QPCap()))
    ok('UC QP created', uc.qp_num != ud.qp_num)
    many = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap())) for _ in range(100)]
    ok('100 more QPs with distinct numbers', len({x.qp_num for x in many}) == 100)
    for x in many:
        x.close()
    uc.close(); ud.close(); qp.close(); mr.close(); cq.close(); pd.close()
PY
# The GSI QP (QPN 1) belongs to the MAD layer and stays with the device.
check "the GSI QP is listed" bash -c 'rdma res show qp link rroce0/1 | grep -q "lqpn 1 type GSI"'
check "no user QP left in rdma res" bash -c '[ "$(rdma res show qp link rroce0/1 | grep lqpn | grep -c " pid ")" = 0 ]'
check "rdma link delete" rdma link delete rroce0
finish
