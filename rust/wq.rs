// SPDX-License-Identifier: GPL-2.0
//! Work queues: a send or receive ring in the rxe layout with the kernel's
//! private consumer index. User space owns the producer side and writes
//! WQEs without system calls; the kernel copies each WQE out once when it
//! takes it.

use crate::ib::{self, Ring, UserContext};
use crate::proto::limits;
use crate::proto::queue::Geometry;
use kernel::alloc::{KVVec, KVec};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Smallest ring slot: one cache line.
const MIN_SLOT: u32 = 64;
/// `struct rxe_recv_wqe` before its SGEs.
pub(crate) const RECV_WQE_HDR_BYTES: u32 = 40;

/// Slot bytes of a receive WQE with `max_sge` SGEs.
pub(crate) fn recv_slot_bytes(max_sge: u32) -> u32 {
    RECV_WQE_HDR_BYTES + max_sge * limits::SGE_BYTES
}

/// A send or receive ring and the limits its slots impose.
pub(crate) struct WorkQueue {
    /// Shared with the producer side of kernel consumers' rings.
    pub(crate) ring: Arc<Ring>,
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
    /// Kernel-private consumer index.
    pub(crate) consumer: u32,
}

impl WorkQueue {
    pub(crate) fn new(wr: u32, slot_bytes: u32, max_sge: u32, max_inline: u32, uctx: Option<&UserContext>) -> Result<Self> {
        let geo = Geometry::new(wr.max(1), slot_bytes, MIN_SLOT, limits::MAX_QP_WR).map_err(|_| EINVAL)?;
        Ok(Self { ring: Arc::new(Ring::new(geo, uctx)?, GFP_KERNEL)?, max_sge, max_inline, consumer: 0 })
    }

    pub(crate) fn capacity(&self) -> u32 {
        self.ring.geometry().capacity()
    }

    /// Empties the ring: both indices back to 0, as after creation.
    pub(crate) fn reset(&mut self) {
        self.consumer = 0;
        self.ring.store_consumer(0);
        self.ring.store_producer(0);
    }

    /// Takes up to `max` posted WQEs off the ring, calling `each` with a copy
    /// of its first bytes (WQE headers never exceed 16 bytes here) once its
    /// slot is free again, so a consumer reposting on a completion finds
    /// room. Returns whether WQEs are left (user space moves the producer as
    /// it likes: the caller goes on later, not in this call).
    pub(crate) fn drain(&mut self, max: u32, mut each: impl FnMut(&[u8; 16])) -> bool {
        let mut head = [0u8; 16];
        for _ in 0..max {
            if !self.take(&mut head) {
                return false;
            }
            each(&head);
        }
        self.posted() != 0
    }

    /// WQEs posted and not yet taken.
    pub(crate) fn posted(&self) -> u32 {
        self.ring.geometry().count(self.ring.load_producer(), self.consumer)
    }

    /// Copies the next posted WQE into `dst` and frees its slot; false if
    /// none is posted.
    pub(crate) fn take(&mut self, dst: &mut [u8]) -> bool {
        if self.posted() == 0 {
            return false;
        }
        self.ring.read_slot(self.consumer, dst);
        self.consumer = self.ring.geometry().next(self.consumer);
        self.ring.store_consumer(self.consumer);
        true
    }
}

/// The producer side of a kernel ring: work requests become WQEs in the rxe
/// layout, so the engines treat kernel and user QPs alike.
pub(crate) struct KernelPoster {
    ring: Arc<Ring>,
    producer: u32,
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
    /// The WQE being built.
    pub(crate) wqe: KVec<u8>,
    /// A send queue's: per slot, the LOCAL_INV posted into it, which its
    /// invalidation takes (empty for a receive queue).
    local_inv: KVVec<Option<ib::LocalInvPosted>>,
}

impl KernelPoster {
    pub(crate) fn new(wq: &WorkQueue) -> Result<Self> {
        let mut wqe = KVec::new();
        wqe.resize(wq.ring.geometry().elem_size(), 0u8, GFP_KERNEL_ACCOUNT)?;
        let (max_sge, max_inline) = (wq.max_sge, wq.max_inline);
        Ok(Self { ring: wq.ring.clone(), producer: 0, max_sge, max_inline, wqe, local_inv: KVVec::new() })
    }

    /// As `new`, for a send queue.
    pub(crate) fn new_send(wq: &WorkQueue) -> Result<Self> {
        let mut p = Self::new(wq)?;
        let slots = wq.ring.geometry().num_slots() as usize;
        p.local_inv = KVVec::with_capacity(slots, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..slots {
            p.local_inv.push(None, GFP_KERNEL_ACCOUNT)?;
        }
        Ok(p)
    }

    /// Appends the WQE built in `self.wqe`; `ENOMEM` when the ring is full.
    pub(crate) fn push(&mut self) -> Result {
        self.push_send(None)
    }

    /// As `push`, for a send WQE, with the LOCAL_INV it is, if it is one.
    pub(crate) fn push_send(&mut self, local_inv: Option<ib::LocalInvPosted>) -> Result {
        let geo = self.ring.geometry();
        if geo.is_full(self.producer, self.ring.load_consumer()) {
            return Err(ENOMEM);
        }
        // Every push replaces the slot's entry: none outlives the WQE it came with. The
        // requester takes it under the same lock, so not before it is there.
        if let Some(slot) = self.local_inv.get_mut(self.producer as usize) {
            *slot = local_inv;
        }
        self.ring.write_slot(self.producer, &self.wqe);
        self.producer = geo.next(self.producer);
        self.ring.store_producer(self.producer);
        Ok(())
    }

    /// The LOCAL_INV posted into send queue slot `slot`, once.
    pub(crate) fn take_local_inv(&mut self, slot: u32) -> Option<ib::LocalInvPosted> {
        self.local_inv.get_mut(slot as usize).and_then(Option::take)
    }

    /// Back to an empty ring, as the QP's reset leaves it.
    pub(crate) fn reset(&mut self) {
        self.producer = 0;
        for slot in self.local_inv.iter_mut() {
            *slot = None;
        }
    }

    /// Produces into `wq`'s ring from now on, whose first `producer` slots
    /// are posted already (an SRQ resize moved them there).
    pub(crate) fn switch_to(&mut self, wq: &WorkQueue, producer: u32) {
        self.ring = wq.ring.clone();
        self.producer = producer;
    }
}
