// SPDX-License-Identifier: GPL-2.0
//! When an RC requester asks for an acknowledgement (the BTH AckReq bit).
//!
//! A responder owes an ACK only for packets that ask for one (IBTA 9.7.6.1),
//! and ACKs are cumulative: one answers every request before it. Asking on
//! every message costs a packet each way per message; asking less often
//! leaves the ACKs to the requests that need them. A request asks if:
//! - its WQE wants a completion (signaled);
//! - the WQE after it executes locally and waits for this one to complete
//!   (an invalidation, a fenced registration), or the send queue stopped;
//! - `limit` packets in a row did not ask, so the window moves and send
//!   queue slots come back during a long run of unsignaled WQEs;
//! - it is sent again (the requester is recovering), or the QP is paced,
//!   or its ACK timeout is short or infinite: there the requester relies on
//!   prompt answers, as it always did.
//!
//! Unsignaled WQEs at the end of a burst may so have asked for nothing: a
//! requester that goes idle with such packets outstanding sends its newest
//! packet again, asking, once a short probe delay passed without an ACK
//! ([`AckRequests::probe_due`]). Every responder answers a duplicate, so
//! this needs nothing of the peer (rdma_rxe's responder never ACKs a
//! request that did not ask).

/// At most this many packets in a row go without asking.
pub const MAX_UNREQUESTED: u32 = 32;

/// ACK timeouts below this always ask: the ACK of a burst's tail must not
/// wait for the probe (a few jiffies) longer than the timeout.
pub const SHORT_TIMEOUT_NS: u64 = 30_000_000;

/// What the requester knows about the packet it is about to send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketFacts {
    /// The last packet of its message.
    pub last: bool,
    /// Its WQE completes with a CQE.
    pub signaled: bool,
    /// The next WQE waits for this one to complete before it goes on
    /// (checked only for a message's last packet).
    pub next_waits: bool,
    /// A PSN sent before: the requester is recovering.
    pub resend: bool,
    /// The QP is held to a rate (DCQCN) or relies on short timeouts.
    pub always: bool,
}

/// The requester's count of packets that did not ask.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckRequests {
    unrequested: u32,
}

impl AckRequests {
    pub const fn new() -> Self {
        Self { unrequested: 0 }
    }

    /// How many packets in a row may go without asking for a send queue of
    /// `sq_slots`: a quarter of it (a user waiting for slots gets them back
    /// four times per queue), at most [`MAX_UNREQUESTED`], at least one.
    pub fn limit(sq_slots: u32) -> u32 {
        (sq_slots / 4).clamp(1, MAX_UNREQUESTED)
    }

    /// Whether the packet asks; counts it.
    pub fn decide(&mut self, f: PacketFacts, limit: u32) -> bool {
        let ask = f.always
            || f.resend
            || (f.last && (f.signaled || f.next_waits))
            || self.unrequested.saturating_add(1) >= limit;
        self.unrequested = if ask { 0 } else { self.unrequested.saturating_add(1) };
        ask
    }

    /// A request that always asks went out (READ, atomic, FLUSH: their
    /// responses acknowledge everything before them).
    pub fn asked(&mut self) {
        self.unrequested = 0;
    }

    /// Back to a fresh QP (reset, or a new connection).
    pub fn reset(&mut self) {
        self.unrequested = 0;
    }

    /// Whether the newest packet sent asked for nothing: an idle requester
    /// arms its probe then.
    pub fn tail_unrequested(&self) -> bool {
        self.unrequested != 0
    }

    /// At the probe's expiry: whether to send the newest packet again,
    /// asking. `armed_at`: the newest PSN when the probe was armed, `newest`
    /// and `acked` now. Not if something newer went out since (its own
    /// probe or request covers it), nor if the peer acknowledged it.
    pub fn probe_due(armed_at: u32, newest: u32, acked: u32) -> bool {
        armed_at == newest && acked != newest
    }
}

/// Whether an ACK timeout (ns, `None` for infinite) needs every message
/// acknowledged: an infinite one never resends, so nothing may be left to
/// a timeout; a short one would expire before a later request asks.
pub fn timeout_needs_every_ack(timeout_ns: Option<u64>) -> bool {
    timeout_ns.is_none_or(|ns| ns < SHORT_TIMEOUT_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_unsignaled_messages_asks_every_limit_and_leaves_its_tail_to_the_probe() {
        let mut a = AckRequests::new();
        let limit = AckRequests::limit(128);
        assert_eq!(limit, 32);
        let unsignaled = PacketFacts { last: true, ..PacketFacts::default() };
        let asked: u32 = (0..100).map(|_| a.decide(unsignaled, limit) as u32).sum();
        // Packets 32, 64 and 96; the last 4 asked for nothing.
        assert_eq!(asked, 3);
        assert!(a.tail_unrequested());
        // A signaled WQE closes the burst.
        assert!(a.decide(PacketFacts { signaled: true, ..unsignaled }, limit));
        assert!(!a.tail_unrequested());
    }

    #[test]
    fn the_probe_resends_only_an_unanswered_newest_packet() {
        assert!(AckRequests::probe_due(100, 100, 90));
        // Acknowledged meanwhile.
        assert!(!AckRequests::probe_due(100, 100, 100));
        // Newer packets went out: their own requests or probe cover them.
        assert!(!AckRequests::probe_due(100, 105, 90));
        // Across the wrap of the 24-bit PSN.
        assert!(AckRequests::probe_due(0, 0, 0xff_ffff));
        assert!(!AckRequests::probe_due(0xff_ffff, 0, 0xff_fff0));
    }

    #[test]
    fn a_request_that_always_asks_closes_the_tail() {
        let mut a = AckRequests::new();
        assert!(!a.decide(PacketFacts { last: true, ..PacketFacts::default() }, 32));
        assert!(a.tail_unrequested());
        a.asked();
        assert!(!a.tail_unrequested());
    }

    #[test]
    fn a_waiting_next_wqe_makes_the_message_ask() {
        let mut a = AckRequests::new();
        let f = PacketFacts { last: true, next_waits: true, ..PacketFacts::default() };
        assert!(a.decide(f, 32));
        assert!(!a.decide(PacketFacts { last: false, ..f }, 32));
    }

    #[test]
    fn signaled_resent_and_always_ask() {
        let mut a = AckRequests::new();
        let more = PacketFacts { last: true, ..PacketFacts::default() };
        assert!(!a.decide(more, 32));
        assert!(a.decide(PacketFacts { signaled: true, ..more }, 32));
        assert!(a.decide(PacketFacts { resend: true, last: false, ..more }, 32));
        assert!(a.decide(PacketFacts { always: true, last: false, ..more }, 32));
        // A middle packet of a message never asks for its WQE's sake.
        assert!(!a.decide(PacketFacts { last: false, signaled: true, next_waits: true, ..more }, 32));
    }

    #[test]
    fn never_more_than_limit_in_a_row_without_asking() {
        for slots in [1u32, 2, 4, 8, 16, 64, 128, 1 << 15] {
            let limit = AckRequests::limit(slots);
            assert!((1..=MAX_UNREQUESTED).contains(&limit));
            let mut a = AckRequests::new();
            let mut run = 0;
            for i in 0..1000u32 {
                let f = PacketFacts { last: i % 3 == 0, ..PacketFacts::default() };
                if a.decide(f, limit) {
                    run = 0;
                } else {
                    run += 1;
                }
                assert!(run < limit, "{slots} slots: {run} packets in a row did not ask");
            }
        }
    }

    #[test]
    fn tiny_queues_ask_for_every_packet() {
        let mut a = AckRequests::new();
        let more = PacketFacts { last: true, ..PacketFacts::default() };
        assert!((0..10).all(|_| a.decide(more, AckRequests::limit(3))));
    }

    #[test]
    fn short_and_infinite_timeouts_ask_always() {
        assert!(timeout_needs_every_ack(None));
        assert!(timeout_needs_every_ack(Some(8_000_000)));
        assert!(!timeout_needs_every_ack(Some(67_000_000)));
    }
}
