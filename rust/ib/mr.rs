// SPDX-License-Identifier: GPL-2.0
//! Memory regions: pinned user memory (`ib_umem`) and the driver-allocated
//! `struct ib_mr` containers the core hands back to the driver.

use super::kmem::{FastMrId, GrantRevoker, KernelMemory, MrIdentity, PageList, RegMrPosted, Revoke};
use super::release::{ReleaseSlot, SleepingRelease};
use super::{CoreObj, Device, IbDriver, Udata};
use crate::proto::atomic::AtomicOp;
use crate::sys;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use kernel::alloc::KVVec;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::types::Opaque;

pub(super) const PAGE_SHIFT: u32 = kernel::page::PAGE_SHIFT as u32;
pub(super) const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;

/// Splits `len` bytes from address `start` into pieces that each stay in one
/// page, and calls `f(address, offset in its page, bytes before it, length)`
/// for each in order, stopping at the first error.
pub(super) fn for_each_page_piece(start: u64, len: usize, mut f: impl FnMut(u64, u32, usize, usize) -> Result) -> Result {
    let mut done = 0usize;
    while done < len {
        let at = start + done as u64;
        let in_page = (at & (PAGE_SIZE - 1)) as u32;
        let piece = (PAGE_SIZE as usize - in_page as usize).min(len - done);
        f(at, in_page, done, piece)?;
        done += piece;
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct PagePtr(NonNull<sys::page>);
// SAFETY: a pinned page may be accessed from any CPU.
unsafe impl Send for PagePtr {}
// SAFETY: as above.
unsafe impl Sync for PagePtr {}

/// User memory pinned for the lifetime of this value. It holds its device's
/// memory (not its registration) until released, which may be later.
pub(crate) struct Umem {
    raw: NonNull<sys::ib_umem>,
    pages: KVVec<PagePtr>,
    /// Offset of the first byte inside the first page.
    first: u64,
    len: u64,
    /// The pages were pinned for writing (`FOLL_WRITE`).
    writable: bool,
    /// Unpinning sleeps; the data path may drop the last reference.
    release: Option<ReleaseSlot<Umem>>,
}

impl SleepingRelease for Umem {
    type Raw = sys::ib_umem;

    unsafe fn release(raw: NonNull<sys::ib_umem>) {
        // SAFETY: per the trait's contract: ours to release, once, in process context.
        // The umem holds its device's memory (taken by `rroce_umem_get`) until this
        // returns, so it may run after the device is gone.
        unsafe { sys::rroce_umem_release(raw.as_ptr()) };
    }
}

// SAFETY: the umem is only released in `drop`; the pages stay pinned until then.
unsafe impl Send for Umem {}
// SAFETY: `&self` methods only read the page list and copy through kmaps.
unsafe impl Sync for Umem {}

/// Direction of a copy between a kernel buffer and registered memory.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CopyDir {
    /// From registered memory into the buffer.
    FromMem,
    /// From the buffer into registered memory.
    ToMem,
}

impl Umem {
    /// Pins `len` bytes of the calling process at `addr`. Only in a user
    /// verb (`call`): the process is the one whose memory `current` names.
    pub(crate) fn pin<T: IbDriver>(dev: &Device<T>, call: &Udata<'_>, addr: u64, len: u64, access: i32) -> Result<Self> {
        kernel::task::might_sleep();
        if !call.is_user() {
            return Err(EINVAL);
        }
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: the device is alive; in a user verb (`call`) the core pins the range of
        // the calling process.
        let raw = unsafe { sys::rroce_umem_get(dev.raw(), addr as _, len as usize, access) };
        // SAFETY: `raw` is a pointer or an error pointer.
        if unsafe { sys::rroce_is_err(raw.cast()) } {
            // SAFETY: as above.
            return Err(Error::from_errno(unsafe { sys::rroce_ptr_err(raw.cast()) } as i32));
        }
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        // SAFETY: a fresh umem of ours.
        let first = u64::from(unsafe { sys::rroce_umem_offset(raw.as_ptr()) });
        // SAFETY: as above.
        let writable = unsafe { sys::rroce_umem_writable(raw.as_ptr()) };
        let npages = ((first + len + PAGE_SIZE - 1) >> PAGE_SHIFT) as usize;
        let fill = || -> Result<KVVec<PagePtr>> {
            let mut raw_pages: KVVec<*mut sys::page> = KVVec::with_capacity(npages, GFP_KERNEL_ACCOUNT)?;
            raw_pages.resize(npages, core::ptr::null_mut(), GFP_KERNEL_ACCOUNT)?;
            // SAFETY: `raw_pages` has room for `npages` pointers.
            let n = unsafe { sys::rroce_umem_pages(raw.as_ptr(), raw_pages.as_mut_ptr(), npages) };
            if n != npages {
                return Err(EFAULT);
            }
            let mut pages = KVVec::with_capacity(npages, GFP_KERNEL_ACCOUNT)?;
            for p in raw_pages.iter() {
                pages.push(PagePtr(NonNull::new(*p).ok_or(EFAULT)?), GFP_KERNEL_ACCOUNT)?;
            }
            Ok(pages)
        };
        match fill().and_then(|pages| Ok((pages, ReleaseSlot::new()?))) {
            Ok((pages, release)) => Ok(Self { raw, pages, first, len, writable, release: Some(release) }),
            Err(e) => {
                // SAFETY: unpins what `rroce_umem_get` pinned (and drops its device hold);
                // nothing else uses it.
                unsafe { sys::rroce_umem_release(raw.as_ptr()) };
                Err(e)
            }
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Pages pinned.
    pub(crate) fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Whether the pin allows writes: memory pinned without them (a read-only
    /// mapping, or a registration without write rights) must never be written.
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }

    /// Copies the bytes at `offset` of the region into `dst`.
    pub(crate) fn read(&self, offset: u64, dst: &mut [u8]) -> Result {
        self.copy(offset, dst.as_mut_ptr(), dst.len(), CopyDir::FromMem)
    }

    /// Copies `src` to `offset` of the region; never into pages pinned
    /// without the right to write them.
    pub(crate) fn write(&self, offset: u64, src: &[u8]) -> Result {
        if !self.writable {
            return Err(EACCES);
        }
        // The helper only reads from `src` in this direction.
        self.copy(offset, src.as_ptr().cast_mut(), src.len(), CopyDir::ToMem)
    }

    /// Executes `op` on the 8 bytes at `offset` (8-byte aligned in the
    /// region and in memory). Returns what they held.
    pub(crate) fn atomic(&self, offset: u64, op: AtomicOp) -> Result<u64> {
        const BYTES: u64 = 8;
        if !self.writable {
            return Err(EACCES);
        }
        let end = offset.checked_add(BYTES).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        // Aligned in memory too (the IOVA's alignment says nothing of the
        // pages'), so the value never straddles two pages and the locked
        // instruction never splits a cache line.
        let pos = self.first.checked_add(offset).ok_or(EFAULT)?;
        if pos % BYTES != 0 {
            return Err(EINVAL);
        }
        let page = self.pages.get((pos >> PAGE_SHIFT) as usize).ok_or(EFAULT)?;
        let in_page = (pos & (PAGE_SIZE - 1)) as u32;
        let (code, compare, operand) = super::kmem::helper_atomic(op);
        // SAFETY: the page is pinned while `self` lives and was pinned for writing;
        // `in_page` is 8-byte aligned, so `in_page + 8 <= PAGE_SIZE`.
        Ok(unsafe { sys::rroce_page_atomic(page.0.as_ptr(), in_page, code, compare, operand) })
    }

    /// Copies between `len` bytes at `buf` and the bytes at `offset` of the region;
    /// fails with `EFAULT` unless `offset..offset + len` lies inside it.
    fn copy(&self, offset: u64, buf: *mut u8, len: usize, dir: CopyDir) -> Result {
        let end = offset.checked_add(len as u64).ok_or(EFAULT)?;
        if end > self.len {
            return Err(EFAULT);
        }
        for_each_page_piece(self.first + offset, len, |pos, in_page, done, piece| {
            let page = self.pages.get((pos >> PAGE_SHIFT) as usize).ok_or(EFAULT)?;
            // SAFETY: the page is pinned while `self` lives; `in_page + piece <= PAGE_SIZE`;
            // `buf + done` has `piece` bytes (the callers pass a slice of `len` bytes), which
            // the helper writes only when copying from memory.
            unsafe {
                sys::rroce_page_copy(page.0.as_ptr(), in_page, buf.add(done).cast(), piece as u32, dir == CopyDir::ToMem)
            };
            Ok(())
        })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        if let Some(slot) = self.release.take() {
            // SAFETY: releases the pin taken in `pin`, once; the pages are not used
            // after this (`self` goes).
            unsafe { slot.release(self.raw) };
        }
    }
}

/// The driver data of `mr`, if it is one of device `ib`'s.
///
/// # Safety
///
/// `mr` must be a live MR whose consumer keeps it alive for `'a`.
pub(super) unsafe fn mr_data<'a, T: IbDriver>(ib: *mut sys::ib_device, mr: *mut sys::ib_mr) -> Option<&'a T::MrData> {
    // SAFETY: per the contract; an MR of this device was boxed by `fill`.
    unsafe { ((*mr).device == ib).then(|| &(*mr.cast::<MrBox<T::MrData>>()).data) }
}

/// The REG_MR a kernel consumer posted for `mr`, if `mr` is a
/// fast-registration MR of device `ib`.
///
/// # Safety
///
/// `mr` must be a live MR, and the MR of an `IB_WR_REG_MR` work request
/// the consumer posted.
pub(super) unsafe fn reg_mr_posted<T: IbDriver>(ib: *mut sys::ib_device, mr: *mut sys::ib_mr) -> Option<RegMrPosted> {
    // SAFETY: a live MR; one of this device was boxed by `fill`.
    let fast = unsafe { ((*mr).device == ib).then(|| (*mr.cast::<MrBox<T::MrData>>()).fast).flatten() }?;
    // SAFETY: the consumer posted this REG_MR, for the MR of identity `fast`.
    Some(unsafe { RegMrPosted::posted(fast) })
}

/// Keys of a new MR.
pub(crate) struct MrKeys {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// The driver-allocated container of an MR.
#[repr(C)]
struct MrBox<D> {
    ib: Opaque<sys::ib_mr>,
    /// A DMA MR's: revokes the grant its data holds when it is deregistered.
    revoker: Option<GrantRevoker>,
    /// A fast-registration MR's identity, which its page lists hold.
    fast: Option<MrIdentity>,
    /// A fast-registration MR's pages, if the driver made them: `dereg_mr`
    /// revokes them.
    fast_pages: Option<Arc<dyn Revoke>>,
    data: D,
}

/// A kernel consumer's DMA-mapped scatterlist, to be mapped into a
/// fast-registration MR (`ib_map_mr_sg`). With virtual DMA its addresses are
/// kernel virtual addresses in the linear map.
pub(crate) struct MrSg {
    mr: *mut sys::ib_mr,
    /// The MR's identity, if a fast-registration MR.
    identity: Option<MrIdentity>,
    sg: *mut sys::scatterlist,
    nents: c_int,
    offset: *mut u32,
}

/// What [`MrSg::to_pages`] mapped.
pub(crate) struct MappedPages {
    /// Scatterlist entries mapped (the core's return value).
    pub(crate) entries: c_int,
    /// Pages written.
    pub(crate) count: usize,
    /// Where the region's first byte lies in the first page, and its length.
    pub(crate) first_offset: u64,
    pub(crate) len: u64,
}

impl MrSg {
    /// Size of the pages the consumer asked for.
    pub(crate) fn page_size(&self) -> u64 {
        // SAFETY: the MR is alive for the duration of the verb (see `map_mr_sg`).
        u64::from(unsafe { (*self.mr).page_size })
    }

    pub(super) fn mr_identity(&self) -> Option<MrIdentity> {
        self.identity
    }

    /// Walks the list into `pages`, one address per page, as far as they
    /// hold; sets the MR's `iova` and `length` for the consumer.
    pub(super) fn to_pages(&self, pages: &mut PageList) -> Result<MappedPages> {
        let page_size = self.page_size();
        let slots = pages.slots();
        let max = u32::try_from(slots.len()).map_err(|_| EINVAL)?;
        let mut count = 0u32;
        // SAFETY: the MR and the list are the consumer's for the duration of the verb;
        // the helper writes at most `max` addresses to `slots`.
        let entries = unsafe {
            sys::rroce_sg_to_pages(self.mr, self.sg, self.nents, self.offset, slots.as_mut_ptr(), max, &mut count)
        };
        if entries < 0 {
            return Err(Error::from_errno(entries));
        }
        let count = (count as usize).min(slots.len());
        let first = if count > 0 { slots.first().copied().unwrap_or(0) } else { 0 };
        // SAFETY: as above.
        let (iova, len) = unsafe { ((*self.mr).iova, (*self.mr).length) };
        let first_offset = iova.checked_sub(first).ok_or(EINVAL)?;
        // A list refused outright mapped nothing, whatever the MR held before.
        pages.set_mapped(count, page_size, first_offset, if entries > 0 { len } else { 0 });
        Ok(MappedPages { entries, count, first_offset, len })
    }
}

/// What `ib_advise_mr` advises (`enum ib_uverbs_advise_mr_advice`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Advice {
    /// Fault the pages in for reading.
    Prefetch,
    /// Fault the pages in for writing.
    PrefetchWrite,
    /// Map only the pages already present.
    PrefetchNoFault,
}

impl Advice {
    fn from_raw(raw: u32) -> Option<Self> {
        match raw {
            sys::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => Some(Self::Prefetch),
            sys::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => Some(Self::PrefetchWrite),
            sys::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => Some(Self::PrefetchNoFault),
            _ => None,
        }
    }
}

/// One range of an advice: the user's values, copied into the kernel by
/// the core and not checked by it.
#[repr(transparent)]
pub(crate) struct AdviseSge(sys::ib_sge);

impl AdviseSge {
    pub(crate) fn addr(&self) -> u64 {
        self.0.addr
    }

    pub(crate) fn len(&self) -> u32 {
        self.0.length
    }

    pub(crate) fn lkey(&self) -> u32 {
        self.0.lkey
    }
}

/// What `rereg_user_mr` changes; `None` keeps the current value.
pub(crate) struct Rereg<'a, P> {
    /// New `start`, `length` and `iova`: a new registration.
    pub(crate) trans: Option<(u64, u64, u64)>,
    pub(crate) pd: Option<&'a P>,
    pub(crate) access: Option<i32>,
}

pub(super) struct MrOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> MrOps<T> {
    /// Registers with `register` and boxes its data behind a zeroed
    /// `ib_mr` with the keys set, for the core. The box is allocated
    /// first: once the driver has registered, the keys are in the key
    /// table and the memory is pinned, so nothing may fail any more (a
    /// registration dropped without being unregistered would stay live).
    fn publish(register: impl FnOnce() -> Result<(T::MrData, MrKeys)>) -> *mut sys::ib_mr {
        Self::publish_with(None, register)
    }

    /// As [`Self::publish`], for a DMA MR whose grant `revoker` revokes.
    fn publish_with(
        revoker: Option<GrantRevoker>,
        register: impl FnOnce() -> Result<(T::MrData, MrKeys)>,
    ) -> *mut sys::ib_mr {
        let slot = match Self::slot() {
            Ok(s) => s,
            Err(e) => return e.to_ptr(),
        };
        match register() {
            Ok((data, keys)) => Self::fill(slot, revoker, None, None, data, keys),
            Err(e) => {
                // The driver may have kept the grant before it failed: no MR
                // exists to deregister, so it ends here.
                if let Some(revoker) = revoker {
                    revoker.revoke();
                }
                e.to_ptr()
            }
        }
    }

    /// An empty container for an MR the driver is about to register.
    fn slot() -> Result<KBox<MaybeUninit<MrBox<T::MrData>>>> {
        Ok(KBox::new_uninit(GFP_KERNEL)?)
    }

    /// Puts a registration into its container; cannot fail.
    fn fill(
        slot: KBox<MaybeUninit<MrBox<T::MrData>>>,
        revoker: Option<GrantRevoker>,
        fast: Option<MrIdentity>,
        fast_pages: Option<Arc<dyn Revoke>>,
        data: T::MrData,
        keys: MrKeys,
    ) -> *mut sys::ib_mr {
        let ib = Opaque::new(pin_init::zeroed());
        let raw = KBox::into_raw(slot.write(MrBox { ib, revoker, fast, fast_pages, data }));
        // SAFETY: `raw` is a fresh box; the core fills the other `ib_mr` fields.
        unsafe {
            let ib = (*raw).ib.get();
            (*ib).lkey = keys.lkey;
            (*ib).rkey = keys.rkey;
            ib
        }
    }

    /// # Safety
    ///
    /// `pd` must be a live PD of this driver.
    unsafe fn pd<'a>(pd: *mut sys::ib_pd) -> (&'a Device<T>, &'a T::PdData) {
        // SAFETY: per the contract; the PD's data was initialised when it was allocated,
        // and is only moved out when the PD is deallocated, after its users.
        unsafe { (Device::from_raw((*pd).device), CoreObj::<sys::ib_pd, T::PdData>::data(pd)) }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `reg_user_mr`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn reg_user_mr(
        pd: *mut sys::ib_pd,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        _dmah: *mut sys::ib_dmah,
        udata: *mut sys::ib_udata,
    ) -> *mut sys::ib_mr {
        // SAFETY: the core calls with a live PD of ours and a valid udata.
        let (dev, pdd, mut udata) = unsafe {
            let (d, p) = Self::pd(pd);
            (d, p, Udata::from_raw(udata))
        };
        Self::publish(|| T::reg_user_mr(dev, pdd, start, length, iova, access, &mut udata))
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `rereg_user_mr`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn rereg_user_mr(
        mr: *mut sys::ib_mr,
        flags: c_int,
        start: u64,
        length: u64,
        iova: u64,
        access: c_int,
        pd: *mut sys::ib_pd,
        udata: *mut sys::ib_udata,
    ) -> *mut sys::ib_mr {
        let flags = flags as u32;
        if flags & !sys::ib_mr_rereg_flags_IB_MR_REREG_SUPPORTED != 0 {
            return EOPNOTSUPP.to_ptr();
        }
        // SAFETY: the core calls with a live MR of ours (boxed by `fill`), the PD the MR is
        // to have afterwards (its current one unless `IB_MR_REREG_PD`) and a valid udata.
        let (dev, pdd, data, mut udata) = unsafe {
            let (d, p) = Self::pd(pd);
            (d, p, &(*mr.cast::<MrBox<T::MrData>>()).data, Udata::from_raw(udata))
        };
        let change = Rereg {
            trans: (flags & sys::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0).then_some((start, length, iova)),
            pd: (flags & sys::ib_mr_rereg_flags_IB_MR_REREG_PD != 0).then_some(pdd),
            access: (flags & sys::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0).then_some(access),
        };
        // Allocated before the driver changes anything, as in `publish`:
        // a new MR is registered when the driver returns.
        let slot = match Self::slot() {
            Ok(s) => s,
            Err(e) => return e.to_ptr(),
        };
        match T::rereg_user_mr(dev, data, pdd, change, &mut udata) {
            // Changed in place: the core keeps the MR and its keys.
            Ok(None) => core::ptr::null_mut(),
            // A new MR the core swaps in; it deregisters the old one.
            Ok(Some((new, keys))) => Self::fill(slot, None, None, None, new, keys),
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `alloc_mr`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn alloc_mr(pd: *mut sys::ib_pd, mr_type: sys::ib_mr_type, max_num_sg: u32) -> *mut sys::ib_mr {
        // Integrity MRs (signature offload) need hardware rroce does not emulate.
        if mr_type != sys::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return EINVAL.to_ptr();
        }
        // SAFETY: the core calls with a live PD of ours.
        let (dev, pdd) = unsafe { Self::pd(pd) };
        let fast = MrIdentity::new();
        // As `publish`, keeping the pages the driver makes (if it does) for `dereg_mr`.
        let slot = match Self::slot() {
            Ok(s) => s,
            Err(e) => return e.to_ptr(),
        };
        let mut made = None;
        match T::alloc_mr(dev, pdd, max_num_sg, FastMrId::new(fast, &mut made)) {
            Ok((data, keys)) => {
                // The pages are invalidated only under this key (or a registration's, which
                // differs from it in the low byte only): no other MR's, if keys are unique.
                if let Some(pages) = &made {
                    pages.bind_key(keys.rkey);
                }
                Self::fill(slot, None, Some(fast), made, data, keys)
            }
            Err(e) => e.to_ptr(),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `map_mr_sg`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn map_mr_sg(
        mr: *mut sys::ib_mr,
        sg: *mut sys::scatterlist,
        sg_nents: c_int,
        sg_offset: *mut u32,
    ) -> c_int {
        // SAFETY: `mr` was boxed by `fill` (an `alloc_mr` MR) and lives for the verb.
        let (data, identity) = unsafe {
            let b = &*mr.cast::<MrBox<T::MrData>>();
            (&b.data, b.fast)
        };
        let sg = MrSg { mr, identity, sg, nents: sg_nents, offset: sg_offset };
        match T::map_mr_sg(data, &sg) {
            Ok(n) => n,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `get_dma_mr`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn get_dma_mr(pd: *mut sys::ib_pd, access: c_int) -> *mut sys::ib_mr {
        // SAFETY: the core calls with a live PD of ours.
        let (dev, pdd, user) = unsafe {
            let (d, p) = Self::pd(pd);
            (d, p, !(*pd).uobject.is_null())
        };
        // Only a kernel consumer may give the device its memory by address.
        if user {
            return EINVAL.to_ptr();
        }
        // SAFETY: a kernel consumer's `get_dma_mr`, as checked above; the revoker goes into
        // the MR's box, and `dereg_mr` revokes before it returns.
        let (grant, revoker) = match unsafe { KernelMemory::granted() } {
            Ok(g) => g,
            Err(e) => return e.to_ptr(),
        };
        Self::publish_with(Some(revoker), || T::get_dma_mr(dev, pdd, access, grant))
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `advise_mr`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn advise_mr(
        pd: *mut sys::ib_pd,
        advice: sys::ib_uverbs_advise_mr_advice,
        flags: u32,
        sg_list: *mut sys::ib_sge,
        num_sge: u32,
        _attrs: *mut sys::uverbs_attr_bundle,
    ) -> c_int {
        let Some(advice) = Advice::from_raw(advice) else { return EOPNOTSUPP.to_errno() };
        if flags & !sys::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0 {
            return EINVAL.to_errno();
        }
        let sync = flags & sys::ib_uverbs_advise_mr_flag_IB_UVERBS_ADVISE_MR_FLAG_FLUSH != 0;
        if sg_list.is_null() || num_sge == 0 {
            return EINVAL.to_errno();
        }
        // SAFETY: the core calls with a live PD of ours and `num_sge` entries it copied
        // into the kernel for the call; `AdviseSge` is a transparent `ib_sge`.
        let (dev, pdd, sges) = unsafe {
            let (d, p) = Self::pd(pd);
            (d, p, core::slice::from_raw_parts(sg_list.cast::<AdviseSge>(), num_sge as usize))
        };
        match T::advise_mr(dev, pdd, advice, sync, sges) {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `dereg_mr`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn dereg_mr(mr: *mut sys::ib_mr, _udata: *mut sys::ib_udata) -> c_int {
        // SAFETY: `mr` was boxed by `fill` and lives until deregistered.
        let boxed = unsafe { &*mr.cast::<MrBox<T::MrData>>() };
        // SAFETY: the core calls with an MR of a live device of ours, whose `pd` (set by the
        // core for every MR, and moved by it on a re-registration to another PD) is a PD
        // of ours, kept alive by the MR's use count until the MR is gone.
        let (dev, pdd) = unsafe { Self::pd((*mr).pd) };
        let answer = T::dereg_mr(dev, pdd, &boxed.data);
        // The consumer may reuse its memory once this returns, whoever still holds the
        // driver's data (a transfer in progress), and kernel consumers do so even when
        // the driver refused: the grant ends first, and so do the fast-registration
        // pages, whatever the driver did with them or answered.
        if let Some(revoker) = &boxed.revoker {
            revoker.revoke();
        }
        if let Some(pages) = &boxed.fast_pages {
            pages.revoke();
        }
        if let Err(e) = answer {
            // Refused: the core keeps the MR (with no kernel memory behind it any more).
            return e.to_errno();
        }
        // SAFETY: deregistered: the core never uses `mr` again, and nothing borrows the box
        // (`boxed` is not used from here on).
        drop(unsafe { KBox::from_raw(mr.cast::<MrBox<T::MrData>>()) });
        0
    }
}
