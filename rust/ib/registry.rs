// SPDX-License-Identifier: GPL-2.0
//! The module's own list of its devices, from just before registration until
//! the core frees them, with the deferred unregistration of a device whose
//! netdev goes away.
//!
//! The core's lookups cannot serve here. `ib_device_get_by_netdev` fails
//! while a device's reference count is zero, as it is for the whole of a
//! move to another network namespace: a netdev unregistered then would go
//! unnoticed and wait forever for the reference its device holds. And
//! `ib_unregister_driver` selects by driver id, which rdma_rxe shares: at
//! unload it would take rdma_rxe's devices too.

use super::{Device, IbDriver};
use crate::net::{NetDev, OwnedQueue};
use crate::sys;
use core::any::TypeId;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::workqueue::{impl_has_work, new_work, Work, WorkItem};

struct Entry {
    ib: NonNull<sys::ib_device>,
    /// The driver whose `Device` this is (the container type behind `ib`).
    driver: TypeId,
    /// The netdev of port 1; compared, never dereferenced.
    ndev: *const sys::net_device,
    /// The netdev is unregistering: the device is found by netdev no more
    /// and its unregistration is queued.
    detached: bool,
    /// Module unload has unregistered it once already.
    unload_tried: bool,
}

struct Registry {
    devices: KVec<Entry>,
    /// Where deferred unregistrations run; drained at module unload.
    unregister_wq: Option<OwnedQueue>,
    /// A module that conflicts with this one is loaded (see `coexist`): no
    /// device may be added.
    conflicting_loaded: Option<&'static CStr>,
}

// SAFETY: the pointers are identities; a device is dereferenced only under the
// registry lock, which its `dealloc_driver` (see `remove`) takes before it is freed.
unsafe impl Send for Entry {}

kernel::sync::global_lock! {
    // SAFETY: initialised by `init` from module init, before any device exists.
    unsafe(uninit) static REGISTRY: Mutex<Registry> =
        Registry { devices: KVec::new(), unregister_wq: None, conflicting_loaded: None };
}

/// `REGISTRY` is being initialised / is initialised: nothing locks it before.
static STATE: AtomicU8 = AtomicU8::new(UNINIT);
const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const READY: u8 = 2;

/// Whether the registry may be locked (`init` finished).
fn ready() -> bool {
    STATE.load(Ordering::Acquire) == READY
}

/// Sets up the registry; call from module init before devices can be added.
pub(crate) fn init() -> Result {
    match STATE.compare_exchange(UNINIT, INITIALISING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // SAFETY: only the caller that moved the state out of `UNINIT` gets here, once;
            // nothing locks the registry before the state reads `READY`.
            unsafe { REGISTRY.init() };
            STATE.store(READY, Ordering::Release);
        }
        Err(READY) => {}
        // Another caller is initialising it right now.
        Err(_) => return Err(EBUSY),
    }
    let wq = OwnedQueue::new_unbound(c"rroce_unregister")?;
    REGISTRY.lock().unregister_wq = Some(wq);
    Ok(())
}

/// Lists a device about to be registered on `ndev`. Fails if the netdev is
/// already unregistering: its event may have been sent before the device
/// was listed, and the device would hold it forever.
///
/// # Safety
///
/// `ib` must be the `ib_device` of a `Device<T>` whose data is initialised
/// and whose ops are installed (so its `dealloc_driver` calls [`remove`]
/// before the data is dropped).
pub(super) unsafe fn add<T: IbDriver>(ib: NonNull<sys::ib_device>, ndev: &NetDev) -> Result {
    if !ready() {
        return Err(ENODEV);
    }
    let mut reg = REGISTRY.lock();
    if let Some(name) = reg.conflicting_loaded {
        pr_err!("cannot add a device while module {} is loaded: it would take this module's devices for its own\n", name);
        return Err(EBUSY);
    }
    reg.devices.push(
        Entry { ib, driver: TypeId::of::<T>(), ndev: ndev.as_raw(), detached: false, unload_tried: false },
        GFP_KERNEL,
    )?;
    // Checked after listing, under the lock: the state changes before the
    // event is sent, and the event handler takes this lock to look.
    if !ndev.is_registered() {
        reg.devices.pop();
        return Err(ENODEV);
    }
    Ok(())
}

/// A conflicting module is about to load: refused while devices are listed,
/// else recorded so none is added until it goes.
pub(super) fn conflicting_coming(name: &'static CStr) -> Result {
    if !ready() {
        return Ok(());
    }
    let mut reg = REGISTRY.lock();
    if !reg.devices.is_empty() {
        pr_err!("refusing to load {}: it would take this module's {} device(s) for its own; remove them first\n", name, reg.devices.len());
        return Err(EBUSY);
    }
    reg.conflicting_loaded = Some(name);
    Ok(())
}

/// A conflicting module went (or its load failed).
pub(super) fn conflicting_going(name: &'static CStr) {
    if !ready() {
        return;
    }
    let mut reg = REGISTRY.lock();
    if reg.conflicting_loaded.is_some_and(|n| n == name) {
        reg.conflicting_loaded = None;
    }
}

/// Whether a device's netdev began unregistering: it is marked so, or has
/// left the list already (unregistered).
pub(super) fn is_detached(ib: NonNull<sys::ib_device>) -> bool {
    !ready()
        || !REGISTRY.lock().devices.iter().any(|e| e.ib == ib && !e.detached)
}

/// Takes a device off the list; from its `dealloc_driver`, before it is freed.
pub(super) fn remove(ib: *mut sys::ib_device) {
    if !ready() {
        return;
    }
    let mut reg = REGISTRY.lock();
    if let Some(i) = reg.devices.iter().position(|e| e.ib.as_ptr() == ib) {
        // In bounds: just found.
        let _entry = reg.devices.remove(i);
    }
}

/// Runs `f` on the device of driver `T` bound to `ndev`, unless its netdev is
/// unregistering. `f` runs under the registry lock: it must not unregister
/// or free devices, nor wait for anything that does.
pub(crate) fn with_device<T: IbDriver, R>(ndev: &NetDev, f: impl FnOnce(&Device<T>) -> R) -> Option<R> {
    if !ready() {
        return None;
    }
    let reg = REGISTRY.lock();
    let e = reg.devices.iter().find(|e| is_bound::<T>(e, ndev))?;
    // SAFETY: a listed device of driver `T` is a `Device<T>` whose data is initialised
    // (it is listed after `ib_set_device_ops`, which follows the data's initialisation,
    // and leaves the list in `dealloc_driver`, which takes this lock, before the data
    // is dropped); the lock is held for the borrow.
    let dev = unsafe { Device::<T>::from_raw(e.ib.as_ptr()) };
    Some(f(dev))
}

/// The netdev `ndev` is unregistering: its device is found by netdev no more,
/// `going` runs on it (to stop using the netdev, under the registry lock as
/// for [`with_device`]), and its unregistration is queued. Unregistration
/// waits for a namespace move in progress, which the core's queued
/// unregistration would not notice.
pub(crate) fn detach<T: IbDriver>(ndev: &NetDev, going: impl FnOnce(&Device<T>)) {
    if !ready() {
        return;
    }
    let mut reg = REGISTRY.lock();
    let Some(i) = reg.devices.iter().position(|e| is_bound::<T>(e, ndev)) else { return };
    let ib = reg.devices[i].ib;
    // Allocated before the device is marked: without memory it stays found,
    // and the core's repeat of the event a second later tries again.
    // SAFETY: the registry lock is held and the device is listed.
    let work = match unsafe { Unregistration::new(ib) } {
        Ok(work) => work,
        Err(_) => {
            pr_err!("no memory to queue the removal of a device whose netdev is going; retrying\n");
            return;
        }
    };
    reg.devices[i].detached = true;
    // SAFETY: as in `with_device`.
    going(unsafe { Device::<T>::from_raw(ib.as_ptr()) });
    if let Some(wq) = reg.unregister_wq.as_ref() {
        // A new item: it cannot be queued already.
        drop(wq.enqueue(work));
    }
}

/// Whether `e` is a device of driver `T` bound to `ndev` and not detached.
fn is_bound<T: IbDriver>(e: &Entry, ndev: &NetDev) -> bool {
    e.ndev == ndev.as_raw().cast_const() && !e.detached && e.driver == TypeId::of::<T>()
}

/// Unregisters every device of this module and waits for it; then drains
/// queued unregistrations. Call at module unload, once no device can be
/// added. Netdev events may still come: once the queue is taken, they find
/// no device or queue nothing.
pub(crate) fn unregister_all() {
    kernel::task::might_sleep();
    if !ready() {
        return;
    }
    loop {
        let next = {
            let mut reg = REGISTRY.lock();
            reg.devices.iter_mut().find(|e| !e.unload_tried).map(|e| {
                e.unload_tried = true;
                // SAFETY: the device is listed, so alive; the reference is dropped below.
                unsafe { sys::rroce_ib_device_hold_memory(e.ib.as_ptr()) };
                e.ib
            })
        };
        let Some(ib) = next else { break };
        // SAFETY: the held reference keeps the memory alive; the core serialises this
        // with a concurrent unregistration or namespace move of the same device.
        unsafe {
            sys::ib_unregister_device(ib.as_ptr());
            sys::rroce_ib_device_release_memory(ib.as_ptr());
        }
    }
    let mut reg = REGISTRY.lock();
    // Every listed device was unregistered, which takes it off the list.
    kernel::warn_on!(!reg.devices.is_empty());
    // A static is never dropped: the list's buffer goes now, or every load
    // and unload of the module would leak it.
    let devices = core::mem::take(&mut reg.devices);
    let wq = reg.unregister_wq.take();
    drop(reg);
    drop(devices);
    drop(wq);
}

/// A device's deferred unregistration. Holds the device's memory (not its
/// registration) until it has run.
#[pin_data(PinnedDrop)]
struct Unregistration {
    ib: NonNull<sys::ib_device>,
    #[pin]
    work: Work<Unregistration>,
}

impl_has_work! {
    impl HasWork<Self> for Unregistration { self.work }
}

// SAFETY: the device pointer is used from the work item only, with the memory reference held.
unsafe impl Send for Unregistration {}
// SAFETY: as above; shared access never touches the device.
unsafe impl Sync for Unregistration {}

impl Unregistration {
    /// # Safety
    ///
    /// `ib` must be a listed device, the registry lock held (so it is alive:
    /// its `dealloc_driver` takes the lock to leave the list).
    unsafe fn new(ib: NonNull<sys::ib_device>) -> Result<Arc<Self>> {
        let work = Arc::pin_init(try_pin_init!(Self { ib, work <- new_work!("rroce_unregister") }), GFP_KERNEL)?;
        // SAFETY: per the contract, the device is alive.
        unsafe { sys::rroce_ib_device_hold_memory(ib.as_ptr()) };
        Ok(work)
    }
}

#[pinned_drop]
impl PinnedDrop for Unregistration {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: drops the reference taken in `new`.
        unsafe { sys::rroce_ib_device_release_memory(self.ib.as_ptr()) };
    }
}

impl WorkItem for Unregistration {
    type Pointer = Arc<Unregistration>;

    fn run(this: Arc<Unregistration>) {
        // SAFETY: the held reference keeps the memory alive. If the device is
        // unregistered already, or was not yet registered (its registration then
        // sees it detached and unregisters it), this returns at once.
        unsafe { sys::ib_unregister_device(this.ib.as_ptr()) };
    }
}
