// SPDX-License-Identifier: GPL-2.0
//! A driver's sysfs attributes: one named directory under each of its
//! devices (`/sys/class/infiniband/<dev>/<group>/<attr>`), installed by the
//! core as the ops table's `device_group`. The attributes are built once,
//! at module load, from the driver's names; they live in a static of the
//! driver ([`AttrGroup`]), which outlives every device of the module.

use super::{Device, IbDriver};
use crate::sys;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::ffi::c_char;
use kernel::prelude::*;

/// Attributes a driver may have.
const MAX_ATTRS: usize = 32;
/// Bytes of a sysfs page, which `show` fills.
const SYSFS_PAGE: usize = 4096;

struct Storage {
    attrs: [sys::device_attribute; MAX_ATTRS],
    /// Null-terminated list of `attrs`' embedded `struct attribute`s.
    list: [*mut sys::attribute; MAX_ATTRS + 1],
    group: sys::attribute_group,
}

/// The sysfs attribute group of driver `T`, in a static of the driver
/// (`IbDriver::attr_group`). Its callbacks read the device they are given as
/// a `Device<T>`, and only the ops table of driver `T` installs it, so the
/// attributes of one driver never reach a device of another:
///
/// ```compile_fail
/// fn group_of<T: IbDriver, U: IbDriver>(g: &'static AttrGroup<T>) -> &'static AttrGroup<U> {
///     g // mismatched types: the driver is part of the group's type
/// }
/// ```
pub(crate) struct AttrGroup<T: IbDriver> {
    storage: UnsafeCell<MaybeUninit<Storage>>,
    /// `UNCLAIMED`, then `BUILDING` while one `init` writes `storage`, then `READY`.
    state: AtomicU8,
    _driver: PhantomData<fn() -> T>,
}

// SAFETY: `storage` is written only by the one `init` call that claims `state` (so by one
// thread, once), and read only after `state` reads `READY`, which publishes the writes.
unsafe impl<T: IbDriver> Sync for AttrGroup<T> {}

const UNCLAIMED: u8 = 0;
const BUILDING: u8 = 1;
const READY: u8 = 2;

impl<T: IbDriver> AttrGroup<T> {
    /// An empty group, for a static; [`init_device_attrs`] builds it.
    pub(crate) const fn new() -> Self {
        Self { storage: UnsafeCell::new(MaybeUninit::zeroed()), state: AtomicU8::new(UNCLAIMED), _driver: PhantomData }
    }

    /// Builds the group from `T::attr_name`, once.
    fn init(&self) {
        if !T::HAS_ATTR_SHOW || self.state.compare_exchange(UNCLAIMED, BUILDING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        let st = self.storage.get().cast::<Storage>();
        let mut n = 0;
        // SAFETY: this call claimed `state`, so it is the only writer, and nothing reads the
        // storage before `READY` (the `Sync` contract). All-zero bytes are a valid `Storage`.
        unsafe {
            while n < MAX_ATTRS {
                let Some(name) = T::attr_name(n) else { break };
                let a = core::ptr::addr_of_mut!((*st).attrs[n]);
                (*a).attr.name = name.as_ptr().cast();
                let read_only = T::attr_read_only(n);
                (*a).attr.mode = if read_only { 0o444 } else { 0o644 };
                (*a).__bindgen_anon_1.show = Some(show::<T>);
                // Without `store` sysfs refuses writes itself, even root's.
                (*a).__bindgen_anon_2.store = if read_only { None } else { Some(store::<T>) };
                sys::rroce_sysfs_attr_init(core::ptr::addr_of_mut!((*a).attr));
                (*st).list[n] = core::ptr::addr_of_mut!((*a).attr);
                n += 1;
            }
            (*st).list[n] = core::ptr::null_mut();
            (*st).group.name = T::ATTR_GROUP.as_ptr().cast();
            (*st).group.__bindgen_anon_2.attrs = core::ptr::addr_of_mut!((*st).list).cast();
        }
        self.state.store(READY, Ordering::Release);
    }

    /// The group for the ops table of driver `T`, once built.
    pub(super) fn group(&'static self) -> *const sys::attribute_group {
        if self.state.load(Ordering::Acquire) != READY {
            return core::ptr::null();
        }
        // SAFETY: `READY` says the storage is built and no longer written.
        unsafe { core::ptr::addr_of!((*self.storage.get().cast::<Storage>()).group) }
    }

    /// Index of `attr` in the storage.
    fn index_of(&self, attr: *const sys::device_attribute) -> Option<usize> {
        let base = self.storage.get().cast::<Storage>().cast_const();
        // SAFETY: computing the address of a field of the storage, no access.
        let first = unsafe { core::ptr::addr_of!((*base).attrs) }.cast::<sys::device_attribute>();
        let off = (attr as usize).checked_sub(first as usize)?;
        let i = off / core::mem::size_of::<sys::device_attribute>();
        (i < MAX_ATTRS && off % core::mem::size_of::<sys::device_attribute>() == 0).then_some(i)
    }
}

/// Builds the attribute group of driver `T`, if it has one. Called once
/// from module init, before any device registers.
pub(crate) fn init<T: IbDriver>() {
    if let Some(g) = T::attr_group() {
        g.init();
    }
}

/// The attribute group the ops table of driver `T` installs, or null.
pub(super) fn group<T: IbDriver>() -> *const sys::attribute_group {
    T::attr_group().map_or(core::ptr::null(), AttrGroup::group)
}

/// Index of `attr` in the group of driver `T`.
fn index_of<T: IbDriver>(attr: *const sys::device_attribute) -> Option<usize> {
    T::attr_group()?.index_of(attr)
}

/// # Safety
///
/// `dev` must be the `struct device` of a registered device of driver `T`.
unsafe fn device_of<'a, T: IbDriver>(dev: *mut sys::device) -> &'a Device<T> {
    // SAFETY: per the contract the device embeds in an `ib_device` allocated as a
    // `Device<T>`; sysfs removes the attributes before the core frees it.
    unsafe { &*sys::rroce_device_to_ibdev(dev).cast::<Device<T>>() }
}

/// # Safety
///
/// `dev` and `attr` must be what sysfs passes to the `show` callback of one
/// of the device attributes `AttrGroup::<T>::init` made, and `buf` a page it provides.
unsafe extern "C" fn show<T: IbDriver>(dev: *mut sys::device, attr: *mut sys::device_attribute, buf: *mut c_char) -> isize {
    let Some(id) = index_of::<T>(attr) else { return EINVAL.to_errno() as isize };
    // SAFETY: only the ops table of driver `T` installs `AttrGroup<T>`, whose callbacks
    // these are (`group`): `dev` is a device of driver `T`.
    let d = unsafe { device_of::<T>(dev) };
    // SAFETY: sysfs hands `show` a zeroed page of `SYSFS_PAGE` bytes to fill.
    let page = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), SYSFS_PAGE) };
    match T::attr_show(d, id, page) {
        Ok(len) => len.min(SYSFS_PAGE) as isize,
        Err(e) => e.to_errno() as isize,
    }
}

/// # Safety
///
/// `dev` and `attr` must be what sysfs passes to the `store` callback of one
/// of the device attributes `AttrGroup::<T>::init` made, and `buf` `len` bytes it provides.
unsafe extern "C" fn store<T: IbDriver>(
    dev: *mut sys::device,
    attr: *mut sys::device_attribute,
    buf: *const c_char,
    count: usize,
) -> isize {
    let Some(id) = index_of::<T>(attr) else { return EINVAL.to_errno() as isize };
    // SAFETY: as in `show`.
    let d = unsafe { device_of::<T>(dev) };
    // SAFETY: sysfs passes `count` bytes of the user's write, copied into the kernel.
    let input = unsafe { core::slice::from_raw_parts(buf.cast::<u8>(), count) };
    match T::attr_store(d, id, input) {
        Ok(()) => count as isize,
        Err(e) => e.to_errno() as isize,
    }
}
