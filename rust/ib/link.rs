// SPDX-License-Identifier: GPL-2.0
//! `rdma link add NAME type TYPE netdev DEV`: registration of a link type.

use crate::net::NetDev;
use crate::sys;
use core::marker::PhantomData;
use kernel::error::from_result;
use kernel::ffi::{c_char, c_int};
use kernel::prelude::*;
use kernel::types::Opaque;
use core::sync::atomic::{AtomicBool, Ordering};

kernel::sync::global_lock! {
    // SAFETY: initialised by `LinkOps::register` before the link type is registered,
    // and so before any `newlink` can take it.
    unsafe(uninit) static NEWLINK: Mutex<()> = ();
}

/// Whether `NEWLINK` is initialised.
static NEWLINK_READY: AtomicBool = AtomicBool::new(false);

/// Creates devices for `rdma link add`.
pub(crate) trait LinkHandler {
    /// The link type users name (`rdma link add ... type <TYPE>`).
    const TYPE: &'static CStr;
    /// Creates device `name` on `ndev`. Runs in process context under RTNL-free
    /// netlink handling; may sleep. Calls are serialised (a check for a device
    /// already on `ndev` and the registration cannot interleave).
    fn newlink(name: &CStr, ndev: &NetDev) -> Result;
}

/// A registered link type; unregistered on drop.
#[pin_data(PinnedDrop)]
pub(crate) struct LinkOps<H: LinkHandler> {
    #[pin]
    ops: Opaque<sys::rdma_link_ops>,
    _handler: PhantomData<H>,
}

// SAFETY: the ops struct is written once before registration and then only read by the core.
unsafe impl<H: LinkHandler> Send for LinkOps<H> {}
// SAFETY: as above.
unsafe impl<H: LinkHandler> Sync for LinkOps<H> {}

impl<H: LinkHandler + 'static> LinkOps<H> {
    /// Registers the link type. Call from module init (once per module).
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        if !NEWLINK_READY.swap(true, Ordering::AcqRel) {
            // SAFETY: the first call, from module init, before the link type (the only
            // user of the lock) is registered.
            unsafe { NEWLINK.init() };
        }
        try_pin_init!(Self {
            ops <- Opaque::ffi_init(|ops: *mut sys::rdma_link_ops| {
                // SAFETY: `ops` is pinned, writable storage that outlives the registration
                // (it is unregistered in `drop`); `TYPE` is a `'static` string.
                unsafe {
                    ops.write(pin_init::zeroed());
                    (*ops).type_ = H::TYPE.as_char_ptr();
                    (*ops).newlink = Some(Self::newlink);
                    sys::rdma_link_register(ops);
                }
            }),
            _handler: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only for the RDMA core's `newlink` callback of the registered link type: a
    /// NUL-terminated name and a netdev with a reference held for the call.
    unsafe extern "C" fn newlink(name: *const c_char, ndev: *mut sys::net_device) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a NUL-terminated name and a netdev it holds a
            // reference on for the duration of the call.
            let (name, ndev) = unsafe { (CStr::from_char_ptr(name), NetDev::from_raw(ndev)) };
            let _serialised = NEWLINK.lock();
            H::newlink(name, ndev)?;
            Ok(0)
        })
    }
}

#[pinned_drop]
impl<H: LinkHandler> PinnedDrop for LinkOps<H> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: registered in `register`, still pinned.
        unsafe { sys::rdma_link_unregister(self.ops.get()) };
    }
}
