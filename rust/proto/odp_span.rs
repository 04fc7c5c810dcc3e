// SPDX-License-Identifier: GPL-2.0
//! How much address space on-demand regions may span (`ib/odp.rs`). The
//! core keeps a page list for each (8 bytes per page of the region, mapped
//! or not, with no DMA device), in kernel memory charged to no one, so
//! registrations of address space alone could exhaust the machine: all
//! regions together span at most [`SPAN_PER_RAM`] times its memory. Of
//! that, one user (`user.rs`) spans at most an [`USER_SPAN_DIVISOR`]th,
//! over all devices together, so no user's regions keep the others' out.

/// All on-demand regions span at most this many times the machine's
/// memory: their page lists then cost at most 1/128 of it.
pub const SPAN_PER_RAM: u64 = 4;

/// One user's regions span at most this fraction of all: an eighth, as for
/// the PDs with a queue (`paging_user.rs`), so it takes eight users to fill
/// the module, and one user still spans half the machine's memory.
pub const USER_SPAN_DIVISOR: u64 = 8;

/// The bounds, in pages, for a machine of `ram_pages`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpanLimits {
    /// All regions, on all devices.
    pub total: usize,
    /// One user's regions, on all devices.
    pub user: usize,
}

impl SpanLimits {
    pub fn for_ram(ram_pages: u64) -> Self {
        let total = ram_pages.saturating_mul(SPAN_PER_RAM);
        let user = total / USER_SPAN_DIVISOR;
        let pages = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        Self { total: pages(total), user: pages(user) }
    }
}

/// The pages a region of `len` bytes at user address `addr` touches, for
/// pages of `page` bytes; `None` for an empty or wrapping range.
pub fn pages_spanned(addr: u64, len: u64, page: u64) -> Option<u64> {
    if len == 0 || page == 0 {
        return None;
    }
    let end = addr.checked_add(len)?;
    Some(end.div_ceil(page) - addr / page)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::quota::Quota;

    #[test]
    fn eight_users_fit_in_all() {
        for ram in [0, 1, 3, 7, 8, 511_000, 524_288, 1 << 40] {
            let l = SpanLimits::for_ram(ram);
            assert!(l.user * USER_SPAN_DIVISOR as usize <= l.total);
            // Less than a ninth user's share is left over.
            assert!(l.total - l.user * (USER_SPAN_DIVISOR as usize) < (USER_SPAN_DIVISOR as usize));
        }
        // 2 GiB of 4 KiB pages: 8 GiB in all, 1 GiB a user.
        let l = SpanLimits::for_ram(524_288);
        assert_eq!((l.total, l.user), (2_097_152, 262_144));
    }

    #[test]
    fn huge_memory_saturates() {
        let l = SpanLimits::for_ram(u64::MAX);
        assert_eq!(l.total, usize::try_from(u64::MAX).unwrap_or(usize::MAX));
        assert!(l.user < l.total);
    }

    #[test]
    fn pages_of_a_range() {
        assert_eq!(pages_spanned(0, 1, 4096), Some(1));
        assert_eq!(pages_spanned(4095, 2, 4096), Some(2));
        assert_eq!(pages_spanned(4096, 4096, 4096), Some(1));
        assert_eq!(pages_spanned(100, 9000, 4096), Some(3));
        assert_eq!(pages_spanned(5, 0, 4096), None);
        assert_eq!(pages_spanned(u64::MAX, 1, 4096), None);
        assert_eq!(pages_spanned(u64::MAX - 8191, 4096, 4096), Some(1));
        assert_eq!(pages_spanned(0, 4096, 0), None);
    }

    /// A user's take counts in its share and in all, and a refusal by
    /// either takes nothing from the other (`ib/odp.rs` takes the user's
    /// first, then all, and gives the user's back if all refuses).
    #[test]
    fn user_share_then_all() {
        let l = SpanLimits::for_ram(64);
        let all = Quota::new(0);
        let users = [Quota::new(0), Quota::new(0), Quota::new(0)];
        let take = |u: &Quota, n: usize| -> bool {
            let Some(mine) = u.try_take_within(n, l.user) else { return false };
            let Some(ours) = all.try_take_within(n, l.total) else { return false };
            mine.keep();
            ours.keep();
            true
        };
        assert!(take(&users[0], l.user));
        assert!(!take(&users[0], 1));
        assert!(take(&users[1], l.user));
        users[0].release(l.user);
        all.release(l.user);
        assert!(take(&users[0], l.user));
        assert_eq!(all.taken(), 2 * l.user);
        // All full: a user within its share is refused and keeps nothing.
        all.try_take_within(l.total - 2 * l.user, l.total).unwrap().keep();
        assert!(!take(&users[2], 1));
        assert_eq!(users[2].taken(), 0);
    }
}
