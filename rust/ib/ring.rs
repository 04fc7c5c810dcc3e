// SPDX-License-Identifier: GPL-2.0
//! Rings in the rxe user ABI layout (`struct rxe_queue_buf`): the memory of
//! a CQ, SQ, RQ or SRQ. A user ring is also mapped into the owning process,
//! which can write any byte of it at any time, so this type never forms a
//! Rust reference into the buffer: every access is an atomic access through
//! a raw pointer, indices are masked on every load, and slot contents are
//! copied in or out whole.

use super::abi::MmInfo;
use super::mmap::UserMapping;
use crate::proto::queue::{self, Geometry};
use crate::sys;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use kernel::prelude::*;

/// A ring buffer with kernel-private geometry.
pub(crate) struct Ring {
    base: NonNull<u8>,
    geo: Geometry,
    /// Set for rings user space maps; it owns the memory then.
    user: Option<UserMapping>,
}

// SAFETY: the buffer is only accessed through atomic operations, so holders on
// several CPUs cannot race; the owner serialises writers for the ring's logic.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
    /// Allocates a zeroed ring; `uctx` set means it is published for `mmap()`.
    pub(crate) fn new(geo: Geometry, uctx: Option<&super::UserContext>) -> Result<Self> {
        let len = geo.buf_bytes();
        let (base, user) = match uctx {
            Some(u) => {
                let m = UserMapping::new(u, len)?;
                (m.as_ptr(), Some(m))
            }
            None => {
                // SAFETY: plain allocation of zeroed memory; freed in `drop`.
                let p = unsafe { sys::rroce_vmalloc_user(len as _) }.cast::<u8>();
                (p, None)
            }
        };
        let base = NonNull::new(base).ok_or(ENOMEM)?;
        let ring = Self { base, geo, user };
        ring.store_u32(queue::HDR_LOG2_ELEM_SIZE, geo.log2_elem_size(), Ordering::Relaxed);
        ring.store_u32(queue::HDR_INDEX_MASK, geo.index_mask(), Ordering::Release);
        Ok(ring)
    }

    pub(crate) fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Where user space maps this ring (zeroes for kernel rings).
    pub(crate) fn mminfo(&self) -> MmInfo {
        match &self.user {
            Some(m) => MmInfo { offset: m.offset(), size: m.len() as u32, pad: 0 },
            None => MmInfo::default(),
        }
    }

    fn atomic(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is one of the 4-byte aligned header offsets, inside the buffer,
        // which lives as long as `self`. Atomic accesses are sound even when user space
        // writes the same word concurrently.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast()) }
    }

    fn store_u32(&self, off: usize, v: u32, order: Ordering) {
        self.atomic(off).store(v, order);
    }

    /// The producer index, masked (the other side may have written anything).
    pub(crate) fn load_producer(&self) -> u32 {
        self.atomic(queue::HDR_PRODUCER).load(Ordering::Acquire) & self.geo.index_mask()
    }

    /// The consumer index, masked.
    pub(crate) fn load_consumer(&self) -> u32 {
        self.atomic(queue::HDR_CONSUMER).load(Ordering::Acquire) & self.geo.index_mask()
    }

    /// Publishes a producer index after the slots before it were written.
    pub(crate) fn store_producer(&self, v: u32) {
        self.store_u32(queue::HDR_PRODUCER, v & self.geo.index_mask(), Ordering::Release);
    }

    /// Publishes a consumer index after the slots before it were read.
    pub(crate) fn store_consumer(&self, v: u32) {
        self.store_u32(queue::HDR_CONSUMER, v & self.geo.index_mask(), Ordering::Release);
    }

    // Slot words are copied with relaxed atomic accesses: `&self` lets two kernel-side
    // holders reach one slot at once, and user space writes it at will; neither may
    // be a data race. Ordering comes from the index loads and stores.

    /// Copies `src` (at most one slot) into slot `index`.
    pub(crate) fn write_slot(&self, index: u32, src: &[u8]) {
        let n = src.len().min(self.geo.elem_size());
        let dst = self.slot_ptr(index);
        let words = n / 8;
        for (i, w) in src[..words * 8].chunks_exact(8).enumerate() {
            let v = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            // SAFETY: a slot of 8 bytes or more starts 8-byte aligned (the header is 384
            // bytes, slot sizes are powers of two; smaller slots take no word here), and
            // `dst..dst + elem_size` is inside the buffer (`slot_offset` masks the index,
            // and `Geometry`'s invariants make the last slot end at `buf_bytes`, the size
            // allocated in `new` from the same immutable geometry), which lives as long as
            // `self`; `i * 8 + 8 <= n <= elem_size`. Only atomic accesses reach it.
            unsafe { AtomicU64::from_ptr(dst.add(i * 8).cast()) }.store(v, Ordering::Relaxed);
        }
        for i in words * 8..n {
            // SAFETY: as above, `i < n <= elem_size`.
            unsafe { AtomicU8::from_ptr(dst.add(i)) }.store(src[i], Ordering::Relaxed);
        }
    }

    /// Copies slot `index` (at most `dst.len()` bytes) out of the ring.
    pub(crate) fn read_slot(&self, index: u32, dst: &mut [u8]) {
        let n = dst.len().min(self.geo.elem_size());
        let src = self.slot_ptr(index);
        let words = n / 8;
        for (i, w) in dst[..words * 8].chunks_exact_mut(8).enumerate() {
            // SAFETY: as in `write_slot`.
            let v = unsafe { AtomicU64::from_ptr(src.add(i * 8).cast()) }.load(Ordering::Relaxed);
            // An array store, not a call per word (a WQE is dozens of words);
            // every chunk has 8 bytes.
            if let Ok(w) = <&mut [u8; 8]>::try_from(w) {
                *w = v.to_ne_bytes();
            }
        }
        for i in words * 8..n {
            // SAFETY: as in `write_slot`.
            dst[i] = unsafe { AtomicU8::from_ptr(src.add(i)) }.load(Ordering::Relaxed);
        }
    }

    fn slot_ptr(&self, index: u32) -> *mut u8 {
        // SAFETY: `slot_offset` masks the index, so the offset plus one slot stays within
        // `buf_bytes()`, the allocation size.
        unsafe { self.base.as_ptr().add(self.geo.slot_offset(index)) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if self.user.is_none() {
            // SAFETY: kernel rings own their vmalloc buffer; nobody else maps it.
            unsafe { sys::vfree(self.base.as_ptr().cast()) };
        }
        // A user ring's memory goes with its mapping (dropped after this).
    }
}
