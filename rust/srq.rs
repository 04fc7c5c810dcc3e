// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: one receive ring in the rxe layout that any
//! number of QPs take their receive WQEs from. User space posts into the
//! ring without system calls, kernel consumers through `post_srq_recv`;
//! `modify_srq` resizes it (for user space the new ring's `mminfo` goes
//! back through a pointer in the command, as the rxe ABI has it) and arms
//! the limit event.

use core::sync::atomic::{AtomicU32, Ordering};
use crate::device::{Pd, Rroce};
use crate::pd_paging::PdPaging;
use crate::ib::{self, CreateSrqResp, ModifySrqCmd, RecvWr, SrqAttrs, SrqEvents, Udata, UserContext, SRQ_LIMIT, SRQ_MAX_WR};
use crate::proto::limits;
use crate::proto::wqe::write_recv_wqe;
use crate::table::Table;
use crate::wq::{self, KernelPoster, WorkQueue};
use kernel::prelude::*;
use crate::net::{new_spinlock_bh, SpinLockBh};
use kernel::sync::{new_spinlock_irq, Arc, SpinLockIrq};

/// A rroce SRQ.
pub(crate) type Srq = ib::Srq<Rroce>;

/// Smallest SRQ the rxe provider expects to be able to post to.
const MIN_SRQ_WR: u32 = 4;
/// First SRQ number, as rdma_rxe numbers them.
const MIN_SRQ_INDEX: u32 = 0x2_0001;

/// SRQs of a device by number.
pub(crate) type SrqTable = Table<SrqShared>;

pub(crate) fn new_table() -> impl PinInit<SrqTable, Error> {
    Table::new(MIN_SRQ_INDEX, MIN_SRQ_INDEX + limits::MAX_SRQ - 1, limits::MAX_SRQ)
}

struct SrqQueue {
    wq: WorkQueue,
    /// Armed limit (0: disarmed): when fewer WQEs remain, the consumer hears of it once.
    limit: u32,
}

/// An SRQ as its verbs and the QPs that receive from it share it.
#[pin_data]
pub(crate) struct SrqShared {
    /// Set once, when the SRQ table places the SRQ (before it can be found).
    srqn: AtomicU32,
    /// Receive WQEs of the SRQ are checked against its own PD.
    pub(crate) pdn: u64,
    /// Whether that PD has on-demand paging regions.
    pub(crate) paging: Arc<PdPaging>,
    pub(crate) max_sge: u32,
    /// Slot bytes: a resize keeps them, so QPs size their WQE copy once.
    pub(crate) slot_bytes: usize,
    /// A kernel consumer's SRQ, posted to through `kpost`.
    kernel_owned: bool,
    events: SrqEvents,
    #[pin]
    /// Taken by QPs' runners in softirq, and by verbs.
    queue: SpinLockBh<SrqQueue>,
    /// A kernel consumer's producer side of the ring (None for user SRQs,
    /// whose ring user space fills). Its own lock: posting may come in
    /// atomic context, and never waits for the QPs taking WQEs. Taken after
    /// `queue` when both are needed.
    #[pin]
    kpost: SpinLockIrq<Option<KernelPoster>>,
}

impl SrqShared {
    /// Copies the next posted WQE into `dst`; false if none is posted.
    /// Raises the limit event when this leaves fewer WQEs than the limit.
    pub(crate) fn take(&self, dst: &mut [u8]) -> bool {
        let fire = {
            let mut q = self.queue.lock();
            if !q.wq.take(dst) {
                return false;
            }
            let fire = q.limit != 0 && q.wq.posted() < q.limit;
            if fire {
                q.limit = 0;
            }
            fire
        };
        if fire {
            self.events.limit_reached();
        }
        true
    }
}

/// Per-SRQ data in the core's SRQ object.
pub(crate) struct SrqData {
    pub(crate) shared: Arc<SrqShared>,
}

fn new_queue(max_wr: u32, max_sge: u32, uctx: Option<&UserContext>) -> Result<WorkQueue> {
    WorkQueue::new(max_wr.max(MIN_SRQ_WR), wq::recv_slot_bytes(max_sge), max_sge, 0, uctx)
}

pub(crate) fn create(
    table: &SrqTable,
    pd: &Pd,
    attrs: SrqAttrs,
    events: SrqEvents,
    uctx: Option<&UserContext>,
    udata: &mut Udata<'_>,
) -> Result<(impl PinInit<SrqData, Error>, SrqAttrs)> {
    if uctx.is_some() {
        udata.require_no_driver_input()?;
        if udata.outlen() < core::mem::size_of::<CreateSrqResp>() {
            return Err(EINVAL);
        }
    }
    if attrs.max_wr == 0
        || attrs.max_wr > limits::MAX_SRQ_WR
        || attrs.max_sge > limits::MAX_SRQ_SGE
        || attrs.srq_limit > attrs.max_wr
    {
        return Err(EINVAL);
    }
    let q = new_queue(attrs.max_wr, attrs.max_sge, uctx)?;
    let kpost = if uctx.is_none() { Some(KernelPoster::new(&q)?) } else { None };
    let mi = q.ring.mminfo();
    let slot_bytes = q.ring.geometry().elem_size();
    let real = SrqAttrs { max_wr: q.capacity(), max_sge: attrs.max_sge, srq_limit: attrs.srq_limit };
    let queue = SrqQueue { wq: q, limit: attrs.srq_limit };
    // Built before the SRQ table's lock is taken, so that a failure drops the
    // ring (unmapping it may sleep) after it is let go.
    let shared = Arc::pin_init(
        try_pin_init!(SrqShared {
            srqn: AtomicU32::new(0),
            pdn: pd.pdn,
            paging: pd.paging.clone(),
            max_sge: attrs.max_sge,
            slot_bytes,
            kernel_owned: uctx.is_none(),
            events,
            queue <- new_spinlock_bh!(queue, "rroce_srq"),
            kpost <- new_spinlock_irq!(kpost, "rroce_srq_kpost"),
        }),
        GFP_KERNEL_ACCOUNT,
    )?;
    let srqn = table.insert_allocated(&shared, |srqn, s| s.srqn.store(srqn, Ordering::Relaxed))?;
    if uctx.is_some() {
        let resp = CreateSrqResp { mi, srq_num: srqn, reserved: 0 };
        if let Err(e) = udata.respond(&resp) {
            drop(table.remove(srqn, &shared));
            return Err(e);
        }
    }
    Ok((Ok::<_, Error>(SrqData { shared }), real))
}

/// Queues a kernel consumer's receive work request on its SRQ.
pub(crate) fn post_recv(srq: &Srq, wr: &RecvWr<'_>) -> Result {
    let s = &*srq.data().shared;
    let mut guard = s.kpost.lock();
    // User SRQs have no kernel producer.
    let p = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
    if wr.sges.len() > p.max_sge as usize {
        return Err(EINVAL);
    }
    if !write_recv_wqe(&mut p.wqe, wr.wr_id, wr.sges.iter().map(ib::KernelSge::sge)) {
        return Err(EINVAL);
    }
    p.push()
}

pub(crate) fn modify(
    srq: &Srq,
    attrs: &mut SrqAttrs,
    mask: u32,
    uctx: Option<&UserContext>,
    udata: &mut Udata<'_>,
) -> Result {
    let s = &*srq.data().shared;
    if mask & !(SRQ_MAX_WR | SRQ_LIMIT) != 0 {
        return Err(EINVAL);
    }
    if mask & SRQ_LIMIT != 0 && attrs.srq_limit > limits::MAX_SRQ_WR {
        return Err(EINVAL);
    }
    let mut resized = None;
    if mask & SRQ_MAX_WR != 0 {
        if attrs.max_wr == 0 || attrs.max_wr > limits::MAX_SRQ_WR {
            return Err(EINVAL);
        }
        let new = new_queue(attrs.max_wr, s.max_sge, uctx)?;
        if uctx.is_some() {
            // Tell user space where the new ring is before switching to it, as the rxe
            // provider remaps only after the command succeeded.
            let cmd: ModifySrqCmd = udata.read()?;
            udata.write_to_user(cmd.mmap_info_addr, &new.ring.mminfo())?;
        }
        let mut slot = KVec::new();
        slot.resize(s.slot_bytes, 0u8, GFP_KERNEL_ACCOUNT)?;
        resized = Some((new, slot));
    }
    let old = {
        let mut q = s.queue.lock();
        let capacity = resized.as_ref().map_or(q.wq.capacity(), |(n, _)| n.capacity());
        let limit = if mask & SRQ_LIMIT != 0 { attrs.srq_limit } else { q.limit };
        if limit > capacity {
            return Err(EINVAL);
        }
        let old = match resized {
            Some((new, mut slot)) => {
                // A kernel consumer posts to the new ring once the WQEs moved
                // (its own resizes only: user SRQs never hold this lock, which
                // keeps interrupts off, for the copy).
                let mut kpost = s.kernel_owned.then(|| s.kpost.lock());
                // Move the posted WQEs over, oldest first, so none is lost.
                let live = q.wq.posted();
                if live > new.capacity() {
                    return Err(EINVAL);
                }
                for i in 0..live {
                    q.wq.take(&mut slot);
                    new.ring.write_slot(i, &slot);
                }
                new.ring.store_producer(live);
                if let Some(p) = kpost.as_mut().and_then(|k| Option::as_mut(&mut **k)) {
                    p.switch_to(&new, live);
                }
                Some(core::mem::replace(&mut q.wq, new))
            }
            None => None,
        };
        q.limit = limit;
        attrs.max_wr = q.wq.capacity();
        attrs.max_sge = s.max_sge;
        attrs.srq_limit = q.limit;
        old
    };
    // The old ring's mapping is released outside the lock.
    drop(old);
    Ok(())
}

pub(crate) fn query(srq: &Srq) -> SrqAttrs {
    let s = &*srq.data().shared;
    let q = s.queue.lock();
    SrqAttrs { max_wr: q.wq.capacity(), max_sge: s.max_sge, srq_limit: q.limit }
}

pub(crate) fn destroy(table: &SrqTable, srq: &Srq) {
    let shared = &srq.data().shared;
    drop(table.remove(shared.srqn.load(Ordering::Relaxed), shared));
}
