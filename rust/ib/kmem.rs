// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' memory. With a null DMA device the core's virtual DMA
//! ops hand consumers kernel virtual addresses as "DMA" addresses, and the
//! SGEs they post carry those. Reads are fault-checked, so any address is
//! at worst an error. Writes are not: a store through a wrong kernel address
//! corrupts whatever lives there. So only two values can write, and only
//! this module tree creates them:
//! - [`KernelMemory`], the grant of a DMA MR that a kernel consumer asked
//!   for (`get_dma_mr` on a kernel PD): the consumer gives the device all of
//!   its memory, by the address it names, as it would give a DMA engine,
//!   until the MR's deregistration revokes it;
//! - [`KernelPages`], the page list of a fast-registration MR, which only
//!   `ib_map_mr_sg` fills, whose writes stay inside one mapped page, and
//!   which only a REG_MR the consumer posted ([`RegMrPosted`]) makes
//!   accessible.
//!
//! A driver that holds neither cannot write kernel memory:
//!
//! ```compile_fail
//! let grant = crate::ib::KernelMemory { grant: todo!() }; // private field
//! ```

use crate::proto::atomic::AtomicOp;
use crate::sys;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::alloc::KVVec;
use kernel::prelude::*;
use kernel::sync::{rcu, Arc};

/// Copies `dst.len()` bytes from kernel virtual address `src`.
pub(crate) fn copy_from_kernel(src: u64, dst: &mut [u8]) -> Result {
    // SAFETY: `dst` is writable for its length; the source is read by the nofault copy,
    // so a bad address is an error, not a fault.
    let r = unsafe { sys::rroce_copy_from_kernel(dst.as_mut_ptr().cast(), src, dst.len()) };
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
        self.while_granted(|| copy_from_kernel(addr, dst))
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

/// A REG_MR work request a kernel consumer posted: its promise that the
/// pages it mapped into the MR stay until the registration is invalidated
/// or the MR deregistered. Created only where the core's `ib_reg_wr` is
/// read; not `Clone`, so each posted REG_MR registers pages at most once
/// (an invalidation takes them back, and only a new REG_MR gives them
/// again).
///
/// A driver cannot make one up:
///
/// ```compile_fail
/// let posted = crate::ib::RegMrPosted { _posted: () }; // private field
/// ```
pub(crate) struct RegMrPosted {
    _posted: (),
}

impl RegMrPosted {
    /// # Safety
    ///
    /// Only for an `IB_WR_REG_MR` work request a kernel consumer posted.
    pub(super) unsafe fn posted() -> Self {
        Self { _posted: () }
    }
}

/// The REG_MRs posted to one fast-registration MR that have not run yet:
/// the driver hands each over when it queues the request and takes it back
/// when the request runs, or is not queued after all.
#[derive(Default)]
pub(crate) struct PostedRegs {
    count: usize,
}

impl PostedRegs {
    pub(crate) fn add(&mut self, _posted: RegMrPosted) {
        // Bounded by the WQEs that fit on the consumer's send queues.
        self.count = self.count.saturating_add(1);
    }

    pub(crate) fn take(&mut self) -> Option<RegMrPosted> {
        self.count = self.count.checked_sub(1)?;
        Some(RegMrPosted { _posted: () })
    }
}

/// The page list of a fast-registration MR: kernel virtual addresses of
/// pages of one size, which only `MrSg::to_pages` (the consumer's
/// `ib_map_mr_sg`) writes. Accesses name a page by its index and an offset
/// in it, and reach only bytes of the scatterlist the consumer mapped,
/// and only while the consumer's REG_MR holds (between `register`, which
/// takes the [`RegMrPosted`] of that REG_MR, and `unregister`): never
/// memory it did not give, or took back.
///
/// Without a posted REG_MR nothing becomes accessible:
///
/// ```compile_fail
/// fn register_again(pages: &mut crate::ib::KernelPages) {
///     pages.register(4096); // takes the REG_MR's `RegMrPosted` too
/// }
/// ```
pub(crate) struct KernelPages {
    addrs: KVVec<u64>,
    /// Pages the last map wrote.
    count: usize,
    /// Their size, from the consumer's MR.
    page_size: u64,
    /// Where the mapped bytes start in the first page.
    first_offset: u64,
    /// Bytes accessible from `first_offset` on: 0 unless registered.
    registered_len: u64,
}

impl KernelPages {
    /// An empty list with room for `max` pages, allocated now: mapping
    /// happens in atomic context and never allocates.
    pub(crate) fn new(max: usize) -> Result<Self> {
        let mut addrs = KVVec::with_capacity(max, GFP_KERNEL_ACCOUNT)?;
        addrs.resize(max, 0u64, GFP_KERNEL_ACCOUNT)?;
        Ok(Self { addrs, count: 0, page_size: 0, first_offset: 0, registered_len: 0 })
    }

    /// Fills the list from the consumer's scatterlist (see `MrSg::to_pages`);
    /// nothing is accessible until `register`.
    pub(super) fn slots(&mut self) -> &mut [u64] {
        self.count = 0;
        self.registered_len = 0;
        &mut self.addrs
    }

    pub(super) fn set_mapped(&mut self, count: usize, page_size: u64, first_offset: u64) {
        self.count = count.min(self.addrs.len());
        self.page_size = page_size;
        self.first_offset = first_offset;
    }

    /// The REG_MR `posted` makes the first `len` mapped bytes accessible (at
    /// most what the pages hold after `first_offset`); it is used up either way.
    pub(crate) fn register(&mut self, len: u64, _posted: RegMrPosted) -> Result {
        let span = (self.count as u64).checked_mul(self.page_size).ok_or(EINVAL)?;
        let end = self.first_offset.checked_add(len).ok_or(EINVAL)?;
        if end > span {
            return Err(EINVAL);
        }
        self.registered_len = len;
        Ok(())
    }

    /// Pages of the list accessible now (none unless registered).
    pub(crate) fn registered_pages(&self) -> usize {
        if self.registered_len == 0 { 0 } else { self.count }
    }

    /// Invalidation or deregistration: nothing is accessible any more.
    pub(crate) fn unregister(&mut self) {
        self.registered_len = 0;
    }

    /// The address of `len` bytes at `in_page` of page `page`, if they lie
    /// inside that page and inside the registered bytes.
    fn span(&self, page: usize, in_page: u64, len: usize) -> Result<u64> {
        if page >= self.count {
            return Err(EFAULT);
        }
        let end = in_page.checked_add(len as u64).ok_or(EFAULT)?;
        if end > self.page_size {
            return Err(EFAULT);
        }
        let at = (page as u64).checked_mul(self.page_size).and_then(|b| b.checked_add(in_page)).ok_or(EFAULT)?;
        let last = at.checked_add(len as u64).ok_or(EFAULT)?;
        if at < self.first_offset || last > self.first_offset + self.registered_len {
            return Err(EFAULT);
        }
        self.addrs.get(page).ok_or(EFAULT)?.checked_add(in_page).ok_or(EFAULT)
    }

    pub(crate) fn read(&self, page: usize, in_page: u64, dst: &mut [u8]) -> Result {
        copy_from_kernel(self.span(page, in_page, dst.len())?, dst)
    }

    pub(crate) fn write(&self, page: usize, in_page: u64, src: &[u8]) -> Result {
        let addr = self.span(page, in_page, src.len())?;
        // SAFETY: `span` checked that `addr..addr + len` is inside one page of the list
        // only `MrSg::to_pages` (the consumer's `ib_map_mr_sg`) writes, inside the bytes its
        // scatterlist maps, and registered by a REG_MR the consumer posted (`register` takes
        // its `RegMrPosted`): the consumer keeps that memory until its invalidation or
        // deregistration, which `unregister` (through `&mut self`, so not while this borrow
        // lasts) records first.
        unsafe { write_kernel(addr, src) }
    }

    pub(crate) fn atomic(&self, page: usize, in_page: u64, op: AtomicOp) -> Result<u64> {
        let addr = self.span(page, in_page, crate::proto::atomic::ATOMIC_BYTES as usize)?;
        // SAFETY: as in `write`, for the 8 bytes at `addr`.
        unsafe { atomic_kernel(addr, op) }
    }
}
