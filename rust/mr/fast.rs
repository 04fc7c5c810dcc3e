// SPDX-License-Identifier: GPL-2.0
//! Fast-registration MRs (IBTA 10.7.2.2): a kernel consumer allocates one
//! with room for a number of pages, maps a scatterlist into it
//! (`ib_map_mr_sg`), and registers it through its send queue (REG_MR) under
//! a key whose low byte it picks; LOCAL_INV or a peer's SEND with
//! Invalidate make it free again. The mapping sits under a lock that every
//! copy holds, so once an invalidation returns no copy uses the old key.

use super::MrError;
use crate::ib::{KernelPages, MrSg, PostedRegs, RegMrPosted};
use crate::proto::atomic::{AtomicOp, ATOMIC_BYTES};
use crate::proto::page_list::{PageGeometry, Pieces};
use kernel::prelude::*;
use kernel::sync::{new_spinlock_irq, SpinLockIrq, SpinLockIrqGuard};

/// The lock around a fast-registration MR's mapping.
pub(crate) struct FastMr {
    map: Pin<KBox<SpinLockIrq<FastMap>>>,
}

impl FastMr {
    /// A free MR with room for `max_pages` pages.
    pub(super) fn new(max_pages: usize) -> Result<Self> {
        let map = FastMap {
            pages: KernelPages::new(max_pages)?,
            staged: KernelPages::new(max_pages)?,
            mapped: None,
            in_pages: None,
            reg: None,
            key: 0,
            posted: PostedRegs::default(),
        };
        Ok(Self { map: KBox::pin_init(new_spinlock_irq!(map, "rroce_fast_mr"), GFP_KERNEL_ACCOUNT)? })
    }

    pub(super) fn lock(&self) -> SpinLockIrqGuard<'_, FastMap> {
        self.map.lock()
    }
}

/// A registration in force.
#[derive(Clone, Copy)]
pub(crate) struct Registration {
    pub(crate) access: u32,
    pub(crate) iova: u64,
    pub(crate) len: u64,
    /// Where the region's bytes lie in the page list.
    geometry: PageGeometry,
}

/// A fast-registration MR's mapping and state.
pub(crate) struct FastMap {
    /// Kernel virtual addresses of the registered pages; room for the most
    /// the MR was allocated for, so mapping never allocates (consumers map
    /// in atomic context).
    pages: KernelPages,
    /// The pages the last `map_mr_sg` mapped, which REG_MR swaps in: a
    /// consumer maps before invalidating the old registration (rdma_rw
    /// chains LOCAL_INV and REG_MR after the map), which keeps its pages
    /// until then.
    staged: KernelPages,
    /// What the last `map_mr_sg` mapped into `staged`, until a REG_MR.
    mapped: Option<PageGeometry>,
    /// What `pages` holds: a REG_MR without a new map registers it again.
    in_pages: Option<PageGeometry>,
    /// `Some` while the MR is valid.
    reg: Option<Registration>,
    /// The key of the last registration (at first the one `alloc_mr` gave):
    /// the one an invalidation must name.
    key: u32,
    /// REG_MRs queued for this MR and not run yet: each registers once.
    posted: PostedRegs,
}

impl FastMr {
    /// Pages of the registration in force (none while the MR is free).
    pub(crate) fn pages_mapped(&self) -> usize {
        let map = self.lock();
        if map.reg.is_some() { map.pages.registered_pages() } else { 0 }
    }
}

impl FastMap {
    /// The registration, if the MR is valid under `key`.
    pub(super) fn valid(&self, key: u32) -> Option<&Registration> {
        self.reg.as_ref().filter(|_| self.key == key)
    }

    pub(super) fn set_initial_key(&mut self, key: u32) {
        self.key = key;
    }

    /// `ib_map_mr_sg`: the scatterlist's pages, for the next REG_MR.
    pub(super) fn map(&mut self, sg: &MrSg) -> Result<i32> {
        self.mapped = None;
        let m = sg.to_pages(&mut self.staged)?;
        let page_size = sg.page_size();
        self.mapped = Some(PageGeometry::new(page_size, m.first_offset, m.len, m.count).map_err(|_| EINVAL)?);
        Ok(m.entries)
    }

    /// A REG_MR of this MR was queued.
    pub(super) fn post(&mut self, posted: RegMrPosted) {
        self.posted.add(posted);
    }

    /// The REG_MR `post` announced was not queued.
    pub(super) fn unpost(&mut self) {
        self.posted.take();
    }

    /// REG_MR: valid under `key` over `len` bytes of the mapping, which
    /// start at `iova`. Only a free MR registers. Uses up one queued REG_MR,
    /// also when it fails.
    pub(super) fn register(&mut self, key: u32, access: u32, iova: u64, len: u64) -> Result<(), MrError> {
        let posted = self.posted.take().ok_or(MrError::Denied)?;
        if self.reg.is_some() {
            return Err(MrError::Denied);
        }
        let mapped = self.mapped.or(self.in_pages).ok_or(MrError::Range)?;
        if len > mapped.len() || iova.checked_add(len).is_none() {
            return Err(MrError::Range);
        }
        let geometry = PageGeometry::new(mapped.page_size(), mapped.first_offset(), len, mapped.pages())
            .map_err(|_| MrError::Range)?;
        // Newly mapped pages become the registered ones; a later map fills the other list.
        if self.mapped.is_some() {
            core::mem::swap(&mut self.pages, &mut self.staged);
            self.staged.unregister();
        }
        if self.pages.register(len, posted).is_err() {
            if self.mapped.is_some() {
                core::mem::swap(&mut self.pages, &mut self.staged);
            }
            return Err(MrError::Range);
        }
        if self.mapped.take().is_some() {
            self.in_pages = Some(mapped);
        }
        self.key = key;
        self.reg = Some(Registration { access, iova, len, geometry });
        Ok(())
    }

    /// The consumer deregisters the MR: no copy uses its pages after this
    /// returns (the caller holds the lock, so one in progress has finished),
    /// even if a peer or a QP still holds the key.
    pub(super) fn revoke(&mut self) {
        self.reg = None;
        self.pages.unregister();
        self.staged.unregister();
        self.mapped = None;
        self.in_pages = None;
    }

    /// LOCAL_INV or remote invalidation of `key`: free again. Invalidating
    /// a free MR under its last key succeeds, as rdma_rxe allows.
    pub(super) fn invalidate(&mut self, key: u32) -> Result<(), MrError> {
        if key != self.key {
            return Err(MrError::Denied);
        }
        self.reg = None;
        self.pages.unregister();
        Ok(())
    }

    /// The pieces of region bytes `offset..offset + len`, each inside one page.
    fn pieces(&self, offset: u64, len: usize) -> Result<Pieces, MrError> {
        let reg = self.reg.as_ref().ok_or(MrError::Denied)?;
        reg.geometry.pieces(offset, len).ok_or(MrError::Range)
    }

    pub(super) fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), MrError> {
        for p in self.pieces(offset, dst.len())? {
            let part = dst.get_mut(p.at..p.at + p.len).ok_or(MrError::Range)?;
            self.pages.read(p.page, p.in_page, part).map_err(|_| MrError::Range)?;
        }
        Ok(())
    }

    pub(super) fn write(&self, offset: u64, src: &[u8]) -> Result<(), MrError> {
        for p in self.pieces(offset, src.len())? {
            let part = src.get(p.at..p.at + p.len).ok_or(MrError::Range)?;
            self.pages.write(p.page, p.in_page, part).map_err(|_| MrError::Range)?;
        }
        Ok(())
    }

    pub(super) fn atomic(&self, offset: u64, op: AtomicOp) -> Result<u64, MrError> {
        let mut pieces = self.pieces(offset, ATOMIC_BYTES as usize)?;
        // Aligned, the 8 bytes never straddle two pages: one piece.
        let p = pieces.next().filter(|p| p.len == ATOMIC_BYTES as usize).ok_or(MrError::Misaligned)?;
        if p.in_page % ATOMIC_BYTES != 0 {
            return Err(MrError::Misaligned);
        }
        self.pages.atomic(p.page, p.in_page, op).map_err(|_| MrError::Range)
    }
}
