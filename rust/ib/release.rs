// SPDX-License-Identifier: GPL-2.0
//! Releases that sleep (unpinning user pages, ending an on-demand paging
//! registration), for objects whose last reference may go where nothing
//! may sleep: the data path, which runs in softirq, may hold a region a
//! moment after it was deregistered. Done at once where the caller may
//! sleep, else by a work item; the room for the hand-over is allocated
//! with the object, so letting go never allocates or fails.

use crate::sys;
use core::ptr::NonNull;
use kernel::prelude::*;

/// What a release hands to the work item: the kernel's list node, then
/// the object and how to release it.
#[repr(C)]
struct Later<T: SleepingRelease> {
    head: sys::rroce_release_later,
    obj: NonNull<T::Raw>,
}

/// A kernel object released by a call that may sleep.
pub(super) trait SleepingRelease {
    type Raw;

    /// Releases `raw`.
    ///
    /// # Safety
    ///
    /// `raw` is the caller's to release, once, in process context.
    unsafe fn release(raw: NonNull<Self::Raw>);
}

/// Room to release one object later, taken when the object is made.
pub(super) struct ReleaseSlot<T: SleepingRelease>(KBox<core::mem::MaybeUninit<Later<T>>>);

impl<T: SleepingRelease> ReleaseSlot<T> {
    /// Process context.
    pub(super) fn new() -> Result<Self> {
        Ok(Self(KBox::new_uninit(GFP_KERNEL_ACCOUNT)?))
    }

    /// Releases `raw` now if the caller may sleep, else from a work item.
    ///
    /// # Safety
    ///
    /// `raw` is the caller's to release, once; nothing uses it afterwards.
    pub(super) unsafe fn release(self, raw: NonNull<T::Raw>) {
        if crate::net::may_sleep() {
            // SAFETY: the caller's contract, and this is process context.
            unsafe { T::release(raw) };
            return;
        }
        let later = KBox::write(self.0, Later { head: sys::rroce_release_later::default(), obj: raw });
        let later = KBox::into_raw(later);
        // SAFETY: `later` is valid and stays so until `run_later` takes it back;
        // the callback matches the object's type.
        unsafe {
            (*later).head.release = Some(run_later::<T>);
            sys::rroce_release_later(later.cast());
        }
    }
}

/// The work item's side of [`ReleaseSlot::release`].
unsafe extern "C" fn run_later<T: SleepingRelease>(head: *mut sys::rroce_release_later) {
    // SAFETY: `head` is the first field of a `Later<T>` that `release` leaked
    // (`repr(C)`), handed back once.
    let later = unsafe { KBox::from_raw(head.cast::<Later<T>>()) };
    // SAFETY: `release` was given the object to release, once; this is the
    // work item, in process context.
    unsafe { T::release(later.obj) };
}

/// Waits until every release handed to a work item before the call is done
/// (module unload). Process context.
pub(crate) fn flush_released_later() {
    kernel::task::might_sleep();
    // SAFETY: waits for a work item of the module; no lock held.
    unsafe { sys::rroce_release_later_flush() }
}
