// SPDX-License-Identifier: GPL-2.0
//! The reliable connected transport, and with the reliability left out the
//! unreliable connected one, in three parts laid out as the protocol is (and
//! as rdma_rxe's `rxe_req.c`, `rxe_comp.c` and `rxe_resp.c` are):
//!
//! - [`req`], the requester: WQEs copied out of the shared send ring once and
//!   sent packet by packet, within the PSN window and a budget per run;
//!   [`retry`], its go-back-N after NAKs and the retry timer.
//! - [`comp`], the completer: ACKs, NAKs and READ responses retire WQEs in
//!   order; a WQE completes only once it is acknowledged.
//! - [`resp`], the responder: PSN and opcode-sequence checks, SEND into
//!   receive WQEs, WRITE into R_Key-checked regions, acknowledgements in PSN
//!   order; [`resp_res`], its resources: READs answered a budget at a time,
//!   atomics, FLUSH and ATOMIC WRITE executed once and answered from them.
//!
//! All three run under the QP's lock, from the receive work, the QP's send
//! work, its retry timer and the send doorbell.

use super::*;
use crate::proto::psn::Psn;
use crate::proto::wire::Transport;

mod cc;
mod comp;
mod details;
mod req;
mod resp;
mod resp_res;
mod retry;

pub(in crate::qp) use cc::{notify as notify_congestion, on_ce, on_cnp, on_ud_cnp, pace, pace_wait, sent as paced_sent, ud_sent_to};
pub(super) use comp::on_response;
pub(super) use details::{rate_kbps, Details};
pub(super) use req::{progress, ReqState};
pub(super) use retry::{arm_timer, on_ack_probe, on_timer};
pub(super) use resp::{on_request, send_owed_ack, RespState};
pub(super) use resp_res::respond;

/// Packets one run of the requester, or of the responder's READ responses,
/// sends before it yields and queues the QP's send work to go on.
const BUDGET: u32 = 64;

/// Connected-transport state of a QP.
pub(super) struct RcState {
    pub(super) req: ReqState,
    pub(super) resp: RespState,
    cc: cc::CcState,
}

impl RcState {
    pub(super) fn new(transport: Transport, sq_slots: usize, slot: usize) -> Result<Self> {
        Ok(Self { req: ReqState::new(sq_slots, slot)?, resp: RespState::new(transport)?, cc: cc::CcState::default() })
    }

    /// A reset QP starts unlimited, as a new one.
    pub(in crate::qp) fn reset_congestion(&mut self) {
        self.cc = cc::CcState::default();
    }
}

fn transport_of(q: &QpShared) -> Transport {
    if q.qp_type == QpType::Uc { Transport::Uc } else { Transport::Rc }
}

fn path_mtu(st: &QpState) -> u32 {
    IbMtu::from_enum(st.attrs.params.path_mtu).unwrap_or(IbMtu::Mtu1024).bytes()
}

fn psn_add(p: u32, n: u32) -> u32 {
    Psn::new(p).add(n).get()
}

fn psn_le(a: u32, b: u32) -> bool {
    Psn::new(a).diff(Psn::new(b)) <= 0
}

/// Queues the QP's send work, which carries on where a run stopped for its
/// budget (already queued: that run carries on).
fn reschedule(q: &Arc<QpShared>) {
    crate::qp::queue_send_work(q);
}
