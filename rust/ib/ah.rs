// SPDX-License-Identifier: GPL-2.0
//! Address handles: the core's `struct ib_ah` followed by the driver's data.

use super::av::read_av;
use super::{CoreObj, Device, IbDriver, Udata};
use crate::sys;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

/// The driver data of `ah`, if it is one of device `ib`'s: a kernel consumer
/// may hand any AH to a UD work request, one of another RDMA device included,
/// whose data (another driver's, or this driver's for another device) is not
/// what this device's requests may read.
///
/// # Safety
///
/// `ah` must be a live AH (created successfully, not yet destroyed) whose
/// consumer keeps it alive for `'a`.
pub(super) unsafe fn ah_data<'a, T: IbDriver>(ib: *mut sys::ib_device, ah: *mut sys::ib_ah) -> Option<&'a T::AhData> {
    // SAFETY: a live AH's `device` is set by the core before it is created and never
    // changes. An AH of device `ib`, a device of driver `T`, was created by
    // `AhOps::<T>::create`, which initialised its data; it stays initialised until
    // `destroy`, after the consumer's last use (the contract).
    unsafe { ((*ah).device == ib).then(|| CoreObj::<sys::ib_ah, T::AhData>::data(ah)) }
}

/// The trampolines of the AH verbs.
pub(super) struct AhOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> AhOps<T> {
    /// # Safety
    ///
    /// Only the RDMA core calls this, as `create_ah` and `create_user_ah`, by the contract
    /// of [`Adapter`].
    pub(super) unsafe extern "C" fn create(
        ah: *mut sys::ib_ah,
        init: *mut sys::rdma_ah_init_attr,
        udata: *mut sys::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes an AH with `device` and `pd` (a live PD of ours,
            // which the AH holds) set, valid init attributes, and a udata that is valid or
            // null (kernel consumers).
            let (dev, pd, attr, mut udata) = unsafe {
                (
                    Device::<T>::from_raw((*ah).device),
                    CoreObj::<sys::ib_pd, T::PdData>::data((*ah).pd),
                    &*(*init).ah_attr,
                    Udata::from_raw(udata),
                )
            };
            // SAFETY: the core's attributes for this `create_ah`.
            let av = unsafe { read_av(attr) }.map_err(|_| EINVAL)?;
            let data = T::create_ah(dev, pd, &av, &mut udata)?;
            // SAFETY: a zeroed AH of our announced size, not yet published: nothing else
            // uses it.
            unsafe { CoreObj::<sys::ib_ah, T::AhData>::init(ah, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `destroy_ah`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn destroy(ah: *mut sys::ib_ah, _flags: u32) -> c_int {
        // SAFETY: only AHs whose creation succeeded are destroyed, once, when no
        // request uses them any more (the consumer's contract with the core).
        let (data, dev) = unsafe { (CoreObj::<sys::ib_ah, T::AhData>::take(ah), Device::<T>::from_raw((*ah).device)) };
        T::destroy_ah(dev, data);
        0
    }
}
