// SPDX-License-Identifier: GPL-2.0
//! A snapshot of a QP's transport state for `rdma res show qp -dd`
//! (`qp/res.rs` writes it out).

use super::*;
use crate::proto::dcqcn::{Params, Stage};

/// What the requester, the responder and congestion control stand at.
pub(in crate::qp) struct Details {
    /// The PSN the requester sends next, and the last one acknowledged.
    pub(in crate::qp) sq_next_psn: u32,
    pub(in crate::qp) sq_acked_psn: u32,
    /// The PSN the responder expects next.
    pub(in crate::qp) rq_epsn: u32,
    /// READs and atomics this QP has outstanding at its peer.
    pub(in crate::qp) rd_atomic_out: u32,
    /// The peer's READs and atomics this QP is answering, and how many it may.
    pub(in crate::qp) dest_rd_atomic: (usize, usize),
    /// Transport and RNR retries left for the oldest WQE (RNR 7: unlimited).
    pub(in crate::qp) retries_left: u8,
    pub(in crate::qp) rnr_left: u8,
    pub(in crate::qp) dcqcn: Stage,
    /// The rate DCQCN holds the QP to, kbit/s (`None`: unlimited), its
    /// target and alpha (of 1024).
    pub(in crate::qp) rate_kbps: Option<u64>,
    pub(in crate::qp) target_kbps: u64,
    pub(in crate::qp) alpha: u32,
}

impl Details {
    /// Read under the QP's state lock; `cc` are the device's DCQCN settings.
    pub(in crate::qp) fn of(st: &QpState, cc: &Params) -> Self {
        let (req, resp) = (&st.rc.req, &st.rc.resp);
        let rp = cc::reaction_point(st);
        Self {
            sq_next_psn: psn_add(req.psn_high, 1),
            sq_acked_psn: req.acked_psn,
            rq_epsn: resp.epsn,
            rd_atomic_out: req.reads_outstanding,
            dest_rd_atomic: resp.reads.in_use(),
            retries_left: req.retries_left,
            rnr_left: req.rnr_left,
            dcqcn: rp.stage(cc),
            rate_kbps: rp.rate_kbps(),
            target_kbps: rp.target_kbps(),
            alpha: rp.alpha(),
        }
    }
}

/// The rate DCQCN holds the QP to, kbit/s; `None` while unlimited.
pub(in crate::qp) fn rate_kbps(st: &QpState) -> Option<u64> {
    cc::reaction_point(st).rate_kbps()
}
