// SPDX-License-Identifier: GPL-2.0
//! Access rights of memory regions, memory windows and QPs: the bits of
//! `enum ib_access_flags`, which uverbs carries too (`rust/ib/access.rs`
//! checks them against the kernel's at compile time).

pub const LOCAL_WRITE: u32 = 1 << 0;
pub const REMOTE_WRITE: u32 = 1 << 1;
pub const REMOTE_READ: u32 = 1 << 2;
pub const REMOTE_ATOMIC: u32 = 1 << 3;
pub const MW_BIND: u32 = 1 << 4;
/// Remote addresses count from the window's start, not the region's iova.
pub const ZERO_BASED: u32 = 1 << 5;
/// Memory mapped on demand rather than pinned (a property of the
/// registration, kept with its rights).
pub const ON_DEMAND: u32 = 1 << 6;
/// A peer may FLUSH the region for global visibility.
pub const FLUSH_GLOBAL: u32 = 1 << 8;
/// A peer may FLUSH the region for persistence.
pub const FLUSH_PERSISTENT: u32 = 1 << 9;
/// Hints a provider may ignore (`IB_ACCESS_OPTIONAL`: relaxed ordering
/// and the range after it).
pub const OPTIONAL: u32 = 0x3ff0_0000;

/// Rights that need the pages pinned for writing (the core's `ib_access_writable`).
pub const WRITABLE: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC | MW_BIND;
/// Rights a region may hold. Not FLUSH_PERSISTENT: rroce has no persistent
/// memory support (the core refuses it, the device not advertising it).
pub const SUPPORTED: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | MW_BIND | FLUSH_GLOBAL;
/// Rights a window can grant (persistence is never granted: no region
/// holds it). Local write is accepted and means nothing for a window.
pub const WINDOW: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC | FLUSH_GLOBAL;
