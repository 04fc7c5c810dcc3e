// SPDX-License-Identifier: GPL-2.0
//! Sets of taken indices (the kernel's IDA), for the object tables: a free
//! index is found in O(log n), never by a scan as long as the table is full.

use crate::sys;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU32;
use kernel::prelude::*;

/// The indices taken in `min..=max`.
///
/// # Invariants
///
/// `set` is an IDA of ours from `rroce_index_set_new`, freed only in `drop`.
pub(crate) struct IndexSet {
    set: NonNull<sys::rroce_index_set>,
    min: u32,
    max: u32,
    /// Where the next search starts (a hint, see `take_next`).
    cursor: AtomicU32,
}

// SAFETY: the IDA takes its own lock (interrupts off), so it may be used from
// any context and thread.
unsafe impl Send for IndexSet {}
// SAFETY: as above.
unsafe impl Sync for IndexSet {}

impl IndexSet {
    /// An empty set of indices in `min..=max` (`max` below 2^31, as the IDA's).
    pub(crate) fn new(min: u32, max: u32) -> Result<Self> {
        if min > max || max > i32::MAX as u32 {
            return Err(EINVAL);
        }
        // SAFETY: no preconditions; returns a new set or null.
        let set = NonNull::new(unsafe { sys::rroce_index_set_new() }).ok_or(ENOMEM)?;
        Ok(Self { set, min, max, cursor: AtomicU32::new(min) })
    }

    /// Takes the first free index after the last one taken, wrapping to
    /// `min`, so numbers are reused late. Any context.
    pub(crate) fn take_next(&self) -> Result<u32> {
        // SAFETY: `set` is live (type invariant); the cursor is a valid `u32` the helper
        // only reads and writes with single-word accesses (a hint, racing harmlessly).
        let id = unsafe { sys::rroce_index_set_take_next(self.set.as_ptr(), self.min, self.max, self.cursor.as_ptr()) };
        u32::try_from(id).map_err(|_| if id == ENOSPC.to_errno() { ENOMEM } else { Error::from_errno(id) })
    }

    /// Takes `index` itself (which may lie outside `min..=max`); `EBUSY`
    /// if it is taken.
    pub(crate) fn take(&self, index: u32) -> Result {
        if index > i32::MAX as u32 {
            return Err(EINVAL);
        }
        // SAFETY: `set` is live (type invariant).
        let id = unsafe { sys::rroce_index_set_take(self.set.as_ptr(), index) };
        match id {
            i if i >= 0 => Ok(()),
            i if i == ENOSPC.to_errno() => Err(EBUSY),
            i => Err(Error::from_errno(i)),
        }
    }

    /// Gives back an index `take_next` or `take` handed out.
    pub(crate) fn give_back(&self, index: u32) {
        // SAFETY: `set` is live (type invariant); an index not taken only draws the
        // IDA's warning.
        unsafe { sys::rroce_index_set_give_back(self.set.as_ptr(), index) };
    }
}

impl Drop for IndexSet {
    fn drop(&mut self) {
        // SAFETY: ours (type invariant), freed once, here.
        unsafe { sys::rroce_index_set_free(self.set.as_ptr()) };
    }
}
