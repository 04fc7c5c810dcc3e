// SPDX-License-Identifier: GPL-2.0
//! Fast-registration MRs (IBTA 10.7.2.2): a kernel consumer allocates one
//! with room for a number of pages, maps a scatterlist into it
//! (`ib_map_mr_sg`), and registers it through its send queue (REG_MR) under
//! a key whose low byte it picks; LOCAL_INV or a peer's SEND with
//! Invalidate make it free again. The mapping sits under a lock that every
//! copy holds (the ib layer's, around the pages: [`ib::FastMr`]), so once
//! an invalidation returns no copy uses the old key, and once `dereg_mr`
//! returns none uses the pages, which the ib layer revokes itself.

use super::MrError;
use crate::ib::{self, FastMrId, MrSg, RegMrPosted};
use crate::proto::atomic::{AtomicOp, ATOMIC_BYTES};
use crate::proto::page_list::{PageGeometry, Pieces};
use core::pin::Pin;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLockIrqGuard};

/// A fast-registration MR: its pages and [`FastMap`] under the lock the ib
/// layer owns ([`ib::FastMr`]), which also revokes the pages when the
/// consumer deregisters the MR.
pub(crate) struct FastMr {
    map: Arc<ib::FastMr<FastMap>>,
}

/// The locked pages and mapping of a fast-registration MR.
pub(crate) type FastLocked = ib::FastMrState<FastMap>;

impl FastMr {
    /// A free MR with room for `max_pages` pages.
    pub(super) fn new(id: FastMrId<'_>, max_pages: usize) -> Result<Self> {
        let map = FastMap { mapped: None, in_pages: None, reg: None, key: 0 };
        Ok(Self { map: id.make(max_pages, map)? })
    }

    /// The mapping, read through `&` and changed through `as_mut`.
    pub(super) fn lock(&self) -> SpinLockIrqGuard<'_, FastLocked> {
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

/// A fast-registration MR's state beside its pages (the kernel virtual
/// addresses of the registered pages and of the ones mapped for the next
/// REG_MR, with room for the most the MR was allocated for, so mapping
/// never allocates: consumers map in atomic context).
pub(crate) struct FastMap {
    /// What the last `map_mr_sg` mapped, until a REG_MR.
    mapped: Option<PageGeometry>,
    /// What the registered list holds: a REG_MR without a new map registers
    /// it again.
    in_pages: Option<PageGeometry>,
    /// `Some` while the MR is valid.
    reg: Option<Registration>,
    /// The key of the last registration (at first the one `alloc_mr` gave):
    /// the one an invalidation must name.
    key: u32,
}

impl FastMr {
    /// Pages of the registration in force (none while the MR is free).
    pub(crate) fn pages_mapped(&self) -> usize {
        let map = self.lock();
        if map.driver().reg.is_some() { map.pages().registered_pages() } else { 0 }
    }
}

impl FastLocked {
    /// The registration, if the MR is valid under `key`.
    pub(super) fn valid(&self, key: u32) -> Option<&Registration> {
        let map = self.driver();
        map.reg.as_ref().filter(|_| map.key == key)
    }

    pub(super) fn set_initial_key(self: Pin<&mut Self>, key: u32) {
        self.parts().1.key = key;
    }

    /// `ib_map_mr_sg`: the scatterlist's pages, for the next REG_MR.
    pub(super) fn map(self: Pin<&mut Self>, sg: &MrSg) -> Result<i32> {
        let (pages, this) = self.parts();
        this.mapped = None;
        let m = pages.map(sg)?;
        let page_size = sg.page_size();
        this.mapped = Some(PageGeometry::new(page_size, m.first_offset, m.len, m.count).map_err(|_| EINVAL)?);
        Ok(m.entries)
    }

    /// A REG_MR of this MR is queued: the number its WQE carries (0, which
    /// registers nothing, if the MR refuses it).
    pub(super) fn post(self: Pin<&mut Self>, posted: RegMrPosted) -> u64 {
        self.parts().0.post(posted).unwrap_or(0)
    }

    /// The REG_MR `post` numbered was not queued.
    pub(super) fn unpost(self: Pin<&mut Self>, number: u64) {
        self.parts().0.withdraw(number);
    }

    /// REG_MR `number`: valid under `key` over `len` bytes of the mapping,
    /// which start at `iova`. Only a free MR registers. Uses up the posted
    /// REG_MR, also when it fails.
    pub(super) fn register(
        self: Pin<&mut Self>,
        number: u64,
        key: u32,
        access: u32,
        iova: u64,
        len: u64,
    ) -> Result<(), MrError> {
        let (mut pages, this) = self.parts();
        let posted = pages.as_mut().take_post(number).ok_or(MrError::Denied)?;
        if this.reg.is_some() {
            return Err(MrError::Denied);
        }
        let new_map = pages.has_new_map();
        let mapped = if new_map { this.mapped } else { this.in_pages }.ok_or(MrError::Range)?;
        if len > mapped.len() || iova.checked_add(len).is_none() {
            return Err(MrError::Range);
        }
        let geometry = PageGeometry::new(mapped.page_size(), mapped.first_offset(), len, mapped.pages())
            .map_err(|_| MrError::Range)?;
        // A new map becomes the registered one; a later map fills the other list.
        pages.register(len, posted, key).map_err(|_| MrError::Range)?;
        if new_map {
            this.in_pages = this.mapped.take();
        }
        this.key = key;
        this.reg = Some(Registration { access, iova, len, geometry });
        Ok(())
    }

    /// The consumer deregisters the MR: its key stops working. The pages
    /// themselves the ib layer revokes once the deregistration returns,
    /// under this lock (see [`ib::FastMr`]).
    pub(super) fn revoke(self: Pin<&mut Self>) {
        let this = self.parts().1;
        this.reg = None;
        this.mapped = None;
        this.in_pages = None;
    }

    /// LOCAL_INV or remote invalidation of `key` (`by`): free again, and
    /// the proof that the pages are no longer accessible, which the
    /// completion telling the consumer so needs (a LOCAL_INV's is made from
    /// its posted request). Invalidating a free MR under its last key
    /// succeeds, as rdma_rxe allows.
    pub(super) fn invalidate(self: Pin<&mut Self>, key: u32, by: super::Invalidator) -> Result<ib::Invalidated, MrError> {
        let (pages, this) = self.parts();
        if key != this.key {
            return Err(MrError::Denied);
        }
        let proof = match by {
            super::Invalidator::Peer => pages.unregister(key),
            super::Invalidator::LocalInv(Some(posted)) if posted.key() == key => pages.unregister_posted(posted),
            super::Invalidator::LocalInv(_) => return Err(MrError::Denied),
        };
        let proof = proof.map_err(|_| MrError::Denied)?;
        this.reg = None;
        Ok(proof)
    }

    /// The pieces of region bytes `offset..offset + len`, each inside one page.
    fn pieces(&self, offset: u64, len: usize) -> Result<Pieces, MrError> {
        let reg = self.driver().reg.as_ref().ok_or(MrError::Denied)?;
        reg.geometry.pieces(offset, len).ok_or(MrError::Range)
    }

    pub(super) fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), MrError> {
        for p in self.pieces(offset, dst.len())? {
            let part = dst.get_mut(p.at..p.at + p.len).ok_or(MrError::Range)?;
            self.pages().read(p.page, p.in_page, part).map_err(|_| MrError::Range)?;
        }
        Ok(())
    }

    pub(super) fn write(&self, offset: u64, src: &[u8]) -> Result<(), MrError> {
        for p in self.pieces(offset, src.len())? {
            let part = src.get(p.at..p.at + p.len).ok_or(MrError::Range)?;
            self.pages().write(p.page, p.in_page, part).map_err(|_| MrError::Range)?;
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
        self.pages().atomic(p.page, p.in_page, op).map_err(|_| MrError::Range)
    }
}
