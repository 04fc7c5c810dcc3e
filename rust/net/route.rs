// SPDX-License-Identifier: GPL-2.0
//! A connected QP's route to its peer, kept per CPU by the kernel's
//! `dst_cache` (as UDP tunnels keep theirs): its packets skip the route
//! lookup until the routing tables change or the owner resets it. Beside
//! it, that the peer is not a local address, which holds until the
//! namespace's addresses or routes change (`csrc/ip.c`).

use crate::sys;
use core::ptr::NonNull;
use kernel::prelude::*;

/// The routes one sender keeps; [`super::TxSkb::route4`] and `route6` use and
/// fill it.
pub(crate) struct RouteCache(NonNull<sys::rroce_route_cache>);

// SAFETY: the kernel's dst_cache is made for concurrent use from any CPU
// (each CPU uses its own entry, with softirqs off, which the helpers
// ensure); the pointer is owned and freed once, in `drop`.
unsafe impl Send for RouteCache {}
// SAFETY: as above; shared use is lookups, fills and resets, all of which
// the kernel allows concurrently.
unsafe impl Sync for RouteCache {}

impl RouteCache {
    /// An empty cache, charged to the caller. Process context.
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: allocates and initialises a cache, or returns null.
        NonNull::new(unsafe { sys::rroce_route_cache_new() }).map(Self).ok_or(ENOMEM)
    }

    /// Forgets the routes kept: the next packet looks its route up again.
    /// For an owner whose addresses or interface changed. Any context.
    pub(crate) fn reset(&self) {
        // SAFETY: the cache is live (owned by `self`); a reset only marks
        // the entries stale, which concurrent users allow.
        unsafe { sys::rroce_route_cache_reset(self.0.as_ptr()) }
    }

    /// The cache for the C helpers, or null for none.
    pub(super) fn ptr_or_null(route: Option<&Self>) -> *mut sys::rroce_route_cache {
        route.map_or(core::ptr::null_mut(), |r| r.0.as_ptr())
    }
}

impl Drop for RouteCache {
    fn drop(&mut self) {
        // SAFETY: owned, and no sender uses it any more (it holds `&self`
        // while it sends); this releases the routes it held and frees it.
        unsafe { sys::rroce_route_cache_free(self.0.as_ptr()) }
    }
}
