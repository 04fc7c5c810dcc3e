// SPDX-License-Identifier: GPL-2.0
//! Memory regions and the per-device key table. Keys are `index << 8 | byte`
//! with a random byte; indices are reused only after the whole index space
//! went round, so a stale key of a deregistered region does not match the
//! next region, and a key cannot be derived from another one: a guess of
//! the byte succeeds once in 256.
//! The data path looks keys up and holds an `Arc` for the duration of a
//! transfer, so deregistration never frees memory under a copy.

#![deny(unsafe_code)]

use crate::device::Pd;
use crate::ib::{MrKeys, Rereg, Udata, Umem};
use crate::proto::atomic::AtomicOp;
use crate::proto::limits;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use crate::table::Table;
use kernel::sync::Arc;

/// Access rights (`IB_ACCESS_*`).
pub(crate) mod access {
    use crate::sys;
    pub(crate) const LOCAL_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
    pub(crate) const REMOTE_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
    pub(crate) const REMOTE_READ: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_READ;
    pub(crate) const REMOTE_ATOMIC: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    pub(crate) const MW_BIND: u32 = sys::ib_access_flags_IB_ACCESS_MW_BIND;
    /// Optional hints a provider may ignore (relaxed ordering and the range after it).
    pub(crate) const OPTIONAL: u32 = sys::ib_access_flags_IB_ACCESS_OPTIONAL;
    /// Rights that need the pages pinned for writing (the core's `ib_access_writable`).
    pub(crate) const WRITABLE: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND;
    /// What rroce honours.
    pub(crate) const SUPPORTED: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | MW_BIND;
}

/// Memory behind a region.
pub(crate) enum MrMem {
    /// Pinned pages of a process.
    User(Umem),
    /// Kernel virtual addresses of a kernel consumer (`get_dma_mr`).
    Dma,
}

/// A registered region, shared by the key table and the data path.
pub(crate) struct MrInner {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    /// PD and rights: `rereg_user_mr` may change them while transfers run,
    /// which then see either the old or the new value.
    pdn: AtomicU64,
    access: AtomicU32,
    pub(crate) iova: u64,
    pub(crate) len: u64,
    mem: MrMem,
}

impl MrInner {
    pub(crate) fn pdn(&self) -> u64 {
        self.pdn.load(Ordering::Relaxed)
    }

    pub(crate) fn access(&self) -> u32 {
        self.access.load(Ordering::Relaxed)
    }

    /// Copies the region's bytes at virtual address `va` into `dst`, checking
    /// the whole range lies inside the region.
    pub(crate) fn read(&self, va: u64, dst: &mut [u8]) -> Result {
        let off = va.checked_sub(self.iova).ok_or(EFAULT)?;
        match &self.mem {
            MrMem::User(u) => u.read(off, dst),
            // A DMA MR covers all kernel memory from iova 0: addresses are kernel ones.
            MrMem::Dma => crate::ib::copy_from_kernel(va, dst),
        }
    }

    /// Executes `op` on the 8 bytes at virtual address `va` of the region,
    /// atomically; returns the value found. Kernel (DMA) regions take no
    /// remote atomics.
    pub(crate) fn atomic(&self, va: u64, op: AtomicOp) -> Result<u64> {
        let off = va.checked_sub(self.iova).ok_or(EFAULT)?;
        match (&self.mem, op) {
            (MrMem::User(u), AtomicOp::CompareSwap { compare, swap }) => u.compare_swap(off, compare, swap),
            (MrMem::User(u), AtomicOp::FetchAdd { add }) => u.fetch_add(off, add),
            (MrMem::Dma, _) => Err(EOPNOTSUPP),
        }
    }

    /// Copies `src` to virtual address `va` of the region.
    pub(crate) fn write(&self, va: u64, src: &[u8]) -> Result {
        let off = va.checked_sub(self.iova).ok_or(EFAULT)?;
        match &self.mem {
            MrMem::User(u) => u.write(off, src),
            MrMem::Dma => crate::ib::copy_to_kernel(va, src),
        }
    }
}

/// The MR part of a device: regions by key index.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    table: Table<MrInner>,
}

/// The data the core's `ib_mr` container carries.
pub(crate) struct MrData(Arc<MrInner>);

impl MrTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            table <- Table::new(1, limits::MAX_MR, limits::MAX_MR),
        })
    }

    fn register(&self, pdn: u64, access: u32, iova: u64, len: u64, mem: MrMem) -> Result<(MrData, MrKeys)> {
        let inner = self.table.insert(|idx| {
            // The table hands indices out cyclically, so a stale key's index is
            // reused late; the random byte keeps keys from being guessed.
            let key = idx << 8 | u32::from(crate::ib::random_u8());
            Ok::<_, Error>(MrInner {
                lkey: key,
                rkey: key,
                pdn: AtomicU64::new(pdn),
                access: AtomicU32::new(access),
                iova,
                len,
                mem,
            })
        })?;
        let keys = MrKeys { lkey: inner.lkey, rkey: inner.rkey };
        Ok((MrData(inner), keys))
    }

    /// Looks a key up; the region must match the whole key.
    pub(crate) fn lookup(&self, key: u32) -> Option<Arc<MrInner>> {
        self.table.get(key >> 8).filter(|mr| mr.lkey == key || mr.rkey == key)
    }

    fn unregister(&self, mr: MrData) {
        drop(self.table.remove(mr.0.lkey >> 8, &mr.0));
        // Packets being processed may have found the region before it left the
        // table; once they are done, no transfer writes to it any more (a WRITE
        // in progress looks its region up again for every packet).
        crate::rx::quiesce();
        // Usually the last reference goes here, in process context, and unpins
        // the pages; a READ response or a send being built may still hold one
        // for a moment, and only reads through it.
        drop(mr);
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
    _udata: &mut Udata<'_>,
) -> Result<(MrData, MrKeys)> {
    let access = check_access(access)?;
    let umem = Umem::pin(dev, start, len, access as i32)?;
    table.register(pd.pdn, access, iova, umem.len(), MrMem::User(umem))
}

/// `get_dma_mr`: a region over all kernel memory for a kernel consumer.
pub(crate) fn get_dma(table: &MrTable, pd: &Pd, access: i32) -> Result<(MrData, MrKeys)> {
    let access = check_access(access)?;
    table.register(pd.pdn, access, 0, u64::MAX, MrMem::Dma)
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
    if !matches!(inner.mem, MrMem::User(_)) {
        return Err(EINVAL);
    }
    let access = match change.access {
        Some(a) => check_access(a)?,
        None => inner.access(),
    };
    // Rights to write need pages pinned for writing: pages pinned read-only
    // (say of a file the caller may only read) must never become writable.
    if change.trans.is_none() && access & access::WRITABLE != 0 {
        if let MrMem::User(umem) = &inner.mem {
            if !umem.writable() {
                return Err(EACCES);
            }
        }
    }
    if let Some((start, len, iova)) = change.trans {
        return reg_user(dev, table, pd, start, len, iova, access as i32, udata).map(Some);
    }
    if let Some(new_pd) = change.pd {
        inner.pdn.store(new_pd.pdn, Ordering::Relaxed);
    }
    inner.access.store(access, Ordering::Relaxed);
    Ok(None)
}

pub(crate) fn dereg(table: &MrTable, mr: MrData) {
    table.unregister(mr);
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
