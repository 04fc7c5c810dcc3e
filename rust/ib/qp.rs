// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the core's `struct ib_qp` followed by the driver's data.

use super::live::LiveObj;
use super::{Cq, IbDriver, LocalInvPosted, RegMrPosted, Udata, UserContext};
use crate::sys;
use core::ptr::NonNull;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::{c_str, static_lock_class};

/// A CQ a QP completes into, kept in the driver's QP state, which may outlive
/// the QP: this layer revokes the handle in the QP's destroy, after the
/// driver's `destroy_qp` returned. Until then the core counts the QP as a
/// user of the CQ, so the CQ is alive while the handle lends it. Each handle
/// has a lock of its own, which only its QP's completions take.
pub(crate) struct CqHandle<T: IbDriver> {
    cq: Arc<LiveObj<sys::ib_cq>>,
    _driver: core::marker::PhantomData<fn() -> T>,
}

impl<T: IbDriver> CqHandle<T> {
    /// Calls `f` with the CQ unless the QP is destroyed (then `None`). `f`
    /// runs under the handle's lock: it must not sleep nor use this handle.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Cq<T>) -> R) -> Option<R> {
        self.cq.with(|ib| {
            // SAFETY: `with` lends the CQ only until the QP's destroy revokes the handle,
            // before the core lets go of the CQ; handles are made only for CQs of the QP's
            // device (`QpOps::create` refuses others), so of driver `T`, whose creation
            // succeeded, which verbs share between CPUs anyway.
            f(unsafe { Cq::<T>::from_raw(ib.as_ptr()) })
        })
    }
}

/// What this layer lends the driver of a QP, revoked in the QP's destroy.
pub(crate) struct QpTargets {
    events: Arc<LiveObj<sys::ib_qp>>,
    send_cq: Arc<LiveObj<sys::ib_cq>>,
    recv_cq: Arc<LiveObj<sys::ib_cq>>,
}

impl QpTargets {
    /// The targets of QP `ib`. Process context: allocates.
    fn new(ib: *mut sys::ib_qp, send_cq: NonNull<sys::ib_cq>, recv_cq: NonNull<sys::ib_cq>) -> Result<Self> {
        Ok(Self {
            events: LiveObj::new(NonNull::new(ib).ok_or(EINVAL)?, c_str!("rroce_qp_events"), static_lock_class!())?,
            send_cq: LiveObj::new(send_cq, c_str!("rroce_qp_send_cq"), static_lock_class!())?,
            recv_cq: LiveObj::new(recv_cq, c_str!("rroce_qp_recv_cq"), static_lock_class!())?,
        })
    }

    fn clone(&self) -> Self {
        Self { events: self.events.clone(), send_cq: self.send_cq.clone(), recv_cq: self.recv_cq.clone() }
    }

    fn cq_handle<T: IbDriver>(cq: &Arc<LiveObj<sys::ib_cq>>) -> CqHandle<T> {
        CqHandle { cq: cq.clone(), _driver: core::marker::PhantomData }
    }

    fn revoke(&self) {
        self.events.revoke();
        self.send_cq.revoke();
        self.recv_cq.revoke();
    }
}

/// The core's QP object, as a kernel consumer's work completions name it
/// (`ib_wc.qp`): the driver carries it and never dereferences it.
#[derive(Clone, Copy, Default)]
pub(crate) struct CoreQpId(usize);

impl CoreQpId {
    pub(super) fn as_raw(self) -> *mut sys::ib_qp {
        self.0 as *mut sys::ib_qp
    }
}

/// Capacities of a QP's queues (`struct ib_qp_cap`).
#[derive(Clone, Copy, Default)]
pub(crate) struct QpCaps {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline_data: u32,
}

impl QpCaps {
    fn from_ib(c: &sys::ib_qp_cap) -> Self {
        Self {
            max_send_wr: c.max_send_wr,
            max_recv_wr: c.max_recv_wr,
            max_send_sge: c.max_send_sge,
            max_recv_sge: c.max_recv_sge,
            max_inline_data: c.max_inline_data,
        }
    }

    /// Writes the capacities into a core `ib_qp_cap`.
    pub(super) fn write(&self, c: &mut sys::ib_qp_cap) {
        c.max_send_wr = self.max_send_wr;
        c.max_recv_wr = self.max_recv_wr;
        c.max_send_sge = self.max_send_sge;
        c.max_recv_sge = self.max_recv_sge;
        c.max_inline_data = self.max_inline_data;
    }
}

/// Creation attributes of a QP, as the driver sees them.
pub(crate) struct QpInit<'a, T: IbDriver> {
    pub(crate) qp_type: super::QpType,
    /// Asked-for capacities; the driver rounds them up and reports them back.
    pub(crate) cap: QpCaps,
    pub(crate) sq_sig_all: bool,
    pub(crate) create_flags: u32,
    pub(crate) send_cq: CqHandle<T>,
    pub(crate) recv_cq: CqHandle<T>,
    /// The SRQ the QP receives from, instead of its own receive queue.
    pub(crate) srq: Option<super::SrqHandle<'a, T>>,
    /// The core's QP, for completions of kernel consumers.
    pub(crate) core_qp: CoreQpId,
    /// Where the QP's asynchronous events go.
    pub(crate) events: QpEvents,
}

/// Where the asynchronous events of a QP go. The driver may keep it in state
/// that outlives the QP: this layer revokes it in the QP's destroy, after the
/// driver's `destroy_qp` returned, and events raised from then on are
/// dropped. Handlers run with the event target's lock held (and any of the
/// driver's): the core's and the kernel's consumers' handlers only complete,
/// queue or log, never call back into the QP.
pub(crate) struct QpEvents(Arc<LiveObj<sys::ib_qp>>);

impl QpEvents {
    /// `IB_EVENT_QP_LAST_WQE_REACHED`: a QP on an SRQ entered the error
    /// state and will take no more WQEs from it (`ib_drain_qp` waits for it).
    pub(crate) fn last_wqe_reached(&self) {
        self.raise(sys::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
    }

    fn raise(&self, event: sys::ib_event_type) {
        self.0.with(|ib| {
            // SAFETY: `with` lends the QP only until the destroy trampoline revokes it,
            // which it does before the core frees the QP.
            unsafe { super::event::raise(super::event::EventSource::Qp(ib.as_ptr()), event) }
        });
    }
}

/// A queue pair of driver `T`; this layer keeps the targets it lent the driver.
pub(crate) type Qp<T> = super::DeviceObj<T, sys::ib_qp, <T as IbDriver>::QpData, QpTargets>;

/// The trampolines of the QP verbs.
pub(super) struct QpOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> QpOps<T> {
    /// # Safety
    ///
    /// Only the RDMA core calls this, as `create_qp`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn create(
        ib: *mut sys::ib_qp,
        init: *mut sys::ib_qp_init_attr,
        udata_raw: *mut sys::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a zeroed QP of our announced size with `device` and
            // `pd` (a live PD of ours, whose `usecnt` it holds) set, valid init attributes
            // whose CQs it holds, and a valid or null udata.
            let (dev, pd, init_attr, mut udata, uctx) = unsafe {
                (
                    super::Device::<T>::from_raw((*ib).device),
                    super::CoreObj::<sys::ib_pd, T::PdData>::data((*ib).pd),
                    &mut *init,
                    Udata::from_raw(udata_raw),
                    UserContext::from_udata(udata_raw),
                )
            };
            let send_cq = NonNull::new(init_attr.send_cq).ok_or(EINVAL)?;
            let recv_cq = NonNull::new(init_attr.recv_cq).ok_or(EINVAL)?;
            // The core does not check that a kernel consumer's CQs and SRQ are the QP's
            // device's: another device's (of this driver or another) are refused, since
            // their data is not what this device's QPs may use as theirs.
            // SAFETY: the core holds the CQs and the SRQ (their `usecnt`) for the call; a
            // live object's `device` is set before its creation and never changes.
            let same_device = unsafe {
                let dev = (*ib).device;
                (*send_cq.as_ptr()).device == dev
                    && (*recv_cq.as_ptr()).device == dev
                    && (init_attr.srq.is_null() || (*init_attr.srq).device == dev)
            };
            if !same_device {
                return Err(EINVAL);
            }
            // Types this layer does not model (XRC, raw packet) are not offered.
            let qp_type = super::QpType::from_raw(init_attr.qp_type).ok_or(EOPNOTSUPP)?;
            let targets = QpTargets::new(ib, send_cq, recv_cq)?;
            let res = (|| {
                let qi = QpInit {
                    qp_type,
                    cap: QpCaps::from_ib(&init_attr.cap),
                    sq_sig_all: init_attr.sq_sig_type == sys::ib_sig_type_IB_SIGNAL_ALL_WR,
                    create_flags: init_attr.create_flags,
                    send_cq: QpTargets::cq_handle(&targets.send_cq),
                    recv_cq: QpTargets::cq_handle(&targets.recv_cq),
                    // SAFETY: the core holds the SRQ (its `usecnt`) for the QP's lifetime; it
                    // is null or this device's (checked above), so an SRQ of driver `T`.
                    srq: unsafe { super::srq::handle::<T>(init_attr.srq) },
                    core_qp: CoreQpId(ib as usize),
                    events: QpEvents(targets.events.clone()),
                };
                let (data, qpn, cap) = T::create_qp(dev, pd, qi, uctx.as_ref(), &mut udata)?;
                // SAFETY: a QP of ours the core has not published, its slot uninitialised; on
                // error the core frees it without calling `destroy`. `qp_num` must be set
                // before returning.
                unsafe {
                    Qp::<T>::init(ib, data, targets.clone())?;
                    (*ib).qp_num = qpn;
                }
                cap.write(&mut init_attr.cap);
                Ok(0)
            })();
            // The driver may have kept the targets, and the core frees the QP without
            // destroying it.
            if res.is_err() {
                targets.revoke();
            }
            res
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `modify_qp`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn modify(
        ib: *mut sys::ib_qp,
        attr: *mut sys::ib_qp_attr,
        mask: c_int,
        udata_raw: *mut sys::ib_udata,
    ) -> c_int {
        from_result(|| {
            // SAFETY: a live QP of ours, valid attributes and udata for the call.
            let (qp, attr, mut udata) = unsafe { (Qp::<T>::from_raw(ib), &*attr, Udata::from_raw(udata_raw)) };
            // SAFETY: the core's attributes for this `modify_qp`.
            let attrs = unsafe { super::ModifyAttrs::from_raw(attr, mask as u32) };
            T::modify_qp(qp, &attrs, &mut udata)?;
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `query_qp`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn query(
        ib: *mut sys::ib_qp,
        attr: *mut sys::ib_qp_attr,
        _mask: c_int,
        init: *mut sys::ib_qp_init_attr,
    ) -> c_int {
        from_result(|| {
            // SAFETY: a live QP of ours, writable out structs for the call.
            let (qp, attr, init) = unsafe { (Qp::<T>::from_raw(ib), &mut *attr, &mut *init) };
            // Every attribute is reported, whatever the mask asks for.
            T::query_qp(qp)?.write(attr, init);
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `destroy_qp`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn destroy(ib: *mut sys::ib_qp, _udata: *mut sys::ib_udata) -> c_int {
        // SAFETY: only QPs whose creation succeeded are destroyed, once.
        let qp = unsafe { Qp::<T>::from_raw(ib) };
        T::destroy_qp(qp);
        // The driver's state may outlive the QP: its events and completions go nowhere
        // from here on.
        qp.ib_data().revoke();
        // SAFETY: destroyed above; the core frees the QP after this returns.
        unsafe { Qp::<T>::drop_slot(ib) };
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `attach_mcast`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn attach_mcast(ib: *mut sys::ib_qp, gid: *mut sys::ib_gid, _lid: u16) -> c_int {
        // SAFETY: a live QP of ours; the core passes a valid GID (a multicast
        // address, checked) for the call: `union ib_gid` is its 16 raw bytes.
        let (qp, gid) = unsafe { (Qp::<T>::from_raw(ib), gid.cast::<[u8; 16]>().read()) };
        from_result(|| T::attach_mcast(qp, &gid).map(|()| 0))
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `detach_mcast`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn detach_mcast(ib: *mut sys::ib_qp, gid: *mut sys::ib_gid, _lid: u16) -> c_int {
        // SAFETY: as for `attach_mcast`.
        let (qp, gid) = unsafe { (Qp::<T>::from_raw(ib), gid.cast::<[u8; 16]>().read()) };
        from_result(|| T::detach_mcast(qp, &gid).map(|()| 0))
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `post_send`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn post_send(
        ib: *mut sys::ib_qp,
        wr: *const sys::ib_send_wr,
        bad_wr: *mut *const sys::ib_send_wr,
    ) -> c_int {
        // SAFETY: a live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ib) };
        if wr.is_null() {
            // The rxe provider's doorbell: WQEs are in the shared send ring.
            return from_result(|| T::send_doorbell(qp).map(|_| 0));
        }
        // SAFETY: as in `user_list`.
        if let Some(e) = unsafe { user_list(ib_qp_user(ib), wr, bad_wr) } {
            return e;
        }
        // SAFETY: a live QP; its type is fixed at creation.
        let ud = matches!(unsafe { (*ib).qp_type }, sys::ib_qp_type_IB_QPT_UD | sys::ib_qp_type_IB_QPT_GSI);
        let mut cur = wr;
        let mut res = Ok(());
        let mut queued = false;
        while !cur.is_null() {
            // SAFETY: a kernel consumer's list (a user's was refused above) of valid work
            // requests, each the first member of the container its opcode and the QP type
            // name (`ib_rdma_wr`, `ib_ud_wr`).
            res = unsafe { Self::post_one::<T>(qp, cur, ud) };
            if res.is_err() {
                break;
            }
            queued = true;
            // SAFETY: as above.
            cur = unsafe { (*cur).next };
        }
        // What was queued before a failure still goes out.
        if queued {
            T::kick_send(qp);
        }
        match res {
            Ok(()) => 0,
            Err(e) => {
                if !bad_wr.is_null() {
                    // SAFETY: `bad_wr` is a valid out pointer when non-null.
                    unsafe { bad_wr.write(cur) };
                }
                e.to_errno()
            }
        }
    }

    /// # Safety
    ///
    /// `wr` must be a valid send work request of a kernel consumer (not one
    /// uverbs built from a user's request); `ud` says whether it is the first
    /// member of an `ib_ud_wr`.
    unsafe fn post_one<U: IbDriver>(qp: &Qp<U>, wr: *const sys::ib_send_wr, ud: bool) -> Result {
        // SAFETY: per the contract.
        let w = unsafe { &*wr };
        // SAFETY: the consumer passes `num_sge` valid entries.
        let sges = unsafe { sge_list(w.sg_list, w.num_sge)? };
        // UD and GSI QPs' requests come in an `ib_ud_wr`, which holds neither.
        let (remote_addr, rkey, compare_add, swap) = match w.opcode {
            _ if ud => (0, 0, 0, 0),
            sys::ib_wr_opcode_IB_WR_RDMA_WRITE
            | sys::ib_wr_opcode_IB_WR_RDMA_WRITE_WITH_IMM
            | sys::ib_wr_opcode_IB_WR_RDMA_READ => {
                // SAFETY: RDMA opcodes come in an `ib_rdma_wr`, whose first member is `wr`.
                let r = unsafe { &*wr.cast::<sys::ib_rdma_wr>() };
                (r.remote_addr, r.rkey, 0, 0)
            }
            sys::ib_wr_opcode_IB_WR_ATOMIC_CMP_AND_SWP | sys::ib_wr_opcode_IB_WR_ATOMIC_FETCH_AND_ADD => {
                // SAFETY: atomic opcodes come in an `ib_atomic_wr`, whose first member is `wr`.
                let a = unsafe { &*wr.cast::<sys::ib_atomic_wr>() };
                (a.remote_addr, a.rkey, a.compare_add, a.swap)
            }
            _ => (0, 0, 0, 0),
        };
        let reg = if w.opcode == sys::ib_wr_opcode_IB_WR_REG_MR && !ud {
            // SAFETY: REG_MR comes in an `ib_reg_wr`, whose first member is `wr`.
            let r = unsafe { &*wr.cast::<sys::ib_reg_wr>() };
            if r.mr.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: the consumer keeps the MR alive until the request completes; one of
            // another device is refused.
            let mr = unsafe { super::mr::mr_data::<U>(qp.device().raw(), r.mr) }.ok_or(EINVAL)?;
            // SAFETY: as above; `map_mr_sg` set these, and the consumer may have moved the iova.
            let (iova, len) = unsafe { ((*r.mr).iova, (*r.mr).length) };
            // SAFETY: as above, and the consumer posted this REG_MR of `r.mr`.
            let posted = unsafe { super::mr::reg_mr_posted::<U>(qp.device().raw(), r.mr) };
            Some(RegWr { mr, key: r.key, access: r.access, iova, len, posted })
        } else {
            None
        };
        let dest = if ud {
            // SAFETY: UD and GSI QPs' requests come in an `ib_ud_wr`.
            let u = unsafe { &*wr.cast::<sys::ib_ud_wr>() };
            if u.ah.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: the consumer keeps the AH alive while its request references it; one
            // of another device (of this driver or another) is refused.
            let ah = unsafe { super::ah::ah_data::<U>(qp.device().raw(), u.ah) }.ok_or(EINVAL)?;
            Some(UdDest { ah, remote_qpn: u.remote_qpn, remote_qkey: u.remote_qkey })
        } else {
            None
        };
        // SAFETY: the unions hold plain integers.
        let (wr_id, imm_or_inv) = unsafe { (*w.__bindgen_anon_1.wr_id.as_ref(), *w.ex.imm_data.as_ref()) };
        let local_inv = (w.opcode == sys::ib_wr_opcode_IB_WR_LOCAL_INV && !ud).then(|| {
            // SAFETY: the consumer posted this LOCAL_INV, naming `ex.invalidate_rkey` (the
            // union member read as `imm_or_inv`), with `wr_id`.
            unsafe { LocalInvPosted::posted(imm_or_inv, wr_id) }
        });
        let req = SendWr {
            wr_id,
            opcode: w.opcode,
            send_flags: w.send_flags as u32,
            imm_or_inv,
            sges,
            remote_addr,
            rkey,
            compare_add,
            swap,
            ud: dest,
            reg,
            local_inv,
        };
        U::post_send(qp, req)
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `post_recv`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn post_recv(
        ib: *mut sys::ib_qp,
        wr: *const sys::ib_recv_wr,
        bad_wr: *mut *const sys::ib_recv_wr,
    ) -> c_int {
        // SAFETY: a live QP of ours.
        let qp = unsafe { Qp::<T>::from_raw(ib) };
        // SAFETY: as in `user_list`.
        if let Some(e) = unsafe { user_list(ib_qp_user(ib), wr, bad_wr) } {
            return e;
        }
        // SAFETY: the core passes a kernel consumer's list (a user's was refused above) and
        // out pointer.
        unsafe { post_recv_list(wr, bad_wr, |r| T::post_recv(qp, r)) }
    }
}

/// Whether QP `ib` is a user's: the core sets `uobject` before `create_qp`
/// and keeps it for the QP's life.
///
/// # Safety
///
/// `ib` must be a live QP.
unsafe fn ib_qp_user(ib: *const sys::ib_qp) -> bool {
    // SAFETY: per the contract.
    !unsafe { (*ib).uobject }.is_null()
}

/// Refuses a list of work requests posted to a user's queue: `EINVAL`, with
/// `bad_wr` naming the first. Only uverbs posts such a list
/// (`ib_uverbs_post_send`; its receive commands are off, as the device
/// enables only POST_SEND's, the doorbell), built from a user's request:
/// its SGEs hold user addresses, which the ib layer's types ([`KernelSge`],
/// [`LocalInvPosted`]) would pass off as a kernel consumer's. rroce's user
/// queues post through their rings instead, and ring the doorbell with no
/// list. `None` if `user` is false.
///
/// # Safety
///
/// `bad_wr` must be null or a valid out pointer.
pub(super) unsafe fn user_list<W>(user: bool, wr: *const W, bad_wr: *mut *const W) -> Option<c_int> {
    if !user {
        return None;
    }
    if !bad_wr.is_null() {
        // SAFETY: `bad_wr` is a valid out pointer when non-null.
        unsafe { bad_wr.write(wr) };
    }
    Some(EINVAL.to_errno())
}

/// The SGEs of a work request; `EINVAL` for a negative count or a missing list.
///
/// # Safety
///
/// `list` must point to `num` valid entries that live for `'a` when `num > 0`.
unsafe fn sge_list<'a>(list: *const sys::ib_sge, num: c_int) -> Result<&'a [KernelSge]> {
    match usize::try_from(num) {
        Ok(0) => Ok(&[]),
        // SAFETY: per the contract; `KernelSge` is a transparent `ib_sge`.
        Ok(n) if !list.is_null() => Ok(unsafe { core::slice::from_raw_parts(list.cast::<KernelSge>(), n) }),
        _ => Err(EINVAL),
    }
}

/// Posts a kernel consumer's list of receive work requests with `post`, in
/// order, stopping at the first refused one, which `bad_wr` then names.
///
/// # Safety
///
/// `wr` must be null or a valid list of a kernel consumer's receive work
/// requests (not one uverbs built from a user's); `bad_wr` null or a valid
/// out pointer.
pub(super) unsafe fn post_recv_list(
    wr: *const sys::ib_recv_wr,
    bad_wr: *mut *const sys::ib_recv_wr,
    mut post: impl FnMut(&RecvWr<'_>) -> Result,
) -> c_int {
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a kernel consumer's list of valid receive work requests.
        let res = unsafe { recv_wr(cur) }.and_then(|r| post(&r));
        if let Err(e) = res {
            if !bad_wr.is_null() {
                // SAFETY: `bad_wr` is a valid out pointer when non-null.
                unsafe { bad_wr.write(cur) };
            }
            return e.to_errno();
        }
        // SAFETY: as above.
        cur = unsafe { (*cur).next };
    }
    0
}

/// # Safety
///
/// `wr` must be a valid receive work request of a kernel consumer, alive for `'a`.
unsafe fn recv_wr<'a>(wr: *const sys::ib_recv_wr) -> Result<RecvWr<'a>> {
    // SAFETY: per the contract.
    let w = unsafe { &*wr };
    // SAFETY: the consumer passes `num_sge` valid entries.
    let sges = unsafe { sge_list(w.sg_list, w.num_sge)? };
    // SAFETY: the union holds a plain integer.
    Ok(RecvWr { wr_id: unsafe { *w.__bindgen_anon_1.wr_id.as_ref() }, sges })
}

/// A kernel consumer's send work request.
pub(crate) struct SendWr<'a, T: IbDriver> {
    pub(crate) wr_id: u64,
    /// `IB_WR_*`; the values shared with user space equal `IB_UVERBS_WR_*`.
    pub(crate) opcode: u32,
    /// `IB_SEND_*`.
    pub(crate) send_flags: u32,
    /// Immediate data (network order) or the R_Key to invalidate.
    pub(crate) imm_or_inv: u32,
    pub(crate) sges: &'a [KernelSge],
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    /// Atomics: the compare value or addend, and the swap value.
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    /// Destination of a UD or GSI QP's request.
    pub(crate) ud: Option<UdDest<'a, T>>,
    /// `IB_WR_REG_MR`: the registration.
    pub(crate) reg: Option<RegWr<'a, T>>,
    /// `IB_WR_LOCAL_INV`: what its invalidation of a fast-registration MR
    /// takes for the proof its completion needs.
    pub(crate) local_inv: Option<LocalInvPosted>,
}

impl<T: IbDriver> SendWr<'_, T> {
    /// Copies the bytes of entry `index` into `dst`, which must be as long:
    /// only for a request flagged `IB_SEND_INLINE`, whose entries name bytes
    /// by kernel address with no key (any other entry's bytes are reached
    /// through its key, and a receive's are written, not read).
    pub(crate) fn read_inline(&self, index: usize, dst: &mut [u8]) -> Result {
        if self.send_flags & crate::proto::abi::send::FLAG_INLINE == 0 {
            return Err(EINVAL);
        }
        self.sges.get(index).ok_or(EINVAL)?.read_inline(dst)
    }
}

/// A fast registration: MR `mr` becomes valid under `key` with `access`,
/// over `len` bytes from `iova` of the pages mapped into it.
pub(crate) struct RegWr<'a, T: IbDriver> {
    pub(crate) mr: &'a T::MrData,
    pub(crate) key: u32,
    pub(crate) access: i32,
    pub(crate) iova: u64,
    pub(crate) len: u64,
    /// What lets the registration make the MR's pages accessible (`None`
    /// if `mr` is no fast-registration MR, which the REG_MR cannot register).
    pub(crate) posted: Option<RegMrPosted>,
}

/// Where a datagram goes.
pub(crate) struct UdDest<'a, T: IbDriver> {
    pub(crate) ah: &'a T::AhData,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
}

/// One scatter/gather entry of a kernel consumer's work request (`struct
/// ib_sge`), in the consumer's memory for the verb's duration.
#[repr(transparent)]
pub(crate) struct KernelSge(sys::ib_sge);

impl KernelSge {
    pub(crate) fn sge(&self) -> crate::proto::wqe::Sge {
        crate::proto::wqe::Sge { addr: self.0.addr, length: self.0.length, lkey: self.0.lkey }
    }

    /// Copies the entry's bytes into `dst`, which must be as long, for an
    /// inline send (`IB_SEND_INLINE`): the consumer names them by kernel
    /// virtual address, with no key, and may reuse them once the verb returns.
    fn read_inline(&self, dst: &mut [u8]) -> Result {
        if dst.len() != self.0.length as usize {
            return Err(EINVAL);
        }
        // SAFETY: `dst` is writable for its length. The source is bytes the consumer
        // gave in the work request it is posting (a `KernelSge` is only lent for the verb),
        // its own memory by the verb's contract; inline bytes may lie anywhere in the
        // kernel (the consumer's stack too), so not only in the linear map, and the
        // nofault copy makes a bad address an error, not a fault.
        let r = unsafe { sys::rroce_copy_from_kernel(dst.as_mut_ptr().cast(), self.0.addr, dst.len()) };
        if r == 0 {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }
}

/// A kernel consumer's receive work request.
pub(crate) struct RecvWr<'a> {
    pub(crate) wr_id: u64,
    pub(crate) sges: &'a [KernelSge],
}
