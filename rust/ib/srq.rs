// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: the core's `struct ib_srq` followed by the
//! driver's data.

use super::live::LiveObj;
use super::{IbDriver, Udata, UserContext};
use crate::sys;
use core::ptr::NonNull;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::{c_str, static_lock_class};

/// Sizes of an SRQ (`struct ib_srq_attr`).
#[derive(Clone, Copy, Default)]
pub(crate) struct SrqAttrs {
    pub(crate) max_wr: u32,
    pub(crate) max_sge: u32,
    /// Armed limit; 0 when disarmed.
    pub(crate) srq_limit: u32,
}

impl SrqAttrs {
    fn from_ib(a: &sys::ib_srq_attr) -> Self {
        Self { max_wr: a.max_wr, max_sge: a.max_sge, srq_limit: a.srq_limit }
    }

    fn write(&self, a: &mut sys::ib_srq_attr) {
        a.max_wr = self.max_wr;
        a.max_sge = self.max_sge;
        a.srq_limit = self.srq_limit;
    }
}

/// `IB_SRQ_MAX_WR`: resize.
pub(crate) const SRQ_MAX_WR: u32 = sys::ib_srq_attr_mask_IB_SRQ_MAX_WR;
/// `IB_SRQ_LIMIT`: arm the limit event.
pub(crate) const SRQ_LIMIT: u32 = sys::ib_srq_attr_mask_IB_SRQ_LIMIT;

/// A shared receive queue of driver `T`; this layer keeps the target of its events.
pub(crate) type Srq<T> = super::DeviceObj<T, sys::ib_srq, <T as IbDriver>::SrqData, Arc<LiveObj<sys::ib_srq>>>;

/// The SRQ a QP being created receives from, borrowed for the `create_qp`
/// call: what the driver keeps beyond it is its own counted reference to
/// the SRQ's data.
pub(crate) struct SrqHandle<'a, T: IbDriver>(&'a Srq<T>);

impl<'a, T: IbDriver> SrqHandle<'a, T> {
    pub(crate) fn get(&self) -> &'a Srq<T> {
        self.0
    }
}

/// Where the limit event of an SRQ goes. The driver may keep it in state
/// that outlives the SRQ: this layer revokes it in the SRQ's destroy, after
/// the driver's `destroy_srq` returned, and events raised from then on are
/// dropped. Handlers run with the event target's lock held.
pub(crate) struct SrqEvents(Arc<LiveObj<sys::ib_srq>>);

impl SrqEvents {
    /// Reports `IB_EVENT_SRQ_LIMIT_REACHED` to the consumer.
    pub(crate) fn limit_reached(&self) {
        self.0.with(|ib| {
            // SAFETY: `with` lends the SRQ only until the destroy trampoline revokes it,
            // which it does before the core frees the SRQ.
            unsafe {
                super::event::raise(
                    super::event::EventSource::Srq(ib.as_ptr()),
                    sys::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
                )
            }
        });
    }
}

/// The trampolines of the SRQ verbs.
pub(super) struct SrqOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> SrqOps<T> {
    /// # Safety
    ///
    /// Only the RDMA core calls this, as `create_srq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn create(
        ib: *mut sys::ib_srq,
        init: *mut sys::ib_srq_init_attr,
        udata_raw: *mut sys::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a zeroed SRQ of our announced size with `device`,
            // `pd` (a live PD of ours, whose `usecnt` it holds) and the event handler set,
            // valid init attributes and a valid or null udata.
            let (dev, pd, init, mut udata, uctx) = unsafe {
                (
                    super::Device::<T>::from_raw((*ib).device),
                    super::CoreObj::<sys::ib_pd, T::PdData>::data((*ib).pd),
                    &mut *init,
                    Udata::from_raw(udata_raw),
                    UserContext::from_udata(udata_raw),
                )
            };
            if init.srq_type != sys::ib_srq_type_IB_SRQT_BASIC {
                return Err(EOPNOTSUPP);
            }
            let live = LiveObj::new(NonNull::new(ib).ok_or(EINVAL)?, c_str!("rroce_srq_events"), static_lock_class!())?;
            live.revoke_on_error(|| {
                let events = SrqEvents(live.clone());
                let (data, attrs) =
                    T::create_srq(dev, pd, SrqAttrs::from_ib(&init.attr), events, uctx.as_ref(), &mut udata)?;
                // SAFETY: an SRQ of ours the core has not published, its slot uninitialised;
                // on error the core frees it without calling `destroy`.
                unsafe { Srq::<T>::init(ib, data, live.clone())? };
                attrs.write(&mut init.attr);
                Ok(0)
            })
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `modify_srq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn modify(
        ib: *mut sys::ib_srq,
        attr: *mut sys::ib_srq_attr,
        mask: sys::ib_srq_attr_mask,
        udata_raw: *mut sys::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: a live SRQ of ours, valid attributes and udata for the call.
            let (srq, attr, mut udata, uctx) = unsafe {
                (Srq::<T>::from_raw(ib), &mut *attr, Udata::from_raw(udata_raw), UserContext::from_udata(udata_raw))
            };
            let mut a = SrqAttrs::from_ib(attr);
            T::modify_srq(srq, &mut a, mask, uctx.as_ref(), &mut udata)?;
            a.write(attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `query_srq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn query(ib: *mut sys::ib_srq, attr: *mut sys::ib_srq_attr) -> c_int {
        from_result(|| {
            // SAFETY: a live SRQ of ours and a writable attribute struct for the call.
            let (srq, attr) = unsafe { (Srq::<T>::from_raw(ib), &mut *attr) };
            T::query_srq(srq).write(attr);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `post_srq_recv`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn post_recv(
        ib: *mut sys::ib_srq,
        wr: *const sys::ib_recv_wr,
        bad_wr: *mut *const sys::ib_recv_wr,
    ) -> c_int {
        // SAFETY: a live SRQ of ours.
        let srq = unsafe { Srq::<T>::from_raw(ib) };
        // SAFETY: a live SRQ, whose `uobject` the core sets before `create_srq` and keeps
        // for its life; `bad_wr` is null or a valid out pointer.
        if let Some(e) = unsafe { super::qp::user_list(!(*ib).uobject.is_null(), wr, bad_wr) } {
            return e;
        }
        // SAFETY: the core passes a kernel consumer's list (a user's was refused above) and
        // out pointer.
        unsafe { super::qp::post_recv_list(wr, bad_wr, |r| T::post_srq_recv(srq, r)) }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `destroy_srq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn destroy(ib: *mut sys::ib_srq, _udata: *mut sys::ib_udata) -> c_int {
        // SAFETY: only SRQs whose creation succeeded are destroyed, once, with no QP left
        // using them (the core checks `usecnt`).
        let srq = unsafe { Srq::<T>::from_raw(ib) };
        T::destroy_srq(srq);
        // The driver's state may outlive the SRQ: its events go nowhere from here on.
        srq.ib_data().revoke();
        // SAFETY: destroyed above; the core frees the SRQ after this returns.
        unsafe { Srq::<T>::drop_slot(ib) };
        0
    }
}

/// The SRQ handle of a QP's creation attributes.
///
/// # Safety
///
/// `srq` must be null or an SRQ of driver `T` alive for `'a`.
pub(super) unsafe fn handle<'a, T: IbDriver>(srq: *mut sys::ib_srq) -> Option<SrqHandle<'a, T>> {
    // SAFETY: per the contract.
    NonNull::new(srq.cast::<Srq<T>>()).map(|p| SrqHandle(unsafe { p.as_ref() }))
}
