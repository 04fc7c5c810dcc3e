// SPDX-License-Identifier: GPL-2.0
//! Keeping apart modules that share a driver id. rdma-core binds a device
//! by its driver id, so rroce registers with rdma_rxe's; rdma_rxe in turn
//! looks up "its" device of a netdev by that id and treats what it finds as
//! its own structure. Loaded together, its netdev handler would write into
//! rroce's devices (MTU, port state) and drop socket references it never
//! took. So: a conflicting module may not load while this driver has
//! devices, and this driver adds none while one is loaded. A conflicting
//! module loaded before this one cannot be seen; the README says so.

use super::{registry, IbDriver};
use crate::sys;
use core::marker::PhantomData;
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::types::Opaque;

/// A registered module notifier that enforces the rule; unregistered on drop.
#[pin_data(PinnedDrop)]
pub(crate) struct ConflictGuard<T: IbDriver> {
    #[pin]
    nb: Opaque<sys::notifier_block>,
    _driver: PhantomData<T>,
}

// SAFETY: the notifier block is only touched by the notifier chain under its own locking.
unsafe impl<T: IbDriver> Send for ConflictGuard<T> {}
// SAFETY: no `&self` method mutates the block.
unsafe impl<T: IbDriver> Sync for ConflictGuard<T> {}

impl<T: IbDriver> ConflictGuard<T> {
    /// Registers the notifier; call after the device list is set up.
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|nb: *mut sys::notifier_block| {
                // SAFETY: `nb` points to pinned, writable storage for the block, which
                // stays registered until `drop`.
                unsafe {
                    nb.write(pin_init::zeroed());
                    (*nb).notifier_call = Some(Self::call);
                    kernel::error::to_result(sys::register_module_notifier(nb))
                }
            }),
            _driver: PhantomData,
        })
    }

    unsafe extern "C" fn call(_nb: *mut sys::notifier_block, action: c_ulong, data: *mut c_void) -> c_int {
        for name in T::CONFLICTING_MODULES {
            // SAFETY: module notifiers receive the `struct module` the event is about,
            // alive for the call; `name` is NUL-terminated.
            match unsafe { sys::rroce_module_event(action, data, name.as_char_ptr()) } {
                1 => {
                    if let Err(e) = registry::conflicting_coming(name) {
                        // SAFETY: pure conversion.
                        return unsafe { sys::rroce_notifier_from_errno(e.to_errno()) };
                    }
                }
                2 => registry::conflicting_going(name),
                _ => {}
            }
        }
        sys::NOTIFY_DONE as c_int
    }
}

#[pinned_drop]
impl<T: IbDriver> PinnedDrop for ConflictGuard<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: the block was registered in `register` and is still pinned.
        unsafe { sys::unregister_module_notifier(self.nb.get()) };
    }
}
