// SPDX-License-Identifier: GPL-2.0
//! InfiniBand transport headers as RoCEv2 carries them in a UDP payload:
//! the base transport header (BTH) and the extended headers (RETH, AETH,
//! DETH, ...), the opcode table that says which follow which opcode, and a
//! parser that validates a whole packet once so later stages can trust it.
//! All multi-byte fields are big-endian on the wire.

/// Why a packet is rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its headers, pad and ICRC.
    Truncated,
    /// Opcode that no supported transport defines.
    UnknownOpcode,
    /// Transport header version other than 0.
    BadVersion,
    /// Pad count on a packet that carries no payload, or more pad than payload.
    BadPad,
    /// Payload on an opcode that carries none.
    UnexpectedPayload,
}

/// Bytes of each header.
pub const BTH_LEN: usize = 12;
/// RDMA extended transport header.
pub const RETH_LEN: usize = 16;
/// ACK extended transport header.
pub const AETH_LEN: usize = 4;
/// Datagram extended transport header.
pub const DETH_LEN: usize = 8;
/// Atomic extended transport header.
pub const ATMETH_LEN: usize = 28;
/// Atomic ACK extended transport header.
pub const ATMACK_LEN: usize = 8;
/// Immediate data.
pub const IMMDT_LEN: usize = 4;
/// Invalidate extended transport header.
pub const IETH_LEN: usize = 4;
/// FLUSH extended transport header.
pub const FETH_LEN: usize = 4;
/// Invariant CRC trailer.
pub const ICRC_LEN: usize = 4;

/// Transport service of an opcode (its top three bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram.
    Ud,
    /// RoCEv2 congestion notification packet.
    Cnp,
}

/// Header and role flags of an opcode.
pub mod flags {
    /// RETH follows the BTH.
    pub const RETH: u32 = 1 << 0;
    /// AETH follows.
    pub const AETH: u32 = 1 << 1;
    /// DETH follows.
    pub const DETH: u32 = 1 << 2;
    /// Atomic ETH follows.
    pub const ATMETH: u32 = 1 << 3;
    /// Atomic ACK ETH follows.
    pub const ATMACK: u32 = 1 << 4;
    /// Immediate data follows.
    pub const IMMDT: u32 = 1 << 5;
    /// Invalidate ETH follows.
    pub const IETH: u32 = 1 << 6;
    /// The packet carries payload.
    pub const PAYLOAD: u32 = 1 << 7;
    /// First packet of a message (FIRST or ONLY).
    pub const START: u32 = 1 << 8;
    /// Last packet of a message (LAST or ONLY).
    pub const END: u32 = 1 << 9;
    /// Sent by the requester (as opposed to a response).
    pub const REQUEST: u32 = 1 << 10;
    /// SEND family.
    pub const SEND: u32 = 1 << 11;
    /// RDMA WRITE family.
    pub const WRITE: u32 = 1 << 12;
    /// RDMA READ request or response.
    pub const READ: u32 = 1 << 13;
    /// Atomic request or its ACK.
    pub const ATOMIC: u32 = 1 << 14;
    /// ACK or NAK (AETH-only response).
    pub const ACK: u32 = 1 << 15;
    /// FLUSH extended transport header follows (before the RETH).
    pub const FETH: u32 = 1 << 16;
    /// FLUSH request: make earlier writes to a range globally visible.
    pub const FLUSH: u32 = 1 << 17;
    /// ATOMIC WRITE request: an 8-byte store done as one.
    pub const ATOMIC_WRITE: u32 = 1 << 18;
}

/// Opcode values (IBTA 9.2, table 38), transport in the top three bits.
pub mod op {
    #![allow(missing_docs)]
    pub const RC: u8 = 0x00;
    pub const UC: u8 = 0x20;
    pub const UD: u8 = 0x60;
    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_LAST_IMM: u8 = 0x03;
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_IMM: u8 = 0x05;
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0a;
    pub const WRITE_ONLY_IMM: u8 = 0x0b;
    pub const READ_REQUEST: u8 = 0x0c;
    pub const READ_RESPONSE_FIRST: u8 = 0x0d;
    pub const READ_RESPONSE_MIDDLE: u8 = 0x0e;
    pub const READ_RESPONSE_LAST: u8 = 0x0f;
    pub const READ_RESPONSE_ONLY: u8 = 0x10;
    pub const ACKNOWLEDGE: u8 = 0x11;
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    pub const COMPARE_SWAP: u8 = 0x13;
    pub const FETCH_ADD: u8 = 0x14;
    pub const SEND_LAST_INV: u8 = 0x16;
    pub const SEND_ONLY_INV: u8 = 0x17;
    /// Memory placement extensions (IBTA annex A19).
    pub const FLUSH: u8 = 0x1c;
    pub const ATOMIC_WRITE: u8 = 0x1d;
    /// RoCEv2 CNP (Annex A17), not the native-IB CNP 0x80.
    pub const CNP: u8 = 0x81;
}

/// What an opcode carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// Transport service.
    pub transport: Transport,
    /// [`flags`] bits.
    pub flags: u32,
}

impl OpInfo {
    /// Whether a flag is set.
    pub const fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Bytes of BTH plus extended headers.
    pub const fn hdr_len(&self) -> usize {
        let f = self.flags;
        let mut n = BTH_LEN;
        if f & flags::DETH != 0 {
            n += DETH_LEN;
        }
        if f & flags::RETH != 0 {
            n += RETH_LEN;
        }
        if f & flags::ATMETH != 0 {
            n += ATMETH_LEN;
        }
        if f & flags::AETH != 0 {
            n += AETH_LEN;
        }
        if f & flags::ATMACK != 0 {
            n += ATMACK_LEN;
        }
        if f & flags::IMMDT != 0 {
            n += IMMDT_LEN;
        }
        if f & flags::IETH != 0 {
            n += IETH_LEN;
        }
        if f & flags::FETH != 0 {
            n += FETH_LEN;
        }
        n
    }
}

/// Header layout and role of `opcode`, or `None` for opcodes rroce does not speak.
pub const fn op_info(opcode: u8) -> Option<OpInfo> {
    use flags::*;
    const RQ: u32 = REQUEST;
    let transport = match opcode & 0xe0 {
        op::RC => Transport::Rc,
        op::UC => Transport::Uc,
        op::UD => Transport::Ud,
        0x80 if opcode == op::CNP => return Some(OpInfo { transport: Transport::Cnp, flags: 0 }),
        _ => return None,
    };
    let f = match opcode & 0x1f {
        op::SEND_FIRST => RQ | SEND | PAYLOAD | START,
        op::SEND_MIDDLE => RQ | SEND | PAYLOAD,
        op::SEND_LAST => RQ | SEND | PAYLOAD | END,
        op::SEND_LAST_IMM => RQ | SEND | PAYLOAD | END | IMMDT,
        op::SEND_ONLY => RQ | SEND | PAYLOAD | START | END,
        op::SEND_ONLY_IMM => RQ | SEND | PAYLOAD | START | END | IMMDT,
        op::WRITE_FIRST => RQ | WRITE | PAYLOAD | START | RETH,
        op::WRITE_MIDDLE => RQ | WRITE | PAYLOAD,
        op::WRITE_LAST => RQ | WRITE | PAYLOAD | END,
        op::WRITE_LAST_IMM => RQ | WRITE | PAYLOAD | END | IMMDT,
        op::WRITE_ONLY => RQ | WRITE | PAYLOAD | START | END | RETH,
        op::WRITE_ONLY_IMM => RQ | WRITE | PAYLOAD | START | END | RETH | IMMDT,
        op::READ_REQUEST => RQ | READ | START | END | RETH,
        op::READ_RESPONSE_FIRST => READ | PAYLOAD | START | AETH,
        op::READ_RESPONSE_MIDDLE => READ | PAYLOAD,
        op::READ_RESPONSE_LAST => READ | PAYLOAD | END | AETH,
        op::READ_RESPONSE_ONLY => READ | PAYLOAD | START | END | AETH,
        op::ACKNOWLEDGE => ACK | START | END | AETH,
        op::ATOMIC_ACKNOWLEDGE => ATOMIC | START | END | AETH | ATMACK,
        op::COMPARE_SWAP | op::FETCH_ADD => RQ | ATOMIC | START | END | ATMETH,
        op::SEND_LAST_INV => RQ | SEND | PAYLOAD | END | IETH,
        op::SEND_ONLY_INV => RQ | SEND | PAYLOAD | START | END | IETH,
        op::FLUSH => RQ | FLUSH | START | END | FETH | RETH,
        op::ATOMIC_WRITE => RQ | ATOMIC_WRITE | PAYLOAD | START | END | RETH,
        _ => return None,
    };
    // UC carries SEND and WRITE only; UD carries SEND ONLY (with immediate) with a DETH.
    let ok = match transport {
        Transport::Rc => true,
        Transport::Uc => f & (SEND | WRITE) != 0 && f & IETH == 0,
        Transport::Ud => (opcode & 0x1f) == op::SEND_ONLY || (opcode & 0x1f) == op::SEND_ONLY_IMM,
        Transport::Cnp => true,
    };
    if !ok {
        return None;
    }
    let f = if matches!(transport, Transport::Ud) { f | DETH } else { f };
    Some(OpInfo { transport, flags: f })
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be64(b: &[u8], at: usize) -> u64 {
    ((be32(b, at) as u64) << 32) | be32(b, at + 4) as u64
}
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}

/// Base transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Bth {
    /// Opcode (transport and operation).
    pub opcode: u8,
    /// Solicited event.
    pub se: bool,
    /// Migration request.
    pub mig: bool,
    /// Pad bytes (0..=3) that round the payload up to 4 bytes.
    pub pad: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN (set by CE-marking congestion points in native IB).
    pub fecn: bool,
    /// Backward ECN (set in CNPs).
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qpn: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Writes the header into `b[..12]`.
    pub fn encode(&self, b: &mut [u8; BTH_LEN]) {
        b[0] = self.opcode;
        b[1] = (self.se as u8) << 7 | (self.mig as u8) << 6 | (self.pad & 3) << 4;
        put16(b, 2, self.pkey);
        b[4] = (self.fecn as u8) << 7 | (self.becn as u8) << 6;
        put24(b, 5, self.dest_qpn);
        b[8] = (self.ack_req as u8) << 7;
        put24(b, 9, self.psn);
    }

    /// Reads a header; fails on a short buffer or a version other than 0.
    pub fn decode(b: &[u8]) -> Result<Self, WireError> {
        if b.len() < BTH_LEN {
            return Err(WireError::Truncated);
        }
        if b[1] & 0x0f != 0 {
            return Err(WireError::BadVersion);
        }
        Ok(Self {
            opcode: b[0],
            se: b[1] & 0x80 != 0,
            mig: b[1] & 0x40 != 0,
            pad: (b[1] >> 4) & 3,
            pkey: be16(b, 2),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qpn: be24(b, 5),
            ack_req: b[8] & 0x80 != 0,
            psn: be24(b, 9),
        })
    }
}

/// RDMA extended transport header: the remote buffer of a WRITE or READ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole message.
    pub dma_len: u32,
}

/// ACK extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Aeth {
    /// ACK/RNR NAK/NAK code and credit count or timer (IBTA 9.7.5.1).
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

/// FETH values (`enum ib_placement_type`, `enum ib_selectivity_level`).
pub mod flush {
    /// Make the data visible to every later reader (`IB_FLUSH_GLOBAL`).
    pub const GLOBAL: u8 = 1 << 0;
    /// Make the data persistent (`IB_FLUSH_PERSISTENT`).
    pub const PERSISTENT: u8 = 1 << 1;
    /// Every placement type bit defined.
    pub const PLACEMENTS: u8 = GLOBAL | PERSISTENT;
    /// The RETH's range (`IB_FLUSH_RANGE`).
    pub const LEVEL_RANGE: u8 = 0;
    /// The whole region the R_Key names (`IB_FLUSH_MR`).
    pub const LEVEL_MR: u8 = 1;
}

/// FLUSH extended transport header: what kind of placement the FLUSH
/// asks for, and whether of the RETH's range or of the whole region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Feth {
    /// Placement type bits (`IB_FLUSH_GLOBAL` 1, `IB_FLUSH_PERSISTENT` 2).
    pub placement: u8,
    /// Selectivity level (`IB_FLUSH_RANGE` 0, `IB_FLUSH_MR` 1).
    pub selectivity: u8,
}

impl Feth {
    fn decode(v: u32) -> Self {
        Self { placement: (v & 0xf) as u8, selectivity: ((v >> 4) & 3) as u8 }
    }

    fn encode(&self) -> u32 {
        u32::from(self.placement & 0xf) | u32::from(self.selectivity & 3) << 4
    }
}

/// Datagram extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qpn: u32,
}

/// Atomic extended transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value or addend.
    pub swap_add: u64,
    /// Compare value.
    pub compare: u64,
}

/// A parsed packet: the headers, and where the payload lies in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Packet {
    /// Base transport header.
    pub bth: Bth,
    /// [`flags`] of the opcode.
    pub flags: u32,
    /// Present when `flags` has FETH.
    pub feth: Feth,
    /// Present when `flags` has RETH.
    pub reth: Reth,
    /// Present when `flags` has AETH.
    pub aeth: Aeth,
    /// Present when `flags` has DETH.
    pub deth: Deth,
    /// Present when `flags` has ATMETH.
    pub atmeth: AtomicEth,
    /// Original remote value, present when `flags` has ATMACK.
    pub atomic_orig: u64,
    /// Immediate data in wire order, when `flags` has IMMDT.
    pub imm: u32,
    /// R_Key to invalidate, when `flags` has IETH.
    pub inv_rkey: u32,
    /// Offset of the payload in the buffer.
    pub payload_off: usize,
    /// Bytes of payload (pad and ICRC excluded).
    pub payload_len: usize,
}

impl Packet {
    /// Whether a flag of the opcode is set.
    pub const fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Parses the UDP payload `b` (BTH to ICRC, inclusive). Every length is
    /// checked here, so consumers index the buffer only with ranges this
    /// returns. The ICRC itself is checked by [`crate::icrc`] beforehand.
    pub fn parse(b: &[u8]) -> Result<Self, WireError> {
        let bth = Bth::decode(b)?;
        let info = op_info(bth.opcode).ok_or(WireError::UnknownOpcode)?;
        let hdr = info.hdr_len();
        let rest = b
            .len()
            .checked_sub(hdr + ICRC_LEN)
            .ok_or(WireError::Truncated)?;
        let pad = bth.pad as usize;
        if !info.has(flags::PAYLOAD) {
            if pad != 0 {
                return Err(WireError::BadPad);
            }
            if rest != 0 && info.transport != Transport::Cnp {
                return Err(WireError::UnexpectedPayload);
            }
        }
        let payload_len = rest.checked_sub(pad).ok_or(WireError::BadPad)?;
        let mut p = Packet { bth, flags: info.flags, payload_off: hdr, payload_len, ..Default::default() };
        if info.transport == Transport::Cnp {
            p.payload_len = 0;
        }
        let mut at = BTH_LEN;
        if info.has(flags::DETH) {
            p.deth = Deth { qkey: be32(b, at), src_qpn: be24(b, at + 5) };
            at += DETH_LEN;
        }
        if info.has(flags::FETH) {
            p.feth = Feth::decode(be32(b, at));
            at += FETH_LEN;
        }
        if info.has(flags::RETH) {
            p.reth = Reth { va: be64(b, at), rkey: be32(b, at + 8), dma_len: be32(b, at + 12) };
            at += RETH_LEN;
        }
        if info.has(flags::ATMETH) {
            p.atmeth = AtomicEth {
                va: be64(b, at),
                rkey: be32(b, at + 8),
                swap_add: be64(b, at + 12),
                compare: be64(b, at + 20),
            };
            at += ATMETH_LEN;
        }
        if info.has(flags::AETH) {
            p.aeth = Aeth { syndrome: b[at], msn: be24(b, at + 1) };
            at += AETH_LEN;
        }
        if info.has(flags::ATMACK) {
            p.atomic_orig = be64(b, at);
            at += ATMACK_LEN;
        }
        if info.has(flags::IMMDT) {
            p.imm = be32(b, at);
            at += IMMDT_LEN;
        }
        if info.has(flags::IETH) {
            p.inv_rkey = be32(b, at);
            at += IETH_LEN;
        }
        debug_assert!(at == hdr);
        Ok(p)
    }

    /// Writes BTH and extended headers of `self` into `b`, returning their
    /// length; the caller appends payload, pad and ICRC.
    pub fn encode_headers(&self, b: &mut [u8]) -> Result<usize, WireError> {
        let info = op_info(self.bth.opcode).ok_or(WireError::UnknownOpcode)?;
        let hdr = info.hdr_len();
        if b.len() < hdr {
            return Err(WireError::Truncated);
        }
        let mut bth = [0u8; BTH_LEN];
        self.bth.encode(&mut bth);
        b[..BTH_LEN].copy_from_slice(&bth);
        let mut at = BTH_LEN;
        if info.has(flags::DETH) {
            put32(b, at, self.deth.qkey);
            b[at + 4] = 0;
            put24(b, at + 5, self.deth.src_qpn);
            at += DETH_LEN;
        }
        if info.has(flags::FETH) {
            put32(b, at, self.feth.encode());
            at += FETH_LEN;
        }
        if info.has(flags::RETH) {
            put64(b, at, self.reth.va);
            put32(b, at + 8, self.reth.rkey);
            put32(b, at + 12, self.reth.dma_len);
            at += RETH_LEN;
        }
        if info.has(flags::ATMETH) {
            put64(b, at, self.atmeth.va);
            put32(b, at + 8, self.atmeth.rkey);
            put64(b, at + 12, self.atmeth.swap_add);
            put64(b, at + 20, self.atmeth.compare);
            at += ATMETH_LEN;
        }
        if info.has(flags::AETH) {
            b[at] = self.aeth.syndrome;
            put24(b, at + 1, self.aeth.msn);
            at += AETH_LEN;
        }
        if info.has(flags::ATMACK) {
            put64(b, at, self.atomic_orig);
            at += ATMACK_LEN;
        }
        if info.has(flags::IMMDT) {
            put32(b, at, self.imm);
            at += IMMDT_LEN;
        }
        if info.has(flags::IETH) {
            put32(b, at, self.inv_rkey);
            at += IETH_LEN;
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_lengths_match_rxe() {
        // rdma_rxe's opcode table lengths (BTH included)
        let cases = [
            (op::RC | op::SEND_ONLY, 12),
            (op::RC | op::SEND_ONLY_IMM, 16),
            (op::RC | op::WRITE_ONLY_IMM, 32),
            (op::RC | op::READ_REQUEST, 28),
            (op::RC | op::READ_RESPONSE_FIRST, 16),
            (op::RC | op::READ_RESPONSE_MIDDLE, 12),
            (op::RC | op::ACKNOWLEDGE, 16),
            (op::RC | op::ATOMIC_ACKNOWLEDGE, 24),
            (op::RC | op::COMPARE_SWAP, 40),
            (op::RC | op::SEND_ONLY_INV, 16),
            (op::UD | op::SEND_ONLY, 20),
            (op::UD | op::SEND_ONLY_IMM, 24),
            (op::UC | op::WRITE_FIRST, 28),
            (op::RC | op::FLUSH, 32),
            (op::RC | op::ATOMIC_WRITE, 28),
        ];
        for (opc, len) in cases {
            assert_eq!(op_info(opc).unwrap().hdr_len(), len, "opcode {opc:#x}");
        }
        assert!(op_info(op::UC | op::READ_REQUEST).is_none());
        assert!(op_info(op::UC | op::FLUSH).is_none() && op_info(op::UC | op::ATOMIC_WRITE).is_none());
        assert!(op_info(op::UD | op::SEND_FIRST).is_none());
        assert!(op_info(0x80).is_none());
        assert_eq!(op_info(op::CNP).unwrap().transport, Transport::Cnp);
    }

    #[test]
    fn cnp_bytes() {
        // Annex A17 example BTH: 81 00 ff ff 40 00 00 d2 00 00 00 00
        let bth = Bth { opcode: op::CNP, pkey: 0xffff, becn: true, dest_qpn: 0xd2, ..Default::default() };
        let mut b = [0u8; 12];
        bth.encode(&mut b);
        assert_eq!(b, [0x81, 0, 0xff, 0xff, 0x40, 0, 0, 0xd2, 0, 0, 0, 0]);
        let mut pkt = [0u8; 32];
        pkt[..12].copy_from_slice(&b);
        let p = Packet::parse(&pkt).unwrap();
        assert!(p.bth.becn);
        assert_eq!(p.payload_len, 0);
    }

    #[test]
    fn rejects() {
        let mut b = [0u8; 16];
        b[0] = op::RC | op::SEND_ONLY;
        assert_eq!(Packet::parse(&b[..15]), Err(WireError::Truncated));
        b[1] = 0x01; // TVer 1
        assert_eq!(Packet::parse(&b), Err(WireError::BadVersion));
        b[1] = 0x30; // pad 3 with no payload bytes
        assert_eq!(Packet::parse(&b), Err(WireError::BadPad));
        b[1] = 0;
        b[0] = op::RC | op::ACKNOWLEDGE;
        let mut ack = [0u8; 24];
        ack[0] = b[0];
        assert_eq!(Packet::parse(&ack), Err(WireError::UnexpectedPayload));
        ack[0] = 0x1f;
        assert_eq!(Packet::parse(&ack), Err(WireError::UnknownOpcode));
    }

    fn arb_packet() -> impl Strategy<Value = (Packet, usize)> {
        let ops: std::vec::Vec<u8> = (0u16..=255).map(|o| o as u8).filter(|&o| op_info(o).is_some()).collect();
        (proptest::sample::select(ops), any::<[u64; 8]>(), 0usize..300).prop_map(|(opc, r, len)| {
            let info = op_info(opc).unwrap();
            let len = if info.has(flags::PAYLOAD) { len } else { 0 };
            let pad = ((4 - len % 4) % 4) as u8;
            let p = Packet {
                bth: Bth {
                    opcode: opc,
                    se: r[0] & 1 != 0,
                    mig: r[0] & 2 != 0,
                    pad,
                    pkey: r[0] as u16,
                    fecn: r[0] & 4 != 0,
                    becn: r[0] & 8 != 0,
                    dest_qpn: (r[1] as u32) & 0xff_ffff,
                    ack_req: r[1] & (1 << 40) != 0,
                    psn: (r[1] >> 32) as u32 & 0xff_ffff,
                },
                flags: info.flags,
                feth: if info.has(flags::FETH) { Feth { placement: r[0] as u8 & 0xf, selectivity: (r[0] >> 8) as u8 & 3 } } else { Feth::default() },
                reth: if info.has(flags::RETH) { Reth { va: r[2], rkey: r[3] as u32, dma_len: (r[3] >> 32) as u32 } } else { Reth::default() },
                aeth: if info.has(flags::AETH) { Aeth { syndrome: r[4] as u8, msn: (r[4] >> 8) as u32 & 0xff_ffff } } else { Aeth::default() },
                deth: if info.has(flags::DETH) { Deth { qkey: r[5] as u32, src_qpn: (r[5] >> 32) as u32 & 0xff_ffff } } else { Deth::default() },
                atmeth: if info.has(flags::ATMETH) { AtomicEth { va: r[6], rkey: r[7] as u32, swap_add: r[2], compare: r[3] } } else { AtomicEth::default() },
                atomic_orig: if info.has(flags::ATMACK) { r[6] } else { 0 },
                imm: if info.has(flags::IMMDT) { r[7] as u32 } else { 0 },
                inv_rkey: if info.has(flags::IETH) { (r[7] >> 32) as u32 } else { 0 },
                payload_off: info.hdr_len(),
                payload_len: len,
            };
            (p, len)
        })
    }

    proptest! {
        #[test]
        fn encode_then_parse_is_identity((p, len) in arb_packet()) {
            let mut buf = std::vec![0u8; 128 + len + 8];
            let hdr = p.encode_headers(&mut buf).unwrap();
            let total = hdr + len + p.bth.pad as usize + ICRC_LEN;
            let q = Packet::parse(&buf[..total]).unwrap();
            prop_assert_eq!(q, p);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(p) = Packet::parse(&bytes) {
                prop_assert!(p.payload_off + p.payload_len + ICRC_LEN <= bytes.len());
            }
        }
    }
}
