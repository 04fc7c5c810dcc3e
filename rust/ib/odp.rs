// SPDX-License-Identifier: GPL-2.0
//! On-demand paging: user memory registered without pinning it. The core's
//! `ib_umem_odp` follows the process's mappings through an MMU notifier;
//! every access faults the pages it needs in, and copies under the umem's
//! mutex, which the notifier takes before pages leave the process.
//!
//! The core's fault walk writes the page list without that mutex and checks
//! for an invalidation only at its end: an entry it wrote for a page that
//! left meanwhile stays valid-looking until the walk retries, or for good if
//! the walk fails. So accesses to one region take turns (`serial`): none
//! reads the list while a walk of another runs, and a failed walk's entries
//! are dropped before the next access.

use super::release::{ReleaseSlot, SleepingRelease};
use super::mr::{for_each_page_piece, PAGE_SIZE};
use super::{Device, IbDriver, Udata};
use crate::proto::atomic::AtomicOp;
use crate::proto::odp_span::{pages_spanned, SpanLimits};
use crate::proto::quota::{Quota, Slots};
use crate::sys;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::alloc::KVec;
use kernel::sync::{new_mutex, Arc, Mutex, MutexGuard};

/// Whether the kernel was built with on-demand paging.
pub(crate) fn odp_supported() -> bool {
    // SAFETY: no preconditions.
    unsafe { sys::rroce_odp_enabled() }
}

/// How an access gets pages that are not present.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Faults them in (may sleep on the process's page faults).
    In,
    /// Takes only what is present (`PREFETCH_NO_FAULT`).
    Snapshot,
}

/// Pages of on-demand regions registered, on all devices, within
/// [`SpanLimits::total`]. Its bound moves with the machine's memory, so
/// [`take_span`] gives it with each take (the quota's own, 0, is never used).
static SPANNED_PAGES: Quota = Quota::new(0);

/// A region's pages in its user's count, given back when dropped: the
/// region's last reference may go in softirq, so an atomic count, no lock.
struct UserSpan {
    user: Arc<Quota>,
    pages: usize,
}

impl Drop for UserSpan {
    fn drop(&mut self) {
        self.user.release(self.pages);
    }
}

/// A region's pages in [`SPANNED_PAGES`] and in its user's share.
struct Span {
    _all: Slots<'static>,
    _user: UserSpan,
}

/// The users with on-demand regions, each with the count of the pages its
/// regions span (on all devices), shared with the regions. Kept sorted by
/// user; a user whose count is back at 0 is dropped at the next take (a
/// region's release cannot take the table's lock), or at unload.
pub(crate) struct SpanUsers(KVec<(u32, Arc<Quota>)>);

impl SpanUsers {
    /// No users; the module's table is a static.
    pub(crate) const fn new() -> Self {
        Self(KVec::new())
    }

    /// Takes `pages` for `user`, within its share and then within all, or
    /// nothing. Under the table's lock: a count seen at 0 here has no
    /// region's pages in it, so dropping it loses nothing.
    fn take(&mut self, user: u32, pages: usize, limits: SpanLimits) -> Result<Span> {
        self.0.retain(|(u, q)| *u == user || q.taken() != 0);
        let count = match self.0.binary_search_by(|(u, _)| u.cmp(&user)) {
            Ok(at) => self.0.get(at).ok_or(EINVAL)?.1.clone(),
            Err(at) => {
                let count = Arc::new(Quota::new(0), GFP_KERNEL_ACCOUNT)?;
                self.0.reserve(1, GFP_KERNEL_ACCOUNT)?;
                self.0.insert_within_capacity(at, (user, count.clone())).map_err(|_| ENOMEM)?;
                count
            }
        };
        let mine = count.try_take_within(pages, limits.user).ok_or(ENOMEM)?;
        let all = SPANNED_PAGES.try_take_within(pages, limits.total).ok_or(ENOMEM)?;
        mine.keep();
        Ok(Span { _all: all, _user: UserSpan { user: count, pages } })
    }

    /// Drops every user's count (module unload: no region is left, and a
    /// region's last release holds its own reference to its count).
    pub(crate) fn clear(&mut self) {
        self.0 = KVec::new();
    }
}

/// Takes a region's share of the span of all regions and of its user's
/// (the caller's), given back when dropped.
fn take_span(addr: u64, len: u64) -> Result<Span> {
    let pages = pages_spanned(addr, len, PAGE_SIZE).ok_or(EINVAL)?;
    let pages = usize::try_from(pages).map_err(|_| ENOMEM)?;
    // SAFETY: a plain query.
    let ram = unsafe { sys::rroce_totalram_pages() } as u64;
    let user = super::charged_uid();
    super::with_span_users(|users| users.take(user, pages, SpanLimits::for_ram(ram)))?
}

/// User memory of a process, mapped on demand while this value lives. It
/// holds its device's memory (not its registration) until released.
pub(crate) struct OdpUmem {
    raw: NonNull<sys::ib_umem_odp>,
    /// The user address of the first byte, and the length.
    addr: u64,
    len: u64,
    writable: bool,
    /// Set once the region is deregistered: accesses fail from then on.
    retired: AtomicBool,
    /// Held by each access from its first look at the page list to its last
    /// byte copied; never taken by the notifier.
    serial: Pin<KBox<Mutex<()>>>,
    /// The region's pages in [`SPANNED_PAGES`] and in its user's share.
    _share: Span,
    /// Ending the registration sleeps; the data path may drop the last reference.
    release: Option<ReleaseSlot<OdpUmem>>,
}

impl SleepingRelease for OdpUmem {
    type Raw = sys::ib_umem_odp;

    unsafe fn release(raw: NonNull<sys::ib_umem_odp>) {
        // SAFETY: per the trait's contract: ours to release, once, in process context.
        // The umem holds its device's memory (taken by `rroce_odp_get`) until this
        // returns, so it may run after the device is gone.
        unsafe { sys::rroce_odp_release(raw.as_ptr()) };
    }
}

// SAFETY: the umem lives until `drop`; the page list is only read under its mutex.
unsafe impl Send for OdpUmem {}
// SAFETY: as above; every `&self` access locks the umem's mutex.
unsafe impl Sync for OdpUmem {}

/// The umem's mutex, held: no page of it leaves the process meanwhile.
struct Locked<'a>(&'a OdpUmem);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: `Locked` exists only while this thread holds the mutex.
        unsafe { sys::rroce_odp_unlock(self.0.raw.as_ptr()) };
    }
}

impl Locked<'_> {
    /// The page holding user address `va`, which `lock_range` made present.
    fn page(&self, va: u64) -> *mut sys::page {
        // SAFETY: the mutex is held and `va` lies in a range `lock_range` checked.
        unsafe { sys::rroce_odp_page(self.0.raw.as_ptr(), va) }
    }

    /// Marks the page holding `va`, just written, dirty.
    fn dirty(&self, va: u64) {
        // SAFETY: the mutex is held and `va` lies in a range `lock_range` checked.
        unsafe { sys::rroce_odp_page_dirty(self.0.raw.as_ptr(), va) };
    }

    /// Drops the page-list entries of the pages of `va..va + len` (the next
    /// access faults them in again).
    fn forget(&self, va: u64, len: u64) {
        // SAFETY: the mutex is held and the range lies inside the umem.
        unsafe { sys::rroce_odp_forget(self.0.raw.as_ptr(), va, len) };
    }
}

/// Bytes a prefetch walks per turn of the region: 512 pages.
const PREFETCH_CHUNK: u64 = 512 * PAGE_SIZE;

/// A region's turn: the page list is current for the range `lock_range`
/// made present, and stays so until this is dropped (the umem's mutex is
/// released first, then the turn).
struct Turn<'a> {
    locked: Locked<'a>,
    _serial: MutexGuard<'a, ()>,
}

impl OdpUmem {
    /// Registers `len` bytes of the calling process at `addr` for on-demand
    /// paging. Nothing is faulted in yet. Only in a user verb (`call`): the
    /// process is the one whose memory `current` names.
    pub(crate) fn get<T: IbDriver>(dev: &Device<T>, call: &Udata<'_>, addr: u64, len: u64, access: i32) -> Result<Self> {
        kernel::task::might_sleep();
        if !call.is_user() {
            return Err(EINVAL);
        }
        if len == 0 || addr.checked_add(len).is_none() {
            return Err(EINVAL);
        }
        // Pages the region touches; given back on every failure below.
        let share = take_span(addr, len)?;
        // SAFETY: the device is alive; in a user verb (`call`) the core tracks the calling
        // process's range.
        let raw = unsafe { sys::rroce_odp_get(dev.raw(), addr as _, len as usize, access) };
        // SAFETY: `raw` is a pointer or an error pointer.
        if unsafe { sys::rroce_is_err(raw.cast()) } {
            // SAFETY: as above.
            return Err(Error::from_errno(unsafe { sys::rroce_ptr_err(raw.cast()) } as i32));
        }
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: a fresh umem of ours.
        let writable = unsafe { sys::rroce_odp_writable(raw.as_ptr()) };
        let made = KBox::pin_init(new_mutex!((), "rroce_odp_serial"), GFP_KERNEL_ACCOUNT)
            .map_err(Error::from)
            .and_then(|serial| Ok((serial, ReleaseSlot::new()?)));
        let (serial, release) = match made {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: releases the umem just taken; nothing else knows it.
                unsafe { sys::rroce_odp_release(raw.as_ptr()) };
                return Err(e);
            }
        };
        Ok(Self { raw, addr, len, writable, retired: AtomicBool::new(false), serial, _share: share, release: Some(release) })
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Pages of the region present now (faulted in, not invalidated since),
    /// a count of the moment read without the umem's mutex: any user may
    /// dump it (`rdma res`), and must not hold up the owner's faults.
    /// Process context (it may give the CPU up).
    pub(crate) fn pages_mapped(&self) -> u64 {
        // SAFETY: the umem, and with it its pfn list, is live while `self`
        // is; the helper only reads the list's entries.
        let n = unsafe { sys::rroce_odp_pages_mapped(self.raw.as_ptr()) };
        n as u64
    }

    /// Whether the registration allows writes (the core's `ib_access_writable`).
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }

    /// The user address of byte `offset`, for `len` bytes inside the region.
    fn user_range(&self, offset: u64, len: u64) -> Result<u64> {
        let end = offset.checked_add(len).ok_or(EFAULT)?;
        if len == 0 || end > self.len {
            return Err(EFAULT);
        }
        // Cannot wrap: `get` checked `addr + self.len`.
        Ok(self.addr + offset)
    }

    /// Whether every page of `va..va + len` is present (writable if `write`).
    fn present(&self, _held: &Locked<'_>, va: u64, len: u64, write: bool) -> bool {
        let mut page = va & !(PAGE_SIZE - 1);
        while page < va + len {
            // SAFETY: the mutex is held (`_held`) and the page lies inside the umem.
            if !unsafe { sys::rroce_odp_page_mapped(self.raw.as_ptr(), page, write) } {
                return false;
            }
            page += PAGE_SIZE;
        }
        true
    }

    /// Walks `va..va + len` (inside the region) into the page list,
    /// faulting pages in unless `fault` is [`Fault::Snapshot`]; returns with
    /// the umem's mutex held. Call with the region's turn.
    fn walk(&self, _turn: &MutexGuard<'_, ()>, va: u64, len: u64, write: bool, fault: Fault) -> Result<Locked<'_>> {
        // SAFETY: the range lies inside the umem; on success the helper returns with the
        // mutex held, which `Locked` releases.
        let r = unsafe { sys::rroce_odp_map_and_lock(self.raw.as_ptr(), va, len, write, fault == Fault::In) };
        if r < 0 {
            // SAFETY: the umem lives while `self` does.
            unsafe { sys::rroce_odp_lock(self.raw.as_ptr()) };
            Locked(self).forget(va, len);
            return Err(Error::from_errno(r));
        }
        Ok(Locked(self))
    }

    /// Makes `va..va + len` (inside the region) present, writable if `write`,
    /// and returns with the region's turn and the umem's mutex held.
    fn lock_range(&self, va: u64, len: u64, write: bool) -> Result<Turn<'_>> {
        if write && !self.writable {
            return Err(EACCES);
        }
        // A fault sleeps: only runners on a PD's own queue come here
        // (`pd_paging.rs`). Should anything else, the access fails rather
        // than sleep where it must not.
        if !crate::net::may_sleep() {
            return Err(EAGAIN);
        }
        let serial = self.serial.lock();
        if self.retired.load(Ordering::Relaxed) {
            return Err(EFAULT);
        }
        // SAFETY: the umem lives while `self` does.
        unsafe { sys::rroce_odp_lock(self.raw.as_ptr()) };
        let held = Locked(self);
        if self.present(&held, va, len, write) {
            return Ok(Turn { locked: held, _serial: serial });
        }
        drop(held);
        let held = self.walk(&serial, va, len, write, Fault::In)?;
        // The fault may have mapped less than asked (a page the process
        // cannot access that way): the access fails.
        if !self.present(&held, va, len, write) {
            return Err(EFAULT);
        }
        Ok(Turn { locked: held, _serial: serial })
    }

    /// Ends every access through the region: waits for one in progress (it
    /// may be waiting on a fault); those that start later fail.
    pub(crate) fn retire(&self) {
        kernel::task::might_sleep();
        let _turn = self.serial.lock();
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Faults `offset..offset + len` of the region in ahead of use
    /// (`ib_advise_mr`), or with [`Fault::Snapshot`] maps what is present.
    ///
    /// A user asks for gigabytes at once, and the data path's copies into
    /// the region wait for their turn: so
    /// the walk goes [`PREFETCH_CHUNK`] at a time, giving up the turn (and
    /// the CPU) between chunks, and stops with `EINTR` once the caller is
    /// being killed.
    pub(crate) fn prefetch(&self, offset: u64, len: u64, write: bool, fault: Fault) -> Result {
        kernel::task::might_sleep();
        let va = self.user_range(offset, len)?;
        if write && !self.writable {
            return Err(EPERM);
        }
        // `user_range` checked that the range lies inside the region.
        let end = va + len;
        let mut at = va;
        while at < end {
            let n = (PREFETCH_CHUNK - at % PREFETCH_CHUNK).min(end - at);
            {
                let serial = self.serial.lock();
                // Deregistered meanwhile: the rest is not walked.
                if self.retired.load(Ordering::Relaxed) {
                    return Err(EFAULT);
                }
                drop(self.walk(&serial, at, n, write, fault)?);
            }
            at += n;
            if at < end {
                // SAFETY: plain queries and a reschedule point of the calling task, which
                // holds no lock here.
                unsafe {
                    if sys::rroce_fatal_signal_pending() {
                        return Err(EINTR);
                    }
                    sys::rroce_cond_resched();
                }
            }
        }
        Ok(())
    }

    /// Copies the bytes at `offset` of the region into `dst`.
    pub(crate) fn read(&self, offset: u64, dst: &mut [u8]) -> Result {
        self.copy(offset, dst.as_mut_ptr(), dst.len(), false)
    }

    /// Copies `src` to `offset` of the region.
    pub(crate) fn write(&self, offset: u64, src: &[u8]) -> Result {
        // The helper only reads from `src` in this direction.
        self.copy(offset, src.as_ptr().cast_mut(), src.len(), true)
    }

    fn copy(&self, offset: u64, buf: *mut u8, len: usize, to_mem: bool) -> Result {
        if len == 0 {
            // Nothing to fault in; the offset must still lie in the region.
            return if offset <= self.len { Ok(()) } else { Err(EFAULT) };
        }
        let va = self.user_range(offset, len as u64)?;
        let turn = self.lock_range(va, len as u64, to_mem).map_err(access_error)?;
        let held = &turn.locked;
        for_each_page_piece(va, len, |pos, in_page, done, piece| {
            // SAFETY: the page stays in the process while the mutex is held;
            // `in_page + piece <= PAGE_SIZE`; `buf + done` has `piece` bytes (callers pass a
            // slice of `len` bytes), which the helper writes only when copying from memory.
            unsafe { sys::rroce_page_copy(held.page(pos), in_page, buf.add(done).cast(), piece as u32, to_mem) };
            if to_mem {
                held.dirty(pos);
            }
            Ok(())
        })
    }

    /// Executes `op` on the 8 bytes at `offset` (8-byte aligned in memory);
    /// returns what they held.
    pub(crate) fn atomic(&self, offset: u64, op: AtomicOp) -> Result<u64> {
        const BYTES: u64 = 8;
        let va = self.user_range(offset, BYTES)?;
        // A user address's alignment is its page offset's.
        if va % BYTES != 0 {
            return Err(EINVAL);
        }
        let turn = self.lock_range(va, BYTES, true).map_err(access_error)?;
        let (code, compare, operand) = super::kmem::helper_atomic(op);
        let page = turn.locked.page(va);
        // SAFETY: the page stays in the process while the mutex is held and is mapped
        // writable; the offset is 8-byte aligned, so the 8 bytes lie inside it.
        let found = unsafe { sys::rroce_page_atomic(page, (va & (PAGE_SIZE - 1)) as u32, code, compare, operand) };
        turn.locked.dirty(va);
        Ok(found)
    }
}

/// What a failed fault means to a transfer: the memory is not there for it.
/// (The walk's own codes, `EINVAL` for a process that is gone among them,
/// would read as other errors: `EINVAL` is the misaligned atomic's.)
fn access_error(e: Error) -> Error {
    if e == EACCES {
        e
    } else {
        EFAULT
    }
}

impl Drop for OdpUmem {
    fn drop(&mut self) {
        if let Some(slot) = self.release.take() {
            // SAFETY: releases the umem taken in `get`, once. No access is in progress:
            // each holds a reference to the owner of `self`.
            unsafe { slot.release(self.raw) };
        }
    }
}
