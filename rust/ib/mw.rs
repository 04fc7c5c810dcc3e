// SPDX-License-Identifier: GPL-2.0
//! Memory windows: the core's `struct ib_mw` followed by the driver's data.
//! The core checks the type and allocates the container; the driver gives
//! the window its R_Key.

use super::{CoreObj, Device, IbDriver, Udata};
use crate::sys;
use kernel::error::from_result;
use kernel::ffi::c_int;

/// The trampolines of the MW verbs.
pub(super) struct MwOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> MwOps<T> {
    /// # Safety
    ///
    /// Only the RDMA core calls this, as `alloc_mw`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn alloc(mw: *mut sys::ib_mw, udata: *mut sys::ib_udata) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a zeroed MW of our announced size with `device`, `pd`
            // and `type` set, and the udata of the uverbs call.
            let (obj, dev, pd, ty, mut udata) = unsafe {
                (
                    CoreObj::<sys::ib_mw, T::MwData>::from_core(mw),
                    Device::<T>::from_raw((*mw).device),
                    CoreObj::<sys::ib_pd, T::PdData>::from_core((*mw).pd).data.assume_init_ref(),
                    (*mw).type_,
                    Udata::from_raw(udata),
                )
            };
            let (data, rkey) = T::alloc_mw(dev, pd, ty, &mut udata)?;
            obj.data.write(data);
            // SAFETY: the core reads the key back after this returns; nothing else uses it yet.
            unsafe { (*mw).rkey = rkey };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `dealloc_mw`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn dealloc(mw: *mut sys::ib_mw) -> c_int {
        // SAFETY: only MWs whose allocation succeeded are deallocated, once; the core
        // frees the container after this returns.
        let (data, dev) = unsafe {
            let obj = CoreObj::<sys::ib_mw, T::MwData>::from_core(mw);
            (obj.data.assume_init_read(), Device::<T>::from_raw((*mw).device))
        };
        T::dealloc_mw(dev, data);
        0
    }
}
