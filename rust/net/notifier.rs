// SPDX-License-Identifier: GPL-2.0
//! Notifier chains: a registered block (unregistered on drop), and the
//! netdevice chain's events as a trait.

use super::NetDev;
use crate::sys;
use core::marker::PhantomData;
use kernel::prelude::*;
use kernel::types::Opaque;

/// The netdevice events rroce reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetdevEvent {
    Up,
    Down,
    Change,
    ChangeMtu,
    ChangeAddr,
    Unregister,
    Other,
}

impl NetdevEvent {
    fn from_raw(ev: u64) -> Self {
        let ev = ev as u32;
        match ev {
            sys::netdev_cmd_NETDEV_UP => Self::Up,
            sys::netdev_cmd_NETDEV_DOWN => Self::Down,
            sys::netdev_cmd_NETDEV_CHANGE => Self::Change,
            sys::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            sys::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            sys::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other,
        }
    }
}

/// Receiver of netdevice events.
pub(crate) trait NetdevHandler {
    /// Called in process context under RTNL for every event of every netdev.
    fn event(ev: NetdevEvent, dev: &NetDev);
}

/// The callback of a notifier block.
pub(crate) type NotifierCall =
    unsafe extern "C" fn(*mut sys::notifier_block, kernel::ffi::c_ulong, *mut kernel::ffi::c_void) -> kernel::ffi::c_int;
/// A notifier chain's register or unregister function.
pub(crate) type NotifierChainOp = unsafe extern "C" fn(*mut sys::notifier_block) -> kernel::ffi::c_int;

/// A notifier block registered on one of the kernel's notifier chains;
/// unregistered on drop.
#[pin_data(PinnedDrop)]
pub(crate) struct Notifier {
    #[pin]
    nb: Opaque<sys::notifier_block>,
    unregister: NotifierChainOp,
}

// SAFETY: the notifier block is only touched by the notifier chain under its own locking.
unsafe impl Send for Notifier {}
// SAFETY: no `&self` method mutates the block.
unsafe impl Sync for Notifier {}

impl Notifier {
    /// Registers `call` with `register`.
    ///
    /// # Safety
    ///
    /// `register` and `unregister` are the two operations of one chain, and
    /// `call` is sound for any event that chain delivers.
    pub(crate) unsafe fn register(
        call: NotifierCall,
        register: NotifierChainOp,
        unregister: NotifierChainOp,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|nb: *mut sys::notifier_block| {
                kernel::task::might_sleep();
                // SAFETY: `nb` points to pinned, writable storage for the block, which stays
                // registered until `drop`; the chain's operations are the caller's.
                unsafe {
                    nb.write(pin_init::zeroed());
                    (*nb).notifier_call = Some(call);
                    kernel::error::to_result(register(nb))
                }
            }),
            unregister,
        })
    }
}

#[pinned_drop]
impl PinnedDrop for Notifier {
    fn drop(self: Pin<&mut Self>) {
        kernel::task::might_sleep();
        // SAFETY: the block was registered on this chain in `register` and is still pinned.
        unsafe { (self.unregister)(self.nb.get()) };
    }
}

/// A registered netdevice notifier; unregistered on drop.
#[pin_data]
pub(crate) struct NetdevNotifier<H: NetdevHandler> {
    #[pin]
    block: Notifier,
    _handler: PhantomData<H>,
}

impl<H: NetdevHandler + 'static> NetdevNotifier<H> {
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            // SAFETY: the netdevice chain's operations; `call` handles its events.
            block <- unsafe {
                Notifier::register(Self::call, sys::register_netdevice_notifier, sys::unregister_netdevice_notifier)
            },
            _handler: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only for the netdevice notifier chain, which passes notifier info whose
    /// netdev is alive for the call.
    unsafe extern "C" fn call(
        _nb: *mut sys::notifier_block,
        event: kernel::ffi::c_ulong,
        ptr: *mut kernel::ffi::c_void,
    ) -> kernel::ffi::c_int {
        // SAFETY: netdevice notifiers receive a `netdev_notifier_info` naming a device that
        // is alive for the duration of the call.
        let dev = unsafe { NetDev::from_raw(sys::rroce_netdev_notifier_info_to_dev(ptr)) };
        H::event(NetdevEvent::from_raw(event as u64), dev);
        sys::NOTIFY_DONE as kernel::ffi::c_int
    }
}
