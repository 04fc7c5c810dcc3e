// SPDX-License-Identifier: GPL-2.0
//! The requester: turns the WQEs of the send ring into request packets.
//!
//! A WQE is copied out of the shared ring once, when it is started; its PSNs
//! are reserved then. A transmit cursor (WQE, packet) moves through the
//! started WQEs, so a long message goes out a budget of packets per run,
//! within a window of PSNs beyond the last acknowledged one, and a resend
//! is a move of the cursor back, paced like any other transmission.

use super::comp::{complete_local_head, complete_through};
use super::*;
use crate::proto::mw::BindWr;
use crate::proto::wqe::{FastRegWr, SendWqe};
use crate::proto::segment::{Message, MsgKind};
use crate::proto::atomic::ATOMIC_BYTES;
use crate::proto::wire::{flush, op};
use crate::proto::ack_request::{timeout_needs_every_ack, AckRequests, PacketFacts};
use kernel::alloc::KVVec;

/// PSNs beyond the last acknowledged one a requester may send: bounds the
/// data a loss can force it to resend and the responder's reordering work.
const WINDOW: u32 = 128;

/// What the requester knows of a WQE it started.
#[derive(Clone, Copy, Default)]
pub(super) struct Sent {
    pub(super) first_psn: u32,
    /// PSN of the last packet of the message (READ: of the last response).
    pub(super) last_psn: u32,
    pub(super) wc_opcode: u32,
    pub(super) kind: Option<MsgKind>,
    pub(super) len: u32,
    pub(super) signaled: bool,
    /// The WQE could not be built or sent (bad key, length): it completes
    /// with this status once every WQE before it completed.
    pub(super) local_error: Option<WcStatus>,
    /// READ: responses received, in order.
    pub(super) received: u32,
    /// READ: the responses from this one on were asked for again after a gap.
    pub(super) rerequested: Option<u32>,
    /// A local operation (REG_MR, LOCAL_INV), executed when started: it
    /// completes as soon as every WQE before it has.
    pub(super) executed: bool,
}

impl Sent {
    pub(super) fn is_read(&self) -> bool {
        self.kind == Some(MsgKind::ReadRequest)
    }

    pub(super) fn is_atomic(&self) -> bool {
        self.kind.is_some_and(MsgKind::is_atomic)
    }

    /// A FLUSH or ATOMIC WRITE: answered by a READ response without data.
    pub(super) fn is_placement(&self) -> bool {
        matches!(self.kind, Some(MsgKind::Flush | MsgKind::AtomicWrite))
    }

    pub(super) fn takes_rd_atomic(&self) -> bool {
        self.kind.is_some_and(MsgKind::takes_rd_atomic)
    }
}

/// Requester state of a QP.
pub(in crate::qp) struct ReqState {
    /// Transmit cursor: the WQE being sent and its next packet (READ: the
    /// first response still to ask for).
    pub(super) send_index: u32,
    pub(super) send_seg: u32,
    /// One past the newest started WQE; `sq.consumer..sent_end` are
    /// outstanding.
    pub(super) sent_end: u32,
    /// After a timeout resends the oldest WQE alone, where the cursor goes back to.
    pub(super) resume: Option<(u32, u32)>,
    /// A WQE failed (the last started one): no new WQE starts; the ones
    /// before it are still sent and resent until acknowledged.
    pub(super) stopped: bool,
    /// Started READs and atomics not yet completed: at most `max_rd_atomic`
    /// (at least one), the responder resources the peer promised.
    pub(super) reads_outstanding: u32,
    /// The newest PSN an acknowledgement may cover: the last packet sent
    /// (for a READ request, its last response). Acknowledgements and NAKs
    /// beyond it are forged or confused and ignored.
    pub(super) psn_high: u32,
    /// Per SQ slot: what was started.
    pub(super) sent: KVVec<Sent>,
    /// Per SQ slot: the kernel's copy of the WQE.
    wqes: KVVec<u8>,
    slot: usize,
    /// The last PSN the responder acknowledged.
    pub(super) acked_psn: u32,
    /// Bumped whenever an acknowledgement made progress; the timer resends
    /// only if it did not move for a whole timeout.
    pub(super) acked_epoch: u32,
    pub(super) armed_epoch: u32,
    /// Transport retries left for the oldest WQE (`retry_cnt`).
    pub(super) retries_left: u8,
    /// RNR retries left (`rnr_retry`, 7 = unlimited).
    pub(super) rnr_left: u8,
    /// An RNR NAK asked to resend from this PSN once its timer expires.
    pub(super) rnr_psn: Option<u32>,
    pub(super) rnr_delay_us: u32,
    /// Since when (monotonic ns) timeouts have not been counted because
    /// packets were still in the host; `None` while none was excused.
    pub(super) held_since: Option<u64>,
    /// Nanoseconds of holds that ended, not yet added to `tx_held_ms`.
    held_ended_ns: u64,
    /// Local qdisc drops in a row of the packet at the cursor.
    local_drops: u32,
    /// Which packets ask for an acknowledgement.
    pub(super) ack_requests: AckRequests,
    /// The newest PSN and the time (ns) when the ACK probe was armed
    /// (`retry::arm_probe`).
    pub(super) probe_armed: Option<(u32, u64)>,
    /// The LOCAL_INV in this SQ slot executed and has not completed: the
    /// proof its completion gives a kernel consumer. At most one: a
    /// LOCAL_INV starts only once every WQE before it completed.
    pub(super) invalidated: Option<(u32, ib::Invalidated)>,
}

/// Local drops in a row of one packet before it counts as a retry timeout
/// (a jiffy apart: about a second at HZ 250).
const MAX_LOCAL_DROPS: u32 = 256;

impl ReqState {
    pub(super) fn new(sq_slots: usize, slot: usize) -> Result<Self> {
        let mut sent = KVVec::with_capacity(sq_slots, GFP_KERNEL_ACCOUNT)?;
        sent.resize(sq_slots, Sent::default(), GFP_KERNEL_ACCOUNT)?;
        let mut wqes = KVVec::with_capacity(sq_slots * slot, GFP_KERNEL_ACCOUNT)?;
        wqes.resize(sq_slots * slot, 0, GFP_KERNEL_ACCOUNT)?;
        let mut s = Self {
            send_index: 0,
            send_seg: 0,
            sent_end: 0,
            resume: None,
            stopped: false,
            reads_outstanding: 0,
            psn_high: 0,
            sent,
            wqes,
            slot,
            acked_psn: 0,
            acked_epoch: 0,
            armed_epoch: 0,
            retries_left: 7,
            rnr_left: 7,
            rnr_psn: None,
            rnr_delay_us: 0,
            held_since: None,
            held_ended_ns: 0,
            local_drops: 0,
            ack_requests: AckRequests::new(),
            probe_armed: None,
            invalidated: None,
        };
        s.reset();
        Ok(s)
    }

    /// Back to an empty send queue (QP reset).
    pub(in crate::qp) fn reset(&mut self) {
        self.send_index = 0;
        self.send_seg = 0;
        self.sent_end = 0;
        self.resume = None;
        self.stopped = false;
        self.reads_outstanding = 0;
        self.rnr_psn = None;
        self.held_since = None;
        self.local_drops = 0;
        self.ack_requests.reset();
        self.probe_armed = None;
        self.invalidated = None;
        self.start(0);
    }

    /// The send queue was flushed up to `consumer`: nothing is outstanding.
    pub(in crate::qp) fn flushed(&mut self, consumer: u32) {
        self.sent_end = consumer;
        self.send_index = consumer;
        self.send_seg = 0;
        self.resume = None;
        self.reads_outstanding = 0;
        // Flushed WQEs complete in error: no proof is owed to any of them.
        self.invalidated = None;
    }

    /// The first PSN the requester sends is `sq_psn`.
    pub(in crate::qp) fn start(&mut self, sq_psn: u32) {
        self.acked_psn = psn_add(sq_psn, 0xff_ffff);
        self.psn_high = self.acked_psn;
    }

    /// Whether `psn` lies between the oldest outstanding PSN and the newest
    /// one sent: only then may a response name it.
    pub(super) fn psn_outstanding(&self, oldest: u32, psn: u32) -> bool {
        psn_le(oldest, psn) && psn_le(psn, self.psn_high)
    }

    fn sent_up_to(&mut self, psn: u32) {
        if Psn::new(psn).diff(Psn::new(self.psn_high)) > 0 {
            self.psn_high = psn;
        }
    }

    pub(in crate::qp) fn set_retry_budgets(&mut self, retry_cnt: u8, rnr_retry: u8) {
        self.retries_left = retry_cnt;
        self.rnr_left = rnr_retry;
    }

    pub(super) fn wqe(&self, idx: u32) -> &[u8] {
        let at = idx as usize * self.slot;
        self.wqes.get(at..at + self.slot).unwrap_or(&[])
    }

    pub(super) fn sent(&self, idx: u32) -> Sent {
        self.sent.get(idx as usize).copied().unwrap_or_default()
    }

    /// An acknowledgement covered `psn`. If that is news, the window moves
    /// and the retry timer and budgets see progress.
    pub(super) fn note_acked(&mut self, psn: u32, retry_cnt: u8) {
        if Psn::new(psn).diff(Psn::new(self.acked_psn)) > 0 {
            self.acked_psn = psn;
            self.acked_epoch = self.acked_epoch.wrapping_add(1);
            self.retries_left = retry_cnt;
            self.end_hold();
        }
    }

    /// Packets no longer wait in the host, or the peer answered: a hold, if
    /// one was on, ends now.
    pub(super) fn end_hold(&mut self) {
        if let Some(since) = self.held_since.take() {
            let held = crate::net::ktime_ns().saturating_sub(since);
            self.held_ended_ns = self.held_ended_ns.saturating_add(held);
        }
    }

    /// Whole milliseconds of ended holds, taken for the counter.
    fn take_held_ms(&mut self) -> u64 {
        let ms = self.held_ended_ns / 1_000_000;
        self.held_ended_ns -= ms * 1_000_000;
        ms
    }
}

/// Adds the whole milliseconds of the QP's ended holds to `tx_held_ms`.
pub(super) fn count_held_time(dev: &Device, st: &mut QpState) {
    let held_ms = st.rc.req.take_held_ms();
    if held_ms != 0 {
        dev.data().counters.add(Counter::TxHeldMs, held_ms);
    }
}

/// Whether the window lets PSN `psn` go out.
fn window_open(st: &QpState, psn: u32) -> bool {
    Psn::new(psn).diff(Psn::new(st.rc.req.acked_psn)) <= WINDOW as i32
}

/// Whether the window holds back the next WQE's start: in RTS with nothing
/// in flight to send, a send round would stop at the window before it
/// started anything, and only an acknowledgement opens it again. A READ
/// stream's responses each acknowledge one PSN; most of them open nothing.
pub(super) fn start_held_by_window(q: &QpShared, st: &QpState) -> bool {
    st.attrs.state == State::Rts
        && transport_of(q) == Transport::Rc
        && st.rc.req.send_index == st.rc.req.sent_end
        && !window_open(st, st.attrs.params.sq_psn)
}

/// Sends what the send ring holds, as far as the window allows, at most
/// [`BUDGET`] packets; queues the send work to go on if the budget ran out.
/// If the newest packet asked for no acknowledgement, the ACK probe is
/// armed.
pub(in crate::qp) fn progress(dev: &Device, q: &Arc<QpShared>, st: &mut QpState) {
    send_what_is_posted(dev, q, st);
    super::retry::arm_probe(q, st);
}

fn send_what_is_posted(dev: &Device, q: &Arc<QpShared>, st: &mut QpState) {
    let Some(av) = st.attrs.av else { return };
    let mtu = path_mtu(st);
    let transport = transport_of(q);
    let mut budget = BUDGET;
    // Waiting out an RNR delay: the timer resends.
    if st.rc.req.rnr_psn.is_some() {
        return;
    }
    // In SQD the WQEs on the wire still complete, and may be sent again;
    // no new one starts.
    while st.attrs.state.completes_sends() {
        let geo = st.sq.ring.geometry();
        let idx = st.rc.req.send_index;
        if idx == st.rc.req.sent_end {
            if st.attrs.state != State::Rts {
                break;
            }
            // Nothing in flight to send: start the next posted WQE, if its
            // first PSN fits the window. The producer index is the user's: a
            // WQE starts only if it lies between the consumer and the producer,
            // however the producer moved.
            let posted = st.sq.posted();
            if st.rc.req.stopped || geo.count(idx, st.sq.consumer) >= posted {
                break;
            }
            if transport == Transport::Rc && !window_open(st, st.attrs.params.sq_psn) {
                break;
            }
            match start_wqe(dev, q, st, idx, mtu, transport) {
                Ok(true) if st.rc.req.sent(idx).executed => {
                    // Nothing goes on the wire: on to the next WQE.
                    st.rc.req.send_index = geo.next(idx);
                    st.rc.req.send_seg = 0;
                    complete_local_head(q, st);
                    continue;
                }
                Ok(true) => {}
                // A READ beyond the peer's responder resources waits for one to complete.
                Ok(false) => break,
                Err(status) => {
                    fail_wqe(q, st, idx, status);
                    return;
                }
            }
        }
        if st.rc.req.sent(idx).local_error.is_some() {
            // Everything before the failed WQE is out; it never goes on the wire.
            st.rc.req.send_index = st.rc.req.sent_end;
            st.rc.req.resume = None;
            break;
        }
        if budget == 0 {
            reschedule(q);
            return;
        }
        match send_packets(dev, q, st, idx, &av, mtu, transport, &mut budget) {
            Ok(true) => {
                // A resend of the oldest WQE alone goes back to where it interrupted.
                let (next, seg) = st.rc.req.resume.take().unwrap_or((geo.next(idx), 0));
                st.rc.req.send_index = next;
                st.rc.req.send_seg = seg;
                if transport == Transport::Uc {
                    // Nothing acknowledges UC: the WQE is done once sent.
                    complete_through(q, st, idx, WcStatus::Success);
                }
            }
            // The window is closed or the budget spent: the loop decides which.
            Ok(false) if budget == 0 => {}
            Ok(false) => break,
            Err(status) => {
                fail_wqe(q, st, idx, status);
                return;
            }
        }
    }
}

/// Copies the WQE in slot `idx` out of the ring, checks it and reserves its
/// PSNs; it becomes the newest outstanding one. `Ok(false)`: a READ or
/// atomic that must wait for a responder resource, or a fenced WQE that
/// waits for those before it; not started.
fn start_wqe(dev: &Device, q: &QpShared, st: &mut QpState, idx: u32, mtu: u32, transport: Transport) -> core::result::Result<bool, WcStatus> {
    let geo = st.sq.ring.geometry();
    let slot = st.rc.req.slot;
    let at = idx as usize * slot;
    if let Some(dst) = st.rc.req.wqes.get_mut(at..at + slot) {
        st.sq.ring.read_slot(idx, dst);
    }
    if let Some(local) = LocalOp::of(&SendWqe::new(st.rc.req.wqe(idx)), q.kernel_owned) {
        return start_local(dev, q, st, idx, local);
    }
    let (op, fenced) = {
        let wqe = SendWqe::new(st.rc.req.wqe(idx));
        (operation(wqe.opcode(), transport), wqe.fenced())
    };
    let takes_rd_atomic = op.is_some_and(|(kind, _)| kind.takes_rd_atomic());
    if takes_rd_atomic && st.rc.req.reads_outstanding >= u32::from(st.attrs.params.max_rd_atomic).max(1) {
        return Ok(false);
    }
    // A fenced WQE waits for the READs and atomics before it: the responder
    // may execute a later request before it has read a READ's data.
    if fenced && st.rc.req.reads_outstanding > 0 {
        return Ok(false);
    }
    // Whatever happens next, the WQE counts as started.
    st.rc.req.sent_end = geo.next(idx);
    st.rc.req.send_seg = 0;
    let (kind, wc_opcode) = op.ok_or(WcStatus::LocQpOpErr)?;
    let wqe = SendWqe::new(st.rc.req.wqe(idx));
    let inline = wqe.inline() && kind.has_payload() && kind != MsgKind::AtomicWrite;
    let len = if kind.is_atomic() {
        // The value found comes back into the first 8 bytes of the local buffer.
        let sges = wqe.sges(st.sq.max_sge).ok_or(WcStatus::LocLenErr)?;
        if sges.total_len() < ATOMIC_BYTES {
            return Err(WcStatus::LocLenErr);
        }
        ATOMIC_BYTES as u32
    } else if kind == MsgKind::AtomicWrite {
        // The value travels in the WQE itself.
        ATOMIC_BYTES as u32
    } else if let Some(f) = wqe.flush() {
        if f.placement & !flush::PLACEMENTS != 0 || f.placement == 0 || f.selectivity > flush::LEVEL_MR {
            return Err(WcStatus::LocQpOpErr);
        }
        f.len
    } else if inline {
        let l = wqe.inline_len();
        if l > st.sq.max_inline {
            return Err(WcStatus::LocLenErr);
        }
        l
    } else {
        let sges = wqe.sges(st.sq.max_sge).ok_or(WcStatus::LocLenErr)?;
        u32::try_from(sges.total_len()).map_err(|_| WcStatus::LocLenErr)?
    };
    let signaled = wqe.signaled();
    q.task.placement.note_wqe(q.sq_sig_all || signaled, kind == MsgKind::ReadRequest);
    let msg = Message::new(kind, transport, len, mtu).map_err(|_| WcStatus::LocLenErr)?;
    let first_psn = st.attrs.params.sq_psn;
    if let Some(s) = st.rc.req.sent.get_mut(idx as usize) {
        *s = Sent {
            first_psn,
            last_psn: psn_add(first_psn, msg.psn_count() - 1),
            wc_opcode,
            kind: Some(kind),
            len,
            signaled: q.sq_sig_all || signaled,
            local_error: None,
            received: 0,
            rerequested: None,
            executed: false,
        };
    }
    st.attrs.params.sq_psn = psn_add(first_psn, msg.psn_count());
    if takes_rd_atomic {
        st.rc.req.reads_outstanding += 1;
    }
    Ok(true)
}

/// A work request the requester executes itself, without the wire.
enum LocalOp {
    /// LOCAL_INV of a fast-registration key or a type 2B window.
    Invalidate { rkey: u32, signaled: bool },
    /// REG_MR (kernel consumers only).
    Register { reg: FastRegWr, fenced: bool, signaled: bool },
    /// BIND_MW of a memory window.
    Bind { wr: BindWr, fenced: bool, signaled: bool },
}

impl LocalOp {
    fn of(wqe: &SendWqe<'_>, kernel_owned: bool) -> Option<Self> {
        let (fenced, signaled) = (wqe.fenced(), wqe.signaled());
        match wqe.opcode() {
            cqe::wr_opcode::LOCAL_INV => Some(Self::Invalidate { rkey: wqe.invalidate_rkey(), signaled }),
            cqe::wr_opcode::REG_MR if kernel_owned => Some(Self::Register { reg: wqe.fast_reg()?, fenced, signaled }),
            cqe::wr_opcode::BIND_MW => Some(Self::Bind { wr: wqe.bind_mw()?, fenced, signaled }),
            _ => None,
        }
    }
}

/// Starts local operation `op` in slot `idx`: executes it now, so the WQEs
/// after it see its effect, and marks it to complete in order. An
/// invalidation, and a fenced registration, first wait for every WQE before
/// them to complete: a READ's data or a resend may still use the region
/// (rdma_rxe and hardware fence invalidations too). One that fails
/// completes in error, moving the QP to the error state, as rdma_rxe's do.
fn start_local(dev: &Device, q: &QpShared, st: &mut QpState, idx: u32, op: LocalOp) -> core::result::Result<bool, WcStatus> {
    let (fenced, signaled) = match op {
        LocalOp::Invalidate { signaled, .. } => (true, signaled),
        LocalOp::Register { fenced, signaled, .. } | LocalOp::Bind { fenced, signaled, .. } => (fenced, signaled),
    };
    if fenced && st.sq.consumer != idx {
        return Ok(false);
    }
    let geo = st.sq.ring.geometry();
    st.rc.req.sent_end = geo.next(idx);
    st.rc.req.send_seg = 0;
    let mrs = &dev.data().mrs;
    let (done, wc_opcode, counter) = match op {
        LocalOp::Invalidate { rkey, .. } => {
            // A kernel consumer's request, which the proof for its completion takes: it
            // names the key (the WQE's copy does too).
            let posted = Option::as_mut(&mut *q.ksq.lock()).and_then(|p| p.take_local_inv(idx));
            let rkey = posted.as_ref().map_or(rkey, ib::LocalInvPosted::key);
            let by = mr::Invalidator::LocalInv(posted);
            let done = mrs.invalidate(rkey, q.key_user(), by).map_err(|_| WcStatus::LocQpOpErr);
            let done = done.map(|proof| st.rc.req.invalidated = proof.map(|p| (idx, p)));
            (done, cqe::opcode::LOCAL_INV, Counter::LocalInv)
        }
        LocalOp::Register { reg, .. } => {
            let r = mr::FastReg { post: reg.post, key: reg.key, access: reg.access, iova: reg.iova, len: reg.len };
            (mrs.register_fast(q.pdn, &r).map_err(|_| WcStatus::LocQpOpErr), cqe::opcode::REG_MR, Counter::FastReg)
        }
        // A refused bind completes with a bind error (IBTA 10.6.7.2.1).
        LocalOp::Bind { wr, .. } => (mrs.bind_window(q.key_user(), &wr).map_err(|_| WcStatus::MwBindErr), cqe::opcode::BIND_MW, Counter::MwBind),
    };
    done?;
    dev.data().counters.inc(counter);
    // No PSNs: its last one is the one before the next WQE's first.
    let psn = st.attrs.params.sq_psn;
    if let Some(s) = st.rc.req.sent.get_mut(idx as usize) {
        *s = Sent {
            first_psn: psn,
            last_psn: psn_add(psn, 0xff_ffff),
            wc_opcode,
            signaled: q.sq_sig_all || signaled,
            executed: true,
            ..Sent::default()
        };
    }
    Ok(true)
}

/// The operation a send WQE's `IB_UVERBS_WR_*` opcode asks of `transport`,
/// and its completion opcode; `None` for one it does not carry.
fn operation(wr_opcode: u32, transport: Transport) -> Option<(MsgKind, u32)> {
    let rc = transport == Transport::Rc;
    Some(match wr_opcode {
        cqe::wr_opcode::SEND => (MsgKind::Send, cqe::opcode::SEND),
        cqe::wr_opcode::SEND_WITH_IMM => (MsgKind::SendImm, cqe::opcode::SEND),
        cqe::wr_opcode::SEND_WITH_INV if rc => (MsgKind::SendInv, cqe::opcode::SEND),
        cqe::wr_opcode::RDMA_WRITE => (MsgKind::Write, cqe::opcode::RDMA_WRITE),
        cqe::wr_opcode::RDMA_WRITE_WITH_IMM => (MsgKind::WriteImm, cqe::opcode::RDMA_WRITE),
        cqe::wr_opcode::RDMA_READ if rc => (MsgKind::ReadRequest, cqe::opcode::RDMA_READ),
        cqe::wr_opcode::ATOMIC_CMP_AND_SWP if rc => (MsgKind::CompareSwap, cqe::opcode::COMP_SWAP),
        cqe::wr_opcode::ATOMIC_FETCH_AND_ADD if rc => (MsgKind::FetchAdd, cqe::opcode::FETCH_ADD),
        cqe::wr_opcode::FLUSH if rc => (MsgKind::Flush, cqe::opcode::FLUSH),
        cqe::wr_opcode::ATOMIC_WRITE if rc => (MsgKind::AtomicWrite, cqe::opcode::ATOMIC_WRITE),
        _ => return None,
    })
}

/// A WQE that cannot be built or sent completes in error, but only after the
/// WQEs before it: they are on the wire and complete when acknowledged (a
/// READ's data may still be on its way). Nothing is sent after it.
fn fail_wqe(q: &QpShared, st: &mut QpState, idx: u32, status: WcStatus) {
    let wc_opcode = cqe::wc_opcode_for_wr(SendWqe::new(st.rc.req.wqe(idx)).opcode()).unwrap_or(cqe::opcode::SEND);
    if let Some(s) = st.rc.req.sent.get_mut(idx as usize) {
        *s = Sent { wc_opcode, signaled: true, local_error: Some(status), ..*s };
    }
    let r = &mut st.rc.req;
    r.stopped = true;
    if r.send_index == idx {
        r.send_index = r.sent_end;
        r.send_seg = 0;
        r.resume = None;
    }
    complete_local_head(q, st);
}

/// Sends packets of the started WQE `idx` from the cursor on, while the
/// window and `budget` allow. `Ok(true)` once its last packet is out.
#[allow(clippy::too_many_arguments)]
fn send_packets(
    dev: &Device,
    q: &Arc<QpShared>,
    st: &mut QpState,
    idx: u32,
    av: &RoceAv,
    mtu: u32,
    transport: Transport,
    budget: &mut u32,
) -> core::result::Result<bool, WcStatus> {
    let data = dev.data();
    let s = st.rc.req.sent(idx);
    if s.executed {
        // A local operation the cursor passes again after a rewind.
        return Ok(true);
    }
    let kind = s.kind.ok_or(WcStatus::LocQpOpErr)?;
    let msg = Message::new(kind, transport, s.len, mtu).map_err(|_| WcStatus::LocLenErr)?;
    let rc = transport == Transport::Rc;
    let (remote_addr, rkey, imm, inv_rkey, solicited, inline) = {
        let wqe = SendWqe::new(st.rc.req.wqe(idx));
        (wqe.remote_addr(), wqe.rkey(), wqe.imm_data(), wqe.invalidate_rkey(), wqe.solicited(), wqe.inline())
    };
    let flow = (q.qpn(), st.attrs.params.dest_qp_num);
    if let Some(a) = SendWqe::new(st.rc.req.wqe(idx)).atomic().filter(|_| s.is_atomic()) {
        let psn = s.first_psn;
        if !window_open(st, psn) {
            return Ok(false);
        }
        let (swap_add, compare) = a.op.eth_values().ok_or(WcStatus::LocQpOpErr)?;
        let code = if kind == MsgKind::CompareSwap { op::COMPARE_SWAP } else { op::FETCH_ADD };
        let pkt = wire::Packet {
            bth: single_request_bth(st, op::RC | code, psn),
            atmeth: wire::AtomicEth { va: a.remote_addr, rkey: a.rkey, swap_add, compare },
            ..wire::Packet::default()
        };
        return send_single(dev, q, st, av, flow, &pkt, s.last_psn, budget);
    }
    if let Some(f) = SendWqe::new(st.rc.req.wqe(idx)).flush().filter(|_| kind == MsgKind::Flush) {
        let psn = s.first_psn;
        if !window_open(st, psn) {
            return Ok(false);
        }
        let pkt = wire::Packet {
            bth: single_request_bth(st, op::RC | op::FLUSH, psn),
            feth: wire::Feth { placement: f.placement, selectivity: f.selectivity },
            reth: wire::Reth { va: f.remote_addr, rkey: f.rkey, dma_len: f.len },
            ..wire::Packet::default()
        };
        return send_single(dev, q, st, av, flow, &pkt, s.last_psn, budget);
    }
    if kind == MsgKind::ReadRequest {
        // One request for the responses from the cursor on: all of them at
        // first, the missing rest after a loss.
        let k = st.rc.req.send_seg;
        let psn = psn_add(s.first_psn, k);
        if !window_open(st, psn) {
            return Ok(false);
        }
        let off = u64::from(k) * u64::from(mtu);
        let len = u64::from(s.len).checked_sub(off).ok_or(WcStatus::LocLenErr)?;
        let pkt = wire::Packet {
            bth: single_request_bth(st, op::RC | op::READ_REQUEST, psn),
            reth: wire::Reth { va: remote_addr.wrapping_add(off), rkey, dma_len: len as u32 },
            ..wire::Packet::default()
        };
        return send_single(dev, q, st, av, flow, &pkt, s.last_psn, budget);
    }
    let max_sge = st.sq.max_sge;
    while let Some(seg) = msg.segment(st.rc.req.send_seg) {
        if *budget == 0 {
            return Ok(false);
        }
        let psn = psn_add(s.first_psn, seg.psn_offset);
        if rc && !window_open(st, psn) {
            return Ok(false);
        }
        if let Some(wait_ns) = cc::pace_wait(dev, st) {
            cc::pace(dev, q, wait_ns);
            return Ok(false);
        }
        let ack_req = rc && asks_for_ack(st, idx, psn, seg.last, s.signaled);
        let pkt = wire::Packet {
            bth: wire::Bth {
                opcode: seg.opcode,
                se: seg.last && solicited,
                pad: seg.pad,
                pkey: limits::DEFAULT_PKEY,
                dest_qpn: st.attrs.params.dest_qp_num,
                ack_req,
                psn,
                ..wire::Bth::default()
            },
            reth: wire::Reth { va: remote_addr, rkey, dma_len: s.len },
            imm,
            inv_rkey,
            ..wire::Packet::default()
        };
        let offset = seg.offset as usize;
        let wqe = SendWqe::new(st.rc.req.wqe(idx));
        let atomic_value;
        let src = if kind == MsgKind::AtomicWrite {
            atomic_value = wqe.atomic_write_value();
            Source::Inline(&atomic_value)
        } else if inline {
            Source::Inline(wqe.inline_data())
        } else {
            Source::Sges(wqe.sges(max_sge).ok_or(WcStatus::LocLenErr)?)
        };
        let fill = |dst: &mut [u8]| gather(data, q.pdn, src, offset, dst);
        if emit_counted(dev, av, q.route.as_ref(), flow, &pkt, &q.tx, seg.len as usize, fill)? == Transmit::LocalDrop
            && local_drop(dev, q, st)
        {
            return Ok(false);
        }
        st.rc.req.local_drops = 0;
        cc::sent(dev, st, u64::from(seg.len));
        st.rc.req.sent_up_to(psn);
        st.rc.req.send_seg += 1;
        *budget -= 1;
    }
    Ok(true)
}

/// Whether the packet with PSN `psn` of the WQE in slot `idx` asks for an
/// acknowledgement (`proto::ack_request`), and counts it.
fn asks_for_ack(st: &mut QpState, idx: u32, psn: u32, last: bool, signaled: bool) -> bool {
    // A paced QP asks for every acknowledgement: at a cut rate a run of
    // unasked packets can take longer than the ACK timeout.
    let always = cc::is_paced(st) || timeout_needs_every_ack(crate::proto::aeth::ack_timeout_ns(st.attrs.params.timeout));
    let facts = PacketFacts {
        last,
        signaled,
        // Only a message's last packet that would not ask anyway reads the
        // next WQE from the ring.
        next_waits: last && !signaled && !always && next_waits(st, idx),
        resend: Psn::new(psn).diff(Psn::new(st.rc.req.psn_high)) <= 0,
        always,
    };
    let limit = AckRequests::limit(st.sq.ring.geometry().capacity());
    st.rc.req.ack_requests.decide(facts, limit)
}

/// Whether what follows the WQE in slot `idx` waits for its completion: the
/// send queue stopped, or the next posted WQE executes locally (an
/// invalidation or a fenced operation waits for the WQEs before it). Its
/// opcode is read from the ring as it is now: a user who rewrites it
/// changes only when its own QP is acknowledged.
fn next_waits(st: &QpState, idx: u32) -> bool {
    if st.rc.req.stopped {
        return true;
    }
    let geo = st.sq.ring.geometry();
    let next = geo.next(idx);
    if geo.count(next, st.sq.consumer) >= st.sq.posted() {
        // Nothing posted after it: the probe covers the burst's tail.
        return false;
    }
    let mut head = [0u8; crate::proto::abi::send::OPCODE + 4];
    st.sq.ring.read_slot(next, &mut head);
    crate::proto::wqe::executes_locally(SendWqe::new(&head).opcode())
}

/// The BTH of a request sent as one packet (READ, atomic, FLUSH): it always
/// asks for its acknowledgement.
fn single_request_bth(st: &QpState, opcode: u8, psn: u32) -> wire::Bth {
    wire::Bth { opcode, pkey: limits::DEFAULT_PKEY, dest_qpn: st.attrs.params.dest_qp_num, ack_req: true, psn, ..wire::Bth::default() }
}

/// Sends the one request packet of a READ (its responses up to `last_psn`)
/// or an atomic. `Ok(true)` once it is out.
#[allow(clippy::too_many_arguments)]
fn send_single(
    dev: &Device,
    q: &Arc<QpShared>,
    st: &mut QpState,
    av: &RoceAv,
    flow: (u32, u32),
    pkt: &wire::Packet,
    last_psn: u32,
    budget: &mut u32,
) -> core::result::Result<bool, WcStatus> {
    if emit_counted(dev, av, q.route.as_ref(), flow, pkt, &q.tx, 0, |_| WcStatus::Success)? == Transmit::LocalDrop && local_drop(dev, q, st) {
        return Ok(false);
    }
    st.rc.req.local_drops = 0;
    st.rc.req.sent_up_to(last_psn);
    st.rc.req.ack_requests.asked();
    *budget -= 1;
    Ok(true)
}

/// A local qdisc dropped the packet about to go out. Returns true if the
/// cursor stays on it and the requester tries again shortly, not after a
/// retry timeout (the queue was full; a moment later it has drained);
/// false once it was dropped [`MAX_LOCAL_DROPS`] times in a row: then it
/// counts as sent and lost, and the retry timer and `retry_cnt` take over.
fn local_drop(dev: &Device, q: &Arc<QpShared>, st: &mut QpState) -> bool {
    st.rc.req.local_drops += 1;
    if st.rc.req.local_drops >= MAX_LOCAL_DROPS {
        return false;
    }
    q.count_own(Counter::TxLocalDrop);
    dev.data().counters.inc(Counter::TxLocalDropRetries);
    cc::wait(q, 1);
    true
}
