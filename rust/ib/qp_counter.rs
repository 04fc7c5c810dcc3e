// SPDX-License-Identifier: GPL-2.0
//! Counter objects of `rdma statistic qp` (`struct rdma_counter`): the core
//! binds QPs to them, by hand (`rdma statistic qp bind`) or each new user QP
//! in auto mode, and shows a counter's values, which the driver gives as the
//! sums over the QPs bound to it.
//!
//! The core allocates a counter zeroed, `size_rdma_counter` bytes: its
//! struct, then the driver's data. It calls `counter_init` before anyone
//! else has the counter, `counter_dealloc` once no QP is bound to it any
//! more, and the others with the counter's `lock` held. A counter whose
//! first binding fails is freed without `counter_dealloc`, so the driver's
//! data may not need dropping.

use super::*;

/// A counter object, borrowed for a call.
///
/// # Invariants
///
/// The driver's data is initialised whenever a `&QpCounter` exists.
#[repr(transparent)]
pub(crate) struct QpCounter<T: IbDriver> {
    obj: CoreObj<sys::rdma_counter, T::CounterData>,
    _driver: core::marker::PhantomData<fn() -> T>,
}

impl<T: IbDriver> QpCounter<T> {
    /// # Safety
    ///
    /// `c` must be a counter of a device of driver `T` whose `counter_init`
    /// ran, alive for `'a`.
    unsafe fn from_raw<'a>(c: *mut sys::rdma_counter) -> &'a Self {
        // SAFETY: `Self` is a transparent `CoreObj` whose first field is the
        // counter (`repr(C)`); the core allocated the full container.
        unsafe { &*c.cast::<Self>() }
    }

    fn raw(&self) -> *mut sys::rdma_counter {
        self.obj.core.get()
    }

    /// The counter's number (`cntn`), given at its first binding.
    pub(crate) fn id(&self) -> u32 {
        // SAFETY: the counter is live; only its binding writes `id`, under the
        // counter's lock, which the calls that read it hold or do not need.
        unsafe { core::ptr::addr_of!((*self.raw()).id).read() }
    }

    pub(crate) fn data(&self) -> &T::CounterData {
        // SAFETY: by the type invariant.
        unsafe { self.obj.data.assume_init_ref() }
    }

    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: the core sets `device` before `counter_init`, and a counter
        // does not outlive its device.
        unsafe { Device::from_raw((*self.raw()).device) }
    }
}

/// The trampolines of the `counter_*` operations.
pub(super) struct CounterOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> CounterOps<T> {
    /// The driver's data is dropped nowhere (see the module's comment).
    pub(super) const DATA_NEEDS_NO_DROP: () = assert!(!core::mem::needs_drop::<T::CounterData>());

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `counter_init`, by the contract of
    /// [`Adapter`] and of this module.
    pub(super) unsafe extern "C" fn init(counter: *mut sys::rdma_counter) {
        // SAFETY: the core set the counter's device, a live device of ours.
        let dev = unsafe { Adapter::<T>::dev((*counter).device) };
        let data = T::counter_init(dev);
        // SAFETY: a zeroed counter of our announced size that nobody else has yet.
        unsafe { CoreObj::<sys::rdma_counter, T::CounterData>::init(counter, data) };
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `counter_alloc_stats`, as [`Self::init`].
    pub(super) unsafe extern "C" fn alloc_stats(_counter: *mut sys::rdma_counter) -> *mut sys::rdma_hw_stats {
        let descs = T::HW_STATS;
        // SAFETY: `descs` is a `'static` table, as the core keeps the pointer for
        // the lifetime of the stats struct.
        let stats = unsafe {
            sys::rdma_alloc_hw_stats_struct(
                StatDesc::as_raw(descs),
                descs.len() as c_int,
                sys::RDMA_HW_STATS_DEFAULT_LIFESPAN as kernel::ffi::c_ulong,
            )
        };
        if stats.is_null() {
            return stats;
        }
        // A counter shows only what QPs count, as a NIC's per-QP counter set
        // does: the others are marked disabled, which the core leaves out
        // (their values stay 0, as the core adds them to the port's).
        const BITS: usize = core::mem::size_of::<core::ffi::c_ulong>() * 8;
        for i in (0..descs.len()).filter(|i| !T::qp_stat(*i)) {
            // SAFETY: the struct was just allocated with a bitmap of `descs.len()`
            // bits, and is not published yet.
            unsafe { *(*stats).is_disabled.add(i / BITS) |= 1 << (i % BITS) };
        }
        stats
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `counter_bind_qp`, as [`Self::init`]:
    /// `qp` is a live QP of ours whose creation succeeded, not bound to a counter.
    pub(super) unsafe extern "C" fn bind_qp(counter: *mut sys::rdma_counter, qp: *mut sys::ib_qp, _port: u32) -> c_int {
        from_result(|| {
            // SAFETY: per the contract.
            let (c, q) = unsafe { (QpCounter::<T>::from_raw(counter), Qp::<T>::from_raw(qp)) };
            if c.id() == 0 {
                // A new counter: the driver numbers it (the core's `cntn`).
                let id = T::counter_new_id(c.device())?;
                // SAFETY: the core holds the counter's lock for the call.
                unsafe { core::ptr::addr_of_mut!((*counter).id).write(id) };
            }
            T::counter_bind_qp(c, q)?;
            // SAFETY: the QP is live; the core reads its counter from now on.
            unsafe { core::ptr::addr_of_mut!((*qp).counter).write(counter) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `counter_unbind_qp`, as
    /// [`Self::bind_qp`], for a QP bound to a counter (the core checked).
    pub(super) unsafe extern "C" fn unbind_qp(qp: *mut sys::ib_qp, _port: u32) -> c_int {
        // SAFETY: a live QP of ours (per the contract).
        let counter = unsafe { (*qp).counter };
        if counter.is_null() {
            return 0;
        }
        // SAFETY: `counter` is the counter `bind_qp` set, alive while QPs are bound.
        let (c, q) = unsafe { (QpCounter::<T>::from_raw(counter), Qp::<T>::from_raw(qp)) };
        T::counter_unbind_qp(c, q);
        // SAFETY: the QP is live; the core holds the counter's lock.
        unsafe { core::ptr::addr_of_mut!((*qp).counter).write(core::ptr::null_mut()) };
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `counter_update_stats`, as [`Self::init`].
    pub(super) unsafe extern "C" fn update_stats(counter: *mut sys::rdma_counter) -> c_int {
        // SAFETY: per the contract.
        let c = unsafe { QpCounter::<T>::from_raw(counter) };
        // SAFETY: the core set `stats` from `alloc_stats` before the counter's
        // first binding, and holds the counter's lock, so nobody else writes it.
        let values = unsafe {
            let stats = (*counter).stats;
            if stats.is_null() {
                return EINVAL.to_errno();
            }
            let n = usize::try_from((*stats).num_counters).unwrap_or(0).min(T::HW_STATS.len());
            (*stats).value.as_mut_slice(n)
        };
        T::counter_read(c, values);
        // 0: the core's port sums skip a counter whose update returns anything else.
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `counter_dealloc`, as [`Self::init`].
    pub(super) unsafe extern "C" fn dealloc(counter: *mut sys::rdma_counter) -> c_int {
        // SAFETY: per the contract.
        let c = unsafe { QpCounter::<T>::from_raw(counter) };
        T::counter_dealloc(c);
        0
    }
}
