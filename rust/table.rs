// SPDX-License-Identifier: GPL-2.0
//! Per-device object tables (MR keys, QP numbers): an index allocator over an
//! XArray of `Arc`s, so lookups from the data path take a reference that
//! keeps the object alive while they use it.

use crate::net::BhDisabled;
use crate::proto::quota::Quota;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::xarray::{AllocKind, XArray};

/// Objects indexed by a number in `min..=max`, at most `limit` at a time.
/// The receive hook looks QPs up from softirq, and every array of the
/// kernel crate shares one lock class, so every table takes its lock with
/// softirqs off (or interrupts off, as some callers already have them).
#[pin_data]
pub(crate) struct Table<T: Send + Sync + 'static> {
    #[pin]
    xa: XArray<Arc<T>>,
    /// Places taken, at most `limit`.
    count: Quota,
    cursor: AtomicU32,
    min: u32,
    max: u32,
}

impl<T: Send + Sync + 'static> Table<T> {
    pub(crate) fn new(min: u32, max: u32, limit: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            xa <- XArray::new(AllocKind::Alloc),
            count: Quota::new(limit as usize),
            cursor: AtomicU32::new(min),
            min,
            max,
        })
    }

    /// Holds softirqs off while the array's lock is held: softirq takes it too.
    fn softirq_off() -> Option<BhDisabled> {
        BhDisabled::unless_irqs_off()
    }

    /// Next free index after the last one handed out, so numbers are reused late.
    fn free_index(&self, guard: &kernel::xarray::Guard<'_, Arc<T>>) -> Result<u32> {
        let span = self.max - self.min + 1;
        let start = self.cursor.load(Ordering::Relaxed);
        for i in 0..span {
            let idx = self.min + (start.wrapping_sub(self.min).wrapping_add(i)) % span;
            if guard.get(idx as usize).is_none() {
                let next = if idx == self.max { self.min } else { idx + 1 };
                self.cursor.store(next, Ordering::Relaxed);
                return Ok(idx);
            }
        }
        Err(ENOMEM)
    }

    /// Stores the object `make` builds for a free index. Runs in any context:
    /// kernel consumers create address handles in atomic context. The object
    /// is built under the array's lock with non-sleeping allocations, and
    /// dropped there if storing fails, so this is only for objects whose drop
    /// never sleeps; the others are allocated first ([`Self::insert_allocated`]).
    pub(crate) fn insert<I: PinInit<T, Error>>(&self, make: impl FnOnce(u32) -> I) -> Result<Arc<T>> {
        self.reserved(|guard| {
            let idx = self.free_index(guard)?;
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
        self.reserved(|guard| {
            let idx = self.free_index(guard)?;
            place(idx, obj);
            guard.store(idx as usize, obj.clone(), GFP_ATOMIC).map_err(|_| ENOMEM)?;
            Ok(idx)
        })
    }

    /// Stores `obj` at the fixed index `idx`, which may lie outside the
    /// allocated range (well-known numbers); `EBUSY` if taken.
    pub(crate) fn insert_allocated_at(&self, idx: u32, obj: &Arc<T>, place: impl FnOnce(u32, &T)) -> Result {
        self.reserved(|guard| {
            if guard.get(idx as usize).is_some() {
                return Err(EBUSY);
            }
            place(idx, obj);
            guard.store(idx as usize, obj.clone(), GFP_ATOMIC).map_err(|_| ENOMEM)?;
            Ok(())
        })
    }

    /// Runs `add` under the array's lock with one of the `limit` places taken,
    /// giving the place back if `add` fails.
    fn reserved<R>(&self, add: impl FnOnce(&mut kernel::xarray::Guard<'_, Arc<T>>) -> Result<R>) -> Result<R> {
        let place = self.count.try_take(1).ok_or(ENOMEM)?;
        let res = {
            let _bh = Self::softirq_off();
            // The array's guard goes before softirqs come back on (a
            // temporary of the block's last expression would outlive `_bh`).
            let mut guard = self.xa.lock();
            add(&mut guard)
        };
        // Kept until `remove`; given back here if `add` failed.
        if res.is_ok() {
            place.keep();
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
            self.count.release(1);
        }
        removed
    }
}
