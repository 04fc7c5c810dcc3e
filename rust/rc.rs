// SPDX-License-Identifier: GPL-2.0
//! The reliable connected transport (and, with the reliability left out, the
//! unreliable connected one): requester, responder and completer.
//!
//! Requester: WQEs are copied out of the shared send ring once, segmented by
//! the path MTU and sent while the window of unacknowledged PSNs allows.
//! Completer: ACKs, NAKs and READ responses retire WQEs in order.
//! Responder: PSN and opcode-sequence checks, then SEND into receive WQEs,
//! WRITE into R_Key-checked regions, READ answered from them, ACKs.

use super::*;
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::psn::Psn;
use crate::proto::resp_seq::{self, OpSeq, PsnClass, Position, SeqOutcome};
use crate::proto::segment::{Message, MsgKind};
use crate::proto::wire::{flags, op, Transport};
use kernel::alloc::KVVec;

/// PSNs a requester may have unacknowledged: bounds the data a loss can
/// force it to resend and the responder's reordering work.
const WINDOW: u32 = 128;

use crate::proto::abi::{recv::DMA_NUM_SGE as RWQE_NUM_SGE, recv::SGES as RSGES, send::*};

/// What the requester remembers of a WQE it sent.
#[derive(Clone, Copy, Default)]
pub(super) struct Sent {
    first_psn: u32,
    /// PSN of the last packet of the message (READ: of the last response).
    last_psn: u32,
    wc_opcode: u32,
    len: u32,
    is_read: bool,
    signaled: bool,
}

/// Connected-transport state of a QP.
pub(super) struct RcState {
    /// Next SQ slot to send (between the consumer and the producer).
    send_index: u32,
    /// Per SQ slot: what was sent.
    sent: KVVec<Sent>,
    /// Per SQ slot: the kernel's copy of the WQE, taken when it was first sent.
    wqes: KVVec<u8>,
    slot: usize,
    /// Responder: next expected PSN, message sequence number.
    epsn: u32,
    msn: u32,
    opseq: OpSeq,
    /// A PSN sequence NAK was sent for the current gap.
    nak_sent: bool,
    /// SEND in progress: bytes delivered into `st.recv_wqe` so far.
    pub(super) recv_active: bool,
    recv_offset: usize,
    /// WRITE in progress: target region and next address.
    write: Option<(Arc<mr::MrInner>, u64)>,
    /// Requester: bumped whenever an ACK retires WQEs; the timer retransmits
    /// only if it did not move for a whole timeout.
    acked_epoch: u32,
    armed_epoch: u32,
    /// Transport retries left for the oldest WQE (`retry_cnt`).
    retries_left: u8,
    /// RNR retries left (`rnr_retry`, 7 = unlimited).
    rnr_left: u8,
    /// An RNR NAK asked to resend from this PSN once its timer expires.
    rnr_psn: Option<u32>,
    rnr_delay_us: u32,
}

impl RcState {
    pub(super) fn new(transport: Transport, sq_slots: usize, slot: usize) -> Result<Self> {
        let mut sent = KVVec::with_capacity(sq_slots, GFP_KERNEL)?;
        sent.resize(sq_slots, Sent::default(), GFP_KERNEL)?;
        let mut wqes = KVVec::with_capacity(sq_slots * slot, GFP_KERNEL)?;
        wqes.resize(sq_slots * slot, 0, GFP_KERNEL)?;
        Ok(Self {
            send_index: 0,
            sent,
            wqes,
            slot,
            epsn: 0,
            msn: 0,
            opseq: OpSeq::new(transport),
            nak_sent: false,
            recv_active: false,
            recv_offset: 0,
            write: None,
            acked_epoch: 0,
            armed_epoch: 0,
            retries_left: 7,
            rnr_left: 7,
            rnr_psn: None,
            rnr_delay_us: 0,
        })
    }

    pub(super) fn reset(&mut self, rq_psn: u32) {
        self.send_index = 0;
        self.epsn = rq_psn;
        self.msn = 0;
        self.nak_sent = false;
        self.recv_active = false;
        self.recv_offset = 0;
        self.write = None;
        self.rnr_psn = None;
        let t = self.opseq.transport();
        self.opseq = OpSeq::new(t);
    }

    pub(super) fn set_retry_budgets(&mut self, retry_cnt: u8, rnr_retry: u8) {
        self.retries_left = retry_cnt;
        self.rnr_left = rnr_retry;
    }

    fn wqe(&self, idx: u32) -> &[u8] {
        let at = idx as usize * self.slot;
        self.wqes.get(at..at + self.slot).unwrap_or(&[])
    }
}

fn transport_of(q: &QpShared) -> Transport {
    if q.qp_type == QpType::Uc { Transport::Uc } else { Transport::Rc }
}

fn path_mtu(st: &QpState) -> u32 {
    IbMtu::from_enum(st.attrs.path_mtu).unwrap_or(IbMtu::Mtu1024).bytes()
}

fn psn_add(p: u32, n: u32) -> u32 {
    Psn::new(p).add(n).get()
}

fn psn_le(a: u32, b: u32) -> bool {
    Psn::new(a).diff(Psn::new(b)) <= 0
}

/// Sends new WQEs while the window allows. Process context, QP lock held.
pub(super) fn progress(dev: &Device, q: &QpShared, st: &mut QpState) {
    let Some(av) = st.attrs.av else { return };
    let mtu = path_mtu(st);
    let transport = transport_of(q);
    while st.attrs.state == state::RTS {
        let geo = st.sq.ring.geometry();
        let producer = st.sq.ring.load_producer();
        let idx = st.rc.send_index;
        if geo.count(producer, idx) == 0 {
            break;
        }
        // The window: PSNs since the oldest unacknowledged WQE.
        if st.sq.consumer != idx {
            let oldest = st.rc.sent.get(st.sq.consumer as usize).map_or(0, |s| s.first_psn);
            if Psn::new(st.attrs.sq_psn).diff(Psn::new(oldest)) as u32 >= WINDOW {
                break;
            }
        }
        // Copy the WQE once into kernel memory; resends use this copy.
        let slot = st.rc.slot;
        let at = idx as usize * slot;
        if let Some(dst) = st.rc.wqes.get_mut(at..at + slot) {
            st.sq.ring.read_slot(idx, dst);
        }
        let status = send_wqe(dev, q, st, idx, &av, mtu, transport, None);
        st.rc.send_index = geo.next(idx);
        if status != cqe::status::SUCCESS {
            // A request that cannot even be built completes in error at once.
            complete_through(q, st, idx, status);
            return;
        }
        if transport == Transport::Uc {
            // Nothing acknowledges UC: the WQE is done once sent.
            complete_through(q, st, idx, cqe::status::SUCCESS);
        }
    }
}

/// Sends the WQE in SQ slot `idx` (all packets, or from PSN `from` on for a
/// resend). Records what was sent on the first transmission.
#[allow(clippy::too_many_arguments)]
fn send_wqe(dev: &Device, q: &QpShared, st: &mut QpState, idx: u32, av: &RoceAv, mtu: u32, transport: Transport, from: Option<u32>) -> u32 {
    let data = dev.data();
    let wqe = st.rc.wqe(idx);
    let opcode = u32_at(wqe, OPCODE);
    let send_flags = u32_at(wqe, FLAGS);
    let (kind, wc_opcode) = match opcode {
        cqe::wr_opcode::SEND => (MsgKind::Send, cqe::opcode::SEND),
        cqe::wr_opcode::SEND_WITH_IMM => (MsgKind::SendImm, cqe::opcode::SEND),
        cqe::wr_opcode::RDMA_WRITE => (MsgKind::Write, cqe::opcode::RDMA_WRITE),
        cqe::wr_opcode::RDMA_WRITE_WITH_IMM => (MsgKind::WriteImm, cqe::opcode::RDMA_WRITE),
        cqe::wr_opcode::RDMA_READ if transport == Transport::Rc => (MsgKind::ReadRequest, cqe::opcode::RDMA_READ),
        _ => return cqe::status::LOC_QP_OP_ERR,
    };
    let inline = send_flags & FLAG_INLINE != 0 && kind != MsgKind::ReadRequest;
    let num_sge = u32_at(wqe, DMA_NUM_SGE) as usize;
    let len = if inline {
        let l = u32_at(wqe, DMA_LENGTH);
        if l > st.sq.max_inline {
            return cqe::status::LOC_LEN_ERR;
        }
        l
    } else {
        if num_sge > st.sq.max_sge as usize {
            return cqe::status::LOC_LEN_ERR;
        }
        let sum: u64 = (0..num_sge).map(|i| u64::from(u32_at(wqe, SGES + i * 16 + 8))).sum();
        match u32::try_from(sum) {
            Ok(l) => l,
            Err(_) => return cqe::status::LOC_LEN_ERR,
        }
    };
    let Ok(msg) = Message::new(kind, transport, len, mtu) else { return cqe::status::LOC_LEN_ERR };
    let first_psn = match from {
        Some(_) => st.rc.sent.get(idx as usize).map_or(0, |s| s.first_psn),
        None => st.attrs.sq_psn,
    };
    let start = from.map_or(0, |p| Psn::new(p).diff(Psn::new(first_psn)).max(0) as u32);
    let remote_addr = u64_at(wqe, RDMA_ADDR);
    let rkey = u32_at(wqe, RDMA_RKEY);
    let imm = u32::from_be(u32_at(wqe, IMM));
    for seg in msg.segments_from(start) {
        let pkt = wire::Packet {
            bth: wire::Bth {
                opcode: seg.opcode,
                se: seg.last && send_flags & FLAG_SOLICITED != 0,
                pad: if kind == MsgKind::ReadRequest { 0 } else { seg.pad },
                pkey: limits::DEFAULT_PKEY,
                dest_qpn: st.attrs.dest_qp_num,
                ack_req: seg.last && transport == Transport::Rc,
                psn: psn_add(first_psn, seg.psn_offset),
                ..wire::Bth::default()
            },
            reth: wire::Reth { va: remote_addr, rkey, dma_len: len },
            imm,
            ..wire::Packet::default()
        };
        let payload = if kind == MsgKind::ReadRequest { 0 } else { seg.len as usize };
        let offset = seg.offset as usize;
        let status = emit(dev, av, (q.qpn, st.attrs.dest_qp_num), &pkt, payload, |dst| {
            gather(data, q.pdn, wqe, SGES, num_sge, inline, offset, dst)
        });
        if status != cqe::status::SUCCESS {
            return status;
        }
    }
    if from.is_none() {
        let psns = msg.psn_count();
        if let Some(s) = st.rc.sent.get_mut(idx as usize) {
            *s = Sent {
                first_psn,
                last_psn: psn_add(first_psn, psns - 1),
                wc_opcode,
                len,
                is_read: kind == MsgKind::ReadRequest,
                signaled: q.sq_sig_all || send_flags & FLAG_SIGNALED != 0,
            };
        }
        st.attrs.sq_psn = psn_add(first_psn, psns);
    }
    cqe::status::SUCCESS
}

/// Retires WQEs up to and including slot `last` (each with success, the
/// last one with `status`); an error moves the QP to the error state.
fn complete_through(q: &QpShared, st: &mut QpState, last: u32, status: u32) {
    let geo = st.sq.ring.geometry();
    loop {
        let idx = st.sq.consumer;
        let s = st.rc.sent.get(idx as usize).copied().unwrap_or_default();
        let this_status = if idx == last { status } else { cqe::status::SUCCESS };
        // Free the slot before the completion becomes visible: a consumer that
        // reposts on seeing it must find room (the slot's contents are read from
        // the kernel's copy, so user space may reuse it at once).
        st.sq.consumer = geo.next(idx);
        st.sq.ring.store_consumer(st.sq.consumer);
        if s.signaled || this_status != cqe::status::SUCCESS {
            let c = Cqe {
                wr_id: wr_id_of(st.rc.wqe(idx)),
                status: this_status,
                opcode: s.wc_opcode,
                byte_len: if s.is_read { s.len } else { 0 },
                qp_num: q.qpn,
                port_num: PORT as u8,
                ..Cqe::default()
            };
            let _ = CqData::post(q.send_cq.get(), &c, q.core_qp as *mut sys::ib_qp, false);
        }
        if idx == last || st.sq.consumer == st.rc.send_index {
            break;
        }
    }
    if status != cqe::status::SUCCESS {
        st.attrs.state = state::ERR;
        // Sent but unacknowledged WQEs are flushed with the rest.
        st.rc.send_index = st.sq.consumer;
        flush(q, st);
    }
}

/// Completes every sent WQE whose last PSN is covered by `psn`, stopping
/// at a READ (it completes with its data).
fn ack_through(q: &QpShared, st: &mut QpState, psn: u32) {
    // Only a PSN inside the outstanding window acknowledges anything: a stale
    // or duplicate ACK (or one from a confused peer) must not retire newer WQEs.
    if st.sq.consumer == st.rc.send_index {
        return;
    }
    let oldest = st.rc.sent.get(st.sq.consumer as usize).map_or(0, |s| s.first_psn);
    let outstanding = Psn::new(st.attrs.sq_psn).diff(Psn::new(oldest)).max(0) as u32;
    if !Psn::new(psn).in_window(Psn::new(oldest), outstanding) {
        return;
    }
    while st.sq.consumer != st.rc.send_index {
        let idx = st.sq.consumer;
        let s = st.rc.sent.get(idx as usize).copied().unwrap_or_default();
        if s.is_read || !psn_le(s.last_psn, psn) {
            break;
        }
        complete_through(q, st, idx, cqe::status::SUCCESS);
        retired(st);
    }
}

/// Progress: the retry budgets start over for the next WQE.
fn retired(st: &mut QpState) {
    st.rc.acked_epoch = st.rc.acked_epoch.wrapping_add(1);
    st.rc.retries_left = st.attrs.retry_cnt;
    st.rc.rnr_left = st.attrs.rnr_retry;
}

/// Arms the retry timer while WQEs await their response (local ACK timeout,
/// or the RNR delay the responder asked for).
pub(super) fn arm_timer(q: &Arc<QpShared>, st: &QpState) {
    if transport_of(q) != Transport::Rc || st.sq.consumer == st.rc.send_index || st.dead {
        return;
    }
    let us = if st.rc.rnr_psn.is_some() {
        u64::from(st.rc.rnr_delay_us)
    } else {
        match crate::proto::aeth::ack_timeout_ns(st.attrs.timeout) {
            Some(ns) => ns / 1000,
            // Timeout 0: wait forever (IBTA 9.7.6.1.3).
            None => return,
        }
    };
    let ms = (us / 1000).clamp(1, 1 << 20) as u32;
    let jiffies = kernel::time::msecs_to_jiffies(ms);
    // Already pending: that expiry comes first and re-arms if needed. The module's
    // own queue is drained at unload; QPs cancel their timer when destroyed.
    if let Some(rxq) = crate::tunnel::rx_queue() {
        let _ = rxq.queue().enqueue_delayed(q.clone(), jiffies);
    }
}

/// The retry timer expired.
pub(super) fn on_timer(q: &Arc<QpShared>) {
    let mut guard = q.state.lock();
    let st = &mut *guard;
    if st.dead || st.attrs.state != state::RTS || st.sq.consumer == st.rc.send_index {
        return;
    }
    let Some(dev) = st.dev.take() else { return };
    if let Some(psn) = st.rc.rnr_psn.take() {
        resend_from(&dev, q, st, psn);
    } else if st.rc.armed_epoch != st.rc.acked_epoch {
        // Responses arrived since the timer was armed: give the rest a full timeout.
        st.rc.armed_epoch = st.rc.acked_epoch;
    } else if st.rc.retries_left == 0 {
        let idx = st.sq.consumer;
        dev.data().counters.inc(Counter::RetryExceeded);
        complete_through(q, st, idx, cqe::status::RETRY_EXC_ERR);
    } else {
        // Nothing acknowledged for a whole timeout: resend the oldest WQE only.
        // If the responder has it, its ACK (or a sequence NAK for what is really
        // missing) moves things on; resending the whole window would, on a
        // merely slow peer, bury it in duplicates.
        st.rc.retries_left -= 1;
        dev.data().counters.inc(Counter::Retransmits);
        resend_oldest(&dev, q, st);
    }
    st.dev = Some(dev);
    arm_timer(q, st);
}

/// Resends everything from the WQE holding PSN `psn` on (go-back-N).
fn resend_from(dev: &Device, q: &QpShared, st: &mut QpState, psn: u32) {
    let Some(av) = st.attrs.av else { return };
    let mtu = path_mtu(st);
    let geo = st.sq.ring.geometry();
    let mut idx = st.sq.consumer;
    while idx != st.rc.send_index {
        let s = st.rc.sent.get(idx as usize).copied().unwrap_or_default();
        if psn_le(psn, s.last_psn) {
            // The WQE holding `psn` resumes there; later ones are resent whole.
            let from = if psn_le(s.first_psn, psn) { psn } else { s.first_psn };
            let _ = send_wqe(dev, q, st, idx, &av, mtu, transport_of(q), Some(from));
        }
        idx = geo.next(idx);
    }
}

/// Resends all packets of the oldest unacknowledged WQE.
fn resend_oldest(dev: &Device, q: &QpShared, st: &mut QpState) {
    let Some(av) = st.attrs.av else { return };
    let idx = st.sq.consumer;
    let first = st.rc.sent.get(idx as usize).map_or(0, |s| s.first_psn);
    let mtu = path_mtu(st);
    let _ = send_wqe(dev, q, st, idx, &av, mtu, transport_of(q), Some(first));
}

/// A response (ACK, NAK, READ response) arrived for the requester.
pub(super) fn on_response(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) {
    if !matches!(st.attrs.state, state::RTS | state::SQD) {
        return;
    }
    let psn = p.bth.psn;
    if p.has(flags::READ) {
        on_read_response(dev, q, st, p, payload);
        return;
    }
    match Syndrome::decode(p.aeth.syndrome) {
        Some(Syndrome::Ack { .. }) => ack_through(q, st, psn),
        Some(Syndrome::Nak(NakCode::PsnSequenceError)) => {
            // Everything before `psn` arrived; resend from there.
            ack_through(q, st, Psn::new(psn).add(0xff_ffff).get());
            dev.data().counters.inc(Counter::RcvdSeqNak);
            resend_from(dev, q, st, psn);
        }
        Some(Syndrome::RnrNak { timer }) => {
            // The responder had no receive posted: resend from that PSN after
            // the delay it asked for, as often as `rnr_retry` allows (7: always).
            dev.data().counters.inc(Counter::RcvdRnrNak);
            ack_through(q, st, Psn::new(psn).add(0xff_ffff).get());
            if st.attrs.rnr_retry != 7 && st.rc.rnr_left == 0 {
                dev.data().counters.inc(Counter::RetryRnrExceeded);
                if st.sq.consumer != st.rc.send_index {
                    let idx = st.sq.consumer;
                    complete_through(q, st, idx, cqe::status::RNR_RETRY_EXC_ERR);
                }
                return;
            }
            if st.attrs.rnr_retry != 7 {
                st.rc.rnr_left -= 1;
            }
            st.rc.rnr_psn = Some(psn);
            st.rc.rnr_delay_us = crate::proto::aeth::rnr_timer_us(timer);
            return;
        }
        Some(Syndrome::Nak(code)) => {
            ack_through(q, st, Psn::new(psn).add(0xff_ffff).get());
            let status = match code {
                NakCode::RemoteAccessError => cqe::status::REM_ACCESS_ERR,
                NakCode::RemoteOperationalError => cqe::status::REM_OP_ERR,
                _ => cqe::status::REM_INV_REQ_ERR,
            };
            if st.sq.consumer != st.rc.send_index {
                let idx = st.sq.consumer;
                complete_through(q, st, idx, status);
            }
        }
        None => dev.data().counters.inc(Counter::RcvdMalformed),
    }
    progress(dev, q, st);
}

fn on_read_response(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) {
    let data = dev.data();
    // Earlier non-READ WQEs are implicitly acknowledged by a response for a later PSN.
    ack_through(q, st, Psn::new(p.bth.psn).add(0xff_ffff).get());
    if st.sq.consumer == st.rc.send_index {
        return;
    }
    let idx = st.sq.consumer;
    let s = st.rc.sent.get(idx as usize).copied().unwrap_or_default();
    if !s.is_read {
        return;
    }
    let off = Psn::new(p.bth.psn).diff(Psn::new(s.first_psn));
    if off < 0 || !psn_le(p.bth.psn, s.last_psn) {
        // A duplicate or a response from the future: ignore it.
        return;
    }
    let offset = off as usize * path_mtu(st) as usize;
    let wqe = st.rc.wqe(idx);
    let num_sge = u32_at(wqe, DMA_NUM_SGE) as usize;
    let status = scatter_sges(data, q.pdn, wqe, SGES, num_sge, offset, payload);
    if status != cqe::status::SUCCESS {
        complete_through(q, st, idx, status);
        return;
    }
    if p.bth.psn == s.last_psn {
        complete_through(q, st, idx, cqe::status::SUCCESS);
        retired(st);
        progress(dev, q, st);
    }
}

/// Sends an ACK or NAK for `psn`.
fn acknowledge(dev: &Device, q: &QpShared, st: &QpState, psn: u32, syndrome: Syndrome) {
    let Some(av) = st.attrs.av else { return };
    let pkt = wire::Packet {
        bth: wire::Bth {
            opcode: op::RC | op::ACKNOWLEDGE,
            pkey: limits::DEFAULT_PKEY,
            dest_qpn: st.attrs.dest_qp_num,
            psn,
            ..wire::Bth::default()
        },
        aeth: wire::Aeth { syndrome: syndrome.encode(), msn: st.rc.msn & 0x00ff_ffff },
        ..wire::Packet::default()
    };
    let _ = emit(dev, &av, (q.qpn, st.attrs.dest_qp_num), &pkt, 0, |_| cqe::status::SUCCESS);
}

const ACK: Syndrome = Syndrome::Ack { credits: crate::proto::aeth::CREDITS_INVALID };

/// A request arrived for the responder.
pub(super) fn on_request(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) {
    let data = dev.data();
    if !matches!(st.attrs.state, state::RTR | state::RTS | state::SQD | state::SQE) {
        data.counters.inc(Counter::RcvdDropped);
        return;
    }
    let rc = transport_of(q) == Transport::Rc;
    let psn = p.bth.psn;
    match resp_seq::classify(Psn::new(st.rc.epsn), Psn::new(psn)) {
        PsnClass::Expected => st.rc.nak_sent = false,
        PsnClass::Duplicate => {
            data.counters.inc(Counter::DuplicateRequest);
            if rc {
                if p.has(flags::READ) {
                    // Re-execute a duplicate READ: its responses may have been lost.
                    let _ = read_request(dev, q, st, p);
                } else {
                    let last = psn_add(st.rc.epsn, 0xff_ffff);
                    acknowledge(dev, q, st, last, ACK);
                }
            }
            return;
        }
        PsnClass::OutOfSequence => {
            data.counters.inc(Counter::OutOfSeqRequest);
            if rc {
                if !st.rc.nak_sent {
                    st.rc.nak_sent = true;
                    let e = st.rc.epsn;
                    acknowledge(dev, q, st, e, Syndrome::Nak(NakCode::PsnSequenceError));
                }
            } else {
                // UC: the message in progress is lost; resynchronise on this packet.
                st.rc.opseq.abort();
                // A receive WQE taken for the lost message serves the next one.
                st.rc.recv_offset = 0;
                st.rc.write = None;
                st.rc.epsn = psn;
                on_request(dev, q, st, p, payload);
            }
            return;
        }
    }
    match st.rc.opseq.check(p.bth.opcode) {
        SeqOutcome::Accept => {}
        SeqOutcome::RestartMessage => {
            // As above: the abandoned message's receive WQE is reused.
            st.rc.recv_offset = 0;
            st.rc.write = None;
        }
        SeqOutcome::InvalidRequest => return fatal(dev, q, st, psn, NakCode::InvalidRequest),
        SeqOutcome::DropUntilNewMessage | SeqOutcome::Ignore => return,
    }
    let pos = Position::of(p.bth.opcode);
    if let Some(pos) = pos {
        if !p.has(flags::READ) && resp_seq::validate_payload(pos, payload.len(), path_mtu(st)).is_err() {
            return fatal(dev, q, st, psn, NakCode::InvalidRequest);
        }
    }
    let ok = if p.has(flags::SEND) {
        send_request(dev, q, st, p, payload)
    } else if p.has(flags::WRITE) {
        write_request(dev, q, st, p, payload)
    } else if p.has(flags::READ) && rc {
        read_request(dev, q, st, p)
    } else {
        Err(NakCode::InvalidRequest)
    };
    match ok {
        Ok(Progress::Done) => {}
        Ok(Progress::Rnr) => {
            // No receive posted: RNR NAK, and the packet is not consumed.
            st.rc.opseq.abort();
            if rc {
                data.counters.inc(Counter::SendRnrNak);
                let timer = st.attrs.min_rnr_timer;
                acknowledge(dev, q, st, psn, Syndrome::RnrNak { timer });
            }
            return;
        }
        Err(code) => return fatal(dev, q, st, psn, code),
    }
    if !p.has(flags::READ) {
        st.rc.epsn = psn_add(psn, 1);
        if p.has(flags::END) {
            st.rc.msn = st.rc.msn.wrapping_add(1);
        }
        if rc && p.bth.ack_req {
            acknowledge(dev, q, st, psn, ACK);
        }
    }
}

enum Progress {
    Done,
    Rnr,
}

/// NAKs a request the responder cannot execute and moves the QP to the error state.
fn fatal(dev: &Device, q: &QpShared, st: &mut QpState, psn: u32, code: NakCode) {
    if transport_of(q) == Transport::Rc {
        acknowledge(dev, q, st, psn, Syndrome::Nak(code));
    }
    if st.rc.recv_active {
        // The receive WQE in progress completes in error.
        let status = if code == NakCode::RemoteAccessError { cqe::status::REM_ACCESS_ERR } else { cqe::status::REM_INV_REQ_ERR };
        post_recv_cqe(q, st, status, 0, 0, None);
    }
    st.attrs.state = state::ERR;
    flush(q, st);
}

/// Starts a message on the next receive WQE; false if none is posted. A WQE
/// still held from an abandoned message (UC loss) is used first.
fn take_recv(q: &QpShared, st: &mut QpState) -> bool {
    if !st.rc.recv_active && !super::take_recv(q, st) {
        return false;
    }
    st.rc.recv_active = true;
    st.rc.recv_offset = 0;
    true
}

fn post_recv_cqe(q: &QpShared, st: &mut QpState, status: u32, opcode: u32, byte_len: u32, imm: Option<u32>) {
    let mut flags = 0;
    if imm.is_some() {
        flags |= cqe::wc_flags::WITH_IMM;
    }
    let c = Cqe {
        wr_id: wr_id_of(&st.recv_wqe),
        status,
        opcode,
        byte_len,
        imm_or_inv: imm.map_or(0, |i| i.to_be()),
        qp_num: q.qpn,
        src_qp: st.attrs.dest_qp_num,
        wc_flags: flags,
        port_num: PORT as u8,
        ..Cqe::default()
    };
    st.rc.recv_active = false;
    let _ = CqData::post(q.recv_cq.get(), &c, q.core_qp as *mut sys::ib_qp, false);
}

fn send_request(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) -> core::result::Result<Progress, NakCode> {
    if p.has(flags::START) && !take_recv(q, st) {
        return Ok(Progress::Rnr);
    }
    if !st.rc.recv_active {
        return Err(NakCode::InvalidRequest);
    }
    let num_sge = (u32_at(&st.recv_wqe, RWQE_NUM_SGE) as usize).min(q.recv_max_sge as usize);
    let status = scatter_sges(dev.data(), q.recv_pdn, &st.recv_wqe, RSGES, num_sge, st.rc.recv_offset, payload);
    if status != cqe::status::SUCCESS {
        // Too long for the posted buffers, or a bad local key: the receive fails.
        post_recv_cqe(q, st, status, cqe::opcode::RECV, 0, None);
        return Err(NakCode::InvalidRequest);
    }
    st.rc.recv_offset += payload.len();
    if p.has(flags::END) {
        let imm = p.has(flags::IMMDT).then_some(p.imm);
        let len = st.rc.recv_offset as u32;
        post_recv_cqe(q, st, cqe::status::SUCCESS, cqe::opcode::RECV, len, imm);
    }
    Ok(Progress::Done)
}

/// Resolves an R_Key for `access` over `va..va + len`.
fn remote_mr(data: &DevData, q: &QpShared, st: &QpState, rkey: u32, va: u64, len: u64, access: u32) -> core::result::Result<Arc<mr::MrInner>, NakCode> {
    if st.attrs.access & access == 0 {
        return Err(NakCode::RemoteAccessError);
    }
    let mr = data.mrs.lookup(rkey).ok_or(NakCode::RemoteAccessError)?;
    let end = va.checked_add(len).ok_or(NakCode::RemoteAccessError)?;
    if mr.rkey != rkey || mr.pdn() != q.pdn || mr.access() & access == 0 || va < mr.iova || end > mr.iova.saturating_add(mr.len) {
        return Err(NakCode::RemoteAccessError);
    }
    Ok(mr)
}

fn write_request(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) -> core::result::Result<Progress, NakCode> {
    let data = dev.data();
    if p.has(flags::RETH) {
        let r = p.reth;
        let mr = remote_mr(data, q, st, r.rkey, r.va, u64::from(r.dma_len), mr::access::REMOTE_WRITE)?;
        st.rc.write = Some((mr, r.va));
    }
    let Some((mr, va)) = st.rc.write.as_ref() else { return Err(NakCode::InvalidRequest) };
    let va = *va;
    if !payload.is_empty() && mr.write(va, payload).is_err() {
        return Err(NakCode::RemoteAccessError);
    }
    if let Some((_, next)) = st.rc.write.as_mut() {
        *next = va + payload.len() as u64;
    }
    if p.has(flags::END) {
        let written = p.reth.dma_len;
        st.rc.write = None;
        if p.has(flags::IMMDT) {
            if !take_recv(q, st) {
                return Ok(Progress::Rnr);
            }
            post_recv_cqe(q, st, cqe::status::SUCCESS, cqe::opcode::RECV_RDMA_WITH_IMM, written, Some(p.imm));
        }
    }
    Ok(Progress::Done)
}

fn read_request(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet) -> core::result::Result<Progress, NakCode> {
    let data = dev.data();
    let r = p.reth;
    let mr = remote_mr(data, q, st, r.rkey, r.va, u64::from(r.dma_len), mr::access::REMOTE_READ)?;
    let Some(av) = st.attrs.av else { return Err(NakCode::RemoteOperationalError) };
    let mtu = path_mtu(st);
    let Ok(msg) = Message::new(MsgKind::ReadRequest, Transport::Rc, r.dma_len, mtu) else {
        return Err(NakCode::InvalidRequest);
    };
    let n = msg.psn_count();
    let is_new = Psn::new(p.bth.psn) == Psn::new(st.rc.epsn);
    if is_new {
        st.rc.msn = st.rc.msn.wrapping_add(1);
    }
    for i in 0..n {
        let first = i == 0;
        let last = i + 1 == n;
        let opcode = op::RC
            | match (first, last) {
                (true, true) => op::READ_RESPONSE_ONLY,
                (true, false) => op::READ_RESPONSE_FIRST,
                (false, true) => op::READ_RESPONSE_LAST,
                (false, false) => op::READ_RESPONSE_MIDDLE,
            };
        let off = u64::from(i) * u64::from(mtu);
        let len = (u64::from(r.dma_len) - off).min(u64::from(mtu)) as usize;
        let pkt = wire::Packet {
            bth: wire::Bth {
                opcode,
                pad: ((4 - len % 4) % 4) as u8,
                pkey: limits::DEFAULT_PKEY,
                dest_qpn: st.attrs.dest_qp_num,
                psn: psn_add(p.bth.psn, i),
                ..wire::Bth::default()
            },
            aeth: wire::Aeth { syndrome: ACK.encode(), msn: st.rc.msn & 0x00ff_ffff },
            ..wire::Packet::default()
        };
        let status = emit(dev, &av, (q.qpn, st.attrs.dest_qp_num), &pkt, len, |dst| {
            if mr.read(r.va + off, dst).is_ok() { cqe::status::SUCCESS } else { cqe::status::LOC_PROT_ERR }
        });
        if status != cqe::status::SUCCESS {
            return Err(NakCode::RemoteOperationalError);
        }
    }
    if is_new {
        st.rc.epsn = psn_add(p.bth.psn, n);
    }
    Ok(Progress::Done)
}
