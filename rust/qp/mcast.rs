// SPDX-License-Identifier: GPL-2.0
//! UD multicast (IBTA 10.5): UD QPs attached to multicast groups by GID. A
//! datagram to a group's address and QPN 0xFFFFFF reaches every QP of the
//! device it arrives on attached to that group. A group's first attach
//! joins its IP multicast group on the netdev (IGMP or MLD), so the host
//! takes its packets, also those of its own devices (the IP stack loops
//! them back); its last detach leaves it.

#![deny(unsafe_code)]

use super::QpShared;
use crate::net::NetDev;
use crate::proto::limits;
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

/// The destination QPN of multicast datagrams (IBTA 10.5.2.1).
pub(crate) const MULTICAST_QPN: u32 = 0x00ff_ffff;

/// A group and the QPs attached to it.
struct Group {
    mgid: [u8; 16],
    qps: KVec<Arc<QpShared>>,
}

/// What the table's lock protects.
struct Groups {
    groups: KVec<Group>,
    /// Attachments over all groups.
    attached: u32,
}

/// The multicast groups of a device.
#[pin_data]
pub(crate) struct McastTable {
    #[pin]
    groups: Mutex<Groups>,
}

impl McastTable {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            groups <- new_mutex!(Groups { groups: KVec::new(), attached: 0 }, "rroce_mcast"),
        })
    }

    /// Attaches `qp` to group `mgid` (again: nothing changes), joining the
    /// group on `ndev` if it is new.
    pub(crate) fn attach(&self, ndev: &NetDev, qp: Arc<QpShared>, mgid: &[u8; 16]) -> Result {
        let mut g = self.groups.lock();
        if let Some(group) = g.groups.iter().position(|gr| gr.mgid == *mgid) {
            if g.groups[group].qps.iter().any(|q| q.qpn == qp.qpn) {
                return Ok(());
            }
            if g.groups[group].qps.len() >= limits::MAX_MCAST_QP_ATTACH as usize || g.attached >= limits::MAX_TOTAL_MCAST_QP_ATTACH {
                return Err(ENOMEM);
            }
            g.groups[group].qps.push(qp, GFP_KERNEL_ACCOUNT)?;
        } else {
            if g.groups.len() >= limits::MAX_MCAST_GRP as usize || g.attached >= limits::MAX_TOTAL_MCAST_QP_ATTACH {
                return Err(ENOMEM);
            }
            let mut qps = KVec::new();
            qps.push(qp, GFP_KERNEL_ACCOUNT)?;
            g.groups.reserve(1, GFP_KERNEL_ACCOUNT)?;
            ndev.multicast_group(mgid, true)?;
            // Room was reserved: this push does not allocate, and cannot fail.
            g.groups.push_within_capacity(Group { mgid: *mgid, qps }).map_err(|_| ENOMEM)?;
        }
        g.attached += 1;
        Ok(())
    }

    /// Detaches `qp` from group `mgid`; the last one leaves the group on `ndev`.
    pub(crate) fn detach(&self, ndev: &NetDev, qp: &QpShared, mgid: &[u8; 16]) -> Result {
        let mut g = self.groups.lock();
        let group = g.groups.iter().position(|gr| gr.mgid == *mgid).ok_or(EINVAL)?;
        let at = g.groups[group].qps.iter().position(|q| q.qpn == qp.qpn).ok_or(EINVAL)?;
        // Dropping the reference cannot free the QP: the core holds it.
        drop(g.groups[group].qps.remove(at).map_err(|_| EINVAL)?);
        g.attached -= 1;
        if g.groups[group].qps.is_empty() {
            drop(g.groups.remove(group).map_err(|_| EINVAL)?);
            // The group is gone here whatever the IP stack says.
            let _ = ndev.multicast_group(mgid, false);
        }
        Ok(())
    }

    /// Runs `deliver` on every QP attached to group `mgid`; returns how
    /// many there were.
    pub(crate) fn for_each_attached(&self, mgid: &[u8; 16], mut deliver: impl FnMut(&QpShared)) -> usize {
        let g = self.groups.lock();
        let Some(group) = g.groups.iter().find(|gr| gr.mgid == *mgid) else { return 0 };
        for q in group.qps.iter() {
            deliver(q);
        }
        group.qps.len()
    }
}
