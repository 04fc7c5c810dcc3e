// SPDX-License-Identifier: GPL-2.0
//! Completion queue entries. The driver builds a [`Cqe`]; for user CQs it is
//! written to the shared ring as `struct ib_uverbs_wc` (the rxe ABI's CQE,
//! which rdma-core copies verbatim into `struct ibv_wc`).

/// Bytes of `struct ib_uverbs_wc`.
pub const UVERBS_WC_BYTES: usize = 48;

/// Work completion status (`enum ib_wc_status`, the values user space sees).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u32)]
#[allow(missing_docs)]
// All of the ABI's values, for tests that read CQEs back; the driver reports some.
#[allow(dead_code)]
pub enum WcStatus {
    #[default]
    Success = 0,
    LocLenErr = 1,
    LocQpOpErr = 2,
    LocEecOpErr = 3,
    LocProtErr = 4,
    WrFlushErr = 5,
    MwBindErr = 6,
    BadRespErr = 7,
    LocAccessErr = 8,
    RemInvReqErr = 9,
    RemAccessErr = 10,
    RemOpErr = 11,
    RetryExcErr = 12,
    RnrRetryExcErr = 13,
    LocRddViolErr = 14,
    RemInvRdReqErr = 15,
    RemAbortErr = 16,
    InvEecnErr = 17,
    InvEecStateErr = 18,
    FatalErr = 19,
    RespTimeoutErr = 20,
    GeneralErr = 21,
}

impl WcStatus {
    /// The status a CQE image holds; `None` for a value no status has.
    #[cfg(test)]
    pub const fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Success,
            1 => Self::LocLenErr,
            2 => Self::LocQpOpErr,
            3 => Self::LocEecOpErr,
            4 => Self::LocProtErr,
            5 => Self::WrFlushErr,
            6 => Self::MwBindErr,
            7 => Self::BadRespErr,
            8 => Self::LocAccessErr,
            9 => Self::RemInvReqErr,
            10 => Self::RemAccessErr,
            11 => Self::RemOpErr,
            12 => Self::RetryExcErr,
            13 => Self::RnrRetryExcErr,
            14 => Self::LocRddViolErr,
            15 => Self::RemInvRdReqErr,
            16 => Self::RemAbortErr,
            17 => Self::InvEecnErr,
            18 => Self::InvEecStateErr,
            19 => Self::FatalErr,
            20 => Self::RespTimeoutErr,
            21 => Self::GeneralErr,
            _ => return None,
        })
    }

    /// Whether the work request succeeded.
    pub const fn is_ok(self) -> bool {
        matches!(self, Self::Success)
    }

    /// `Ok(())` for success, else the status as an error, for `?`.
    pub const fn result(self) -> Result<(), Self> {
        if self.is_ok() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

/// Work completion opcodes (`enum ib_wc_opcode`, equal to `ib_uverbs_wc_opcode`).
pub mod opcode {
    #![allow(missing_docs)]
    pub const SEND: u32 = 0;
    pub const RDMA_WRITE: u32 = 1;
    pub const RDMA_READ: u32 = 2;
    pub const COMP_SWAP: u32 = 3;
    pub const FETCH_ADD: u32 = 4;
    pub const BIND_MW: u32 = 5;
    pub const LOCAL_INV: u32 = 6;
    pub const FLUSH: u32 = 8;
    pub const ATOMIC_WRITE: u32 = 9;
    /// `IB_WC_REG_MR`: kernel consumers only.
    pub const REG_MR: u32 = 10;
    pub const RECV: u32 = 128;
    pub const RECV_RDMA_WITH_IMM: u32 = 129;
}

/// Work completion flags (`enum ib_wc_flags`).
pub mod wc_flags {
    #![allow(missing_docs)]
    pub const GRH: u32 = 1 << 0;
    pub const WITH_IMM: u32 = 1 << 1;
    pub const WITH_INVALIDATE: u32 = 1 << 2;
}

/// One completion, in host terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    /// The work request id the consumer posted.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// [`opcode`] value.
    pub opcode: u32,
    /// Provider-specific detail of an error.
    pub vendor_err: u32,
    /// Bytes transferred (receives and READs).
    pub byte_len: u32,
    /// Immediate data (wire order) or invalidated R_Key, per `wc_flags`.
    pub imm_or_inv: u32,
    /// The local QP.
    pub qp_num: u32,
    /// Source QP of a UD receive.
    pub src_qp: u32,
    /// [`wc_flags`] bits.
    pub wc_flags: u32,
    /// P_Key index of a GSI receive.
    pub pkey_index: u16,
    /// Service level of a receive.
    pub sl: u8,
    /// Port of the QP.
    pub port_num: u8,
    /// [`network_hdr`] type of a UD receive, for kernel consumers
    /// (0: not reported). Not part of the user CQE.
    pub network_hdr_type: u8,
}

impl Cqe {
    /// The `struct ib_uverbs_wc` image user space reads from the CQ ring.
    pub fn to_uverbs_wc(&self) -> [u8; UVERBS_WC_BYTES] {
        let mut b = [0u8; UVERBS_WC_BYTES];
        b[0..8].copy_from_slice(&self.wr_id.to_ne_bytes());
        b[8..12].copy_from_slice(&(self.status as u32).to_ne_bytes());
        b[12..16].copy_from_slice(&self.opcode.to_ne_bytes());
        b[16..20].copy_from_slice(&self.vendor_err.to_ne_bytes());
        b[20..24].copy_from_slice(&self.byte_len.to_ne_bytes());
        // imm_data is kept in network order (the verbs convention); invalidate_rkey in host order.
        b[24..28].copy_from_slice(&self.imm_or_inv.to_ne_bytes());
        b[28..32].copy_from_slice(&self.qp_num.to_ne_bytes());
        b[32..36].copy_from_slice(&self.src_qp.to_ne_bytes());
        b[36..40].copy_from_slice(&self.wc_flags.to_ne_bytes());
        b[40..42].copy_from_slice(&self.pkey_index.to_ne_bytes());
        // slid (42..44) and dlid_path_bits (45) are 0 on RoCE.
        b[44] = self.sl;
        b[46] = self.port_num;
        b
    }

    /// Parses an image written by [`Cqe::to_uverbs_wc`] (a status no
    /// completion has reads as [`WcStatus::GeneralErr`]).
    #[cfg(test)]
    pub fn from_uverbs_wc(b: &[u8; UVERBS_WC_BYTES]) -> Self {
        let u32_at = |at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        Self {
            wr_id: u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            status: match WcStatus::from_u32(u32_at(8)) {
                Some(s) => s,
                None => WcStatus::GeneralErr,
            },
            opcode: u32_at(12),
            vendor_err: u32_at(16),
            byte_len: u32_at(20),
            imm_or_inv: u32_at(24),
            qp_num: u32_at(28),
            src_qp: u32_at(32),
            wc_flags: u32_at(36),
            pkey_index: u16::from_ne_bytes([b[40], b[41]]),
            sl: b[44],
            port_num: b[46],
            network_hdr_type: 0,
        }
    }

    /// A flush completion for a work request left on a QP in the error state.
    pub fn flushed(wr_id: u64, opcode: u32, qp_num: u32, port_num: u8) -> Self {
        Self { wr_id, status: WcStatus::WrFlushErr, opcode, qp_num, port_num, ..Self::default() }
    }
}

/// Network header types of a UD receive (`enum rdma_network_type`).
pub mod network_hdr {
    #![allow(missing_docs)]
    pub const IPV4: u8 = 2;
    pub const IPV6: u8 = 3;
}

/// Work request opcodes of send WQEs (`enum ib_uverbs_wr_opcode`).
pub mod wr_opcode {
    #![allow(missing_docs)]
    pub const RDMA_WRITE: u32 = 0;
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const SEND: u32 = 2;
    pub const SEND_WITH_IMM: u32 = 3;
    pub const RDMA_READ: u32 = 4;
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
    pub const LOCAL_INV: u32 = 7;
    pub const BIND_MW: u32 = 8;
    pub const SEND_WITH_INV: u32 = 9;
    pub const FLUSH: u32 = 14;
    pub const ATOMIC_WRITE: u32 = 15;
    /// `IB_WR_REG_MR`: kernel consumers only.
    pub const REG_MR: u32 = 0x20;
}

/// The completion opcode reported for a send work request's opcode, or
/// `None` for opcodes that do not exist.
pub const fn wc_opcode_for_wr(wr: u32) -> Option<u32> {
    use wr_opcode::*;
    Some(match wr {
        RDMA_WRITE | RDMA_WRITE_WITH_IMM => opcode::RDMA_WRITE,
        SEND | SEND_WITH_IMM | SEND_WITH_INV => opcode::SEND,
        RDMA_READ => opcode::RDMA_READ,
        ATOMIC_CMP_AND_SWP => opcode::COMP_SWAP,
        ATOMIC_FETCH_AND_ADD => opcode::FETCH_ADD,
        LOCAL_INV => opcode::LOCAL_INV,
        BIND_MW => opcode::BIND_MW,
        REG_MR => opcode::REG_MR,
        FLUSH => opcode::FLUSH,
        ATOMIC_WRITE => opcode::ATOMIC_WRITE,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_matches_ib_uverbs_wc() {
        let c = Cqe { wr_id: 0x0102030405060708, qp_num: 0x11, port_num: 1, sl: 3, ..Default::default() };
        let b = c.to_uverbs_wc();
        assert_eq!(&b[0..8], &0x0102030405060708u64.to_ne_bytes());
        assert_eq!(b[28], 0x11);
        assert_eq!(b[44], 3);
        assert_eq!(b[46], 1);
        assert_eq!(b[47], 0);
    }

    #[test]
    fn wr_to_wc_opcodes() {
        assert_eq!(wc_opcode_for_wr(wr_opcode::SEND_WITH_INV), Some(opcode::SEND));
        assert_eq!(wc_opcode_for_wr(wr_opcode::RDMA_WRITE_WITH_IMM), Some(opcode::RDMA_WRITE));
        assert_eq!(wc_opcode_for_wr(wr_opcode::RDMA_READ), Some(opcode::RDMA_READ));
        assert_eq!(wc_opcode_for_wr(10), None); // TSO: not an RDMA opcode
        // A flushed registration reports its own opcode.
        assert_eq!(wc_opcode_for_wr(wr_opcode::REG_MR), Some(opcode::REG_MR));
        assert_eq!(wc_opcode_for_wr(wr_opcode::LOCAL_INV), Some(opcode::LOCAL_INV));
        assert_eq!(wc_opcode_for_wr(u32::MAX), None);
    }

    #[test]
    fn statuses_have_the_abi_values() {
        assert_eq!(WcStatus::Success as u32, 0);
        assert_eq!(WcStatus::WrFlushErr as u32, 5);
        assert_eq!(WcStatus::RetryExcErr as u32, 12);
        assert_eq!(WcStatus::GeneralErr as u32, 21);
        for v in 0..22 {
            assert_eq!(WcStatus::from_u32(v).map(|s| s as u32), Some(v));
        }
        assert_eq!(WcStatus::from_u32(22), None);
    }

    proptest! {
        #[test]
        fn roundtrip(wr_id in any::<u64>(), s in 0u32..22, op in any::<u32>(), len in any::<u32>(),
                     imm in any::<u32>(), qpn in 0u32..(1 << 24), src in 0u32..(1 << 24),
                     flags in 0u32..128, pkey in any::<u16>(), sl in 0u8..16, port in any::<u8>()) {
            let c = Cqe { wr_id, status: WcStatus::from_u32(s).unwrap(), opcode: op, vendor_err: 0, byte_len: len, imm_or_inv: imm,
                          qp_num: qpn, src_qp: src, wc_flags: flags, pkey_index: pkey, sl, port_num: port, network_hdr_type: 0 };
            prop_assert_eq!(Cqe::from_uverbs_wc(&c.to_uverbs_wc()), c);
        }
    }
}
