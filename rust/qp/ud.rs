// SPDX-License-Identifier: GPL-2.0
//! The unreliable datagram transport: UD and GSI sends from the send ring,
//! datagrams into receive WQEs with the GRH in front.

use super::*;

/// Room for the GRH at the start of every UD receive buffer (IBTA 11.4.1.2).
const GRH_BYTES: usize = 40;

/// WQEs one run sends before it yields and queues the send work to go on.
const BUDGET: u32 = 64;

/// Sends the WQEs posted on the send ring, at most [`BUDGET`] per run.
pub(super) fn send_all(dev: &Device, q: &Arc<QpShared>, st: &mut QpState) {
    let mut budget = BUDGET;
    while st.attrs.state == State::Rts {
        if budget == 0 {
            queue_send_work(q);
            return;
        }
        budget -= 1;
        let geo = st.sq.ring.geometry();
        let producer = st.sq.ring.load_producer();
        if geo.count(producer, st.sq.consumer) == 0 {
            break;
        }
        // A CNP cut this QP's rate: it waits for its next send time.
        if let Some(wait_ns) = rc::pace_wait(dev, st) {
            rc::pace(dev, q, wait_ns);
            return;
        }
        // Copy the WQE once; everything below reads the copy only.
        st.sq.ring.read_slot(st.sq.consumer, &mut st.send_wqe);
        let status = send_one(dev, q, st);
        let wqe = SendWqe::new(&st.send_wqe);
        let (wr_id, signaled) = (wqe.wr_id(), wqe.signaled());
        q.task.placement.note_wqe(q.sq_sig_all || signaled, false);
        st.sq.consumer = geo.next(st.sq.consumer);
        st.sq.ring.store_consumer(st.sq.consumer);
        if status != WcStatus::Success || q.sq_sig_all || signaled {
            let c = Cqe {
                wr_id,
                status,
                opcode: cqe::opcode::SEND,
                qp_num: q.qpn(),
                port_num: PORT as u8,
                ..Cqe::default()
            };
            let _ = q.send_cq.with(|cq| CqData::post(cq, &c, q.core_qp, false));
        }
        if status != WcStatus::Success {
            // An error completion moves the QP to the error state (IBTA 10.8.3.3).
            st.attrs.state = State::Err;
            flush(q, st);
        }
    }
}

/// A CE-marked datagram arrived: its sender QP gets a CNP at the packet's
/// source address, sent from the address it reached.
pub(super) fn notify_congestion(pkt: &RxPacket, p: &wire::Packet, q: &QpShared) {
    let (src, dst) = pkt.addrs.gids();
    let av = RoceAv {
        dgid: src,
        sgid: dst,
        sgid_type: 0,
        sgid_index: 0,
        flow_label: 0,
        hop_limit: 0,
        traffic_class: 0,
        sl: 0,
        dmac: [0; 6],
        ifindex: pkt.ifindex,
    };
    let Some(mut st) = q.run_state() else { return };
    // Only for a datagram this QP would take, and never to a group address.
    if st.dead || !st.attrs.state.receives() || p.deth.qkey != st.attrs.params.qkey || pkt.addrs.source_is_group() {
        q.count(&pkt.dev.data().counters, Counter::NpEcnMarked);
        return;
    }
    rc::notify_congestion(&pkt.dev, q, &mut st, &av, p.deth.src_qpn);
}

/// Sends the WQE in `st.send_wqe`; returns the completion status.
fn send_one(dev: &Device, q: &QpShared, st: &mut QpState) -> WcStatus {
    let data = dev.data();
    let wqe = SendWqe::new(&st.send_wqe);
    let with_imm = match wqe.opcode() {
        cqe::wr_opcode::SEND => false,
        cqe::wr_opcode::SEND_WITH_IMM => true,
        _ => return WcStatus::LocQpOpErr,
    };
    let Some(ah) = data.ahs.get(wqe.ud_ah_num()) else { return WcStatus::LocQpOpErr };
    if ah.pdn != q.pdn {
        return WcStatus::LocQpOpErr;
    }
    // The message length: never the user's `dma.length` except for inline data,
    // which the provider copied into the WQE and we bound by the slot.
    let (src, len) = if wqe.inline() {
        let l = wqe.inline_len();
        if l > st.sq.max_inline {
            return WcStatus::LocLenErr;
        }
        (Source::Inline(wqe.inline_data()), l as usize)
    } else {
        let Some(sges) = wqe.sges(st.sq.max_sge) else { return WcStatus::LocLenErr };
        let Ok(l) = usize::try_from(sges.total_len()) else { return WcStatus::LocLenErr };
        (Source::Sges(sges), l)
    };
    if len > data.active_mtu().bytes() as usize {
        return WcStatus::LocLenErr;
    }
    let opcode = wire::op::UD | if with_imm { wire::op::SEND_ONLY_IMM } else { wire::op::SEND_ONLY };
    let remote_qpn = wqe.ud_remote_qpn();
    let wr_qkey = wqe.ud_qkey();
    // A Q_Key with the high bit set means "use the QP's own" (IBTA 10.2.5).
    let qkey = if wr_qkey & 0x8000_0000 != 0 { st.attrs.params.qkey } else { wr_qkey };
    let pkt = wire::Packet {
        bth: wire::Bth {
            opcode,
            se: wqe.solicited(),
            pad: ((4 - len % 4) % 4) as u8,
            pkey: limits::DEFAULT_PKEY,
            dest_qpn: remote_qpn,
            psn: st.attrs.params.sq_psn,
            ..wire::Bth::default()
        },
        deth: wire::Deth { qkey, src_qpn: q.qpn() },
        imm: wqe.imm_data(),
        ..wire::Packet::default()
    };
    st.attrs.params.sq_psn = (st.attrs.params.sq_psn + 1) & 0x00ff_ffff;
    let status = emit(dev, &ah.av, None, (q.qpn(), remote_qpn), &pkt, &q.tx, len, |dst| gather(data, q.pdn, src, 0, dst));
    if status == WcStatus::Success {
        rc::paced_sent(dev, st, len as u64);
        rc::ud_sent_to(st, &ah.av.dgid);
    }
    status
}

/// Delivers a UD SEND into the next receive WQE.
pub(super) fn receive(pkt: &RxPacket, p: &wire::Packet, q: &QpShared) {
    let data = pkt.dev.data();
    let Some(mut st) = q.run_state() else { return };
    if st.dead || !st.attrs.state.receives() {
        data.counters.inc(Counter::RcvdDropped);
        crate::trace::drop(&pkt.dev, q.qpn(), Counter::RcvdDropped);
        return;
    }
    if p.deth.qkey != st.attrs.params.qkey {
        q.count(&data.counters, Counter::RcvdQkeyErr);
        crate::trace::drop(&pkt.dev, q.qpn(), Counter::RcvdQkeyErr);
        return;
    }
    let st = &mut *st;
    if !take_recv(q, st) {
        // No receive posted: a datagram is simply lost (IBTA 9.8.2).
        q.count(&data.counters, Counter::RcvdNoWqe);
        crate::trace::drop(&pkt.dev, q.qpn(), Counter::RcvdNoWqe);
        return;
    }
    // The receive is completed from the kernel's copy below.
    let wqe = RecvWqe::new(&st.recv_wqe);
    let ip_pkt = pkt.ip();
    let mut grh = [0u8; GRH_BYTES];
    // IPv4: the header sits in the last 20 bytes of the GRH space (RoCEv2 A17.4.5.1).
    let iph = pkt.ip_len;
    grh[GRH_BYTES - iph..].copy_from_slice(&ip_pkt[..iph]);
    let payload = &pkt.transport()[p.payload_off..p.payload_off + p.payload_len];
    let total = GRH_BYTES + payload.len();
    let status = scatter(data, q, wqe, &grh, payload);
    let mut flags = cqe::wc_flags::GRH;
    if p.has(wire::flags::IMMDT) {
        flags |= cqe::wc_flags::WITH_IMM;
    }
    let c = Cqe {
        wr_id: wqe.wr_id(),
        status,
        opcode: cqe::opcode::RECV,
        byte_len: total as u32,
        imm_or_inv: p.imm.to_be(),
        qp_num: q.qpn(),
        src_qp: p.deth.src_qpn,
        wc_flags: flags,
        port_num: PORT as u8,
        // Kernel consumers (the MAD layer) read the GRH by its network type.
        network_hdr_type: if iph == ip::IPV4_HDR { cqe::network_hdr::IPV4 } else { cqe::network_hdr::IPV6 },
        ..Cqe::default()
    };
    let _ = q.recv_cq.with(|cq| CqData::post(cq, &c, q.core_qp, p.bth.se));
}

/// Copies the GRH and the payload (in that order) into the SGEs of a receive WQE.
fn scatter(data: &DevData, q: &QpShared, wqe: RecvWqe<'_>, grh: &[u8], payload: &[u8]) -> WcStatus {
    let Some(sges) = wqe.sges(q.recv_max_sge) else { return WcStatus::LocQpOpErr };
    match scatter_sges(data, q.recv_pdn, sges, 0, grh) {
        WcStatus::Success => scatter_sges(data, q.recv_pdn, sges, grh.len(), payload),
        status => status,
    }
}
