// SPDX-License-Identifier: GPL-2.0
//! The bits of `enum ib_qp_attr_mask`: which attributes a `modify_qp` sets.

#![deny(unsafe_code)]

use crate::sys;

pub(super) const STATE: u32 = sys::ib_qp_attr_mask_IB_QP_STATE;
pub(super) const CUR_STATE: u32 = sys::ib_qp_attr_mask_IB_QP_CUR_STATE;
pub(super) const EN_SQD_ASYNC_NOTIFY: u32 = sys::ib_qp_attr_mask_IB_QP_EN_SQD_ASYNC_NOTIFY;
pub(super) const ACCESS_FLAGS: u32 = sys::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS;
pub(super) const PKEY_INDEX: u32 = sys::ib_qp_attr_mask_IB_QP_PKEY_INDEX;
pub(super) const PORT: u32 = sys::ib_qp_attr_mask_IB_QP_PORT;
pub(super) const QKEY: u32 = sys::ib_qp_attr_mask_IB_QP_QKEY;
pub(super) const AV: u32 = sys::ib_qp_attr_mask_IB_QP_AV;
pub(super) const PATH_MTU: u32 = sys::ib_qp_attr_mask_IB_QP_PATH_MTU;
pub(super) const TIMEOUT: u32 = sys::ib_qp_attr_mask_IB_QP_TIMEOUT;
pub(super) const RETRY_CNT: u32 = sys::ib_qp_attr_mask_IB_QP_RETRY_CNT;
pub(super) const RNR_RETRY: u32 = sys::ib_qp_attr_mask_IB_QP_RNR_RETRY;
pub(super) const RQ_PSN: u32 = sys::ib_qp_attr_mask_IB_QP_RQ_PSN;
pub(super) const MAX_QP_RD_ATOMIC: u32 = sys::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC;
pub(super) const ALT_PATH: u32 = sys::ib_qp_attr_mask_IB_QP_ALT_PATH;
pub(super) const MIN_RNR_TIMER: u32 = sys::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER;
pub(super) const SQ_PSN: u32 = sys::ib_qp_attr_mask_IB_QP_SQ_PSN;
pub(super) const MAX_DEST_RD_ATOMIC: u32 = sys::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC;
pub(super) const PATH_MIG_STATE: u32 = sys::ib_qp_attr_mask_IB_QP_PATH_MIG_STATE;
pub(super) const DEST_QPN: u32 = sys::ib_qp_attr_mask_IB_QP_DEST_QPN;
