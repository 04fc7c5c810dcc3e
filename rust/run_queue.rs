// SPDX-License-Identifier: GPL-2.0
//! A queue of items with at most one runner: the shape every hand-over of
//! the receive path has (a QP's own work, the multicast dispatcher).
//! Producers push from any context but hard interrupts and learn whether
//! they must start the runner (queue its work item); the runner takes the
//! items oldest first, a budget at a time, and lets go only when nothing is
//! left (`proto::task`).

use crate::proto::task::{Finish, RunState, Schedule};
use kernel::alloc::KVVec;
use kernel::prelude::*;
use crate::net::{new_spinlock_bh, SpinLockBh};
use kernel::sync::{new_spinlock_irq, SpinLockIrq};

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

/// Items waiting for one runner; at most as many as its room, which is
/// allocated with it (charged to its creator) and never grows: softirq
/// allocates nothing.
#[pin_data]
pub(crate) struct RunQueue<T> {
    state: RunState,
    #[pin]
    pending: SpinLockIrq<KVVec<T>>,
    /// The items the runner took and has not processed yet: the runner
    /// takes the vector out while it runs (it may run in softirq, or sleep
    /// on a fault) and puts it back before it lets go, so only a stopped
    /// queue's [`Self::drain`] finds it here with items. `pending` and
    /// this trade their room.
    #[pin]
    batch: SpinLockBh<KVVec<T>>,
}

impl<T> RunQueue<T> {
    /// An empty queue with room for `depth` items. Process context.
    pub(crate) fn new(depth: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            state: RunState::new(),
            pending <- new_spinlock_irq!(KVVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?, "rroce_run_queue_pending"),
            batch <- new_spinlock_bh!(KVVec::with_capacity(depth, GFP_KERNEL_ACCOUNT)?, "rroce_run_queue_batch"),
        }? Error)
    }

    /// Adds an item; gives it back if the queue is full. Any context but
    /// hard interrupts.
    pub(crate) fn push(&self, item: T) -> Result<Schedule, T> {
        self.pending.lock().push_within_capacity(item).map_err(|e| e.0)?;
        Ok(self.state.schedule())
    }

    /// Asks for a run for work recorded elsewhere (flags the runner reads).
    pub(crate) fn schedule(&self) -> Schedule {
        self.state.schedule()
    }

    /// The runner: `other` does the work recorded outside the queue and
    /// says what part of the budget it used (0: it found none); `each` takes
    /// one item, for one unit. `settle` runs whenever the run is about to let go (nothing
    /// left, or out of budget): what the items of a batch have in common
    /// goes out once there (a cumulative acknowledgement). The one runner of
    /// the queue (`proto::task`): whoever [`Self::push`] or
    /// [`Self::schedule`] told to start one.
    pub(crate) fn run(
        &self,
        budget: usize,
        other: impl FnMut() -> usize,
        each: impl FnMut(T) -> usize,
        settle: impl FnMut(),
    ) -> RunEnd {
        let mut batch = core::mem::take(&mut *self.batch.lock());
        let end = self.run_batch(&mut batch, budget, other, each, settle);
        *self.batch.lock() = batch;
        end
    }

    fn run_batch(
        &self,
        batch: &mut KVVec<T>,
        budget: usize,
        mut other: impl FnMut() -> usize,
        mut each: impl FnMut(T) -> usize,
        mut settle: impl FnMut(),
    ) -> RunEnd {
        let mut done = 0usize;
        loop {
            if self.state.is_stopped() {
                return RunEnd::Stopped;
            }
            let used = other();
            let mut found = used > 0;
            done = done.saturating_add(used);
            if batch.is_empty() {
                core::mem::swap(&mut *self.pending.lock(), batch);
                // Oldest first: the batch is consumed from its end.
                batch.reverse();
            }
            while done < budget {
                let Some(item) = batch.pop() else { break };
                found = true;
                // What the item cost, at least one unit: a run does at
                // most `budget` units, however costly its items are.
                done = done.saturating_add(each(item).max(1));
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

    /// A runner owns the queue now (queued, running or armed).
    pub(crate) fn is_busy(&self) -> bool {
        self.state.is_busy()
    }

    /// Stops the queue for good: no runner starts from now on. The caller
    /// then waits for a runner still queued or running, and drains.
    pub(crate) fn stop(&self) {
        self.state.stop();
    }

    /// The items never taken, once stopped and no runner is left.
    pub(crate) fn drain(&self) -> (KVVec<T>, KVVec<T>) {
        let pending = core::mem::take(&mut *self.pending.lock());
        let batch = core::mem::take(&mut *self.batch.lock());
        (pending, batch)
    }
}
