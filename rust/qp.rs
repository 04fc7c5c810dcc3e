// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: the send and receive rings in the rxe ABI layout, the QP
//! state machine with attribute validation, and flushing of outstanding
//! work requests when a QP enters the error state.
//!
//! User space owns the producer side of both rings and writes WQEs there
//! without system calls; the kernel owns the consumer side and keeps its
//! own copy of every index it advances.

use crate::cq::CqData;
use crate::device::{Pd, Rroce};
use crate::ib::{self, CqHandle, MmInfo, QpCaps, QpInit, RoceAv, Ring, Udata, UserContext};
use crate::proto::cqe::{self, Cqe};
use crate::proto::limits;
use crate::proto::mtu::IbMtu;
use crate::proto::queue::Geometry;
use crate::sys;
use crate::table::Table;
use kernel::prelude::*;
use kernel::sync::{new_mutex, Arc, Mutex};

/// A rroce QP.
pub(crate) type Qp = ib::Qp<Rroce>;

const PORT: u32 = 1;
/// Smallest ring slot: one cache line.
const MIN_SLOT: u32 = 64;
/// `struct rxe_recv_wqe` before its SGEs.
const RECV_WQE_HDR_BYTES: u32 = 40;

mod state {
    use crate::sys;
    pub(super) const RESET: u32 = sys::ib_qp_state_IB_QPS_RESET;
    pub(super) const RTS: u32 = sys::ib_qp_state_IB_QPS_RTS;
    pub(super) const SQD: u32 = sys::ib_qp_state_IB_QPS_SQD;
    pub(super) const SQE: u32 = sys::ib_qp_state_IB_QPS_SQE;
    pub(super) const ERR: u32 = sys::ib_qp_state_IB_QPS_ERR;
}

mod mask {
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
}

/// Transport service of a QP.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum QpType {
    Rc,
    Uc,
    Ud,
}

impl QpType {
    fn from_ib(t: u32) -> Option<Self> {
        match t {
            sys::ib_qp_type_IB_QPT_RC => Some(Self::Rc),
            sys::ib_qp_type_IB_QPT_UC => Some(Self::Uc),
            sys::ib_qp_type_IB_QPT_UD => Some(Self::Ud),
            _ => None,
        }
    }

    fn to_ib(self) -> u32 {
        match self {
            Self::Rc => sys::ib_qp_type_IB_QPT_RC,
            Self::Uc => sys::ib_qp_type_IB_QPT_UC,
            Self::Ud => sys::ib_qp_type_IB_QPT_UD,
        }
    }
}

/// A send or receive ring and the limits its slots impose.
struct WorkQueue {
    ring: Ring,
    max_sge: u32,
    max_inline: u32,
    /// Kernel-private consumer index.
    consumer: u32,
}

impl WorkQueue {
    fn new(wr: u32, slot_bytes: u32, max_sge: u32, max_inline: u32, uctx: Option<&UserContext>) -> Result<Self> {
        let geo = Geometry::new(wr.max(1), slot_bytes, MIN_SLOT, limits::MAX_QP_WR).map_err(|_| EINVAL)?;
        Ok(Self { ring: Ring::new(geo, uctx)?, max_sge, max_inline, consumer: 0 })
    }

    fn capacity(&self) -> u32 {
        self.ring.geometry().capacity()
    }

    /// Empties the ring: both indices back to 0, as after creation.
    fn reset(&mut self) {
        self.consumer = 0;
        self.ring.store_consumer(0);
        self.ring.store_producer(0);
    }

    /// Takes every posted WQE off the ring, calling `each` with a copy of its
    /// first bytes (WQE headers never exceed 16 bytes here).
    fn drain(&mut self, mut each: impl FnMut(&[u8; 16])) {
        let geo = self.ring.geometry();
        let producer = self.ring.load_producer();
        let mut head = [0u8; 16];
        // At most one ring's worth, whatever the producer index claims.
        for _ in 0..geo.count(producer, self.consumer) {
            self.ring.read_slot(self.consumer, &mut head);
            each(&head);
            self.consumer = geo.next(self.consumer);
        }
        self.ring.store_consumer(self.consumer);
    }
}

/// Attributes set through `modify_qp`.
#[derive(Clone, Copy, Default)]
struct Attrs {
    state: u32,
    path_mtu: u32,
    qkey: u32,
    rq_psn: u32,
    sq_psn: u32,
    dest_qp_num: u32,
    access: u32,
    pkey_index: u16,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
    min_rnr_timer: u8,
    timeout: u8,
    retry_cnt: u8,
    rnr_retry: u8,
    en_sqd_async_notify: u8,
    av: Option<RoceAv>,
}

struct QpState {
    attrs: Attrs,
    sq: WorkQueue,
    rq: Option<WorkQueue>,
}

/// The part of a QP the device table and (later) the transport engines share.
#[pin_data]
pub(crate) struct QpShared {
    qpn: u32,
    #[pin]
    state: Mutex<QpState>,
}

/// Per-QP data in the core's QP object.
pub(crate) struct QpData {
    shared: Arc<QpShared>,
    qp_type: QpType,
    #[allow(dead_code)] // Matched against MRs and AHs by the transport engines.
    pdn: u32,
    sq_sig_all: bool,
    send_cq: CqHandle<Rroce>,
    recv_cq: CqHandle<Rroce>,
}

/// QPs of a device by number.
pub(crate) type QpTable = Table<QpShared>;

pub(crate) fn new_table() -> impl PinInit<QpTable> {
    Table::new(limits::MIN_QP_INDEX, limits::TABLE_MAX - 1, limits::MAX_QP)
}

/// `struct rxe_create_qp_resp`: where user space finds the two rings.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CreateQpResp {
    rq_mi: MmInfo,
    sq_mi: MmInfo,
}

pub(crate) fn create(
    table: &QpTable,
    pd: &Pd,
    init: QpInit<Rroce>,
    uctx: Option<&UserContext>,
    udata: &mut Udata<'_>,
) -> Result<(impl PinInit<QpData, Error>, u32, QpCaps)> {
    let qp_type = QpType::from_ib(init.qp_type).ok_or(EOPNOTSUPP)?;
    if init.create_flags != 0 {
        return Err(EOPNOTSUPP);
    }
    udata.require_no_driver_input()?;
    if uctx.is_some() && udata.outlen() < core::mem::size_of::<CreateQpResp>() {
        return Err(EINVAL);
    }
    let mut cap = init.cap;
    let cap = &mut cap;
    if cap.max_send_wr > limits::MAX_QP_WR
        || cap.max_send_sge > limits::MAX_SGE
        || cap.max_inline_data > limits::MAX_INLINE_DATA
        || (!init.has_srq && (cap.max_recv_wr > limits::MAX_QP_WR || cap.max_recv_sge > limits::MAX_SGE))
    {
        return Err(EINVAL);
    }
    // A send slot holds the WQE header and either the SGEs or the inline data.
    let sq_room = (cap.max_send_sge * limits::SGE_BYTES).max(cap.max_inline_data);
    let sq = WorkQueue::new(
        cap.max_send_wr,
        limits::SEND_WQE_HDR_BYTES + sq_room,
        sq_room / limits::SGE_BYTES,
        sq_room,
        uctx,
    )?;
    let rq = if init.has_srq {
        None
    } else {
        Some(WorkQueue::new(
            cap.max_recv_wr,
            RECV_WQE_HDR_BYTES + cap.max_recv_sge * limits::SGE_BYTES,
            cap.max_recv_sge,
            0,
            uctx,
        )?)
    };
    if uctx.is_some() {
        let resp = CreateQpResp {
            rq_mi: rq.as_ref().map(|q| q.ring.mminfo()).unwrap_or_default(),
            sq_mi: sq.ring.mminfo(),
        };
        udata.respond(&resp)?;
    }
    cap.max_send_wr = sq.capacity();
    cap.max_send_sge = sq.max_sge;
    cap.max_inline_data = sq.max_inline;
    if let Some(rq) = &rq {
        cap.max_recv_wr = rq.capacity();
        cap.max_recv_sge = rq.max_sge;
    }
    let attrs = Attrs { state: state::RESET, path_mtu: IbMtu::Mtu1024 as u32, ..Attrs::default() };
    let st = QpState { attrs, sq, rq };
    let shared = table.insert(|qpn| {
        try_pin_init!(QpShared {
            qpn,
            state <- new_mutex!(st, "rroce_qp"),
        })
    })?;
    let qpn = shared.qpn;
    let cap = *cap;
    let data = QpData {
        shared,
        qp_type,
        pdn: pd.pdn,
        sq_sig_all: init.sq_sig_all,
        send_cq: init.send_cq,
        recv_cq: init.recv_cq,
    };
    Ok((Ok::<_, Error>(data), qpn, cap))
}

fn check_av(av: Result<RoceAv, ib::AvError>) -> Result<RoceAv> {
    let av = av.map_err(|_| EINVAL)?;
    // The port only has RoCEv2 GIDs; anything else is a stale or foreign entry.
    if av.sgid_type != sys::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP {
        return Err(EINVAL);
    }
    Ok(av)
}

pub(crate) fn modify(qp: &Qp, attr: &sys::ib_qp_attr, m: u32) -> Result {
    let data = qp.data();
    let mut st = data.shared.state.lock();
    let cur = st.attrs.state;
    if m & mask::CUR_STATE != 0 && attr.cur_qp_state != cur {
        return Err(EINVAL);
    }
    let next = if m & mask::STATE != 0 { attr.qp_state } else { cur };
    if !ib::modify_is_ok(cur, next, data.qp_type.to_ib(), m) {
        return Err(EINVAL);
    }
    // Validate everything before changing anything: a refused modify leaves the QP as it was.
    if m & mask::PORT != 0 && attr.port_num != PORT {
        return Err(EINVAL);
    }
    if m & mask::PKEY_INDEX != 0 && u32::from(attr.pkey_index) >= u32::from(limits::PKEY_TABLE_LEN) {
        return Err(EINVAL);
    }
    if m & mask::PATH_MTU != 0 && IbMtu::from_enum(attr.path_mtu).is_none() {
        return Err(EINVAL);
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 && u32::from(attr.max_rd_atomic) > limits::MAX_QP_INIT_RD_ATOM {
        return Err(EINVAL);
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 && u32::from(attr.max_dest_rd_atomic) > limits::MAX_QP_RD_ATOM {
        return Err(EINVAL);
    }
    if m & mask::RETRY_CNT != 0 && attr.retry_cnt > 7
        || m & mask::RNR_RETRY != 0 && attr.rnr_retry > 7
        || m & mask::TIMEOUT != 0 && attr.timeout > 31
        || m & mask::MIN_RNR_TIMER != 0 && attr.min_rnr_timer > 31
    {
        return Err(EINVAL);
    }
    if m & (mask::ALT_PATH | mask::PATH_MIG_STATE) != 0 {
        // Automatic path migration needs a second port.
        return Err(EOPNOTSUPP);
    }
    let av = if m & mask::AV != 0 { Some(check_av(ib::read_av(&attr.ah_attr))?) } else { None };

    let a = &mut st.attrs;
    if let Some(av) = av {
        a.av = Some(av);
    }
    if m & mask::PKEY_INDEX != 0 {
        a.pkey_index = attr.pkey_index;
    }
    if m & mask::QKEY != 0 {
        a.qkey = attr.qkey;
    }
    if m & mask::ACCESS_FLAGS != 0 {
        a.access = attr.qp_access_flags as u32;
    }
    if m & mask::PATH_MTU != 0 {
        a.path_mtu = attr.path_mtu;
    }
    if m & mask::TIMEOUT != 0 {
        a.timeout = attr.timeout;
    }
    if m & mask::RETRY_CNT != 0 {
        a.retry_cnt = attr.retry_cnt;
    }
    if m & mask::RNR_RETRY != 0 {
        a.rnr_retry = attr.rnr_retry;
    }
    if m & mask::RQ_PSN != 0 {
        a.rq_psn = attr.rq_psn & 0x00ff_ffff;
    }
    if m & mask::SQ_PSN != 0 {
        a.sq_psn = attr.sq_psn & 0x00ff_ffff;
    }
    if m & mask::MAX_QP_RD_ATOMIC != 0 {
        a.max_rd_atomic = attr.max_rd_atomic;
    }
    if m & mask::MAX_DEST_RD_ATOMIC != 0 {
        a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
    }
    if m & mask::MIN_RNR_TIMER != 0 {
        a.min_rnr_timer = attr.min_rnr_timer;
    }
    if m & mask::DEST_QPN != 0 {
        a.dest_qp_num = attr.dest_qp_num & 0x00ff_ffff;
    }
    if m & mask::EN_SQD_ASYNC_NOTIFY != 0 {
        a.en_sqd_async_notify = attr.en_sqd_async_notify;
    }
    a.state = next;
    match next {
        state::RESET => {
            st.sq.reset();
            if let Some(rq) = &mut st.rq {
                rq.reset();
            }
        }
        state::ERR => flush(qp, &mut st),
        _ => {}
    }
    Ok(())
}

/// Completes every posted work request with `IB_WC_WR_FLUSH_ERR` (IBTA 10.3.1:
/// a QP in the error state flushes both queues).
fn flush(qp: &Qp, st: &mut QpState) {
    let data = qp.data();
    let qpn = qp.qp_num();
    let port = PORT as u8;
    let ibqp = qp.as_raw();
    st.sq.drain(|head| {
        let wr_id = u64::from_ne_bytes([head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7]]);
        let wr_op = u32::from_ne_bytes([head[12], head[13], head[14], head[15]]);
        let op = cqe::wc_opcode_for_wr(wr_op).unwrap_or(cqe::opcode::SEND);
        let _ = CqData::post(data.send_cq.get(), &Cqe::flushed(wr_id, op, qpn, port), ibqp, false);
    });
    if let Some(rq) = &mut st.rq {
        rq.drain(|head| {
            let wr_id = u64::from_ne_bytes([head[0], head[1], head[2], head[3], head[4], head[5], head[6], head[7]]);
            let c = Cqe::flushed(wr_id, cqe::opcode::RECV, qpn, port);
            let _ = CqData::post(data.recv_cq.get(), &c, ibqp, false);
        });
    }
}

pub(crate) fn query(qp: &Qp, attr: &mut sys::ib_qp_attr, init: &mut sys::ib_qp_init_attr) -> Result {
    let data = qp.data();
    let st = data.shared.state.lock();
    let a = &st.attrs;
    attr.qp_state = a.state;
    attr.cur_qp_state = a.state;
    attr.path_mtu = a.path_mtu;
    attr.path_mig_state = sys::ib_mig_state_IB_MIG_MIGRATED;
    attr.qkey = a.qkey;
    attr.rq_psn = a.rq_psn;
    attr.sq_psn = a.sq_psn;
    attr.dest_qp_num = a.dest_qp_num;
    attr.qp_access_flags = a.access as i32;
    attr.pkey_index = a.pkey_index;
    attr.en_sqd_async_notify = a.en_sqd_async_notify;
    // No transport engine holds WQEs back, so a QP in SQD is always drained.
    attr.sq_draining = 0;
    attr.max_rd_atomic = a.max_rd_atomic;
    attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
    attr.min_rnr_timer = a.min_rnr_timer;
    attr.port_num = PORT;
    attr.timeout = a.timeout;
    attr.retry_cnt = a.retry_cnt;
    attr.rnr_retry = a.rnr_retry;
    if let Some(av) = &a.av {
        ib::write_av(&mut attr.ah_attr, av, PORT);
    }
    let cap = QpCaps {
        max_send_wr: st.sq.capacity(),
        max_send_sge: st.sq.max_sge,
        max_inline_data: st.sq.max_inline,
        max_recv_wr: st.rq.as_ref().map_or(0, |q| q.capacity()),
        max_recv_sge: st.rq.as_ref().map_or(0, |q| q.max_sge),
    };
    cap.write(&mut attr.cap);
    cap.write(&mut init.cap);
    init.qp_type = data.qp_type.to_ib();
    init.sq_sig_type = if data.sq_sig_all { sys::ib_sig_type_IB_SIGNAL_ALL_WR } else { sys::ib_sig_type_IB_SIGNAL_REQ_WR };
    init.port_num = PORT;
    Ok(())
}

pub(crate) fn destroy(table: &QpTable, qp: &Qp) {
    let shared = &qp.data().shared;
    drop(table.remove(shared.qpn, shared));
}

/// The doorbell of the rxe provider's `post_send`.
pub(crate) fn send_doorbell(qp: &Qp) -> Result {
    let data = qp.data();
    let mut st = data.shared.state.lock();
    match st.attrs.state {
        state::ERR => {
            flush(qp, &mut st);
            Ok(())
        }
        state::RTS | state::SQD | state::SQE => {
            // The RoCEv2 transport engines are not part of this build yet: the WQEs stay
            // posted and the caller learns that nothing was sent.
            Err(EOPNOTSUPP)
        }
        _ => Err(EINVAL),
    }
}

