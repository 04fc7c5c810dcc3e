// SPDX-License-Identifier: GPL-2.0
//! Retransmission, the requester's recovery: go-back-N moves of its
//! transmit cursor after a sequence NAK, an RNR NAK or a timeout, and the
//! retry timer (local ACK timeout, or the RNR delay the responder asked
//! for) that resends the oldest WQE or fails it once `retry_cnt` is spent.

use super::comp::complete_through;
use super::req::{count_held_time, progress};
use super::*;
use crate::proto::ack_request::AckRequests;

/// How long packets held in the host (a paused priority) may excuse
/// timeouts without progress; after that they count again, so a QP whose
/// packets never leave (a pause storm) still ends in `RETRY_EXC_ERR`
/// rather than waiting forever.
const MAX_HELD_NS: u64 = 30_000_000_000;

/// Go-back-N: transmission resumes at PSN `psn` (the WQE holding it, from
/// that packet; a READ from its first missing response) and goes on from
/// there through every later WQE.
pub(super) fn rewind_to(st: &mut QpState, psn: u32) {
    let geo = st.sq.ring.geometry();
    let mut idx = st.sq.consumer;
    while idx != st.rc.req.sent_end {
        let s = st.rc.req.sent(idx);
        if s.local_error.is_none() && psn_le(s.first_psn, psn) && psn_le(psn, s.last_psn) {
            let seg = if s.takes_rd_atomic() { s.received } else { Psn::new(psn).diff(Psn::new(s.first_psn)) as u32 };
            let r = &mut st.rc.req;
            r.send_index = idx;
            r.send_seg = seg;
            r.resume = None;
            // The resends from here ask; a probe armed before must not
            // move the cursor past them.
            r.probe_armed = None;
            return;
        }
        idx = geo.next(idx);
    }
}

/// After a timeout: the oldest WQE alone goes out again, from its first
/// unacknowledged packet, then transmission continues where it was; a READ
/// goes back N from its first missing response. If
/// the responder has it, its acknowledgement (or a NAK for what is really
/// missing) moves things on; resending the whole window would, on a merely
/// slow peer, bury it in duplicates.
fn rewind_oldest(st: &mut QpState) {
    let idx = st.sq.consumer;
    let s = st.rc.req.sent(idx);
    if s.local_error.is_some() {
        return;
    }
    st.rc.req.probe_armed = None;
    let acked = Psn::new(st.rc.req.acked_psn).diff(Psn::new(s.first_psn)) + 1;
    let seg = if s.takes_rd_atomic() { s.received } else { acked.max(0) as u32 };
    let r = &mut st.rc.req;
    if s.takes_rd_atomic() {
        // Responses of the READs and atomics after it were discarded while it
        // waited (they are taken in order only): ask for all of them again.
        r.send_index = idx;
        r.send_seg = seg;
        r.resume = None;
        return;
    }
    if r.send_index != idx && r.resume.is_none() {
        r.resume = Some((r.send_index, r.send_seg));
    }
    r.send_index = idx;
    r.send_seg = seg;
}

/// Keeps the cursors on outstanding WQEs after some were retired: a cursor
/// on a retired WQE moves to the oldest outstanding one.
pub(super) fn clamp_cursor(st: &mut QpState) {
    let geo = st.sq.ring.geometry();
    let consumer = st.sq.consumer;
    let outstanding = geo.count(st.rc.req.sent_end, consumer);
    let r = &mut st.rc.req;
    if geo.count(r.send_index, consumer) > outstanding {
        r.send_index = consumer;
        r.send_seg = r.sent.get(consumer as usize).filter(|s| s.is_read()).map_or(0, |s| s.received);
    }
    if r.resume.is_some_and(|(i, _)| geo.count(i, consumer) > outstanding) {
        r.resume = None;
    }
}

/// Arms the retry timer while WQEs await their response (local ACK timeout,
/// or the RNR delay the responder asked for).
pub(in crate::qp) fn arm_timer(q: &Arc<QpShared>, st: &QpState) {
    if transport_of(q) != Transport::Rc || st.sq.consumer == st.rc.req.sent_end || st.dead {
        return;
    }
    let us = if st.rc.req.rnr_psn.is_some() {
        u64::from(st.rc.req.rnr_delay_us)
    } else {
        match crate::proto::aeth::ack_timeout_ns(st.attrs.params.timeout) {
            Some(ns) => ns / 1000,
            // Timeout 0: wait forever (IBTA 9.7.6.1.3).
            None => return,
        }
    };
    let ms = (us / 1000).clamp(1, 1 << 20) as u32;
    let jiffies = kernel::time::msecs_to_jiffies(ms);
    // Already pending: that expiry comes first (an RNR NAK cancels it before
    // arming its own delay) and re-arms if needed.
    crate::qp::queue_delayed::<0>(q, jiffies);
}

/// An RNR NAK asks for its own delay, usually shorter than the ACK timeout
/// the pending expiry was armed for.
pub(super) fn arm_rnr_timer(q: &Arc<QpShared>, st: &QpState) {
    crate::net::cancel_delayed_work_nowait::<_, 0>(q);
    arm_timer(q, st);
}

/// How long an idle requester's unasked tail waits for an acknowledgement
/// before its newest packet goes out again, asking.
const PROBE_DELAY_NS: u64 = 2_000_000;

/// Whether the requester is idle with its newest packet unasked: it sent
/// all it had (the cursor is at the end), WQEs are outstanding, and the
/// last packet asked for nothing.
fn tail_unasked(st: &QpState) -> bool {
    let r = &st.rc.req;
    !st.dead
        && r.ack_requests.tail_unrequested()
        && r.send_index == r.sent_end
        && r.resume.is_none()
        && r.rnr_psn.is_none()
        && st.sq.consumer != r.sent_end
}

/// The requester went idle with its newest packet asking for no
/// acknowledgement (`proto::ack_request`): unless the peer acknowledges it
/// first, or newer packets go out, it goes out again, asking, after
/// [`PROBE_DELAY_NS`]. Already armed: that expiry looks again.
pub(in crate::qp) fn arm_probe(q: &Arc<QpShared>, st: &mut QpState) {
    if !tail_unasked(st) {
        return;
    }
    // At least two jiffies: a one-jiffy timer may expire at once.
    let delay = kernel::time::msecs_to_jiffies((PROBE_DELAY_NS / 1_000_000) as u32).max(2);
    let armed = crate::qp::queue_delayed::<{ crate::qp::PROBE_WORK }>(q, delay);
    // Noted with the newest packet and the time: the expiry resends only if
    // nothing newer went out for the whole delay. Pending already with
    // nothing noted (an expiry took it and is on its way): noted now, and
    // that expiry, finding it too recent, arms again.
    if armed || st.rc.req.probe_armed.is_none() {
        st.rc.req.probe_armed = Some((st.rc.req.psn_high, crate::net::ktime_ns()));
    }
}

/// The ACK probe expired: the newest packet goes out again, asking, if it
/// is still the newest and unacknowledged after the whole delay; otherwise
/// the probe is armed again if the tail still asks for nothing. A peer's
/// answer to the duplicate acknowledges everything before it.
pub(in crate::qp) fn on_ack_probe(q: &Arc<QpShared>) {
    let Some(mut guard) = q.run_state() else { return };
    let st = &mut *guard;
    if !st.attrs.state.completes_sends() || !tail_unasked(st) {
        st.rc.req.probe_armed = None;
        return;
    }
    let (newest, acked) = (st.rc.req.psn_high, st.rc.req.acked_psn);
    // Half the delay: two jiffies after arming mid-jiffy may be a little
    // over one jiffy, 1 ms at HZ 1000; an expiry of an earlier arming
    // (re-armed by a doorbell since) finds the noted time too recent.
    let due = st.rc.req.probe_armed.take().is_some_and(|(armed_at, when)| {
        AckRequests::probe_due(armed_at, newest, acked)
            && crate::net::ktime_ns().saturating_sub(when) >= PROBE_DELAY_NS / 2
    });
    // The probe resends only where the requester is stuck without it: not
    // into a paused priority's queue, whose packets are still in the host.
    if !due || q.tx.in_host() != 0 {
        arm_probe(q, st);
        return;
    }
    let Some(dev) = st.dev.take() else { return };
    // From the newest packet on: the cursor comes back where it was, at the
    // end of what was sent.
    rewind_to(st, newest);
    if st.rc.req.send_index != st.rc.req.sent_end {
        dev.data().counters.inc(Counter::AckProbes);
        progress(&dev, q, st);
    }
    st.dev = Some(dev);
}

/// Whether packets held in the host still excuse a timeout: for
/// [`MAX_HELD_NS`] from the first excused one without progress.
fn held_excuses(st: &mut QpState) -> bool {
    let now = crate::net::ktime_ns();
    let since = *st.rc.req.held_since.get_or_insert(now);
    now.saturating_sub(since) < MAX_HELD_NS
}

/// The retry timer expired.
pub(in crate::qp) fn on_timer(q: &Arc<QpShared>) {
    let Some(mut guard) = q.run_state() else { return };
    let st = &mut *guard;
    if st.dead || !st.attrs.state.completes_sends() || st.sq.consumer == st.rc.req.sent_end {
        return;
    }
    let Some(dev) = st.dev.take() else { return };
    // Packets held at an earlier expiry that have left the host since: they
    // may have left just now, so they get a full timeout to be answered.
    let hold_just_ended = q.tx.in_host() == 0 && st.rc.req.held_since.is_some();
    if q.tx.in_host() == 0 {
        st.rc.req.end_hold();
    }
    count_held_time(&dev, st);
    if let Some(psn) = st.rc.req.rnr_psn.take() {
        rewind_to(st, psn);
        progress(&dev, q, st);
    } else if st.rc.req.armed_epoch != st.rc.req.acked_epoch {
        // Responses arrived since the timer was armed: give the rest a full timeout.
        st.rc.req.armed_epoch = st.rc.req.acked_epoch;
    } else if (q.tx.in_host() != 0 && held_excuses(st)) || hold_just_ended {
        // Packets of ours still wait in the host (a paused priority's queue),
        // or left it since the last expiry: nothing is lost yet, so the
        // timeout does not count.
        dev.data().counters.inc(Counter::TxHeldTimeouts);
    } else if st.rc.req.retries_left == 0 {
        let idx = st.sq.consumer;
        q.count(&dev.data().counters, Counter::RetryExceeded);
        crate::trace::fatal_cqe(&dev, q.qpn(), st.attrs.state, WcStatus::RetryExcErr, Counter::RetryExceeded.name());
        complete_through(q, st, idx, WcStatus::RetryExcErr);
    } else {
        st.rc.req.retries_left -= 1;
        q.count(&dev.data().counters, Counter::Retransmits);
        crate::trace::retransmit(&dev, q.qpn(), psn_add(st.rc.req.acked_psn, 1), Counter::Retransmits);
        rewind_oldest(st);
        progress(&dev, q, st);
    }
    st.dev = Some(dev);
    arm_timer(q, st);
}
