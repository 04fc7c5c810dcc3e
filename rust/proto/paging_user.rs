// SPDX-License-Identifier: GPL-2.0
//! What one user may hold of the PDs whose memory may fault
//! (`pd_paging.rs`): each has a workqueue of its own, whose workers faults
//! can hold up, so there are at most [`MAX_PAGING_PDS`] over the whole
//! module, and one user (`user.rs`) has at most [`USER_MAX_PAGING_PDS`] of
//! them over all devices together: a share per device would let a user
//! given eight devices take them all.

/// PDs with a queue of their own, on all devices.
pub const MAX_PAGING_PDS: usize = 512;
/// Of those, one user's, on all devices together: an eighth, so one user
/// leaves the others room.
pub const USER_MAX_PAGING_PDS: usize = MAX_PAGING_PDS / 8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::quota::Quota;

    /// A user's count is a [`Quota`] of its share (`pd_paging.rs`).
    #[test]
    fn share_bounded_and_given_back() {
        let u = Quota::new(USER_MAX_PAGING_PDS);
        for _ in 0..USER_MAX_PAGING_PDS {
            u.try_take(1).expect("within the share").keep();
        }
        assert!(u.try_take(1).is_none());
        // A refusal counts nothing: one given back makes room for one.
        u.release(1);
        assert_ne!(u.taken(), 0);
        u.try_take(1).expect("room for one").keep();
        assert!(u.try_take(1).is_none());
        u.release(USER_MAX_PAGING_PDS - 1);
        assert_ne!(u.taken(), 0);
        u.release(1);
        assert_eq!(u.taken(), 0);
        // One too many given back stays at none.
        u.release(1);
        assert_eq!(u.taken(), 0);
        assert!(u.try_take(1).is_some());
    }

    #[test]
    fn eight_users_fill_the_module() {
        assert_eq!(USER_MAX_PAGING_PDS * 8, MAX_PAGING_PDS);
    }
}
