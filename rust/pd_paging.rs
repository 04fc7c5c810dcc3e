// SPDX-License-Identifier: GPL-2.0
//! Whether a PD's memory may fault. Receive lanes, and the module's and the
//! system's shared workqueues, serve many QPs of every user, so they must
//! never wait on a page fault: a fault on an on-demand paging region can
//! wait as long as the memory behind it (a FUSE daemon that does not
//! answer, a slow disk). Once a PD has such a region, it gets a workqueue
//! of its own: its QPs' packets are taken from the lanes to each QP's own
//! work (`qp/own_rx.rs`), and their timers and send work run there too, so
//! a fault holds up that PD's QPs only (and no PD can use up the workers
//! of another's queue).

#![deny(unsafe_code)]

use crate::net::OwnedQueue;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex, SetOnce};

/// Shared by a PD, its QPs and SRQs (the receive side of a QP on an SRQ is
/// the SRQ's PD).
#[pin_data]
pub(crate) struct PdPaging {
    /// The PD's workqueue, set by [`PdPaging::start`] before `on`.
    queue: SetOnce<OwnedQueue>,
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
            try_pin_init!(Self {
                queue: SetOnce::new(),
                on: AtomicBool::new(false),
                started <- new_mutex!(false, "rroce_pd_paging"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Whether the PD's memory may fault.
    pub(crate) fn on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// The PD's own workqueue, once its memory may fault.
    pub(crate) fn queue(&self) -> Option<&kernel::workqueue::Queue> {
        if !self.on() {
            return None;
        }
        self.queue.as_ref().map(OwnedQueue::get)
    }

    /// Called before an on-demand region of the PD can be found by key:
    /// once it returns, no lane is processing a packet for a QP of the PD
    /// that it took before the switch, so none touches the region.
    /// Process context.
    pub(crate) fn start(&self) -> Result {
        let mut started = self.started.lock();
        if *started {
            return Ok(());
        }
        // Unbound: its work may sleep for long and ties up no per-CPU worker.
        if !self.queue.populate(OwnedQueue::new_unbound(c"rroce_pd")?) {
            // Only `start` populates it, under `started`.
            return Err(EINVAL);
        }
        self.on.store(true, Ordering::Release);
        crate::rx::quiesce();
        *started = true;
        Ok(())
    }

    /// Waits for the work of the PD's QPs queued before the call: packets
    /// they took from the lanes, timers and sends (`dereg_mr`, `dealloc_mw`).
    /// Process context, not from that work.
    pub(crate) fn flush(&self) {
        if let Some(q) = self.queue.as_ref() {
            q.flush();
        }
    }
}
