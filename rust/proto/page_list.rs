// SPDX-License-Identifier: GPL-2.0
//! Fast-registration page lists (IBTA 10.7.2.2): a region that a kernel
//! consumer maps over a list of equal, aligned pages (`ib_map_mr_sg`), and
//! where each of its bytes lies. The driver keeps the page addresses; this
//! module checks a mapping and cuts a range of the region into pieces that
//! each stay inside one page.

/// Smallest and largest page size a mapping may use (the core passes the
/// consumer's choice, usually 4 KiB or the CPU's page size).
pub const MIN_PAGE_SHIFT: u32 = 12;
pub const MAX_PAGE_SHIFT: u32 = 30;

/// The shape of a mapping: `count` pages of `1 << shift` bytes, the region
/// starting `first_offset` bytes into the first and `len` bytes long.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageGeometry {
    shift: u32,
    first_offset: u64,
    len: u64,
    count: usize,
}

/// Why a mapping is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeometryError {
    /// Not a power of two between the smallest and largest page size.
    PageSize,
    /// The region does not start inside the first page, or does not end
    /// inside the pages.
    Range,
}

impl PageGeometry {
    /// Checks a mapping of `count` pages of `page_size` bytes whose region
    /// starts at byte `first_offset` of the first page and is `len` long.
    pub fn new(page_size: u64, first_offset: u64, len: u64, count: usize) -> Result<Self, GeometryError> {
        if !page_size.is_power_of_two() {
            return Err(GeometryError::PageSize);
        }
        let shift = page_size.trailing_zeros();
        if !(MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT).contains(&shift) {
            return Err(GeometryError::PageSize);
        }
        let span = (count as u64).checked_mul(page_size).ok_or(GeometryError::Range)?;
        let end = first_offset.checked_add(len).ok_or(GeometryError::Range)?;
        if first_offset >= page_size || end > span {
            return Err(GeometryError::Range);
        }
        Ok(Self { shift, first_offset, len, count })
    }

    pub const fn page_size(&self) -> u64 {
        1 << self.shift
    }

    pub const fn len(&self) -> u64 {
        self.len
    }

    /// Pages in the list.
    pub const fn pages(&self) -> usize {
        self.count
    }

    pub const fn first_offset(&self) -> u64 {
        self.first_offset
    }

    /// The pieces of region bytes `offset..offset + len`, or `None` unless
    /// they lie inside the region.
    pub fn pieces(&self, offset: u64, len: usize) -> Option<Pieces> {
        let end = offset.checked_add(len as u64)?;
        if end > self.len {
            return None;
        }
        Some(Pieces { shift: self.shift, pos: self.first_offset + offset, left: len, done: 0 })
    }
}

/// One stretch of a range inside one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index of the page in the list.
    pub page: usize,
    /// Offset of the stretch inside the page.
    pub in_page: u64,
    /// Where the stretch starts in the caller's range.
    pub at: usize,
    pub len: usize,
}

/// The pieces of a range, in order (see [`PageGeometry::pieces`]).
#[derive(Clone, Debug)]
pub struct Pieces {
    shift: u32,
    /// Byte of the page list the next piece starts at.
    pos: u64,
    left: usize,
    done: usize,
}

impl Iterator for Pieces {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.left == 0 {
            return None;
        }
        let size = 1u64 << self.shift;
        let in_page = self.pos & (size - 1);
        let n = ((size - in_page) as usize).min(self.left);
        let piece = Piece { page: (self.pos >> self.shift) as usize, in_page, at: self.done, len: n };
        self.pos += n as u64;
        self.left -= n;
        self.done += n;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn refuses_bad_page_sizes_and_ranges() {
        assert_eq!(PageGeometry::new(4096 + 1, 0, 1, 1), Err(GeometryError::PageSize));
        assert_eq!(PageGeometry::new(2048, 0, 1, 1), Err(GeometryError::PageSize));
        assert_eq!(PageGeometry::new(1 << 31, 0, 1, 1), Err(GeometryError::PageSize));
        assert_eq!(PageGeometry::new(0, 0, 0, 0), Err(GeometryError::PageSize));
        // Starts beyond the first page, or ends beyond the last.
        assert_eq!(PageGeometry::new(4096, 4096, 1, 2), Err(GeometryError::Range));
        assert_eq!(PageGeometry::new(4096, 100, 4096 * 2 - 99, 2), Err(GeometryError::Range));
        assert_eq!(PageGeometry::new(4096, u64::MAX, 2, 2), Err(GeometryError::Range));
        assert_eq!(PageGeometry::new(1 << 30, 0, 1, usize::MAX), Err(GeometryError::Range));
        assert!(PageGeometry::new(4096, 100, 4096 * 2 - 100, 2).is_ok());
        assert!(PageGeometry::new(4096, 0, 0, 0).is_ok());
    }

    #[test]
    fn a_range_across_pages_is_cut_at_page_ends() {
        let g = PageGeometry::new(4096, 4000, 10_000, 4).unwrap();
        let p: Vec<_> = g.pieces(0, 200).unwrap().collect();
        assert_eq!(
            p,
            [Piece { page: 0, in_page: 4000, at: 0, len: 96 }, Piece { page: 1, in_page: 0, at: 96, len: 104 }]
        );
        let p: Vec<_> = g.pieces(96, 8192).unwrap().collect();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1], Piece { page: 2, in_page: 0, at: 4096, len: 4096 });
        assert!(g.pieces(9_999, 2).is_none());
        assert!(g.pieces(u64::MAX, 1).is_none());
        assert_eq!(g.pieces(10_000, 0).unwrap().count(), 0);
    }

    proptest! {
        #[test]
        fn pieces_tile_the_range_inside_the_pages(
            shift in MIN_PAGE_SHIFT..=16u32,
            count in 1usize..64,
            first in any::<u64>(),
            len in any::<u64>(),
            offset in any::<u64>(),
            n in 0usize..300_000,
        ) {
            let size = 1u64 << shift;
            let first = first % size;
            let len = len % (count as u64 * size - first + 1);
            let g = PageGeometry::new(size, first, len, count).unwrap();
            let offset = offset % (len + 1);
            match g.pieces(offset, n) {
                None => prop_assert!(offset + n as u64 > len),
                Some(pieces) => {
                    let mut at = 0;
                    for p in pieces {
                        prop_assert!(p.page < count);
                        prop_assert!(p.len > 0 && p.in_page + p.len as u64 <= size);
                        prop_assert_eq!(p.at, at);
                        // The byte's place in the page list follows from its offset.
                        prop_assert_eq!(p.page as u64 * size + p.in_page, first + offset + at as u64);
                        at += p.len;
                    }
                    prop_assert_eq!(at, n);
                }
            }
        }
    }
}
