// SPDX-License-Identifier: GPL-2.0
//! A driver's own attributes of its QPs, CQs and MRs in `rdma res show
//! ... -dd` (the `fill_res_*_entry` operations): name-value pairs the core
//! nests under `RDMA_NLDEV_ATTR_DRIVER`.
//!
//! The core calls these from its netlink dump or query, in process context
//! with no lock of its own held, holding a reference to the object: it is
//! alive and fully created (the core lists it only after its create
//! succeeded, and a destroy waits for the references to go first).

use super::*;
use core::ffi::CStr;

/// The driver's attributes of one object, written into the reply.
pub(crate) struct ResAttrs<'a> {
    msg: NonNull<sys::sk_buff>,
    /// Borrowed from the core's call.
    _call: core::marker::PhantomData<&'a mut sys::sk_buff>,
}

/// The reply's room ran out: the core sends the object in the next message.
fn put_result(ret: c_int) -> Result {
    if ret == 0 { Ok(()) } else { Err(EMSGSIZE) }
}

impl ResAttrs<'_> {
    pub(crate) fn u32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: `msg` is the core's message for the call, inside our nest.
        put_result(unsafe { sys::rdma_nl_put_driver_u32(self.msg.as_ptr(), name.as_char_ptr(), value) })
    }

    pub(crate) fn u64(&mut self, name: &CStr, value: u64) -> Result {
        // SAFETY: as in `u32`.
        put_result(unsafe { sys::rdma_nl_put_driver_u64(self.msg.as_ptr(), name.as_char_ptr(), value) })
    }

    /// A value best read in hex (a PSN, a key).
    pub(crate) fn hex32(&mut self, name: &CStr, value: u32) -> Result {
        // SAFETY: as in `u32`.
        put_result(unsafe { sys::rdma_nl_put_driver_u32_hex(self.msg.as_ptr(), name.as_char_ptr(), value) })
    }

    pub(crate) fn str(&mut self, name: &CStr, value: &CStr) -> Result {
        // SAFETY: as in `u32`; both strings are NUL-terminated.
        put_result(unsafe { sys::rdma_nl_put_driver_string(self.msg.as_ptr(), name.as_char_ptr(), value.as_char_ptr()) })
    }

    /// Runs `f` on the attributes of the object the core is writing into
    /// `msg`, inside the driver's nest (taken out again if `f` fails).
    ///
    /// # Safety
    ///
    /// `msg` must be the message of a `fill_res_*_entry` call in progress.
    unsafe fn fill(msg: *mut sys::sk_buff, f: impl FnOnce(&mut ResAttrs<'_>) -> Result) -> c_int {
        let Some(msg) = NonNull::new(msg) else { return EINVAL.to_errno() };
        // SAFETY: the core's message, per the contract.
        let nest = unsafe { sys::rroce_res_driver_begin(msg.as_ptr()) };
        if nest.is_null() {
            return EMSGSIZE.to_errno();
        }
        let res = f(&mut ResAttrs { msg, _call: core::marker::PhantomData });
        // SAFETY: `nest` was opened in `msg` above and nothing after it was closed.
        unsafe { sys::rroce_res_driver_end(msg.as_ptr(), nest, res.is_ok()) };
        match res {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        }
    }
}

/// The trampolines of `fill_res_{qp,cq,mr}_entry`.
pub(super) struct ResOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> ResOps<T> {
    /// # Safety
    ///
    /// Only the RDMA core calls this, as `fill_res_qp_entry`, by the contract of
    /// [`Adapter`] and of this module.
    pub(super) unsafe extern "C" fn qp(msg: *mut sys::sk_buff, ib: *mut sys::ib_qp) -> c_int {
        // SAFETY: a live QP of ours whose creation succeeded (see the module's comment).
        let qp = unsafe { Qp::<T>::from_raw(ib) };
        // SAFETY: the core's message for this call.
        unsafe { ResAttrs::fill(msg, |out| T::fill_res_qp(qp, out)) }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `fill_res_cq_entry`, as [`Self::qp`].
    pub(super) unsafe extern "C" fn cq(msg: *mut sys::sk_buff, ib: *mut sys::ib_cq) -> c_int {
        // SAFETY: a live CQ of ours whose creation succeeded.
        let cq = unsafe { Cq::<T>::from_raw(ib) };
        // SAFETY: the core's message for this call.
        unsafe { ResAttrs::fill(msg, |out| T::fill_res_cq(cq, out)) }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `fill_res_mr_entry`, as [`Self::qp`].
    pub(super) unsafe extern "C" fn mr(msg: *mut sys::sk_buff, ib: *mut sys::ib_mr) -> c_int {
        // SAFETY: a live MR whose creation succeeded, held by the core for the call.
        let Some(mr) = (unsafe { super::mr::mr_data::<T>((*ib).device, ib) }) else { return 0 };
        // SAFETY: the core's message for this call.
        unsafe { ResAttrs::fill(msg, |out| T::fill_res_mr(mr, out)) }
    }
}
