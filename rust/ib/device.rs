// SPDX-License-Identifier: GPL-2.0
//! Allocation, registration and lookup of provider devices.

use super::{registry, Adapter, IbDriver};
use crate::net::{NetDev, NetDevRef};
use crate::sys;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::prelude::*;
use kernel::types::Opaque;

/// A registered device: the core's `struct ib_device` followed by the
/// driver's data. The core allocates and frees it; the data lives from
/// [`register_device`] until the core's final `dealloc_driver` call.
///
/// # Invariants
///
/// `data` is initialised whenever a `&Device<T>` exists.
#[repr(C)]
#[pin_data]
pub(crate) struct Device<T: IbDriver> {
    #[pin]
    ib: Opaque<sys::ib_device>,
    #[pin]
    data: T::DevData,
}

impl<T: IbDriver> Device<T> {
    /// # Safety
    ///
    /// `ib` must be the `ib_device` of a `Device<T>` whose data is initialised and which
    /// stays alive for `'a`.
    pub(super) unsafe fn from_raw<'a>(ib: *mut sys::ib_device) -> &'a Self {
        // SAFETY: `ib` is the first field of the `repr(C)` container.
        unsafe { &*ib.cast::<Self>() }
    }

    /// Drops the driver data.
    ///
    /// # Safety
    ///
    /// The data must be initialised and never used again.
    pub(super) unsafe fn drop_data(ib: *mut sys::ib_device) {
        let this = ib.cast::<Self>();
        // SAFETY: per the contract.
        unsafe { core::ptr::drop_in_place(core::ptr::addr_of_mut!((*this).data)) };
    }

    pub(super) fn raw(&self) -> *mut sys::ib_device {
        self.ib.get()
    }

    /// The driver's per-device data.
    pub(crate) fn data(&self) -> &T::DevData {
        &self.data
    }

    /// A counted reference to this device.
    pub(crate) fn to_ref(&self) -> Option<DeviceRef<T>> {
        // SAFETY: the device is alive; on success we own one reference.
        unsafe { sys::rroce_ib_device_try_get(self.raw()) }.then(|| DeviceRef(NonNull::from(self)))
    }

    /// The device name (`rroce0`) as it is now, for messages: a copy, since
    /// the core names a device only when it registers it (empty before) and
    /// a rename replaces the name at any time.
    pub(crate) fn name(&self) -> DeviceName {
        let mut buf = [0u8; DEVICE_NAME_MAX];
        // SAFETY: the device is alive; the helper writes at most `buf.len()` bytes, NUL
        // included, into `buf`.
        unsafe { sys::rroce_ib_device_name_copy(self.raw(), buf.as_mut_ptr().cast(), buf.len()) };
        crate::net::NameCopy(buf)
    }

    /// The network device of port 1, with a reference held. Any context,
    /// softirq included (read under RCU, not under the core's netdev lock).
    pub(crate) fn netdev(&self) -> Option<NetDevRef> {
        // SAFETY: the device is alive; the helper returns a held reference or null.
        unsafe { NetDevRef::from_held(sys::rroce_ib_port_netdev_hold(self.raw(), 1)) }
    }

    /// Link speed and width of the port as the core derives them from ethtool.
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: the device is alive and the out pointers are valid.
        kernel::error::to_result(unsafe { sys::ib_get_eth_speed(self.raw(), port, &mut speed, &mut width) })?;
        Ok((speed, width))
    }

    /// Sets the node description shown by `ibv_devinfo`. Concurrent writers
    /// may mix their bytes, and a reader may see a mix of old and new bytes
    /// (rdma_rxe's plain copy allows the same): the core takes no lock.
    pub(crate) fn set_node_desc(&self, desc: &[u8; super::device_attr::NODE_DESC_LEN]) {
        // The type checks that the core's field has the length of `desc`.
        // SAFETY: the device is alive; only the field's address is taken.
        let field: *mut [kernel::ffi::c_char; super::device_attr::NODE_DESC_LEN] =
            unsafe { core::ptr::addr_of_mut!((*self.raw()).node_desc) };
        for (i, &b) in desc.iter().enumerate() {
            // SAFETY: `i` is inside the field of a live device. Neither `ib_modify_device`
            // nor sysfs serialise writers (two `node_desc` stores) with each other or with
            // readers (`node_desc` show), so each byte is stored atomically and racing
            // calls of this make no plain access race.
            let byte = unsafe { AtomicU8::from_ptr(field.cast::<u8>().add(i)) };
            byte.store(b, Ordering::Relaxed);
        }
    }
}

/// Room for a device name (`IB_DEVICE_NAME_MAX`).
const DEVICE_NAME_MAX: usize = 64;

/// A copy of a device's name (see [`Device::name`]).
pub(crate) type DeviceName = crate::net::NameCopy<DEVICE_NAME_MAX>;

/// A counted reference to a device of this driver.
pub(crate) struct DeviceRef<T: IbDriver>(NonNull<Device<T>>);

impl<T: IbDriver> DeviceRef<T> {
    /// The device of this driver bound to `ndev`, if any.
    pub(crate) fn by_netdev(ndev: &NetDev) -> Option<Self> {
        // SAFETY: `ndev` is alive; the core returns a device with a reference held or null.
        let ib = unsafe { sys::ib_device_get_by_netdev(ndev.as_raw(), T::DRIVER_ID.to_raw()) };
        let ib = NonNull::new(ib)?;
        // Another provider with the same driver id (rdma_rxe) must not be mistaken for ours:
        // only devices whose ops belong to this module are.
        // SAFETY: the held reference keeps the device and its ops alive.
        let ours = unsafe { (*ib.as_ptr()).ops.owner == sys::rroce_this_module() };
        if !ours {
            // SAFETY: releases the reference taken above.
            unsafe { sys::ib_device_put(ib.as_ptr()) };
            return None;
        }
        Some(Self(ib.cast()))
    }
}

// SAFETY: a counted device reference may be used and released from any context.
unsafe impl<T: IbDriver> Send for DeviceRef<T> {}
// SAFETY: the device's data is `Sync`; `&DeviceRef` gives only shared access.
unsafe impl<T: IbDriver> Sync for DeviceRef<T> {}

impl<T: IbDriver> core::ops::Deref for DeviceRef<T> {
    type Target = Device<T>;
    fn deref(&self) -> &Device<T> {
        // SAFETY: the held reference keeps the registered device (and its data) alive.
        unsafe { self.0.as_ref() }
    }
}

impl<T: IbDriver> Drop for DeviceRef<T> {
    fn drop(&mut self) {
        // SAFETY: `self` owns one reference.
        unsafe { sys::ib_device_put(self.0.as_ptr().cast()) };
    }
}

/// Identity and capabilities fixed at registration.
pub(crate) struct DeviceParams<'a> {
    pub(crate) name: &'a CStr,
    pub(crate) node_desc: &'a [u8],
    pub(crate) node_guid: u64,
}

/// Allocates, initialises and registers a device bound to port 1 of `ndev`.
/// On error everything is released again and nothing stays registered.
pub(crate) fn register_device<T: IbDriver>(
    params: &DeviceParams<'_>,
    ndev: &NetDev,
    data: impl PinInit<T::DevData, Error>,
) -> Result {
    kernel::task::might_sleep();
    // The namespace the device is created in must stay alive until it is
    // registered (the core lists it then, and moves it out when the namespace
    // goes); the netdev may move meanwhile, so a counted reference holds it.
    let net = ndev.get_net().ok_or(ENODEV)?;
    // SAFETY: the size covers the whole container; the core zeroes it and initialises the
    // leading `ib_device`. `net` is held until this function returns, after registration.
    let ib = unsafe { sys::_ib_alloc_device(core::mem::size_of::<Device<T>>(), net.as_raw()) };
    if ib.is_null() {
        return Err(ENOMEM);
    }
    let dev = ib.cast::<Device<T>>();
    // SAFETY: `data` is the uninitialised driver part of the fresh container, pinned in
    // place by the core's allocation.
    if let Err(e) = unsafe { pin_init::raw_try_init(core::ptr::addr_of_mut!((*dev).data), data) } {
        // SAFETY: no ops are installed yet, so freeing runs no driver callback.
        unsafe { sys::ib_dealloc_device(ib) };
        return Err(e);
    }

    let mut ops = Adapter::<T>::ops();
    // SAFETY: returns this module's `struct module`.
    ops.owner = unsafe { sys::rroce_this_module() };
    // SAFETY: `ib` is a freshly allocated, unregistered device we own; setting its identity
    // and ops before registration is what the core expects. From `ib_set_device_ops` on,
    // `ib_dealloc_device` drops the driver data through `dealloc_driver`.
    unsafe {
        sys::rroce_ib_mark_name_assigned_by_user(ib);
        let raw = &mut *ib;
        let n = params.node_desc.len().min(raw.node_desc.len() - 1);
        for (d, s) in raw.node_desc.iter_mut().zip(&params.node_desc[..n]) {
            *d = *s as _;
        }
        raw.node_type = sys::RDMA_NODE_IB_CA as _;
        raw.phys_port_cnt = crate::proto::limits::NUM_PORTS;
        raw.num_comp_vectors = sys::rroce_num_possible_cpus() as _;
        raw.local_dma_lkey = 0;
        raw.node_guid = params.node_guid;
        raw.uverbs_cmd_mask |= (1u64 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_POST_SEND)
            | (1u64 << sys::ib_uverbs_write_cmds_IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
        sys::ib_set_device_ops(ib, &ops);
    }
    // Listed from here until `dealloc_driver` (installed with the ops) takes it off.
    let listed = NonNull::new(ib).ok_or(ENOMEM)?;
    // SAFETY: a `Device<T>` whose data was initialised and whose ops were installed above.
    if let Err(e) = unsafe { registry::add::<T>(listed, ndev) } {
        // SAFETY: unregistered device we own; this drops the driver data.
        unsafe { sys::ib_dealloc_device(ib) };
        return Err(e);
    }

    // SAFETY: `ib` is ours and unregistered; `ndev` is alive (the core takes its own reference).
    let ret = unsafe { sys::ib_device_set_netdev(ib, ndev.as_raw(), 1) };
    if ret != 0 {
        // SAFETY: unregistered device we own; this drops the driver data.
        unsafe { sys::ib_dealloc_device(ib) };
        return Err(Error::from_errno(ret));
    }
    // The device may be unregistered (and freed) by the time registration returns,
    // if its netdev goes meanwhile: its memory is held across.
    // SAFETY: `ib` is alive (ours).
    unsafe { sys::rroce_ib_device_hold_memory(ib) };
    // SAFETY: `ib` is fully set up; a null DMA device selects the core's virtual DMA ops.
    let ret = unsafe { sys::ib_register_device(ib, params.name.as_char_ptr(), core::ptr::null_mut()) };
    if ret != 0 {
        // SAFETY: registration failed, so the device is still ours alone; the memory
        // reference goes before the final one.
        unsafe {
            sys::rroce_ib_device_release_memory(ib);
            sys::ib_dealloc_device(ib);
        }
        return Err(Error::from_errno(ret));
    }
    // The netdev began unregistering during registration: its event's queued
    // unregistration may have run before there was anything to unregister.
    let detached = registry::is_detached(listed);
    // SAFETY: the memory is held; unregistering an unregistered device is a no-op.
    unsafe {
        if detached {
            sys::ib_unregister_device(ib);
        }
        sys::rroce_ib_device_release_memory(ib);
    }
    drop(net);
    if detached {
        return Err(ENODEV);
    }
    // From here on the core owns the device; it may already be unregistered again.
    Ok(())
}
