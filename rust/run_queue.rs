// SPDX-License-Identifier: GPL-2.0
//! A queue of items with at most one runner: the shape every hand-over of
//! the receive path has (a QP's own work, the multicast dispatcher).
//! Producers push from any context but hard interrupts and learn whether
//! they must start the runner (queue its work item); the runner takes the
//! items oldest first, a budget at a time, and lets go only when nothing is
//! left (`proto::task`).

#![deny(unsafe_code)]

use crate::proto::task::{Finish, RunState, Schedule};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{new_mutex, new_spinlock_irq, Mutex, SpinLockIrq};

/// How a run ended.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// Nothing left: the queue is idle, the next push starts a runner.
    Idle,
    /// The budget is used up with work left: the queue stays busy, and the
    /// caller must queue the runner again.
    OutOfBudget,
    /// The queue was stopped: nothing runs any more.
    Stopped,
}

/// Items waiting for one runner; at most `depth` of them.
#[pin_data]
pub(crate) struct RunQueue<T> {
    state: RunState,
    depth: usize,
    #[pin]
    pending: SpinLockIrq<KVec<T>>,
    /// The items the runner took; only the runner (and, once stopped,
    /// [`Self::drain`]) touches it.
    #[pin]
    batch: Mutex<KVec<T>>,
}

impl<T> RunQueue<T> {
    /// An empty queue with room for `room` items allocated now (charged to
    /// the caller); beyond that its room grows as items come, without
    /// sleeping, up to `depth`.
    pub(crate) fn new(depth: usize, room: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            state: RunState::new(),
            depth,
            pending <- new_spinlock_irq!(KVec::with_capacity(room, GFP_KERNEL_ACCOUNT)?, "rroce_run_queue_pending"),
            batch <- new_mutex!(KVec::with_capacity(room, GFP_KERNEL_ACCOUNT)?, "rroce_run_queue_batch"),
        }? Error)
    }

    /// Adds an item; gives it back if the queue is full or its room cannot
    /// grow without sleeping. Any context but hard interrupts.
    pub(crate) fn push(&self, item: T) -> Result<Schedule, T> {
        {
            let mut pending = self.pending.lock();
            if pending.len() >= self.depth {
                return Err(item);
            }
            // Grows (doubling) without sleeping: a failure is a drop the
            // caller counts, as a full queue is.
            if pending.reserve(1, GFP_NOWAIT | __GFP_NOWARN).is_err() {
                return Err(item);
            }
            if let Err(e) = pending.push_within_capacity(item) {
                return Err(e.0);
            }
        }
        Ok(self.state.schedule())
    }

    /// Asks for a run for work recorded elsewhere (flags the runner reads).
    pub(crate) fn schedule(&self) -> Schedule {
        self.state.schedule()
    }

    /// The runner: `other` does the work recorded outside the queue and
    /// says whether it found any; `each` takes one item. Both count against
    /// `budget`. `settle` runs whenever the run is about to let go (nothing
    /// left, or out of budget): what the items of a batch have in common
    /// goes out once there (a cumulative acknowledgement). Process context.
    pub(crate) fn run(
        &self,
        budget: usize,
        mut other: impl FnMut() -> bool,
        mut each: impl FnMut(T),
        mut settle: impl FnMut(),
    ) -> RunEnd {
        let mut batch = self.batch.lock();
        let mut done = 0usize;
        loop {
            if self.state.is_stopped() {
                return RunEnd::Stopped;
            }
            let mut found = other();
            if found {
                done += 1;
            }
            if batch.is_empty() {
                core::mem::swap(&mut *self.pending.lock(), &mut *batch);
                // Oldest first: the batch is consumed from its end.
                batch.reverse();
            }
            while done < budget {
                let Some(item) = batch.pop() else { break };
                found = true;
                each(item);
                done += 1;
            }
            if done >= budget {
                settle();
                return RunEnd::OutOfBudget;
            }
            if !found {
                // What `settle` gives the queue (a packet to a QP connected
                // to itself) arms it, so the run looks again.
                settle();
                if self.state.finish() == Finish::Idle {
                    return RunEnd::Idle;
                }
            }
        }
    }

    /// Stops the queue for good: no runner starts from now on. The caller
    /// then waits for a runner still queued or running, and drains.
    pub(crate) fn stop(&self) {
        self.state.stop();
    }

    /// The items never taken, once stopped and no runner is left.
    pub(crate) fn drain(&self) -> (KVec<T>, KVec<T>) {
        let pending = core::mem::take(&mut *self.pending.lock());
        let batch = core::mem::take(&mut *self.batch.lock());
        (pending, batch)
    }
}
