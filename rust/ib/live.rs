// SPDX-License-Identifier: GPL-2.0
//! Revocable pointers to core objects, for driver state that may outlive
//! them (deferred work, inline runs, lookup tables).

use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::{Arc, LockClassKey, SpinLockIrq};

/// A core object's pointer, shared between this layer and the handles it
/// gives the driver: set at creation, cleared by this layer's destroy
/// trampoline after the driver's destroy returned and before the core frees
/// the object. Users reach the object only through [`Self::with`], under the
/// lock, so revocation waits for a use in progress.
///
/// The lock turns interrupts off, so users may be in any context: process
/// or softirq (the driver's today), hard IRQ, under the driver's own locks.
#[pin_data]
pub(crate) struct LiveObj<C> {
    #[pin]
    obj: SpinLockIrq<Option<CorePtr<C>>>,
}

/// The pointer inside a [`LiveObj`].
struct CorePtr<C>(NonNull<C>);

// SAFETY: the pointer is only dereferenced through `LiveObj::with`, under the
// lock and while set, i.e. while the core object is alive; the core objects
// are shared between CPUs by the core itself, so the CPU that holds the
// pointer does not matter.
unsafe impl<C> Send for CorePtr<C> {}

impl<C> LiveObj<C> {
    /// A live pointer to `obj`. Process context: the allocation may sleep.
    pub(super) fn new(obj: NonNull<C>, name: &'static CStr, key: Pin<&'static LockClassKey>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self { obj <- SpinLockIrq::new(Some(CorePtr(obj)), name, key) }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Calls `f` with the object unless it is revoked (then `None`), holding
    /// the lock (so `f` must not sleep, nor use this target again); the
    /// object is alive for the whole call.
    pub(super) fn with<R>(&self, f: impl FnOnce(NonNull<C>) -> R) -> Option<R> {
        self.obj.lock().as_ref().map(|p| f(p.0))
    }

    /// Clears the pointer, once a call of [`Self::with`] in progress returned.
    pub(super) fn revoke(&self) {
        *self.obj.lock() = None;
    }

    /// Runs the rest of a create verb, `f`, revoking the target if it fails:
    /// the driver may have kept a clone, and the core then frees the object
    /// without destroying it.
    pub(super) fn revoke_on_error<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let res = f();
        if res.is_err() {
            self.revoke();
        }
        res
    }
}
