// SPDX-License-Identifier: GPL-2.0
//! Whether a PD's memory may fault. Receive lanes serve many QPs of every
//! user, so they must never wait on a page fault: a fault on an on-demand
//! paging region can wait as long as the memory behind it (a FUSE daemon
//! that does not answer, a slow disk). Once a PD has such a region, its
//! QPs' packets are taken from the lanes to each QP's own work
//! (`qp/own_rx.rs`), where a fault holds up that QP only.

#![deny(unsafe_code)]

use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

/// Shared by a PD, its QPs and SRQs (the receive side of a QP on an SRQ is
/// the SRQ's PD).
#[pin_data]
pub(crate) struct PdPaging {
    /// Read by the lanes for every packet; never cleared.
    on: AtomicBool,
    /// Held by [`PdPaging::start`] until the lanes are clear, so a second
    /// region of the PD waits for the first one's start.
    #[pin]
    started: Mutex<bool>,
}

impl PdPaging {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self { on: AtomicBool::new(false), started <- new_mutex!(false, "rroce_pd_paging") }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Whether the PD's QPs take their packets in their own work.
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Called before an on-demand region of the PD can be found by key:
    /// once it returns, no lane is processing a packet for a QP of the PD
    /// that it took before the switch, so none touches the region.
    /// Process context.
    pub(crate) fn start(&self) {
        let mut started = self.started.lock();
        if *started {
            return;
        }
        self.on.store(true, Ordering::Release);
        crate::rx::quiesce();
        *started = true;
    }
}
