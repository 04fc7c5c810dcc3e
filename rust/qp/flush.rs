// SPDX-License-Identifier: GPL-2.0
//! Flushing: a QP in the error state completes what is posted on its
//! queues with `IB_WC_WR_FLUSH_ERR`, a budget at a time.

use super::*;

/// WQEs of each queue one flush completes; the QP's send work goes on.
const FLUSH_BUDGET: u32 = 256;

/// Completes posted work requests with `IB_WC_WR_FLUSH_ERR` (IBTA 10.3.1: a
/// QP in the error state flushes both queues), at most [`FLUSH_BUDGET`] of
/// each queue; `st.flush_more` says the send work must go on.
pub(super) fn flush(q: &QpShared, st: &mut QpState) {
    if st.dead {
        return;
    }
    q.posting_state.store(State::Err.to_ib(), Ordering::SeqCst);
    // Pairs with the fence of a kernel consumer's `post_recv`.
    core::sync::atomic::fence(Ordering::SeqCst);
    let port = PORT as u8;
    let ibqp = q.core_qp;
    let more_sq = st.sq.drain(FLUSH_BUDGET, |head| {
        let wqe = SendWqe::new(head);
        let op = cqe::wc_opcode_for_wr(wqe.opcode()).unwrap_or(cqe::opcode::SEND);
        let _ = q.send_cq.with(|cq| CqData::post(cq, &Cqe::flushed(wqe.wr_id(), op, q.qpn(), port), ibqp, false));
    });
    // Started WQEs went with the rest: the requester keeps no cursor behind the consumer.
    let consumer = st.sq.consumer;
    st.rc.req.flushed(consumer);
    if st.rc.resp.stop() {
        // A receive taken for a message that will not finish now.
        let c = Cqe::flushed(RecvWqe::new(&st.recv_wqe).wr_id(), cqe::opcode::RECV, q.qpn(), port);
        let _ = q.recv_cq.with(|cq| CqData::post(cq, &c, ibqp, false));
    }
    // An SRQ's WQEs belong to every QP on it and stay posted.
    let more_rq = match &mut st.rq {
        Some(rq) => rq.drain(FLUSH_BUDGET, |head| {
            let c = Cqe::flushed(RecvWqe::new(head).wr_id(), cqe::opcode::RECV, q.qpn(), port);
            let _ = q.recv_cq.with(|cq| CqData::post(cq, &c, ibqp, false));
        }),
        None => false,
    };
    st.flush_more = more_sq || more_rq;
    // A QP on an SRQ takes no WQE from it any more, and the one it had taken
    // completed above: the consumer may now reclaim the QP's share
    // (`ib_drain_qp` waits for this event, as do user-space consumers).
    if q.srq.is_some() && !st.last_wqe_reported {
        st.last_wqe_reported = true;
        q.events.last_wqe_reached();
    }
}

/// Queues the send work if a flush left WQEs behind (see [`flush`]).
pub(super) fn continue_flush(q: &Arc<QpShared>, st: &QpState) {
    if st.flush_more && !st.dead {
        queue_send_work(q);
    }
}
