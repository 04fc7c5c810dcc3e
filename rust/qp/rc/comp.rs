// SPDX-License-Identifier: GPL-2.0
//! The completer: acknowledgements, NAKs and READ responses retire the
//! requester's outstanding WQEs, in order, each only once the responder has
//! acknowledged it (a READ once all its data arrived, in order).

use super::req::count_held_time;
use super::retry::{arm_rnr_timer, clamp_cursor, rewind_to};
use super::*;
use crate::proto::wqe::SendWqe;
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::wire::{flags, op};

/// Retires WQEs up to and including slot `last` (each with success, the
/// last one with `status`); an error moves the QP to the error state.
pub(super) fn complete_through(q: &QpShared, st: &mut QpState, last: u32, status: WcStatus) {
    loop {
        let idx = st.sq.consumer;
        let this_status = if idx == last { status } else { WcStatus::Success };
        retire(q, st, idx, this_status);
        if idx == last || st.sq.consumer == st.rc.req.sent_end {
            break;
        }
    }
    if status != WcStatus::Success {
        st.attrs.state = State::Err;
        // Started but unacknowledged WQEs are flushed with the rest (the flush
        // also moves the requester's cursors along).
        flush(q, st);
    } else {
        clamp_cursor(st);
        complete_local_head(q, st);
    }
}

/// Retires the oldest outstanding WQE, slot `idx`, with `status`.
fn retire(q: &QpShared, st: &mut QpState, idx: u32, status: WcStatus) {
    let geo = st.sq.ring.geometry();
    let s = st.rc.req.sent(idx);
    // Free the slot before the completion becomes visible: a consumer that
    // reposts on seeing it must find room (the slot's contents are read from
    // the kernel's copy, so user space may reuse it at once).
    st.sq.consumer = geo.next(idx);
    st.sq.ring.store_consumer(st.sq.consumer);
    if s.takes_rd_atomic() && s.local_error.is_none() {
        st.rc.req.reads_outstanding = st.rc.req.reads_outstanding.saturating_sub(1);
    }
    // An executed LOCAL_INV's proof, for its completion (a kernel consumer
    // reuses the pages once it sees it).
    let proof = match st.rc.req.invalidated.take() {
        Some((at, proof)) if at == idx && s.wc_opcode == cqe::opcode::LOCAL_INV => Some(proof),
        other => {
            st.rc.req.invalidated = other;
            None
        }
    };
    if s.signaled || status != WcStatus::Success {
        let c = Cqe {
            wr_id: SendWqe::new(st.rc.req.wqe(idx)).wr_id(),
            status,
            opcode: s.wc_opcode,
            byte_len: if s.takes_rd_atomic() { s.len } else { 0 },
            qp_num: q.qpn(),
            port_num: PORT as u8,
            ..Cqe::default()
        };
        // A full CQ is reported to the consumer as a CQ error event.
        let _ = q.send_cq.with(|cq| CqData::post_invalidation(cq, &c, proof, q.core_qp, false));
    }
}

/// Completes what became the oldest outstanding WQEs once every WQE before
/// them did: executed local operations, with success, and a WQE that failed,
/// with its error (moving the QP to the error state). Iterates, so a run of
/// local operations does not recurse.
pub(super) fn complete_local_head(q: &QpShared, st: &mut QpState) {
    while st.sq.consumer != st.rc.req.sent_end {
        let idx = st.sq.consumer;
        let s = st.rc.req.sent(idx);
        if let Some(status) = s.local_error {
            // The error path flushes and does not come back here.
            complete_through(q, st, idx, status);
            return;
        }
        if !s.executed {
            return;
        }
        retire(q, st, idx, WcStatus::Success);
        clamp_cursor(st);
    }
}

/// Completes every outstanding WQE whose last PSN is covered by `psn`,
/// stopping at a READ or atomic (it completes with its data).
fn ack_through(q: &QpShared, st: &mut QpState, psn: u32) {
    // Only a PSN between the oldest outstanding one and the newest sent
    // acknowledges anything: a stale or duplicate ACK, or one for packets
    // never sent (forged, or from a confused peer), retires nothing.
    if !acknowledges(st, psn) {
        return;
    }
    while st.attrs.state.completes_sends() && st.sq.consumer != st.rc.req.sent_end {
        let idx = st.sq.consumer;
        let s = st.rc.req.sent(idx);
        if s.takes_rd_atomic() || s.local_error.is_some() || !psn_le(s.last_psn, psn) {
            break;
        }
        complete_through(q, st, idx, WcStatus::Success);
        retired(st);
    }
    let upto = in_order_through(st, psn);
    st.rc.req.note_acked(upto, st.attrs.params.retry_cnt);
}

/// How far an acknowledgement of `psn` is progress: no further than the
/// responses the oldest outstanding READ or atomic has received. A response
/// to a later one says its own responses went missing, not that they
/// arrived; counted as progress, it would move the acknowledged PSN past
/// the oldest, whose own responses then never count as progress and never
/// give its retry budget back.
fn in_order_through(st: &QpState, psn: u32) -> u32 {
    if st.sq.consumer == st.rc.req.sent_end {
        return psn;
    }
    let head = st.rc.req.sent(st.sq.consumer);
    if !head.takes_rd_atomic() || head.local_error.is_some() {
        return psn;
    }
    // The last response it received in order (before its first: the PSN before it).
    let received_through = psn_add(head.first_psn, head.received.wrapping_add(0xff_ffff));
    if psn_le(psn, received_through) {
        psn
    } else {
        received_through
    }
}

/// Whether a response may name `psn`: it lies between the oldest
/// outstanding PSN and the newest one sent.
fn acknowledges(st: &QpState, psn: u32) -> bool {
    if st.sq.consumer == st.rc.req.sent_end {
        return false;
    }
    let oldest = st.rc.req.sent(st.sq.consumer).first_psn;
    st.rc.req.psn_outstanding(oldest, psn)
}

/// Progress: the retry budgets start over for the next WQE.
fn retired(st: &mut QpState) {
    let r = &mut st.rc.req;
    r.acked_epoch = r.acked_epoch.wrapping_add(1);
    r.retries_left = st.attrs.params.retry_cnt;
    r.rnr_left = st.attrs.params.rnr_retry;
}

/// A response (ACK, NAK, READ response) arrived for the requester.
pub(in crate::qp) fn on_response(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet, payload: &[u8]) {
    if !st.attrs.state.completes_sends() {
        return;
    }
    let psn = p.bth.psn;
    let before = psn_add(psn, 0xff_ffff);
    let syndrome = Syndrome::decode(p.aeth.syndrome);
    if !p.has(flags::READ) && !matches!(syndrome, Some(Syndrome::Ack { .. })) && !acknowledges(st, psn) {
        // A NAK must name an outstanding PSN: anything else is stale or forged.
        dev.data().counters.inc(Counter::RcvdDropped);
        crate::trace::drop(dev, q.qpn(), Counter::RcvdDropped);
        return;
    }
    if p.has(flags::READ) {
        on_read_response(dev, q, st, p, payload);
    } else if p.has(flags::ATOMIC) {
        on_atomic_ack(dev, q, st, p);
    } else {
        match syndrome {
            Some(Syndrome::Ack { .. }) => ack_through(q, st, psn),
            Some(Syndrome::Nak(NakCode::PsnSequenceError)) if st.rc.req.rnr_psn.is_some() => {
                // The rest of a message an RNR NAK stopped: the RNR timer resends.
            }
            Some(Syndrome::Nak(NakCode::PsnSequenceError)) => {
                // Everything before `psn` arrived; resend from there.
                ack_through(q, st, before);
                q.count(&dev.data().counters, Counter::RcvdSeqNak);
                crate::trace::retransmit(dev, q.qpn(), psn, Counter::RcvdSeqNak);
                rewind_to(st, psn);
            }
            Some(Syndrome::RnrNak { timer }) => {
                // The responder had no receive posted: resend from that PSN after
                // the delay it asked for, as often as `rnr_retry` allows (7: always).
                q.count(&dev.data().counters, Counter::RcvdRnrNak);
                ack_through(q, st, before);
                if st.attrs.params.rnr_retry != 7 && st.rc.req.rnr_left == 0 {
                    q.count(&dev.data().counters, Counter::RetryRnrExceeded);
                    crate::trace::fatal_cqe(dev, q.qpn(), st.attrs.state, WcStatus::RnrRetryExcErr, Counter::RetryRnrExceeded.name());
                    if st.sq.consumer != st.rc.req.sent_end {
                        let idx = st.sq.consumer;
                        complete_through(q, st, idx, WcStatus::RnrRetryExcErr);
                    }
                    return;
                }
                if st.attrs.params.rnr_retry != 7 {
                    st.rc.req.rnr_left -= 1;
                }
                crate::trace::retransmit(dev, q.qpn(), psn, Counter::RcvdRnrNak);
                st.rc.req.rnr_psn = Some(psn);
                st.rc.req.rnr_delay_us = crate::proto::aeth::rnr_timer_us(timer);
                arm_rnr_timer(q, st);
                return;
            }
            Some(Syndrome::Nak(code)) => {
                ack_through(q, st, before);
                let status = match code {
                    NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                    NakCode::RemoteOperationalError => WcStatus::RemOpErr,
                    _ => WcStatus::RemInvReqErr,
                };
                if st.sq.consumer != st.rc.req.sent_end {
                    let idx = st.sq.consumer;
                    crate::trace::fatal_cqe(dev, q.qpn(), st.attrs.state, status, code.name());
                    complete_through(q, st, idx, status);
                }
            }
            None => dev.data().counters.inc(Counter::RcvdMalformed),
        }
    }
    count_held_time(dev, st);
    // What the acknowledgements let go out is sent by the QP's send work, not
    // by the receive work every device shares; not a round that the window
    // would stop before it sent anything.
    if st.attrs.state == State::Rts && st.rc.req.send_index != st.rc.req.sent_end
        || st.sq.ring.load_producer() != st.rc.req.sent_end && !super::req::start_held_by_window(q, st)
    {
        reschedule(q);
    }
}

/// An atomic acknowledgement: the value the responder found goes into the
/// first 8 bytes of the WQE's local buffer and the atomic completes. Only
/// the acknowledgement of the oldest outstanding WQE, an atomic, counts.
fn on_atomic_ack(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet) {
    let data = dev.data();
    if !matches!(Syndrome::decode(p.aeth.syndrome), Some(Syndrome::Ack { .. })) {
        data.counters.inc(Counter::RcvdMalformed);
        crate::trace::drop(dev, q.qpn(), Counter::RcvdMalformed);
        return;
    }
    // Only for a PSN sent and not yet acknowledged.
    if !acknowledges(st, p.bth.psn) {
        data.counters.inc(Counter::RcvdDropped);
        crate::trace::drop(dev, q.qpn(), Counter::RcvdDropped);
        return;
    }
    // Earlier non-READ WQEs are implicitly acknowledged by it.
    ack_through(q, st, psn_add(p.bth.psn, 0xff_ffff));
    if st.sq.consumer == st.rc.req.sent_end {
        return;
    }
    let idx = st.sq.consumer;
    let s = st.rc.req.sent(idx);
    if !s.is_atomic() || s.local_error.is_some() || p.bth.psn != s.first_psn {
        // A duplicate, or for another WQE: ignore it.
        return;
    }
    let orig = p.atomic_orig.to_ne_bytes();
    let status = match SendWqe::new(st.rc.req.wqe(idx)).sges(st.sq.max_sge) {
        Some(sges) => scatter_sges(data, q.pdn, sges, 0, &orig),
        None => WcStatus::LocLenErr,
    };
    if status != WcStatus::Success {
        complete_through(q, st, idx, status);
        return;
    }
    st.rc.req.note_acked(p.bth.psn, st.attrs.params.retry_cnt);
    complete_answered(q, st, idx);
}

/// A READ response: its data is placed only in order, so a READ completes
/// only when every byte arrived; a gap asks for the rest again.
fn on_read_response(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) {
    let data = dev.data();
    // Earlier non-READ WQEs are implicitly acknowledged by a response for a later PSN.
    ack_through(q, st, psn_add(p.bth.psn, 0xff_ffff));
    if st.sq.consumer == st.rc.req.sent_end {
        return;
    }
    let idx = st.sq.consumer;
    let s = st.rc.req.sent(idx);
    if s.is_placement() && s.local_error.is_none() {
        return on_placement_response(dev, q, st, idx, p, payload);
    }
    if !s.is_read() || s.local_error.is_some() {
        return;
    }
    let off = Psn::new(p.bth.psn).diff(Psn::new(s.first_psn));
    if off < 0 || !psn_le(p.bth.psn, s.last_psn) || (off as u32) < s.received {
        // A duplicate, or a response from the future: ignore it.
        return;
    }
    let k = off as u32;
    if k > s.received {
        // Responses went missing: ask again, once per gap, from the first one
        // not received (the later ones of the old request are ignored).
        if s.rerequested != Some(s.received) {
            if let Some(r) = st.rc.req.sent.get_mut(idx as usize) {
                r.rerequested = Some(s.received);
            }
            q.count(&data.counters, Counter::RcvdSeqNak);
            rewind_to(st, psn_add(s.first_psn, s.received));
        }
        return;
    }
    // The response must be the packet this place of the message calls for.
    let mtu = path_mtu(st);
    let last = p.bth.psn == s.last_psn;
    let want_op = op::RC
        | match (k == 0, last) {
            (true, true) => op::READ_RESPONSE_ONLY,
            (true, false) => op::READ_RESPONSE_FIRST,
            (false, true) => op::READ_RESPONSE_LAST,
            (false, false) => op::READ_RESPONSE_MIDDLE,
        };
    let offset = u64::from(k) * u64::from(mtu);
    let want_len = (u64::from(s.len).saturating_sub(offset)).min(u64::from(mtu));
    if p.bth.opcode != want_op || payload.len() as u64 != want_len {
        data.counters.inc(Counter::RcvdMalformed);
        crate::trace::drop(dev, q.qpn(), Counter::RcvdMalformed);
        return;
    }
    let status = match SendWqe::new(st.rc.req.wqe(idx)).sges(st.sq.max_sge) {
        Some(sges) => scatter_sges(data, q.pdn, sges, offset as usize, payload),
        None => WcStatus::LocLenErr,
    };
    if status != WcStatus::Success {
        complete_through(q, st, idx, status);
        return;
    }
    if let Some(s) = st.rc.req.sent.get_mut(idx as usize) {
        s.received += 1;
    }
    st.rc.req.note_acked(p.bth.psn, st.attrs.params.retry_cnt);
    if last {
        complete_answered(q, st, idx);
    }
}

/// The response to a FLUSH or ATOMIC WRITE, the oldest outstanding WQE in
/// slot `idx`: one READ RESPONSE ONLY without data, which completes it.
fn on_placement_response(dev: &Device, q: &QpShared, st: &mut QpState, idx: u32, p: &wire::Packet, payload: &[u8]) {
    let s = st.rc.req.sent(idx);
    if p.bth.psn != s.first_psn {
        // A duplicate, or for another WQE: ignore it.
        return;
    }
    let ack = matches!(Syndrome::decode(p.aeth.syndrome), Some(Syndrome::Ack { .. }));
    if p.bth.opcode != op::RC | op::READ_RESPONSE_ONLY || !payload.is_empty() || !ack {
        dev.data().counters.inc(Counter::RcvdMalformed);
        crate::trace::drop(dev, q.qpn(), Counter::RcvdMalformed);
        return;
    }
    st.rc.req.note_acked(p.bth.psn, st.attrs.params.retry_cnt);
    complete_answered(q, st, idx);
}

/// The READ or atomic in slot `idx` has its whole response: it completes,
/// and with it the WQEs after it whose acknowledgements came first.
fn complete_answered(q: &QpShared, st: &mut QpState, idx: u32) {
    complete_through(q, st, idx, WcStatus::Success);
    retired(st);
    let acked = st.rc.req.acked_psn;
    ack_through(q, st, acked);
}
