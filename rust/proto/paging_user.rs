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

/// How many PDs with a queue one user has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserPagingPds {
    pds: usize,
}

impl UserPagingPds {
    /// The count of a user with its first PD with a queue.
    pub const fn first() -> Self {
        Self { pds: 1 }
    }

    /// Counts one more PD for the user, if its share allows it.
    pub fn take(&mut self) -> bool {
        if self.pds >= USER_MAX_PAGING_PDS {
            return false;
        }
        self.pds += 1;
        true
    }

    /// Counts one out; returns whether the user has none left (its record
    /// may go). Saturating: a bug never wraps to a full count.
    pub fn give_back(&mut self) -> bool {
        self.pds = self.pds.saturating_sub(1);
        self.pds == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_bounded_and_given_back() {
        let mut u = UserPagingPds::first();
        for _ in 1..USER_MAX_PAGING_PDS {
            assert!(u.take());
        }
        assert!(!u.take());
        // A refusal counts nothing: one given back makes room for one.
        assert!(!u.give_back());
        assert!(u.take());
        assert!(!u.take());
        for _ in 1..USER_MAX_PAGING_PDS {
            assert!(!u.give_back());
        }
        assert!(u.give_back());
        // One too many given back stays at none.
        assert!(u.give_back());
        assert_eq!(u, UserPagingPds::default());
        assert!(u.take());
    }

    #[test]
    fn eight_users_fill_the_module() {
        assert_eq!(USER_MAX_PAGING_PDS * 8, MAX_PAGING_PDS);
    }
}
