// SPDX-License-Identifier: GPL-2.0
//! UD multicast (IBTA 10.5): UD QPs attached to multicast groups by GID. A
//! datagram to a group's address and QPN 0xFFFFFF reaches every QP of the
//! device it arrives on attached to that group. A group's first attach
//! joins its IP multicast group on the netdev (IGMP or MLD), so the host
//! takes its packets, also those of its own devices (the IP stack loops
//! them back); its last detach leaves it.

use super::QpShared;
use crate::net::NetDev;
use crate::proto::limits;
use crate::proto::quota::Quota;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

/// The destination QPN of multicast datagrams (IBTA 10.5.2.1).
pub(crate) const MULTICAST_QPN: u32 = 0x00ff_ffff;

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
    /// the order of the table's changes, outside its lock.
    #[pin]
    changes: Mutex<()>,
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

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            groups <- new_mutex!(Groups { groups: KVec::new() }, "rroce_mcast"),
            changes <- new_mutex!((), "rroce_mcast_changes"),
            attached: Quota::new(limits::MAX_TOTAL_MCAST_QP_ATTACH as usize),
        })
    }

    /// Attaches `qp` to group `mgid`, joining the group on `ndev` if it is new.
    pub(crate) fn attach(&self, ndev: &NetDev, qp: Arc<QpShared>, mgid: &[u8; 16]) -> Result {
        let _changes = self.changes.lock();
        let slot = {
            let mut g = self.groups.lock();
            if let Ok(at) = g.find(mgid) {
                let group = &mut g.groups[at];
                if let Some(m) = group.members.iter_mut().find(|m| m.qp.qpn() == qp.qpn()) {
                    m.attaches = m.attaches.checked_add(1).ok_or(ENOMEM)?;
                    return Ok(());
                }
                if group.members.len() >= limits::MAX_MCAST_QP_ATTACH as usize {
                    return Err(ENOMEM);
                }
                let slot = self.attached.try_take(1).ok_or(ENOMEM)?;
                group.members.push(Member { qp, attaches: 1 }, GFP_KERNEL_ACCOUNT)?;
                slot.keep();
                return Ok(());
            }
            if g.groups.len() >= limits::MAX_MCAST_GRP as usize {
                return Err(ENOMEM);
            }
            let slot = self.attached.try_take(1).ok_or(ENOMEM)?;
            g.groups.reserve(1, GFP_KERNEL_ACCOUNT)?;
            slot
        };
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
        slot.keep();
        Ok(())
    }

    /// Undoes one attach of `qp` to group `mgid`; the group's last member
    /// leaving leaves the group on `ndev`.
    pub(crate) fn detach(&self, ndev: &NetDev, qp: &QpShared, mgid: &[u8; 16]) -> Result {
        let _changes = self.changes.lock();
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
        let _changes = self.changes.lock();
        let mut left: KVec<[u8; 16]> = KVec::new();
        {
            let mut g = self.groups.lock();
            let mut removed = 0;
            for group in g.groups.iter_mut() {
                let before = group.members.len();
                group.members.retain(|m| m.qp.qpn() != qp.qpn());
                removed += before - group.members.len();
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
