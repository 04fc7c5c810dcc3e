// SPDX-License-Identifier: GPL-2.0
//! A QP's driver details in `rdma res show qp -dd` (and its JSON): where
//! its transport stands, what congestion control holds it to, the class
//! its packets leave with and which queue runs its deferred work.

use super::*;
use crate::ib::ResAttrs;

pub(crate) fn fill(qp: &Qp, out: &mut ResAttrs<'_>) -> Result {
    let q = &*qp.data().shared;
    let data = qp.device().data();
    let settings = data.qos.settings();
    let (cc, qos) = (settings.cc, *settings.qos());
    // Read under the state lock as the verbs read it; written out after.
    let (details, av, params) = {
        let st = q.state.lock();
        (rc::Details::of(&st, &cc), st.attrs.av, st.attrs.params)
    };
    let connected = matches!(q.qp_type, QpType::Rc | QpType::Uc);
    if connected {
        out.hex32(c"sq_next_psn", details.sq_next_psn)?;
        out.hex32(c"sq_acked_psn", details.sq_acked_psn)?;
        out.hex32(c"rq_epsn", details.rq_epsn)?;
    }
    if q.qp_type == QpType::Rc {
        out.u32(c"rd_atomic_out", details.rd_atomic_out)?;
        out.u32(c"rd_atomic_max", u32::from(params.max_rd_atomic).max(1))?;
        let (used, max) = details.dest_rd_atomic;
        out.u32(c"dest_rd_atomic_used", used as u32)?;
        out.u32(c"dest_rd_atomic_max", max as u32)?;
        out.u32(c"retry_left", u32::from(details.retries_left))?;
        // 7 asks for unlimited RNR retries (IBTA 9.7.5.2.8).
        out.u32(c"rnr_retry_left", u32::from(details.rnr_left))?;
    }
    out.str(c"dcqcn", details.dcqcn.name())?;
    if let Some(rate) = details.rate_kbps {
        out.u64(c"dcqcn_rate_kbps", rate)?;
        out.u64(c"dcqcn_target_kbps", details.target_kbps)?;
        out.u32(c"dcqcn_alpha", details.alpha)?;
    }
    // A datagram QP's class comes with each work request's address handle.
    if let (true, Some(av)) = (connected, av) {
        let class = qos.data_class(av.traffic_class, av.sl);
        out.u32(c"prio", u32::from(class.priority))?;
        out.u32(c"dscp", u32::from(class.tos >> 2))?;
        out.u32(c"pfc", u32::from(class.priority_tag))?;
    }
    // The queue its runner uses: the module's, or its PD's own once the QP's
    // memory may fault (`qp/task.rs`).
    out.str(c"work_queue", if q.paging_queue().is_some() { c"pd" } else { c"module" })
}
