// SPDX-License-Identifier: GPL-2.0
//! Receive path. First stage, in softirq: every datagram to port 4791 is
//! attributed to the rroce device of its netdev, its ICRC and headers are
//! checked once, and anything invalid is dropped and counted. Valid packets
//! go, with a reference on their device, to the bounded queue of a lane
//! chosen by destination QP; the second stage runs in the lane's work item
//! (process context), finds the QP and hands the packet to its transport,
//! or, for a QP whose memory may fault, to the QP's own work
//! (`qp/own_rx.rs`): a lane never waits on a page fault.

#![deny(unsafe_code)]

use crate::counters::Counter;
use crate::device::Rroce;
use crate::ib::DeviceRef;
use crate::net::{KernelCrc32, OwnedQueue, Skb, UdpReceiver};
use crate::net::NetDev;
use crate::proto::ip::{self, IpAddrs};
use crate::proto::qos::ECN_CE;
use crate::proto::{icrc, wire};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{new_mutex, new_spinlock_irq, Arc, ArcBorrow, Mutex, SpinLockIrq};
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};

const UDP_HDR: usize = 8;
/// Receive lanes. A packet goes to the lane of its destination QP number, so
/// one QP's packets stay in order while different QPs' packets are processed
/// in parallel (the lanes' work items run on a per-CPU high-priority
/// workqueue, each on the CPU whose softirq queued it), and a
/// flood to one QP delays only the QPs that share its lane.
const LANES: usize = 8;
/// Packets waiting in one lane; more are dropped (and counted) until its
/// work item catches up, so a flood cannot exhaust memory from softirq context.
const LANE_DEPTH: usize = 1024;
/// Deliveries (a packet, or each copy of a multicast datagram) one run of a
/// lane's work item makes before it yields the worker
/// and queues itself again: bounds both the time one run holds a CPU and how
/// long [`quiesce`] waits.
const RUN_BUDGET: usize = 256;

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
    /// skb holds no reference on it, and processing may come much later.
    pub(crate) ifindex: i32,
}

impl RxPacket {
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

/// One lane: a bounded queue between the softirq stage and a work item.
#[pin_data]
pub(crate) struct RxLane {
    #[pin]
    pending: SpinLockIrq<KVec<RxPacket>>,
    /// The batch the work item is processing; only the work item touches it.
    #[pin]
    batch: Mutex<KVec<RxPacket>>,
    #[pin]
    work: Work<RxLane>,
}

impl_has_work! {
    impl HasWork<Self> for RxLane { self.work }
}

impl RxLane {
    fn new() -> Result<Arc<Self>> {
        let pending = KVec::with_capacity(LANE_DEPTH, GFP_KERNEL)?;
        let batch = KVec::with_capacity(LANE_DEPTH, GFP_KERNEL)?;
        Arc::pin_init(
            try_pin_init!(Self {
                pending <- new_spinlock_irq!(pending, "rroce_rx_pending"),
                batch <- new_mutex!(batch, "rroce_rx_batch"),
                work <- new_work!("rroce_rx"),
            }),
            GFP_KERNEL,
        )
    }
}

impl WorkItem for RxLane {
    type Pointer = Arc<RxLane>;

    fn run(this: Arc<RxLane>) {
        let mut batch = this.batch.lock();
        let mut done = 0;
        loop {
            if batch.is_empty() {
                let mut pending = this.pending.lock();
                if pending.is_empty() {
                    return;
                }
                core::mem::swap(&mut *pending, &mut *batch);
                // Oldest first: the batch is consumed from its end.
                batch.reverse();
            }
            while let Some(pkt) = batch.pop() {
                done += crate::qp::receive(pkt);
                if done >= RUN_BUDGET {
                    // More may wait, in the batch or in `pending`: run again later.
                    drop(batch);
                    if let Some(rxq) = crate::rx::rx_queue() {
                        drop(rxq.wq.get().enqueue(this));
                    }
                    return;
                }
            }
        }
    }
}

/// The receive lanes and the workqueue their work items (and the QPs'
/// timers) run on.
pub(crate) struct RxQueue {
    lanes: KVec<Arc<RxLane>>,
    wq: OwnedQueue,
}

impl RxQueue {
    /// The module's workqueue (receive work and QP timers).
    pub(crate) fn queue(&self) -> &kernel::workqueue::Queue {
        self.wq.get()
    }

    pub(crate) fn new() -> Result<Arc<Self>> {
        let mut lanes = KVec::with_capacity(LANES, GFP_KERNEL)?;
        for _ in 0..LANES {
            lanes.push(RxLane::new()?, GFP_KERNEL)?;
        }
        let wq = OwnedQueue::new(c"rroce_rx")?;
        Ok(Arc::new(Self { lanes, wq }, GFP_KERNEL)?)
    }

    /// The lane of destination QP number `qpn`.
    fn lane(&self, qpn: u32) -> Option<&Arc<RxLane>> {
        self.lanes.get(qpn as usize % LANES)
    }
}

/// Checks a packet once and queues it for its device (softirq or process context).
fn accept(rxq: &Arc<RxQueue>, mut skb: Skb, dev: DeviceRef<Rroce>) {
    let counters = &dev.data().counters;
    if skb.linearize().is_err() {
        counters.inc(Counter::RcvdDropped);
        return;
    }
    let pkt = skb.ip_packet();
    // RoCEv2 carries neither IPv4 options nor IPv6 extension headers.
    let Some((addrs, ip_len)) = IpAddrs::parse(pkt) else {
        counters.inc(Counter::RcvdMalformed);
        return;
    };
    if !matches!(icrc::verify_with::<KernelCrc32>(pkt), Ok(true)) {
        // rdma_rxe's FLUSH carries an ICRC of its own making (see
        // `verify_rdma_rxe_flush`): taken, and counted, so it can FLUSH here.
        if matches!(icrc::verify_rdma_rxe_flush_with::<KernelCrc32>(pkt), Ok(true)) {
            counters.inc(Counter::RcvdRdmaRxeFlushIcrc);
        } else {
            counters.inc(Counter::RcvdIcrcErr);
            return;
        }
    }
    let Some(payload) = pkt.get(ip_len + UDP_HDR..) else {
        counters.inc(Counter::RcvdMalformed);
        return;
    };
    let Ok(parsed) = wire::Packet::parse(payload) else {
        counters.inc(Counter::RcvdMalformed);
        return;
    };
    let qpn = parsed.bth.dest_qpn;
    // The namespace-wide socket also sees packets to addresses of other
    // interfaces: only those to an address of this device's netdev are its,
    // and those to a multicast group (the QPs attached to it decide).
    if !addrs.destination_is_group() && !addressed_to(&skb, &addrs) {
        counters.inc(Counter::RcvdWrongAddr);
        return;
    }
    counters.inc(Counter::RcvdPkts);
    let Some(lane) = rxq.lane(qpn) else { return };
    let ce = ip::ecn(pkt) == Some(ECN_CE);
    let ifindex = skb.dev().map_or(0, |d| d.ifindex());
    let queued = lane.pending.lock().push_within_capacity(RxPacket { skb, dev, addrs, ip_len, ce, ifindex });
    match queued {
        // Already queued means the running work item will see this packet too.
        Ok(()) => drop(rxq.wq.get().enqueue(lane.clone())),
        Err(e) => e.0.dev.data().counters.inc(Counter::RcvdQueueFull),
    }
}

/// Whether the destination address belongs to the netdev the packet arrived on.
fn addressed_to(skb: &Skb, addrs: &IpAddrs) -> bool {
    let Some(ndev) = skb.dev() else { return false };
    let owner = match addrs {
        IpAddrs::V4 { dst, .. } => NetDev::by_local_ipv4(ndev.net(), *dst),
        IpAddrs::V6 { dst, .. } => NetDev::by_local_ipv6(ndev.net(), dst),
    };
    owner.is_some_and(|o| o.ifindex() == ndev.ifindex())
}

/// The receive queue and the module's workqueue (lanes, QP timers): the
/// context the RoCEv2 port was registered with. Process context.
pub(crate) fn rx_queue() -> Option<Arc<RxQueue>> {
    crate::net::RocePort::<Rroce>::ctx()
}

/// Waits until packet processing that started before this call has finished
/// on the lanes (at most two runs of each lane's work). After an object has
/// left its table, no lane holds it once this returns. The own work of QPs
/// whose memory may fault (`qp/own_rx.rs`) is waited for by its QP's
/// destruction and by the deregistration of its PD's regions and windows,
/// not here: it may wait on page faults. Process context; not from the
/// receive work itself.
pub(crate) fn quiesce() {
    if let Some(rxq) = crate::rx::rx_queue() {
        for lane in rxq.lanes.iter() {
            crate::net::flush_work::<_, 0>(lane);
        }
    }
}

/// Delivers a packet addressed to a local rroce device without the network.
pub(crate) fn deliver_local(skb: Skb, dev: DeviceRef<Rroce>) {
    match crate::rx::rx_queue() {
        Some(rxq) => accept(&rxq, skb, dev),
        None => dev.data().counters.inc(Counter::RcvdDropped),
    }
}

impl UdpReceiver for Rroce {
    type Ctx = RxQueue;

    fn receive(rxq: ArcBorrow<'_, RxQueue>, skb: Skb) {
        // A VLAN's packets arrive on the VLAN device; they belong to the
        // rroce device of the real one.
        let Some(dev) = skb.dev().and_then(|d| DeviceRef::<Rroce>::by_netdev(d.vlan_real_dev())) else {
            // Not a netdev of ours (rroce binds the port namespace-wide).
            return;
        };
        accept(&rxq.into(), skb, dev);
    }
}
