// SPDX-License-Identifier: GPL-2.0
//! Receive dispatch: a validated packet goes to the transport of its
//! destination QP (RC/UC engines, UD, congestion notifications), or as a
//! copy to each QP attached to its multicast group.

use super::*;

/// A validated unicast packet meets its QP: queued for the QP's runner,
/// which, from the receive hook, runs here and now if the QP was idle and
/// nothing binds it to another CPU, unless the packet `defers` its run to
/// the runner's queue (more of its message follows: `spread::defers_run`).
/// Softirq, or a local sender's context.
pub(crate) fn deliver(pkt: RxPacket, qpn: u32, arrival: crate::rx::Arrival, defers: bool) {
    // The packet's own reference on the device moves into the queue with
    // it; the lookup borrows another.
    let Some(dev) = pkt.dev.to_ref() else { return };
    let data = dev.data();
    let inline_ok = arrival == crate::rx::Arrival::Hook && !defers;
    // Under the table's lock: softirq takes no reference to the QP, so it
    // never drops the last one (nor, with a refused packet, of its PD);
    // a run here holds one that its destruction waits for.
    let found = data.qps.with(qpn, |q| match task::push_packet(q, pkt, false, inline_ok) {
        Ok(run) => run,
        Err(refused) => {
            refused.counters().inc(Counter::RcvdQueueFull);
            crate::trace::drop(&dev, qpn, Counter::RcvdQueueFull);
            None
        }
    });
    match found {
        None => {
            data.counters.inc(Counter::RcvdNoQp);
            crate::trace::drop(&dev, qpn, Counter::RcvdNoQp);
        }
        // After the table's lock: other QPs' packets are not held up by it.
        Some(Some(run)) => run.run(),
        Some(None) => {}
    }
}

/// A packet the QP's runner takes from its queue. Returns whether it was a
/// request: only a request leaves the responder an ACK to send when the
/// run ends.
pub(super) fn receive_queued(q: &Arc<QpShared>, pkt: &RxPacket, multicast: bool) -> bool {
    // Checked when it arrived; parsed again rather than kept.
    let Ok(p) = wire::Packet::parse(pkt.transport()) else { return false };
    let request = p.has(wire::flags::REQUEST);
    if request {
        q.task.placement.note_request();
    }
    if multicast {
        ud::receive(pkt, &p, q);
    } else {
        receive_unicast(pkt, &p, q);
    }
    request
}

fn receive_unicast(pkt: &RxPacket, p: &wire::Packet, q: &Arc<QpShared>) {
    let data = pkt.dev.data();
    let transport = wire::op_info(p.bth.opcode).map(|i| i.transport);
    match (q.qp_type, transport) {
        (QpType::Ud, Some(wire::Transport::Ud)) if pkt.ce => {
            ud::notify_congestion(pkt, p, q);
            ud::receive(pkt, p, q)
        }
        (QpType::Ud | QpType::Gsi, Some(wire::Transport::Ud)) => ud::receive(pkt, p, q),
        (QpType::Ud, Some(wire::Transport::Cnp)) => {
            let Some(mut st) = q.run_state() else { return };
            if !st.dead {
                let before = rc::rate_kbps(&st);
                rc::on_ud_cnp(&pkt.dev, q, &mut st, &pkt.addrs);
                crate::trace::cnp_received(&pkt.dev, q.qpn(), before, rc::rate_kbps(&st));
            }
        }
        (QpType::Rc | QpType::Uc, Some(wire::Transport::Cnp)) => {
            let Some(mut st) = q.run_state() else { return };
            if st.dead || !st.attrs.av.is_some_and(|av| from_peer(pkt, &av)) {
                data.counters.inc(Counter::RcvdWrongAddr);
                crate::trace::drop(&pkt.dev, q.qpn(), Counter::RcvdWrongAddr);
                return;
            }
            let before = rc::rate_kbps(&st);
            rc::on_cnp(&pkt.dev, q, &mut st);
            crate::trace::cnp_received(&pkt.dev, q.qpn(), before, rc::rate_kbps(&st));
        }
        (QpType::Rc, Some(wire::Transport::Rc)) | (QpType::Uc, Some(wire::Transport::Uc)) => {
            let Some(mut st) = q.run_state() else { return };
            if st.dead {
                return;
            }
            // A connected QP takes packets from its peer only.
            if !st.attrs.av.is_some_and(|av| from_peer(pkt, &av)) {
                data.counters.inc(Counter::RcvdWrongAddr);
                crate::trace::drop(&pkt.dev, q.qpn(), Counter::RcvdWrongAddr);
                return;
            }
            if pkt.ce {
                rc::on_ce(&pkt.dev, q, &mut st);
            }
            let t = pkt.transport();
            let payload = &t[p.payload_off..p.payload_off + p.payload_len];
            if p.has(wire::flags::REQUEST) {
                rc::on_request(&pkt.dev, q, &mut st, p, payload);
            } else {
                rc::on_response(&pkt.dev, q, &mut st, p, payload);
                rc::arm_timer(q, &st);
            }
            continue_flush(q, &st);
        }
        _ => {
            data.counters.inc(Counter::RcvdDropped);
            crate::trace::drop(&pkt.dev, q.qpn(), Counter::RcvdDropped);
        }
    }
}

/// A datagram to a multicast group (the multicast dispatcher, process
/// context): a copy for each QP of the device attached to the group of its
/// destination address. Anything else to a group address or to QPN
/// 0xFFFFFF (IBTA 10.5.2.1 allows only UD datagrams to both) is dropped.
/// Returns the number of QPs it went to.
pub(crate) fn receive_multicast(pkt: &RxPacket) -> usize {
    let data = pkt.dev.data();
    let Ok(p) = wire::Packet::parse(pkt.transport()) else { return 0 };
    let is_ud = wire::op_info(p.bth.opcode).is_some_and(|i| i.transport == wire::Transport::Ud);
    if !is_ud || !pkt.addrs.destination_is_group() || p.bth.dest_qpn != mcast::MULTICAST_QPN {
        data.counters.inc(Counter::RcvdDropped);
        crate::trace::drop(&pkt.dev, p.bth.dest_qpn, Counter::RcvdDropped);
        return 0;
    }
    let (_, mgid) = pkt.addrs.gids();
    let n = data.mcast.for_each_attached(&mgid, |q| {
        if q.paging_queue().is_none() {
            ud::receive(pkt, &p, q);
            return;
        }
        // Its runner gets a copy (sharing the packet's data).
        match pkt.try_clone() {
            Ok(copy) => {
                if let Err(refused) = task::push_packet(q.as_arc_borrow(), copy, true, false).map(drop) {
                    refused.counters().inc(Counter::RcvdQueueFull);
                }
            }
            Err(_) => data.counters.inc(Counter::RcvdDropped),
        }
    });
    data.counters.inc(if n == 0 { Counter::RcvdNoQp } else { Counter::RcvdMcast });
    if n == 0 {
        crate::trace::drop(&pkt.dev, p.bth.dest_qpn, Counter::RcvdNoQp);
    }
    n
}

/// Whether a packet comes from a connected QP's peer, to the QP's own
/// source GID (not to another address, VLAN or interface of the host).
fn from_peer(pkt: &RxPacket, av: &RoceAv) -> bool {
    pkt.addrs.source_is(&av.dgid) && pkt.addrs.destination_is(&av.sgid)
}
