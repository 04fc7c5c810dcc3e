// SPDX-License-Identifier: GPL-2.0
//! Per-device port counters, shown by `rdma statistic show link DEV/1` and
//! in `/sys/class/infiniband/DEV/ports/1/hw_counters/`. Names follow
//! rdma_rxe's where the meaning is the same, so tooling reads both alike.

use crate::ib::StatDesc;
use core::sync::atomic::{AtomicU64, Ordering};

/// The counters, in the order of [`DESCS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    /// The port went from active to down (carrier loss or admin down).
    LinkDowned,
    /// Valid RoCEv2 packets received.
    RcvdPkts,
    /// Packets dropped for a bad invariant CRC.
    RcvdIcrcErr,
    /// Packets dropped for malformed or unknown transport headers.
    RcvdMalformed,
    /// Packets dropped for lack of memory, a QP not ready or a transport not built.
    RcvdDropped,
    /// Packets for a QP number that does not exist.
    RcvdNoQp,
    /// UD packets whose Q_Key did not match the QP's.
    RcvdQkeyErr,
    /// UD packets lost for lack of a posted receive.
    RcvdNoWqe,
    /// Packets handed to the IP layer.
    SentPkts,
    /// Packets the IP layer dropped or could not route.
    SendErr,
    /// PSN sequence NAKs received (the requester went back).
    RcvdSeqNak,
    /// RNR NAKs received.
    RcvdRnrNak,
    /// RNR NAKs sent (no receive posted).
    SendRnrNak,
    /// Requests with a PSN already executed.
    DuplicateRequest,
    /// Requests ahead of the expected PSN.
    OutOfSeqRequest,
    /// Go-back-N retransmissions after a local ACK timeout.
    Retransmits,
    /// WQEs failed after `retry_cnt` timeouts.
    RetryExceeded,
    /// WQEs failed after `rnr_retry` RNR NAKs.
    RetryRnrExceeded,
    /// Valid packets dropped because the receive work fell behind.
    RcvdQueueFull,
    /// Packets to an address not of this device, or from an address that is
    /// not the peer of the connected QP they name.
    RcvdWrongAddr,
    /// CE-marked packets received (notification point).
    NpEcnMarked,
    /// CNPs sent in answer to them.
    NpCnpSent,
    /// CNPs received that cut a QP's rate (reaction point).
    RpCnpHandled,
    /// CNPs received within a cut's monitor period, or with congestion
    /// control off: no rate change.
    RpCnpIgnored,
    /// Times a QP held to a rate waited before its next packet.
    RpPacingWaits,
    /// Packets a local qdisc queued while signalling congestion (`NET_XMIT_CN`).
    TxLocalCongestion,
    /// Packets a local qdisc dropped (`NET_XMIT_DROP`): lost, sent again by the transport.
    TxLocalDrop,
    /// Retry timeouts not counted because the QP's packets were still queued
    /// in the host (a paused priority): nothing was lost.
    TxHeldTimeouts,
    /// Requester packets sent again right after a local drop.
    TxLocalDropRetries,
    /// Milliseconds QPs waited with retry timeouts held off by their packets
    /// still queued in the host (a paused priority), from the first held
    /// timeout to the next progress.
    TxHeldMs,
    /// Fast registrations (REG_MR) executed.
    FastReg,
    /// Keys invalidated by LOCAL_INV.
    LocalInv,
    /// Keys invalidated by a peer's SEND with Invalidate.
    RemoteInv,
    /// FLUSH requests executed for a peer.
    Flush,
    /// ATOMIC WRITE requests executed for a peer.
    AtomicWrite,
    /// FLUSH requests taken with rdma_rxe's ICRC for FLUSH, which differs
    /// from the specified one.
    RcvdRdmaRxeFlushIcrc,
    /// Memory windows bound (BIND_MW executed).
    MwBind,
    /// Multicast datagrams delivered to the QPs attached to their group.
    RcvdMcast,
    /// Newest packets sent again, asking for an ACK, by a requester whose
    /// burst ended with packets that asked for none (`proto::ack_request`).
    AckProbes,
    /// Multicast attaches refused for the device's or the user's bound of
    /// groups, or for the user's join rate (`qp/mcast.rs`).
    McastJoinRefused,
    /// Requests the responder refused for their R_Key, address range or
    /// rights (NAK remote access error; the QP goes to the error state).
    RespRemoteAccessErr,
    /// Requests the responder refused as invalid (NAK invalid request; the
    /// QP goes to the error state).
    RespInvalidRequest,
    /// Requests the responder could not carry out (NAK remote operational
    /// error; the QP goes to the error state).
    RespRemoteOperationalErr,
    /// Packets sent, by priority.
    TxPrio0,
    TxPrio1,
    TxPrio2,
    TxPrio3,
    TxPrio4,
    TxPrio5,
    TxPrio6,
    TxPrio7,
}

const COUNT: usize = Counter::TxPrio7 as usize + 1;

impl Counter {
    /// The per-priority packet counter of priority `prio` (0-7).
    pub(crate) fn tx_prio(prio: u8) -> Self {
        const BY_PRIO: [Counter; 8] = [
            Counter::TxPrio0,
            Counter::TxPrio1,
            Counter::TxPrio2,
            Counter::TxPrio3,
            Counter::TxPrio4,
            Counter::TxPrio5,
            Counter::TxPrio6,
            Counter::TxPrio7,
        ];
        BY_PRIO[usize::from(prio & 7)]
    }

    /// The counter's name.
    pub(crate) fn name(self) -> &'static core::ffi::CStr {
        NAMES[self as usize]
    }
}

/// The counters a QP also counts for itself (`rdma statistic qp`), in the
/// order of its block: those about one QP's traffic.
pub(crate) const PER_QP: [Counter; PER_QP_COUNT] = [
    Counter::Retransmits,
    Counter::RetryExceeded,
    Counter::RcvdRnrNak,
    Counter::SendRnrNak,
    Counter::RetryRnrExceeded,
    Counter::RcvdSeqNak,
    Counter::OutOfSeqRequest,
    Counter::DuplicateRequest,
    Counter::NpEcnMarked,
    Counter::NpCnpSent,
    Counter::RpCnpHandled,
    Counter::RpCnpIgnored,
    Counter::TxLocalDrop,
    Counter::RcvdNoWqe,
    Counter::RcvdQkeyErr,
    Counter::RespRemoteAccessErr,
    Counter::RespInvalidRequest,
    Counter::RespRemoteOperationalErr,
];

pub(crate) const PER_QP_COUNT: usize = 18;

/// Each counter's place in a QP's block, if QPs count it.
const QP_SLOT: [Option<u8>; COUNT] = {
    let mut slots = [None; COUNT];
    let mut i = 0;
    while i < PER_QP_COUNT {
        slots[PER_QP[i] as usize] = Some(i as u8);
        i += 1;
    }
    slots
};

impl Counter {
    /// The counter's place in a QP's block, if QPs count it.
    pub(crate) fn qp_slot(self) -> Option<usize> {
        QP_SLOT[self as usize].map(usize::from)
    }

    /// Whether QPs count port counter `index` (of [`DESCS`]) for themselves.
    pub(crate) fn index_is_per_qp(index: usize) -> bool {
        QP_SLOT.get(index).is_some_and(Option::is_some)
    }
}

/// Counter names, indexed by [`Counter`]: `rdma statistic`'s, and the
/// reasons the trace events give for what they counted.
const NAMES: [&core::ffi::CStr; COUNT] = [
    c"link_downed",
    c"rcvd_pkts",
    c"rcvd_icrc_err",
    c"rcvd_malformed",
    c"rcvd_dropped",
    c"rcvd_no_qp",
    c"rcvd_qkey_err",
    c"rcvd_no_wqe",
    c"sent_pkts",
    c"send_err",
    c"rcvd_seq_err",
    c"rcvd_rnr_err",
    c"send_rnr_err",
    c"duplicate_request",
    c"out_of_seq_request",
    c"completer_retry_err",
    c"retry_exceeded_err",
    c"retry_rnr_exceeded_err",
    c"rcvd_queue_full",
    c"rcvd_wrong_addr",
    c"np_ecn_marked_roce_packets",
    c"np_cnp_sent",
    c"rp_cnp_handled",
    c"rp_cnp_ignored",
    c"rp_pacing_waits",
    c"tx_local_congestion",
    c"tx_local_drop",
    c"tx_held_timeouts",
    c"tx_local_drop_retries",
    c"tx_held_ms",
    c"fast_reg",
    c"local_inv",
    c"remote_inv",
    c"flush",
    c"atomic_write",
    c"rcvd_rdma_rxe_flush_icrc",
    c"mw_bind",
    c"rcvd_mcast_pkts",
    c"ack_probes",
    c"mcast_join_refused",
    c"resp_remote_access_errors",
    c"resp_invalid_request",
    c"resp_remote_operational_errors",
    c"tx_prio0_pkts",
    c"tx_prio1_pkts",
    c"tx_prio2_pkts",
    c"tx_prio3_pkts",
    c"tx_prio4_pkts",
    c"tx_prio5_pkts",
    c"tx_prio6_pkts",
    c"tx_prio7_pkts",
];

/// Counter descriptors handed to the RDMA core, indexed by [`Counter`].
pub(crate) const DESCS: &[StatDesc] = &{
    let mut descs = [const { StatDesc::new(c"") }; COUNT];
    let mut i = 0;
    while i < COUNT {
        descs[i] = StatDesc::new(NAMES[i]);
        i += 1;
    }
    descs
};

const _: () = assert!(DESCS.len() == COUNT);

/// Lock-free counter block of one device.
pub(crate) struct Counters([AtomicU64; COUNT]);

impl Counters {
    pub(crate) const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; COUNT])
    }

    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    pub(crate) fn add(&self, c: Counter, n: u64) {
        if let Some(v) = self.0.get(c as usize) {
            v.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Copies the values into `out` (as many as fit).
    pub(crate) fn read(&self, out: &mut [u64]) {
        for (o, v) in out.iter_mut().zip(self.0.iter()) {
            *o = v.load(Ordering::Relaxed);
        }
    }
}
