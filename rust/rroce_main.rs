// SPDX-License-Identifier: GPL-2.0
//! rroce: a software RoCEv2 RDMA provider. It turns an Ethernet netdev into
//! an RDMA device that speaks the rxe user ABI, so rdma-core's unmodified
//! rxe provider drives it.
//!
//! Layers: `sys` (generated bindings) -> `ib`, `net` (all `unsafe`, safe
//! abstractions) -> `device`, `counters` (driver logic in safe Rust), with
//! `proto` holding the kernel-independent core that also builds on the host.

use kernel::prelude::*;

mod ah;
mod counters;
mod cq;
mod device;
mod ib;
mod mr;
mod net;
mod port_qos;
// The protocol core is also a host crate (its items are `pub` for it); the
// data path uses what the device code does not yet.
#[allow(dead_code, unreachable_pub)]
mod proto;
mod qp;
mod rx;
mod srq;
mod sys;
mod table;
mod tunnel;
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
            default: false,
            description: "On-demand paging (IBV_ACCESS_ON_DEMAND). Off by default: a page fault taken while receiving runs on a receive lane shared with other QPs, so memory whose faults wait on user space (a FUSE mapping) can stall them",
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
    /// Closes the UDP sockets of namespaces being destroyed (and of all at unload).
    #[pin]
    namespaces: net::PernetOps<device::Rroce>,
    /// Last: drains the receive work once no socket can feed it.
    _rx: RxShutdown,
}

/// Releases the receive queue at unload, after every socket is closed.
struct RxShutdown;

impl Drop for RxShutdown {
    fn drop(&mut self) {
        // Sent packets call back into this module when they leave the host.
        net::wait_tx_released();
        tunnel::shutdown();
    }
}

impl kernel::InPlaceModule for RroceModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        ib::load_user_verbs();
        ib::init_device_attrs::<device::Rroce>();
        try_pin_init!(Self {
            _rx: {
                check_crc()?;
                tunnel::init(rx::RxQueue::new()?);
                RxShutdown
            },
            namespaces <- net::PernetOps::register(),
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
