// SPDX-License-Identifier: GPL-2.0
//! Receive path, in softirq: every datagram to port 4791 is attributed to
//! the rroce device of its netdev, its ICRC and headers are checked once,
//! and anything invalid is dropped and counted. A valid packet goes, with a
//! reference on its device, to the queue of its destination QP, whose own
//! work runs the transport (`qp/task.rs`: one runner per QP, started only
//! when the QP was idle); a multicast datagram goes to the multicast
//! dispatcher here, which hands it to each QP attached to its group.

use crate::counters::Counter;
use crate::device::Rroce;
use crate::ib::DeviceRef;
use crate::net::{KernelCrc32, OwnedQueue, ReceivedSkb, Skb, UdpReceiver};
use crate::net::NetDev;
use crate::proto::ip::{self, IpAddrs};
use crate::proto::qos::ECN_CE;
use crate::proto::task::Schedule;
use crate::proto::{icrc, wire};
use crate::run_queue::{RunEnd, RunQueue};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};

const UDP_HDR: usize = 8;
/// Multicast datagrams waiting for the dispatcher; more are dropped (and
/// counted) until it catches up, so a flood cannot exhaust memory from
/// softirq context.
const MCAST_DEPTH: usize = 1024;
/// Deliveries (a datagram to one attached QP) one run of the dispatcher
/// makes before it queues itself again: 32 datagrams to groups of 56 QPs.
/// Counted by QP, not by datagram, as a group may hold many users' QPs
/// (`limits::MAX_MCAST_GRP_MEMBERS`): a flood to a full group costs the
/// dispatcher's other work no more than one to a group of one user's.
const MCAST_BUDGET: usize = 32 * crate::proto::limits::MAX_MCAST_QP_ATTACH as usize;

/// A validated packet and the device it arrived for.
pub(crate) struct RxPacket {
    pub(crate) skb: Skb,
    pub(crate) dev: DeviceRef<Rroce>,
    /// Its IP addresses, and the length of its IP header.
    pub(crate) addrs: IpAddrs,
    pub(crate) ip_len: usize,
    /// A switch marked it Congestion Experienced.
    pub(crate) ce: bool,
    /// The interface it arrived on (a VLAN's own), noted on arrival: the
    /// queued skb no longer names it, and processing may come much later.
    pub(crate) ifindex: i32,
}

impl RxPacket {
    /// The packet was processed: freed as consumed, not as a drop.
    pub(crate) fn mark_processed(&mut self) {
        self.skb.mark_processed();
    }

    /// The IP packet.
    pub(crate) fn ip(&self) -> &[u8] {
        self.skb.ip_packet()
    }

    /// A second packet value sharing this one's data, for another QP to
    /// process later.
    pub(crate) fn try_clone(&self) -> Result<Self> {
        Ok(Self {
            skb: self.skb.try_clone()?,
            dev: self.dev.to_ref().ok_or(ENODEV)?,
            addrs: self.addrs,
            ip_len: self.ip_len,
            ce: self.ce,
            ifindex: self.ifindex,
        })
    }

    /// The transport part (BTH to ICRC).
    pub(crate) fn transport(&self) -> &[u8] {
        self.ip().get(self.ip_len + UDP_HDR..).unwrap_or(&[])
    }
}

/// The module's receive state: the softirq workqueue the QPs' work (and
/// their timers) run on, and the multicast dispatcher with its own queue.
#[pin_data]
pub(crate) struct RxQueue {
    /// The multicast dispatcher: it takes the group table's mutex. Dropped
    /// (drained) first: it queues QP runners on `bh`.
    wq: OwnedQueue,
    /// QP runners whose memory cannot fault: in softirq, on the CPU that
    /// gave them work.
    bh: OwnedQueue,
    #[pin]
    mcast: RunQueue<RxPacket>,
    #[pin]
    mcast_work: Work<RxQueue>,
}

impl_has_work! {
    impl HasWork<Self> for RxQueue { self.mcast_work }
}

impl WorkItem for RxQueue {
    type Pointer = Arc<RxQueue>;

    /// The multicast dispatcher.
    fn run(this: Arc<RxQueue>) {
        let end = this.mcast.run(MCAST_BUDGET, || 0, |pkt| crate::qp::receive_multicast(&pkt), || {});
        if end == RunEnd::OutOfBudget {
            drop(this.wq.enqueue(this.clone()));
        }
    }
}

impl RxQueue {
    /// The module's softirq workqueue: a QP's work runs on the CPU that
    /// gave it work, right after the softirq or system call that did.
    /// Nothing on it sleeps, and so nothing on it touches memory that may
    /// fault (`pd_paging.rs`).
    pub(crate) fn queue(&self) -> &OwnedQueue {
        &self.bh
    }

    /// The BH queue itself, to queue work on a given CPU.
    pub(crate) fn bh(&self) -> &OwnedQueue {
        &self.bh
    }

    pub(crate) fn new() -> Result<Arc<Self>> {
        let bh = OwnedQueue::new_bh(c"rroce_bh")?;
        let wq = OwnedQueue::new(c"rroce_rx")?;
        Arc::pin_init(
            try_pin_init!(Self {
                bh,
                wq,
                mcast <- RunQueue::new(MCAST_DEPTH),
                mcast_work <- new_work!("rroce_mcast"),
            }),
            GFP_KERNEL,
        )
    }
}

/// Where a packet came from: the network's receive hook, where an idle
/// QP's runner may run at once, or a local sender (any context, perhaps
/// holding another QP's state), where it is queued.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    Hook,
    Local,
}

/// Checks a packet once and queues it for its QP, or for the multicast
/// dispatcher (softirq, or a local sender's process context).
fn accept(rxq: ArcBorrow<'_, RxQueue>, mut skb: ReceivedSkb<'_>, dev: DeviceRef<Rroce>, arrival: Arrival) {
    let counters = &dev.data().counters;
    if skb.linearize().is_err() {
        counters.inc(Counter::RcvdDropped);
        crate::trace::drop(&dev, crate::trace::NO_QPN, Counter::RcvdDropped);
        return;
    }
    let pkt = skb.ip_packet();
    // RoCEv2 carries neither IPv4 options nor IPv6 extension headers.
    let Some((addrs, ip_len)) = IpAddrs::parse(pkt) else {
        counters.inc(Counter::RcvdMalformed);
        crate::trace::drop(&dev, crate::trace::NO_QPN, Counter::RcvdMalformed);
        return;
    };
    if !matches!(icrc::verify_with::<KernelCrc32>(pkt), Ok(true)) {
        // rdma_rxe's FLUSH carries an ICRC of its own making (see
        // `verify_rdma_rxe_flush`): taken, and counted, so it can FLUSH here.
        if matches!(icrc::verify_rdma_rxe_flush_with::<KernelCrc32>(pkt), Ok(true)) {
            counters.inc(Counter::RcvdRdmaRxeFlushIcrc);
        } else {
            counters.inc(Counter::RcvdIcrcErr);
            crate::trace::drop(&dev, crate::trace::NO_QPN, Counter::RcvdIcrcErr);
            return;
        }
    }
    let Some(payload) = pkt.get(ip_len + UDP_HDR..) else {
        counters.inc(Counter::RcvdMalformed);
        crate::trace::drop(&dev, crate::trace::NO_QPN, Counter::RcvdMalformed);
        return;
    };
    let Ok(parsed) = wire::Packet::parse(payload) else {
        counters.inc(Counter::RcvdMalformed);
        crate::trace::drop(&dev, crate::trace::NO_QPN, Counter::RcvdMalformed);
        return;
    };
    let qpn = parsed.bth.dest_qpn;
    // The namespace-wide socket also sees packets to addresses of other
    // interfaces: only those to an address of this device's netdev are its,
    // and those to a multicast group (the QPs attached to it decide).
    if !addrs.destination_is_group() && !addressed_to(&skb, &addrs) {
        counters.inc(Counter::RcvdWrongAddr);
        crate::trace::drop(&dev, qpn, Counter::RcvdWrongAddr);
        return;
    }
    counters.inc(Counter::RcvdPkts);
    let ce = ip::ecn(pkt) == Some(ECN_CE);
    let ifindex = skb.dev().ifindex();
    let pkt = RxPacket { skb: skb.into_queued(), dev, addrs, ip_len, ce, ifindex };
    if qpn != crate::qp::mcast::MULTICAST_QPN && !addrs.destination_is_group() {
        crate::qp::deliver(pkt, qpn, arrival, crate::proto::spread::defers_run(parsed.flags));
        return;
    }
    match rxq.mcast.push(pkt) {
        Ok(Schedule::Start) => drop(rxq.wq.enqueue(Arc::from(rxq))),
        Ok(Schedule::Covered) => {}
        Err(pkt) => {
            pkt.dev.data().counters.inc(Counter::RcvdQueueFull);
            crate::trace::drop(&pkt.dev, qpn, Counter::RcvdQueueFull);
        }
    }
}

/// Whether the destination address belongs to the netdev the packet arrived on.
fn addressed_to(skb: &ReceivedSkb<'_>, addrs: &IpAddrs) -> bool {
    let owner = match addrs {
        IpAddrs::V4 { dst, .. } => NetDev::by_local_ipv4(skb.net(), *dst),
        IpAddrs::V6 { dst, .. } => NetDev::by_local_ipv6(skb.net(), dst),
    };
    owner.is_some_and(|o| o.ifindex() == skb.dev().ifindex())
}

/// The receive state (module workqueue, multicast dispatcher): the context
/// the RoCEv2 port was registered with. Process context.
pub(crate) fn rx_queue() -> Option<Arc<RxQueue>> {
    crate::net::RocePort::<Rroce>::ctx()
}

/// Waits until the work that ran, or was queued, on the module's softirq
/// workqueue before this call has finished, and the QP runs the receive
/// hook made inline (`qp/task.rs`): the QPs' work and timer
/// expiries (not the multicast dispatcher: [`wait_multicast`]). After an
/// object has left its table, none of them still uses it once this returns (work queued later looks it up again
/// and finds nothing). The work of QPs whose memory may fault runs on
/// their PD's queue (`pd_paging.rs`), waited for by their destruction and
/// by the deregistration of their PD's regions and windows, not here.
/// Process context; not from work on that queue.
pub(crate) fn quiesce() {
    // The runs the receive hook made inline, then the queue's.
    crate::qp::wait_inline_runs();
    if let Some(rxq) = crate::rx::rx_queue() {
        rxq.bh.flush();
    }
}

/// Waits until the multicast dispatcher's run in progress, if any, has
/// finished: it hands datagrams to UD QPs it found in a group. Process
/// context.
pub(crate) fn wait_multicast() {
    if let Some(rxq) = crate::rx::rx_queue() {
        crate::net::flush_work::<_, 0>(&rxq);
    }
}

/// Delivers a packet addressed to a local rroce device without the network.
/// Any context (the device holds the receive queues).
pub(crate) fn deliver_local(skb: ReceivedSkb<'_>, dev: DeviceRef<Rroce>) {
    let rxq = dev.data().rxq.clone();
    accept(rxq.as_arc_borrow(), skb, dev, Arrival::Local);
}

impl UdpReceiver for Rroce {
    type Ctx = RxQueue;

    fn receive(rxq: ArcBorrow<'_, RxQueue>, skb: ReceivedSkb<'_>) {
        // A VLAN's packets arrive on the VLAN device; they belong to the
        // rroce device of the real one.
        let Some(dev) = DeviceRef::<Rroce>::by_netdev(skb.dev().vlan_real_dev()) else {
            // Not a netdev of ours (rroce binds the port namespace-wide).
            return;
        };
        accept(rxq, skb, dev, Arrival::Hook);
    }

    /// The multicast dispatcher holds a reference while queued or running:
    /// were it the last, its drop would destroy `rroce_rx` from one of its
    /// own workers, which waits for itself. Datagrams still queued are dropped.
    fn stop(rxq: &Arc<RxQueue>) {
        crate::net::cancel_work::<RxQueue, 0>(rxq);
    }
}
