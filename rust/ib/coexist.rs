// SPDX-License-Identifier: GPL-2.0
//! Keeping apart modules that share a driver id. rdma-core binds a device
//! by its driver id, so rroce registers with rdma_rxe's; rdma_rxe in turn
//! looks up "its" device of a netdev by that id and treats what it finds as
//! its own structure. Loaded together, its netdev handler would write into
//! rroce's devices (MTU, port state) and drop socket references it never
//! took. So: a conflicting module may not load while this driver has
//! devices, and this driver adds none while one is loaded. A conflicting
//! module loaded before this one cannot be seen; docs/install.md says so.

use super::{registry, IbDriver};
use crate::net::Notifier;
use crate::sys;
use core::marker::PhantomData;
use kernel::ffi::{c_int, c_ulong, c_void};
use kernel::prelude::*;

/// A registered module notifier that enforces the rule; unregistered on drop.
#[pin_data]
pub(crate) struct ConflictGuard<T: IbDriver> {
    #[pin]
    block: Notifier,
    _driver: PhantomData<T>,
}

impl<T: IbDriver> ConflictGuard<T> {
    /// Registers the notifier; call after the device list is set up.
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            // SAFETY: the module chain's operations; `call` handles its events.
            block <- unsafe {
                Notifier::register(Self::call, sys::register_module_notifier, sys::unregister_module_notifier)
            },
            _driver: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only for the module notifier chain, which passes a live `struct module` as
    /// `data` for the events it announces.
    unsafe extern "C" fn call(_nb: *mut sys::notifier_block, action: c_ulong, data: *mut c_void) -> c_int {
        for name in T::CONFLICTING_MODULES {
            // SAFETY: module notifiers receive the `struct module` the event is about,
            // alive for the call; `name` is NUL-terminated.
            match unsafe { sys::rroce_module_event(action, data, name.as_char_ptr()) } {
                sys::rroce_module_event_RROCE_MODULE_COMING => {
                    if let Err(e) = registry::conflicting_coming(name) {
                        // SAFETY: pure conversion.
                        return unsafe { sys::rroce_notifier_from_errno(e.to_errno()) };
                    }
                }
                sys::rroce_module_event_RROCE_MODULE_GOING => registry::conflicting_going(name),
                _ => {}
            }
        }
        sys::NOTIFY_DONE as c_int
    }
}
