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
            // SAFETY: the core passes an MW with `device`, `pd` (a live PD of ours, which
            // the MW holds) and `type` set, and the udata of the uverbs call.
            let (dev, pd, ty, mut udata) = unsafe {
                (
                    Device::<T>::from_raw((*mw).device),
                    CoreObj::<sys::ib_pd, T::PdData>::data((*mw).pd),
                    (*mw).type_,
                    Udata::from_raw(udata),
                )
            };
            let (data, rkey) = T::alloc_mw(dev, pd, ty, &mut udata)?;
            // SAFETY: a zeroed MW of our announced size, not yet published: nothing else
            // uses it, and the core reads the key back after this returns.
            unsafe {
                CoreObj::<sys::ib_mw, T::MwData>::init(mw, data);
                (*mw).rkey = rkey;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `dealloc_mw`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn dealloc(mw: *mut sys::ib_mw) -> c_int {
        // SAFETY: only MWs whose allocation succeeded are deallocated, once, when no
        // verb uses them any more; the core frees the container after this returns. Their
        // `pd`, set by the core at allocation, is a PD of ours whose use count the window
        // holds until this returns.
        let (data, dev, pdd) = unsafe {
            let pdd = CoreObj::<sys::ib_pd, T::PdData>::data((*mw).pd);
            (CoreObj::<sys::ib_mw, T::MwData>::take(mw), Device::<T>::from_raw((*mw).device), pdd)
        };
        T::dealloc_mw(dev, pdd, data);
        0
    }
}
