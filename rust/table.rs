// SPDX-License-Identifier: GPL-2.0
//! Per-device object tables (MR keys, QP numbers): an index allocator over an
//! XArray of `Arc`s, so lookups from the data path take a reference that
//! keeps the object alive while they use it.

use crate::net::{BhDisabled, IndexSet};
use crate::proto::quota::Quota;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::xarray::{AllocKind, XArray};

/// Objects indexed by a number in `min..=max`, at most `limit` at a time.
/// The receive hook looks QPs up from softirq, and every array of the
/// kernel crate shares one lock class, so every table takes its lock with
/// softirqs off, or with interrupts off when the caller has them off
/// already: a kernel consumer may create and destroy an address handle in
/// atomic context, under its own `spin_lock_irqsave`. The RDMA core never
/// calls a verb from hard interrupt context, the one context where this
/// lock could be taken again on a CPU that holds it (rdma_rxe's AH pool
/// takes its array's lock plainly, for the same reason).
/// Free numbers come from an IDA, outside the array's lock: finding one
/// never scans the table, however full one user has made it.
#[pin_data]
pub(crate) struct Table<T: Send + Sync + 'static> {
    #[pin]
    xa: XArray<Arc<T>>,
    /// Places taken, at most `limit`.
    count: Quota,
    /// The numbers taken: each index in `xa` is, and stays until `remove`
    /// has taken the object out.
    indices: IndexSet,
}

impl<T: Send + Sync + 'static> Table<T> {
    pub(crate) fn new(min: u32, max: u32, limit: u32) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            xa <- XArray::new(AllocKind::Alloc),
            count: Quota::new(limit as usize),
            indices: IndexSet::new(min, max)?,
        }? Error)
    }

    /// Holds softirqs off while the array's lock is held: softirq takes it too.
    fn softirq_off() -> Option<BhDisabled> {
        BhDisabled::unless_irqs_off()
    }

    /// Stores the object `make` builds for a free index. Runs in any context:
    /// kernel consumers create address handles in atomic context. The object
    /// is built under the array's lock with non-sleeping allocations, and
    /// dropped there if storing fails, so this is only for objects whose drop
    /// never sleeps; the others are allocated first ([`Self::insert_allocated`]).
    pub(crate) fn insert<I: PinInit<T, Error>>(&self, make: impl FnOnce(u32) -> I) -> Result<Arc<T>> {
        self.reserved(None, |idx, guard| {
            let obj = Arc::pin_init(make(idx), GFP_ATOMIC)?;
            guard.store(idx as usize, obj.clone(), GFP_ATOMIC).map_err(|_| ENOMEM)?;
            Ok(obj)
        })
    }

    /// Stores `obj`, which the caller allocated (in process context, charged
    /// to the process), at a free index; `place` learns the index before
    /// the object can be found. Returns the index. If storing fails the
    /// caller still holds `obj` and drops it after the lock is let go.
    pub(crate) fn insert_allocated(&self, obj: &Arc<T>, place: impl FnOnce(u32, &T)) -> Result<u32> {
        self.reserved(None, |idx, guard| {
            place(idx, obj);
            guard.store(idx as usize, obj.clone(), GFP_ATOMIC).map_err(|_| ENOMEM)?;
            Ok(idx)
        })
    }

    /// Stores `obj` at the fixed index `idx`, which may lie outside the
    /// allocated range (well-known numbers); `EBUSY` if taken.
    pub(crate) fn insert_allocated_at(&self, idx: u32, obj: &Arc<T>, place: impl FnOnce(u32, &T)) -> Result {
        self.reserved(Some(idx), |idx, guard| {
            place(idx, obj);
            guard.store(idx as usize, obj.clone(), GFP_ATOMIC).map_err(|_| ENOMEM)?;
            Ok(())
        })
    }

    /// Runs `add` under the array's lock with one of the `limit` places and
    /// an index taken (`at`, or the next free one), giving both back if
    /// `add` fails.
    fn reserved<R>(
        &self,
        at: Option<u32>,
        add: impl FnOnce(u32, &mut kernel::xarray::Guard<'_, Arc<T>>) -> Result<R>,
    ) -> Result<R> {
        let place = self.count.try_take(1).ok_or(ENOMEM)?;
        let idx = match at {
            Some(idx) => self.indices.take(idx).map(|()| idx)?,
            None => self.indices.take_next()?,
        };
        let res = {
            let _bh = Self::softirq_off();
            // The array's guard goes before softirqs come back on (a
            // temporary of the block's last expression would outlive `_bh`).
            let mut guard = self.xa.lock();
            add(idx, &mut guard)
        };
        // Kept until `remove`; given back here if `add` failed.
        match res {
            Ok(_) => place.keep(),
            Err(_) => self.indices.give_back(idx),
        }
        res
    }

    /// The object at `idx`, if any.
    pub(crate) fn get(&self, idx: u32) -> Option<Arc<T>> {
        let _bh = Self::softirq_off();
        let guard = self.xa.lock();
        guard.get(idx as usize).map(Arc::from)
    }

    /// Runs `f` on the object at `idx` under the array's lock, without a
    /// reference of its own: for softirq, which must never drop the last
    /// reference to an object (its destruction may sleep). `None` if there
    /// is none; then `f` is dropped after the lock is let go.
    pub(crate) fn with<R>(&self, idx: u32, f: impl FnOnce(ArcBorrow<'_, T>) -> R) -> Option<R> {
        let _bh = Self::softirq_off();
        let guard = self.xa.lock();
        if let Some(obj) = guard.get(idx as usize) {
            return Some(f(obj));
        }
        drop(guard);
        drop(f);
        None
    }

    /// Removes `obj` from `idx` (if it is still there) and returns the table's
    /// reference, for the caller to drop in process context.
    pub(crate) fn remove(&self, idx: u32, obj: &Arc<T>) -> Option<Arc<T>> {
        let removed = {
            let _bh = Self::softirq_off();
            let mut guard = self.xa.lock();
            match guard.get(idx as usize) {
                Some(cur) if core::ptr::eq(&*cur, &**obj) => guard.remove(idx as usize),
                _ => None,
            }
        };
        if removed.is_some() {
            self.indices.give_back(idx);
            self.count.release(1);
        }
        removed
    }
}
