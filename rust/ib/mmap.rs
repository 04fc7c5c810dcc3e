// SPDX-License-Identifier: GPL-2.0
//! Memory shared with user space through `mmap()` on the uverbs file: the
//! rxe mmap-cookie protocol. A verb hands user space an opaque offset
//! (`mminfo.offset`); `mmap(cmd_fd, offset)` then maps the buffer behind it.
//! The core's per-context mmap table hands out the offsets; mapped pages
//! carry their own references, so user mappings outlive the kernel's handle.

use crate::sys;
use core::ptr::NonNull;
use kernel::alloc::KBox;
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;

/// One mmap-able buffer: the core's entry, then the vmalloc'ed memory.
#[repr(C)]
struct MapEntry {
    entry: sys::rdma_user_mmap_entry,
    buf: *mut c_void,
    len: usize,
}

/// The kernel's handle on a buffer user space may map. Dropping it removes
/// the offset from the context; the memory goes once user space unmaps too.
pub(crate) struct UserMapping {
    entry: NonNull<MapEntry>,
}

// SAFETY: the entry is reference counted by the core, which serialises its table.
unsafe impl Send for UserMapping {}
// SAFETY: `&self` methods only read immutable fields.
unsafe impl Sync for UserMapping {}

impl UserMapping {
    /// Allocates a zeroed, page-aligned buffer of `len` bytes and publishes it
    /// in `uctx`'s mmap table.
    ///
    /// # Safety
    ///
    /// `uctx` must be a live user context of a device of this driver.
    pub(crate) unsafe fn new(uctx: *mut sys::ib_ucontext, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: plain allocation; returns zeroed memory suitable for `remap_vmalloc_range`.
        let buf = unsafe { sys::rroce_vmalloc_user(len as _) };
        if buf.is_null() {
            return Err(ENOMEM);
        }
        let boxed = match KBox::new(
            MapEntry { entry: pin_init::zeroed(), buf, len },
            GFP_KERNEL,
        ) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: `buf` came from `vmalloc_user` and is not shared yet.
                unsafe { sys::vfree(buf) };
                return Err(e.into());
            }
        };
        let raw = KBox::into_raw(boxed);
        // SAFETY: `raw` is a valid entry; on success the core owns a reference and will
        // call `mmap_free` when the last one is put.
        let ret = unsafe { sys::rdma_user_mmap_entry_insert(uctx, &mut (*raw).entry, len) };
        if ret != 0 {
            // SAFETY: the insert failed, so the entry is still ours alone.
            unsafe {
                sys::vfree((*raw).buf);
                drop(KBox::from_raw(raw));
            }
            return Err(Error::from_errno(ret));
        }
        // SAFETY: `raw` is non-null (it came from a box).
        Ok(Self { entry: unsafe { NonNull::new_unchecked(raw) } })
    }

    /// The cookie user space passes as `mmap()` offset.
    pub(crate) fn offset(&self) -> u64 {
        // SAFETY: the entry is alive while `self` holds the insert reference.
        let pgoff = unsafe { self.entry.as_ref().entry.start_pgoff };
        (pgoff as u64) << kernel::page::PAGE_SHIFT
    }

    /// Start of the buffer. It is shared with an untrusted process: access it
    /// only through volatile or atomic operations, never through references.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        // SAFETY: as in `offset`.
        unsafe { self.entry.as_ref().buf.cast() }
    }

    pub(crate) fn len(&self) -> usize {
        // SAFETY: as in `offset`.
        unsafe { self.entry.as_ref().len }
    }
}

impl Drop for UserMapping {
    fn drop(&mut self) {
        // SAFETY: drops the insert reference exactly once; mappings keep their own.
        unsafe { sys::rdma_user_mmap_entry_remove(&mut (*self.entry.as_ptr()).entry) };
    }
}

/// `ops.mmap`: maps the buffer whose cookie is the VMA offset.
///
/// # Safety
///
/// Only for the RDMA core's `mmap` callback: a live user context of this
/// driver's device and the VMA of the `mmap` call in progress.
pub(super) unsafe extern "C" fn mmap(uctx: *mut sys::ib_ucontext, vma: *mut sys::vm_area_struct) -> c_int {
    // SAFETY: the core calls with a live context and VMA. The lookup checks the VMA is
    // shared and exactly as long as the entry, and returns a held entry or null.
    let entry = unsafe { sys::rdma_user_mmap_entry_get(uctx, vma) };
    if entry.is_null() {
        return EINVAL.to_errno();
    }
    let me = entry.cast::<MapEntry>();
    // SAFETY: every entry of our contexts is a `MapEntry`; `buf` is a `vmalloc_user`
    // buffer whose length matches the VMA. The mapping takes a reference on each page,
    // so the pages outlive a later `vfree` for as long as user space maps them.
    unsafe {
        let ret = sys::remap_vmalloc_range(vma, (*me).buf, 0);
        sys::rdma_user_mmap_entry_put(entry);
        ret
    }
}

/// `ops.mmap_free`: the last reference to an entry is gone.
///
/// # Safety
///
/// Only for the RDMA core's `mmap_free` callback, with an entry this module
/// inserted, once its last reference is gone.
pub(super) unsafe extern "C" fn mmap_free(entry: *mut sys::rdma_user_mmap_entry) {
    let me = entry.cast::<MapEntry>();
    // SAFETY: entries are `MapEntry` boxes created in `UserMapping::new`; nobody else
    // references this one any more.
    unsafe {
        sys::vfree((*me).buf);
        drop(KBox::from_raw(me));
    }
}
