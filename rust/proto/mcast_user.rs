// SPDX-License-Identifier: GPL-2.0
//! What one user may hold of a device's multicast groups. A group's first
//! attach joins its IP group on the netdev (IGMP or MLD) under the network
//! stack's global lock (RTNL), and a device has room for
//! [`limits::MAX_MCAST_GRP`] groups: one user could fill it, or join and
//! leave in a loop and hold that lock for everyone. So a user is in at
//! most [`limits::MAX_MCAST_GRP_PER_USER`] groups of a device at a time
//! (attached to them by one of its QPs or more), and gets a budget of
//! [`JOIN_BURST`] joins at once, refilled at [`JOINS_PER_SEC`] (a
//! generic cell rate algorithm: one theoretical arrival time, no timer).
//! Within a group, a user's QPs take at most [`limits::MAX_MCAST_QP_ATTACH`]
//! of its [`limits::MAX_MCAST_GRP_MEMBERS`] places, so one user cannot
//! fill a well-known group and keep the others out.

use crate::proto::limits;

/// Joins one user may make back to back.
pub const JOIN_BURST: u64 = 64;
/// Joins one user may make per second after its burst.
pub const JOINS_PER_SEC: u64 = 64;
/// The time one join uses of the budget.
const JOIN_NS: u64 = 1_000_000_000 / JOINS_PER_SEC;

/// One user's join budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JoinRate {
    /// When the budget is full again (monotonic ns); in the past: full.
    full_at_ns: u64,
}

impl JoinRate {
    /// Takes one join from the budget at `now_ns`, if it has one left.
    pub fn try_join(&mut self, now_ns: u64) -> bool {
        let from = self.full_at_ns.max(now_ns);
        // A full budget ends JOIN_BURST joins past now.
        if from - now_ns > (JOIN_BURST - 1) * JOIN_NS {
            return false;
        }
        self.full_at_ns = from.saturating_add(JOIN_NS);
        true
    }

    /// Whether the budget is full at `now_ns` (the record may be
    /// forgotten: a new one is the same).
    pub fn is_full(&self, now_ns: u64) -> bool {
        self.full_at_ns <= now_ns
    }
}

/// Why a user's attach was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// The user is in as many groups as it may be.
    Bound,
    /// The user joined too many groups lately.
    Rate,
}

/// One user's share of a device's groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserGroups {
    /// Groups the user is attached to.
    groups: u32,
    joins: JoinRate,
}

impl UserGroups {
    /// Counts the user into one more group, at `now_ns`: one that exists
    /// (`join` false) or one its attach creates, which joins the IP group.
    pub fn take(&mut self, join: bool, now_ns: u64) -> Result<(), Refused> {
        if self.groups >= limits::MAX_MCAST_GRP_PER_USER {
            return Err(Refused::Bound);
        }
        if join && !self.joins.try_join(now_ns) {
            return Err(Refused::Rate);
        }
        self.groups += 1;
        Ok(())
    }

    /// Counts the user out of a group (its last QP in it left).
    /// Saturating: a bug never wraps to a full count.
    pub fn give_back(&mut self) {
        self.groups = self.groups.saturating_sub(1);
    }

    /// Whether the record holds nothing a new one would not (no group, a
    /// full join budget) and may be forgotten.
    pub fn is_idle(&self, now_ns: u64) -> bool {
        self.groups == 0 && self.joins.is_full(now_ns)
    }
}

/// Whether one more QP of a user may attach to a group that has `members`
/// QPs, `of_user` of them the user's.
pub fn member_fits(members: usize, of_user: usize) -> bool {
    of_user < limits::MAX_MCAST_QP_ATTACH as usize && members < limits::MAX_MCAST_GRP_MEMBERS as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_places_per_user_and_in_all() {
        let per_user = limits::MAX_MCAST_QP_ATTACH as usize;
        let all = limits::MAX_MCAST_GRP_MEMBERS as usize;
        assert!(member_fits(0, 0));
        assert!(member_fits(per_user - 1, per_user - 1));
        // A user with its share is refused; another user is not.
        assert!(!member_fits(per_user, per_user));
        assert!(member_fits(per_user, 0));
        // Nor is anyone once the group is full.
        assert!(member_fits(all - 1, 0));
        assert!(!member_fits(all, 0));
        assert!(!member_fits(usize::MAX, 0));
        // Sixteen users' shares fill a group.
        assert_eq!(all, per_user * 16);
    }

    #[test]
    fn user_bound_rate_and_idle() {
        let mut u = UserGroups::default();
        let mut t = 0;
        assert!(u.is_idle(t));
        // Joins paced at the rate never meet it; the bound stops them.
        for _ in 0..limits::MAX_MCAST_GRP_PER_USER {
            assert_eq!(u.take(true, t), Ok(()));
            t += JOIN_NS;
        }
        assert_eq!(u.take(true, t), Err(Refused::Bound));
        assert_eq!(u.take(false, t), Err(Refused::Bound));
        u.give_back();
        // An existing group uses no join.
        assert_eq!(u.take(false, t), Ok(()));
        for _ in 0..limits::MAX_MCAST_GRP_PER_USER + 1 {
            u.give_back();
        }
        assert!(!u.is_idle(t - JOIN_NS));
        assert!(u.is_idle(t));
        // A burst beyond the budget is refused for its rate, and the
        // refusal counts no group.
        for _ in 0..JOIN_BURST {
            assert_eq!(u.take(true, t), Ok(()));
        }
        assert_eq!(u.take(true, t), Err(Refused::Rate));
        assert_eq!(u.take(false, t), Ok(()));
        assert_eq!(u.groups, JOIN_BURST as u32 + 1);
    }

    #[test]
    fn burst_then_rate() {
        let mut r = JoinRate::default();
        let t = 5_000_000_000;
        assert!(r.is_full(t));
        for _ in 0..JOIN_BURST {
            assert!(r.try_join(t));
        }
        assert!(!r.try_join(t));
        assert!(!r.is_full(t));
        // One join's time later, one more; not two.
        assert!(r.try_join(t + JOIN_NS));
        assert!(!r.try_join(t + JOIN_NS));
        // A refused join uses nothing: one second refills JOINS_PER_SEC.
        let later = t + JOIN_NS + 1_000_000_000;
        for _ in 0..JOINS_PER_SEC {
            assert!(r.try_join(later));
        }
        assert!(!r.try_join(later));
        assert!(r.is_full(later + JOIN_BURST * JOIN_NS));
    }

    #[test]
    fn clock_at_zero_and_a_clock_going_back() {
        let mut r = JoinRate::default();
        assert!(r.try_join(0));
        // An earlier reading than the last (another CPU's clock) counts as
        // the later one: no panic, no extra budget.
        let mut r = JoinRate::default();
        for _ in 0..JOIN_BURST {
            assert!(r.try_join(1_000_000_000));
        }
        assert!(!r.try_join(999_000_000));
        assert!(!r.try_join(0));
    }
}
