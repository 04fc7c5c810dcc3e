// SPDX-License-Identifier: GPL-2.0
//! Requester segmentation: how one message becomes packets.
//! SEND and RDMA WRITE messages go out as one ONLY packet or as FIRST,
//! MIDDLE..., LAST packets, all but the last carrying exactly the path MTU.
//! An RDMA READ request is one packet without payload that still consumes one
//! PSN per response packet; an atomic is one packet and one PSN. Nothing here
//! allocates: packets are described by an iterator.

use super::limits::{MAX_MSG_SIZE, MAX_READ_PSNS};
use super::wire::{op, Transport};

/// Operation of a send work request, as far as the wire cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MsgKind {
    /// SEND.
    Send,
    /// SEND with immediate data.
    SendImm,
    /// SEND with invalidate (RC only).
    SendInv,
    /// RDMA WRITE.
    Write,
    /// RDMA WRITE with immediate data.
    WriteImm,
    /// RDMA READ request (RC only).
    ReadRequest,
    /// Atomic compare and swap (RC only).
    CompareSwap,
    /// Atomic fetch and add (RC only).
    FetchAdd,
    /// FLUSH of a remote range or region (RC only): no data, one PSN,
    /// answered like a READ without data.
    Flush,
    /// ATOMIC WRITE of 8 bytes (RC only), carried as payload from the WQE,
    /// answered like a READ without data.
    AtomicWrite,
}

impl MsgKind {
    /// Every operation, for tests that range over them all.
    #[cfg(test)]
    pub const ALL: [MsgKind; 10] = [
        MsgKind::Send,
        MsgKind::SendImm,
        MsgKind::SendInv,
        MsgKind::Write,
        MsgKind::WriteImm,
        MsgKind::ReadRequest,
        MsgKind::CompareSwap,
        MsgKind::FetchAdd,
        MsgKind::Flush,
        MsgKind::AtomicWrite,
    ];

    /// Compare-and-swap or fetch-and-add.
    pub const fn is_atomic(self) -> bool {
        matches!(self, Self::CompareSwap | Self::FetchAdd)
    }

    /// Takes exactly [`ATOMIC_LEN`] bytes: the atomics and ATOMIC WRITE.
    pub const fn is_eight_bytes(self) -> bool {
        self.is_atomic() || matches!(self, Self::AtomicWrite)
    }

    /// A READ, an atomic, a FLUSH or an ATOMIC WRITE: it holds one of the
    /// responder resources the peer promised (`max_rd_atomic`), and only its
    /// own response completes it.
    pub const fn takes_rd_atomic(self) -> bool {
        matches!(self, Self::ReadRequest | Self::Flush | Self::AtomicWrite) || self.is_atomic()
    }

    /// Whether the message carries its data in request packets.
    pub const fn has_payload(self) -> bool {
        matches!(self, Self::Send | Self::SendImm | Self::SendInv | Self::Write | Self::WriteImm | Self::AtomicWrite)
    }

    /// Whether `transport` carries this operation: UD only SENDs with or
    /// without immediate, UC also WRITEs, RC everything.
    pub const fn allowed_on(self, transport: Transport) -> bool {
        match transport {
            Transport::Rc => true,
            Transport::Uc => matches!(self, Self::Send | Self::SendImm | Self::Write | Self::WriteImm),
            Transport::Ud => matches!(self, Self::Send | Self::SendImm),
            Transport::Cnp => false,
        }
    }
}

/// Why a message cannot be segmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentError {
    /// Path MTU other than 256, 512, 1024, 2048 or 4096 bytes.
    BadMtu,
    /// The transport does not carry this operation.
    Unsupported,
    /// Longer than the 2 GiB message limit, or a UD message longer than the MTU.
    TooLong,
    /// An atomic whose local buffer, or an ATOMIC WRITE whose value, is not
    /// exactly 8 bytes.
    BadAtomicLength,
}

/// Bytes an atomic operation reads and writes.
pub const ATOMIC_LEN: u32 = 8;

/// A message checked against its transport and path MTU, ready to segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    kind: MsgKind,
    transport: Transport,
    len: u32,
    /// log2 of the path MTU, 8..=12.
    mtu_shift: u32,
}

impl Message {
    /// Checks a message of `len` bytes sent over `transport` with a path MTU
    /// of `mtu` bytes.
    pub const fn new(kind: MsgKind, transport: Transport, len: u32, mtu: u32) -> Result<Self, SegmentError> {
        if !mtu.is_power_of_two() || mtu < 256 || mtu > 4096 {
            return Err(SegmentError::BadMtu);
        }
        if !kind.allowed_on(transport) {
            return Err(SegmentError::Unsupported);
        }
        // A FLUSH's length names a range to flush, not data to send.
        let sends_len = !matches!(kind, MsgKind::Flush);
        if sends_len && (len > MAX_MSG_SIZE || (matches!(transport, Transport::Ud) && len > mtu)) {
            return Err(SegmentError::TooLong);
        }
        if kind.is_eight_bytes() && len != ATOMIC_LEN {
            return Err(SegmentError::BadAtomicLength);
        }
        let m = Self { kind, transport, len, mtu_shift: mtu.trailing_zeros() };
        if matches!(kind, MsgKind::ReadRequest) && m.pieces() > MAX_READ_PSNS {
            return Err(SegmentError::TooLong);
        }
        Ok(m)
    }

    /// Operation.
    #[cfg(test)]
    pub const fn kind(&self) -> MsgKind {
        self.kind
    }

    /// Transport service.
    #[cfg(test)]
    pub const fn transport(&self) -> Transport {
        self.transport
    }

    /// Message length in bytes.
    #[cfg(test)]
    pub const fn len(&self) -> u32 {
        self.len
    }

    /// Whether the message has no data.
    #[cfg(test)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Path MTU in bytes.
    pub const fn mtu(&self) -> u32 {
        1 << self.mtu_shift
    }

    /// MTU-sized pieces `len` bytes take, at least one.
    const fn pieces(&self) -> u32 {
        let full = self.len >> self.mtu_shift;
        let partial = (self.len & (self.mtu() - 1) != 0) as u32;
        let n = full + partial;
        if n == 0 {
            1
        } else {
            n
        }
    }

    /// PSNs the message consumes: one per request packet, one per expected
    /// READ response packet, one for an atomic.
    pub const fn psn_count(&self) -> u32 {
        match self.kind {
            MsgKind::CompareSwap | MsgKind::FetchAdd | MsgKind::Flush => 1,
            _ => self.pieces(),
        }
    }

    /// Request packets the message is sent as.
    pub const fn packet_count(&self) -> u32 {
        if self.kind.has_payload() {
            self.pieces()
        } else {
            1
        }
    }

    /// Request packet `index` (its PSN offset from the message's first PSN),
    /// or `None` past the last one. Retransmission restarts from here.
    pub const fn segment(&self, index: u32) -> Option<Segment> {
        let count = self.packet_count();
        if index >= count {
            return None;
        }
        let first = index == 0;
        let last = index + 1 == count;
        let (offset, len) = if self.kind.has_payload() {
            // index < pieces, so the offset stays below len (or is 0 for an empty message)
            let offset = index << self.mtu_shift;
            let rest = self.len.saturating_sub(offset);
            let mtu = self.mtu();
            (offset, if rest < mtu { rest } else { mtu })
        } else {
            (0, 0)
        };
        let kind = self.kind;
        Some(Segment {
            opcode: transport_bits(self.transport) | opcode(kind, first, last),
            psn_offset: index,
            offset,
            len,
            pad: (len.wrapping_neg() & 3) as u8,
            reth: first && matches!(kind, MsgKind::Write | MsgKind::WriteImm | MsgKind::ReadRequest | MsgKind::Flush | MsgKind::AtomicWrite),
            imm: last && matches!(kind, MsgKind::SendImm | MsgKind::WriteImm),
            ieth: last && matches!(kind, MsgKind::SendInv),
            first,
            last,
        })
    }

    /// All request packets in order.
    #[cfg(test)]
    pub const fn segments(&self) -> Segments {
        self.segments_from(0)
    }

    /// Request packets from PSN offset `index` on, as a go-back-N resend
    /// needs them; empty when `index` is past the last packet.
    #[cfg(test)]
    pub const fn segments_from(&self, index: u32) -> Segments {
        let end = self.packet_count();
        Segments { msg: *self, next: if index < end { index } else { end }, end }
    }
}

/// Opcode prefix of a transport.
const fn transport_bits(t: Transport) -> u8 {
    match t {
        Transport::Rc => op::RC,
        Transport::Uc => op::UC,
        Transport::Ud => op::UD,
        // Message::new rejects CNP; any value is unreachable.
        Transport::Cnp => op::CNP,
    }
}

/// Operation bits of the opcode of a packet at the given place in a message.
const fn opcode(kind: MsgKind, first: bool, last: bool) -> u8 {
    use MsgKind::*;
    match (kind, first, last) {
        (Send, true, true) => op::SEND_ONLY,
        (SendImm, true, true) => op::SEND_ONLY_IMM,
        (SendInv, true, true) => op::SEND_ONLY_INV,
        (Send | SendImm | SendInv, true, false) => op::SEND_FIRST,
        (Send | SendImm | SendInv, false, false) => op::SEND_MIDDLE,
        (Send, false, true) => op::SEND_LAST,
        (SendImm, false, true) => op::SEND_LAST_IMM,
        (SendInv, false, true) => op::SEND_LAST_INV,
        (Write, true, true) => op::WRITE_ONLY,
        (WriteImm, true, true) => op::WRITE_ONLY_IMM,
        (Write | WriteImm, true, false) => op::WRITE_FIRST,
        (Write | WriteImm, false, false) => op::WRITE_MIDDLE,
        (Write, false, true) => op::WRITE_LAST,
        (WriteImm, false, true) => op::WRITE_LAST_IMM,
        (ReadRequest, _, _) => op::READ_REQUEST,
        (CompareSwap, _, _) => op::COMPARE_SWAP,
        (FetchAdd, _, _) => op::FETCH_ADD,
        (Flush, _, _) => op::FLUSH,
        (AtomicWrite, _, _) => op::ATOMIC_WRITE,
    }
}

/// One request packet of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Opcode, transport bits included.
    pub opcode: u8,
    /// PSN of this packet minus the message's first PSN.
    pub psn_offset: u32,
    /// Offset of the payload in the message.
    pub offset: u32,
    /// Payload bytes (0 for READ requests and atomics).
    pub len: u32,
    /// BTH pad count: bytes after the payload up to a multiple of 4.
    pub pad: u8,
    /// A RETH follows: first packet of a WRITE, or the READ request.
    pub reth: bool,
    /// Immediate data follows: last packet of a SEND or WRITE with immediate.
    pub imm: bool,
    /// An IETH follows: last packet of a SEND with invalidate.
    pub ieth: bool,
    /// First packet of the message (FIRST or ONLY).
    pub first: bool,
    /// Last packet of the message (LAST or ONLY): completion and ACK request go here.
    pub last: bool,
}

/// Iterator over the request packets of a [`Message`] (the requester asks
/// [`Message::segment`] for one at a time).
#[cfg(test)]
#[derive(Clone, Debug)]
pub struct Segments {
    msg: Message,
    next: u32,
    end: u32,
}

#[cfg(test)]
impl Iterator for Segments {
    type Item = Segment;

    fn next(&mut self) -> Option<Segment> {
        if self.next >= self.end {
            return None;
        }
        let s = self.msg.segment(self.next);
        self.next += 1;
        s
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end.saturating_sub(self.next) as usize;
        (n, Some(n))
    }
}

#[cfg(test)]
impl ExactSizeIterator for Segments {}

#[cfg(test)]
impl core::iter::FusedIterator for Segments {}

#[cfg(test)]
mod tests {
    use super::super::wire::{flags, op_info};
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    const KINDS: [MsgKind; 10] = MsgKind::ALL;

    fn all(kind: MsgKind, t: Transport, len: u32, mtu: u32) -> Vec<Segment> {
        Message::new(kind, t, len, mtu).unwrap().segments().collect()
    }

    #[test]
    fn empty_send_is_one_only_packet() {
        let s = all(MsgKind::Send, Transport::Rc, 0, 1024);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].opcode, 0x04);
        assert_eq!((s[0].offset, s[0].len, s[0].pad), (0, 0, 0));
        assert!(s[0].first && s[0].last && !s[0].reth && !s[0].imm);
        let w = all(MsgKind::WriteImm, Transport::Uc, 0, 256);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].opcode, 0x2b);
        assert!(w[0].reth && w[0].imm);
    }

    #[test]
    fn uc_write_in_five_packets() {
        let s = all(MsgKind::Write, Transport::Uc, 5000, 1024);
        let ops: Vec<u8> = s.iter().map(|p| p.opcode).collect();
        assert_eq!(ops, [0x26, 0x27, 0x27, 0x27, 0x28]);
        let lens: Vec<u32> = s.iter().map(|p| p.len).collect();
        assert_eq!(lens, [1024, 1024, 1024, 1024, 904]);
        assert!(s[0].reth && !s[1].reth && !s[4].reth);
        assert_eq!(s[4].offset, 4096);
        assert_eq!(s[4].psn_offset, 4);
    }

    #[test]
    fn rc_send_variants_end_differently() {
        let last = |k| all(k, Transport::Rc, 3000, 1024).last().copied().unwrap();
        assert_eq!(last(MsgKind::Send).opcode, op::SEND_LAST);
        assert_eq!(last(MsgKind::SendImm).opcode, op::SEND_LAST_IMM);
        let inv = last(MsgKind::SendInv);
        assert_eq!(inv.opcode, op::SEND_LAST_INV);
        assert!(inv.ieth && !inv.imm);
        assert_eq!(inv.len, 952);
        assert_eq!(all(MsgKind::SendInv, Transport::Rc, 10, 1024)[0].opcode, op::SEND_ONLY_INV);
    }

    #[test]
    fn ud_sends() {
        let s = all(MsgKind::SendImm, Transport::Ud, 5, 4096);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].opcode, 0x65);
        assert_eq!((s[0].len, s[0].pad), (5, 3));
        assert!(s[0].imm);
        assert_eq!(all(MsgKind::Send, Transport::Ud, 4096, 4096)[0].opcode, 0x64);
    }

    #[test]
    fn read_request_is_one_packet_of_many_psns() {
        let m = Message::new(MsgKind::ReadRequest, Transport::Rc, 10_000, 4096).unwrap();
        assert_eq!(m.psn_count(), 3);
        assert_eq!(m.packet_count(), 1);
        let s: Vec<Segment> = m.segments().collect();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].opcode, op::READ_REQUEST);
        assert_eq!((s[0].len, s[0].pad), (0, 0));
        assert!(s[0].reth && s[0].first && s[0].last);
        assert_eq!(m.segments_from(1).count(), 0);
        let empty = Message::new(MsgKind::ReadRequest, Transport::Rc, 0, 4096).unwrap();
        assert_eq!(empty.psn_count(), 1);
        let exact = Message::new(MsgKind::ReadRequest, Transport::Rc, 8192, 4096).unwrap();
        assert_eq!(exact.psn_count(), 2);
    }

    #[test]
    fn atomics() {
        for (k, o) in [(MsgKind::CompareSwap, op::COMPARE_SWAP), (MsgKind::FetchAdd, op::FETCH_ADD)] {
            let m = Message::new(k, Transport::Rc, 8, 256).unwrap();
            assert_eq!(m.psn_count(), 1);
            let s: Vec<Segment> = m.segments().collect();
            assert_eq!(s.len(), 1);
            assert_eq!(s[0].opcode, o);
            assert!(!s[0].reth && s[0].len == 0);
            assert_eq!(Message::new(k, Transport::Rc, 4, 256), Err(SegmentError::BadAtomicLength));
        }
    }

    #[test]
    fn placement_requests() {
        // A FLUSH sends no data and takes one PSN, whatever range it names.
        for len in [0, 1, 5000, MAX_MSG_SIZE, u32::MAX] {
            let m = Message::new(MsgKind::Flush, Transport::Rc, len, 256).unwrap();
            assert_eq!((m.psn_count(), m.packet_count()), (1, 1));
            let s = m.segment(0).unwrap();
            assert_eq!((s.opcode, s.len, s.pad, s.reth), (op::FLUSH, 0, 0, true));
        }
        // An ATOMIC WRITE carries exactly its 8-byte value.
        let m = Message::new(MsgKind::AtomicWrite, Transport::Rc, 8, 256).unwrap();
        let s: Vec<Segment> = m.segments().collect();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].opcode, s[0].len, s[0].pad, s[0].reth), (op::ATOMIC_WRITE, 8, 0, true));
        assert_eq!(Message::new(MsgKind::AtomicWrite, Transport::Rc, 16, 256), Err(SegmentError::BadAtomicLength));
        assert!(MsgKind::Flush.takes_rd_atomic() && MsgKind::AtomicWrite.takes_rd_atomic());
    }

    #[test]
    fn rejects() {
        use MsgKind::*;
        use SegmentError::*;
        use Transport::*;
        for mtu in [0, 1, 128, 255, 300, 1000, 8192, u32::MAX] {
            assert_eq!(Message::new(Send, Rc, 1, mtu), Err(BadMtu), "{mtu}");
        }
        for k in [SendInv, Write, WriteImm, ReadRequest, CompareSwap, FetchAdd, Flush, AtomicWrite] {
            assert_eq!(Message::new(k, Ud, 8, 1024), Err(Unsupported), "{k:?}");
        }
        for k in [SendInv, ReadRequest, CompareSwap, FetchAdd, Flush, AtomicWrite] {
            assert_eq!(Message::new(k, Uc, 8, 1024), Err(Unsupported), "{k:?}");
        }
        assert_eq!(Message::new(Send, Cnp, 8, 1024), Err(Unsupported));
        assert_eq!(Message::new(Send, Ud, 1025, 1024), Err(TooLong));
        assert_eq!(Message::new(Write, Rc, MAX_MSG_SIZE + 1, 4096), Err(TooLong));
        assert_eq!(Message::new(ReadRequest, Rc, u32::MAX, 4096), Err(TooLong));
        // A READ takes at most MAX_READ_PSNS responses: 1 GiB at MTU 256.
        assert_eq!(Message::new(ReadRequest, Rc, 1 << 30, 256).map(|m| m.psn_count()), Ok(1 << 22));
        assert_eq!(Message::new(ReadRequest, Rc, (1 << 30) + 1, 256), Err(TooLong));
        assert!(Message::new(ReadRequest, Rc, MAX_MSG_SIZE, 4096).is_ok());
    }

    #[test]
    fn largest_message() {
        let m = Message::new(MsgKind::Write, Transport::Rc, MAX_MSG_SIZE, 256).unwrap();
        assert_eq!(m.psn_count(), 1 << 23);
        let last = m.segment(m.packet_count() - 1).unwrap();
        assert_eq!(last.offset + last.len, MAX_MSG_SIZE);
        assert_eq!(last.opcode, op::WRITE_LAST);
        assert_eq!(m.segment(m.packet_count()), None);
        assert_eq!(m.segments_from(u32::MAX).len(), 0);
    }

    fn arb_message() -> impl Strategy<Value = Message> {
        let kind = proptest::sample::select(&KINDS[..]);
        let t = prop_oneof![Just(Transport::Rc), Just(Transport::Uc), Just(Transport::Ud)];
        let len = prop_oneof![0u32..20_000, Just(8), 0u32..=4096];
        (kind, t, len, 8u32..=12).prop_filter_map("not carried", |(k, t, len, shift)| {
            Message::new(k, t, len, 1 << shift).ok()
        })
    }

    proptest! {
        #[test]
        fn payload_tiles_the_message(m in arb_message()) {
            let s: Vec<Segment> = m.segments().collect();
            prop_assert_eq!(s.len() as u32, m.packet_count());
            if m.kind().has_payload() {
                let mut at = 0;
                for (i, p) in s.iter().enumerate() {
                    prop_assert_eq!(p.offset, at);
                    prop_assert_eq!(p.psn_offset, i as u32);
                    if !p.last {
                        prop_assert_eq!(p.len, m.mtu());
                    } else {
                        prop_assert!(p.len <= m.mtu());
                        prop_assert!(p.len > 0 || m.is_empty());
                    }
                    at += p.len;
                }
                prop_assert_eq!(at, m.len());
                prop_assert_eq!(m.psn_count(), m.packet_count());
            } else {
                prop_assert_eq!(s.len(), 1);
                prop_assert_eq!(s[0].len, 0);
            }
        }

        #[test]
        fn pad_rounds_to_four(m in arb_message()) {
            for p in m.segments() {
                prop_assert!(p.pad < 4);
                prop_assert_eq!((p.len + p.pad as u32) % 4, 0);
            }
        }

        #[test]
        fn opcodes_agree_with_the_wire_table(m in arb_message()) {
            let n = m.packet_count();
            for (i, p) in m.segments().enumerate() {
                let info = op_info(p.opcode).unwrap();
                prop_assert_eq!(info.transport, m.transport());
                prop_assert!(info.has(flags::REQUEST));
                prop_assert_eq!(info.has(flags::START), i == 0);
                prop_assert_eq!(info.has(flags::END), i as u32 == n - 1);
                prop_assert_eq!(info.has(flags::START), p.first);
                prop_assert_eq!(info.has(flags::END), p.last);
                prop_assert_eq!(info.has(flags::RETH), p.reth);
                prop_assert_eq!(info.has(flags::IMMDT), p.imm);
                prop_assert_eq!(info.has(flags::IETH), p.ieth);
                prop_assert_eq!(info.has(flags::PAYLOAD), m.kind().has_payload());
                let family = info.flags & (flags::SEND | flags::WRITE | flags::READ | flags::ATOMIC | flags::FLUSH | flags::ATOMIC_WRITE);
                let want = match m.kind() {
                    MsgKind::Send | MsgKind::SendImm | MsgKind::SendInv => flags::SEND,
                    MsgKind::Write | MsgKind::WriteImm => flags::WRITE,
                    MsgKind::ReadRequest => flags::READ,
                    MsgKind::CompareSwap | MsgKind::FetchAdd => flags::ATOMIC,
                    MsgKind::Flush => flags::FLUSH,
                    MsgKind::AtomicWrite => flags::ATOMIC_WRITE,
                };
                prop_assert_eq!(family, want);
            }
        }

        #[test]
        fn resend_from_any_packet(m in arb_message(), k in 0u32..100) {
            let all: Vec<Segment> = m.segments().collect();
            let from: Vec<Segment> = m.segments_from(k).collect();
            prop_assert_eq!(m.segments_from(k).len(), from.len());
            prop_assert_eq!(&from[..], &all[all.len().min(k as usize)..]);
        }

        #[test]
        fn never_panics(
            k in 0usize..8,
            t in 0usize..4,
            len in any::<u32>(),
            mtu in any::<u32>(),
            i in any::<u32>(),
        ) {
            let kind = KINDS[k];
            let t = [Transport::Rc, Transport::Uc, Transport::Ud, Transport::Cnp][t];
            if let Ok(m) = Message::new(kind, t, len, mtu) {
                let _ = m.segment(i);
                let _ = m.segments_from(i).next();
                prop_assert!(m.psn_count() >= 1 && m.psn_count() <= 1 << 23);
            }
        }
    }
}
