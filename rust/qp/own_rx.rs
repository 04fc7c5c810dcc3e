// SPDX-License-Identifier: GPL-2.0
//! A QP's own work, for QPs whose memory may fault: a QP of a PD with
//! on-demand paging regions (`pd_paging.rs`) gets its packets from the
//! lanes here, in order, and processes them on its PD's workqueue, where a
//! page fault that waits holds up no other user. A QP created once its PD
//! (or receive PD) has that queue runs its retry timer, pacing and send
//! work there too, off the module's and the system's shared ones; one
//! created before keeps them where they were, so no work item of a QP is
//! ever queued on two queues (cancelling it would not wait for both).

#![deny(unsafe_code)]

use super::*;
use core::sync::atomic::{AtomicU8, AtomicUsize};
use kernel::workqueue::Queue;
use crate::pd_paging::PdPaging;

/// Packets waiting for one QP's own work; more are dropped (and counted),
/// as a lane's are, until the work catches up.
const DEPTH: usize = 128;
/// Packets waiting in all QPs' own work together: each waits as long as a
/// fault of its QP, so the memory they hold has a bound of its own, that of
/// the lanes.
const TOTAL_DEPTH: usize = 8192;
/// Packets one run processes before it queues itself again.
const RUN_BUDGET: usize = 64;

/// Packets handed over and not yet processed or dropped, of every QP.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// A packet handed over by a lane (one of [`WAITING`]).
pub(super) struct Deferred {
    pkt: RxPacket,
    /// A copy of a multicast datagram, for this QP as one attached to its group.
    multicast: bool,
}

impl Deferred {
    /// Counts the packet in, if the total allows it.
    fn new(pkt: RxPacket, multicast: bool) -> Result<Self, RxPacket> {
        match WAITING.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < TOTAL_DEPTH).then_some(n + 1)) {
            Ok(_) => Ok(Self { pkt, multicast }),
            Err(_) => Err(pkt),
        }
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Which PD's queue the QP's work runs on, chosen once.
const QUEUE_UNCHOSEN: u8 = 0;
const QUEUE_OF_PD: u8 = 1;
const QUEUE_OF_RECV_PD: u8 = 2;

/// The hand-over queue: lanes push, the QP's work takes in order.
#[pin_data]
pub(super) struct OwnRx {
    /// Where the QP's timers and send work run: the queue of its PD or
    /// receive PD if one had it when the QP was created, else `QUEUE_UNCHOSEN`
    /// (the shared queues), for the QP's life.
    work_queue_of: u8,
    #[pin]
    pending: SpinLock<KVec<Deferred>>,
    /// The packets the running work took; only the work touches it.
    #[pin]
    batch: Mutex<KVec<Deferred>>,
    /// The PD (the QP's, or its receive PD) whose queue the own receive
    /// work runs on: once chosen it stays.
    queue_of: AtomicU8,
}

/// The PD whose queue a QP of PD `pd`, whose receives are checked against
/// `recv_pd`, would use now: its own first.
fn queue_of_now(pd: &PdPaging, recv_pd: &PdPaging) -> u8 {
    if pd.on() {
        QUEUE_OF_PD
    } else if recv_pd.on() {
        QUEUE_OF_RECV_PD
    } else {
        QUEUE_UNCHOSEN
    }
}

impl OwnRx {
    /// For a QP of PD `pd` whose receives are checked against `recv_pd`.
    pub(super) fn new(pd: &PdPaging, recv_pd: &PdPaging) -> impl PinInit<Self> {
        let now = queue_of_now(pd, recv_pd);
        pin_init!(Self {
            work_queue_of: now,
            pending <- new_spinlock!(KVec::new(), "rroce_qp_own_rx"),
            batch <- new_mutex!(KVec::new(), "rroce_qp_own_rx_batch"),
            queue_of: AtomicU8::new(now),
        })
    }
}

impl QpShared {
    /// The PD whose queue runs the QP's timers and send work, chosen when it
    /// was created; `None`: the shared queues.
    fn work_queue(&self) -> Option<&Queue> {
        match self.own_rx.work_queue_of {
            QUEUE_OF_PD => self.paging.queue(),
            QUEUE_OF_RECV_PD => self.recv_paging.queue(),
            _ => None,
        }
    }

    /// The PD whose queue runs the QP's own receive work, once its memory
    /// may fault (then the lanes hand its packets over); `None`: the lanes
    /// process them.
    pub(super) fn paging_queue(&self) -> Option<&Queue> {
        self.rx_paging().and_then(PdPaging::queue)
    }

    /// The PD of [`Self::paging_queue`], chosen once.
    fn rx_paging(&self) -> Option<&PdPaging> {
        let chosen = match self.own_rx.queue_of.load(Ordering::Acquire) {
            QUEUE_UNCHOSEN => {
                let pick = queue_of_now(&self.paging, &self.recv_paging);
                if pick == QUEUE_UNCHOSEN {
                    return None;
                }
                match self.own_rx.queue_of.compare_exchange(QUEUE_UNCHOSEN, pick, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => pick,
                    Err(first) => first,
                }
            }
            chosen => chosen,
        };
        Some(if chosen == QUEUE_OF_PD { &self.paging } else { &self.recv_paging })
    }
}

/// Queues the QP's send work: on its PD's queue if its memory could fault
/// when it was created, else on the system's per-CPU queue. (Already
/// queued: that run sends.)
pub(super) fn queue_send_work(q: &Arc<QpShared>) {
    let _ = match q.work_queue() {
        Some(wq) => wq.enqueue::<_, SEND_WORK>(q.clone()),
        None => crate::net::percpu_queue().enqueue::<_, SEND_WORK>(q.clone()),
    };
}

/// Arms the QP's delayed work `ID` (retry timer, pacing wake-up) to run
/// after `jiffies`: on its PD's queue if its memory could fault when it was
/// created, else on the module's. Already pending: that expiry comes first.
pub(super) fn queue_delayed<const ID: u64>(q: &Arc<QpShared>, jiffies: kernel::time::Jiffies)
where
    QpShared: kernel::workqueue::HasDelayedWork<QpShared, ID> + WorkItem<ID, Pointer = Arc<QpShared>>,
{
    let _ = match q.work_queue() {
        Some(wq) => wq.enqueue_delayed::<_, ID>(q.clone(), jiffies),
        // The module's own queue is drained at unload; QPs cancel their
        // delayed work when destroyed.
        None => match crate::rx::rx_queue() {
            Some(rxq) => rxq.queue().enqueue_delayed::<_, ID>(q.clone(), jiffies),
            None => return,
        },
    };
}

/// Hands a packet over to the QP's own work (lane context). `multicast`:
/// the packet is a copy of a datagram to a group the QP is attached to.
pub(super) fn defer(q: &Arc<QpShared>, pkt: RxPacket, multicast: bool) {
    let counters = &pkt.dev.data().counters;
    let Some((pd, wq)) = q.rx_paging().and_then(|pd| Some((pd, pd.queue()?))) else {
        counters.inc(Counter::RcvdDropped);
        return;
    };
    if q.own_rx.pending.lock().capacity() == 0 {
        // First hand-over: the queue's room is allocated once, outside the
        // lock, without reclaim (a lane may be what reclaim waits for).
        let Ok(room) = KVec::with_capacity(DEPTH, GFP_NOWAIT | __GFP_NOWARN) else {
            counters.inc(Counter::RcvdDropped);
            return;
        };
        let mut pending = q.own_rx.pending.lock();
        if pending.capacity() == 0 {
            *pending = room;
        }
    }
    // The PD's share first, then the total: a PD whose QPs wait on faults
    // cannot take the room of the others.
    if !pd.take_waiting() {
        counters.inc(Counter::RcvdQueueFull);
        return;
    }
    let d = match Deferred::new(pkt, multicast) {
        Ok(d) => d,
        Err(pkt) => {
            pd.release_waiting(1);
            pkt.dev.data().counters.inc(Counter::RcvdQueueFull);
            return;
        }
    };
    let queued = q.own_rx.pending.lock().push_within_capacity(d);
    match queued {
        // Already queued means the running work will see this packet too.
        Ok(()) => drop(wq.enqueue::<_, RX_WORK>(q.clone())),
        Err(e) => {
            pd.release_waiting(1);
            e.0.pkt.dev.data().counters.inc(Counter::RcvdQueueFull);
        }
    }
}

impl_has_work! {
    impl HasWork<Self, RX_WORK> for QpShared { self.rx_work }
}

impl WorkItem<RX_WORK> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        let mut batch = this.own_rx.batch.lock();
        let mut done = 0;
        loop {
            if batch.is_empty() {
                let mut pending = this.own_rx.pending.lock();
                if pending.is_empty() {
                    return;
                }
                if batch.capacity() == 0 {
                    // The batch takes the queue's room, the queue a fresh one of
                    // the same size (allocated here, where sleeping is fine).
                    drop(pending);
                    let Ok(room) = KVec::with_capacity(DEPTH, GFP_KERNEL) else {
                        // Retried by the next packet's hand-over.
                        return;
                    };
                    *batch = room;
                    pending = this.own_rx.pending.lock();
                }
                core::mem::swap(&mut *pending, &mut *batch);
                // Oldest first: the batch is consumed from its end.
                batch.reverse();
            }
            while let Some(d) = batch.pop() {
                super::recv::receive_own(&this, &d.pkt, d.multicast);
                drop(d);
                if let Some(pd) = this.rx_paging() {
                    pd.release_waiting(1);
                }
                done += 1;
                if done >= RUN_BUDGET {
                    drop(batch);
                    if let Some(wq) = this.paging_queue() {
                        drop(wq.enqueue::<_, RX_WORK>(this.clone()));
                    }
                    return;
                }
            }
        }
    }
}

/// Stops the QP's own work and drops what it had not processed (`destroy_qp`,
/// after the lanes can no longer hand it packets).
pub(super) fn stop(q: &Arc<QpShared>) {
    crate::net::cancel_work::<_, RX_WORK>(q);
    let pending = core::mem::take(&mut *q.own_rx.pending.lock());
    let batch = core::mem::take(&mut *q.own_rx.batch.lock());
    if let Some(pd) = q.rx_paging() {
        pd.release_waiting(pending.len() + batch.len());
    }
    drop(pending);
    drop(batch);
}
