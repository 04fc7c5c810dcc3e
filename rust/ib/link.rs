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

/// Whether `NEWLINK` is initialised (once per module load).
static NEWLINK_READY: AtomicBool = AtomicBool::new(false);
/// A `LinkOps` is registered: the core keeps one per type, and `NEWLINK`
/// serialises one handler.
static REGISTERED: AtomicBool = AtomicBool::new(false);

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
    /// Registers the link type; one registration at a time (`EBUSY`
    /// otherwise, or if another module registered the same type).
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(|ops: *mut sys::rdma_link_ops| {
                kernel::task::might_sleep();
                if REGISTERED.swap(true, Ordering::AcqRel) {
                    return Err(EBUSY);
                }
                if !NEWLINK_READY.load(Ordering::Acquire) {
                    // SAFETY: once per module load (`REGISTERED` excludes a concurrent
                    // call), before the link type (the lock's only user) is registered.
                    unsafe { NEWLINK.init() };
                    NEWLINK_READY.store(true, Ordering::Release);
                }
                // SAFETY: `ops` is pinned, writable storage that outlives the registration
                // (it is unregistered in `drop`); `TYPE` is a `'static` string. The core
                // refuses (WARN, no error) a type already registered and then leaves the
                // zeroed list node alone: a node it added has a non-null `next`, which
                // afterwards only changes by `WRITE_ONCE` (removal of the next type), so
                // this volatile read races with nothing plain.
                let added = unsafe {
                    ops.write(pin_init::zeroed());
                    (*ops).type_ = H::TYPE.as_char_ptr();
                    (*ops).newlink = Some(Self::newlink);
                    sys::rdma_link_register(ops);
                    !core::ptr::addr_of!((*ops).list.next).read_volatile().is_null()
                };
                if !added {
                    REGISTERED.store(false, Ordering::Release);
                    return Err(EBUSY);
                }
                Ok(())
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
        kernel::task::might_sleep();
        // SAFETY: added to the core's list in `register` (which fails otherwise), still
        // pinned. The core waits for running `newlink` calls (its rwsem).
        unsafe { sys::rdma_link_unregister(self.ops.get()) };
        REGISTERED.store(false, Ordering::Release);
    }
}
