// SPDX-License-Identifier: GPL-2.0
//! The responder's resources: READs, atomics, FLUSH and ATOMIC WRITE are
//! taken as responder resources (at most `max_dest_rd_atomic` at once).
//! Atomics, FLUSH and ATOMIC WRITE execute on arrival and keep what they
//! found, which answers a duplicate without executing it again; READs are
//! answered by the QP's send work a budget of packets at a time, in PSN
//! order with the acknowledgements held behind them.

use super::resp::{acknowledge, fatal, remote_key, remote_mr, send_response, Progress, ACK};
use super::*;
use crate::proto::access;
use crate::proto::aeth::NakCode;
use crate::proto::atomic::{self, AtomicOp, ATOMIC_BYTES};
use crate::proto::read_res::{Executed, ReadRes, ReadResError, ResKind};
use crate::proto::wire::{flags, flush, op};

/// A new READ: checked, taken as a responder resource (at most
/// `max_dest_rd_atomic` being answered at once) and answered by the send work.
pub(super) fn read_request(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet) -> core::result::Result<Progress, NakCode> {
    let r = p.reth;
    if r.dma_len != 0 {
        remote_mr(dev.data(), q, st, r.rkey, r.va, u64::from(r.dma_len), access::REMOTE_READ)?;
    }
    let res = ReadRes::new(Psn::new(p.bth.psn), r.va, r.rkey, r.dma_len, path_mtu(st)).ok_or(NakCode::InvalidRequest)?;
    st.rc.resp.reads.admit(res).map_err(|_| NakCode::InvalidRequest)?;
    st.rc.resp.msn = st.rc.resp.msn.wrapping_add(1);
    st.rc.resp.epsn = res.end_psn().get();
    reschedule(q);
    Ok(Progress::Done)
}

/// A new atomic: checked, given a responder resource (they count against
/// `max_dest_rd_atomic` as READs do), executed at once on the region so
/// later requests see its result, and acknowledged with the value it found
/// by the send work, in PSN order.
pub(super) fn atomic_request(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet) -> core::result::Result<Progress, NakCode> {
    let a = p.atmeth;
    let op = AtomicOp::of_request(p.bth.opcode, &a).ok_or(NakCode::InvalidRequest)?;
    if !atomic::aligned(a.va) {
        return Err(NakCode::InvalidRequest);
    }
    let t = remote_mr(dev.data(), q, st, a.rkey, a.va, ATOMIC_BYTES, access::REMOTE_ATOMIC)?;
    // The resource first: a request refused for lack of one changes nothing.
    let psn = Psn::new(p.bth.psn);
    let res = st.rc.resp.reads.admit(ReadRes::atomic(psn, a.va, a.rkey, 0)).map_err(|_| NakCode::InvalidRequest)?;
    let orig = t.mr.atomic(t.by, t.va, op).map_err(|e| match e {
        mr::MrError::Misaligned => NakCode::InvalidRequest,
        _ => NakCode::RemoteAccessError,
    })?;
    res.kind = ResKind::Atomic { orig };
    st.rc.resp.msn = st.rc.resp.msn.wrapping_add(1);
    st.rc.resp.epsn = psn.add(1).get();
    reschedule(q);
    Ok(Progress::Done)
}

/// The kind of a request executed on arrival and answered by one response
/// from its resource: an atomic, a FLUSH or an ATOMIC WRITE.
pub(super) fn executed_kind(p: &wire::Packet) -> Option<Executed> {
    if p.has(flags::ATOMIC) {
        Some(Executed::Atomic)
    } else if p.has(flags::FLUSH) {
        Some(Executed::Flush)
    } else if p.has(flags::ATOMIC_WRITE) {
        Some(Executed::AtomicWrite)
    } else {
        None
    }
}

/// A FLUSH: the placement type and level are checked, the key must grant
/// the rights the type names (`IB_ACCESS_FLUSH_*`, on the QP and the
/// region) over the RETH's range, or over the whole region at the region
/// level. Every earlier request was executed already; a full fence makes
/// their stores visible before the response says so. rroce advertises
/// global visibility only: no region can hold the persistence right. A
/// FLUSH need not fit `max_dest_rd_atomic` (see `admit_flush`).
pub(super) fn flush_request(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet) -> core::result::Result<Progress, NakCode> {
    let (f, r) = (p.feth, p.reth);
    if f.placement == 0 || f.placement & !flush::PLACEMENTS != 0 || f.selectivity > flush::LEVEL_MR {
        return Err(NakCode::InvalidRequest);
    }
    let mut rights = 0;
    if f.placement & flush::GLOBAL != 0 {
        rights |= access::FLUSH_GLOBAL;
    }
    if f.placement & flush::PERSISTENT != 0 {
        rights |= access::FLUSH_PERSISTENT;
    }
    if f.selectivity == flush::LEVEL_RANGE {
        remote_mr(dev.data(), q, st, r.rkey, r.va, u64::from(r.dma_len), rights)?;
    } else {
        remote_key(dev.data(), q, st, r.rkey, rights)?;
    }
    let psn = Psn::new(p.bth.psn);
    if st.rc.resp.reads.admit_flush(ReadRes::executed(Executed::Flush, psn, r.va, r.rkey, r.dma_len)).is_err() {
        // Every resource is still answering: no room to remember this one.
        return Ok(Progress::Drop);
    }
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    dev.data().counters.inc(Counter::Flush);
    st.rc.resp.msn = st.rc.resp.msn.wrapping_add(1);
    st.rc.resp.epsn = psn.add(1).get();
    reschedule(q);
    Ok(Progress::Done)
}

/// An ATOMIC WRITE: exactly 8 bytes of payload for an 8-byte aligned
/// address the key lets the peer write, stored as one fully ordered
/// exchange, so a reader sees the old or the new value and every earlier
/// write before it.
pub(super) fn atomic_write_request(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet, payload: &[u8]) -> core::result::Result<Progress, NakCode> {
    let r = p.reth;
    let value: [u8; 8] = payload.try_into().map_err(|_| NakCode::InvalidRequest)?;
    if u64::from(r.dma_len) != ATOMIC_BYTES || p.bth.pad != 0 || !atomic::aligned(r.va) {
        return Err(NakCode::InvalidRequest);
    }
    let t = remote_mr(dev.data(), q, st, r.rkey, r.va, ATOMIC_BYTES, access::REMOTE_WRITE)?;
    let psn = Psn::new(p.bth.psn);
    st.rc.resp.reads.admit(ReadRes::executed(Executed::AtomicWrite, psn, r.va, r.rkey, r.dma_len)).map_err(|_| NakCode::InvalidRequest)?;
    // The bytes land in memory as they came, as rdma_rxe stores them.
    t.mr.atomic(t.by, t.va, AtomicOp::Store { value: u64::from_ne_bytes(value) }).map_err(|e| match e {
        mr::MrError::Misaligned => NakCode::InvalidRequest,
        _ => NakCode::RemoteAccessError,
    })?;
    dev.data().counters.inc(Counter::AtomicWrite);
    st.rc.resp.msn = st.rc.resp.msn.wrapping_add(1);
    st.rc.resp.epsn = psn.add(1).get();
    reschedule(q);
    Ok(Progress::Done)
}

/// An atomic, FLUSH or ATOMIC WRITE seen before: its response was lost. It
/// is sent again from the resource (for an atomic, with the value the
/// original found); the request is not executed twice. One that matches no
/// resource is dropped.
pub(super) fn duplicate_executed(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet, kind: Executed) {
    let (va, rkey) = match kind {
        Executed::Atomic => (p.atmeth.va, p.atmeth.rkey),
        Executed::Flush | Executed::AtomicWrite => (p.reth.va, p.reth.rkey),
    };
    match st.rc.resp.reads.replay_executed(kind, Psn::new(p.bth.psn), va, rkey) {
        Ok(()) => reschedule(q),
        Err(ReadResError::NotFound | ReadResError::Mismatch | ReadResError::Busy) => {
            dev.data().counters.inc(Counter::RcvdDropped);
            crate::trace::drop(dev, q.qpn(), Counter::RcvdDropped);
        }
    }
}

/// A READ request seen before: its responses may have been lost. It is
/// answered again from the resource of the original request, and only if it
/// asks for (the rest of) exactly that; anything else is dropped.
pub(super) fn duplicate_read(dev: &Device, q: &Arc<QpShared>, st: &mut QpState, p: &wire::Packet) {
    let r = p.reth;
    let mtu = path_mtu(st);
    match st.rc.resp.reads.replay(Psn::new(p.bth.psn), r.va, r.rkey, r.dma_len, mtu) {
        Ok(()) => reschedule(q),
        Err(ReadResError::NotFound | ReadResError::Mismatch | ReadResError::Busy) => {
            // Busy cannot come from a replay; listed to keep the match exhaustive.
            dev.data().counters.inc(Counter::RcvdDropped);
            crate::trace::drop(dev, q.qpn(), Counter::RcvdDropped);
        }
    }
}

/// Sends the response of an executed request, `res`, and counts its
/// resource answered: an atomic acknowledgement with the value the atomic
/// found, or for a FLUSH or ATOMIC WRITE a READ RESPONSE ONLY without data.
fn send_executed_response(dev: &Device, q: &QpShared, av: &RoceAv, flow: (u32, u32), st: &mut QpState, res: &ReadRes) {
    let (opcode, atomic_orig) = match res.kind {
        ResKind::Atomic { orig } => (op::ATOMIC_ACKNOWLEDGE, orig),
        _ => (op::READ_RESPONSE_ONLY, 0),
    };
    let pkt = wire::Packet {
        bth: wire::Bth {
            opcode: op::RC | opcode,
            pkey: limits::DEFAULT_PKEY,
            dest_qpn: st.attrs.params.dest_qp_num,
            psn: res.first_psn.get(),
            ..wire::Bth::default()
        },
        aeth: wire::Aeth { syndrome: ACK.encode(), msn: st.rc.resp.msn & 0x00ff_ffff },
        atomic_orig,
        ..wire::Packet::default()
    };
    send_response(dev, q, av, flow, &pkt);
    if let Some(p) = st.rc.resp.reads.pending() {
        p.next = p.n_psn;
    }
}

/// Before a NAK ends the QP: atomics, FLUSHes and ATOMIC WRITEs executed
/// before the NAKed PSN, whose responses the send work has not sent yet,
/// are answered first (and an ACK held behind them), so the requester
/// completes them (an atomic with the value found) rather than failing
/// them with the NAK. A READ still being answered stops
/// this: what follows it is answered in order or not at all.
pub(super) fn answer_atomics_before_nak(dev: &Device, q: &QpShared, st: &mut QpState, nak_psn: Psn) {
    let Some(av) = st.attrs.av else { return };
    let flow = (q.qpn(), st.attrs.params.dest_qp_num);
    while let Some(res) = st.rc.resp.reads.pending().copied() {
        // The NAKed request itself may hold a resource (taken before it
        // failed): it was not executed and gets the NAK only.
        if res.kind.executed().is_none() || !res.first_psn.before(nak_psn) {
            return;
        }
        release_held_ack_before(dev, q, st, &res);
        send_executed_response(dev, q, &av, flow, st, &res);
    }
    release_held_ack(dev, q, st);
}

/// Sends the held acknowledgement if it is for requests before `res`, which
/// has sent none of its responses yet: it goes first.
fn release_held_ack_before(dev: &Device, q: &QpShared, st: &mut QpState, res: &ReadRes) {
    if let Some((psn, syndrome)) = st.rc.resp.held_ack {
        if res.next == 0 && Psn::new(psn).before(res.first_psn) {
            st.rc.resp.held_ack = None;
            acknowledge(dev, q, st, psn, syndrome);
        }
    }
}

/// Sends the held acknowledgement, if any: nothing it waited for is left.
fn release_held_ack(dev: &Device, q: &QpShared, st: &mut QpState) {
    if let Some((psn, syndrome)) = st.rc.resp.held_ack.take() {
        acknowledge(dev, q, st, psn, syndrome);
    }
}

/// Sends READ responses and atomic acknowledgements, at most [`BUDGET`]
/// per run, then the acknowledgement held back behind them. Runs in the
/// QP's send work.
pub(in crate::qp) fn respond(dev: &Device, q: &Arc<QpShared>, st: &mut QpState) {
    if transport_of(q) != Transport::Rc || !st.attrs.state.receives() {
        return;
    }
    let Some(av) = st.attrs.av else { return };
    let data = dev.data();
    let mtu = path_mtu(st);
    let flow = (q.qpn(), st.attrs.params.dest_qp_num);
    let mut budget = BUDGET;
    while let Some(res) = st.rc.resp.reads.pending().copied() {
        release_held_ack_before(dev, q, st, &res);
        if budget == 0 {
            reschedule(q);
            return;
        }
        // The responder sends READ data: a CNP cut this QP's rate too.
        if let Some(wait_ns) = super::cc::pace_wait(dev, st) {
            super::cc::pace(dev, q, wait_ns);
            return;
        }
        if res.kind.executed().is_some() {
            send_executed_response(dev, q, &av, flow, st, &res);
            budget -= 1;
            continue;
        }
        let Some(r) = res.response(res.next, mtu) else { break };
        // The region is checked again for every response: deregistered or
        // changed meanwhile, it ends the READ. A zero-length READ reads nothing.
        let mr = if r.len == 0 {
            None
        } else {
            match remote_mr(data, q, st, res.rkey, r.va, u64::from(r.len), access::REMOTE_READ) {
                Ok(mr) => Some(mr),
                Err(code) => return fatal(dev, q, st, r.psn.get(), code),
            }
        };
        let opcode = op::RC
            | match (r.first, r.last) {
                (true, true) => op::READ_RESPONSE_ONLY,
                (true, false) => op::READ_RESPONSE_FIRST,
                (false, true) => op::READ_RESPONSE_LAST,
                (false, false) => op::READ_RESPONSE_MIDDLE,
            };
        let len = r.len as usize;
        let pkt = wire::Packet {
            bth: wire::Bth {
                opcode,
                pad: ((4 - len % 4) % 4) as u8,
                pkey: limits::DEFAULT_PKEY,
                dest_qpn: st.attrs.params.dest_qp_num,
                psn: r.psn.get(),
                ..wire::Bth::default()
            },
            aeth: wire::Aeth { syndrome: ACK.encode(), msn: st.rc.resp.msn & 0x00ff_ffff },
            ..wire::Packet::default()
        };
        let status = emit(dev, &av, q.route.as_ref(), flow, &pkt, &q.tx, len, |dst| match &mr {
            Some(t) => match t.mr.read(t.by, t.va, dst) {
                Ok(()) => WcStatus::Success,
                // Invalidated or deregistered since the check above.
                Err(mr::MrError::Denied) => WcStatus::RemAccessErr,
                Err(_) => WcStatus::LocProtErr,
            },
            None => WcStatus::Success,
        });
        match status {
            WcStatus::Success => {}
            WcStatus::RemAccessErr => return fatal(dev, q, st, r.psn.get(), NakCode::RemoteAccessError),
            _ => return fatal(dev, q, st, r.psn.get(), NakCode::RemoteOperationalError),
        }
        super::cc::sent(dev, st, u64::from(r.len));
        if let Some(p) = st.rc.resp.reads.pending() {
            p.next += 1;
        }
        budget -= 1;
    }
    release_held_ack(dev, q, st);
}
