// SPDX-License-Identifier: GPL-2.0
//! Memory shared with user space through `mmap()` on the uverbs file: the
//! rxe mmap-cookie protocol. A verb hands user space an opaque offset
//! (`mminfo.offset`); `mmap(cmd_fd, offset)` then maps the buffer behind it.
//! The core's per-context mmap table hands out the offsets; mapped pages
//! carry their own references, so user mappings outlive the kernel's handle.
//!
//! Two owners share a buffer: the core's entry (until the core calls
//! `mmap_free`) and the kernel's [`UserMapping`] (a ring). Taking the entry
//! out of the context's table (`rdma_user_mmap_entry_remove`) sleeps and
//! needs the context; it happens when the kernel lets go of the ring, in
//! process context (a work item if the ring went in softirq), or when the
//! context is torn down, whichever comes first. The context's [`MapTable`]
//! records which entries are still in the core's table.

use super::release::{ReleaseSlot, SleepingRelease};
use super::UserContext;
use crate::sys;
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicU32, Ordering};
use kernel::alloc::{KBox, KVec};
use kernel::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};
use kernel::types::Opaque;

/// One mmap-able buffer: the core's entry (first, so the core's pointer is
/// the entry's), then the vmalloc'ed memory.
///
/// # Invariants
///
/// `buf` is a `vmalloc_user` buffer of `len` bytes, and the entry a box,
/// until `owners` drops to zero; both fields never change. The core entry
/// changes under the core's locks: it is only reached through raw pointers.
#[repr(C)]
pub(super) struct MapEntry {
    entry: Opaque<sys::rdma_user_mmap_entry>,
    buf: NonNull<c_void>,
    len: usize,
    /// The core's entry and the kernel's [`UserMapping`]; the last frees.
    owners: AtomicU32,
    /// Where the context notes whether the entry is in the core's table.
    table: Arc<MapTable>,
}

impl MapEntry {
    /// Frees the buffer and the entry.
    ///
    /// # Safety
    ///
    /// `me` came from `KBox::into_raw` and nobody uses it or its buffer any more.
    unsafe fn free(me: NonNull<Self>) {
        // SAFETY: per the contract, the box and its buffer are ours alone.
        unsafe {
            sys::vfree(me.as_ref().buf.as_ptr());
            drop(KBox::from_raw(me.as_ptr()));
        }
    }

    /// Lets go of one owner; the last one frees the entry.
    ///
    /// # Safety
    ///
    /// The caller is one of the entry's owners, lets go once, and does not
    /// use the entry afterwards.
    unsafe fn put_owner(me: NonNull<Self>) {
        // SAFETY: the caller's ownership keeps the entry alive until here.
        if unsafe { me.as_ref() }.owners.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Everything the other owner did with the entry happens before the free.
        fence(Ordering::Acquire);
        // SAFETY: the other owner let go already, so nobody uses the entry.
        unsafe { Self::free(me) };
    }
}

/// Which entries of a user context are still in the core's mmap table,
/// that the kernel has to take out before the context goes.
struct Published {
    /// Set when the context is torn down: the context may be gone.
    closed: bool,
    entries: KVec<NonNull<MapEntry>>,
}

// SAFETY: the pointers are only compared, and dereferenced under the table's
// lock by whoever holds it; each listed entry is kept alive by its core owner,
// which is not put while the entry is listed.
unsafe impl Send for Published {}

/// A user context's record of its published mmap entries. Lives in the
/// context's container (`UctxObj`) and in each entry.
#[pin_data]
pub(super) struct MapTable {
    #[pin]
    published: Mutex<Published>,
}

impl MapTable {
    pub(super) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                published <- new_mutex!(Published { closed: false, entries: KVec::new() }, "rroce_mmap_table"),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes every entry still published out of the core's table: the
    /// context is being deallocated. Rings dropped later find them gone.
    ///
    /// # Safety
    ///
    /// Only from `dealloc_ucontext` of the context this table belongs to,
    /// which is still alive; process context.
    pub(super) unsafe fn close(&self) {
        let mut published = self.published.lock();
        published.closed = true;
        for e in published.entries.drain_all() {
            // SAFETY: a listed entry's insert reference was not put yet (its kernel owner
            // puts it only after taking it off this list, under this lock) and its
            // context is alive by the contract; this puts it once, in process context.
            unsafe { sys::rdma_user_mmap_entry_remove(e.as_ref().entry.get()) };
        }
    }
}

/// The kernel's handle on a buffer user space may map: the ring's memory.
///
/// Dropping it is sound anywhere, at any time: it never sleeps in the caller
/// (the removal from the context's mmap table runs in process context, in a
/// work item if need be) and never reaches a context that was torn down
/// (the context's teardown removes the entries still published, under the
/// table's lock, and a later drop finds them gone). So a ring may sit in an
/// `Arc` the data path drops last in softirq, after its user context is
/// gone: what used to need the caller's care now holds by construction.
pub(crate) struct UserMapping {
    entry: NonNull<MapEntry>,
    /// The cookie user space passes as `mmap()` offset.
    offset: u64,
    /// Taken by `drop`.
    release: Option<ReleaseSlot<UserMapping>>,
}

// SAFETY: `&self` methods only read fields fixed at creation (the entry's `buf`
// and `len` never change), and `drop` is sound in any context (see the type).
unsafe impl Send for UserMapping {}
// SAFETY: as above.
unsafe impl Sync for UserMapping {}

impl UserMapping {
    /// Allocates a zeroed, page-aligned buffer of `len` bytes and publishes it
    /// in `uctx`'s mmap table. Process context.
    pub(crate) fn new(uctx: &UserContext, len: usize) -> Result<Self> {
        kernel::task::might_sleep();
        if len == 0 {
            return Err(EINVAL);
        }
        let release = ReleaseSlot::new()?;
        let table = uctx.maps();
        // SAFETY: plain allocation; returns zeroed memory suitable for `remap_vmalloc_range`.
        let buf = NonNull::new(unsafe { sys::rroce_vmalloc_user(len as _) }).ok_or(ENOMEM)?;
        let entry = MapEntry { entry: Opaque::zeroed(), buf, len, owners: AtomicU32::new(2), table: table.clone() };
        let entry = match KBox::new(entry, GFP_KERNEL) {
            Ok(b) => b,
            Err(e) => {
                // SAFETY: `buf` came from `vmalloc_user` and is not shared yet.
                unsafe { sys::vfree(buf.as_ptr()) };
                return Err(e.into());
            }
        };
        // SAFETY: `KBox::into_raw` never returns null.
        let me = unsafe { NonNull::new_unchecked(KBox::into_raw(entry)) };
        let mut published = table.published.lock();
        // Listed before the insert, under the lock: nobody sees it until both are done.
        let inserted = if published.closed {
            Err(EIO)
        } else {
            published.entries.push(me, GFP_KERNEL).map_err(Error::from).and_then(|()| {
                // SAFETY: `uctx` is live for the call; the entry is boxed, so the core's
                // kref and mutex in it stay put. On success the core owns a reference
                // and calls `mmap_free` when the last one is put.
                let ret = unsafe { sys::rdma_user_mmap_entry_insert(uctx.as_raw(), me.as_ref().entry.get(), len) };
                kernel::error::to_result(ret).inspect_err(|_| {
                    published.entries.pop();
                })
            })
        };
        if let Err(e) = inserted {
            drop(published);
            // SAFETY: not inserted (nor listed), so the entry and its buffer are still ours alone.
            unsafe { MapEntry::free(me) };
            return Err(e);
        }
        drop(published);
        // SAFETY: `start_pgoff` was set by the insert and the core never changes it.
        let pgoff = unsafe { (*me.as_ref().entry.get()).start_pgoff };
        Ok(Self { entry: me, offset: (pgoff as u64) << kernel::page::PAGE_SHIFT, release: Some(release) })
    }

    /// The cookie user space passes as `mmap()` offset.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Start of the buffer. It is shared with an untrusted process: access it
    /// only through volatile or atomic operations, never through references.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        // SAFETY: `self` is an owner, so the entry is alive; `buf` never changes.
        unsafe { self.entry.as_ref().buf.as_ptr().cast() }
    }

    pub(crate) fn len(&self) -> usize {
        // SAFETY: as in `as_ptr`.
        unsafe { self.entry.as_ref().len }
    }
}

impl SleepingRelease for UserMapping {
    type Raw = MapEntry;

    unsafe fn release(raw: NonNull<MapEntry>) {
        {
            // SAFETY: the kernel's owner, handed over by `drop`, keeps the entry alive
            // until `put_owner` below.
            let table = unsafe { &raw.as_ref().table };
            let mut published = table.published.lock();
            let before = published.entries.len();
            published.entries.retain(|e| *e != raw);
            if published.entries.len() != before {
                // SAFETY: listed, so the context's teardown has not run `close` (which
                // empties the list under this lock before the core frees the context):
                // the context is alive. The insert reference is put once, here, in
                // process context (the trait's contract).
                unsafe { sys::rdma_user_mmap_entry_remove((*raw.as_ptr()).entry.get()) };
            }
        }
        // SAFETY: the kernel's owner lets go once; the entry is not used afterwards.
        unsafe { MapEntry::put_owner(raw) };
    }
}

impl Drop for UserMapping {
    fn drop(&mut self) {
        if let Some(slot) = self.release.take() {
            // SAFETY: hands over the kernel's ownership once (the slot is taken);
            // nothing uses the entry through `self` any more.
            unsafe { slot.release(self.entry) };
        }
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
    // Every entry of our contexts is the first field of a `MapEntry` (`repr(C)`,
    // and `Opaque` is transparent).
    let me = entry.cast::<MapEntry>();
    // SAFETY: the reference taken above keeps the core's owner, so the entry and its
    // `vmalloc_user` buffer are alive; `buf` never changes and its length matches the
    // VMA. The mapping takes a reference on each page, so the pages outlive the
    // buffer's `vfree` for as long as user space maps them.
    unsafe {
        let ret = sys::remap_vmalloc_range(vma, (*me).buf.as_ptr(), 0);
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
    let Some(me) = NonNull::new(entry.cast::<MapEntry>()) else { return };
    // SAFETY: entries are `MapEntry` boxes made in `UserMapping::new` (the core
    // entry is the first field); the core lets go of its owner once, here.
    unsafe { MapEntry::put_owner(me) };
}
