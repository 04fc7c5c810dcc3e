// SPDX-License-Identifier: GPL-2.0
//! Per-device object tables (MR keys, QP numbers): an index allocator over an
//! XArray of `Arc`s, so lookups from the data path take a reference that
//! keeps the object alive while they use it.

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};
use kernel::xarray::{AllocKind, XArray};

/// Objects indexed by a number in `min..=max`, at most `limit` at a time.
#[pin_data]
pub(crate) struct Table<T: Send + Sync + 'static> {
    #[pin]
    xa: XArray<Arc<T>>,
    /// Serialises insertions, so a free index found stays free until stored.
    #[pin]
    insert_lock: Mutex<()>,
    count: AtomicU32,
    cursor: AtomicU32,
    min: u32,
    max: u32,
    limit: u32,
}

impl<T: Send + Sync + 'static> Table<T> {
    pub(crate) fn new(min: u32, max: u32, limit: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            xa <- XArray::new(AllocKind::Alloc),
            insert_lock <- new_mutex!((), "rroce_table"),
            count: AtomicU32::new(0),
            cursor: AtomicU32::new(min),
            min,
            max,
            limit,
        })
    }

    /// Next free index after the last one handed out, so numbers are reused late.
    fn free_index(&self) -> Result<u32> {
        let guard = self.xa.lock();
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

    /// Stores the object `make` builds for a free index; process context only.
    pub(crate) fn insert<I: PinInit<T, Error>>(&self, make: impl FnOnce(u32) -> I) -> Result<Arc<T>> {
        self.count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < self.limit).then_some(n + 1))
            .map_err(|_| ENOMEM)?;
        let res = (|| {
            let _insert = self.insert_lock.lock();
            let idx = self.free_index()?;
            let obj = Arc::pin_init(make(idx), GFP_KERNEL)?;
            self.xa.lock().store(idx as usize, obj.clone(), GFP_KERNEL).map_err(|_| ENOMEM)?;
            Ok(obj)
        })();
        if res.is_err() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        res
    }

    /// The object at `idx`, if any.
    pub(crate) fn get(&self, idx: u32) -> Option<Arc<T>> {
        let guard = self.xa.lock();
        guard.get(idx as usize).map(Arc::from)
    }

    /// Removes `obj` from `idx` (if it is still there) and returns the table's
    /// reference, for the caller to drop in process context.
    pub(crate) fn remove(&self, idx: u32, obj: &Arc<T>) -> Option<Arc<T>> {
        let removed = {
            let mut guard = self.xa.lock();
            match guard.get(idx as usize) {
                Some(cur) if core::ptr::eq(&*cur, &**obj) => guard.remove(idx as usize),
                _ => None,
            }
        };
        if removed.is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }
}
