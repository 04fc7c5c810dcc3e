// SPDX-License-Identifier: GPL-2.0
//! Firing the driver's trace events (`rroce:*`, defined in C in
//! csrc/trace.c): a call each, which returns after a static key test while
//! the event is off.

use super::*;
use core::ffi::CStr;

/// A packet dropped before its QP was known.
pub(crate) const NO_QPN: u32 = u32::MAX;

/// QP `qpn` went from state `from` to `to` (`enum ib_qp_state`).
pub(crate) fn qp_state<T: IbDriver>(dev: &Device<T>, qpn: u32, from: u32, to: u32) {
    // SAFETY: the device is live while borrowed; the event only reads its name.
    unsafe { sys::rroce_trace_qp_state(dev.raw(), qpn, from as u8, to as u8) };
}

/// A work request of QP `qpn` completes with error `status` (`enum
/// ib_wc_status`) for `reason`.
pub(crate) fn cqe_error<T: IbDriver>(dev: &Device<T>, qpn: u32, status: u32, reason: &'static CStr) {
    // SAFETY: as in `qp_state`; `reason` is NUL-terminated, copied by the event.
    unsafe { sys::rroce_trace_cqe_error(dev.raw(), qpn, status as u8, reason.as_char_ptr()) };
}

/// A received packet for QP `qpn` (or [`NO_QPN`]) was dropped; `reason` is
/// the name of the counter that counted it.
pub(crate) fn packet_drop<T: IbDriver>(dev: &Device<T>, qpn: u32, reason: &'static CStr) {
    // SAFETY: as in `cqe_error`.
    unsafe { sys::rroce_trace_packet_drop(dev.raw(), qpn, reason.as_char_ptr()) };
}

/// The requester of QP `qpn` sends again from `psn`.
pub(crate) fn retransmit<T: IbDriver>(dev: &Device<T>, qpn: u32, psn: u32, reason: &'static CStr) {
    // SAFETY: as in `cqe_error`.
    unsafe { sys::rroce_trace_retransmit(dev.raw(), qpn, psn, reason.as_char_ptr()) };
}

/// QP `qpn` sent (`sent`) or received a CNP, with `outcome`.
pub(crate) fn cnp<T: IbDriver>(dev: &Device<T>, qpn: u32, sent: bool, outcome: &'static CStr) {
    // SAFETY: as in `cqe_error`.
    unsafe { sys::rroce_trace_cnp(dev.raw(), qpn, sent, outcome.as_char_ptr()) };
}

/// Congestion control moved QP `qpn`'s rate (kbit/s, 0: not limited).
pub(crate) fn rate<T: IbDriver>(dev: &Device<T>, qpn: u32, from_kbps: u64, to_kbps: u64) {
    // SAFETY: as in `qp_state`.
    unsafe { sys::rroce_trace_rate(dev.raw(), qpn, from_kbps, to_kbps) };
}
