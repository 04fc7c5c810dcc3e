// SPDX-License-Identifier: GPL-2.0
//! Completion queues. A user CQ is a ring in the rxe ABI layout, mapped into
//! the process, which polls it without system calls; the kernel only
//! produces. A kernel consumer's CQ is a private array polled through
//! `poll_cq`. Both refuse to overwrite unpolled entries: an overrun drops the
//! completion and raises `IB_EVENT_CQ_ERR`, as hardware does.

use crate::device::Rroce;
use crate::ib::{self, CqInit, Invalidated, KernelWc, MmInfo, Ring, Udata, UserContext};
use crate::proto::cqe::Cqe;
use crate::proto::limits;
use crate::proto::queue::Geometry;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{new_spinlock_irq, SpinLockIrq};

/// A rroce CQ.
pub(crate) type Cq = ib::Cq<Rroce>;

/// Slot size of a user CQE: `struct ib_uverbs_wc` (48 bytes) in a 64-byte slot.
const USER_CQE_SLOT: u32 = 64;
/// Smallest slot: a cache line, so the producer and the consumer never share one.
const MIN_SLOT: u32 = 64;

/// Bits of `CqData::notify`: what the consumer armed the CQ for.
const NOTIFY_SOLICITED: u32 = 1 << 0;
const NOTIFY_NEXT_COMP: u32 = 1 << 1;

/// A completion of a kernel consumer, with the QP it belongs to.
struct KernelCqe {
    wc: KernelWc,
    /// The completion's QP, handed back in the work completion.
    qp: ib::CoreQpId,
}

/// The kernel consumer's entry for `c`. One telling of a finished
/// invalidation takes `proof` of it; without one (a fault of the driver's)
/// it completes in error instead, so the consumer does not reuse pages a
/// peer may still reach.
fn kernel_wc(c: &Cqe, proof: Option<Invalidated>) -> KernelWc {
    match KernelWc::new(*c, proof) {
        Ok(wc) => wc,
        Err(c) => KernelWc::failed(c),
    }
}

enum Entries {
    User { ring: Ring, producer: u32 },
    Kernel { slots: KVec<Option<KernelCqe>>, head: usize, len: usize },
}

impl Entries {
    fn user(capacity: u32, uctx: &UserContext) -> Result<Self> {
        let geo = Geometry::new(capacity, USER_CQE_SLOT, MIN_SLOT, limits::MAX_CQE).map_err(|_| EINVAL)?;
        Ok(Self::User { ring: Ring::new(geo, Some(uctx))?, producer: 0 })
    }

    fn kernel(capacity: u32) -> Result<Self> {
        let n = capacity as usize;
        let mut slots = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self::Kernel { slots, head: 0, len: 0 })
    }

    fn capacity(&self) -> u32 {
        match self {
            Self::User { ring, .. } => ring.geometry().capacity(),
            Self::Kernel { slots, .. } => slots.len() as u32,
        }
    }

    fn count(&self) -> u32 {
        match self {
            Self::User { ring, producer } => ring.geometry().count(*producer, ring.load_consumer()),
            Self::Kernel { len, .. } => *len as u32,
        }
    }

    /// Appends completion `c` of QP `qp`, with the proof of the invalidation
    /// it tells of, if it does; false if the queue is full.
    fn push(&mut self, c: &Cqe, proof: Option<Invalidated>, qp: ib::CoreQpId) -> bool {
        match self {
            Self::User { ring, producer } => {
                let geo = ring.geometry();
                if geo.is_full(*producer, ring.load_consumer()) {
                    return false;
                }
                ring.write_slot(*producer, &c.to_uverbs_wc());
                *producer = geo.next(*producer);
                ring.store_producer(*producer);
                true
            }
            Self::Kernel { slots, head, len } => {
                let cap = slots.len();
                if *len >= cap {
                    return false;
                }
                let wc = kernel_wc(c, proof);
                let at = (*head + *len) % cap;
                if let Some(s) = slots.get_mut(at) {
                    *s = Some(KernelCqe { wc, qp });
                }
                *len += 1;
                true
            }
        }
    }

    fn pop(&mut self) -> Option<KernelCqe> {
        match self {
            Self::User { .. } => None,
            Self::Kernel { slots, head, len } => {
                if *len == 0 {
                    return None;
                }
                let e = slots.get_mut(*head).and_then(Option::take);
                *head = (*head + 1) % slots.len();
                *len -= 1;
                e
            }
        }
    }
}

/// Per-CQ state.
#[pin_data]
pub(crate) struct CqData {
    #[pin]
    entries: SpinLockIrq<Entries>,
    /// Armed notification: `IB_CQ_NEXT_COMP` or `IB_CQ_SOLICITED`, cleared when it fires.
    notify: AtomicU32,
    /// The overrun was reported. Once is enough: each report is an event the
    /// core allocates and queues for the owner, who may never read them, and
    /// a user that never polls loses completions at the rate it posts work.
    overrun_reported: AtomicBool,
}

fn check_size(cqe: u32) -> Result {
    if cqe == 0 || cqe > limits::MAX_CQE {
        return Err(EINVAL);
    }
    Ok(())
}

pub(crate) fn create(
    init: &CqInit,
    uctx: Option<&UserContext>,
    udata: &mut Udata<'_>,
) -> Result<(impl PinInit<CqData, Error>, u32)> {
    check_size(init.cqe)?;
    if init.flags != 0 {
        return Err(EOPNOTSUPP);
    }
    let entries = match uctx {
        Some(u) => {
            // The provider reads the ring's place from `struct rxe_create_cq_resp`.
            if udata.outlen() < core::mem::size_of::<MmInfo>() {
                return Err(EINVAL);
            }
            let e = Entries::user(init.cqe, u)?;
            if let Entries::User { ring, .. } = &e {
                udata.respond(&ring.mminfo())?;
            }
            e
        }
        None => Entries::kernel(init.cqe)?,
    };
    let cap = entries.capacity();
    Ok((
        try_pin_init!(CqData {
            entries <- new_spinlock_irq!(entries, "rroce_cq"),
            notify: AtomicU32::new(0),
            overrun_reported: AtomicBool::new(false),
        }),
        cap,
    ))
}

impl CqData {
    /// Posts a completion; fails with `ENOSPC` on overrun (the entry is lost and
    /// the consumer gets `IB_EVENT_CQ_ERR`).
    pub(crate) fn post(cq: &Cq, cqe: &Cqe, qp: ib::CoreQpId, solicited: bool) -> Result {
        Self::post_invalidation(cq, cqe, None, qp, solicited)
    }

    /// As [`Self::post`], for a completion that tells a kernel consumer an
    /// invalidation finished (a successful LOCAL_INV, a receive with
    /// Invalidate), with the `proof` that it did.
    pub(crate) fn post_invalidation(cq: &Cq, cqe: &Cqe, proof: Option<Invalidated>, qp: ib::CoreQpId, solicited: bool) -> Result {
        let data = cq.data();
        // The arm state is read and cleared under the entries' lock, which
        // `req_notify` also takes: an entry is either seen by its "missed
        // events" check or fires the event, never neither.
        let fire = {
            let mut entries = data.entries.lock();
            if !entries.push(cqe, proof, qp) {
                drop(entries);
                crate::ib::warn_cq_overrun(cqe.qp_num);
                if !data.overrun_reported.swap(true, Ordering::Relaxed) {
                    cq.overrun_event();
                }
                return Err(ENOSPC);
            }
            let armed = data.notify.load(Ordering::Relaxed);
            let fire = armed & NOTIFY_NEXT_COMP != 0 || (solicited && armed & NOTIFY_SOLICITED != 0);
            if fire {
                data.notify.store(0, Ordering::Relaxed);
            }
            fire
        };
        if fire {
            cq.completion_event();
        }
        Ok(())
    }
}

/// The CQ's driver details in `rdma res show cq -dd`: how many entries it
/// holds and how many wait to be polled (the count the core shows as `cqe`
/// is the depth asked for).
pub(crate) fn fill_res(cq: &Cq, out: &mut ib::ResAttrs<'_>) -> Result {
    let data = cq.data();
    let (depth, fill, user) = {
        let entries = data.entries.lock();
        (entries.capacity(), entries.count(), matches!(&*entries, Entries::User { .. }))
    };
    out.u32(c"depth", depth)?;
    out.u32(c"fill", fill)?;
    out.str(c"ring", if user { c"user" } else { c"kernel" })?;
    out.u32(c"overrun", u32::from(data.overrun_reported.load(Ordering::Relaxed)))
}

pub(crate) fn poll(cq: &Cq, out: &mut ib::WcSink<'_>) {
    let mut entries = cq.data().entries.lock();
    // Checked before popping: a popped entry that found no room would be lost.
    while !out.is_full() {
        let Some(e) = entries.pop() else { break };
        // Not full (checked above): stored.
        let _ = out.push(e.wc, e.qp);
    }
}

pub(crate) fn req_notify(cq: &Cq, how: ib::CqNotify) -> Result<bool> {
    let data = cq.data();
    let entries = data.entries.lock();
    match how.arm {
        // Arming for the next completion also covers a solicited one armed before.
        Some(ib::CqArm::NextCompletion) => data.notify.fetch_or(NOTIFY_NEXT_COMP, Ordering::Relaxed),
        Some(ib::CqArm::Solicited) => data.notify.fetch_or(NOTIFY_SOLICITED, Ordering::Relaxed),
        None => 0,
    };
    Ok(how.report_missed && entries.count() != 0)
}

pub(crate) fn resize(cq: &Cq, cqe: u32, uctx: Option<&UserContext>, udata: &mut Udata<'_>) -> Result<u32> {
    check_size(cqe)?;
    let uctx = uctx.ok_or(EOPNOTSUPP)?;
    if udata.outlen() < core::mem::size_of::<MmInfo>() {
        return Err(EINVAL);
    }
    // Allocate and answer before taking the lock: both may sleep.
    let geo = Geometry::new(cqe, USER_CQE_SLOT, MIN_SLOT, limits::MAX_CQE).map_err(|_| EINVAL)?;
    let new = Ring::new(geo, Some(uctx))?;
    udata.respond(&new.mminfo())?;
    let old = {
        let mut entries = cq.data().entries.lock();
        let Entries::User { ring: old, producer: old_prod } = &*entries else {
            return Err(EOPNOTSUPP);
        };
        let live = old.geometry().count(*old_prod, old.load_consumer());
        if live > geo.capacity() {
            return Err(EINVAL);
        }
        let mut slot = [0u8; USER_CQE_SLOT as usize];
        let mut idx = old.load_consumer();
        for i in 0..live {
            old.read_slot(idx, &mut slot);
            new.write_slot(i, &slot);
            idx = old.geometry().next(idx);
        }
        new.store_producer(live);
        core::mem::replace(&mut *entries, Entries::User { ring: new, producer: live })
    };
    // The old ring's mapping is released outside the lock.
    drop(old);
    Ok(geo.capacity())
}
