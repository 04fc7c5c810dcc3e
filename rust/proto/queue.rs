// SPDX-License-Identifier: GPL-2.0
//! Geometry and index arithmetic of the rings shared with user space in the
//! rxe user ABI (`struct rxe_queue_buf`): a 384-byte header with the
//! producer and consumer indices on their own cache lines, then a power of
//! two of power-of-two sized slots. One slot always stays empty, so
//! `prod == cons` means empty.
//!
//! The kernel never trusts the header the user can write: it keeps its own
//! copy of the geometry and masks every index it reads.

/// Offset of `log2_elem_size` in the ring header.
pub const HDR_LOG2_ELEM_SIZE: usize = 0;
/// Offset of `index_mask` in the ring header.
pub const HDR_INDEX_MASK: usize = 4;
/// Offset of `producer_index` in the ring header.
pub const HDR_PRODUCER: usize = 128;
/// Offset of `consumer_index` in the ring header.
pub const HDR_CONSUMER: usize = 256;
/// Size of the ring header; slot 0 starts here.
pub const HDR_BYTES: usize = 384;

/// Why a ring cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// Zero or more entries than the limit were asked for.
    BadCapacity,
    /// A slot would be larger than the format allows.
    BadElemSize,
}

/// Kernel-private description of a ring. Only [`Geometry::new`] makes one,
/// so every value holds its invariants: a power of two of slots, at most
/// 2^30, each a power of two of at most [`MAX_ELEM_SIZE`] bytes. Code that
/// indexes a buffer of [`Geometry::buf_bytes`] bytes relies on that.
///
/// ```compile_fail
/// let g = rroce_proto::queue::Geometry { log2_elem_size: 6, index_mask: u32::MAX };
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// log2 of the slot size in bytes.
    log2_elem_size: u32,
    /// `num_slots - 1`.
    index_mask: u32,
}

/// Largest slot the format allows (a send WQE with 32 SGEs fits in 1 KiB).
pub const MAX_ELEM_SIZE: u32 = 1 << 16;

impl Geometry {
    /// Geometry for at least `capacity` usable entries of `elem_size` bytes,
    /// with slots no smaller than `min_slot` (the cache line, so adjacent
    /// entries never share a line), at most `max_capacity` entries.
    pub fn new(
        capacity: u32,
        elem_size: u32,
        min_slot: u32,
        max_capacity: u32,
    ) -> Result<Self, GeometryError> {
        if capacity == 0 || capacity > max_capacity || capacity >= 1 << 30 {
            return Err(GeometryError::BadCapacity);
        }
        let slot = elem_size.max(min_slot).max(1);
        if slot > MAX_ELEM_SIZE {
            return Err(GeometryError::BadElemSize);
        }
        let slot = slot.next_power_of_two();
        let num_slots = (capacity + 1).next_power_of_two();
        Ok(Self {
            log2_elem_size: slot.trailing_zeros(),
            index_mask: num_slots - 1,
        })
    }

    /// `num_slots - 1`: masks an index into the ring.
    pub const fn index_mask(&self) -> u32 {
        self.index_mask
    }

    /// log2 of the slot size in bytes.
    pub const fn log2_elem_size(&self) -> u32 {
        self.log2_elem_size
    }

    /// Number of slots.
    pub const fn num_slots(&self) -> u32 {
        self.index_mask + 1
    }

    /// Usable entries (one slot stays empty).
    pub const fn capacity(&self) -> u32 {
        self.index_mask
    }

    /// Slot size in bytes.
    pub const fn elem_size(&self) -> usize {
        1 << self.log2_elem_size
    }

    /// Bytes of header plus slots.
    pub const fn buf_bytes(&self) -> usize {
        HDR_BYTES + ((self.num_slots() as usize) << self.log2_elem_size)
    }

    /// Byte offset of the slot an index (masked here) designates.
    pub const fn slot_offset(&self, index: u32) -> usize {
        HDR_BYTES + (((index & self.index_mask) as usize) << self.log2_elem_size)
    }

    /// Entries between a consumer and a producer index, both masked first, so
    /// a hostile index from user space yields a count within capacity.
    pub const fn count(&self, producer: u32, consumer: u32) -> u32 {
        (producer.wrapping_sub(consumer)) & self.index_mask
    }

    /// Whether no entry can be added.
    pub const fn is_full(&self, producer: u32, consumer: u32) -> bool {
        self.count(producer.wrapping_add(1), consumer) == 0
    }

    /// The index after `index`, masked.
    pub const fn next(&self, index: u32) -> u32 {
        index.wrapping_add(1) & self.index_mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn like_rxe() {
        // CQ of 100 entries of 64-byte CQEs on a 64-byte cache line
        let g = Geometry::new(100, 48, 64, 32767).unwrap();
        assert_eq!(g.num_slots(), 128);
        assert_eq!(g.capacity(), 127);
        assert_eq!(g.elem_size(), 64);
        assert_eq!(g.buf_bytes(), 384 + 128 * 64);
        // a send queue with one SGE: 208 + 16 -> 256-byte slots
        let sq = Geometry::new(16, 224, 64, 1 << 20).unwrap();
        assert_eq!(sq.elem_size(), 256);
        assert_eq!(sq.num_slots(), 32);
    }

    #[test]
    fn rejects() {
        assert_eq!(Geometry::new(0, 64, 64, 10), Err(GeometryError::BadCapacity));
        assert_eq!(Geometry::new(11, 64, 64, 10), Err(GeometryError::BadCapacity));
        assert_eq!(
            Geometry::new(1, MAX_ELEM_SIZE + 1, 64, 10),
            Err(GeometryError::BadElemSize)
        );
    }

    proptest! {
        #[test]
        fn hostile_indices_stay_in_bounds(cap in 1u32..100_000, elem in 1u32..2048,
                                          p in any::<u32>(), c in any::<u32>()) {
            let g = Geometry::new(cap, elem, 64, 1 << 20).unwrap();
            prop_assert!(g.capacity() >= cap);
            prop_assert!(g.count(p, c) <= g.capacity());
            prop_assert!(g.slot_offset(p) + g.elem_size() <= g.buf_bytes());
            prop_assert!(g.next(p) <= g.index_mask);
        }

        #[test]
        fn fill_then_full(cap in 1u32..512) {
            let g = Geometry::new(cap, 64, 64, 1 << 20).unwrap();
            let (mut prod, cons) = (0u32, 0u32);
            for _ in 0..g.capacity() {
                prop_assert!(!g.is_full(prod, cons));
                prod = g.next(prod);
            }
            prop_assert!(g.is_full(prod, cons));
            prop_assert_eq!(g.count(prod, cons), g.capacity());
        }
    }
}
