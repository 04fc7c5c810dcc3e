// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the send and receive rings in the rxe ABI layout, the QP
//! state machine with attribute validation; `qp/` holds flushing
//! (`flush.rs`), receive dispatch (`recv.rs`), kernel posting, SGE walking,
//! UD, multicast and transmission.
//!
//! User space owns the producer side of both rings and writes WQEs there
//! without system calls; the kernel owns the consumer side and keeps its
//! own copy of every index it advances.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::counters::{Counter, Counters};
use crate::qp_counters::QpCounters;
use crate::cq::CqData;
use crate::device::{DevData, Device, Pd, Rroce};
use crate::mr;
use crate::net::{NetDev, TxSkb, XmitStatus};
use crate::proto::{icrc, ip, wire};
use crate::rx::{RxPacket, RxQueue};
use crate::ib::{self, AttrMask as Mask, CqHandle, CreateQpResp, DeviceRef, QpCaps, QpInit, RecvWr, RoceAv, SendWr, Udata, UserContext};
use crate::proto::cqe::{self, Cqe, WcStatus};
use crate::proto::limits;
use crate::proto::wqe::{RecvWqe, SendTarget, SendWqe, SendWqeMut, SgeList, WalkError, write_recv_wqe};
use crate::proto::mtu::IbMtu;
use crate::pd_paging::{PagingLink, PdPaging};
use crate::srq::SrqShared;
use crate::wq::{self, KernelPoster, WorkQueue};
use crate::table::Table;
use kernel::alloc::KVec;
use kernel::prelude::*;
use crate::net::RunnerLock;
use kernel::sync::{new_spinlock_irq, Arc, SpinLockIrq};
use kernel::workqueue::{impl_has_delayed_work, impl_has_work, new_delayed_work, new_work, DelayedWork, Work, WorkItem};

/// A rroce QP.
pub(crate) type Qp = ib::Qp<Rroce>;

const PORT: u32 = 1;
/// The general services QP's number.
const GSI_QPN: u32 = 1;

use crate::proto::qp_state::QpState as State;

pub(crate) use crate::ib::QpType;

/// Attributes set through `modify_qp`.
#[derive(Clone, Copy, Default)]
struct Attrs {
    state: State,
    params: ib::QpParams,
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
    /// A QP on an SRQ reported `IB_EVENT_QP_LAST_WQE_REACHED` for its
    /// current error state (once; a reset rearms it).
    last_wqe_reported: bool,
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
    /// Set once, when the QP table places the QP (before it can be found).
    qpn: AtomicU32,
    /// Identity for the memory windows bound to the QP: never reused,
    /// unlike QP numbers.
    serial: u64,
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
    /// Whether the PD, and the PD receive WQEs are checked against, have
    /// on-demand paging regions: then the QP's runner uses that PD's queue
    /// (`qp/task.rs`).
    paging: Arc<PdPaging>,
    recv_paging: Arc<PdPaging>,
    /// With an SRQ of another PD: that PD's and the QP's linked.
    paging_link: Option<PagingLink>,
    /// The core's `struct ib_qp`, handed back in kernel consumers' completions.
    core_qp: ib::CoreQpId,
    /// Where the QP's asynchronous events go.
    events: ib::QpEvents,
    /// A kernel consumer's QP: only its rings may hold REG_MR, whose MR the
    /// kernel named when it posted.
    kernel_owned: bool,
    /// The user whose share of the device's multicast groups the QP's
    /// attaches count in (`qp/mcast.rs`): the one that created it; none
    /// for a kernel consumer's.
    mcast_user: Option<crate::user::UserId>,
    /// The QP's state as last set (the error state before a flush), for
    /// posts that do not take the state lock: kernel consumers' (which may
    /// come in atomic context) are refused before RTS (receives before
    /// INIT), and a receive posted in the error state is flushed at once,
    /// which `ib_drain_rq` waits for; a streaming poster's doorbell while
    /// its runner works (`send_doorbell`) only in RTS.
    posting_state: AtomicU32,
    #[pin]
    /// Its runner takes the half that fits where it runs (`qp/task.rs`);
    /// verbs take both and never sleep holding it.
    state: RunnerLock<QpState>,
    /// A connected QP's route to its peer (reset whenever its address
    /// vector is set).
    route: Option<crate::net::RouteCache>,
    /// Retransmission and RNR retry timer of the requester.
    #[pin]
    timer: DelayedWork<QpShared>,
    /// Kernel consumers' producer side of the send and receive rings (None for
    /// user QPs, whose rings user space fills).
    #[pin]
    ksq: SpinLockIrq<Option<KernelPoster>>,
    #[pin]
    krq: SpinLockIrq<Option<KernelPoster>>,
    /// Wakes the requester of a paced QP, or one whose packet a local qdisc dropped.
    #[pin]
    pace: DelayedWork<QpShared, PACE_WORK>,
    /// The ACK probe of a requester whose newest packet asked for no ACK.
    #[pin]
    probe: DelayedWork<QpShared, PROBE_WORK>,
    /// The requester's packets still in the host.
    tx: Arc<TxCredits>,
    /// The QP's queued work and its runner (`qp/task.rs`).
    #[pin]
    task: task::QpTask,
    /// The runner on the module's softirq queue, and on a PD's queue: two
    /// work items, so that lockdep tells the softirq runs from those that
    /// may sleep.
    #[pin]
    task_work: Work<QpShared, TASK_WORK>,
    #[pin]
    paging_task_work: Work<QpShared, PAGING_TASK_WORK>,
    /// The module's receive state: its workqueue runs the QP's work (unless
    /// the QP's memory may fault) and timer expiries.
    rxq: Arc<RxQueue>,
    /// The QP's own counters (`rdma statistic qp`), in an allocation of
    /// their own: counting touches no cache line other QPs count in.
    counters: Arc<QpCounters>,
}

/// Work item id of the QP's runner (the retry timer is 0).
const TASK_WORK: u64 = 1;
/// Work item id of the QP's runner on its PD's queue.
const PAGING_TASK_WORK: u64 = 3;
/// Work item id of the pacing wake-up: the requester of a QP held to a rate
/// goes on once its next packet is due.
const PACE_WORK: u64 = 2;
/// Work item id of the ACK probe (`rc/retry.rs`).
pub(in crate::qp) const PROBE_WORK: u64 = 4;

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for QpShared { self.timer }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, PACE_WORK> for QpShared { self.pace }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, PROBE_WORK> for QpShared { self.probe }
}

impl WorkItem<PROBE_WORK> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        task::schedule(&this, task::Want::AckProbe);
    }
}

/// Timer expiries only give the QP's runner work: they never sleep, so
/// they run on the module's queue whatever the QP's memory.
impl WorkItem<PACE_WORK> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        task::schedule(&this, task::Want::Send);
    }
}

impl WorkItem for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        task::schedule(&this, task::Want::Timer);
    }
}

/// Arms the QP's delayed work `ID` (retry timer, pacing wake-up, ACK
/// probe) to run after `jiffies`; false if it was pending already (that
/// expiry comes first).
pub(in crate::qp) fn queue_delayed<const ID: u64>(q: &Arc<QpShared>, jiffies: kernel::time::Jiffies) -> bool
where
    QpShared: kernel::workqueue::HasDelayedWork<QpShared, ID> + WorkItem<ID, Pointer = Arc<QpShared>>,
{
    // Pending already, as the retry timer is for every response while
    // WQEs are outstanding: the kernel would refuse it; no reference is
    // taken and given back for that.
    if crate::net::delayed_work_pending::<_, ID>(q) {
        return false;
    }
    // On the system softirq queue, which is never destroyed (a timer armed on
    // the module's own queue could fire after it is): QPs cancel their
    // delayed work when destroyed. The expiry only schedules the QP's runner.
    crate::net::bh_queue().enqueue_delayed::<_, ID>(q.clone(), jiffies).is_ok()
}

/// Gives the QP's runner send work: the requester carries on where a run
/// stopped for its budget, READ responses go out, a flush goes on.
fn queue_send_work(q: &Arc<QpShared>) {
    task::schedule(q, task::Want::Send);
}

/// Per-QP data in the core's QP object.
pub(crate) struct QpData {
    shared: Arc<QpShared>,
}

/// QPs of a device by number.
pub(crate) type QpTable = Table<QpShared>;

/// The next QP's [`QpShared::serial`]; 64 bits never wrap.
static QP_SERIAL: AtomicU64 = AtomicU64::new(1);

pub(crate) fn new_table() -> impl PinInit<QpTable, Error> {
    Table::new(limits::MIN_QP_INDEX, limits::TABLE_MAX - 1, limits::MAX_QP)
}

pub(crate) fn create(
    dev: &Device,
    table: &QpTable,
    pd: &Pd,
    init: QpInit<'_, Rroce>,
    uctx: Option<&UserContext>,
    udata: &mut Udata<'_>,
) -> Result<(impl PinInit<QpData, Error>, u32, QpCaps)> {
    let qp_type = init.qp_type;
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
    let attrs = Attrs {
        state: State::Reset,
        params: ib::QpParams { path_mtu: IbMtu::Mtu1024 as u32, ..Default::default() },
        av: None,
    };
    let mut send_wqe = KVec::new();
    send_wqe.resize(sq.ring.geometry().elem_size(), 0, GFP_KERNEL_ACCOUNT)?;
    let (recv_pdn, recv_max_sge, recv_slot) = match (&rq, &srq) {
        (Some(rq), _) => (pd.pdn, rq.max_sge, rq.ring.geometry().elem_size()),
        (None, Some(s)) => (s.pdn, s.max_sge, s.slot_bytes),
        (None, None) => (pd.pdn, 0, 0),
    };
    let recv_paging = srq.as_ref().map_or_else(|| pd.paging.clone(), |s| s.paging.clone());
    // The QP reaches the memory of both PDs, and its work may run on
    // either's queue: deregistering in one waits for the other's too.
    let paging_link = (recv_pdn != pd.pdn).then(|| PagingLink::new(&pd.paging, &recv_paging)).transpose()?;
    let mut recv_wqe = KVec::new();
    recv_wqe.resize(recv_slot, 0, GFP_KERNEL_ACCOUNT)?;
    let transport = if qp_type == QpType::Uc { wire::Transport::Uc } else { wire::Transport::Rc };
    let rc_slots = if qp_type.is_datagram() { 0 } else { sq.ring.geometry().num_slots() as usize };
    let (ksq, krq) = match uctx {
        Some(_) => (None, None),
        None => (Some(KernelPoster::new_send(&sq)?), rq.as_ref().map(KernelPoster::new).transpose()?),
    };
    let rc = rc::RcState::new(transport, rc_slots, sq.ring.geometry().elem_size())?;
    let st = QpState {
        attrs,
        sq,
        rq,
        dead: false,
        flush_more: false,
        last_wqe_reported: false,
        send_wqe,
        recv_wqe,
        rc,
        dev: None,
    };
    let cap = *cap;
    let tx = Arc::new(TxCredits::default(), GFP_KERNEL)?;
    // A connected QP sends to one peer: its route is kept. UD looks it up
    // for each datagram.
    let route = match qp_type {
        QpType::Rc | QpType::Uc => Some(crate::net::RouteCache::new()?),
        _ => None,
    };
    let rxq = crate::rx::rx_queue().ok_or(ENODEV)?;
    let counters = QpCounters::new()?;
    // Built before the QP table's lock is taken, so that a failure drops the
    // rings (unmapping them may sleep) after it is let go.
    let shared = Arc::pin_init(
        try_pin_init!(QpShared {
            qpn: AtomicU32::new(0),
            serial: QP_SERIAL.fetch_add(1, Ordering::Relaxed),
            qp_type,
            pdn: pd.pdn,
            sq_sig_all: init.sq_sig_all,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq,
            recv_pdn,
            recv_max_sge,
            paging: pd.paging.clone(),
            recv_paging,
            paging_link,
            core_qp: init.core_qp,
            events: init.events,
            kernel_owned: uctx.is_none(),
            mcast_user: uctx.map(|_| crate::user::UserId::current()),
            posting_state: AtomicU32::new(State::Reset.to_ib()),
            state <- RunnerLock::new(st),
            timer <- new_delayed_work!("rroce_qp_timer"),
            ksq <- new_spinlock_irq!(ksq, "rroce_qp_ksq"),
            krq <- new_spinlock_irq!(krq, "rroce_qp_krq"),
            pace <- new_delayed_work!("rroce_qp_pace"),
            probe <- new_delayed_work!("rroce_qp_ack_probe"),
            tx,
            route,
            task <- task::QpTask::new(),
            task_work <- new_work!("rroce_qp_task"),
            paging_task_work <- new_work!("rroce_qp_task_paging"),
            rxq,
            counters,
        }),
        GFP_KERNEL_ACCOUNT,
    )?;
    let place = |qpn, q: &QpShared| q.qpn.store(qpn, Ordering::Relaxed);
    match qp_type {
        // MADs address the GSI QP by its well-known number.
        QpType::Gsi => table.insert_allocated_at(GSI_QPN, &shared, place)?,
        _ => {
            table.insert_allocated(&shared, place)?;
        }
    }
    shared.state.lock().dev = dev.to_ref();
    let qpn = shared.qpn();
    Ok((Ok::<_, Error>(QpData { shared }), qpn, cap))
}

fn check_av(av: Result<RoceAv, ib::AvError>) -> Result<RoceAv> {
    let av = av.map_err(|_| EINVAL)?;
    // The port only has RoCEv2 GIDs; anything else is a stale or foreign entry.
    if !av.source_is_roce_v2() {
        return Err(EINVAL);
    }
    Ok(av)
}

pub(crate) fn modify(qp: &Qp, attr: &ib::ModifyAttrs) -> Result {
    let q = &*qp.data().shared;
    let mut st = q.state.lock();
    let cur = st.attrs.state;
    let m = attr.mask;
    if m.any(Mask::CUR_STATE) && attr.cur_qp_state != Some(cur) {
        return Err(EINVAL);
    }
    let next = if m.any(Mask::STATE) { attr.qp_state.ok_or(EINVAL)? } else { cur };
    if !ib::modify_is_ok(cur, next, q.qp_type, m) {
        return Err(EINVAL);
    }
    // Validate everything before changing anything: a refused modify leaves the QP as it was.
    if m.any(Mask::PORT) && attr.port_num != PORT {
        return Err(EINVAL);
    }
    if m.any(Mask::PKEY_INDEX) && u32::from(attr.params.pkey_index) >= u32::from(limits::PKEY_TABLE_LEN) {
        return Err(EINVAL);
    }
    if m.any(Mask::PATH_MTU) && IbMtu::from_enum(attr.params.path_mtu).is_none() {
        return Err(EINVAL);
    }
    if m.any(Mask::MAX_QP_RD_ATOMIC) && u32::from(attr.params.max_rd_atomic) > limits::MAX_QP_INIT_RD_ATOM {
        return Err(EINVAL);
    }
    if m.any(Mask::MAX_DEST_RD_ATOMIC) && u32::from(attr.params.max_dest_rd_atomic) > limits::MAX_QP_RD_ATOM {
        return Err(EINVAL);
    }
    if m.any(Mask::RETRY_CNT) && attr.params.retry_cnt > 7
        || m.any(Mask::RNR_RETRY) && attr.params.rnr_retry > 7
        || m.any(Mask::TIMEOUT) && attr.params.timeout > 31
        || m.any(Mask::MIN_RNR_TIMER) && attr.params.min_rnr_timer > 31
    {
        return Err(EINVAL);
    }
    if m.any(Mask::ALT_PATH | Mask::PATH_MIG_STATE) {
        // Automatic path migration needs a second port.
        return Err(EOPNOTSUPP);
    }
    let av = match attr.av {
        Some(av) => Some(check_av(av)?),
        None => None,
    };

    let a = &mut st.attrs;
    if let Some(av) = av {
        a.av = Some(av);
        if let Some(route) = &q.route {
            route.reset();
        }
    }
    a.params.apply(&attr.params, m);
    let (retry_cnt, rnr_retry) = (a.params.retry_cnt, a.params.rnr_retry);
    crate::trace::qp_state(qp.device(), q.qpn(), cur, next);
    a.state = next;
    q.posting_state.store(next.to_ib(), Ordering::SeqCst);
    let (rq_psn, max_dest) = (st.attrs.params.rq_psn, st.attrs.params.max_dest_rd_atomic);
    if m.any(Mask::RQ_PSN) {
        st.rc.resp.reset(rq_psn, max_dest);
    } else if m.any(Mask::MAX_DEST_RD_ATOMIC) {
        st.rc.resp.set_read_limit(max_dest);
    }
    if m.any(Mask::SQ_PSN) {
        let sq_psn = st.attrs.params.sq_psn;
        st.rc.req.start(sq_psn);
    }
    st.rc.req.set_retry_budgets(retry_cnt, rnr_retry);
    match next {
        State::Reset => {
            st.last_wqe_reported = false;
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
            st.rc.reset_congestion();
            let max_dest = st.attrs.params.max_dest_rd_atomic;
            st.rc.resp.reset(0, max_dest);
        }
        State::Err => {
            flush(q, &mut st);
            continue_flush(&qp.data().shared, &st);
        }
        // Work requests posted before the QP could send go out now.
        State::Rts if cur != State::Rts => send_now_or_queue(&qp.data().shared, &mut st),
        _ => {}
    }
    Ok(())
}

impl QpShared {
    pub(crate) fn qpn(&self) -> u32 {
        self.qpn.load(Ordering::Relaxed)
    }

    /// Counts `c` in the port's counters `port` and, if QPs count it, in
    /// the QP's (port first: a port value is never below what the QPs'
    /// counters show of it).
    pub(crate) fn count(&self, port: &Counters, c: Counter) {
        port.inc(c);
        self.counters.inc(c);
    }

    /// Counts `c` for the QP only: the port counted it where it happened.
    pub(crate) fn count_own(&self, c: Counter) {
        self.counters.inc(c);
    }

    /// The state posts without the state lock are checked against.
    fn posting_state(&self) -> State {
        State::from_ib(self.posting_state.load(Ordering::SeqCst)).unwrap_or(State::Reset)
    }

    /// The QP as the key table knows it: its PD and identity.
    pub(crate) fn key_user(&self) -> crate::mr::QpRef {
        crate::mr::QpRef { pdn: self.pdn, serial: self.serial }
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

pub(crate) fn query(qp: &Qp) -> ib::QueryAttrs {
    let q = &*qp.data().shared;
    let st = q.state.lock();
    let a = &st.attrs;
    ib::QueryAttrs {
        qp_type: q.qp_type,
        state: a.state,
        port_num: PORT,
        params: a.params,
        // Reported drained: in SQD nothing new is sent, and WQEs already on the
        // wire complete as their acknowledgements arrive.
        sq_draining: false,
        av: a.av,
        cap: QpCaps {
            max_send_wr: st.sq.capacity(),
            max_send_sge: st.sq.max_sge,
            max_inline_data: st.sq.max_inline,
            max_recv_wr: st.rq.as_ref().map_or(0, |q| q.capacity()),
            max_recv_sge: st.rq.as_ref().map_or(0, |q| q.max_sge),
        },
        sq_sig_all: q.sq_sig_all,
    }
}

/// Destroys a QP. When this returns, nothing but the core's QP object holds
/// the QP: the core may then destroy its CQs and SRQ, and drops the QP's
/// rings (and with them their entries in the user context's mmap table)
/// while the user context still exists.
pub(crate) fn destroy(table: &QpTable, qp: &Qp) {
    let shared = &qp.data().shared;
    // The core detaches a QP from its groups before destroying it; should
    // one be left, the group lets go of the QP here. Only UD QPs attach.
    if shared.qp_type == QpType::Ud {
        let ndev = qp.device().netdev();
        qp.device().data().mcast.forget(ndev.as_deref(), shared);
    }
    // From now on the receive path, the timer and the send work find the QP
    // dead and leave it alone.
    let dev = {
        let mut st = shared.state.lock();
        st.dead = true;
        st.dev.take()
    };
    // No new packet finds it; stopping its runner waits for the packets
    // being processed and drops the others. The timers neither run nor are
    // pending after their cancellation.
    drop(table.remove(shared.qpn(), shared));
    task::stop(shared);
    // Expiries now only find the runner stopped.
    crate::net::cancel_delayed_work::<_, 0>(shared);
    crate::net::cancel_delayed_work::<_, PACE_WORK>(shared);
    crate::net::cancel_delayed_work::<_, PROBE_WORK>(shared);
    // None of its work is left on any queue.
    if let Some(link) = &shared.paging_link {
        link.end();
    }
    drop(dev);
}

/// The doorbell of the rxe provider's `post_send`.
pub(crate) fn send_doorbell(dev: &Device, qp: &Qp) -> Result {
    let q = &qp.data().shared;
    // The QP's runner is at work in RTS (a stream's sending, or the
    // responder of a packet that just came in, on another CPU): the runner
    // looks at the send ring again before it lets go, so the doorbell only
    // records send work, without the state lock, which the runner holds
    // for each round of sending and each packet (a ping-pong's reply would
    // wait there for the runner's ACK to leave). Nor does it count as a
    // doorbell for the streaming estimate (its cost is not the peer's
    // round trip): the mark is renewed by a doorbell that finds the runner
    // idle, or by the first after the mark ran out.
    let start = crate::net::ktime_ns();
    if task::runner_busy(q) && q.posting_state() == State::Rts {
        queue_send_work(q);
        return Ok(());
    }
    let rung = ring_send_doorbell(dev, q, start);
    // After the lock: the softirq work the sends woke ran as it let go.
    placement::Placement::note_doorbell_end(start);
    rung
}

fn ring_send_doorbell(dev: &Device, q: &Arc<QpShared>, start: u64) -> Result {
    let mut st = q.state.lock();
    q.task.placement.note_doorbell(start, st.sq.posted());
    // Sends in the caller's system call, with softirqs off, unless the
    // runner sends (see `verb_may_send`), or the poster streams: then its
    // runner sends from another CPU, in batches, while the poster goes on
    // posting (`placement.rs`). Checked under the lock: a PD's switch waits
    // for the sends that began before it (`rx::quiesce`), and those after
    // see it.
    // (The streaming check first: `verb_may_send` claims this CPU for
    // sending.)
    if q.task.placement.poster_is_streaming(start) || !verb_may_send(q) {
        return match st.attrs.state {
            State::Err | State::Rts | State::Sqd | State::Sqe => {
                drop(st);
                queue_send_work(q);
                Ok(())
            }
            _ => Err(EINVAL),
        };
    }
    run_send(dev, q, &mut st)
}

/// Whether a verb that holds the QP's state (softirqs off, so on one CPU)
/// may send in its own context. Not if the QP's memory may fault: its
/// runner sends, on the PD's queue. Nor while the runner owns the QP's
/// work, or packets the QP sent from another CPU are still in the host:
/// the runner sends then, on that CPU, so the QP's packets stay in order
/// (`task::tx_home`).
fn verb_may_send(q: &QpShared) -> bool {
    q.paging_queue().is_none() && !task::runner_busy(q) && task::claim_tx_here(q)
}

/// [`run_send_held`] from a verb, or by the runner (see [`verb_may_send`]).
fn send_now_or_queue(q: &Arc<QpShared>, st: &mut QpState) {
    if !verb_may_send(q) {
        queue_send_work(q);
    } else {
        run_send_held(q, st);
    }
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

/// The QP's own counters, for its counter object.
pub(crate) fn counters(qp: &Qp) -> &Arc<QpCounters> {
    &qp.data().shared.counters
}

/// `attach_mcast` of a UD QP (the core checked the type and the GID).
pub(crate) fn attach_mcast(qp: &Qp, gid: &[u8; 16]) -> Result {
    let ndev = qp.device().netdev().ok_or(ENODEV)?;
    let d = qp.device().data();
    d.mcast.attach(&ndev, qp.data().shared.clone(), gid, &d.counters)
}

/// `detach_mcast`.
pub(crate) fn detach_mcast(qp: &Qp, gid: &[u8; 16]) -> Result {
    let ndev = qp.device().netdev().ok_or(ENODEV)?;
    qp.device().data().mcast.detach(&ndev, &qp.data().shared, gid)
}

mod rc;

pub(crate) mod mcast;
mod flush;
mod placement;
mod task;
mod post;
mod recv;
mod res;
mod sge;
mod ud;
mod xmit;

use flush::{continue_flush, flush};
pub(crate) use post::{kick_send, post_recv, post_send};
pub(crate) use recv::{deliver, receive_multicast};
pub(crate) use res::fill as fill_res;
pub(crate) use task::wait_inline_runs;
use sge::{gather, scatter_sges, Source};
use xmit::{emit, emit_counted, Transmit, TxCredits};
