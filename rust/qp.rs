// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the send and receive rings in the rxe ABI layout, the QP
//! state machine with attribute validation, and flushing of outstanding
//! work requests when a QP enters the error state.
//!
//! User space owns the producer side of both rings and writes WQEs there
//! without system calls; the kernel owns the consumer side and keeps its
//! own copy of every index it advances.

#![deny(unsafe_code)]

use crate::counters::Counter;
use crate::cq::CqData;
use crate::device::{DevData, Device, Pd, Rroce};
use crate::mr;
use crate::net::{NetDev, TxSkb, XmitStatus};
use crate::proto::{icrc, ip, wire};
use crate::rx::RxPacket;
use crate::ib::{self, CqHandle, DeviceRef, MmInfo, QpCaps, QpInit, RecvWr, Ring, RoceAv, SendWr, Udata, UserContext};
use crate::proto::cqe::{self, Cqe, WcStatus};
use crate::proto::limits;
use crate::proto::wqe::{RecvWqe, SendTarget, SendWqe, SendWqeMut, Sge, SgeList, WalkError, write_recv_wqe};
use crate::proto::mtu::IbMtu;
use crate::srq::SrqShared;
use crate::sys;
use crate::wq::{self, WorkQueue};
use crate::table::Table;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{new_mutex, new_spinlock_irq, Arc, Mutex, SpinLockIrq};
use kernel::workqueue::{impl_has_delayed_work, impl_has_work, new_delayed_work, new_work, DelayedWork, Work, WorkItem};

/// A rroce QP.
pub(crate) type Qp = ib::Qp<Rroce>;

const PORT: u32 = 1;
/// The general services QP's number.
const GSI_QPN: u32 = 1;

use crate::proto::qp_state::QpState as State;

// The enum carries the core's `enum ib_qp_state` values.
const _: () = {
    assert!(State::Reset as u32 == sys::ib_qp_state_IB_QPS_RESET);
    assert!(State::Init as u32 == sys::ib_qp_state_IB_QPS_INIT);
    assert!(State::Rtr as u32 == sys::ib_qp_state_IB_QPS_RTR);
    assert!(State::Rts as u32 == sys::ib_qp_state_IB_QPS_RTS);
    assert!(State::Sqd as u32 == sys::ib_qp_state_IB_QPS_SQD);
    assert!(State::Sqe as u32 == sys::ib_qp_state_IB_QPS_SQE);
    assert!(State::Err as u32 == sys::ib_qp_state_IB_QPS_ERR);
};

mod mask {
    use crate::sys;
    pub(super) const STATE: u32 = sys::ib_qp_attr_mask_IB_QP_STATE;
    pub(super) const CUR_STATE: u32 = sys::ib_qp_attr_mask_IB_QP_CUR_STATE;
    pub(super) const EN_SQD_ASYNC_NOTIFY: u32 = sys::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
    pub(super) const ACCESS_FLAGS: u32 = sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
    pub(super) const PKEY_INDEX: u32 = sys::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
    pub(super) const PORT: u32 = sys::ib_qp_attr_mask_IB_QP_PORT;
    pub(super) const QKEY: u32 = sys::ib_qp_attr_mask_IB_QP_QKEY;
    pub(super) const AV: u32 = sys::ib_qp_attr_mask_IB_QP_AV;
    pub(super) const PATH_MTU: u32 = sys::ib_qp_attr_mask_IB_QP_PATH_MTU;
    pub(super) const TIMEOUT: u32 = sys::ib_qp_attr_mask_IB_QP_TIMEOUT;
    pub(super) const RETRY_CNT: u32 = sys::ib_qp_attr_mask_IB_QP_RETRY_CNT;
    pub(super) const RNR_RETRY: u32 = sys::ib_qp_attr_mask_IB_QP_RNR_RETRY;
    pub(super) const RQ_PSN: u32 = sys::ib_qp_attr_mask_IB_QP_RQ_PSN;
    pub(super) const MAX_QP_RD_ATOMIC: u32 = sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
    pub(super) const ALT_PATH: u32 = sys::ib_qp_attr_mask_IB_QP_ALT_PATH;
    pub(super) const MIN_RNR_TIMER: u32 = sys::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
    pub(super) const SQ_PSN: u32 = sys::ib_qp_attr_mask_IB_QP_SQ_PSN;
    pub(super) const MAX_DEST_RD_ATOMIC: u32 = sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
    pub(super) const PATH_MIG_STATE: u32 = sys::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE;
    pub(super) const DEST_QPN: u32 = sys::ib_qp_attr_mask_IB_QP_DEST_QPN;
}

/// Transport service of a QP.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum QpType {
    Rc,
    Uc,
    Ud,
    /// The general services QP (QPN 1) that carries MADs: UD on the wire.
    Gsi,
}

impl QpType {
    fn from_ib(t: u32) -> Option<Self> {
        match t {
            sys::ib_qp_type_IB_QPT_RC => Some(Self::Rc),
            sys::ib_qp_type_IB_QPT_UC => Some(Self::Uc),
            sys::ib_qp_type_IB_QPT_UD => Some(Self::Ud),
            sys::ib_qp_type_IB_QPT_GSI => Some(Self::Gsi),
            _ => None,
        }
    }

    fn to_ib(self) -> u32 {
        match self {
            Self::Rc => sys::ib_qp_type_IB_QPT_RC,
            Self::Uc => sys::ib_qp_type_IB_QPT_UC,
            Self::Ud => sys::ib_qp_type_IB_QPT_UD,
            Self::Gsi => sys::ib_qp_type_IB_QPT_GSI,
        }
    }

    /// Datagram service: UD and the GSI QP.
    fn is_datagram(self) -> bool {
        matches!(self, Self::Ud | Self::Gsi)
    }
}

/// Attributes set through `modify_qp`.
#[derive(Clone, Copy, Default)]
struct Attrs {
    state: State,
    path_mtu: u32,
    qkey: u32,
    rq_psn: u32,
    sq_psn: u32,
    dest_qp_num: u32,
    access: u32,
    pkey_index: u16,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    en_sqd_async_notify: u8,
    av: Option<RoceAv>,
}

struct QpState {
    attrs: Attrs,
    sq: WorkQueue,
    rq: Option<WorkQueue>,
    /// Set by `destroy_qp`: the QP's CQs may go away, so nothing may complete any more.
    dead: bool,
    /// A flush stopped at its budget with WQEs left.
    flush_more: bool,
    /// Kernel-private copies of the WQE being processed (one slot each).
    send_wqe: KVec<u8>,
    recv_wqe: KVec<u8>,
    /// Connected transports' requester, completer and responder state.
    rc: rc::RcState,
    /// The device, for the retry timer; dropped when the QP is destroyed so the
    /// device can go away even while a timer still holds the QP.
    dev: Option<DeviceRef<Rroce>>,
}

/// A QP as the device table, the verbs and the transport share it.
#[pin_data]
pub(crate) struct QpShared {
    qpn: u32,
    qp_type: QpType,
    pdn: u64,
    sq_sig_all: bool,
    send_cq: CqHandle<Rroce>,
    recv_cq: CqHandle<Rroce>,
    /// The SRQ receives come from instead of the QP's own receive queue.
    srq: Option<Arc<SrqShared>>,
    /// PD and SGE limit that receive WQEs are checked against (the SRQ's, if any).
    recv_pdn: u64,
    recv_max_sge: u32,
    /// The core's `struct ib_qp`, handed back in kernel consumers' completions.
    core_qp: usize,
    #[pin]
    state: Mutex<QpState>,
    /// Retransmission and RNR retry timer of the requester.
    #[pin]
    timer: DelayedWork<QpShared>,
    /// Kernel consumers' producer side of the send and receive rings (None for
    /// user QPs, whose rings user space fills).
    #[pin]
    ksq: SpinLockIrq<Option<KernelPoster>>,
    #[pin]
    krq: SpinLockIrq<Option<KernelPoster>>,
    /// Sends for the requester and the responder outside the doorbell and the receive work.
    #[pin]
    send_work: Work<QpShared, SEND_WORK>,
}

/// Work item id of the send work (the timer is 0): runs the requester for
/// kernel consumers' posts (which may come in atomic context) and for what
/// a run left over for its budget, and the responder's READ responses.
const SEND_WORK: u64 = 1;

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for QpShared { self.timer }
}

impl_has_work! {
    impl HasWork<Self, SEND_WORK> for QpShared { self.send_work }
}

impl WorkItem<SEND_WORK> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        let mut st = this.state.lock();
        if st.dead {
            return;
        }
        // READ responses first: the peer's requester waits for them.
        if let Some(dev) = st.dev.take() {
            rc::respond(&dev, &this, &mut st);
            st.dev = Some(dev);
        }
        run_send_held(&this, &mut st);
    }
}

/// The producer side of a kernel ring: work requests become WQEs in the rxe
/// layout, so the engines treat kernel and user QPs alike.
struct KernelPoster {
    ring: Arc<Ring>,
    producer: u32,
    max_sge: u32,
    max_inline: u32,
    /// The WQE being built.
    wqe: KVec<u8>,
}

impl KernelPoster {
    fn new(wq: &WorkQueue) -> Result<Self> {
        let mut wqe = KVec::new();
        wqe.resize(wq.ring.geometry().elem_size(), 0u8, GFP_KERNEL_ACCOUNT)?;
        Ok(Self { ring: wq.ring.clone(), producer: 0, max_sge: wq.max_sge, max_inline: wq.max_inline, wqe })
    }

    /// Appends the WQE built in `self.wqe`; `ENOMEM` when the ring is full.
    fn push(&mut self) -> Result {
        let geo = self.ring.geometry();
        if geo.is_full(self.producer, self.ring.load_consumer()) {
            return Err(ENOMEM);
        }
        self.ring.write_slot(self.producer, &self.wqe);
        self.producer = geo.next(self.producer);
        self.ring.store_producer(self.producer);
        Ok(())
    }

    /// Back to an empty ring, as the QP's reset leaves it.
    fn reset(&mut self) {
        self.producer = 0;
    }
}

impl WorkItem for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        rc::on_timer(&this);
        continue_flush(&this, &this.state.lock());
    }
}

/// Per-QP data in the core's QP object.
pub(crate) struct QpData {
    shared: Arc<QpShared>,
}

/// QPs of a device by number.
pub(crate) type QpTable = Table<QpShared>;

pub(crate) fn new_table() -> impl PinInit<QpTable> {
    Table::new(limits::MIN_QP_INDEX, limits::TABLE_MAX - 1, limits::MAX_QP)
}

/// `struct rxe_create_qp_resp`: where user space finds the two rings.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CreateQpResp {
    rq_mi: MmInfo,
    sq_mi: MmInfo,
}

pub(crate) fn create(
    dev: &Device,
    table: &QpTable,
    pd: &Pd,
    init: QpInit<Rroce>,
    uctx: Option<&UserContext>,
    udata: &mut Udata<'_>,
) -> Result<(impl PinInit<QpData, Error>, u32, QpCaps)> {
    let qp_type = QpType::from_ib(init.qp_type).ok_or(EOPNOTSUPP)?;
    if init.create_flags != 0 {
        return Err(EOPNOTSUPP);
    }
    udata.require_no_driver_input()?;
    if uctx.is_some() && udata.outlen() < core::mem::size_of::<CreateQpResp>() {
        return Err(EINVAL);
    }
    let mut cap = init.cap;
    let cap = &mut cap;
    if cap.max_send_wr > limits::MAX_QP_WR
        || cap.max_send_sge > limits::MAX_SGE
        || cap.max_inline_data > limits::MAX_INLINE_DATA
        || (init.srq.is_none() && (cap.max_recv_wr > limits::MAX_QP_WR || cap.max_recv_sge > limits::MAX_SGE))
    {
        return Err(EINVAL);
    }
    // A send slot holds the WQE header and either the SGEs or the inline data.
    let sq_room = (cap.max_send_sge * limits::SGE_BYTES).max(cap.max_inline_data);
    let sq = WorkQueue::new(
        cap.max_send_wr,
        limits::SEND_WQE_HDR_BYTES + sq_room,
        sq_room / limits::SGE_BYTES,
        sq_room,
        uctx,
    )?;
    let srq = init.srq.as_ref().map(|h| h.get().data().shared.clone());
    let rq = match srq {
        Some(_) => None,
        None => Some(WorkQueue::new(cap.max_recv_wr, wq::recv_slot_bytes(cap.max_recv_sge), cap.max_recv_sge, 0, uctx)?),
    };
    if uctx.is_some() {
        let resp = CreateQpResp {
            rq_mi: rq.as_ref().map(|q| q.ring.mminfo()).unwrap_or_default(),
            sq_mi: sq.ring.mminfo(),
        };
        udata.respond(&resp)?;
    }
    cap.max_send_wr = sq.capacity();
    cap.max_send_sge = sq.max_sge;
    cap.max_inline_data = sq.max_inline;
    if let Some(rq) = &rq {
        cap.max_recv_wr = rq.capacity();
        cap.max_recv_sge = rq.max_sge;
    }
    let attrs = Attrs { state: State::Reset, path_mtu: IbMtu::Mtu1024 as u32, ..Attrs::default() };
    let mut send_wqe = KVec::new();
    send_wqe.resize(sq.ring.geometry().elem_size(), 0, GFP_KERNEL_ACCOUNT)?;
    let (recv_pdn, recv_max_sge, recv_slot) = match (&rq, &srq) {
        (Some(rq), _) => (pd.pdn, rq.max_sge, rq.ring.geometry().elem_size()),
        (None, Some(s)) => (s.pdn, s.max_sge, s.slot_bytes),
        (None, None) => (pd.pdn, 0, 0),
    };
    let mut recv_wqe = KVec::new();
    recv_wqe.resize(recv_slot, 0, GFP_KERNEL_ACCOUNT)?;
    let transport = if qp_type == QpType::Uc { wire::Transport::Uc } else { wire::Transport::Rc };
    let rc_slots = if qp_type.is_datagram() { 0 } else { sq.ring.geometry().num_slots() as usize };
    let (ksq, krq) = match uctx {
        Some(_) => (None, None),
        None => (Some(KernelPoster::new(&sq)?), rq.as_ref().map(KernelPoster::new).transpose()?),
    };
    let rc = rc::RcState::new(transport, rc_slots, sq.ring.geometry().elem_size())?;
    let st = QpState { attrs, sq, rq, dead: false, flush_more: false, send_wqe, recv_wqe, rc, dev: None };
    let cap = *cap;
    let make = |qpn| {
        try_pin_init!(QpShared {
            qpn,
            qp_type,
            pdn: pd.pdn,
            sq_sig_all: init.sq_sig_all,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq,
            recv_pdn,
            recv_max_sge,
            core_qp: init.core_qp as usize,
            state <- new_mutex!(st, "rroce_qp"),
            timer <- new_delayed_work!("rroce_qp_timer"),
            ksq <- new_spinlock_irq!(ksq, "rroce_qp_ksq"),
            krq <- new_spinlock_irq!(krq, "rroce_qp_krq"),
            send_work <- new_work!("rroce_qp_send"),
        })
    };
    let shared = match qp_type {
        // MADs address the GSI QP by its well-known number.
        QpType::Gsi => table.insert_at(GSI_QPN, make(GSI_QPN))?,
        _ => table.insert(make)?,
    };
    shared.state.lock().dev = dev.to_ref();
    let qpn = shared.qpn;
    Ok((Ok::<_, Error>(QpData { shared }), qpn, cap))
}

fn check_av(av: Result<RoceAv, ib::AvError>) -> Result<RoceAv> {
    let av = av.map_err(|_| EINVAL)?;
    // The port only has RoCEv2 GIDs; anything else is a stale or foreign entry.
    if av.sgid_type != sys::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
        return Err(EINVAL);
    }
    Ok(av)
}

pub(crate) fn modify(qp: &Qp, attr: &sys::ib_qp_attr, m: u32) -> Result {
    let q = &*qp.data().shared;
    let mut st = q.state.lock();
    let cur = st.attrs.state;
    if m & mask::CUR_STATE != 0 && attr.cur_qp_state != cur.to_ib() {
        return Err(EINVAL);
    }
    let next = if m & mask::STATE != 0 { State::from_ib(attr.qp_state).ok_or(EINVAL)? } else { cur };
    if !ib::modify_is_ok(cur.to_ib(), next.to_ib(), q.qp_type.to_ib(), m) {
        return Err(EINVAL);
    }
    // Validate everything before changing anything: a refused modify leaves the QP as it was.
    if m & mask::PORT != 0 && attr.port_num != PORT {
        return Err(EINVAL);
    }
    if m & mask::PKEY_INDEX != 0 && u32::from(attr.pkey_index) >= u32::from(limits::PKEY_TABLE_LEN) {
        return Err(EINVAL);
    }
    if m & mask::PATH_MTU != 0 && IbMtu::from_enum(attr.path_mtu).is_none() {
        return Err(EINVAL);
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 && u32::from(attr.max_rd_atomic) > limits::MAX_QP_INIT_RD_ATOM {
        return Err(EINVAL);
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 && u32::from(attr.max_dest_rd_atomic) > limits::MAX_QP_RD_ATOM {
        return Err(EINVAL);
    }
    if m & mask::RETRY_CNT != 0 && attr.retry_cnt > 7
        || m & mask::RNR_RETRY != 0 && attr.rnr_retry > 7
        || m & mask::TIMEOUT != 0 && attr.timeout > 31
        || m & mask::MIN_RNR_TIMER != 0 && attr.min_rnr_timer > 31
    {
        return Err(EINVAL);
    }
    if m & (mask::ALT_PATH | mask::PATH_MIG_STATE) != 0 {
        // Automatic path migration needs a second port.
        return Err(EOPNOTSUPP);
    }
    let av = if m & mask::AV != 0 { Some(check_av(ib::read_av(&attr.ah_attr))?) } else { None };

    let a = &mut st.attrs;
    if let Some(av) = av {
        a.av = Some(av);
    }
    if m & mask::PKEY_INDEX != 0 {
        a.pkey_index = attr.pkey_index;
    }
    if m & mask::QKEY != 0 {
        a.qkey = attr.qkey;
    }
    if m & mask::ACCESS_FLAGS != 0 {
        a.access = attr.qp_access_flags as u32;
    }
    if m & mask::PATH_MTU != 0 {
        a.path_mtu = attr.path_mtu;
    }
    if m & mask::TIMEOUT != 0 {
        a.timeout = attr.timeout;
    }
    if m & mask::RETRY_CNT != 0 {
        a.retry_cnt = attr.retry_cnt;
    }
    if m & mask::RNR_RETRY != 0 {
        a.rnr_retry = attr.rnr_retry;
    }
    let (retry_cnt, rnr_retry) = (a.retry_cnt, a.rnr_retry);
    if m & mask::RQ_PSN != 0 {
        a.rq_psn = attr.rq_psn & 0x00ff_ffff;
    }
    if m & mask::SQ_PSN != 0 {
        a.sq_psn = attr.sq_psn & 0x00ff_ffff;
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 {
        a.max_rd_atomic = attr.max_rd_atomic;
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 {
        a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if m & mask::MIN_RNR_TIMER != 0 {
        a.min_rnr_timer = attr.min_rnr_timer;
    }
    if m & mask::DEST_QPN != 0 {
        a.dest_qp_num = attr.dest_qp_num & 0x00ff_ffff;
    }
    if m & mask::EN_SQD_ASYNC_NOTIFY != 0 {
        a.en_sqd_async_notify = attr.en_sqd_async_notify;
    }
    a.state = next;
    let (rq_psn, max_dest) = (st.attrs.rq_psn, st.attrs.max_dest_rd_atomic);
    if m & mask::RQ_PSN != 0 {
        st.rc.resp.reset(rq_psn, max_dest);
    } else if m & mask::MAX_DEST_RD_ATOMIC != 0 {
        st.rc.resp.set_read_limit(max_dest);
    }
    if m & mask::SQ_PSN != 0 {
        let sq_psn = st.attrs.sq_psn;
        st.rc.req.start(sq_psn);
    }
    st.rc.req.set_retry_budgets(retry_cnt, rnr_retry);
    match next {
        State::Reset => {
            st.sq.reset();
            if let Some(rq) = &mut st.rq {
                rq.reset();
            }
            for poster in [&q.ksq, &q.krq] {
                if let Some(p) = Option::as_mut(&mut *poster.lock()) {
                    p.reset();
                }
            }
            st.rc.req.reset();
            let max_dest = st.attrs.max_dest_rd_atomic;
            st.rc.resp.reset(0, max_dest);
        }
        State::Err => {
            flush(q, &mut st);
            continue_flush(&qp.data().shared, &st);
        }
        // Work requests posted before the QP could send go out now.
        State::Rts if cur != State::Rts => run_send_held(&qp.data().shared, &mut st),
        _ => {}
    }
    Ok(())
}

/// WQEs of each queue one flush completes; the QP's send work goes on.
const FLUSH_BUDGET: u32 = 256;

/// Completes posted work requests with `IB_WC_WR_FLUSH_ERR` (IBTA 10.3.1: a
/// QP in the error state flushes both queues), at most [`FLUSH_BUDGET`] of
/// each queue; `st.flush_more` says the send work must go on.
fn flush(q: &QpShared, st: &mut QpState) {
    if st.dead {
        return;
    }
    let port = PORT as u8;
    let ibqp = q.core_qp as *mut sys::ib_qp;
    let more_sq = st.sq.drain(FLUSH_BUDGET, |head| {
        let wqe = SendWqe::new(head);
        let op = cqe::wc_opcode_for_wr(wqe.opcode()).unwrap_or(cqe::opcode::SEND);
        let _ = CqData::post(q.send_cq.get(), &Cqe::flushed(wqe.wr_id(), op, q.qpn, port), ibqp, false);
    });
    // Started WQEs went with the rest: the requester keeps no cursor behind the consumer.
    let consumer = st.sq.consumer;
    st.rc.req.flushed(consumer);
    if st.rc.resp.stop() {
        // A receive taken for a message that will not finish now.
        let c = Cqe::flushed(RecvWqe::new(&st.recv_wqe).wr_id(), cqe::opcode::RECV, q.qpn, port);
        let _ = CqData::post(q.recv_cq.get(), &c, ibqp, false);
    }
    // An SRQ's WQEs belong to every QP on it and stay posted.
    let more_rq = match &mut st.rq {
        Some(rq) => rq.drain(FLUSH_BUDGET, |head| {
            let c = Cqe::flushed(RecvWqe::new(head).wr_id(), cqe::opcode::RECV, q.qpn, port);
            let _ = CqData::post(q.recv_cq.get(), &c, ibqp, false);
        }),
        None => false,
    };
    st.flush_more = more_sq || more_rq;
}

/// Queues the send work if a flush left WQEs behind (see [`flush`]).
fn continue_flush(q: &Arc<QpShared>, st: &QpState) {
    if st.flush_more && !st.dead {
        let _ = crate::net::percpu_queue().enqueue::<_, SEND_WORK>(q.clone());
    }
}

/// Copies the next receive WQE, from the QP's receive queue or its SRQ, into
/// `st.recv_wqe`; false if none is posted.
fn take_recv(q: &QpShared, st: &mut QpState) -> bool {
    let QpState { rq, recv_wqe, .. } = st;
    match (rq, &q.srq) {
        (Some(rq), _) => rq.take(recv_wqe),
        (None, Some(srq)) => srq.take(recv_wqe),
        (None, None) => false,
    }
}

pub(crate) fn query(qp: &Qp, attr: &mut sys::ib_qp_attr, init: &mut sys::ib_qp_init_attr) -> Result {
    let q = &*qp.data().shared;
    let st = q.state.lock();
    let a = &st.attrs;
    attr.qp_state = a.state.to_ib();
    attr.cur_qp_state = a.state.to_ib();
    attr.path_mtu = a.path_mtu;
    attr.path_mig_state = sys::ib_mig_state_IB_MIG_MIGRATED;
    attr.qkey = a.qkey;
    attr.rq_psn = a.rq_psn;
    attr.sq_psn = a.sq_psn;
    attr.dest_qp_num = a.dest_qp_num;
    attr.qp_access_flags = a.access as i32;
    attr.pkey_index = a.pkey_index;
    attr.en_sqd_async_notify = a.en_sqd_async_notify;
    // Reported drained: in SQD nothing new is sent, and WQEs already on the
    // wire complete as their acknowledgements arrive.
    attr.sq_draining = 0;
    attr.max_rd_atomic = a.max_rd_atomic;
    attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr.min_rnr_timer = a.min_rnr_timer;
    attr.port_num = PORT;
    attr.timeout = a.timeout;
    attr.retry_cnt = a.retry_cnt;
    attr.rnr_retry = a.rnr_retry;
    if let Some(av) = &a.av {
        ib::write_av(&mut attr.ah_attr, av, PORT);
    }
    let cap = QpCaps {
        max_send_wr: st.sq.capacity(),
        max_send_sge: st.sq.max_sge,
        max_inline_data: st.sq.max_inline,
        max_recv_wr: st.rq.as_ref().map_or(0, |q| q.capacity()),
        max_recv_sge: st.rq.as_ref().map_or(0, |q| q.max_sge),
    };
    cap.write(&mut attr.cap);
    cap.write(&mut init.cap);
    init.qp_type = q.qp_type.to_ib();
    init.sq_sig_type = if q.sq_sig_all { sys::ib_sig_type_IB_SIGNAL_ALL_WR } else { sys::ib_sig_type_IB_SIGNAL_REQ_WR };
    init.port_num = PORT;
    Ok(())
}

/// Destroys a QP. When this returns, nothing but the core's QP object holds
/// the QP: the core may then destroy its CQs and SRQ, and drops the QP's
/// rings (and with them their entries in the user context's mmap table)
/// while the user context still exists.
pub(crate) fn destroy(table: &QpTable, qp: &Qp) {
    let shared = &qp.data().shared;
    // From now on the receive path, the timer and the send work find the QP
    // dead and leave it alone.
    let dev = {
        let mut st = shared.state.lock();
        st.dead = true;
        st.dev.take()
    };
    // No new packet finds it; the ones being processed are done once the
    // receive work has been waited for. The timer and the send work neither
    // run nor are pending after their cancellation.
    drop(table.remove(shared.qpn, shared));
    crate::rx::quiesce();
    crate::net::cancel_delayed_work(shared);
    crate::net::cancel_work::<_, SEND_WORK>(shared);
    drop(dev);
}

/// The doorbell of the rxe provider's `post_send`.
pub(crate) fn send_doorbell(dev: &Device, qp: &Qp) -> Result {
    let q = &qp.data().shared;
    let mut st = q.state.lock();
    run_send(dev, q, &mut st)
}

/// `run_send` with the device the QP holds (none once it is destroyed). A QP
/// not in RTS yet keeps its WQEs until it gets there.
fn run_send_held(q: &Arc<QpShared>, st: &mut QpState) {
    if let Some(dev) = st.dev.take() {
        let _ = run_send(&dev, q, st);
        st.dev = Some(dev);
    }
}

/// Sends what is posted on the send ring, as far as the QP's state allows.
fn run_send(dev: &Device, q: &Arc<QpShared>, st: &mut QpState) -> Result {
    match st.attrs.state {
        State::Err => {
            flush(q, st);
            continue_flush(q, st);
            Ok(())
        }
        State::Rts if q.qp_type.is_datagram() => {
            ud::send_all(dev, q, st);
            continue_flush(q, st);
            Ok(())
        }
        State::Rts => {
            rc::progress(dev, q, st);
            continue_flush(q, st);
            rc::arm_timer(q, st);
            Ok(())
        }
        // Posted WQEs wait until the QP is back in RTS.
        State::Sqd | State::Sqe => Ok(()),
        _ => Err(EINVAL),
    }
}

/// Queues a kernel consumer's send work request as a WQE on the send ring.
pub(crate) fn post_send(qp: &Qp, wr: &SendWr<'_, Rroce>) -> Result {
    use crate::proto::abi::send::FLAG_INLINE;
    let q = &*qp.data().shared;
    let mut guard = q.ksq.lock();
    // User QPs post through their ring and ring the doorbell without requests.
    let p = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
    let supported = match wr.opcode {
        cqe::wr_opcode::SEND | cqe::wr_opcode::SEND_WITH_IMM => true,
        cqe::wr_opcode::RDMA_WRITE | cqe::wr_opcode::RDMA_WRITE_WITH_IMM | cqe::wr_opcode::RDMA_READ => {
            !q.qp_type.is_datagram() && (wr.opcode != cqe::wr_opcode::RDMA_READ || q.qp_type == QpType::Rc)
        }
        _ => false,
    };
    if !supported || (q.qp_type.is_datagram() != wr.ud.is_some()) {
        return Err(EINVAL);
    }
    let inline = wr.send_flags & FLAG_INLINE != 0 && wr.opcode != cqe::wr_opcode::RDMA_READ;
    let total: u64 = wr.sges.iter().map(|s| u64::from(s.length)).sum();
    if inline && total > u64::from(p.max_inline) || !inline && wr.sges.len() > p.max_sge as usize {
        return Err(EINVAL);
    }
    let to = match &wr.ud {
        Some(ud) => SendTarget::Ud { remote_qpn: ud.remote_qpn, qkey: ud.remote_qkey, ah_num: ud.ah.ah_num() },
        None => SendTarget::Rdma { remote_addr: wr.remote_addr, rkey: wr.rkey },
    };
    let mut w = SendWqeMut::new(&mut p.wqe, wr.wr_id, wr.opcode, wr.send_flags, wr.imm_or_inv, to);
    if inline {
        // The consumer may reuse its buffers once this returns: copy them now.
        let area = w.inline_area(total as usize).ok_or(EINVAL)?;
        let mut at = 0usize;
        for sge in wr.sges {
            let dst = area.get_mut(at..at + sge.length as usize).ok_or(EINVAL)?;
            ib::copy_from_kernel(sge.addr, dst)?;
            at += sge.length as usize;
        }
    } else if !w.set_sges(wr.sges.iter().map(sge_of)) {
        return Err(EINVAL);
    }
    p.push()
}

/// Starts the requester on kernel consumers' new WQEs, in process context.
pub(crate) fn kick_send(qp: &Qp) {
    // Already queued: that run sends these too.
    let _ = crate::net::percpu_queue().enqueue::<_, SEND_WORK>(qp.data().shared.clone());
}

/// Queues a kernel consumer's receive work request on the receive ring.
pub(crate) fn post_recv(qp: &Qp, wr: &RecvWr<'_>) -> Result {
    let q = &*qp.data().shared;
    let mut guard = q.krq.lock();
    // User QPs and QPs on an SRQ have no kernel receive ring.
    let p = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
    if wr.sges.len() > p.max_sge as usize {
        return Err(EINVAL);
    }
    if !write_recv_wqe(&mut p.wqe, wr.wr_id, wr.sges.iter().map(sge_of)) {
        return Err(EINVAL);
    }
    p.push()
}

fn sge_of(s: &sys::ib_sge) -> Sge {
    Sge { addr: s.addr, length: s.length, lkey: s.lkey }
}

/// Second stage of the receive path: a validated packet meets its QP.
pub(crate) fn receive(pkt: RxPacket) {
    let Ok(p) = wire::Packet::parse(pkt.transport()) else { return };
    let data = pkt.dev.data();
    let Some(q) = data.qps.get(p.bth.dest_qpn) else {
        data.counters.inc(Counter::RcvdNoQp);
        return;
    };
    let transport = wire::op_info(p.bth.opcode).map(|i| i.transport);
    match (q.qp_type, transport) {
        (QpType::Ud | QpType::Gsi, Some(wire::Transport::Ud)) => ud::receive(&pkt, &p, &q),
        (QpType::Rc, Some(wire::Transport::Rc)) | (QpType::Uc, Some(wire::Transport::Uc)) => {
            let mut st = q.state.lock();
            if st.dead {
                return;
            }
            // A connected QP takes packets from its peer only.
            if !st.attrs.av.is_some_and(|av| pkt.addrs.source_is(&av.dgid)) {
                data.counters.inc(Counter::RcvdWrongAddr);
                return;
            }
            let t = pkt.transport();
            let payload = &t[p.payload_off..p.payload_off + p.payload_len];
            if p.has(wire::flags::REQUEST) {
                rc::on_request(&pkt.dev, &q, &mut st, &p, payload);
            } else {
                rc::on_response(&pkt.dev, &q, &mut st, &p, payload);
                rc::arm_timer(&q, &st);
            }
            continue_flush(&q, &st);
        }
        _ => data.counters.inc(Counter::RcvdDropped),
    }
}

#[path = "rc/mod.rs"]
mod rc;

/// Source and destination of a packet, from the GIDs of an address vector.
enum IpPair {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

impl IpPair {
    /// IPv4-mapped GIDs give IPv4; others IPv6; a mix cannot be routed.
    fn of(av: &RoceAv) -> Option<Self> {
        match (ip::ipv4_of_gid(&av.sgid), ip::ipv4_of_gid(&av.dgid)) {
            (Some(s), Some(d)) => Some(Self::V4(s, d)),
            (None, None) => Some(Self::V6(av.sgid, av.dgid)),
            _ => None,
        }
    }

    fn header_len(&self) -> usize {
        match self {
            Self::V4(..) => ip::IPV4_HDR,
            Self::V6(..) => ip::IPV6_HDR,
        }
    }
}

/// Builds one RoCEv2 packet to `av` with the headers of `pkt` and
/// `payload_len` bytes that `fill` writes, computes its ICRC and sends it.
/// Returns a completion status: local drops and missing routes are losses
/// the transport recovers from, not errors.
fn emit(
    dev: &Device,
    av: &RoceAv,
    flow: (u32, u32),
    pkt: &wire::Packet,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> WcStatus,
) -> WcStatus {
    let data = dev.data();
    let Some(info) = wire::op_info(pkt.bth.opcode) else { return WcStatus::LocQpOpErr };
    let Some(addrs) = IpPair::of(av) else { return WcStatus::LocQpOpErr };
    let hdr = info.hdr_len();
    let pad = pkt.bth.pad as usize;
    let start = addrs.header_len() + ip::UDP_HDR;
    let total = start + hdr + payload_len + pad + wire::ICRC_LEN;
    let Some(ndev) = dev.netdev() else { return WcStatus::LocQpOpErr };
    let Ok(mut tx) = TxSkb::alloc(&ndev, total, matches!(addrs, IpPair::V6(..))) else {
        return WcStatus::LocQpOpErr;
    };
    let b = tx.bytes_mut();
    let fl = if av.flow_label != 0 { av.flow_label } else { ip::calc_flow_label(flow.0, flow.1) };
    let ttl = if av.hop_limit == 0 { 64 } else { av.hop_limit };
    let sport = ip::udp_sport(fl);
    let written = match &addrs {
        IpPair::V4(s, d) => ip::write_ipv4_udp(b, *s, *d, av.traffic_class, ttl, total as u16, sport),
        IpPair::V6(s, d) => ip::write_ipv6_udp(b, s, d, av.traffic_class, ttl, fl, total as u16, sport),
    };
    if !written || pkt.encode_headers(&mut b[start..]) != Ok(hdr) {
        return WcStatus::LocQpOpErr;
    }
    let body = start + hdr;
    let status = fill(&mut b[body..body + payload_len]);
    if status != WcStatus::Success {
        return status;
    }
    b[body + payload_len..body + payload_len + pad].fill(0);
    if icrc::fill(b).is_err() {
        return WcStatus::LocQpOpErr;
    }
    // To a local address: hand it to the receiving device directly, as the stack
    // would loop it back (and attribute it to `lo`, which has no rroce device).
    let local = match &addrs {
        IpPair::V4(_, d) => NetDev::by_local_ipv4(ndev.net(), *d),
        IpPair::V6(_, d) => NetDev::by_local_ipv6(ndev.net(), d),
    };
    if let Some(local) = local {
        match DeviceRef::<Rroce>::by_netdev(&local) {
            Some(target) => {
                data.counters.inc(Counter::SentPkts);
                crate::rx::deliver_local(tx.into_received(&local), target);
            }
            None => data.counters.inc(Counter::SendErr),
        }
        return WcStatus::Success;
    }
    let sent = match &addrs {
        IpPair::V4(s, d) => tx.send4(ndev.net(), *s, *d, ndev.ifindex(), 0),
        IpPair::V6(s, d) => tx.send6(ndev.net(), s, d, ndev.ifindex(), 0),
    };
    match sent {
        Ok(XmitStatus::Sent) | Ok(XmitStatus::Congested) => data.counters.inc(Counter::SentPkts),
        Ok(XmitStatus::Dropped) | Err(_) => data.counters.inc(Counter::SendErr),
    }
    WcStatus::Success
}

/// The status of a walk over SGEs: `LOC_LEN_ERR` if they are shorter than
/// the range, else the first status a piece returned.
fn walk_status(r: Result<(), WalkError<WcStatus>>) -> WcStatus {
    match r {
        Ok(()) => WcStatus::Success,
        Err(WalkError::TooShort) => WcStatus::LocLenErr,
        Err(WalkError::Piece(status)) => status,
    }
}

/// Where a message's bytes come from: a WQE's SGEs or its inline data.
#[derive(Clone, Copy)]
enum Source<'a> {
    Sges(SgeList<'a>),
    Inline(&'a [u8]),
}

/// Copies `dst.len()` bytes of a message, starting `offset` bytes into it,
/// out of the local MRs (or the inline data).
fn gather(data: &DevData, pdn: u64, src: Source<'_>, offset: usize, dst: &mut [u8]) -> WcStatus {
    let sges = match src {
        Source::Inline(bytes) => {
            let Some(src) = offset.checked_add(dst.len()).and_then(|end| bytes.get(offset..end)) else {
                return WcStatus::LocLenErr;
            };
            dst.copy_from_slice(src);
            return WcStatus::Success;
        }
        Source::Sges(sges) => sges,
    };
    walk_status(sges.walk(offset, dst.len(), |addr, lkey, r| {
        let Some(mr) = data.mrs.lookup(lkey) else { return Err(WcStatus::LocProtErr) };
        if mr.pdn() != pdn || mr.read(addr, &mut dst[r]).is_err() {
            return Err(WcStatus::LocProtErr);
        }
        Ok(())
    }))
}

/// Writes `src` into SGEs at byte `offset` of the message; the regions must
/// allow local writes.
fn scatter_sges(data: &DevData, pdn: u64, sges: SgeList<'_>, offset: usize, src: &[u8]) -> WcStatus {
    walk_status(sges.walk(offset, src.len(), |addr, lkey, r| {
        let Some(mr) = data.mrs.lookup(lkey) else { return Err(WcStatus::LocProtErr) };
        if mr.pdn() != pdn || mr.access() & mr::access::LOCAL_WRITE == 0 || mr.write(addr, &src[r]).is_err() {
            return Err(WcStatus::LocProtErr);
        }
        Ok(())
    }))
}

/// The unreliable datagram transport.
mod ud {
    use super::*;

    /// Room for the GRH at the start of every UD receive buffer (IBTA 11.4.1.2).
    const GRH_BYTES: usize = 40;
    const NETWORK_IPV4: u8 = sys::rdma_network_type_RDMA_NETWORK_IPV4 as u8;
    const NETWORK_IPV6: u8 = sys::rdma_network_type_RDMA_NETWORK_IPV6 as u8;

    /// WQEs one run sends before it yields and queues the send work to go on.
    const BUDGET: u32 = 64;

    /// Sends the WQEs posted on the send ring, at most [`BUDGET`] per run.
    pub(super) fn send_all(dev: &Device, q: &Arc<QpShared>, st: &mut QpState) {
        let mut budget = BUDGET;
        while st.attrs.state == State::Rts {
            if budget == 0 {
                let _ = crate::net::percpu_queue().enqueue::<_, SEND_WORK>(q.clone());
                return;
            }
            budget -= 1;
            let geo = st.sq.ring.geometry();
            let producer = st.sq.ring.load_producer();
            if geo.count(producer, st.sq.consumer) == 0 {
                break;
            }
            // Copy the WQE once; everything below reads the copy only.
            st.sq.ring.read_slot(st.sq.consumer, &mut st.send_wqe);
            let status = send_one(dev, q, st);
            let wqe = SendWqe::new(&st.send_wqe);
            let (wr_id, signaled) = (wqe.wr_id(), wqe.signaled());
            st.sq.consumer = geo.next(st.sq.consumer);
            st.sq.ring.store_consumer(st.sq.consumer);
            if status != WcStatus::Success || q.sq_sig_all || signaled {
                let c = Cqe {
                    wr_id,
                    status,
                    opcode: cqe::opcode::SEND,
                    qp_num: q.qpn,
                    port_num: PORT as u8,
                    ..Cqe::default()
                };
                let _ = CqData::post(q.send_cq.get(), &c, q.core_qp as *mut sys::ib_qp, false);
            }
            if status != WcStatus::Success {
                // An error completion moves the QP to the error state (IBTA 10.8.3.3).
                st.attrs.state = State::Err;
                flush(q, st);
            }
        }
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
        let qkey = if wr_qkey & 0x8000_0000 != 0 { st.attrs.qkey } else { wr_qkey };
        let pkt = wire::Packet {
            bth: wire::Bth {
                opcode,
                se: wqe.solicited(),
                pad: ((4 - len % 4) % 4) as u8,
                pkey: limits::DEFAULT_PKEY,
                dest_qpn: remote_qpn,
                psn: st.attrs.sq_psn,
                ..wire::Bth::default()
            },
            deth: wire::Deth { qkey, src_qpn: q.qpn },
            imm: wqe.imm_data(),
            ..wire::Packet::default()
        };
        st.attrs.sq_psn = (st.attrs.sq_psn + 1) & 0x00ff_ffff;
        emit(dev, &ah.av, (q.qpn, remote_qpn), &pkt, len, |dst| {
            gather(data, q.pdn, src, 0, dst)
        })
    }

    /// Delivers a UD SEND into the next receive WQE.
    pub(super) fn receive(pkt: &RxPacket, p: &wire::Packet, q: &QpShared) {
        let data = pkt.dev.data();
        let mut st = q.state.lock();
        if st.dead || !st.attrs.state.receives() {
            data.counters.inc(Counter::RcvdDropped);
            return;
        }
        if p.deth.qkey != st.attrs.qkey {
            data.counters.inc(Counter::RcvdQkeyErr);
            return;
        }
        let st = &mut *st;
        if !take_recv(q, st) {
            // No receive posted: a datagram is simply lost (IBTA 9.8.2).
            data.counters.inc(Counter::RcvdNoWqe);
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
            qp_num: q.qpn,
            src_qp: p.deth.src_qpn,
            wc_flags: flags,
            port_num: PORT as u8,
            // Kernel consumers (the MAD layer) read the GRH by its network type.
            network_hdr_type: if iph == ip::IPV4_HDR { NETWORK_IPV4 } else { NETWORK_IPV6 },
            ..Cqe::default()
        };
        let _ = CqData::post(q.recv_cq.get(), &c, q.core_qp as *mut sys::ib_qp, p.bth.se);
    }

    /// Copies the GRH and the payload (in that order) into the SGEs of a receive WQE.
    fn scatter(data: &DevData, q: &QpShared, wqe: RecvWqe<'_>, grh: &[u8], payload: &[u8]) -> WcStatus {
        let Some(sges) = wqe.sges(q.recv_max_sge) else { return WcStatus::LocQpOpErr };
        WcStatus::of(scatter_sges(data, q.recv_pdn, sges, 0, grh).result().and_then(|()| {
            scatter_sges(data, q.recv_pdn, sges, grh.len(), payload).result()
        }))
    }
}
