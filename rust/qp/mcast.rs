// SPDX-License-Identifier: GPL-2.0
//! UD multicast (IBTA 10.5): UD QPs attached to multicast groups by GID. A
//! datagram to a group's address and QPN 0xFFFFFF reaches every QP of the
//! device it arrives on attached to that group. A group's first attach
//! joins its IP multicast group on the netdev (IGMP or MLD), so the host
//! takes its packets, also those of its own devices (the IP stack loops
//! them back); its last detach leaves it. A user's QPs are in a bounded
//! number of a device's groups and join new ones at a bounded rate
//! (`proto::mcast_user`); refusals count in `mcast_join_refused`. A group
//! holds at most `MAX_MCAST_QP_ATTACH` QPs of one user, and more of
//! several (`MAX_MCAST_GRP_MEMBERS`).

use super::QpShared;
use crate::counters::{Counter, Counters};
use crate::net::NetDev;
use crate::proto::limits;
use crate::proto::mcast_user::{self, Refused, UserGroups};
use crate::proto::quota::Quota;
use crate::user::UserId;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

/// The destination QPN of multicast datagrams (IBTA 10.5.2.1).
pub(crate) const MULTICAST_QPN: u32 = 0x00ff_ffff;

/// A user's record, while it is in groups or its join budget is not full.
struct User {
    id: UserId,
    groups: UserGroups,
}

/// Users' records, by identity.
struct Users(KVec<User>);

impl Users {
    /// Counts `user` into one more group at `now_ns` (`join`: one its attach
    /// creates); a refusal counts in `counters`.
    fn take(&mut self, user: UserId, join: bool, now_ns: u64, counters: &Counters) -> Result {
        let at = match self.0.binary_search_by(|u| u.id.cmp(&user)) {
            Ok(at) => at,
            Err(_) => {
                // Records of users in no group, with a full budget, go
                // before a new one comes: one per user that holds something.
                self.0.retain(|u| !u.groups.is_idle(now_ns));
                self.0.reserve(1, GFP_KERNEL_ACCOUNT)?;
                let at = self.0.binary_search_by(|u| u.id.cmp(&user)).unwrap_or_else(|at| at);
                self.0
                    .insert_within_capacity(at, User { id: user, groups: UserGroups::default() })
                    .map_err(|_| ENOMEM)?;
                at
            }
        };
        let record = self.0.get_mut(at).ok_or(EINVAL)?;
        record.groups.take(join, now_ns).map_err(|why| {
            counters.inc(Counter::McastJoinRefused);
            match why {
                Refused::Bound => ENOMEM,
                Refused::Rate => EAGAIN,
            }
        })
    }

    /// Counts `user` out of a group.
    fn give_back(&mut self, user: UserId) {
        if let Ok(at) = self.0.binary_search_by(|u| u.id.cmp(&user)) {
            if let Some(u) = self.0.get_mut(at) {
                u.groups.give_back();
            }
        }
    }
}

/// A QP attached to a group, and how many attaches it made: the core
/// passes each (GID, LID) pair on, so one QP may attach to a group more
/// than once, and detaches as often.
struct Member {
    qp: Arc<QpShared>,
    attaches: u32,
}

/// A group and the QPs attached to it.
struct Group {
    mgid: [u8; 16],
    members: KVec<Member>,
}

/// What the table's lock protects. The receive path holds it while it
/// delivers, so nothing slow (RTNL) is ever taken under it.
struct Groups {
    /// Sorted by GID: a datagram finds its group in log(n) steps whatever
    /// the number of groups.
    groups: KVec<Group>,
}

/// The multicast groups of a device.
#[pin_data]
pub(crate) struct McastTable {
    #[pin]
    groups: Mutex<Groups>,
    /// Serialises attaches and detaches, so IP joins and leaves happen in
    /// the order of the table's changes, outside its lock; holds the users'
    /// records, which only they use.
    #[pin]
    changes: Mutex<Users>,
    /// Members over all groups, at most `MAX_TOTAL_MCAST_QP_ATTACH`: a
    /// slot per member, taken when it attaches and given back when it
    /// leaves (both under `changes`).
    attached: Quota,
}

impl Groups {
    /// Where group `mgid` is, or where it would go.
    fn find(&self, mgid: &[u8; 16]) -> core::result::Result<usize, usize> {
        self.groups.binary_search_by(|gr| gr.mgid.cmp(mgid))
    }
}

impl Group {
    /// Whether a QP of `user` is attached.
    fn has_user(&self, user: UserId) -> bool {
        self.members.iter().any(|m| m.qp.mcast_user == Some(user))
    }
}

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            groups <- new_mutex!(Groups { groups: KVec::new() }, "rroce_mcast"),
            changes <- new_mutex!(Users(KVec::new()), "rroce_mcast_changes"),
            attached: Quota::new(limits::MAX_TOTAL_MCAST_QP_ATTACH as usize),
        })
    }

    /// Attaches `qp` to group `mgid`, joining the group on `ndev` if it is
    /// new. A refusal for the bounds or the join rate counts in `counters`.
    pub(crate) fn attach(&self, ndev: &NetDev, qp: Arc<QpShared>, mgid: &[u8; 16], counters: &Counters) -> Result {
        let mut users = self.changes.lock();
        let user = qp.mcast_user;
        let now = crate::net::ktime_ns();
        let slot = {
            let mut g = self.groups.lock();
            if let Ok(at) = g.find(mgid) {
                let group = &mut g.groups[at];
                if let Some(m) = group.members.iter_mut().find(|m| m.qp.qpn() == qp.qpn()) {
                    m.attaches = m.attaches.checked_add(1).ok_or(ENOMEM)?;
                    return Ok(());
                }
                // A user's share of the group's places, so one user
                // cannot fill a well-known group.
                let of_user = group.members.iter().filter(|m| m.qp.mcast_user == user).count();
                if !mcast_user::member_fits(group.members.len(), of_user) {
                    return Err(ENOMEM);
                }
                let slot = self.attached.try_take(1).ok_or(ENOMEM)?;
                // The user's first QP in the group takes one of its groups.
                let counted = match user {
                    Some(u) if !group.has_user(u) => {
                        users.take(u, false, now, counters)?;
                        Some(u)
                    }
                    _ => None,
                };
                if let Err(e) = group.members.push(Member { qp, attaches: 1 }, GFP_KERNEL_ACCOUNT) {
                    if let Some(u) = counted {
                        users.give_back(u);
                    }
                    return Err(e.into());
                }
                slot.keep();
                return Ok(());
            }
            if g.groups.len() >= limits::MAX_MCAST_GRP as usize {
                counters.inc(Counter::McastJoinRefused);
                return Err(ENOMEM);
            }
            let slot = self.attached.try_take(1).ok_or(ENOMEM)?;
            g.groups.reserve(1, GFP_KERNEL_ACCOUNT)?;
            slot
        };
        // A new group: one of the user's groups, and a join of its budget.
        if let Some(u) = user {
            users.take(u, true, now, counters)?;
        }
        let joined = (|| {
            let mut members = KVec::new();
            members.push(Member { qp, attaches: 1 }, GFP_KERNEL_ACCOUNT)?;
            ndev.multicast_group(mgid, true)?;
            let mut g = self.groups.lock();
            // Room was reserved above, and only attaches (serialised) add groups.
            let at = g.find(mgid).unwrap_or_else(|at| at);
            if g.groups.insert_within_capacity(at, Group { mgid: *mgid, members }).is_err() {
                drop(g);
                let _ = ndev.multicast_group(mgid, false);
                return Err(ENOMEM);
            }
            Ok(())
        })();
        match (&joined, user) {
            (Ok(()), _) => slot.keep(),
            (Err(_), Some(u)) => users.give_back(u),
            (Err(_), None) => {}
        }
        joined
    }

    /// Undoes one attach of `qp` to group `mgid`; the group's last member
    /// leaving leaves the group on `ndev`.
    pub(crate) fn detach(&self, ndev: &NetDev, qp: &QpShared, mgid: &[u8; 16]) -> Result {
        let mut users = self.changes.lock();
        let emptied = {
            let mut g = self.groups.lock();
            let at = g.find(mgid).map_err(|_| EINVAL)?;
            let group = &mut g.groups[at];
            let i = group.members.iter().position(|m| m.qp.qpn() == qp.qpn()).ok_or(EINVAL)?;
            group.members[i].attaches -= 1;
            if group.members[i].attaches > 0 {
                return Ok(());
            }
            // Dropping the reference cannot free the QP: the core holds it.
            drop(group.members.remove(i).map_err(|_| EINVAL)?);
            if let Some(u) = qp.mcast_user {
                if !group.has_user(u) {
                    users.give_back(u);
                }
            }
            let emptied = group.members.is_empty();
            if emptied {
                drop(g.groups.remove(at).map_err(|_| EINVAL)?);
            }
            self.attached.release(1);
            emptied
        };
        if emptied {
            // The group is gone here whatever the IP stack says.
            let _ = ndev.multicast_group(mgid, false);
        }
        Ok(())
    }

    /// Takes a QP being destroyed out of every group (the core detaches
    /// first, so normally there is nothing to do), leaving groups it was
    /// the last member of.
    pub(crate) fn forget(&self, ndev: Option<&NetDev>, qp: &QpShared) {
        let mut users = self.changes.lock();
        let mut left: KVec<[u8; 16]> = KVec::new();
        {
            let mut g = self.groups.lock();
            let mut removed = 0;
            for group in g.groups.iter_mut() {
                let before = group.members.len();
                group.members.retain(|m| m.qp.qpn() != qp.qpn());
                let gone = before - group.members.len();
                removed += gone;
                if let Some(u) = qp.mcast_user {
                    if gone > 0 && !group.has_user(u) {
                        users.give_back(u);
                    }
                }
                if group.members.is_empty() {
                    // Best effort: without memory the membership stays.
                    let _ = left.push(group.mgid, GFP_KERNEL);
                }
            }
            g.groups.retain(|gr| !gr.members.is_empty());
            self.attached.release(removed);
        }
        if let Some(ndev) = ndev {
            for mgid in left.iter() {
                let _ = ndev.multicast_group(mgid, false);
            }
        }
    }

    /// Runs `deliver` on every QP attached to group `mgid`; returns how
    /// many there were.
    pub(crate) fn for_each_attached(&self, mgid: &[u8; 16], mut deliver: impl FnMut(&Arc<QpShared>)) -> usize {
        let g = self.groups.lock();
        let Ok(at) = g.find(mgid) else { return 0 };
        let group = &g.groups[at];
        for m in group.members.iter() {
            deliver(&m.qp);
        }
        group.members.len()
    }
}
