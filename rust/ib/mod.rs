// SPDX-License-Identifier: GPL-2.0
//! Safe abstractions over the kernel RDMA core for a provider driver.
//!
//! The RDMA core calls a driver through `struct ib_device_ops`, a table of C
//! function pointers. [`IbDriver`] is its Rust counterpart: the driver
//! implements the trait in safe Rust, and [`Adapter`] turns it into the C
//! table with one `extern "C"` trampoline per operation (the pattern of
//! `kernel::net::phy`). All pointer handling and every `unsafe` block of the
//! RDMA binding live in this module tree.

mod abi;
mod access;
mod ah;
mod attrs;
mod av;
mod coexist;
mod cq;
mod device;
mod device_attr;
mod driver;
mod event;
mod keys;
mod kmem;
mod link;
mod mmap;
mod mr;
mod mw;
mod odp;
mod qp;
mod qp_attr;
mod qp_counter;
mod registry;
mod res;
mod release;
pub(crate) use release::flush_released_later;
mod live;
mod ring;
mod srq;
mod stats;
pub(crate) mod trace;
mod udata;
mod user_table;

pub(crate) use attrs::{init as init_device_attrs, AttrGroup};
pub(crate) use coexist::ConflictGuard;
pub(crate) use driver::IbDriver;
pub(crate) use device::{register_device, Device, DeviceParams, DeviceRef};
pub(crate) use registry::{detach as detach_device, init as init_registry, unregister_all as unregister_all_devices, with_device};
pub(crate) use keys::{random_u8, take_pd_id_skip};
pub(crate) use kmem::{FastMr, FastMrId, FastMrState, Invalidated, KernelMemory, LocalInvPosted, RegMrPosted};
/// What [`FastMrState`] hands the driver; its documentation shows misuse.
#[allow(unused_imports)]
pub(crate) use kmem::KernelPages;
pub(crate) use link::{LinkHandler, LinkOps};
#[allow(unused_imports)]
pub(crate) use mmap::UserMapping;
pub(crate) use cq::{warn_cq_overrun, Cq, CqArm, CqInit, CqNotify, KernelWc, WcSink};
pub(crate) use mr::{Advice, AdviseSge, MrKeys, MrSg, Rereg, Umem};
pub(crate) use odp::{odp_supported, Fault, OdpUmem};
pub(crate) use av::{AvError, RoceAv};
pub(crate) use qp::{CoreQpId, CqHandle, KernelSge, Qp, QpCaps, QpEvents, QpInit, RecvWr, RegWr, SendWr};
pub(crate) use qp_counter::QpCounter;
pub(crate) use qp_attr::{modify_is_ok, AttrMask, ModifyAttrs, QpParams, QpType, QueryAttrs};
pub(crate) use abi::{CreateAhResp, CreateQpResp, CreateSrqResp, MmInfo, ModifySrqCmd};
pub(crate) use res::ResAttrs;
pub(crate) use ring::Ring;
pub(crate) use srq::{Srq, SrqAttrs, SrqEvents, SrqHandle, SRQ_LIMIT, SRQ_MAX_WR};
pub(crate) use stats::StatDesc;
pub(crate) use udata::Udata;
pub(crate) use user_table::{clear_span_users, init as init_user_table, with_paging_users};
use user_table::with_span_users;

use crate::sys;
use core::mem::MaybeUninit;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use core::ptr::NonNull;
use kernel::sync::Arc;
use kernel::types::Opaque;
use mmap::MapTable;

pub(crate) use device_attr::{
    AtomicCap, DeviceAttrs, DeviceCaps, DeviceModify, OdpCaps, OdpOps, PortAttrs, PortImmutable, PortPhysState, PortState,
};

/// Loads `ib_uverbs` if it is a module not loaded yet, so that it registers
/// with the core before `rdma_cm` does (see `rroce_request_uverbs`). Process
/// context; may sleep.
pub(crate) fn load_user_verbs() {
    kernel::task::might_sleep();
    // SAFETY: no preconditions beyond process context, which module init is.
    unsafe { sys::rroce_request_uverbs() };
}

/// The user id (in the initial namespace) the calling task's use of shared
/// bounds is charged to: its effective uid, or, inside a user namespace,
/// the owner of its outermost one, or, when root owns that one, the host uid
/// its ids map to.
pub(crate) fn charged_uid() -> u32 {
    // SAFETY: reads the current task's credentials, which live while it runs.
    unsafe { sys::rroce_charged_uid() }
}

/// Which user-space provider binds a device (`enum rdma_driver_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DriverId {
    /// rdma-core's `rxe` provider and its user ABI.
    Rxe,
}

impl DriverId {
    pub(crate) const fn to_raw(self) -> sys::rdma_driver_id {
        match self {
            Self::Rxe => sys::rdma_driver_id_RDMA_DRIVER_RXE,
        }
    }
}

/// Link layer of a device's ports (`enum rdma_link_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkLayer {
    Ethernet,
}

impl LinkLayer {
    const fn to_raw(self) -> sys::rdma_link_layer {
        match self {
            Self::Ethernet => sys::rdma_link_layer_IB_LINK_LAYER_ETHERNET,
        }
    }
}

/// The user context of a verb called from user space: valid for the call.
/// The driver only ever borrows it, for the call (it is neither `Clone` nor
/// `Send`, and the driver's data must be).
pub(crate) struct UserContext(NonNull<sys::ib_ucontext>);

impl UserContext {
    /// # Safety
    ///
    /// `udata` must be null or the driver udata of a uverbs call in progress.
    unsafe fn from_udata(udata: *mut sys::ib_udata) -> Option<Self> {
        // SAFETY: per the contract.
        NonNull::new(unsafe { sys::rroce_udata_ucontext(udata) }).map(Self)
    }

    pub(crate) fn as_raw(&self) -> *mut sys::ib_ucontext {
        self.0.as_ptr()
    }

    /// The context's record of the buffers it publishes for `mmap()`.
    fn maps(&self) -> &Arc<MapTable> {
        // SAFETY: a `UserContext` lives only during a verb of its context, a context of
        // this driver (so a `UctxCore`: `size_ib_ucontext`) whose `alloc_ucontext`
        // succeeded, as the core calls verbs only then; `maps` is initialised there and
        // moved out in `dealloc_ucontext`, after the last verb.
        unsafe { &*UctxCore::maps_ptr(self.as_raw()) }
    }
}

/// What the core allocates as a user context before the driver's data:
/// its `struct ib_ucontext`, then this layer's record of the mmap entries
/// the context publishes, which its teardown takes out (`mmap.rs`). The
/// record's place does not depend on the driver's type.
#[repr(C)]
struct UctxCore {
    ib: sys::ib_ucontext,
    /// Written in `alloc_ucontext`, moved out in `dealloc_ucontext`.
    maps: MaybeUninit<Arc<MapTable>>,
}

impl UctxCore {
    /// # Safety
    ///
    /// `uctx` must be a user context of this driver (allocated with `size_ib_ucontext`).
    unsafe fn maps_ptr(uctx: *mut sys::ib_ucontext) -> *mut Arc<MapTable> {
        // SAFETY: `ib` is the first field of a `repr(C)` struct the core allocated in
        // full (the contract), which is the first field of the context's `CoreObj`; no
        // reference is formed.
        unsafe { core::ptr::addr_of_mut!((*uctx.cast::<Self>()).maps).cast() }
    }
}

/// A core-allocated verbs object (`ib_pd`, `ib_ah`, `ib_mw`, a user
/// context) followed by the driver's data. The core allocates
/// `size_of::<Self>()` zeroed bytes (announced through `size_ib_*`); the
/// data is written once the driver's allocation callback succeeded and read
/// back out in the matching free. In between, verbs on other CPUs use the
/// object at the same time (two `reg_mr` on one PD) while the core changes
/// its own struct (`usecnt`): the data is only lent out shared, and no
/// `&mut` ever covers the container (`init` and `take` write and read
/// through field pointers). A `&mut` to a PD, which a verb used to form
/// while another verb read the same PD, cannot be had from this type.
#[repr(C)]
struct CoreObj<C, D> {
    core: Opaque<C>,
    data: MaybeUninit<D>,
}

impl<C, D> CoreObj<C, D> {
    /// # Safety
    ///
    /// `obj` must be the core object of a `CoreObj<C, D>` allocated through this
    /// driver's `size_ib_*` value.
    unsafe fn data_ptr(obj: *mut C) -> *mut D {
        // SAFETY: `core` is the first field of a `repr(C)` struct, so the object pointer
        // is also the container pointer, and the core allocated the full container (the
        // contract). No reference is formed; `MaybeUninit<D>` is laid out as `D`.
        unsafe { core::ptr::addr_of_mut!((*obj.cast::<Self>()).data).cast() }
    }

    /// Writes the data, in the allocation callback.
    ///
    /// # Safety
    ///
    /// As [`Self::data_ptr`]; the core has not published the object yet, so the
    /// caller has it to itself, and the data is not initialised.
    unsafe fn init(obj: *mut C, data: D) {
        // SAFETY: per the contract, nobody else reads or writes the data slot.
        unsafe { Self::data_ptr(obj).write(data) }
    }

    /// Moves the data out, in the free callback.
    ///
    /// # Safety
    ///
    /// As [`Self::data_ptr`]; the data was initialised, is moved out once, and no
    /// verb uses the object any more (the core frees an object after its users).
    unsafe fn take(obj: *mut C) -> D {
        // SAFETY: per the contract, the data is initialised and ours to move out.
        unsafe { Self::data_ptr(obj).read() }
    }

    /// The data, shared with the other verbs that use the object.
    ///
    /// # Safety
    ///
    /// As [`Self::data_ptr`]; the data is initialised and not moved out for `'a`
    /// (the caller holds the object, which the core does not free while it is used).
    unsafe fn data<'a>(obj: *mut C) -> &'a D {
        // SAFETY: per the contract; only shared references to the data exist while it
        // is initialised, as `init` and `take` run when nobody else has the object.
        unsafe { &*Self::data_ptr(obj) }
    }
}

/// Core objects that name their device: those whose data the driver borrows
/// ([`DeviceObj`]).
pub(crate) trait OfDevice {
    /// The object's `device`.
    ///
    /// # Safety
    ///
    /// `obj` must be a live object.
    unsafe fn device(obj: *mut Self) -> *mut sys::ib_device;
}

macro_rules! of_device {
    ($($core:ty),*) => {$(
        impl OfDevice for $core {
            unsafe fn device(obj: *mut Self) -> *mut sys::ib_device {
                // SAFETY: per the contract, `obj` is live.
                unsafe { (*obj).device }
            }
        }
    )*};
}
of_device!(sys::ib_qp, sys::ib_srq, sys::ib_cq);

/// A [`CoreObj`] of driver `T` whose data the driver borrows, with its
/// device: [`Qp`], [`Srq`] and [`Cq`]. Next to the data, this layer keeps
/// what it needs of its own until the object's destroy trampoline (`E`).
///
/// # Invariants
///
/// The slot is initialised whenever a `&DeviceObj` exists outside this module.
#[repr(transparent)]
pub(crate) struct DeviceObj<T, C, D, E = ()> {
    obj: CoreObj<C, Slot<D, E>>,
    /// Names the driver only: `Send` and `Sync` stay the container's.
    _driver: core::marker::PhantomData<fn() -> T>,
}

/// The slot after a [`DeviceObj`]'s core object: the driver's data, and
/// this layer's own (a QP's and SRQ's event target, nothing for a CQ).
struct Slot<D, E> {
    data: D,
    ib: E,
}

impl<T: IbDriver, C: OfDevice, D, E> DeviceObj<T, C, D, E> {
    /// # Safety
    ///
    /// `ib` must be a `C` of driver `T` whose slot is initialised, alive for `'a`.
    unsafe fn from_raw<'a>(ib: *mut C) -> &'a Self {
        // SAFETY: `Self` is a transparent `CoreObj`, whose first field is `ib`'s
        // object (`repr(C)`), so the pointers are the same; the core allocated the
        // full container (`size_ib_*`).
        unsafe { &*ib.cast::<Self>() }
    }

    /// Fills the slot once the driver's create succeeded.
    ///
    /// # Safety
    ///
    /// `ib` must be a `C` of driver `T` (allocated with `size_of::<Self>()`), not
    /// published by the core yet, whose slot is uninitialised. On error the slot
    /// stays uninitialised (the core then frees the object without destroying it).
    unsafe fn init(ib: *mut C, data: impl PinInit<D, Error>, ib_data: E) -> Result {
        // SAFETY: per the contract.
        let slot = unsafe { CoreObj::<C, Slot<D, E>>::data_ptr(ib) };
        // SAFETY: the slot is uninitialised, pinned core memory that nobody else uses
        // yet; on error pin-init leaves `data` uninitialised and `ib_data` drops here.
        unsafe {
            pin_init::raw_try_init(core::ptr::addr_of_mut!((*slot).data), data)?;
            core::ptr::addr_of_mut!((*slot).ib).write(ib_data);
        }
        Ok(())
    }

    /// Drops the slot, at the end of the destroy trampoline.
    ///
    /// # Safety
    ///
    /// `ib` must be a `C` of driver `T` whose creation succeeded, destroyed: the
    /// driver's destroy returned and nothing uses the object any more.
    unsafe fn drop_slot(ib: *mut C) {
        // SAFETY: per the contract the slot is initialised and dropped once, unborrowed.
        unsafe { core::ptr::drop_in_place(CoreObj::<C, Slot<D, E>>::data_ptr(ib)) }
    }

    /// The core's object.
    fn raw(&self) -> *mut C {
        self.obj.core.get()
    }

    fn slot(&self) -> &Slot<D, E> {
        // SAFETY: by the type invariant.
        unsafe { self.obj.data.assume_init_ref() }
    }

    /// The driver's data.
    pub(crate) fn data(&self) -> &D {
        &self.slot().data
    }

    /// This layer's own data of the object.
    fn ib_data(&self) -> &E {
        &self.slot().ib
    }

    /// The device the object belongs to.
    pub(crate) fn device(&self) -> &Device<T> {
        // SAFETY: the object is live while borrowed, and keeps its device alive;
        // the core sets `device` before the driver's create verb.
        unsafe { Device::from_raw(C::device(self.raw())) }
    }
}

/// Builds the `ib_device_ops` table for a driver.
///
/// The table's entries are `unsafe extern "C"` trampolines (here and in the
/// `*Ops` types of the verb files) that only the RDMA core calls, through
/// this table: every pointer they get is a live object of this driver's
/// device for the duration of the call (a udata valid for the call or null,
/// an object being destroyed one whose creation succeeded), and they turn
/// those into the driver's types before calling [`IbDriver`].
pub(crate) struct Adapter<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> Adapter<T> {
    /// The ops table; `owner` is filled in at registration.
    fn ops() -> sys::ib_device_ops {
        let mut ops: sys::ib_device_ops = pin_init::zeroed();
        ops.driver_id = T::DRIVER_ID.to_raw();
        ops.uverbs_abi_ver = T::UVERBS_ABI_VERSION;
        ops.query_device = Some(Self::query_device);
        ops.query_port = Some(Self::query_port);
        ops.get_port_immutable = Some(Self::get_port_immutable);
        ops.get_link_layer = Some(Self::get_link_layer);
        ops.query_pkey = Some(Self::query_pkey);
        ops.modify_device = if T::HAS_MODIFY_DEVICE { Some(Self::modify_device) } else { None };
        ops.alloc_ucontext = Some(Self::alloc_ucontext);
        ops.dealloc_ucontext = Some(Self::dealloc_ucontext);
        if T::HAS_DISASSOCIATE_UCONTEXT {
            ops.disassociate_ucontext = Some(Self::disassociate_ucontext);
        }
        ops.mmap = Some(mmap::mmap);
        ops.mmap_free = Some(mmap::mmap_free);
        ops.alloc_pd = Some(Self::alloc_pd);
        ops.dealloc_pd = Some(Self::dealloc_pd);
        if T::HAS_READ_HW_STATS {
            ops.alloc_hw_port_stats = Some(Self::alloc_hw_port_stats);
            ops.get_hw_stats = Some(Self::get_hw_stats);
        }
        if T::HAS_COUNTER_BIND_QP {
            let () = qp_counter::CounterOps::<T>::DATA_NEEDS_NO_DROP;
            ops.counter_init = Some(qp_counter::CounterOps::<T>::init);
            ops.counter_alloc_stats = Some(qp_counter::CounterOps::<T>::alloc_stats);
            ops.counter_bind_qp = Some(qp_counter::CounterOps::<T>::bind_qp);
            ops.counter_unbind_qp = Some(qp_counter::CounterOps::<T>::unbind_qp);
            ops.counter_update_stats = Some(qp_counter::CounterOps::<T>::update_stats);
            ops.counter_dealloc = Some(qp_counter::CounterOps::<T>::dealloc);
            ops.size_rdma_counter = core::mem::size_of::<QpCounter<T>>();
        }
        ops.dealloc_driver = Some(Self::dealloc_driver);
        if T::HAS_ATTR_SHOW {
            ops.device_group = attrs::group::<T>();
        }
        ops.create_cq = Some(cq::CqOps::<T>::create);
        ops.destroy_cq = Some(cq::CqOps::<T>::destroy);
        ops.poll_cq = Some(cq::CqOps::<T>::poll);
        ops.req_notify_cq = Some(cq::CqOps::<T>::req_notify);
        ops.resize_user_cq = if T::HAS_RESIZE_CQ { Some(cq::CqOps::<T>::resize) } else { None };
        ops.size_ib_cq = core::mem::size_of::<Cq<T>>();
        ops.create_qp = Some(qp::QpOps::<T>::create);
        ops.modify_qp = Some(qp::QpOps::<T>::modify);
        ops.query_qp = Some(qp::QpOps::<T>::query);
        ops.destroy_qp = Some(qp::QpOps::<T>::destroy);
        ops.post_send = Some(qp::QpOps::<T>::post_send);
        // With `post_recv` set the core counts the device as a kernel verbs provider:
        // the MAD layer opens its GSI QP on it and the CM binds.
        ops.post_recv = Some(qp::QpOps::<T>::post_recv);
        if T::HAS_ATTACH_MCAST {
            ops.attach_mcast = Some(qp::QpOps::<T>::attach_mcast);
            ops.detach_mcast = Some(qp::QpOps::<T>::detach_mcast);
        }
        ops.size_ib_qp = core::mem::size_of::<Qp<T>>();
        if T::HAS_CREATE_SRQ {
            ops.create_srq = Some(srq::SrqOps::<T>::create);
            ops.modify_srq = Some(srq::SrqOps::<T>::modify);
            ops.query_srq = Some(srq::SrqOps::<T>::query);
            ops.destroy_srq = Some(srq::SrqOps::<T>::destroy);
            ops.post_srq_recv = Some(srq::SrqOps::<T>::post_recv);
            ops.size_ib_srq = core::mem::size_of::<Srq<T>>();
        }
        ops.create_ah = Some(ah::AhOps::<T>::create);
        ops.create_user_ah = Some(ah::AhOps::<T>::create);
        ops.destroy_ah = Some(ah::AhOps::<T>::destroy);
        ops.size_ib_ah = core::mem::size_of::<CoreObj<sys::ib_ah, T::AhData>>();
        ops.reg_user_mr = Some(mr::MrOps::<T>::reg_user_mr);
        ops.get_dma_mr = if T::HAS_GET_DMA_MR { Some(mr::MrOps::<T>::get_dma_mr) } else { None };
        ops.rereg_user_mr = if T::HAS_REREG_USER_MR { Some(mr::MrOps::<T>::rereg_user_mr) } else { None };
        ops.dereg_mr = Some(mr::MrOps::<T>::dereg_mr);
        ops.advise_mr = if T::HAS_ADVISE_MR { Some(mr::MrOps::<T>::advise_mr) } else { None };
        if T::HAS_ALLOC_MR {
            ops.alloc_mr = Some(mr::MrOps::<T>::alloc_mr);
            ops.map_mr_sg = Some(mr::MrOps::<T>::map_mr_sg);
        }
        if T::HAS_ALLOC_MW {
            ops.alloc_mw = Some(mw::MwOps::<T>::alloc);
            ops.dealloc_mw = Some(mw::MwOps::<T>::dealloc);
            ops.size_ib_mw = core::mem::size_of::<CoreObj<sys::ib_mw, T::MwData>>();
        }
        if T::HAS_FILL_RES_QP {
            ops.fill_res_qp_entry = Some(res::ResOps::<T>::qp);
            ops.fill_res_cq_entry = Some(res::ResOps::<T>::cq);
            ops.fill_res_mr_entry = Some(res::ResOps::<T>::mr);
        }
        ops.size_ib_pd = core::mem::size_of::<CoreObj<sys::ib_pd, T::PdData>>();
        ops.size_ib_ucontext = core::mem::size_of::<CoreObj<UctxCore, T::UctxData>>();
        ops
    }

    /// # Safety
    ///
    /// `ib` must be a device of this driver, alive for `'a`.
    unsafe fn dev<'a>(ib: *mut sys::ib_device) -> &'a Device<T> {
        // SAFETY: per the contract; see `Device::from_raw`.
        unsafe { Device::from_raw(ib) }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `query_device`, by the contract of [`Adapter`].
    unsafe extern "C" fn query_device(
        ib: *mut sys::ib_device,
        attr: *mut sys::ib_device_attr,
        udata: *mut sys::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core calls with a live device of ours.
            let dev = unsafe { Self::dev(ib) };
            // SAFETY: `udata` is null or valid for the call.
            let udata = unsafe { Udata::from_raw(udata) };
            // The extended query carries no driver data in either direction.
            udata.require_no_driver_input()?;
            let attrs = T::query_device(dev)?;
            // SAFETY: `attr` points to a writable attribute struct for the duration of the call.
            attrs.write(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `query_port`, by the contract of [`Adapter`].
    unsafe extern "C" fn query_port(
        ib: *mut sys::ib_device,
        port: u32,
        attr: *mut sys::ib_port_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core calls with a live device of ours.
            let dev = unsafe { Self::dev(ib) };
            let attrs = T::query_port(dev, port)?;
            // SAFETY: `attr` points to a zeroed, writable struct for the duration of the call.
            attrs.write(unsafe { &mut *attr });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `get_port_immutable`, by the contract of [`Adapter`].
    unsafe extern "C" fn get_port_immutable(
        ib: *mut sys::ib_device,
        port: u32,
        imm: *mut sys::ib_port_immutable,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core calls with a live device of ours.
            let dev = unsafe { Self::dev(ib) };
            let attrs = T::port_immutable(dev, port)?;
            // SAFETY: `imm` points to a writable struct for the duration of the call.
            attrs.write(unsafe { &mut *imm });
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `get_link_layer`, by the contract of [`Adapter`].
    unsafe extern "C" fn get_link_layer(_ib: *mut sys::ib_device, _port: u32) -> sys::rdma_link_layer {
        T::LINK_LAYER.to_raw()
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `query_pkey`, by the contract of [`Adapter`].
    unsafe extern "C" fn query_pkey(
        ib: *mut sys::ib_device,
        port: u32,
        index: u16,
        pkey: *mut u16,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core calls with a live device of ours.
            let dev = unsafe { Self::dev(ib) };
            let value = T::query_pkey(dev, port, index)?;
            // SAFETY: `pkey` is a valid out pointer for the duration of the call.
            unsafe { pkey.write(value) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `modify_device`, by the contract of [`Adapter`].
    unsafe extern "C" fn modify_device(
        ib: *mut sys::ib_device,
        mask: c_int,
        m: *mut sys::ib_device_modify,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core calls with a live device of ours.
            let dev = unsafe { Self::dev(ib) };
            // SAFETY: `m` is valid for reads for the duration of the call.
            let change = DeviceModify::from_raw(mask, unsafe { &*m }).ok_or(EOPNOTSUPP)?;
            T::modify_device(dev, &change)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `alloc_ucontext`, by the contract of [`Adapter`].
    unsafe extern "C" fn alloc_ucontext(uctx: *mut sys::ib_ucontext, udata: *mut sys::ib_udata) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a context whose `device` is set to our live device.
            let dev = unsafe { Self::dev((*uctx).device) };
            // SAFETY: `udata` is null or valid for the call.
            let mut udata = unsafe { Udata::from_raw(udata) };
            let maps = MapTable::new()?;
            let data = T::alloc_ucontext(dev, &mut udata)?;
            // SAFETY: a zeroed context of our announced size (a `CoreObj<UctxCore, _>`),
            // not yet published: no verb uses it before this returns.
            unsafe {
                UctxCore::maps_ptr(uctx).write(maps);
                CoreObj::<UctxCore, T::UctxData>::init(uctx.cast(), data);
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `dealloc_ucontext`, by the contract of [`Adapter`].
    unsafe extern "C" fn dealloc_ucontext(uctx: *mut sys::ib_ucontext) {
        // SAFETY: only contexts whose `alloc_ucontext` succeeded are deallocated, once,
        // after the last verb on them: the data and the record are moved out once here.
        let (data, maps, dev) = unsafe {
            (
                CoreObj::<UctxCore, T::UctxData>::take(uctx.cast()),
                UctxCore::maps_ptr(uctx).read(),
                Self::dev((*uctx).device),
            )
        };
        T::dealloc_ucontext(dev, data);
        // SAFETY: this is the context's `dealloc_ucontext`, in process context; the core
        // frees the context after this returns.
        unsafe { maps.close() };
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `disassociate_ucontext`, by the contract of [`Adapter`].
    unsafe extern "C" fn disassociate_ucontext(uctx: *mut sys::ib_ucontext) {
        // SAFETY: the core disassociates only contexts whose `alloc_ucontext` succeeded,
        // before their `dealloc_ucontext`, so `data` is initialised and not yet moved out.
        let (data, dev) = unsafe {
            (CoreObj::<UctxCore, T::UctxData>::data(uctx.cast()), Self::dev((*uctx).device))
        };
        T::disassociate_ucontext(dev, data);
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `alloc_pd`, by the contract of [`Adapter`].
    unsafe extern "C" fn alloc_pd(pd: *mut sys::ib_pd, udata: *mut sys::ib_udata) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a PD whose `device` is set to our live device.
            let dev = unsafe { Self::dev((*pd).device) };
            // SAFETY: `udata` is null or valid for the call.
            let mut udata = unsafe { Udata::from_raw(udata) };
            let data = T::alloc_pd(dev, &mut udata)?;
            // SAFETY: a zeroed PD of our announced size, not yet published: no verb uses
            // it before this returns.
            unsafe { CoreObj::<sys::ib_pd, T::PdData>::init(pd, data) };
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `dealloc_pd`, by the contract of [`Adapter`].
    unsafe extern "C" fn dealloc_pd(pd: *mut sys::ib_pd, _udata: *mut sys::ib_udata) -> c_int {
        // SAFETY: only PDs whose `alloc_pd` succeeded are deallocated, once, when no
        // object uses them any more (the core's `usecnt`).
        let (data, dev) = unsafe { (CoreObj::<sys::ib_pd, T::PdData>::take(pd), Self::dev((*pd).device)) };
        T::dealloc_pd(dev, data);
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `alloc_hw_port_stats`, by the contract of [`Adapter`].
    unsafe extern "C" fn alloc_hw_port_stats(_ib: *mut sys::ib_device, _port: u32) -> *mut sys::rdma_hw_stats {
        let descs = T::HW_STATS;
        // SAFETY: `descs` is a `'static` table, as the core keeps the pointer for the
        // lifetime of the stats struct.
        unsafe {
            sys::rdma_alloc_hw_stats_struct(
                StatDesc::as_raw(descs),
                descs.len() as c_int,
                sys::RDMA_HW_STATS_DEFAULT_LIFESPAN as _,
            )
        }
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `get_hw_stats`, by the contract of [`Adapter`].
    unsafe extern "C" fn get_hw_stats(
        ib: *mut sys::ib_device,
        stats: *mut sys::rdma_hw_stats,
        port: u32,
        _index: c_int,
    ) -> c_int {
        // SAFETY: the core calls with a live device of ours.
        let dev = unsafe { Self::dev(ib) };
        // SAFETY: `stats` was allocated by `alloc_hw_port_stats` with `num_counters` values,
        // and the core holds its lock for the call.
        let values = unsafe {
            let n = usize::try_from((*stats).num_counters).unwrap_or(0).min(T::HW_STATS.len());
            (*stats).value.as_mut_slice(n)
        };
        T::read_hw_stats(dev, port, values);
        values.len() as c_int
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `dealloc_driver`, by the contract of [`Adapter`].
    unsafe extern "C" fn dealloc_driver(ib: *mut sys::ib_device) {
        // Off the list first: lookups through it borrow the data under its lock.
        registry::remove(ib);
        // User memory of its regions that the data path let go of last is
        // unpinned now rather than later (each holds the device's memory, so
        // this is not needed for the release itself).
        release::flush_released_later();
        // SAFETY: ops (and so this callback) are installed only after the driver data was
        // initialised, and the core calls this exactly once, just before freeing the device.
        unsafe { Device::<T>::drop_data(ib) };
    }
}
