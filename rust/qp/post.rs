// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' posting: work requests become WQEs in the rxe layout
//! on the QP's kernel rings, so the engines treat kernel and user QPs alike.

use super::*;
use crate::proto::atomic::{self, AtomicOp};
use crate::proto::wqe::{AtomicWr, FastRegWr};

/// Queues a kernel consumer's send work request as a WQE on the send ring.
pub(crate) fn post_send(qp: &Qp, mut wr: SendWr<'_, Rroce>) -> Result {
    let reg = wr.reg.take();
    let local_inv = wr.local_inv.take();
    queue_send(qp, &wr, reg, local_inv)
}

fn queue_send(
    qp: &Qp,
    wr: &SendWr<'_, Rroce>,
    reg: Option<ib::RegWr<'_, Rroce>>,
    local_inv: Option<ib::LocalInvPosted>,
) -> Result {
    use crate::proto::abi::send::FLAG_INLINE;
    let q = &*qp.data().shared;
    if !q.posting_state().accepts_sends() {
        return Err(EINVAL);
    }
    let mut guard = q.ksq.lock();
    // User QPs post through their ring and ring the doorbell without requests.
    let p = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
    let total: u64 = wr.sges.iter().map(|s| u64::from(s.sge().length)).sum();
    let supported = match wr.opcode {
        cqe::wr_opcode::SEND | cqe::wr_opcode::SEND_WITH_IMM => true,
        cqe::wr_opcode::RDMA_WRITE | cqe::wr_opcode::RDMA_WRITE_WITH_IMM | cqe::wr_opcode::RDMA_READ => {
            !q.qp_type.is_datagram() && (wr.opcode != cqe::wr_opcode::RDMA_READ || q.qp_type == QpType::Rc)
        }
        // Fast registration and invalidation: local operations of connected QPs.
        cqe::wr_opcode::LOCAL_INV => !q.qp_type.is_datagram(),
        cqe::wr_opcode::REG_MR => !q.qp_type.is_datagram() && reg.is_some(),
        cqe::wr_opcode::SEND_WITH_INV => q.qp_type == QpType::Rc,
        // An atomic's target is 8-byte aligned and its local buffer holds the 8 bytes found.
        cqe::wr_opcode::ATOMIC_CMP_AND_SWP | cqe::wr_opcode::ATOMIC_FETCH_AND_ADD => {
            q.qp_type == QpType::Rc
                && atomic::aligned(wr.remote_addr)
                && total >= atomic::ATOMIC_BYTES
        }
        _ => false,
    };
    if !supported || (q.qp_type.is_datagram() != wr.ud.is_some()) {
        return Err(EINVAL);
    }
    let atomic_op = match wr.opcode {
        cqe::wr_opcode::ATOMIC_CMP_AND_SWP => Some(AtomicOp::CompareSwap { compare: wr.compare_add, swap: wr.swap }),
        cqe::wr_opcode::ATOMIC_FETCH_AND_ADD => Some(AtomicOp::FetchAdd { add: wr.compare_add }),
        _ => None,
    };
    let inline = wr.send_flags & FLAG_INLINE != 0 && wr.opcode != cqe::wr_opcode::RDMA_READ && atomic_op.is_none();
    if inline && total > u64::from(p.max_inline) || !inline && wr.sges.len() > p.max_sge as usize {
        return Err(EINVAL);
    }
    let to = match (&wr.ud, &reg) {
        (Some(ud), _) => SendTarget::Ud { remote_qpn: ud.remote_qpn, qkey: ud.remote_qkey, ah_num: ud.ah.ah_num() },
        (None, Some(reg)) => {
            // The WQE names the MR by its key's index: the key must be one of this MR's.
            if !reg.mr.has_index_of(reg.key) {
                return Err(EINVAL);
            }
            // The MR's number for the REG_MR is set below, once nothing but the push may fail.
            SendTarget::Reg(FastRegWr { post: 0, key: reg.key, access: reg.access as u32, iova: reg.iova, len: reg.len })
        }
        (None, None) => match atomic_op {
            Some(op) => SendTarget::Atomic(AtomicWr { remote_addr: wr.remote_addr, rkey: wr.rkey, op }),
            None => SendTarget::Rdma { remote_addr: wr.remote_addr, rkey: wr.rkey },
        },
    };
    let mut w = SendWqeMut::new(&mut p.wqe, wr.wr_id, wr.opcode, wr.send_flags, wr.imm_or_inv, to);
    if inline {
        // The consumer may reuse its buffers once this returns: copy them now.
        let area = w.inline_area(total as usize).ok_or(EINVAL)?;
        let mut at = 0usize;
        for (index, sge) in wr.sges.iter().enumerate() {
            let len = sge.sge().length as usize;
            let dst = area.get_mut(at..at + len).ok_or(EINVAL)?;
            wr.read_inline(index, dst)?;
            at += len;
        }
    } else if !w.set_sges(wr.sges.iter().map(ib::KernelSge::sge)) {
        return Err(EINVAL);
    }
    // The MR numbers the REG_MR before the requester can see the WQE, which
    // carries the number, and withdraws it if the WQE is not queued.
    let reg_mr = reg.map(|r| {
        let number = mr::post_fast_reg(r.mr, r.posted);
        w.set_fast_reg_post(number);
        (r.mr, number)
    });
    // A LOCAL_INV's request goes with its WQE: its invalidation takes it.
    let res = p.push_send(local_inv);
    if let (Err(_), Some((m, number))) = (&res, reg_mr) {
        mr::unpost_fast_reg(m, number);
    }
    res
}

/// Gives the QP's runner send work: the requester on kernel consumers' new
/// WQEs, or in the error state the flush of what they posted. Kernel
/// consumers post in any context, so the runner does it.
pub(crate) fn kick_send(qp: &Qp) {
    queue_send_work(&qp.data().shared);
}

/// Queues a kernel consumer's receive work request on the receive ring.
pub(crate) fn post_recv(qp: &Qp, wr: &RecvWr<'_>) -> Result {
    let q = &*qp.data().shared;
    if !q.posting_state().accepts_receives() {
        return Err(EINVAL);
    }
    let mut guard = q.krq.lock();
    // User QPs and QPs on an SRQ have no kernel receive ring.
    let p = Option::as_mut(&mut *guard).ok_or(EINVAL)?;
    if wr.sges.len() > p.max_sge as usize {
        return Err(EINVAL);
    }
    if !write_recv_wqe(&mut p.wqe, wr.wr_id, wr.sges.iter().map(ib::KernelSge::sge)) {
        return Err(EINVAL);
    }
    p.push()?;
    drop(guard);
    // In the error state it completes at once, flushed (IBTA 10.8.3.3). The
    // fence pairs with `flush`'s: either it sees this WQE or this sees the flag.
    core::sync::atomic::fence(Ordering::SeqCst);
    if q.posting_state() == State::Err {
        kick_send(qp);
    }
    Ok(())
}

