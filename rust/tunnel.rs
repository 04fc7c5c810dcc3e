// SPDX-License-Identifier: GPL-2.0
//! The RoCEv2 UDP sockets: one IPv4 and one IPv6 socket on port 4791 per
//! network namespace that has rroce devices. Devices hold a reference; the
//! last one closes the sockets, and so does the namespace's teardown, so a
//! socket never outlives its namespace.

#![deny(unsafe_code)]

use crate::device::Rroce;
use crate::net::{NetnsExit, UdpTunnel};
use crate::rx::RxQueue;
use kernel::sync::Arc;
use crate::sys;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::alloc::KVec;
use kernel::prelude::*;

struct NsSockets {
    net: usize,
    /// Tells this entry apart from a later namespace at the same address.
    generation: u64,
    users: u32,
    _v4: UdpTunnel<Rroce>,
    _v6: Option<UdpTunnel<Rroce>>,
}

struct Registry {
    entries: KVec<NsSockets>,
}

kernel::sync::global_lock! {
    // SAFETY: initialised in the module initialiser before any device exists.
    unsafe(uninit) static SOCKETS: Mutex<Registry> = Registry { entries: KVec::new() };
}

kernel::sync::global_lock! {
    // Where the sockets send what they receive; set while the module is loaded.
    // Apart from the registry, whose mutex is held while sockets open (which
    // sleeps): the retry timer asks for the queue on every response packet.
    // SAFETY: initialised in the module initialiser before any device exists.
    unsafe(uninit) static RX: SpinLock<Option<Arc<RxQueue>>> = None;
}

static GENERATION: AtomicU64 = AtomicU64::new(1);

/// Initialises the registry; call once from module init.
// A global lock's one-time initialisation: `unsafe` outside `ib/` and
// `net.rs` (with `hold` below, the only places).
#[allow(unsafe_code)]
pub(crate) fn init(rx: Arc<RxQueue>) {
    // SAFETY: called exactly once, before any other use.
    unsafe {
        SOCKETS.init();
        RX.init();
    }
    *RX.lock() = Some(rx);
}

/// The receive queue and the module's workqueue (lanes, QP timers). Process context.
pub(crate) fn rx_queue() -> Option<Arc<RxQueue>> {
    RX.lock().clone()
}

/// Drops the receive queue and the registry's storage; call at module exit
/// after every socket closed.
pub(crate) fn shutdown() {
    // A static is never dropped: its vector's buffer goes now, or every
    // load and unload of the module would leak it.
    let entries = core::mem::take(&mut SOCKETS.lock().entries);
    drop(entries);
    let rx = RX.lock().take();
    drop(rx);
}

/// A device's hold on the sockets of its namespace.
pub(crate) struct NetSockets {
    net: usize,
    generation: u64,
}

/// Opens the namespace's sockets if it has none yet, and takes a reference.
// Opening a socket is `unsafe` because only this registry can promise that
// it closes at the namespace's exit (`NetnsExit` below) at the latest; the
// registry would move into `net.rs` as per-namespace data (`net_generic`).
#[allow(unsafe_code)]
pub(crate) fn hold(net: *mut sys::net) -> Result<NetSockets> {
    let key = net as usize;
    let rx = rx_queue().ok_or(ENODEV)?;
    let mut reg = SOCKETS.lock();
    let all = &mut reg.entries;
    if let Some(e) = all.iter_mut().find(|e| e.net == key) {
        e.users += 1;
        return Ok(NetSockets { net: key, generation: e.generation });
    }
    // SAFETY: `net` is the live namespace of the netdev a device is being added on; the
    // sockets are closed at the latest by this module's pernet exit for that namespace.
    let v4 = unsafe { UdpTunnel::open(net, false, rx.clone()) }.inspect_err(|e| {
        pr_err!("cannot bind UDP port 4791 (IPv4): error {}\n", e.to_errno());
    })?;
    // SAFETY: as above.
    let v6 = match unsafe { UdpTunnel::open(net, true, rx) } {
        Ok(s) => Some(s),
        Err(e) if e == EAFNOSUPPORT => None,
        Err(e) => {
            pr_err!("cannot bind UDP port 4791 (IPv6): error {}\n", e.to_errno());
            return Err(e);
        }
    };
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
    all.push(NsSockets { net: key, generation, users: 1, _v4: v4, _v6: v6 }, GFP_KERNEL)?;
    Ok(NetSockets { net: key, generation })
}

impl Drop for NetSockets {
    fn drop(&mut self) {
        let closed = {
            let mut reg = SOCKETS.lock();
            let all = &mut reg.entries;
            let pos = all.iter().position(|e| e.net == self.net && e.generation == self.generation);
            match pos {
                Some(i) => match all.get_mut(i) {
                    Some(e) if e.users > 1 => {
                        e.users -= 1;
                        None
                    }
                    _ => all.remove(i).ok(),
                },
                // The namespace went away first and closed them.
                None => None,
            }
        };
        drop(closed);
    }
}

impl NetnsExit for Rroce {
    fn exit(net: *mut sys::net) {
        let closed = {
            let mut reg = SOCKETS.lock();
            let all = &mut reg.entries;
            let pos = all.iter().position(|e| e.net == net as usize);
            pos.and_then(|i| all.remove(i).ok())
        };
        drop(closed);
    }
}
