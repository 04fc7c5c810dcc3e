// SPDX-License-Identifier: GPL-2.0
//! Memory regions and the per-device key table. Keys are `index << 8 | byte`
//! with a random byte; indices are reused only after the whole index space
//! went round, so a stale key of a deregistered region does not match the
//! next region, and a key cannot be derived from another one: a guess of
//! the byte succeeds once in 256.
//! The data path looks keys up and holds an `Arc` for the duration of a
//! transfer, so deregistration never frees memory under a copy.

use crate::device::Pd;
use crate::ib::{self, Advice, AdviseSge, Fault, KernelMemory, MrKeys, MrSg, OdpUmem, Rereg, Udata, Umem};
use crate::proto::atomic::{AtomicOp, ATOMIC_BYTES};
use crate::proto::limits;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use crate::table::Table;
use kernel::sync::Arc;
use crate::user::UserId;

mod fast;
mod window;

pub(crate) use fast::FastMr;
pub(crate) use window::{MwData, QpRef};
use crate::proto::access;
use crate::proto::mw::{BindWr, MwError, MwType};

/// Memory behind a region.
pub(crate) enum MrMem {
    /// Pinned pages of a process.
    User(Umem),
    /// Memory of a process, faulted in as transfers need it.
    Odp(OdpUmem),
    /// Kernel virtual addresses of a kernel consumer (`get_dma_mr`), who
    /// granted the device its memory.
    Dma(KernelMemory),
    /// Pages a kernel consumer maps and registers through its send queue.
    Fast(FastMr),
}

/// A registered region, shared by the key table and the data path.
pub(crate) struct MrInner {
    /// Index in the key table: the upper 24 bits of every key of the region.
    /// Set once, when the table places the region, before anyone finds it.
    index: AtomicU32,
    /// L_Key and R_Key of a user or DMA region (a fast-registration MR's
    /// current key is in its mapping). Set with `index`.
    key: AtomicU32,
    /// PD and rights: `rereg_user_mr` may change them while transfers run,
    /// which then see either the old or the new value.
    pdn: AtomicU64,
    access: AtomicU32,
    iova: u64,
    len: u64,
    mem: MrMem,
    /// Windows bound to the region ([`WINDOW_COUNT`]), with
    /// [`DEREGISTERING`] once it goes and [`REREGISTERING`] while it changes.
    windows: AtomicU32,
}

/// In [`MrInner::windows`]: deregistration began, no window binds any more.
const DEREGISTERING: u32 = 1 << 31;
/// In [`MrInner::windows`]: `rereg_mr` is changing the region, no window binds meanwhile.
const REREGISTERING: u32 = 1 << 30;
const WINDOW_COUNT: u32 = REREGISTERING - 1;

/// Why a region refused an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MrError {
    /// The key does not name the region now, it belongs to another PD, or
    /// lacks the rights.
    Denied,
    /// The range is not inside the region, or its memory refused the copy.
    Range,
    /// An atomic's address is not 8-byte aligned in memory.
    Misaligned,
    /// The region takes no atomics (kernel DMA regions).
    NoAtomics,
}

impl From<Error> for MrError {
    fn from(e: Error) -> Self {
        if e == EINVAL {
            MrError::Misaligned
        } else if e == EOPNOTSUPP {
            MrError::NoAtomics
        } else {
            MrError::Range
        }
    }
}

/// An access through a key: the key, the PD of the QP using it, and the
/// rights it needs (none for a local read).
#[derive(Clone, Copy)]
pub(crate) struct KeyUse {
    pub(crate) key: u32,
    pub(crate) pdn: u64,
    pub(crate) rights: u32,
}

impl MrInner {
    fn index(&self) -> u32 {
        self.index.load(Ordering::Relaxed)
    }

    pub(crate) fn key(&self) -> u32 {
        self.key.load(Ordering::Relaxed)
    }

    pub(crate) fn pdn(&self) -> u64 {
        self.pdn.load(Ordering::Relaxed)
    }

    pub(crate) fn access(&self) -> u32 {
        self.access.load(Ordering::Relaxed)
    }

    /// Counts a window bound to the region; false while it is being
    /// deregistered or re-registered. (The count cannot reach the flags:
    /// there are fewer windows.)
    fn hold_window(&self) -> bool {
        self.windows
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n & !WINDOW_COUNT == 0).then_some(n + 1))
            .is_ok()
    }

    fn release_window(&self) {
        self.windows.fetch_sub(1, Ordering::AcqRel);
    }

    /// Starts deregistration: refused while a window is bound (IBTA
    /// 10.6.7.2.6); from then on no window binds to the region.
    fn begin_dereg(&self) -> Result {
        self.windows
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n & WINDOW_COUNT == 0).then_some(n | DEREGISTERING))
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    /// Starts a re-registration: refused while a window is bound (the
    /// region's rights or memory would change under it); none binds until
    /// [`Self::end_rereg`]. The core never runs two on one region at once.
    fn begin_rereg(&self) -> Result {
        self.windows
            .compare_exchange(0, REREGISTERING, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|_| EBUSY)
    }

    /// Ends a re-registration; a region `replaced` by a new one is
    /// deregistered next and takes no windows meanwhile.
    fn end_rereg(&self, replaced: bool) {
        self.windows.store(if replaced { DEREGISTERING } else { 0 }, Ordering::Release);
    }

    /// Runs `f` on the region as `by` sees it, with `va..va + len` inside it.
    /// A fast-registration MR stays locked meanwhile, so an invalidation
    /// waits for a copy in progress and none starts after it.
    fn with<R>(&self, by: KeyUse, va: u64, len: u64, f: impl FnOnce(u64, &Backing<'_>) -> Result<R, MrError>) -> Result<R, MrError> {
        if self.pdn() != by.pdn {
            return Err(MrError::Denied);
        }
        let inside = |iova: u64, size: u64| -> Result<u64, MrError> {
            let off = va.checked_sub(iova).ok_or(MrError::Range)?;
            let end = off.checked_add(len).ok_or(MrError::Range)?;
            if end > size {
                return Err(MrError::Range);
            }
            Ok(off)
        };
        match &self.mem {
            MrMem::Fast(fast) => {
                let map = fast.lock();
                let reg = map.valid(by.key).ok_or(MrError::Denied)?;
                if reg.access & by.rights != by.rights {
                    return Err(MrError::Denied);
                }
                let off = inside(reg.iova, reg.len)?;
                f(off, &Backing::Fast(&map))
            }
            mem => {
                if self.key() != by.key || self.access() & by.rights != by.rights {
                    return Err(MrError::Denied);
                }
                let off = inside(self.iova, self.len)?;
                match mem {
                    MrMem::User(u) => f(off, &Backing::User(u)),
                    MrMem::Odp(u) => f(off, &Backing::Odp(u)),
                    // A DMA MR covers all kernel memory from iova 0: offsets are addresses.
                    MrMem::Dma(grant) => f(off, &Backing::Kernel(grant)),
                    // Handled above.
                    MrMem::Fast(_) => Err(MrError::Denied),
                }
            }
        }
    }

    /// Whether `by` names the region with its rights, wherever it accesses it.
    pub(crate) fn check_key(&self, by: KeyUse) -> Result<(), MrError> {
        if self.pdn() != by.pdn {
            return Err(MrError::Denied);
        }
        let access = match &self.mem {
            MrMem::Fast(fast) => fast.lock().valid(by.key).ok_or(MrError::Denied)?.access,
            _ if self.key() == by.key => self.access(),
            _ => return Err(MrError::Denied),
        };
        if access & by.rights != by.rights {
            return Err(MrError::Denied);
        }
        Ok(())
    }

    /// Whether `by` may access `va..va + len`.
    pub(crate) fn check(&self, by: KeyUse, va: u64, len: u64) -> Result<(), MrError> {
        self.with(by, va, len, |_, _| Ok(()))
    }

    /// Copies the region's bytes at virtual address `va` into `dst`.
    pub(crate) fn read(&self, by: KeyUse, va: u64, dst: &mut [u8]) -> Result<(), MrError> {
        self.with(by, va, dst.len() as u64, |off, b| match b {
            Backing::User(u) => Ok(u.read(off, dst)?),
            Backing::Odp(u) => Ok(u.read(off, dst)?),
            Backing::Kernel(grant) => Ok(grant.read(off, dst)?),
            Backing::Fast(map) => map.read(off, dst),
        })
    }

    /// Copies `src` to virtual address `va` of the region.
    pub(crate) fn write(&self, by: KeyUse, va: u64, src: &[u8]) -> Result<(), MrError> {
        self.with(by, va, src.len() as u64, |off, b| match b {
            Backing::User(u) => Ok(u.write(off, src)?),
            Backing::Odp(u) => Ok(u.write(off, src)?),
            Backing::Kernel(grant) => Ok(grant.write(off, src)?),
            Backing::Fast(map) => map.write(off, src),
        })
    }

    /// Executes `op` on the 8 bytes at virtual address `va` of the region,
    /// atomically; returns the value found. Kernel DMA regions take no
    /// remote compare-and-swap or fetch-and-add, only ATOMIC WRITE.
    pub(crate) fn atomic(&self, by: KeyUse, va: u64, op: AtomicOp) -> Result<u64, MrError> {
        self.with(by, va, ATOMIC_BYTES, |off, b| match (b, op) {
            (Backing::User(u), op) => Ok(u.atomic(off, op)?),
            (Backing::Odp(u), op) => Ok(u.atomic(off, op)?),
            (Backing::Fast(map), op) => map.atomic(off, op),
            // An ATOMIC WRITE to kernel memory is a plain aligned store.
            (Backing::Kernel(grant), AtomicOp::Store { .. }) => Ok(grant.atomic(off, op)?),
            (Backing::Kernel(_), _) => Err(MrError::NoAtomics),
        })
    }
}

/// The memory of a region during one access.
enum Backing<'a> {
    User(&'a Umem),
    Odp(&'a OdpUmem),
    Kernel(&'a KernelMemory),
    Fast(&'a fast::FastLocked),
}

/// Where a remote access lands: the region, the key use its copies name,
/// and the address in the region (a window's translated to it).
pub(crate) struct Target {
    pub(crate) mr: Arc<MrInner>,
    pub(crate) by: KeyUse,
    pub(crate) va: u64,
}

/// The key table of a device: regions and windows by key index.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    table: Table<MrInner>,
    #[pin]
    windows: window::MwTable,
}

/// The data the core's `ib_mr` container carries.
pub(crate) struct MrData(Arc<MrInner>);

impl MrData {
    /// Whether `key` has this region's index (a REG_MR may change only the
    /// key's low byte).
    pub(crate) fn has_index_of(&self, key: u32) -> bool {
        key >> 8 == self.0.index()
    }
}

impl MrTable {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            table <- Table::new(1, limits::MAX_MR, limits::MAX_MR),
            windows <- window::MwTable::new(),
        }? Error)
    }

    /// Makes PD `pd`'s memory one that may fault (see `pd_paging.rs`),
    /// within the caller's share of the PDs with a queue (of all devices).
    fn start_paging(&self, pd: &Pd) -> Result {
        pd.paging.start(UserId::current())
    }

    fn register(&self, pdn: u64, access: u32, iova: u64, len: u64, mem: MrMem) -> Result<(MrData, MrKeys)> {
        self.insert(Self::new_region(pdn, access, iova, len, mem)?)
    }

    /// A region not in the key table yet. Allocated before the table's lock
    /// is taken, so that a failure drops the memory (unpinning or releasing
    /// it may sleep) after it is let go.
    fn new_region(pdn: u64, access: u32, iova: u64, len: u64, mem: MrMem) -> Result<Arc<MrInner>> {
        Ok(Arc::new(
            MrInner {
                index: AtomicU32::new(0),
                key: AtomicU32::new(0),
                pdn: AtomicU64::new(pdn),
                access: AtomicU32::new(access),
                iova,
                len,
                mem,
                windows: AtomicU32::new(0),
            },
            GFP_KERNEL_ACCOUNT,
        )?)
    }

    /// Places `inner` in the key table: from here on its keys work.
    fn insert(&self, inner: Arc<MrInner>) -> Result<(MrData, MrKeys)> {
        self.table.insert_allocated(&inner, |index, mr| {
            // The table hands indices out cyclically, so a stale key's index is
            // reused late; the random byte keeps keys from being guessed.
            mr.index.store(index, Ordering::Relaxed);
            mr.key.store(index << 8 | u32::from(crate::ib::random_u8()), Ordering::Relaxed);
        })?;
        let keys = MrKeys { lkey: inner.key(), rkey: inner.key() };
        Ok((MrData(inner), keys))
    }

    /// The region a key's index names; whether the whole key names it now
    /// is for [`MrInner`]'s accesses to say. A window's key names none.
    pub(crate) fn lookup(&self, key: u32) -> Option<Arc<MrInner>> {
        self.table.get(key >> 8)
    }

    /// Resolves R_Key `rkey` for a remote access by QP `qp` that needs
    /// `rights` over `len` bytes at `va`, or anywhere with `range` `None`:
    /// a region's key, or a window's, which translates the address.
    pub(crate) fn remote(&self, rkey: u32, qp: QpRef, rights: u32, range: Option<(u64, u64)>) -> Result<Target, MrError> {
        let t = if window::is_window_key(rkey) {
            self.windows.remote(rkey, qp, rights, range)?
        } else {
            let mr = self.lookup(rkey).ok_or(MrError::Denied)?;
            let by = KeyUse { key: rkey, pdn: qp.pdn, rights };
            Target { mr, by, va: range.map_or(0, |(va, _)| va) }
        };
        match range {
            Some((_, len)) => t.mr.check(t.by, t.va, len)?,
            None => t.mr.check_key(t.by)?,
        }
        Ok(t)
    }

    /// Invalidates key `key` for QP `qp` (a LOCAL_INV, or a SEND with
    /// Invalidate the QP received: `by`): a fast-registration key of the
    /// QP's PD, which then accepts no key until registered again (with the
    /// proof that its pages are no longer accessible, for the completion),
    /// or a type 2B window's, which becomes free.
    pub(crate) fn invalidate(&self, key: u32, qp: QpRef, by: Invalidator) -> Result<Option<ib::Invalidated>, MrError> {
        if window::is_window_key(key) {
            let remote = matches!(by, Invalidator::Peer);
            return self.windows.invalidate(key, qp, remote).map(|()| None).map_err(|_| MrError::Denied);
        }
        let mr = self.lookup(key).ok_or(MrError::Denied)?;
        match &mr.mem {
            MrMem::Fast(fast) if mr.pdn() == qp.pdn => fast.lock().as_mut().invalidate(key, by).map(Some),
            _ => Err(MrError::Denied),
        }
    }

    /// Executes a BIND_MW posted on QP `qp`.
    pub(crate) fn bind_window(&self, qp: QpRef, wr: &BindWr) -> Result<(), MwError> {
        // A bind of length 0 (a type 1 unbind) names no region.
        let mr = if wr.len == 0 { None } else { self.lookup(wr.mr_lkey) };
        self.windows.bind(qp, wr, mr)
    }

    /// `alloc_mw`: a window of PD `pd` of type `ty` (`enum ib_mw_type`);
    /// returns its data and R_Key.
    pub(crate) fn alloc_window(&self, pd: &Pd, ty: u32) -> Result<(MwData, u32)> {
        let ty = MwType::from_ib(ty).ok_or(EINVAL)?;
        self.windows.alloc(pd.pdn, ty)
    }

    /// `dealloc_mw` of a window of `pd`.
    pub(crate) fn dealloc_window(&self, pd: &Pd, mw: MwData) {
        self.windows.dealloc(mw);
        pd.paging.flush_linked();
    }

    /// Executes `IB_WR_REG_MR` for a QP of PD `pdn`: the fast-registration
    /// MR at `reg.key`'s index becomes valid under that key.
    pub(crate) fn register_fast(&self, pdn: u64, reg: &FastReg) -> Result<(), MrError> {
        let mr = self.lookup(reg.key).ok_or(MrError::Denied)?;
        let access = check_access(reg.access as i32).map_err(|_| MrError::Denied)?;
        match &mr.mem {
            MrMem::Fast(fast) if mr.pdn() == pdn => {
                fast.lock().as_mut().register(reg.post, reg.key, access, reg.iova, reg.len)
            }
            _ => Err(MrError::Denied),
        }
    }

    fn unregister(&self, pd: &Pd, mr: &MrData) -> Result {
        mr.0.begin_dereg()?;
        drop(self.table.remove(mr.0.index(), &mr.0));
        // A READ response or a send being built may still hold a
        // fast-registration region: its key stops working first. (The ib
        // layer revokes its pages itself before the consumer, which frees
        // them then, hears back.)
        if let MrMem::Fast(fast) = &mr.0.mem {
            fast.lock().as_mut().revoke();
        }
        // Packets being processed may have found the region before it left the
        // table; once they are done, no transfer writes to it any more (a WRITE
        // in progress looks its region up again for every packet).
        crate::rx::quiesce();
        // Nor from the own work of the PD's QPs, if its memory may fault;
        // an on-demand region also ends accesses from anywhere else (a
        // prefetch), waiting for one in progress.
        pd.paging.flush_linked();
        if let MrMem::Odp(umem) = &mr.0.mem {
            umem.retire();
        }
        // Usually the last reference goes when the caller drops `mr`, in
        // process context, and unpins the pages; a READ response or a send
        // being built may still hold one for a moment, and only reads
        // through it.
        Ok(())
    }
}

/// `reg_user_mr`: pins the pages and publishes the keys.
pub(crate) fn reg_user(
    dev: &crate::device::Device,
    table: &MrTable,
    pd: &Pd,
    start: u64,
    len: u64,
    iova: u64,
    access: i32,
    udata: &mut Udata<'_>,
) -> Result<(MrData, MrKeys)> {
    let access = check_user_access(access)?;
    // The region's addresses must not wrap: an access to its last byte
    // computes the address after it.
    if iova.checked_add(len).is_none() {
        return Err(EINVAL);
    }
    if access & access::ON_DEMAND != 0 {
        // Implicit ODP (the whole address space) is not offered.
        if start == 0 && len == u64::MAX {
            return Err(EOPNOTSUPP);
        }
        // Everything that may fail before paging is switched on: a PD whose
        // registration failed gets no queue (one of the few PDs with one).
        let umem = OdpUmem::get(dev, udata, start, len, access as i32)?;
        let inner = MrTable::new_region(pd.pdn, access, iova, umem.len(), MrMem::Odp(umem))?;
        // From here on the lanes leave the PD's QPs to their own work, so no
        // lane waits on this region's faults. Only placing it in the key
        // table (full, or out of memory) fails after this; the PD then keeps
        // its queue until it goes, as after its regions were deregistered.
        table.start_paging(pd)?;
        return table.insert(inner);
    }
    let umem = Umem::pin(dev, udata, start, len, access as i32)?;
    table.register(pd.pdn, access, iova, umem.len(), MrMem::User(umem))
}

/// `advise_mr`: faults the pages of on-demand regions in ahead of use. A
/// `sync` advice returns once they are in; otherwise a failed fault is not
/// reported (the advice is a hint), but a bad key or range still is.
pub(crate) fn advise(table: &MrTable, pd: &Pd, advice: Advice, sync: bool, sges: &[AdviseSge]) -> Result {
    let write = advice == Advice::PrefetchWrite;
    let fault = if advice == Advice::PrefetchNoFault { Fault::Snapshot } else { Fault::In };
    for sge in sges {
        if sge.len() == 0 {
            continue;
        }
        let mr = table.lookup(sge.lkey()).ok_or(EINVAL)?;
        let by = KeyUse { key: sge.lkey(), pdn: pd.pdn, rights: if write { access::LOCAL_WRITE } else { 0 } };
        let len = u64::from(sge.len());
        let fetched = mr
            .with(by, sge.addr(), len, |off, b| match b {
                Backing::Odp(umem) => Ok(umem.prefetch(off, len, write, fault)),
                _ => Err(MrError::Denied),
            })
            .map_err(|_| EINVAL)?;
        match fetched {
            // A caller being killed stops here, advice or not.
            Err(e) if sync || e == EINTR => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// `get_dma_mr`: a region over all kernel memory for a kernel consumer.
pub(crate) fn get_dma(table: &MrTable, pd: &Pd, access: i32, grant: KernelMemory) -> Result<(MrData, MrKeys)> {
    let access = check_access(access)?;
    table.register(pd.pdn, access, 0, u64::MAX, MrMem::Dma(grant))
}

/// `rereg_user_mr`: PD and rights change in place; a new translation is a
/// new registration (new keys), which the core swaps in for the old one.
pub(crate) fn rereg_user(
    dev: &crate::device::Device,
    table: &MrTable,
    mr: &MrData,
    pd: &Pd,
    change: Rereg<'_, Pd>,
    udata: &mut Udata<'_>,
) -> Result<Option<(MrData, MrKeys)>> {
    let inner = &mr.0;
    if !matches!(inner.mem, MrMem::User(_) | MrMem::Odp(_)) {
        return Err(EINVAL);
    }
    // No window binds to the region while it changes, and none may be
    // bound when it starts.
    inner.begin_rereg()?;
    let res = rereg_unbound(dev, table, inner, pd, change, udata);
    inner.end_rereg(matches!(res, Ok(Some(_))));
    res
}

fn rereg_unbound(
    dev: &crate::device::Device,
    table: &MrTable,
    inner: &MrInner,
    pd: &Pd,
    change: Rereg<'_, Pd>,
    udata: &mut Udata<'_>,
) -> Result<Option<(MrData, MrKeys)>> {
    let access = match change.access {
        Some(a) => check_user_access(a)?,
        None => inner.access(),
    };
    if change.trans.is_none() {
        // On-demand paging is how the memory is held: it changes only with
        // a new translation.
        if (access ^ inner.access()) & access::ON_DEMAND != 0 {
            return Err(EINVAL);
        }
        // Rights to write need memory registered for writing: pages pinned
        // read-only (say of a file the caller may only read) must never
        // become writable.
        let writable = match &inner.mem {
            MrMem::User(umem) => umem.writable(),
            MrMem::Odp(umem) => umem.writable(),
            _ => true,
        };
        if access & access::WRITABLE != 0 && !writable {
            return Err(EACCES);
        }
    }
    if let Some((start, len, iova)) = change.trans {
        return reg_user(dev, table, pd, start, len, iova, access as i32, udata).map(Some);
    }
    if let Some(new_pd) = change.pd {
        if matches!(inner.mem, MrMem::Odp(_)) {
            table.start_paging(new_pd)?;
        }
        inner.pdn.store(new_pd.pdn, Ordering::Relaxed);
    }
    inner.access.store(access, Ordering::Relaxed);
    Ok(None)
}

/// `alloc_mr`: a fast-registration MR for up to `max_pages` pages, free
/// until a REG_MR work request registers it.
pub(crate) fn alloc_fast(table: &MrTable, pd: &Pd, max_pages: u32, id: ib::FastMrId<'_>) -> Result<(MrData, MrKeys)> {
    if max_pages == 0 || max_pages > limits::MAX_FAST_REG_PAGES {
        return Err(EINVAL);
    }
    let fast = FastMr::new(id, max_pages as usize)?;
    let (mr, keys) = table.register(pd.pdn, 0, 0, 0, MrMem::Fast(fast))?;
    if let MrMem::Fast(fast) = &mr.0.mem {
        fast.lock().as_mut().set_initial_key(keys.lkey);
    }
    Ok((mr, keys))
}

/// The MR's driver details in `rdma res show mr -dd`: what memory backs it
/// and how many of its pages are mapped now (an on-demand region's grow
/// as transfers fault them in and shrink as the process lets them go).
pub(crate) fn fill_res(mr: &MrData, out: &mut ib::ResAttrs<'_>) -> Result {
    let (kind, pages): (&CStr, Option<u64>) = match &mr.0.mem {
        MrMem::User(umem) => (c"pinned", Some(umem.page_count() as u64)),
        MrMem::Odp(odp) => (c"odp", Some(odp.pages_mapped())),
        // All of the kernel's memory, mapped by the kernel itself.
        MrMem::Dma(_) => (c"kernel", None),
        MrMem::Fast(fast) => (c"fast_reg", Some(fast.pages_mapped() as u64)),
    };
    out.str(c"mem", kind)?;
    if let Some(pages) = pages {
        out.u64(c"pages_mapped", pages)?;
    }
    out.u32(c"mw_bound", mr.0.windows.load(Ordering::Relaxed) & WINDOW_COUNT)
}

/// `map_mr_sg`: maps a kernel consumer's scatterlist into a
/// fast-registration MR, for the REG_MR that follows.
pub(crate) fn map_sg(mr: &MrData, sg: &MrSg) -> Result<i32> {
    match &mr.0.mem {
        MrMem::Fast(fast) => fast.lock().as_mut().map(sg),
        _ => Err(EINVAL),
    }
}

/// A kernel consumer queued a REG_MR of `mr`: the number its WQE carries,
/// by which it registers once (0, which registers nothing, if `mr` is no
/// fast-registration MR).
pub(crate) fn post_fast_reg(mr: &MrData, posted: Option<ib::RegMrPosted>) -> u64 {
    match (&mr.0.mem, posted) {
        (MrMem::Fast(fast), Some(posted)) => fast.lock().as_mut().post(posted),
        _ => 0,
    }
}

/// Who asks for an invalidation.
pub(crate) enum Invalidator {
    /// A LOCAL_INV, with the request a kernel consumer posted (`None` for a
    /// user QP's, which invalidates no fast-registration MR: those are
    /// kernel consumers' only).
    LocalInv(Option<ib::LocalInvPosted>),
    /// A peer's SEND with Invalidate.
    Peer,
}

/// The REG_MR `post_fast_reg` numbered was not queued after all.
pub(crate) fn unpost_fast_reg(mr: &MrData, number: u64) {
    if let MrMem::Fast(fast) = &mr.0.mem {
        fast.lock().as_mut().unpost(number);
    }
}

/// What a REG_MR work request asks: the MR at the key's index becomes
/// valid under `key`, with `access`, over `len` bytes from `iova`, by the
/// REG_MR the MR numbered `post`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FastReg {
    pub(crate) post: u64,
    pub(crate) key: u32,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) len: u64,
}

/// `dereg_mr`: refused while windows are bound to the region.
pub(crate) fn dereg(table: &MrTable, pd: &Pd, mr: &MrData) -> Result {
    table.unregister(pd, mr)
}

/// Whether devices offer on-demand paging: the kernel has it and the
/// module was not loaded with `odp=0`.
pub(crate) fn odp_enabled() -> bool {
    crate::ib::odp_supported() && crate::module_parameters::odp.value()
}

/// [`check_access`] for a user registration, which may be on demand.
fn check_user_access(access: i32) -> Result<u32> {
    let on_demand = access as u32 & access::ON_DEMAND;
    if on_demand != 0 && !odp_enabled() {
        return Err(EOPNOTSUPP);
    }
    Ok(check_access((access as u32 & !access::ON_DEMAND) as i32)? | on_demand)
}

/// Rejects rights rroce cannot honour; optional hints are dropped.
fn check_access(access: i32) -> Result<u32> {
    let a = access as u32 & !access::OPTIONAL;
    if a & !access::SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    // Remote writers and atomics need the local write right too (IBTA 10.6.3.1).
    if a & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0 && a & access::LOCAL_WRITE == 0 {
        return Err(EINVAL);
    }
    Ok(a)
}
