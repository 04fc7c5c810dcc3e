// SPDX-License-Identifier: GPL-2.0
//! The responder: executes the requests of the peer in PSN order and
//! answers them. SENDs land in receive WQEs, WRITEs in regions their R_Key
//! names (every packet checked against the region and the length the RETH
//! announced), READs are taken as responder resources and answered by the
//! QP's send work a budget at a time. Atomics are executed on arrival and
//! kept as resources with the value they found, which answers a duplicate.
//! Acknowledgements go out in PSN order: behind READ responses and atomic
//! acknowledgements still to send, they wait.

use super::resp_res::{answer_atomics_before_nak, atomic_request, atomic_write_request, duplicate_executed, duplicate_read, executed_kind, flush_request, read_request};
use super::*;
use crate::proto::access;
use crate::proto::wqe::RecvWqe;
use crate::proto::aeth::{NakCode, Syndrome};
use crate::proto::read_res::{ReadRes, ReadResources, MAX as MAX_READS};
use crate::proto::resp_seq::{self, OpSeq, PsnClass, Position, SeqOutcome};
use crate::proto::wire::{flags, op};
use kernel::alloc::KVVec;

pub(super) const ACK: Syndrome = Syndrome::Ack { credits: crate::proto::aeth::CREDITS_INVALID };

/// A WRITE message in progress: where its next payload goes and how much of
/// the length its RETH announced is left. The region is looked up by key for
/// every packet, so a deregistered or changed region stops the message.
#[derive(Clone, Copy)]
struct WriteCtx {
    rkey: u32,
    next_va: u64,
    remaining: u32,
    total: u32,
}

/// Storage of the READ resources, allocated with the QP.
pub(in crate::qp) struct ReadSlots(KVVec<Option<ReadRes>>);

impl AsRef<[Option<ReadRes>]> for ReadSlots {
    fn as_ref(&self) -> &[Option<ReadRes>] {
        &self.0
    }
}

impl AsMut<[Option<ReadRes>]> for ReadSlots {
    fn as_mut(&mut self) -> &mut [Option<ReadRes>] {
        &mut self.0
    }
}

/// Responder state of a QP.
pub(in crate::qp) struct RespState {
    /// Next expected PSN, message sequence number.
    pub(super) epsn: u32,
    pub(super) msn: u32,
    pub(super) opseq: OpSeq,
    /// A PSN sequence NAK was sent for the current gap.
    pub(super) nak_sent: bool,
    /// SEND in progress: a receive WQE taken (in `st.recv_wqe`), bytes placed.
    pub(super) recv_active: bool,
    pub(super) recv_offset: usize,
    write: Option<WriteCtx>,
    pub(super) reads: ReadResources<ReadSlots>,
    /// The newest acknowledgement, held back until the READ responses before
    /// it are sent.
    pub(super) held_ack: Option<(u32, Syndrome)>,
    /// The newest ACK asked for (AckReq) and not sent yet: ACKs are
    /// cumulative, so one, sent when the QP's runner has no packet left
    /// (or before any other response), answers every request of a batch.
    ack_owed: Option<u32>,
}

impl RespState {
    pub(super) fn new(transport: Transport) -> Result<Self> {
        let mut slots = KVVec::with_capacity(MAX_READS, GFP_KERNEL_ACCOUNT)?;
        slots.resize(MAX_READS, None, GFP_KERNEL_ACCOUNT)?;
        Ok(Self {
            epsn: 0,
            msn: 0,
            opseq: OpSeq::new(transport),
            nak_sent: false,
            recv_active: false,
            recv_offset: 0,
            write: None,
            reads: ReadResources::new(ReadSlots(slots)),
            held_ack: None,
            ack_owed: None,
        })
    }

    /// A new connection: the peer's first PSN is `rq_psn`, and it may have up
    /// to `max_dest_rd_atomic` READs outstanding.
    pub(in crate::qp) fn reset(&mut self, rq_psn: u32, max_dest_rd_atomic: u8) {
        self.epsn = rq_psn;
        self.msn = 0;
        self.nak_sent = false;
        self.recv_active = false;
        self.recv_offset = 0;
        self.write = None;
        self.reads.reset(u32::from(max_dest_rd_atomic));
        self.held_ack = None;
        self.ack_owed = None;
        let t = self.opseq.transport();
        self.opseq = OpSeq::new(t);
    }

    /// `max_dest_rd_atomic` changed without a new connection (SQD to SQD).
    pub(in crate::qp) fn set_read_limit(&mut self, max_dest_rd_atomic: u8) {
        self.reads.set_limit(u32::from(max_dest_rd_atomic));
    }

    /// The QP entered the error state: nothing more is answered. Returns
    /// whether a receive WQE was taken for a message that will not finish.
    pub(in crate::qp) fn stop(&mut self) -> bool {
        self.reads.reset(0);
        self.held_ack = None;
        self.ack_owed = None;
        self.write = None;
        core::mem::take(&mut self.recv_active)
    }
}

/// Sends an ACK or NAK for `psn`.
pub(super) fn acknowledge(dev: &Device, q: &QpShared, st: &QpState, psn: u32, syndrome: Syndrome) {
    let Some(av) = st.attrs.av else { return };
    let pkt = wire::Packet {
        bth: wire::Bth {
            opcode: op::RC | op::ACKNOWLEDGE,
            pkey: limits::DEFAULT_PKEY,
            dest_qpn: st.attrs.params.dest_qp_num,
            psn,
            ..wire::Bth::default()
        },
        aeth: wire::Aeth { syndrome: syndrome.encode(), msn: st.rc.resp.msn & 0x00ff_ffff },
        ..wire::Packet::default()
    };
    send_response(dev, q, &av, (q.qpn(), st.attrs.params.dest_qp_num), &pkt);
}

/// Sends a response without payload (ACK, NAK, atomic acknowledgement).
/// Nothing waits for it here: a loss, counted by `emit` or on the wire, is
/// repaired when the requester times out and repeats the request, which is
/// then answered again.
pub(super) fn send_response(dev: &Device, q: &QpShared, av: &RoceAv, flow: (u32, u32), pkt: &wire::Packet) {
    match emit(dev, av, q.route.as_ref(), flow, pkt, &q.tx, 0, |_| WcStatus::Success) {
        WcStatus::Success => {}
        _lost => {}
    }
}

/// Acknowledges `psn`: an ACK when the QP's runner has no packet left
/// ([`send_owed_ack`]), anything else now, after the ACK owed before it.
fn reply(dev: &Device, q: &QpShared, st: &mut QpState, psn: u32, syndrome: Syndrome) {
    if matches!(syndrome, Syndrome::Ack { .. }) {
        st.rc.resp.ack_owed = Some(psn);
        return;
    }
    send_owed_ack(dev, q, st);
    reply_now(dev, q, st, psn, syndrome);
}

/// Sends the ACK owed, if any (the runner has no packet left, or another
/// response must follow it).
pub(in crate::qp) fn send_owed_ack(dev: &Device, q: &QpShared, st: &mut QpState) {
    if let Some(psn) = st.rc.resp.ack_owed.take() {
        reply_now(dev, q, st, psn, ACK);
    }
}

/// Acknowledges `psn` now, or once the READ responses before it are out.
/// A held NAK is never replaced by an ACK: the requester must learn of it.
fn reply_now(dev: &Device, q: &QpShared, st: &mut QpState, psn: u32, syndrome: Syndrome) {
    if st.rc.resp.reads.busy() {
        let held_nak = matches!(st.rc.resp.held_ack, Some((_, s)) if !matches!(s, Syndrome::Ack { .. }));
        if !(held_nak && matches!(syndrome, Syndrome::Ack { .. })) {
            st.rc.resp.held_ack = Some((psn, syndrome));
        }
    } else {
        acknowledge(dev, q, st, psn, syndrome);
    }
}

/// A request arrived for the responder.
pub(in crate::qp) fn on_request(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet, payload: &[u8]) {
    let data = dev.data();
    if !st.attrs.state.receives() {
        data.counters.inc(Counter::RcvdDropped);
        crate::trace::drop(dev, q.qpn(), Counter::RcvdDropped);
        return;
    }
    let rc = transport_of(q) == Transport::Rc;
    // READs, atomics and the other executed requests are answered from
    // their resources: the ACK owed for the requests before goes first.
    if rc && !(p.has(flags::SEND) || p.has(flags::WRITE)) {
        send_owed_ack(dev, q, st);
    }
    let psn = p.bth.psn;
    match resp_seq::classify(Psn::new(st.rc.resp.epsn), Psn::new(psn)) {
        PsnClass::Expected => st.rc.resp.nak_sent = false,
        PsnClass::Duplicate => {
            q.count(&data.counters, Counter::DuplicateRequest);
            if rc {
                if p.has(flags::READ) {
                    duplicate_read(dev, q, st, p);
                } else if let Some(kind) = executed_kind(p) {
                    duplicate_executed(dev, q, st, p, kind);
                } else {
                    let last = psn_add(st.rc.resp.epsn, 0xff_ffff);
                    reply(dev, q, st, last, ACK);
                }
            }
            return;
        }
        PsnClass::OutOfSequence => {
            q.count(&data.counters, Counter::OutOfSeqRequest);
            crate::trace::drop(dev, q.qpn(), Counter::OutOfSeqRequest);
            if rc {
                if !st.rc.resp.nak_sent {
                    st.rc.resp.nak_sent = true;
                    let e = st.rc.resp.epsn;
                    reply(dev, q, st, e, Syndrome::Nak(NakCode::PsnSequenceError));
                }
            } else {
                // UC: the message in progress is lost; resynchronise on this packet.
                // A receive WQE taken for the lost message serves the next one.
                let r = &mut st.rc.resp;
                r.opseq.abort();
                r.recv_offset = 0;
                r.write = None;
                r.epsn = psn;
                on_request(dev, q, st, p, payload);
            }
            return;
        }
    }
    let opseq_before = st.rc.resp.opseq;
    match st.rc.resp.opseq.check(p.bth.opcode) {
        SeqOutcome::Accept => {}
        SeqOutcome::RestartMessage => {
            // As above: the abandoned message's receive WQE is reused.
            st.rc.resp.recv_offset = 0;
            st.rc.resp.write = None;
        }
        SeqOutcome::InvalidRequest => return fatal(dev, q, st, psn, NakCode::InvalidRequest),
        SeqOutcome::DropUntilNewMessage | SeqOutcome::Ignore => return,
    }
    if let Some(pos) = Position::of(p.bth.opcode) {
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
    } else if p.has(flags::ATOMIC) && rc {
        atomic_request(dev, q, st, p)
    } else if p.has(flags::FLUSH) && rc {
        flush_request(dev, q, st, p)
    } else if p.has(flags::ATOMIC_WRITE) && rc {
        atomic_write_request(dev, q, st, p, payload)
    } else {
        Err(NakCode::InvalidRequest)
    };
    match ok {
        Ok(Progress::Done) => {}
        Ok(Progress::Drop) => {
            // Not executed: the requester sends it again after its timeout.
            st.rc.resp.opseq = opseq_before;
            data.counters.inc(Counter::RcvdDropped);
            crate::trace::drop(dev, q.qpn(), Counter::RcvdDropped);
            return;
        }
        Ok(Progress::Rnr) => {
            // No receive posted: RNR NAK, and the packet is not consumed. The
            // requester resends from this PSN: the first packet of a SEND, or the
            // last one of a WRITE with immediate, whose earlier packets stand.
            st.rc.resp.opseq = opseq_before;
            if rc {
                q.count(&data.counters, Counter::SendRnrNak);
                crate::trace::drop(dev, q.qpn(), Counter::SendRnrNak);
                let timer = st.attrs.params.min_rnr_timer;
                reply(dev, q, st, psn, Syndrome::RnrNak { timer });
                // The rest of the message, already on its way, is out of sequence
                // now: the RNR NAK stands for it too.
                st.rc.resp.nak_sent = true;
            }
            return;
        }
        Err(code) => return fatal(dev, q, st, psn, code),
    }
    // READs and executed requests are answered from their resources.
    if !p.has(flags::READ) && executed_kind(p).is_none() {
        st.rc.resp.epsn = psn_add(psn, 1);
        if p.has(flags::END) {
            st.rc.resp.msn = st.rc.resp.msn.wrapping_add(1);
        }
        if rc && p.bth.ack_req {
            reply(dev, q, st, psn, ACK);
        }
    }
}

pub(super) enum Progress {
    Done,
    Rnr,
    /// Not taken now, and not an error: dropped for the requester to resend.
    Drop,
}

/// RC: NAKs a request the responder cannot execute and moves the QP to the
/// error state. UC has no NAKs and no such errors: the message is dropped
/// (IBTA 9.7.5.2.x, as rdma_rxe does), and a receive WQE it had taken serves
/// the next one.
pub(super) fn fatal(dev: &Device, q: &QpShared, st: &mut QpState, psn: u32, code: NakCode) {
    if transport_of(q) == Transport::Uc {
        dev.data().counters.inc(Counter::RcvdDropped);
        crate::trace::drop(dev, q.qpn(), Counter::RcvdDropped);
        let r = &mut st.rc.resp;
        r.opseq.abort();
        r.write = None;
        r.recv_offset = 0;
        return;
    }
    // The one trace of the refusal on this side: the requester's error
    // completion names the NAK, the responder's QP only changes state.
    let why = match code {
        NakCode::RemoteAccessError => Counter::RespRemoteAccessErr,
        NakCode::RemoteOperationalError => Counter::RespRemoteOperationalErr,
        _ => Counter::RespInvalidRequest,
    };
    q.count(&dev.data().counters, why);
    crate::trace::drop(dev, q.qpn(), why);
    answer_atomics_before_nak(dev, q, st, Psn::new(psn));
    send_owed_ack(dev, q, st);
    acknowledge(dev, q, st, psn, Syndrome::Nak(code));
    if st.rc.resp.recv_active {
        // The receive WQE in progress completes in error.
        let status = if code == NakCode::RemoteAccessError { WcStatus::RemAccessErr } else { WcStatus::RemInvReqErr };
        post_recv_cqe(q, st, status, 0, 0, RecvEx::None);
        crate::trace::cqe_error(dev, q.qpn(), status, code.name());
    }
    crate::trace::qp_state(dev, q.qpn(), st.attrs.state, State::Err);
    st.attrs.state = State::Err;
    flush(q, st);
}

/// Starts a message on the next receive WQE; false if none is posted. A WQE
/// still held from an abandoned message (UC loss) is used first.
fn take_recv(q: &QpShared, st: &mut QpState) -> bool {
    if !st.rc.resp.recv_active && !super::take_recv(q, st) {
        return false;
    }
    st.rc.resp.recv_active = true;
    st.rc.resp.recv_offset = 0;
    true
}

/// What a receive completion carries beside the data.
enum RecvEx {
    None,
    /// Immediate data (host order).
    Imm(u32),
    /// The R_Key a SEND with Invalidate invalidated, with the proof that a
    /// fast-registration MR's pages are no longer accessible (none for a
    /// window's key).
    Invalidated(u32, Option<ib::Invalidated>),
}

fn post_recv_cqe(q: &QpShared, st: &mut QpState, status: WcStatus, opcode: u32, byte_len: u32, ex: RecvEx) {
    let (flags, imm_or_inv, proof) = match ex {
        RecvEx::None => (0, 0, None),
        // Immediate data travels in network order, an invalidated key in host order.
        RecvEx::Imm(imm) => (cqe::wc_flags::WITH_IMM, imm.to_be(), None),
        RecvEx::Invalidated(rkey, proof) => (cqe::wc_flags::WITH_INVALIDATE, rkey, proof),
    };
    let c = Cqe {
        wr_id: RecvWqe::new(&st.recv_wqe).wr_id(),
        status,
        opcode,
        byte_len,
        imm_or_inv,
        qp_num: q.qpn(),
        src_qp: st.attrs.params.dest_qp_num,
        wc_flags: flags,
        port_num: PORT as u8,
        ..Cqe::default()
    };
    st.rc.resp.recv_active = false;
    // A full CQ is reported to the consumer as a CQ error event.
    let _ = q.recv_cq.with(|cq| CqData::post_invalidation(cq, &c, proof, q.core_qp, false));
}

fn send_request(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) -> core::result::Result<Progress, NakCode> {
    if p.has(flags::START) && !take_recv(q, st) {
        return Ok(Progress::Rnr);
    }
    if !st.rc.resp.recv_active {
        return Err(NakCode::InvalidRequest);
    }
    let status = match RecvWqe::new(&st.recv_wqe).sges(q.recv_max_sge) {
        Some(sges) => scatter_sges(dev.data(), q.recv_pdn, sges, st.rc.resp.recv_offset, payload),
        // More SGEs than the queue allows: the receive fails like a UD one.
        None => WcStatus::LocQpOpErr,
    };
    if status != WcStatus::Success {
        // Too long for the posted buffers, or a bad local key: the receive fails.
        post_recv_cqe(q, st, status, cqe::opcode::RECV, 0, RecvEx::None);
        return Err(NakCode::InvalidRequest);
    }
    st.rc.resp.recv_offset += payload.len();
    if st.rc.resp.recv_offset > limits::MAX_MSG_SIZE as usize {
        // Longer than any message may be (and than byte_len can say).
        post_recv_cqe(q, st, WcStatus::LocLenErr, cqe::opcode::RECV, 0, RecvEx::None);
        return Err(NakCode::InvalidRequest);
    }
    if p.has(flags::END) {
        let len = st.rc.resp.recv_offset as u32;
        let ex = if p.has(flags::IETH) {
            // SEND with Invalidate: the named fast-registration key of this
            // QP's PD, or type 2B window bound to this QP, stops working
            // before the consumer sees the message. Any other key is an
            // invalid request (IBTA class J).
            let Ok(proof) = dev.data().mrs.invalidate(p.inv_rkey, q.key_user(), mr::Invalidator::Peer) else {
                post_recv_cqe(q, st, WcStatus::RemInvReqErr, cqe::opcode::RECV, len, RecvEx::None);
                return Err(NakCode::InvalidRequest);
            };
            dev.data().counters.inc(Counter::RemoteInv);
            RecvEx::Invalidated(p.inv_rkey, proof)
        } else if p.has(flags::IMMDT) {
            RecvEx::Imm(p.imm)
        } else {
            RecvEx::None
        };
        post_recv_cqe(q, st, WcStatus::Success, cqe::opcode::RECV, len, ex);
    }
    Ok(Progress::Done)
}

/// Resolves an R_Key (a region's or a window's) for `access` over
/// `va..va + len`: the region, the key use its copies name, and where in
/// the region the access lands. Each copy checks the key again, so a
/// region invalidated meanwhile refuses it; a later packet resolves the
/// key again, so a window unbound meanwhile refuses it.
pub(super) fn remote_mr(data: &DevData, q: &QpShared, st: &QpState, rkey: u32, va: u64, len: u64, access: u32) -> core::result::Result<mr::Target, NakCode> {
    resolve(data, q, st, rkey, access, Some((va, len)))
}

/// Resolves an R_Key for `access` (every right it names), wherever in the
/// region or window the access falls.
pub(super) fn remote_key(data: &DevData, q: &QpShared, st: &QpState, rkey: u32, access: u32) -> core::result::Result<mr::Target, NakCode> {
    resolve(data, q, st, rkey, access, None)
}

fn resolve(data: &DevData, q: &QpShared, st: &QpState, rkey: u32, access: u32, range: Option<(u64, u64)>) -> core::result::Result<mr::Target, NakCode> {
    if st.attrs.params.access & access != access {
        return Err(NakCode::RemoteAccessError);
    }
    data.mrs.remote(rkey, q.key_user(), access, range).map_err(|_| NakCode::RemoteAccessError)
}

fn write_request(dev: &Device, q: &QpShared, st: &mut QpState, p: &wire::Packet, payload: &[u8]) -> core::result::Result<Progress, NakCode> {
    let data = dev.data();
    if p.has(flags::RETH) {
        let r = p.reth;
        // The whole announced range must lie in the region; later packets stay
        // inside it. A zero-length WRITE names no memory and its R_Key is not checked.
        if r.dma_len != 0 {
            remote_mr(data, q, st, r.rkey, r.va, u64::from(r.dma_len), access::REMOTE_WRITE)?;
        }
        st.rc.resp.write = Some(WriteCtx { rkey: r.rkey, next_va: r.va, remaining: r.dma_len, total: r.dma_len });
    }
    let Some(w) = st.rc.resp.write else { return Err(NakCode::InvalidRequest) };
    // More payload than the RETH announced, or a message that ends short of it.
    let len = u32::try_from(payload.len()).map_err(|_| NakCode::InvalidRequest)?;
    let remaining = w.remaining.checked_sub(len).ok_or(NakCode::InvalidRequest)?;
    let end = p.has(flags::END);
    if end && remaining != 0 {
        return Err(NakCode::InvalidRequest);
    }
    // Take the receive WQE before changing anything: with none posted the
    // packet is RNR NAKed and resent, and must then find the same state.
    if end && p.has(flags::IMMDT) && !take_recv(q, st) {
        return Ok(Progress::Rnr);
    }
    if !payload.is_empty() {
        let t = remote_mr(data, q, st, w.rkey, w.next_va, u64::from(len), access::REMOTE_WRITE)?;
        t.mr.write(t.by, t.va, payload).map_err(|_| NakCode::RemoteAccessError)?;
    }
    // A region's addresses do not wrap (see `reg_user`), so neither does this.
    let next_va = w.next_va.checked_add(u64::from(len)).ok_or(NakCode::RemoteAccessError)?;
    st.rc.resp.write = Some(WriteCtx { next_va, remaining, ..w });
    if end {
        st.rc.resp.write = None;
        if p.has(flags::IMMDT) {
            post_recv_cqe(q, st, WcStatus::Success, cqe::opcode::RECV_RDMA_WITH_IMM, w.total, RecvEx::Imm(p.imm));
        }
    }
    Ok(Progress::Done)
}
