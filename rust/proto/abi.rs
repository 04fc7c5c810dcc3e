// SPDX-License-Identifier: GPL-2.0
//! Byte offsets of the work queue entries of the rxe user ABI
//! (`include/uapi/rdma/rdma_user_rxe.h`, x86-64 layout), which the kernel
//! reads from its private copy of each WQE.

/// `struct rxe_send_wqe`.
pub mod send {
    /// `wr.wr_id` (u64).
    pub const WR_ID: usize = 0;
    /// `wr.opcode` (u32, `IB_UVERBS_WR_*`).
    pub const OPCODE: usize = 12;
    /// `wr.send_flags` (u32).
    pub const FLAGS: usize = 16;
    /// `wr.ex.imm_data` (network order) or `invalidate_rkey`.
    pub const IMM: usize = 20;
    /// `wr.wr.rdma.remote_addr` (u64).
    pub const RDMA_ADDR: usize = 24;
    /// `wr.wr.rdma.rkey`.
    pub const RDMA_RKEY: usize = 32;
    /// `wr.wr.atomic.remote_addr` (u64).
    pub const ATOMIC_ADDR: usize = 24;
    /// `wr.wr.atomic.compare_add` (u64): the compare value or the addend.
    pub const ATOMIC_COMPARE_ADD: usize = 32;
    /// `wr.wr.atomic.swap` (u64).
    pub const ATOMIC_SWAP: usize = 40;
    /// `wr.wr.atomic.rkey`.
    pub const ATOMIC_RKEY: usize = 48;
    /// FLUSH (`wr.wr.flush`): the remote address is at `RDMA_ADDR`; the
    /// provider leaves `flush.length` zero and puts the length in
    /// `dma.length` ([`DMA_LENGTH`]).
    pub const FLUSH_RKEY: usize = 36;
    /// Placement type (u8).
    pub const FLUSH_TYPE: usize = 40;
    /// Selectivity level (u8).
    pub const FLUSH_LEVEL: usize = 41;
    /// ATOMIC WRITE: the 8-byte value in `dma.atomic_wr`, which shares the
    /// place of the SGEs; address and key are the RDMA ones.
    pub const ATOMIC_WRITE_VALUE: usize = 208;
    /// REG_MR, in kernel rings only (user space cannot post it): the number
    /// the MR gave the posted REG_MR, the new key, the rights, and the
    /// region's iova and length. The number takes the place of rxe's
    /// `reg.mr` pointer: the key's index names the MR.
    pub const REG_POST: usize = 24;
    pub const REG_KEY: usize = 32;
    pub const REG_ACCESS: usize = 36;
    pub const REG_IOVA: usize = 40;
    pub const REG_LEN: usize = 48;
    /// BIND_MW (`wr.wr.mw`): the window's start (u64) and length (u64) in
    /// the region, the region's L_Key, the window's R_Key, the new R_Key
    /// and the rights.
    pub const MW_ADDR: usize = 24;
    pub const MW_LEN: usize = 32;
    pub const MW_MR_LKEY: usize = 40;
    pub const MW_RKEY: usize = 44;
    pub const MW_NEW_RKEY: usize = 48;
    pub const MW_ACCESS: usize = 52;
    /// `wr.wr.ud.remote_qpn`.
    pub const UD_QPN: usize = 24;
    /// `wr.wr.ud.remote_qkey`.
    pub const UD_QKEY: usize = 28;
    /// `wr.wr.ud.ah_num`.
    pub const UD_AH: usize = 36;
    /// `dma.length`: the provider's idea of the message length (inline data only).
    pub const DMA_LENGTH: usize = 184;
    /// `dma.num_sge`.
    pub const DMA_NUM_SGE: usize = 196;
    /// `dma.sge[]` or `dma.inline_data[]`.
    pub const SGES: usize = 208;
    /// `IB_SEND_FENCE`: start only once every earlier READ and atomic completed.
    pub const FLAG_FENCE: u32 = 1;
    /// `IB_SEND_SIGNALED`.
    pub const FLAG_SIGNALED: u32 = 2;
    /// `IB_SEND_SOLICITED`.
    pub const FLAG_SOLICITED: u32 = 4;
    /// `IB_SEND_INLINE`.
    pub const FLAG_INLINE: u32 = 8;
}

/// `struct rxe_recv_wqe`.
pub mod recv {
    /// `wr_id` (u64).
    pub const WR_ID: usize = 0;
    /// `dma.num_sge`.
    pub const DMA_NUM_SGE: usize = 28;
    /// `dma.sge[]`.
    pub const SGES: usize = 40;
}

/// Bytes of one `struct rxe_sge`: `addr` (u64), `length`, `lkey`.
pub const SGE_BYTES: usize = 16;
