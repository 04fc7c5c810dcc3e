// SPDX-License-Identifier: GPL-2.0
//! Congestion control of a connected QP, which is both a notification point
//! (a CE-marked packet from its peer makes it send a CNP, at most one per
//! interval) and a reaction point (a CNP from its peer cuts its rate by
//! DCQCN, and its requester is paced to that rate).

use super::*;
use crate::proto::dcqcn::{CnpLimiter, CnpOutcome, Pacer, ReactionPoint};
use crate::proto::recent_peers::RecentPeers;
use crate::proto::wire::op;

/// How far a paced QP's send time may lag the clock: two jiffies at the
/// lowest HZ (100), since a paced QP is woken by a delayed work item, a
/// jiffy at a time at best; it then catches up on what the wait allowed.
const PACE_BURST_NS: u64 = 20_000_000;
/// Bytes of headers (Ethernet, IP, UDP, BTH, ICRC) a packet adds to its
/// payload on the wire, so that empty packets are paced too.
const WIRE_OVERHEAD: u64 = 70;
/// The port's speed when the netdev reports none (virtual NICs), kbit/s.
const DEFAULT_LINE_KBPS: u64 = 100_000_000;

/// Congestion control state of one QP.
#[derive(Default)]
pub(super) struct CcState {
    rp: ReactionPoint,
    np: CnpLimiter,
    pacer: Pacer,
    /// A UD QP's destinations: whose CNPs it takes.
    ud_peers: RecentPeers,
}

/// The monotonic clock.
fn now_ns() -> u64 {
    crate::net::ktime_ns()
}

fn line_kbps(dev: &Device) -> u64 {
    dev.data().line_kbps().unwrap_or(DEFAULT_LINE_KBPS)
}

/// A packet from the peer arrived with CE set: count it, and send the peer
/// a CNP unless one went out within the interval.
pub(in crate::qp) fn on_ce(dev: &Device, q: &QpShared, st: &mut QpState) {
    match st.attrs.av {
        Some(av) => notify(dev, q, st, &av, st.attrs.params.dest_qp_num),
        None => q.count(&dev.data().counters, Counter::NpEcnMarked),
    }
}

/// A CE-marked packet arrived from QP `dest_qpn` at `av`: count it, and
/// send that QP a CNP unless this QP sent one within the interval.
pub(in crate::qp) fn notify(dev: &Device, q: &QpShared, st: &mut QpState, av: &RoceAv, dest_qpn: u32) {
    let data = dev.data();
    q.count(&data.counters, Counter::NpEcnMarked);
    let (ecn, params) = data.qos.congestion();
    if !ecn || !st.rc.cc.np.should_send(now_ns(), &params) {
        return;
    }
    let pkt = wire::Packet {
        bth: wire::Bth { opcode: op::CNP, pkey: limits::DEFAULT_PKEY, becn: true, dest_qpn, ..wire::Bth::default() },
        ..wire::Packet::default()
    };
    let status = xmit::emit_cnp(dev, av, (q.qpn(), dest_qpn), &pkt);
    if status == WcStatus::Success {
        q.count(&data.counters, Counter::NpCnpSent);
        crate::trace::cnp_sent(dev, q.qpn());
    }
}

/// A CNP from the peer arrived: DCQCN cuts the QP's rate.
/// A UD QP sent a datagram to `dgid`: its CNPs count for a while.
pub(in crate::qp) fn ud_sent_to(st: &mut QpState, dgid: &[u8; 16]) {
    st.rc.cc.ud_peers.note(dgid, now_ns());
}

/// A CNP for a UD QP: it cuts the rate only if it comes from an address the
/// QP sent to lately (see `proto::recent_peers`); others are counted and
/// ignored.
pub(in crate::qp) fn on_ud_cnp(dev: &Device, q: &QpShared, st: &mut QpState, from: &crate::proto::ip::IpAddrs) {
    if !st.rc.cc.ud_peers.sent_recently(now_ns(), |gid| from.source_is(gid)) {
        q.count(&dev.data().counters, Counter::RpCnpIgnored);
        return;
    }
    on_cnp(dev, q, st);
}

pub(in crate::qp) fn on_cnp(dev: &Device, q: &QpShared, st: &mut QpState) {
    let data = dev.data();
    let (ecn, params) = data.qos.congestion();
    if !ecn {
        q.count(&data.counters, Counter::RpCnpIgnored);
        return;
    }
    match st.rc.cc.rp.on_cnp(now_ns(), &params, line_kbps(dev)) {
        CnpOutcome::Handled => q.count(&data.counters, Counter::RpCnpHandled),
        CnpOutcome::Ignored => q.count(&data.counters, Counter::RpCnpIgnored),
    }
}

pub(super) fn reaction_point(st: &QpState) -> &ReactionPoint { &st.rc.cc.rp }

/// DCQCN limits the QP's rate.
pub(in crate::qp) fn is_paced(st: &QpState) -> bool {
    st.rc.cc.rp.rate_kbps().is_some()
}

/// Before the requester sends a packet: the nanoseconds it must wait for
/// its rate, or `None` if it may send now (or is not limited).
pub(in crate::qp) fn pace_wait(dev: &Device, st: &mut QpState) -> Option<u64> {
    let cc = &mut st.rc.cc;
    if cc.rp.rate_kbps().is_none() {
        return None;
    }
    let params = dev.data().qos.congestion().1;
    let now = now_ns();
    cc.rp.advance(now, 0, &params, line_kbps(dev));
    if cc.rp.rate_kbps().is_none() {
        // Back at full speed: the next limit starts from a clean slate.
        cc.pacer = Pacer::default();
        return None;
    }
    match cc.pacer.wait_ns(now) {
        0 => None,
        wait => Some(wait),
    }
}

/// The requester sent `bytes` on the wire.
pub(in crate::qp) fn sent(dev: &Device, st: &mut QpState, bytes: u64) {
    let cc = &mut st.rc.cc;
    let Some(rate) = cc.rp.rate_kbps() else { return };
    let params = dev.data().qos.congestion().1;
    let now = now_ns();
    cc.pacer.sent(now, bytes + WIRE_OVERHEAD, rate, PACE_BURST_NS);
    cc.rp.advance(now, bytes, &params, line_kbps(dev));
}

/// The QP is paced: its send work runs again once `wait_ns` have passed.
pub(in crate::qp) fn pace(dev: &Device, q: &Arc<QpShared>, wait_ns: u64) {
    dev.data().counters.inc(Counter::RpPacingWaits);
    wait(q, wait_ns);
}

/// The requester's send work runs again once `wait_ns` have passed (at least a jiffy).
pub(super) fn wait(q: &Arc<QpShared>, wait_ns: u64) {
    let ms = wait_ns.div_ceil(1_000_000).clamp(1, 1000) as u32;
    // Already pending: that wake-up comes first and re-arms if needed.
    crate::qp::queue_delayed::<PACE_WORK>(q, kernel::time::msecs_to_jiffies(ms));
}
