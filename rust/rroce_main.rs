// SPDX-License-Identifier: GPL-2.0
//! rroce: a software RoCEv2 RDMA provider. It turns an Ethernet netdev into
//! an RDMA device that speaks the rxe user ABI, so rdma-core's unmodified
//! rxe provider drives it.
//!
//! Layers: `sys` (generated bindings) -> `ib`, `net` (all `unsafe`, safe
//! abstractions) -> `device`, `counters` (driver logic in safe Rust), with
//! `proto` holding the kernel-independent core that also builds on the host.
//! Only `ib`, `net` and `sys` may use `unsafe`.

#![deny(unsafe_code)]

use kernel::prelude::*;

mod ah;
mod counters;
mod cq;
mod device;
#[allow(unsafe_code)]
mod ib;
mod mr;
#[allow(unsafe_code)]
mod net;
mod pd_paging;
mod port_qos;
// `pub` items: the same files are the host crate's root (rust/proto/host.rs).
#[allow(unreachable_pub)]
mod proto;
mod qp;
mod qp_counters;
mod run_queue;
mod rx;
mod srq;
#[allow(unsafe_code)]
mod sys;
mod table;
mod trace;
mod user;
mod wq;

module! {
    type: RroceModule,
    name: "rroce",
    authors: ["rroce developers"],
    description: "Software RoCEv2 RDMA provider (rxe user ABI)",
    license: "GPL",
    alias: ["rdma-link-rroce"],
    params: {
        odp: bool {
            default: true,
            description: "On-demand paging (IBV_ACCESS_ON_DEMAND); 0 turns it off: nothing advertised, such registrations refused",
        },
    },
}

/// Module state. Fields drop in order: first no new devices can be added,
/// then existing ones are removed, then netdevice events stop.
#[pin_data]
struct RroceModule {
    #[pin]
    link: ib::LinkOps<device::Rroce>,
    devices: device::AllDevices,
    /// Keeps rdma_rxe (same driver id) from loading while devices exist.
    #[pin]
    rxe_guard: ib::ConflictGuard<device::Rroce>,
    #[pin]
    netdev_events: net::NetdevNotifier<device::Rroce>,
    /// Closes every namespace's UDP sockets (and those of namespaces being
    /// destroyed, while loaded), then releases the receive queue.
    #[pin]
    port: net::RocePort<device::Rroce>,
    /// Last, once nothing receives or sends any more: waits for the packets
    /// still queued for transmission, whose destructor is this module's code.
    _tx_drain: TxDrain,
}

/// Dropped after its body, its field waits for the packets' destructors.
struct TxDrain {
    _owners: net::TxOwners,
}

impl Drop for TxDrain {
    fn drop(&mut self) {
        // User memory released from a work item, whose code is this module's.
        ib::flush_released_later();
    }
}

impl kernel::InPlaceModule for RroceModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        ib::load_user_verbs();
        ib::init_device_attrs::<device::Rroce>();
        try_pin_init!(Self {
            _tx_drain: {
                check_crc()?;
                TxDrain { _owners: net::TxOwners::open()? }
            },
            port <- net::RocePort::register(rx::RxQueue::new()?),
            // Before netdev events: their handler looks devices up in its list.
            devices: device::AllDevices::new()?,
            netdev_events <- net::NetdevNotifier::register(),
            rxe_guard <- ib::ConflictGuard::register(),
            link <- ib::LinkOps::register(),
        })
    }
}

/// Every packet's ICRC is the kernel's CRC-32: a wrong one would make rroce
/// drop every packet from other RoCE devices, and theirs drop rroce's.
fn check_crc() -> Result {
    if proto::icrc::agrees_with_table::<net::KernelCrc32>() {
        Ok(())
    } else {
        pr_err!("the kernel's crc32_le disagrees with the CRC-32 tables: not loading\n");
        Err(EINVAL)
    }
}
