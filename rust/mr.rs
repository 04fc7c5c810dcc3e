// SPDX-License-Identifier: GPL-2.0
//! Memory regions and the per-device key table. Keys are `index << 8 | byte`
//! with a byte that changes on every registration, so a stale key of a
//! deregistered region never matches the region that reuses its index.
//! The data path looks keys up and holds an `Arc` for the duration of a
//! transfer, so deregistration never frees memory under a copy.

use crate::device::Pd;
use crate::ib::{CopyDir, MrKeys, Udata, Umem};
use crate::proto::limits;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};
use kernel::xarray::{AllocKind, XArray};

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
#[allow(dead_code)] // PD, rights and bounds are checked by the transport engines.
pub(crate) struct MrInner {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) pdn: u32,
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) len: u64,
    mem: MrMem,
}

impl MrInner {
    /// Copies between `buf` and the region at virtual address `va`, checking
    /// the whole range lies inside the region.
    #[allow(dead_code)] // The transport engines copy through here.
    pub(crate) fn copy(&self, va: u64, buf: &mut [u8], dir: CopyDir) -> Result {
        let off = va.checked_sub(self.iova).ok_or(EFAULT)?;
        match &self.mem {
            MrMem::User(u) => u.copy(off, buf, dir),
            // Kernel consumers address their own memory; copies come with the data path.
            MrMem::Dma => Err(EOPNOTSUPP),
        }
    }
}

/// The MR part of a device: key table and limits.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    keys: XArray<Arc<MrInner>>,
    #[pin]
    reg_lock: Mutex<()>,
    count: AtomicU32,
    cursor: AtomicU32,
    key_byte: AtomicU32,
}

/// The data the core's `ib_mr` container carries.
pub(crate) struct MrData(Arc<MrInner>);

const MIN_INDEX: u32 = 1;
const MAX_INDEX: u32 = limits::MAX_MR;

impl MrTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            keys <- XArray::new(AllocKind::Alloc),
            reg_lock <- new_mutex!((), "rroce_mr_reg"),
            count: AtomicU32::new(0),
            cursor: AtomicU32::new(MIN_INDEX),
            key_byte: AtomicU32::new(0),
        })
    }

    /// Finds a free index, starting after the last one handed out.
    fn free_index(&self) -> Result<u32> {
        let guard = self.keys.lock();
        let span = MAX_INDEX - MIN_INDEX + 1;
        let start = self.cursor.load(Ordering::Relaxed);
        for i in 0..span {
            let idx = MIN_INDEX + (start - MIN_INDEX + i) % span;
            if guard.get(idx as usize).is_none() {
                self.cursor.store(if idx == MAX_INDEX { MIN_INDEX } else { idx + 1 }, Ordering::Relaxed);
                return Ok(idx);
            }
        }
        Err(ENOMEM)
    }

    fn register(&self, pdn: u32, access: u32, iova: u64, len: u64, mem: MrMem) -> Result<(MrData, MrKeys)> {
        if self
            .count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < limits::MAX_MR).then_some(n + 1))
            .is_err()
        {
            return Err(ENOMEM);
        }
        let res = (|| {
            // Registrations are serialised, so the free index found stays free until stored.
            let _reg = self.reg_lock.lock();
            let idx = self.free_index()?;
            let byte = self.key_byte.fetch_add(1, Ordering::Relaxed) & 0xff;
            let key = idx << 8 | byte;
            let inner = Arc::new(MrInner { lkey: key, rkey: key, pdn, access, iova, len, mem }, GFP_KERNEL)?;
            self.keys.lock().store(idx as usize, inner.clone(), GFP_KERNEL).map_err(|_| ENOMEM)?;
            Ok((MrData(inner), MrKeys { lkey: key, rkey: key }))
        })();
        if res.is_err() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        res
    }

    /// Looks a key up; the region must match the whole key.
    #[allow(dead_code)] // The transport engines resolve L_Keys and R_Keys here.
    pub(crate) fn lookup(&self, key: u32) -> Option<Arc<MrInner>> {
        let guard = self.keys.lock();
        let mr = guard.get((key >> 8) as usize)?;
        (mr.lkey == key || mr.rkey == key).then(|| Arc::from(mr))
    }

    fn unregister(&self, mr: MrData) {
        let idx = (mr.0.lkey >> 8) as usize;
        let removed = {
            let mut guard = self.keys.lock();
            match guard.get(idx) {
                Some(cur) if core::ptr::eq(&*cur, &*mr.0) => guard.remove(idx),
                _ => None,
            }
        };
        // Dropped here, in process context: the last reference unpins user pages.
        drop(removed);
        drop(mr);
        self.count.fetch_sub(1, Ordering::Relaxed);
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
