// SPDX-License-Identifier: GPL-2.0
//! Completion queues: the core's `struct ib_cq` followed by the driver's data.

use super::{CoreQpId, IbDriver, Invalidated, Udata, UserContext};
use crate::proto::cqe::{Cqe, WcStatus};
use crate::sys;
use kernel::error::from_result;
use kernel::ffi::{c_int, c_uint};

/// Creation attributes of a CQ.
pub(crate) struct CqInit {
    /// Entries asked for.
    pub(crate) cqe: u32,
    /// Completion vector (interrupt) asked for; the core checked its range.
    #[allow(dead_code)] // Engine placement per vector comes with the data path.
    pub(crate) comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*`.
    pub(crate) flags: u32,
}

/// A completion queue of driver `T`.
pub(crate) type Cq<T> = super::DeviceObj<T, sys::ib_cq, <T as IbDriver>::CqData>;

impl<T: IbDriver> Cq<T> {
    /// Calls the consumer's completion handler (the CQ event of `ibv_get_cq_event`).
    pub(crate) fn completion_event(&self) {
        let ib = self.raw();
        // SAFETY: `comp_handler` and `cq_context` are set by the core for the CQ's lifetime;
        // the handler may be called from any context.
        unsafe {
            if let Some(h) = (*ib).comp_handler {
                h(ib, (*ib).cq_context);
            }
        }
    }

    /// Reports a CQ overrun (`IB_EVENT_CQ_ERR`) to the consumer.
    pub(crate) fn overrun_event(&self) {
        // SAFETY: as in `completion_event`: the CQ is live while borrowed.
        unsafe { super::event::raise(super::event::EventSource::Cq(self.raw()), sys::ib_event_type_IB_EVENT_CQ_ERR) }
    }
}

/// Warns that a completion of QP `qpn` was lost to a full CQ. A user can
/// overrun its own CQ at will, so the message is ratelimited.
pub(crate) fn warn_cq_overrun(qpn: u32) {
    // SAFETY: prints a message; callable in any context.
    unsafe { sys::rroce_warn_cq_overrun(qpn) };
}

// proto's network header types are the core's `enum rdma_network_type`.
const _: () = {
    assert!(crate::proto::cqe::network_hdr::IPV4 as u32 == sys::rdma_network_type_RDMA_NETWORK_IPV4);
    assert!(crate::proto::cqe::network_hdr::IPV6 as u32 == sys::rdma_network_type_RDMA_NETWORK_IPV6);
};

/// A completion for a kernel consumer's CQ, as [`WcSink::push`] stores it.
/// A kernel consumer learns that an invalidation of a fast-registration
/// key finished from a successful `IB_WC_LOCAL_INV` completion or a receive
/// with `IB_WC_WITH_INVALIDATE`, and then reuses the MR's pages: those two
/// kinds are made only with the [`Invalidated`] proof that the pages were
/// unregistered ([`Self::new`]: a LOCAL_INV's only with the proof its own
/// posted request made, matched by `wr_id`; a receive's only with a peer's
/// invalidation of the key it reports). Without one, [`Self::failed`]
/// completes in error instead. Not `Clone`: one proof, one completion.
///
/// A driver cannot report an invalidation it did not make:
///
/// ```compile_fail
/// fn local_inv_done(c: crate::proto::cqe::Cqe) -> crate::ib::KernelWc {
///     crate::ib::KernelWc { cqe: c } // private field; `new` refuses it without the proof
/// }
/// ```
pub(crate) struct KernelWc {
    cqe: Cqe,
}

impl KernelWc {
    /// Whether completion `c` may reach the consumer with `proof`: one that
    /// tells of a finished invalidation (or claims to) only with the proof of
    /// that invalidation (the LOCAL_INV's whose posted request made it, by
    /// `wr_id`; a peer's of the key the receive reports), any other always.
    fn proven(c: &Cqe, proof: Option<&Invalidated>) -> bool {
        if c.wc_flags & sys::ib_wc_flags_IB_WC_WITH_INVALIDATE != 0 {
            c.opcode != sys::ib_wc_opcode_IB_WC_LOCAL_INV && proof.is_some_and(|p| p.fits_peer(c.imm_or_inv))
        } else if c.status == WcStatus::Success && c.opcode == sys::ib_wc_opcode_IB_WC_LOCAL_INV {
            proof.is_some_and(|p| p.fits_local_inv(c.wr_id))
        } else {
            true
        }
    }

    /// Completion `c`, with the proof of the invalidation it tells of, if it
    /// does; given back if it tells of one `proof` does not prove. The proof
    /// is used up either way.
    pub(crate) fn new(c: Cqe, proof: Option<Invalidated>) -> Result<Self, Cqe> {
        if !Self::proven(&c, proof.as_ref()) {
            return Err(c);
        }
        Ok(Self { cqe: c })
    }

    /// Completion `c` in error, which tells of no invalidation: the consumer
    /// does not count on one, so it needs no proof. An error status `c` has
    /// is kept.
    pub(crate) fn failed(c: Cqe) -> Self {
        let status = if c.status == WcStatus::Success { WcStatus::GeneralErr } else { c.status };
        let wc_flags = c.wc_flags & !sys::ib_wc_flags_IB_WC_WITH_INVALIDATE;
        Self { cqe: Cqe { status, wc_flags, ..c } }
    }
}

/// A kernel consumer's `poll_cq` array (`struct ib_wc`), uninitialised when
/// lent to the driver: entries are written only whole, by [`WcSink::push`],
/// so the core is told exactly how many are filled.
///
/// Invariant: `wc` has room for `cap` entries for `'a`, and `filled <= cap`;
/// only `CqOps::poll` makes one (the fields are private).
pub(crate) struct WcSink<'a> {
    wc: *mut sys::ib_wc,
    cap: usize,
    filled: usize,
    _array: core::marker::PhantomData<&'a mut [core::mem::MaybeUninit<sys::ib_wc>]>,
}

impl WcSink<'_> {
    /// Stores `wc`, a completion of the core's QP `qp`, in the next entry;
    /// gives it back (nothing stored) when the array is full.
    pub(crate) fn push(&mut self, entry: KernelWc, qp: CoreQpId) -> Result<(), KernelWc> {
        if self.is_full() {
            return Err(entry);
        }
        let c = &entry.cqe;
        // Built whole on the stack: fields the completion does not set are zero, not
        // whatever the consumer's array held.
        let mut wc: sys::ib_wc = pin_init::zeroed();
        write_wc(&mut wc, c, qp.as_raw());
        // SAFETY: `filled < cap`, and the array has room for `cap` entries while the
        // sink lives (the type's invariant); a plain write, as the entry may be
        // uninitialised.
        unsafe { self.wc.add(self.filled).write(wc) };
        self.filled += 1;
        Ok(())
    }

    pub(crate) fn is_full(&self) -> bool {
        self.filled == self.cap
    }

    /// How many entries `push` filled; never more than the array holds.
    fn filled(&self) -> usize {
        self.filled
    }
}

/// Which completion raises the next completion event (`enum
/// ib_cq_notify_flags`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum CqArm {
    /// The next solicited one (or an error completion).
    Solicited,
    /// The next one of any kind.
    NextCompletion,
}

/// A `req_notify_cq` request.
#[derive(Clone, Copy)]
pub(crate) struct CqNotify {
    /// `None`: only asks whether completions are pending.
    pub(crate) arm: Option<CqArm>,
    /// Report whether completions are already pending (`IB_CQ_REPORT_MISSED_EVENTS`).
    pub(crate) report_missed: bool,
}

impl CqNotify {
    fn from_raw(flags: u32) -> Self {
        // The core's two arming bits form one field; were both set, the broader
        // request wins.
        let arm = if flags & sys::ib_cq_notify_flags_IB_CQ_NEXT_COMP != 0 {
            Some(CqArm::NextCompletion)
        } else if flags & sys::ib_cq_notify_flags_IB_CQ_SOLICITED != 0 {
            Some(CqArm::Solicited)
        } else {
            None
        };
        Self { arm, report_missed: flags & sys::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 }
    }
}

fn write_wc(wc: &mut sys::ib_wc, c: &Cqe, qp: *mut sys::ib_qp) {
    // SAFETY: the union members are plain integers overlaying the same bytes; writing
    // through the markers writes into the union's storage inside `wc`.
    unsafe {
        *wc.__bindgen_anon_1.wr_id.as_mut() = c.wr_id;
        *wc.ex.imm_data.as_mut() = c.imm_or_inv;
    }
    wc.status = c.status as u32;
    wc.opcode = c.opcode;
    wc.vendor_err = c.vendor_err;
    wc.byte_len = c.byte_len;
    wc.qp = qp;
    wc.src_qp = c.src_qp;
    wc.slid = 0;
    wc.wc_flags = c.wc_flags as i32;
    wc.pkey_index = c.pkey_index;
    wc.sl = c.sl;
    wc.dlid_path_bits = 0;
    wc.port_num = c.port_num.into();
    wc.network_hdr_type = c.network_hdr_type;
    if c.network_hdr_type != 0 {
        wc.wc_flags |= sys::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as i32;
    }
}

/// The trampolines of the CQ verbs.
pub(super) struct CqOps<T: IbDriver>(core::marker::PhantomData<T>);

impl<T: IbDriver> CqOps<T> {
    /// # Safety
    ///
    /// Only the RDMA core calls this, as `create_cq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn create(
        ib: *mut sys::ib_cq,
        attr: *const sys::ib_cq_init_attr,
        attrs: *mut sys::uverbs_attr_bundle,
    ) -> c_int {
        from_result(|| {
            // SAFETY: the core passes a zeroed CQ of our announced size with `device` set,
            // valid attributes, and a bundle whose first member is the driver udata (or
            // null for kernel consumers).
            let (dev, attr, udata_raw) = unsafe {
                (super::Device::<T>::from_raw((*ib).device), &*attr, attrs.cast::<sys::ib_udata>())
            };
            // SAFETY: `udata_raw` is null or valid for the call.
            let mut udata = unsafe { Udata::from_raw(udata_raw) };
            // SAFETY: as above.
            let uctx = unsafe { UserContext::from_udata(udata_raw) };
            let init = CqInit { cqe: attr.cqe, comp_vector: attr.comp_vector, flags: attr.flags };
            let (data, cqe) = T::create_cq(dev, &init, uctx.as_ref(), &mut udata)?;
            // SAFETY: a CQ of ours the core has not published, its slot uninitialised; on
            // error the core frees it without calling `destroy`.
            unsafe {
                Cq::<T>::init(ib, data, ())?;
                (*ib).cqe = cqe as c_int;
            }
            Ok(0)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `destroy_cq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn destroy(ib: *mut sys::ib_cq, _udata: *mut sys::ib_udata) -> c_int {
        // SAFETY: only CQs whose creation succeeded are destroyed, once, with no QP left
        // using them (the core checks `usecnt`).
        unsafe {
            T::destroy_cq(Cq::from_raw(ib));
            Cq::<T>::drop_slot(ib);
        }
        0
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `poll_cq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn poll(ib: *mut sys::ib_cq, n: c_int, wc: *mut sys::ib_wc) -> c_int {
        let n = usize::try_from(n).unwrap_or(0);
        if n == 0 || wc.is_null() {
            return 0;
        }
        // SAFETY: a live CQ of ours.
        let cq = unsafe { Cq::<T>::from_raw(ib) };
        // `wc` has room for `n` entries for the call; the sink writes no more.
        let mut sink = WcSink { wc, cap: n, filled: 0, _array: core::marker::PhantomData };
        T::poll_cq(cq, &mut sink);
        // At most `n`, which came from a `c_int`.
        sink.filled() as c_int
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `req_notify_cq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn req_notify(ib: *mut sys::ib_cq, flags: sys::ib_cq_notify_flags) -> c_int {
        from_result(|| {
            // SAFETY: a live CQ of ours.
            let cq = unsafe { Cq::<T>::from_raw(ib) };
            Ok(T::req_notify_cq(cq, CqNotify::from_raw(flags))? as c_int)
        })
    }

    /// # Safety
    ///
    /// Only the RDMA core calls this, as `resize_user_cq`, by the contract of [`Adapter`].
    pub(super) unsafe extern "C" fn resize(ib: *mut sys::ib_cq, cqe: c_uint, udata_raw: *mut sys::ib_udata) -> c_int {
        from_result(|| {
            // SAFETY: a live CQ of ours; `udata_raw` is valid for the call (user CQs only).
            let (cq, mut udata, uctx) =
                unsafe { (Cq::<T>::from_raw(ib), Udata::from_raw(udata_raw), UserContext::from_udata(udata_raw)) };
            let n = T::resize_cq(cq, cqe, uctx.as_ref(), &mut udata)?;
            // SAFETY: the core serialises resize with other CQ verbs of user space.
            unsafe { (*ib).cqe = n as c_int };
            Ok(0)
        })
    }
}
