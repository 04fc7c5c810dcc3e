// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' memory. With a null DMA device the core's virtual DMA
//! ops hand consumers kernel virtual addresses as "DMA" addresses, and the
//! SGEs they post carry those. A store through a wrong kernel address
//! corrupts whatever lives there; a read through one, though fault-checked,
//! may send any kernel memory (keys, other users' data) to a peer. So only
//! two values can read or write, and only this module tree creates them
//! (besides an inline send's own SGEs, which
//! [`KernelSge::read_inline`](super::KernelSge::read_inline) reads while
//! the consumer posts them):
//! - [`KernelMemory`], the grant of a DMA MR that a kernel consumer asked
//!   for (`get_dma_mr` on a kernel PD): the consumer gives the device all of
//!   its memory, by the address it names, as it would give a DMA engine,
//!   until the MR's deregistration revokes it;
//! - [`KernelPages`], the page lists of one fast-registration MR, which
//!   only that MR's `ib_map_mr_sg` fills, whose writes stay inside one
//!   mapped page, and which only a REG_MR the consumer posted for that MR
//!   ([`RegMrPosted`]) makes accessible. They live in the MR's [`FastMr`],
//!   whose lock every access holds and whose deregistration the ib layer
//!   revokes before it returns to the consumer.
//!
//! A driver that holds neither cannot read or write kernel memory:
//!
//! ```compile_fail
//! let grant = crate::ib::KernelMemory { grant: todo!() }; // private field
//! ```

use super::mr::{MappedPages, MrSg};
use crate::proto::atomic::AtomicOp;
use crate::sys;
use core::marker::PhantomPinned;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::sync::{new_spinlock_irq, rcu, Arc, SpinLockIrq, SpinLockIrqGuard};

/// Copies `dst.len()` bytes from kernel virtual address `src`.
///
/// # Safety
///
/// `src..src + dst.len()` must be memory a kernel consumer gave the device
/// to read (see the module's documentation): a safe caller could otherwise
/// send any kernel memory to a peer.
unsafe fn read_kernel(src: u64, dst: &mut [u8]) -> Result {
    // SAFETY: `dst` is writable for its length; the source is the caller's to grant, the
    // helper refuses anything outside the linear map, and reads by the nofault copy.
    let r = unsafe { sys::rroce_copy_from_linear(dst.as_mut_ptr().cast(), src, dst.len()) };
    if r == 0 {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// The helpers' operation code and operands for `op`.
pub(super) fn helper_atomic(op: AtomicOp) -> (sys::rroce_atomic_op, u64, u64) {
    match op {
        AtomicOp::CompareSwap { compare, swap } => (sys::rroce_atomic_op_RROCE_ATOMIC_COMPARE_SWAP, compare, swap),
        AtomicOp::FetchAdd { add } => (sys::rroce_atomic_op_RROCE_ATOMIC_FETCH_ADD, 0, add),
        AtomicOp::Store { value } => (sys::rroce_atomic_op_RROCE_ATOMIC_STORE, 0, value),
    }
}

/// Copies `src` to kernel virtual address `dst`.
///
/// # Safety
///
/// `dst..dst + src.len()` must be memory a kernel consumer gave the device
/// to write (see the module's documentation).
unsafe fn write_kernel(dst: u64, src: &[u8]) -> Result {
    // SAFETY: `src` is readable for its length; the destination is the caller's to grant,
    // and the helper refuses anything outside the linear map besides.
    let r = unsafe { sys::rroce_copy_to_kernel(dst, src.as_ptr().cast(), src.len()) };
    if r == 0 {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// Executes `op` on the 8 bytes at kernel virtual address `addr`; returns
/// the value found.
///
/// # Safety
///
/// As for [`write_kernel`], for `addr..addr + 8`.
unsafe fn atomic_kernel(addr: u64, op: AtomicOp) -> Result<u64> {
    let (code, compare, operand) = helper_atomic(op);
    let mut old = 0u64;
    // SAFETY: the target is the caller's to grant; the helper refuses a misaligned address
    // or one outside the linear map; `old` is a valid out pointer.
    let r = unsafe { sys::rroce_kernel_atomic(addr, code, compare, operand, &mut old) };
    if r == 0 {
        Ok(old)
    } else {
        Err(EFAULT)
    }
}

/// A kernel consumer's grant of its memory to a DMA MR: the device may
/// write wherever the consumer's work requests, or the peers it gave the
/// MR's rkey to, point, until the consumer deregisters the MR. Created only
/// by `get_dma_mr` on a kernel PD; not `Clone`. The MR's `dereg_mr` revokes
/// it ([`GrantRevoker`]) before it returns to the consumer, whoever still
/// holds the driver's data then: accesses fail with `EFAULT` from then on.
pub(crate) struct KernelMemory {
    grant: Arc<Grant>,
}

/// Whether a [`KernelMemory`] still holds: read under the RCU read lock by
/// every access, cleared by [`GrantRevoker::revoke`], which then waits for
/// the readers.
pub(super) struct Grant {
    live: AtomicBool,
}

/// What revokes a [`KernelMemory`]: the ib layer keeps it with the MR.
pub(super) struct GrantRevoker(Arc<Grant>);

impl GrantRevoker {
    /// Process context. Once this returns, no access through the grant is in
    /// progress and none succeeds any more.
    pub(super) fn revoke(&self) {
        kernel::task::might_sleep();
        self.0.live.store(false, Ordering::Release);
        rcu::synchronize_rcu();
    }
}

impl KernelMemory {
    /// # Safety
    ///
    /// Only for the MR of a kernel consumer's `get_dma_mr`, whose
    /// deregistration calls the revoker's `revoke` before it returns.
    pub(super) unsafe fn granted() -> Result<(Self, GrantRevoker)> {
        let grant = Arc::new(Grant { live: AtomicBool::new(true) }, GFP_KERNEL)?;
        Ok((Self { grant: grant.clone() }, GrantRevoker(grant)))
    }

    /// Runs `f` if the grant still holds, with the RCU read lock that keeps
    /// it from being revoked until `f` returns.
    fn while_granted<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let _rcu = rcu::read_lock();
        if !self.grant.live.load(Ordering::Acquire) {
            return Err(EFAULT);
        }
        f()
    }

    pub(crate) fn read(&self, addr: u64, dst: &mut [u8]) -> Result {
        // SAFETY: as in `write`.
        self.while_granted(|| unsafe { read_kernel(addr, dst) })
    }

    pub(crate) fn write(&self, addr: u64, src: &[u8]) -> Result {
        // SAFETY: the consumer granted its memory (`granted`), and has not deregistered the
        // MR yet: `while_granted` found the grant live under the RCU read lock, which
        // `revoke` waits out before the deregistration returns.
        self.while_granted(|| unsafe { write_kernel(addr, src) })
    }

    pub(crate) fn atomic(&self, addr: u64, op: AtomicOp) -> Result<u64> {
        // SAFETY: as in `write`.
        self.while_granted(|| unsafe { atomic_kernel(addr, op) })
    }
}

/// Which fast-registration MR a page list, a map and a posted REG_MR
/// belong to: a number `alloc_mr` draws, never reused (64 bits do not wrap).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct MrIdentity(u64);

impl MrIdentity {
    pub(super) fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// What `alloc_mr` hands the driver for the new MR: its identity, which
/// makes the one [`FastMr`] (and so the one [`KernelPages`]) of the MR, and
/// where the ib layer keeps that `FastMr` to revoke it at `dereg_mr`. Not
/// `Clone`, and does not outlive the verb.
pub(crate) struct FastMrId<'a> {
    mr: MrIdentity,
    made: &'a mut Option<Arc<dyn Revoke>>,
}

impl<'a> FastMrId<'a> {
    pub(super) fn new(mr: MrIdentity, made: &'a mut Option<Arc<dyn Revoke>>) -> Self {
        Self { mr, made }
    }

    /// The MR's page lists, with room for `max` pages each, under one lock
    /// with `driver`, the driver's own state for them. The ib layer keeps a
    /// reference and revokes the pages when the consumer deregisters the MR.
    pub(crate) fn make<M: Send + 'static>(self, max: usize, driver: M) -> Result<Arc<FastMr<M>>> {
        let pages = KernelPages::new(self.mr, max)?;
        let mr = Arc::pin_init(
            pin_init!(FastMr {
                state <- new_spinlock_irq!(FastMrState { pages, driver }, "rroce_fast_mr"),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        *self.made = Some(mr.clone());
        Ok(mr)
    }
}

/// A fast-registration MR's pages and the driver's state for them, under
/// the lock every access to the pages holds (they are reached only through
/// [`Self::lock`]). The ib layer holds the MR's `FastMr` too, and
/// `dereg_mr` takes that lock to revoke the pages after the driver's
/// deregistration returns, before the consumer gets its memory back: no
/// access is in progress then, and none succeeds later, whatever the driver
/// did or still holds. A spinning lock, not a grace period: consumers free
/// hundreds of MRs at queue teardown.
///
/// The driver cannot make the pages any other way (nor move them out: it
/// gets them only pinned, see [`KernelPages`]):
///
/// ```compile_fail
/// fn own_pages(id: crate::ib::FastMrId<'_>) {
///     let _ = crate::ib::KernelPages::new(id, 4); // private
/// }
/// ```
#[pin_data]
pub(crate) struct FastMr<M> {
    #[pin]
    state: SpinLockIrq<FastMrState<M>>,
}

/// What [`FastMr`]'s lock holds: the pages, pinned, and the driver's state.
#[pin_data]
pub(crate) struct FastMrState<M> {
    #[pin]
    pages: KernelPages,
    driver: M,
}

impl<M> FastMr<M> {
    /// The pages and the driver's state; [`FastMrState::parts`] changes them.
    pub(crate) fn lock(&self) -> SpinLockIrqGuard<'_, FastMrState<M>> {
        self.state.lock()
    }
}

impl<M> FastMrState<M> {
    pub(crate) fn pages(&self) -> &KernelPages {
        &self.pages
    }

    pub(crate) fn driver(&self) -> &M {
        &self.driver
    }

    /// Both, to change: the pages only pinned.
    pub(crate) fn parts(self: Pin<&mut Self>) -> (Pin<&mut KernelPages>, &mut M) {
        let this = self.project();
        (this.pages, this.driver)
    }
}

/// What the ib layer calls on the MR's [`FastMr`], whatever the driver's state.
pub(super) trait Revoke: Send + Sync {
    /// `alloc_mr` returned `key` as the MR's R_Key (see [`KernelPages`]).
    fn bind_key(&self, key: u32);

    /// `dereg_mr`: once this returns, no access to the pages is in progress
    /// and none succeeds any more.
    fn revoke(&self);
}

impl<M: Send> Revoke for FastMr<M> {
    fn bind_key(&self, key: u32) {
        let mut state = self.state.lock();
        state.as_mut().parts().0.bind_key(key);
    }

    fn revoke(&self) {
        // Every access holds the lock: one in progress has finished once it is ours.
        let mut state = self.state.lock();
        state.as_mut().parts().0.revoke();
    }
}

/// A REG_MR work request a kernel consumer posted for one fast-registration
/// MR: its promise that the pages it mapped into that MR stay until the
/// registration is invalidated or the MR deregistered. Created only where
/// the core's `ib_reg_wr` is read, naming the MR of the request; not
/// `Clone`. [`KernelPages::post`] takes it in exchange for the number the
/// WQE carries, and only the MR it names takes it.
///
/// A driver cannot make one up:
///
/// ```compile_fail
/// let posted = crate::ib::RegMrPosted { mr: todo!() }; // private field
/// ```
pub(crate) struct RegMrPosted {
    mr: MrIdentity,
}

impl RegMrPosted {
    /// # Safety
    ///
    /// Only for an `IB_WR_REG_MR` work request a kernel consumer posted, for
    /// the MR of identity `mr`.
    pub(super) unsafe fn posted(mr: MrIdentity) -> Self {
        Self { mr }
    }
}

/// A LOCAL_INV work request a kernel consumer posted: the key it names and
/// the `wr_id` its completion carries. Created only where the core's
/// `ib_send_wr` is read; not `Clone`. [`KernelPages::unregister_posted`]
/// takes it, so the proof of a LOCAL_INV is made after the request was
/// posted, for the key it named, once.
///
/// A driver cannot make one up:
///
/// ```compile_fail
/// let posted = crate::ib::LocalInvPosted { key: 0, wr_id: 0 }; // private fields
/// ```
pub(crate) struct LocalInvPosted {
    key: u32,
    wr_id: u64,
}

impl LocalInvPosted {
    /// # Safety
    ///
    /// Only for an `IB_WR_LOCAL_INV` work request a kernel consumer posted,
    /// naming `key` (`ex.invalidate_rkey`), with `wr_id`.
    pub(super) unsafe fn posted(key: u32, wr_id: u64) -> Self {
        Self { key, wr_id }
    }

    /// The key the request names.
    pub(crate) fn key(&self) -> u32 {
        self.key
    }
}

/// Who asked for an invalidation, which decides the completion its proof fits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum InvalidatedBy {
    /// The posted LOCAL_INV whose completion carries this `wr_id`.
    LocalInv { wr_id: u64 },
    /// A peer's SEND with Invalidate, whose receive completion names the key.
    Peer,
}

/// Proof that an invalidation of `key` made the pages of the one
/// fast-registration MR whose key it is inaccessible: only
/// [`KernelPages::unregister`] and [`KernelPages::unregister_posted`] make
/// one, under the MR's lock, and only when `key` is the MR's key (of its
/// last registration, else the one `alloc_mr` gave it, which the ib layer
/// binds: so a proof names the MR, also one never registered, never another
/// MR's key). No access was in progress then and none succeeds until a
/// later REG_MR. A kernel consumer reuses the pages once a completion says
/// the invalidation finished, so the completions that say so take one
/// ([`KernelWc::new`](super::KernelWc::new)): a LOCAL_INV's
/// only the proof made from its own [`LocalInvPosted`] (so after it was
/// posted, for the key it named, checked by `wr_id`), a receive's only a
/// peer's invalidation of the key it reports. Not `Clone`: one proof, one
/// completion. The driver's part: that completions come in the order
/// posted (two LOCAL_INVs may share a `wr_id`), and that a peer's proof is
/// the packet's own, not one kept from before the MR's last registration.
///
/// A driver cannot make one up:
///
/// ```compile_fail
/// let proof = crate::ib::Invalidated { key: 0 }; // private fields
/// ```
pub(crate) struct Invalidated {
    key: u32,
    by: InvalidatedBy,
}

impl Invalidated {
    /// Whether this proves the invalidation of the LOCAL_INV whose
    /// completion carries `wr_id`.
    pub(super) fn fits_local_inv(&self, wr_id: u64) -> bool {
        self.by == InvalidatedBy::LocalInv { wr_id }
    }

    /// Whether this proves a peer's invalidation of `key`.
    pub(super) fn fits_peer(&self, key: u32) -> bool {
        self.by == InvalidatedBy::Peer && self.key == key
    }
}

/// One list of kernel virtual addresses of pages of one size.
pub(super) struct PageList {
    addrs: KVVec<u64>,
    /// Pages the last map wrote.
    count: usize,
    /// Their size, from the consumer's MR.
    page_size: u64,
    /// Where the mapped bytes start in the first page.
    first_offset: u64,
    /// How many bytes the scatterlist mapped from there: the pages' bytes
    /// after them are not the consumer's to give (the rest of a slab page).
    mapped_len: u64,
}

impl PageList {
    fn new(max: usize) -> Result<Self> {
        let mut addrs = KVVec::with_capacity(max, GFP_KERNEL_ACCOUNT)?;
        addrs.resize(max, 0u64, GFP_KERNEL_ACCOUNT)?;
        Ok(Self { addrs, count: 0, page_size: 0, first_offset: 0, mapped_len: 0 })
    }

    /// Room for a new map (see `MrSg::to_pages`): the list holds no pages
    /// until `set_mapped`.
    pub(super) fn slots(&mut self) -> &mut [u64] {
        self.count = 0;
        self.mapped_len = 0;
        &mut self.addrs
    }

    pub(super) fn set_mapped(&mut self, count: usize, page_size: u64, first_offset: u64, mapped_len: u64) {
        self.count = count.min(self.addrs.len());
        self.page_size = page_size;
        self.first_offset = first_offset;
        self.mapped_len = mapped_len;
    }

    /// Whether `len` bytes from `first_offset` are bytes the scatterlist
    /// mapped, inside the mapped pages.
    fn holds(&self, len: u64) -> bool {
        let span = (self.count as u64).checked_mul(self.page_size);
        let end = self.first_offset.checked_add(len);
        len <= self.mapped_len && matches!((span, end), (Some(s), Some(e)) if e <= s)
    }
}

/// The page lists of one fast-registration MR, bound to it: what only
/// `map` (the consumer's `ib_map_mr_sg` of that MR) fills, and only a
/// REG_MR the consumer posted for that MR makes accessible, once. Accesses
/// name a page by its index and an offset in it, and reach only bytes of
/// the scatterlist the consumer mapped, and only while its REG_MR holds
/// (from `register` to `unregister`): never memory it did not give, or
/// took back.
///
/// Two lists: a map fills the one not registered, and the next REG_MR
/// switches to it, so a consumer may map before it invalidates the
/// registration in force (rdma_rw chains LOCAL_INV and REG_MR after the
/// map), whose pages it keeps until then.
///
/// Posted REG_MRs are numbered per MR. [`Self::post`] takes the
/// [`RegMrPosted`] of a REG_MR of this MR when the driver queues the WQE
/// and gives the number the WQE carries; when the WQE runs,
/// [`Self::take_post`] gives it back for that number once, and never for a
/// number at or below one already taken: registrations of an MR run in the
/// order they were posted. A REG_MR refused after `post` is withdrawn
/// (`withdraw`). One that is flushed leaves its number unused until a later
/// REG_MR of the MR runs; until then only the flushed WQE names it, which
/// the requester does not run, and afterwards it registers nothing. So no
/// number authorises more than the one REG_MR posted with it, and a stale
/// one does not authorise a later registration.
///
/// Without a posted REG_MR nothing becomes accessible, and the lists refuse
/// one of another MR:
///
/// ```compile_fail
/// fn register_again(pages: Pin<&mut crate::ib::KernelPages>) {
///     pages.register(4096); // takes a `RegMrPosted` of this MR too
/// }
/// ```
///
/// They change only pinned, so the driver cannot swap or replace them in
/// place, say moving registered pages to another MR, whose invalidation
/// would then miss them (lists moved with a box they are pinned in still
/// refuse the other MR's maps and REG_MRs; that an invalidation reaches the
/// lists of the MR it names is the driver's part; that the consumer hears
/// of it only after [`Self::unregister`] is the ib layer's, see
/// [`Invalidated`]):
///
/// ```compile_fail
/// fn swap(a: Pin<&mut crate::ib::KernelPages>, b: Pin<&mut crate::ib::KernelPages>) {
///     core::mem::swap(&mut *a, &mut *b); // `KernelPages` is not `Unpin`
/// }
/// ```
#[pin_data]
pub(crate) struct KernelPages {
    mr: MrIdentity,
    /// The list registrations use.
    current: PageList,
    /// The list the next map fills.
    next: PageList,
    /// Whether `next` holds a map no REG_MR used yet.
    new_map: bool,
    /// Bytes of `current` accessible from its `first_offset` on: 0 unless
    /// registered.
    registered_len: u64,
    /// The number the next posted REG_MR gets; numbers start at 1.
    next_post: u64,
    /// Numbers up to this one are used up or withdrawn.
    used_posts: u64,
    /// The key of the last registration, at first the R_Key `alloc_mr`
    /// gave the MR; `None` until the ib layer binds that (`bind_key`): only
    /// this key is invalidated, and registrations keep its index bits.
    key: Option<u32>,
    #[pin]
    _pinned: PhantomPinned,
}

impl KernelPages {
    /// Empty lists for MR `mr` with room for `max` pages each, allocated
    /// now: mapping happens in atomic context and never allocates. Only
    /// [`FastMrId::make`], once per MR.
    fn new(mr: MrIdentity, max: usize) -> Result<Self> {
        Ok(Self {
            mr,
            current: PageList::new(max)?,
            next: PageList::new(max)?,
            new_map: false,
            registered_len: 0,
            next_post: 1,
            used_posts: 0,
            key: None,
            _pinned: PhantomPinned,
        })
    }

    /// `ib_map_mr_sg` of this MR: `sg`'s pages, for the next REG_MR.
    pub(crate) fn map(self: Pin<&mut Self>, sg: &MrSg) -> Result<MappedPages> {
        let this = self.project();
        if sg.mr_identity() != Some(*this.mr) {
            return Err(EINVAL);
        }
        *this.new_map = false;
        let mapped = sg.to_pages(this.next)?;
        *this.new_map = true;
        Ok(mapped)
    }

    /// Whether the next registration uses a new map (else the pages of the
    /// last one again).
    pub(crate) fn has_new_map(&self) -> bool {
        self.new_map
    }

    /// The driver queues the WQE of REG_MR `posted`: the number the WQE
    /// carries, for [`Self::take_post`]. Refused for a REG_MR of another MR.
    pub(crate) fn post(self: Pin<&mut Self>, posted: RegMrPosted) -> Result<u64> {
        let this = self.project();
        if posted.mr != *this.mr {
            return Err(EINVAL);
        }
        let number = *this.next_post;
        *this.next_post = number.checked_add(1).ok_or(EOVERFLOW)?;
        Ok(number)
    }

    /// The WQE of REG_MR `number` was not queued after all: the number
    /// registers nothing.
    pub(crate) fn withdraw(self: Pin<&mut Self>, number: u64) {
        let this = self.project();
        if number.checked_add(1) == Some(*this.next_post) && number > *this.used_posts {
            *this.next_post = number;
        } else {
            // Not the last one given: the ones before it become unusable too.
            *this.used_posts = (*this.used_posts).max(number);
        }
    }

    /// The WQE of REG_MR `number` runs: its `RegMrPosted`, once, if it
    /// holds one this MR gave and no later one has run.
    pub(crate) fn take_post(self: Pin<&mut Self>, number: u64) -> Option<RegMrPosted> {
        let this = self.project();
        if number <= *this.used_posts || number >= *this.next_post {
            return None;
        }
        *this.used_posts = number;
        Some(RegMrPosted { mr: *this.mr })
    }

    /// The MR's R_Key from `alloc_mr`, once: only the ib layer, before the
    /// core publishes the MR ([`Revoke::bind_key`]).
    fn bind_key(self: Pin<&mut Self>, key: u32) {
        let this = self.project();
        if this.key.is_none() {
            *this.key = Some(key);
        }
    }

    /// The REG_MR `posted` of this MR makes the first `len` mapped bytes of
    /// the new map, or else of the last one, accessible (at most what its
    /// pages hold after `first_offset`) under `key`, which an invalidation
    /// names; it is used up either way. `key` differs from the MR's key
    /// from `alloc_mr` in its low byte only, as a consumer's REG_MR key does
    /// (`ib_update_fast_reg_key`): so it is no other MR's key.
    pub(crate) fn register(self: Pin<&mut Self>, len: u64, posted: RegMrPosted, key: u32) -> Result {
        let this = self.project();
        if posted.mr != *this.mr {
            return Err(EINVAL);
        }
        match *this.key {
            Some(k) if k >> 8 == key >> 8 => {}
            _ => return Err(EINVAL),
        }
        let list = if *this.new_map { &*this.next } else { &*this.current };
        if !list.holds(len) {
            return Err(EINVAL);
        }
        if *this.new_map {
            core::mem::swap(this.current, this.next);
            *this.new_map = false;
        }
        *this.registered_len = len;
        *this.key = Some(key);
        Ok(())
    }

    /// Pages accessible now (none unless registered).
    pub(crate) fn registered_pages(&self) -> usize {
        if self.registered_len == 0 { 0 } else { self.current.count }
    }

    /// Invalidation of `key` by `by`: nothing is accessible any more; the
    /// proof of it. Refused (nothing changes) unless `key` is the MR's key:
    /// of its last registration, or if it has none (invalidating a free MR
    /// succeeds, as in rdma_rxe), the one `alloc_mr` gave it.
    fn invalidate(self: Pin<&mut Self>, key: u32, by: InvalidatedBy) -> Result<Invalidated> {
        let this = self.project();
        if *this.key != Some(key) {
            return Err(EINVAL);
        }
        *this.registered_len = 0;
        Ok(Invalidated { key, by })
    }

    /// A peer's SEND with Invalidate of `key`: see `invalidate`; the proof
    /// fits only a receive completion reporting `key`.
    pub(crate) fn unregister(self: Pin<&mut Self>, key: u32) -> Result<Invalidated> {
        self.invalidate(key, InvalidatedBy::Peer)
    }

    /// The LOCAL_INV `posted` runs: see `invalidate`, for the key it names;
    /// the proof fits only that LOCAL_INV's completion.
    pub(crate) fn unregister_posted(self: Pin<&mut Self>, posted: LocalInvPosted) -> Result<Invalidated> {
        self.invalidate(posted.key, InvalidatedBy::LocalInv { wr_id: posted.wr_id })
    }

    /// Deregistration: nothing is accessible, and no REG_MR posted so far
    /// registers. Only the ib layer's `dereg_mr` ([`Revoke`]), under the
    /// lock of the MR's [`FastMr`].
    fn revoke(self: Pin<&mut Self>) {
        let this = self.project();
        *this.registered_len = 0;
        this.current.count = 0;
        this.next.count = 0;
        *this.new_map = false;
        *this.used_posts = this.next_post.saturating_sub(1);
    }

    /// The address of `len` bytes at `in_page` of page `page`, if they lie
    /// inside that page and inside the registered bytes.
    fn span(&self, page: usize, in_page: u64, len: usize) -> Result<u64> {
        let list = &self.current;
        if page >= list.count {
            return Err(EFAULT);
        }
        let end = in_page.checked_add(len as u64).ok_or(EFAULT)?;
        if end > list.page_size {
            return Err(EFAULT);
        }
        let at = (page as u64).checked_mul(list.page_size).and_then(|b| b.checked_add(in_page)).ok_or(EFAULT)?;
        let last = at.checked_add(len as u64).ok_or(EFAULT)?;
        let registered_end = list.first_offset.checked_add(self.registered_len).ok_or(EFAULT)?;
        if at < list.first_offset || last > registered_end {
            return Err(EFAULT);
        }
        list.addrs.get(page).ok_or(EFAULT)?.checked_add(in_page).ok_or(EFAULT)
    }

    pub(crate) fn read(&self, page: usize, in_page: u64, dst: &mut [u8]) -> Result {
        let addr = self.span(page, in_page, dst.len())?;
        // SAFETY: as in `write`, for reading.
        unsafe { read_kernel(addr, dst) }
    }

    pub(crate) fn write(&self, page: usize, in_page: u64, src: &[u8]) -> Result {
        let addr = self.span(page, in_page, src.len())?;
        // SAFETY: `span` checked that `addr..addr + len` is inside one page of the list
        // only `map` (the consumer's `ib_map_mr_sg` of this MR, checked by identity) writes,
        // inside the bytes its scatterlist maps, and registered by a REG_MR the consumer
        // posted for this MR (`register` takes its `RegMrPosted`, checked by identity): the
        // consumer keeps that memory until it hears of its invalidation, by a completion
        // that takes the proof only `unregister` gives, or until its deregistration, which
        // `revoke` records before `dereg_mr` returns (both through a pinned `&mut self`
        // under the MR's lock, so not while this borrow lasts, and not on lists moved to
        // another MR).
        unsafe { write_kernel(addr, src) }
    }

    pub(crate) fn atomic(&self, page: usize, in_page: u64, op: AtomicOp) -> Result<u64> {
        let addr = self.span(page, in_page, crate::proto::atomic::ATOMIC_BYTES as usize)?;
        // SAFETY: as in `write`, for the 8 bytes at `addr`.
        unsafe { atomic_kernel(addr, op) }
    }
}
