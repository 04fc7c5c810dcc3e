// SPDX-License-Identifier: GPL-2.0
//! The driver's trace events (`rroce:*`), fired where the transport counts
//! the same things: the reasons are the names of those counters
//! (`rdma statistic`), or the NAK that decided an error completion.

use crate::counters::Counter;
use crate::device::Device;
use crate::ib;
use crate::proto::cqe::WcStatus;
use crate::proto::qp_state::QpState;
use core::ffi::CStr;

pub(crate) use ib::trace::NO_QPN;

/// A received packet for QP `qpn` (or [`NO_QPN`]) was dropped and counted in `why`.
pub(crate) fn drop(dev: &Device, qpn: u32, why: Counter) {
    ib::trace::packet_drop(dev, qpn, why.name());
}

/// QP `qpn` went from `from` to `to`.
pub(crate) fn qp_state(dev: &Device, qpn: u32, from: QpState, to: QpState) {
    if from != to {
        ib::trace::qp_state(dev, qpn, from.to_ib(), to.to_ib());
    }
}

/// A work request of QP `qpn` completes with error `status` for `reason`.
pub(crate) fn cqe_error(dev: &Device, qpn: u32, status: WcStatus, reason: &'static CStr) {
    ib::trace::cqe_error(dev, qpn, status as u32, reason);
}

/// A work request of QP `qpn`, in state `state`, completes with error
/// `status` for `reason`, which moves the QP to the error state.
pub(crate) fn fatal_cqe(dev: &Device, qpn: u32, state: QpState, status: WcStatus, reason: &'static CStr) {
    cqe_error(dev, qpn, status, reason);
    qp_state(dev, qpn, state, QpState::Err);
}

/// The requester of QP `qpn` sends again from `psn`, as counted in `why`.
pub(crate) fn retransmit(dev: &Device, qpn: u32, psn: u32, why: Counter) {
    ib::trace::retransmit(dev, qpn, psn, why.name());
}

/// QP `qpn` sent a CNP to its peer (counted in `np_cnp_sent`).
pub(crate) fn cnp_sent(dev: &Device, qpn: u32) {
    ib::trace::cnp(dev, qpn, true, Counter::NpCnpSent.name());
}

/// QP `qpn` received a CNP, with its rate (kbit/s; `None`: not limited)
/// before and after: a cut is also a rate event.
pub(crate) fn cnp_received(dev: &Device, qpn: u32, from: Option<u64>, to: Option<u64>) {
    ib::trace::cnp(dev, qpn, false, if from != to { c"rate_cut" } else { c"rate_kept" });
    if from != to {
        ib::trace::rate(dev, qpn, from.unwrap_or(0), to.unwrap_or(0));
    }
}
