// SPDX-License-Identifier: GPL-2.0
//! Access rights of memory regions, memory windows and QPs (`enum
//! ib_access_flags`, the values uverbs carries too).

use crate::sys;

// The memory window rules in `proto` use the same values.
const _: () = {
    use crate::proto::mw::access as proto;
    assert!(proto::LOCAL_WRITE == LOCAL_WRITE && proto::REMOTE_WRITE == REMOTE_WRITE);
    assert!(proto::REMOTE_READ == REMOTE_READ && proto::REMOTE_ATOMIC == REMOTE_ATOMIC);
    assert!(proto::MW_BIND == MW_BIND && proto::FLUSH_GLOBAL == FLUSH_GLOBAL);
    assert!(proto::ZERO_BASED == sys::ib_access_flags_IB_ZERO_BASED && proto::OPTIONAL == OPTIONAL);
};

pub(crate) const LOCAL_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_LOCAL_WRITE;
pub(crate) const REMOTE_WRITE: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_WRITE;
pub(crate) const REMOTE_READ: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_READ;
pub(crate) const REMOTE_ATOMIC: u32 = sys::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
pub(crate) const MW_BIND: u32 = sys::ib_access_flags_IB_ACCESS_MW_BIND;
/// A peer may FLUSH the region for global visibility.
pub(crate) const FLUSH_GLOBAL: u32 = sys::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL;
/// A peer may FLUSH the region for persistence.
pub(crate) const FLUSH_PERSISTENT: u32 = sys::ib_access_flags_IB_ACCESS_FLUSH_PERSISTENT;
/// Memory mapped on demand rather than pinned (a property of the
/// registration, kept with its rights).
pub(crate) const ON_DEMAND: u32 = sys::ib_access_flags_IB_ACCESS_ON_DEMAND;
/// Optional hints a provider may ignore (relaxed ordering and the range after it).
pub(crate) const OPTIONAL: u32 = sys::ib_access_flags_IB_ACCESS_OPTIONAL;
/// Rights that need the pages pinned for writing (the core's `ib_access_writable`).
pub(crate) const WRITABLE: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND;
