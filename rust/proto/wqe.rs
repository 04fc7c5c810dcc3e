// SPDX-License-Identifier: GPL-2.0
//! Typed views over the work queue entries of the rxe user ABI
//! (`struct rxe_send_wqe`, `struct rxe_recv_wqe`), read from and written to
//! the kernel's private copy of one ring slot. Every accessor is bounded by
//! the slot: a field beyond it reads as zero, an SGE beyond it does not exist,
//! so a hostile count or length can only make a WQE fail, never reach outside.

use super::abi::{recv, send, SGE_BYTES};
use super::atomic::AtomicOp;
use super::cqe::wr_opcode;
use super::mw::BindWr;
use core::ops::Range;

/// Whether a send WQE's opcode is one the requester executes itself,
/// without the wire (LOCAL_INV, REG_MR, BIND_MW).
pub fn executes_locally(opcode: u32) -> bool {
    matches!(opcode, wr_opcode::LOCAL_INV | wr_opcode::REG_MR | wr_opcode::BIND_MW)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        v.copy_from_slice(s);
    }
    u32::from_ne_bytes(v)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        v.copy_from_slice(s);
    }
    u64::from_ne_bytes(v)
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(d) = b.get_mut(at..at + 4) {
        d.copy_from_slice(&v.to_ne_bytes());
    }
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    if let Some(d) = b.get_mut(at..at + 8) {
        d.copy_from_slice(&v.to_ne_bytes());
    }
}

/// One scatter/gather element (`struct rxe_sge`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// Why a walk over an SGE list stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkError<E> {
    /// The SGEs end before the range does.
    TooShort,
    /// The callback refused a piece.
    Piece(E),
}

/// The SGE list of a WQE: `count` entries, checked against the caller's
/// limit when the view was made.
#[derive(Clone, Copy, Debug)]
pub struct SgeList<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> SgeList<'a> {
    /// Entries the WQE lists.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Entry `i`; `None` past the list or the slot.
    pub fn get(&self, i: usize) -> Option<Sge> {
        if i >= self.count {
            return None;
        }
        let at = i.checked_mul(SGE_BYTES)?;
        let b = self.bytes.get(at..at.checked_add(SGE_BYTES)?)?;
        Some(Sge { addr: u64_at(b, 0), length: u32_at(b, 8), lkey: u32_at(b, 12) })
    }

    /// The entries in order (ending early if the slot does).
    pub fn iter(&self) -> impl Iterator<Item = Sge> + 'a {
        let list = *self;
        (0..self.count).map_while(move |i| list.get(i))
    }

    /// Bytes the entries describe, summed without overflow.
    pub fn total_len(&self) -> u64 {
        self.iter().map(|s| u64::from(s.length)).sum()
    }

    /// Walks the pieces of the entries that cover message bytes
    /// `offset..offset + len`, calling `each(address, lkey, range of the
    /// caller's buffer)` per piece, in order; the ranges tile `0..len`.
    pub fn walk<E>(
        &self,
        offset: usize,
        len: usize,
        mut each: impl FnMut(u64, u32, Range<usize>) -> Result<(), E>,
    ) -> Result<(), WalkError<E>> {
        let (mut skip, mut at) = (offset, 0usize);
        for sge in self.iter() {
            if at == len {
                break;
            }
            let sge_len = sge.length as usize;
            if skip >= sge_len {
                skip -= sge_len;
                continue;
            }
            let n = (sge_len - skip).min(len - at);
            each(sge.addr.wrapping_add(skip as u64), sge.lkey, at..at + n).map_err(WalkError::Piece)?;
            at += n;
            skip = 0;
        }
        if at == len {
            Ok(())
        } else {
            Err(WalkError::TooShort)
        }
    }
}

/// The SGE list at `sges_at` of a slot, if its count is within `max_sge`.
fn sge_list(slot: &[u8], count: u32, sges_at: usize, max_sge: u32) -> Option<SgeList<'_>> {
    if count > max_sge {
        return None;
    }
    Some(SgeList { bytes: slot.get(sges_at..).unwrap_or(&[]), count: count as usize })
}

/// A send WQE.
#[derive(Clone, Copy, Debug)]
pub struct SendWqe<'a>(&'a [u8]);

impl<'a> SendWqe<'a> {
    pub fn new(slot: &'a [u8]) -> Self {
        Self(slot)
    }

    pub fn wr_id(&self) -> u64 {
        u64_at(self.0, send::WR_ID)
    }

    /// `IB_UVERBS_WR_*` as user space wrote it.
    pub fn opcode(&self) -> u32 {
        u32_at(self.0, send::OPCODE)
    }

    pub fn send_flags(&self) -> u32 {
        u32_at(self.0, send::FLAGS)
    }

    pub fn signaled(&self) -> bool {
        self.send_flags() & send::FLAG_SIGNALED != 0
    }

    pub fn fenced(&self) -> bool {
        self.send_flags() & send::FLAG_FENCE != 0
    }

    pub fn solicited(&self) -> bool {
        self.send_flags() & send::FLAG_SOLICITED != 0
    }

    pub fn inline(&self) -> bool {
        self.send_flags() & send::FLAG_INLINE != 0
    }

    /// Immediate data, in host order (the WQE holds it in network order).
    pub fn imm_data(&self) -> u32 {
        u32::from_be(u32_at(self.0, send::IMM))
    }

    /// LOCAL_INV and SEND with Invalidate: the key to invalidate (host order).
    pub fn invalidate_rkey(&self) -> u32 {
        u32_at(self.0, send::IMM)
    }

    /// REG_MR (kernel rings only): the registration (`None` for other opcodes).
    pub fn fast_reg(&self) -> Option<FastRegWr> {
        (self.opcode() == wr_opcode::REG_MR).then(|| FastRegWr {
            post: u64_at(self.0, send::REG_POST),
            key: u32_at(self.0, send::REG_KEY),
            access: u32_at(self.0, send::REG_ACCESS),
            iova: u64_at(self.0, send::REG_IOVA),
            len: u64_at(self.0, send::REG_LEN),
        })
    }

    /// BIND_MW: the window, the region and the rights (`None` for other opcodes).
    pub fn bind_mw(&self) -> Option<BindWr> {
        (self.opcode() == wr_opcode::BIND_MW).then(|| BindWr {
            addr: u64_at(self.0, send::MW_ADDR),
            len: u64_at(self.0, send::MW_LEN),
            mr_lkey: u32_at(self.0, send::MW_MR_LKEY),
            mw_rkey: u32_at(self.0, send::MW_RKEY),
            rkey: u32_at(self.0, send::MW_NEW_RKEY),
            access: u32_at(self.0, send::MW_ACCESS),
        })
    }

    /// RDMA: remote address and key.
    pub fn remote_addr(&self) -> u64 {
        u64_at(self.0, send::RDMA_ADDR)
    }

    pub fn rkey(&self) -> u32 {
        u32_at(self.0, send::RDMA_RKEY)
    }

    /// Atomics: the remote operation (`None` for other opcodes).
    pub fn atomic(&self) -> Option<AtomicWr> {
        let op = match self.opcode() {
            wr_opcode::ATOMIC_CMP_AND_SWP => AtomicOp::CompareSwap {
                compare: u64_at(self.0, send::ATOMIC_COMPARE_ADD),
                swap: u64_at(self.0, send::ATOMIC_SWAP),
            },
            wr_opcode::ATOMIC_FETCH_AND_ADD => AtomicOp::FetchAdd { add: u64_at(self.0, send::ATOMIC_COMPARE_ADD) },
            _ => return None,
        };
        Some(AtomicWr { remote_addr: u64_at(self.0, send::ATOMIC_ADDR), rkey: u32_at(self.0, send::ATOMIC_RKEY), op })
    }

    /// FLUSH: the remote range and what to flush (`None` for other opcodes).
    pub fn flush(&self) -> Option<FlushWr> {
        (self.opcode() == wr_opcode::FLUSH).then(|| FlushWr {
            remote_addr: u64_at(self.0, send::RDMA_ADDR),
            rkey: u32_at(self.0, send::FLUSH_RKEY),
            len: u32_at(self.0, send::DMA_LENGTH),
            placement: self.0.get(send::FLUSH_TYPE).copied().unwrap_or(0),
            selectivity: self.0.get(send::FLUSH_LEVEL).copied().unwrap_or(0),
        })
    }

    /// ATOMIC WRITE: the value to store, as the bytes it takes on the wire
    /// (the provider copies them verbatim).
    pub fn atomic_write_value(&self) -> [u8; 8] {
        let mut v = [0u8; 8];
        if let Some(s) = self.0.get(send::ATOMIC_WRITE_VALUE..send::ATOMIC_WRITE_VALUE + 8) {
            v.copy_from_slice(s);
        }
        v
    }

    /// UD: destination QP number (24 bits), Q_Key and address handle.
    pub fn ud_remote_qpn(&self) -> u32 {
        u32_at(self.0, send::UD_QPN) & 0x00ff_ffff
    }

    pub fn ud_qkey(&self) -> u32 {
        u32_at(self.0, send::UD_QKEY)
    }

    pub fn ud_ah_num(&self) -> u32 {
        u32_at(self.0, send::UD_AH)
    }

    /// Length of the inline data the provider copied into the WQE.
    pub fn inline_len(&self) -> u32 {
        u32_at(self.0, send::DMA_LENGTH)
    }

    /// The inline data area (up to the end of the slot).
    pub fn inline_data(&self) -> &'a [u8] {
        self.0.get(send::SGES..).unwrap_or(&[])
    }

    /// The SGE list; `None` if it claims more than `max_sge` entries.
    pub fn sges(&self, max_sge: u32) -> Option<SgeList<'a>> {
        sge_list(self.0, u32_at(self.0, send::DMA_NUM_SGE), send::SGES, max_sge)
    }
}

/// A receive WQE.
#[derive(Clone, Copy, Debug)]
pub struct RecvWqe<'a>(&'a [u8]);

impl<'a> RecvWqe<'a> {
    pub fn new(slot: &'a [u8]) -> Self {
        Self(slot)
    }

    pub fn wr_id(&self) -> u64 {
        u64_at(self.0, recv::WR_ID)
    }

    /// The SGE list; `None` if it claims more than `max_sge` entries.
    pub fn sges(&self, max_sge: u32) -> Option<SgeList<'a>> {
        sge_list(self.0, u32_at(self.0, recv::DMA_NUM_SGE), recv::SGES, max_sge)
    }
}

/// The remote side of an atomic WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicWr {
    pub remote_addr: u64,
    pub rkey: u32,
    pub op: AtomicOp,
}

/// A FLUSH work request: the range of the remote region, the placement
/// type bits and the selectivity level, as user space wrote them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushWr {
    pub remote_addr: u64,
    pub rkey: u32,
    pub len: u32,
    pub placement: u8,
    pub selectivity: u8,
}

/// A fast registration: the MR at `key`'s index becomes valid under `key`,
/// by the posted REG_MR it numbered `post` (0 for none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastRegWr {
    pub post: u64,
    pub key: u32,
    pub access: u32,
    pub iova: u64,
    pub len: u64,
}

/// Where a send WQE built by the kernel goes: RDMA, an atomic, UD, or a
/// registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendTarget {
    Rdma { remote_addr: u64, rkey: u32 },
    Atomic(AtomicWr),
    Reg(FastRegWr),
    Ud { remote_qpn: u32, qkey: u32, ah_num: u32 },
}

/// A send WQE the kernel writes for its own consumers (zeroed first).
pub struct SendWqeMut<'a>(&'a mut [u8]);

impl<'a> SendWqeMut<'a> {
    pub fn new(slot: &'a mut [u8], wr_id: u64, opcode: u32, send_flags: u32, imm_or_inv: u32, to: SendTarget) -> Self {
        slot.fill(0);
        put_u64(slot, send::WR_ID, wr_id);
        put_u32(slot, send::OPCODE, opcode);
        put_u32(slot, send::FLAGS, send_flags);
        put_u32(slot, send::IMM, imm_or_inv);
        match to {
            SendTarget::Rdma { remote_addr, rkey } => {
                put_u64(slot, send::RDMA_ADDR, remote_addr);
                put_u32(slot, send::RDMA_RKEY, rkey);
            }
            SendTarget::Atomic(a) => {
                put_u64(slot, send::ATOMIC_ADDR, a.remote_addr);
                put_u32(slot, send::ATOMIC_RKEY, a.rkey);
                let (compare_add, swap) = match a.op {
                    AtomicOp::CompareSwap { compare, swap } => (compare, swap),
                    AtomicOp::FetchAdd { add } => (add, 0),
                    // Kernel rings carry no ATOMIC WRITE (see `ib::qp`).
                    AtomicOp::Store { value } => (value, 0),
                };
                put_u64(slot, send::ATOMIC_COMPARE_ADD, compare_add);
                put_u64(slot, send::ATOMIC_SWAP, swap);
            }
            SendTarget::Reg(r) => {
                put_u64(slot, send::REG_POST, r.post);
                put_u32(slot, send::REG_KEY, r.key);
                put_u32(slot, send::REG_ACCESS, r.access);
                put_u64(slot, send::REG_IOVA, r.iova);
                put_u64(slot, send::REG_LEN, r.len);
            }
            SendTarget::Ud { remote_qpn, qkey, ah_num } => {
                put_u32(slot, send::UD_QPN, remote_qpn);
                put_u32(slot, send::UD_QKEY, qkey);
                put_u32(slot, send::UD_AH, ah_num);
            }
        }
        Self(slot)
    }

    /// REG_MR: the number the MR gave the posted REG_MR.
    pub fn set_fast_reg_post(&mut self, post: u64) {
        put_u64(self.0, send::REG_POST, post);
    }

    /// The inline data area, to copy `len` bytes into; records the length.
    pub fn inline_area(&mut self, len: usize) -> Option<&mut [u8]> {
        put_u32(self.0, send::DMA_LENGTH, u32::try_from(len).ok()?);
        self.0.get_mut(send::SGES..send::SGES.checked_add(len)?)
    }

    /// Writes the SGE list; false if it does not fit the slot.
    pub fn set_sges(&mut self, sges: impl ExactSizeIterator<Item = Sge>) -> bool {
        put_sges(self.0, send::DMA_NUM_SGE, send::SGES, sges)
    }
}

/// Writes a receive WQE for a kernel consumer (zeroing the slot first);
/// false if the SGEs do not fit.
pub fn write_recv_wqe(slot: &mut [u8], wr_id: u64, sges: impl ExactSizeIterator<Item = Sge>) -> bool {
    slot.fill(0);
    put_u64(slot, recv::WR_ID, wr_id);
    put_sges(slot, recv::DMA_NUM_SGE, recv::SGES, sges)
}

fn put_sges(slot: &mut [u8], count_at: usize, sges_at: usize, sges: impl ExactSizeIterator<Item = Sge>) -> bool {
    let Ok(n) = u32::try_from(sges.len()) else { return false };
    let end = sges.len().checked_mul(SGE_BYTES).and_then(|b| b.checked_add(sges_at));
    if end.is_none_or(|e| e > slot.len()) {
        return false;
    }
    put_u32(slot, count_at, n);
    for (i, s) in sges.enumerate() {
        let at = sges_at + i * SGE_BYTES;
        put_u64(slot, at, s.addr);
        put_u32(slot, at + 8, s.length);
        put_u32(slot, at + 12, s.lkey);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    const SLOT: usize = 256;

    #[test]
    fn send_fields_at_the_abi_offsets() {
        let mut b = [0u8; SLOT];
        b[0..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
        b[12..16].copy_from_slice(&4u32.to_ne_bytes());
        b[16..20].copy_from_slice(&(send::FLAG_SIGNALED | send::FLAG_INLINE).to_ne_bytes());
        b[20..24].copy_from_slice(&0xabcdu32.to_be().to_ne_bytes());
        b[24..32].copy_from_slice(&0xdead_beefu64.to_ne_bytes());
        b[32..36].copy_from_slice(&0x55u32.to_ne_bytes());
        let w = SendWqe::new(&b);
        assert_eq!(w.wr_id(), 0x1122_3344_5566_7788);
        assert_eq!(w.opcode(), 4);
        assert!(w.signaled() && w.inline() && !w.solicited() && !w.fenced());
        assert_eq!(w.imm_data(), 0xabcd);
        assert_eq!((w.remote_addr(), w.rkey()), (0xdead_beef, 0x55));
        // The UD fields share the union with the RDMA ones.
        assert_eq!(w.ud_remote_qpn(), 0xdead_beef & 0x00ff_ffff);
    }

    #[test]
    fn flush_and_atomic_write_at_the_abi_offsets() {
        let mut b = [0u8; SLOT];
        b[12..16].copy_from_slice(&wr_opcode::FLUSH.to_ne_bytes());
        b[24..32].copy_from_slice(&0x7000u64.to_ne_bytes());
        b[36..40].copy_from_slice(&0x1234u32.to_ne_bytes());
        b[40] = 1;
        b[41] = 1;
        b[184..188].copy_from_slice(&4096u32.to_ne_bytes());
        let f = SendWqe::new(&b).flush().unwrap();
        assert_eq!(f, FlushWr { remote_addr: 0x7000, rkey: 0x1234, len: 4096, placement: 1, selectivity: 1 });
        b[12..16].copy_from_slice(&wr_opcode::ATOMIC_WRITE.to_ne_bytes());
        assert_eq!(SendWqe::new(&b).flush(), None);
        b[208..216].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(SendWqe::new(&b).atomic_write_value(), [1, 2, 3, 4, 5, 6, 7, 8]);
        // A slot too short for the value reads zeros.
        assert_eq!(SendWqe::new(&b[..210]).atomic_write_value(), [0; 8]);
    }

    #[test]
    fn fence_flag() {
        let mut b = [0u8; SLOT];
        b[16..20].copy_from_slice(&(send::FLAG_FENCE | send::FLAG_SIGNALED).to_ne_bytes());
        assert!(SendWqe::new(&b).fenced() && SendWqe::new(&b).signaled());
        b[16..20].copy_from_slice(&send::FLAG_SIGNALED.to_ne_bytes());
        assert!(!SendWqe::new(&b).fenced());
    }

    #[test]
    fn atomic_fields_at_the_abi_offsets() {
        let mut b = [0u8; SLOT];
        b[12..16].copy_from_slice(&wr_opcode::ATOMIC_CMP_AND_SWP.to_ne_bytes());
        b[24..32].copy_from_slice(&0x2000u64.to_ne_bytes());
        b[32..40].copy_from_slice(&11u64.to_ne_bytes());
        b[40..48].copy_from_slice(&22u64.to_ne_bytes());
        b[48..52].copy_from_slice(&0x77u32.to_ne_bytes());
        let a = SendWqe::new(&b).atomic().unwrap();
        assert_eq!(a, AtomicWr { remote_addr: 0x2000, rkey: 0x77, op: AtomicOp::CompareSwap { compare: 11, swap: 22 } });
        b[12..16].copy_from_slice(&wr_opcode::ATOMIC_FETCH_AND_ADD.to_ne_bytes());
        assert_eq!(SendWqe::new(&b).atomic().unwrap().op, AtomicOp::FetchAdd { add: 11 });
        b[12..16].copy_from_slice(&wr_opcode::RDMA_READ.to_ne_bytes());
        assert_eq!(SendWqe::new(&b).atomic(), None);
        // What the kernel writes for its consumers reads back the same.
        for op in [AtomicOp::CompareSwap { compare: 1, swap: 2 }, AtomicOp::FetchAdd { add: 3 }] {
            let code = if matches!(op, AtomicOp::FetchAdd { .. }) { wr_opcode::ATOMIC_FETCH_AND_ADD } else { wr_opcode::ATOMIC_CMP_AND_SWP };
            let a = AtomicWr { remote_addr: 0x3000, rkey: 9, op };
            let mut b = [0u8; SLOT];
            SendWqeMut::new(&mut b, 1, code, 0, 0, SendTarget::Atomic(a));
            assert_eq!(SendWqe::new(&b).atomic(), Some(a));
        }
    }

    #[test]
    fn registration_and_invalidation_read_back() {
        let r = FastRegWr { post: 0, key: 0x1234_56ab, access: 7, iova: 0xffff_8880_0000_1000, len: 1 << 21 };
        let mut b = [0u8; SLOT];
        let mut m = SendWqeMut::new(&mut b, 5, wr_opcode::REG_MR, send::FLAG_SIGNALED, 0, SendTarget::Reg(r));
        // The MR's number for the REG_MR, set last, takes the place of rxe's `reg.mr` pointer.
        m.set_fast_reg_post(0x0102_0304_0506_0708);
        let w = SendWqe::new(&b);
        assert_eq!((w.opcode(), w.fast_reg()), (wr_opcode::REG_MR, Some(FastRegWr { post: 0x0102_0304_0506_0708, ..r })));
        assert_eq!(&b[24..32], &0x0102_0304_0506_0708u64.to_ne_bytes());
        // The key to invalidate is in host order, unlike immediate data.
        let mut b = [0u8; SLOT];
        let to = SendTarget::Rdma { remote_addr: 0, rkey: 0 };
        SendWqeMut::new(&mut b, 6, wr_opcode::LOCAL_INV, 0, 0xaabb_ccdd, to);
        let w = SendWqe::new(&b);
        assert_eq!((w.invalidate_rkey(), w.fast_reg()), (0xaabb_ccdd, None));
    }

    #[test]
    fn bind_mw_reads_the_rxe_layout() {
        // `struct rxe_send_wr.wr.mw` as rdma-core's rxe provider fills it.
        let mut b = [0u8; SLOT];
        b[12..16].copy_from_slice(&wr_opcode::BIND_MW.to_ne_bytes());
        b[24..32].copy_from_slice(&0x7f00_0000_1000u64.to_ne_bytes());
        b[32..40].copy_from_slice(&0x2000u64.to_ne_bytes());
        b[40..44].copy_from_slice(&0x111u32.to_ne_bytes());
        b[44..48].copy_from_slice(&0x8000_0022u32.to_ne_bytes());
        b[48..52].copy_from_slice(&0x8000_0023u32.to_ne_bytes());
        b[52..56].copy_from_slice(&6u32.to_ne_bytes());
        let w = SendWqe::new(&b);
        assert_eq!(
            w.bind_mw(),
            Some(BindWr { addr: 0x7f00_0000_1000, len: 0x2000, mr_lkey: 0x111, mw_rkey: 0x8000_0022, rkey: 0x8000_0023, access: 6 })
        );
        b[12..16].copy_from_slice(&wr_opcode::LOCAL_INV.to_ne_bytes());
        assert_eq!(SendWqe::new(&b).bind_mw(), None);
    }

    #[test]
    fn short_slot_reads_zero_and_has_no_sges() {
        let b = [0xffu8; 10];
        let w = SendWqe::new(&b);
        assert_eq!((w.opcode(), w.rkey(), w.inline_len()), (0, 0, 0));
        assert!(w.inline_data().is_empty());
        let r = RecvWqe::new(&b);
        assert_eq!(r.sges(4).map(|s| s.len()), Some(0));
    }

    #[test]
    fn sge_count_over_the_limit_is_refused() {
        let mut b = [0u8; SLOT];
        b[recv::DMA_NUM_SGE..recv::DMA_NUM_SGE + 4].copy_from_slice(&5u32.to_ne_bytes());
        assert!(RecvWqe::new(&b).sges(4).is_none());
        assert_eq!(RecvWqe::new(&b).sges(5).map(|s| s.len()), Some(5));
    }

    #[test]
    fn kernel_wqes_read_back() {
        let mut b = [0u8; SLOT];
        let to = SendTarget::Rdma { remote_addr: 0x1000, rkey: 7 };
        let mut w = SendWqeMut::new(&mut b, 9, 4, send::FLAG_SIGNALED, 0, to);
        let sges = [Sge { addr: 1, length: 2, lkey: 3 }, Sge { addr: 4, length: 5, lkey: 6 }];
        assert!(w.set_sges(sges.iter().copied()));
        let r = SendWqe::new(&b);
        assert_eq!((r.wr_id(), r.opcode(), r.remote_addr(), r.rkey()), (9, 4, 0x1000, 7));
        let l = r.sges(2).unwrap();
        assert_eq!(l.iter().collect::<Vec<_>>(), sges);
        assert_eq!(l.total_len(), 7);
        let mut b = [0u8; SLOT];
        assert!(write_recv_wqe(&mut b, 3, sges.iter().copied()));
        let r = RecvWqe::new(&b);
        assert_eq!((r.wr_id(), r.sges(2).unwrap().iter().collect::<Vec<_>>()), (3, sges.to_vec()));
        // Too many to fit the slot: refused, nothing half-written counts.
        let many = [Sge::default(); 32];
        assert!(!write_recv_wqe(&mut [0u8; 64], 1, many.iter().copied()));
    }

    proptest! {
        /// The pieces of a walk tile the requested range in order, each
        /// inside one SGE at the right offset; a range beyond the list fails.
        #[test]
        fn walk_tiles_the_range(lens in proptest::collection::vec(0u32..64, 0..8), offset in 0usize..300, len in 0usize..300) {
            let mut b = [0u8; SLOT];
            let sges: Vec<Sge> = lens.iter().enumerate()
                .map(|(i, &l)| Sge { addr: (i as u64) << 32, length: l, lkey: i as u32 }).collect();
            assert!(write_recv_wqe(&mut b, 0, sges.iter().copied()));
            let list = RecvWqe::new(&b).sges(8).unwrap();
            let mut pieces = Vec::new();
            let r = list.walk::<()>(offset, len, |addr, lkey, range| { pieces.push((addr, lkey, range)); Ok(()) });
            let total: usize = lens.iter().map(|&l| l as usize).sum();
            prop_assert_eq!(r.is_ok(), offset + len <= total || len == 0);
            let mut at = 0;
            let mut msg = offset;
            for (addr, lkey, range) in &pieces {
                prop_assert_eq!(range.start, at);
                prop_assert!(range.end > range.start);
                // The piece lies in SGE `lkey` at the message offset it covers.
                let start: usize = lens[..*lkey as usize].iter().map(|&l| l as usize).sum();
                prop_assert_eq!(*addr, ((*lkey as u64) << 32) + (msg - start) as u64);
                prop_assert!(msg - start + range.len() <= lens[*lkey as usize] as usize);
                at = range.end;
                msg += range.len();
            }
            if r.is_ok() {
                prop_assert_eq!(at, len);
            }
        }

        /// A refused piece stops the walk with the callback's error.
        #[test]
        fn walk_stops_at_a_refused_piece(stop in 0usize..4) {
            let mut b = [0u8; SLOT];
            let sges = [Sge { addr: 0, length: 8, lkey: 0 }; 4];
            assert!(write_recv_wqe(&mut b, 0, sges.iter().copied()));
            let list = RecvWqe::new(&b).sges(4).unwrap();
            let mut seen = 0;
            let r = list.walk(0, 32, |_, _, _| { seen += 1; if seen > stop { Err(seen) } else { Ok(()) } });
            prop_assert_eq!(r, Err(WalkError::Piece(stop + 1)));
        }
    }
}
