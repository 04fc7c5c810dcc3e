// SPDX-License-Identifier: GPL-2.0
//! A QP's own receive work, for QPs whose memory may fault: a QP of a PD
//! with on-demand paging regions (`pd_paging.rs`) gets its packets from the
//! lanes here, in order, and processes them where it may wait on a page
//! fault without holding up the lane's other QPs. The work runs on an
//! unbound workqueue, as rdma_rxe's QP tasks do.

#![deny(unsafe_code)]

use super::*;

/// Packets waiting for one QP's own work; more are dropped (and counted),
/// as a lane's are, until the work catches up.
const DEPTH: usize = 256;
/// Packets one run processes before it queues itself again.
const RUN_BUDGET: usize = 64;

/// A packet handed over by a lane.
pub(super) struct Deferred {
    pkt: RxPacket,
    /// A copy of a multicast datagram, for this QP as one attached to its group.
    multicast: bool,
}

/// The hand-over queue: lanes push, the QP's work takes in order.
#[pin_data]
pub(super) struct OwnRx {
    #[pin]
    pending: SpinLock<KVec<Deferred>>,
    /// The packets the running work took; only the work touches it.
    #[pin]
    batch: Mutex<KVec<Deferred>>,
}

impl OwnRx {
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            pending <- new_spinlock!(KVec::new(), "rroce_qp_own_rx"),
            batch <- new_mutex!(KVec::new(), "rroce_qp_own_rx_batch"),
        })
    }
}

impl QpShared {
    /// Whether the QP's packets go to its own work instead of being
    /// processed on their lane.
    pub(super) fn rx_in_own_work(&self) -> bool {
        self.paging.on() || self.recv_paging.on()
    }
}

/// Hands a packet over to the QP's own work (lane context). `multicast`:
/// the packet is a copy of a datagram to a group the QP is attached to.
pub(super) fn defer(q: &Arc<QpShared>, pkt: RxPacket, multicast: bool) {
    let counters = &pkt.dev.data().counters;
    let Some(rxq) = crate::rx::rx_queue() else {
        counters.inc(Counter::RcvdDropped);
        return;
    };
    if q.own_rx.pending.lock().capacity() == 0 {
        // First hand-over: the queue's room is allocated once, outside the lock.
        let Ok(room) = KVec::with_capacity(DEPTH, GFP_KERNEL) else {
            counters.inc(Counter::RcvdDropped);
            return;
        };
        let mut pending = q.own_rx.pending.lock();
        if pending.capacity() == 0 {
            *pending = room;
        }
    }
    let queued = q.own_rx.pending.lock().push_within_capacity(Deferred { pkt, multicast });
    match queued {
        // Already queued means the running work will see this packet too.
        Ok(()) => drop(rxq.paging_queue().enqueue::<_, RX_WORK>(q.clone())),
        Err(e) => e.0.pkt.dev.data().counters.inc(Counter::RcvdQueueFull),
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
                done += 1;
                if done >= RUN_BUDGET {
                    drop(batch);
                    if let Some(rxq) = crate::rx::rx_queue() {
                        drop(rxq.paging_queue().enqueue::<_, RX_WORK>(this));
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
    drop(pending);
    drop(batch);
}
