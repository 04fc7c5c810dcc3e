// SPDX-License-Identifier: GPL-2.0
//! What `modify_qp` sets and `query_qp` reports: the core's `struct
//! ib_qp_attr` (and the part of `struct ib_qp_init_attr` a query returns) as
//! kernel-owned values, the mask of `enum ib_qp_attr_mask`, and QP types and
//! states by name rather than by the core's integers.

use super::av::{read_av, write_av, AvError, RoceAv};
use super::qp::QpCaps;
use crate::proto::qp_state::QpState;
use crate::sys;

// proto's state enum carries the core's `enum ib_qp_state` values.
const _: () = {
    assert!(QpState::Reset as u32 == sys::ib_qp_state_IB_QPS_RESET);
    assert!(QpState::Init as u32 == sys::ib_qp_state_IB_QPS_INIT);
    assert!(QpState::Rtr as u32 == sys::ib_qp_state_IB_QPS_RTR);
    assert!(QpState::Rts as u32 == sys::ib_qp_state_IB_QPS_RTS);
    assert!(QpState::Sqd as u32 == sys::ib_qp_state_IB_QPS_SQD);
    assert!(QpState::Sqe as u32 == sys::ib_qp_state_IB_QPS_SQE);
    assert!(QpState::Err as u32 == sys::ib_qp_state_IB_QPS_ERR);
};

/// Transport service of a QP (`enum ib_qp_type`): the types a RoCE device
/// without XRC or raw packet QPs serves; the core's others are refused.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum QpType {
    Rc,
    Uc,
    Ud,
    /// The general services QP (QPN 1) that carries MADs: UD on the wire.
    Gsi,
}

impl QpType {
    pub(super) fn from_raw(t: u32) -> Option<Self> {
        match t {
            sys::ib_qp_type_IB_QPT_RC => Some(Self::Rc),
            sys::ib_qp_type_IB_QPT_UC => Some(Self::Uc),
            sys::ib_qp_type_IB_QPT_UD => Some(Self::Ud),
            sys::ib_qp_type_IB_QPT_GSI => Some(Self::Gsi),
            _ => None,
        }
    }

    fn to_raw(self) -> u32 {
        match self {
            Self::Rc => sys::ib_qp_type_IB_QPT_RC,
            Self::Uc => sys::ib_qp_type_IB_QPT_UC,
            Self::Ud => sys::ib_qp_type_IB_QPT_UD,
            Self::Gsi => sys::ib_qp_type_IB_QPT_GSI,
        }
    }

    /// Datagram service: UD and the GSI QP.
    pub(crate) fn is_datagram(self) -> bool {
        matches!(self, Self::Ud | Self::Gsi)
    }
}

/// A set of `enum ib_qp_attr_mask` bits: which attributes a `modify_qp` sets.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct AttrMask(u32);

impl AttrMask {
    pub(crate) const STATE: Self = Self(sys::ib_qp_attr_mask_IB_QP_STATE);
    pub(crate) const CUR_STATE: Self = Self(sys::ib_qp_attr_mask_IB_QP_CUR_STATE);
    pub(crate) const EN_SQD_ASYNC_NOTIFY: Self = Self(sys::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY);
    pub(crate) const ACCESS_FLAGS: Self = Self(sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS);
    pub(crate) const PKEY_INDEX: Self = Self(sys::ib_qp_attr_mask_IB_QP_PKEY_INDEX);
    pub(crate) const PORT: Self = Self(sys::ib_qp_attr_mask_IB_QP_PORT);
    pub(crate) const QKEY: Self = Self(sys::ib_qp_attr_mask_IB_QP_QKEY);
    pub(crate) const AV: Self = Self(sys::ib_qp_attr_mask_IB_QP_AV);
    pub(crate) const PATH_MTU: Self = Self(sys::ib_qp_attr_mask_IB_QP_PATH_MTU);
    pub(crate) const TIMEOUT: Self = Self(sys::ib_qp_attr_mask_IB_QP_TIMEOUT);
    pub(crate) const RETRY_CNT: Self = Self(sys::ib_qp_attr_mask_IB_QP_RETRY_CNT);
    pub(crate) const RNR_RETRY: Self = Self(sys::ib_qp_attr_mask_IB_QP_RNR_RETRY);
    pub(crate) const RQ_PSN: Self = Self(sys::ib_qp_attr_mask_IB_QP_RQ_PSN);
    pub(crate) const MAX_QP_RD_ATOMIC: Self = Self(sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC);
    pub(crate) const ALT_PATH: Self = Self(sys::ib_qp_attr_mask_IB_QP_ALT_PATH);
    pub(crate) const MIN_RNR_TIMER: Self = Self(sys::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER);
    pub(crate) const SQ_PSN: Self = Self(sys::ib_qp_attr_mask_IB_QP_SQ_PSN);
    pub(crate) const MAX_DEST_RD_ATOMIC: Self = Self(sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC);
    pub(crate) const PATH_MIG_STATE: Self = Self(sys::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE);
    pub(crate) const DEST_QPN: Self = Self(sys::ib_qp_attr_mask_IB_QP_DEST_QPN);

    /// Whether any bit of `other` is set.
    pub(crate) const fn any(self, other: Self) -> bool {
        self.0 & other.0 != 0
    }
}

impl core::ops::BitOr for AttrMask {
    type Output = Self;
    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// Whether `mask` may move a QP of `qp_type` from `cur` to `next` (IBTA 10.3.1,
/// table 91), as the core's own table says.
pub(crate) fn modify_is_ok(cur: QpState, next: QpState, qp_type: QpType, mask: AttrMask) -> bool {
    // SAFETY: a pure table lookup.
    unsafe { sys::ib_modify_qp_is_ok(cur as u32, next as u32, qp_type.to_raw(), mask.0) }
}

/// The QP attributes both `modify_qp` and `query_qp` carry as plain values,
/// read from and written to the core's `ib_qp_attr` in one place each.
#[derive(Clone, Copy, Default)]
pub(crate) struct QpParams {
    /// `enum ib_mtu`, unchecked.
    pub(crate) path_mtu: u32,
    pub(crate) qkey: u32,
    /// 24-bit PSNs (a modify's extra bits are dropped by [`QpParams::apply`]).
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    pub(crate) dest_qp_num: u32,
    /// `IB_ACCESS_*` bits.
    pub(crate) access: u32,
    pub(crate) pkey_index: u16,
    pub(crate) en_sqd_async_notify: u8,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
}

/// The bits of a PSN or QP number.
const MASK_24: u32 = 0x00ff_ffff;

impl QpParams {
    fn read(a: &sys::ib_qp_attr) -> Self {
        Self {
            path_mtu: a.path_mtu,
            qkey: a.qkey,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            dest_qp_num: a.dest_qp_num,
            access: a.qp_access_flags as u32,
            pkey_index: a.pkey_index,
            en_sqd_async_notify: a.en_sqd_async_notify,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
        }
    }

    fn write(&self, a: &mut sys::ib_qp_attr) {
        a.path_mtu = self.path_mtu;
        a.qkey = self.qkey;
        a.rq_psn = self.rq_psn;
        a.sq_psn = self.sq_psn;
        a.dest_qp_num = self.dest_qp_num;
        a.qp_access_flags = self.access as i32;
        a.pkey_index = self.pkey_index;
        a.en_sqd_async_notify = self.en_sqd_async_notify;
        a.max_rd_atomic = self.max_rd_atomic;
        a.max_dest_rd_atomic = self.max_dest_rd_atomic;
        a.min_rnr_timer = self.min_rnr_timer;
        a.timeout = self.timeout;
        a.retry_cnt = self.retry_cnt;
        a.rnr_retry = self.rnr_retry;
    }

    /// Takes the values of `new` that `mask` names; PSNs and the destination
    /// QP number keep their low 24 bits.
    pub(crate) fn apply(&mut self, new: &Self, mask: AttrMask) {
        let set = |bit| mask.any(bit);
        if set(AttrMask::PATH_MTU) {
            self.path_mtu = new.path_mtu;
        }
        if set(AttrMask::QKEY) {
            self.qkey = new.qkey;
        }
        if set(AttrMask::RQ_PSN) {
            self.rq_psn = new.rq_psn & MASK_24;
        }
        if set(AttrMask::SQ_PSN) {
            self.sq_psn = new.sq_psn & MASK_24;
        }
        if set(AttrMask::DEST_QPN) {
            self.dest_qp_num = new.dest_qp_num & MASK_24;
        }
        if set(AttrMask::ACCESS_FLAGS) {
            self.access = new.access;
        }
        if set(AttrMask::PKEY_INDEX) {
            self.pkey_index = new.pkey_index;
        }
        if set(AttrMask::EN_SQD_ASYNC_NOTIFY) {
            self.en_sqd_async_notify = new.en_sqd_async_notify;
        }
        if set(AttrMask::MAX_QP_RD_ATOMIC) {
            self.max_rd_atomic = new.max_rd_atomic;
        }
        if set(AttrMask::MAX_DEST_RD_ATOMIC) {
            self.max_dest_rd_atomic = new.max_dest_rd_atomic;
        }
        if set(AttrMask::MIN_RNR_TIMER) {
            self.min_rnr_timer = new.min_rnr_timer;
        }
        if set(AttrMask::TIMEOUT) {
            self.timeout = new.timeout;
        }
        if set(AttrMask::RETRY_CNT) {
            self.retry_cnt = new.retry_cnt;
        }
        if set(AttrMask::RNR_RETRY) {
            self.rnr_retry = new.rnr_retry;
        }
    }
}

/// The attributes a `modify_qp` gives, copied out of the core's struct once.
/// Only the ones `mask` names carry meaning.
pub(crate) struct ModifyAttrs {
    pub(crate) mask: AttrMask,
    /// The state asked for; `None` if the value names no state.
    pub(crate) qp_state: Option<QpState>,
    /// The state the caller believes the QP is in; `None` as above.
    pub(crate) cur_qp_state: Option<QpState>,
    pub(crate) port_num: u32,
    pub(crate) params: QpParams,
    /// The primary path, read only when the mask has [`AttrMask::AV`].
    pub(crate) av: Option<Result<RoceAv, AvError>>,
}

impl ModifyAttrs {
    /// # Safety
    ///
    /// `a` must be the attributes the core passed for a `modify_qp` in progress.
    pub(super) unsafe fn from_raw(a: &sys::ib_qp_attr, mask: u32) -> Self {
        let mask = AttrMask(mask);
        Self {
            mask,
            qp_state: QpState::from_ib(a.qp_state),
            cur_qp_state: QpState::from_ib(a.cur_qp_state),
            port_num: a.port_num,
            params: QpParams::read(a),
            av: mask.any(AttrMask::AV).then(|| {
                // SAFETY: the core's attributes for this `modify_qp` (the contract).
                unsafe { read_av(&a.ah_attr) }
            }),
        }
    }
}

/// What a `query_qp` reports: the driver fills it, this layer writes the
/// core's `ib_qp_attr` and `ib_qp_init_attr` from it. No alternate path is
/// modelled: the path migration state is always "migrated".
pub(crate) struct QueryAttrs {
    pub(crate) qp_type: QpType,
    pub(crate) state: QpState,
    pub(crate) port_num: u32,
    pub(crate) params: QpParams,
    /// Whether a QP in SQD still has work requests in flight.
    pub(crate) sq_draining: bool,
    pub(crate) av: Option<RoceAv>,
    pub(crate) cap: QpCaps,
    /// Every send work request completes, not only the signalled ones.
    pub(crate) sq_sig_all: bool,
}

impl QueryAttrs {
    pub(super) fn write(&self, attr: &mut sys::ib_qp_attr, init: &mut sys::ib_qp_init_attr) {
        attr.qp_state = self.state as u32;
        attr.cur_qp_state = self.state as u32;
        attr.path_mig_state = sys::ib_mig_state_IB_MIG_MIGRATED;
        self.params.write(attr);
        attr.sq_draining = u8::from(self.sq_draining);
        attr.port_num = self.port_num;
        if let Some(av) = &self.av {
            write_av(&mut attr.ah_attr, av, self.port_num);
        }
        self.cap.write(&mut attr.cap);
        self.cap.write(&mut init.cap);
        init.qp_type = self.qp_type.to_raw();
        init.sq_sig_type =
            if self.sq_sig_all { sys::ib_sig_type_IB_SIGNAL_ALL_WR } else { sys::ib_sig_type_IB_SIGNAL_REQ_WR };
        init.port_num = self.port_num;
    }
}
