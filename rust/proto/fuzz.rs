// SPDX-License-Identifier: GPL-2.0
//! Host fuzz targets for the parsers and state machines of the protocol
//! core. Everything they read comes from the wire or from memory user space
//! can write, so each target feeds arbitrary input as well as valid input
//! with hostile mutations, and checks what the crate promises: no panic,
//! every offset and count inside its buffer or ring, and the protocol
//! invariants of each module.
//!
//! The targets are proptest properties on the stable toolchain. They run
//! with the other tests, 256 cases each (`cargo test fuzz::` runs only
//! them). `PROPTEST_CASES` sets the number of cases of every target; a long
//! run:
//!
//! ```text
//! CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
//! CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
//! PROPTEST_CASES=1000000 cargo test --release fuzz::
//! ```
//!
//! The two profile variables keep the arithmetic overflow checks and debug
//! assertions that release builds drop: the kernel module is built with
//! overflow checks (`CONFIG_RUST_OVERFLOW_CHECKS`), so an overflow is a
//! panic there. `PROPTEST_RNG_SEED=<n>` repeats a run. A failure prints the
//! shrunk input; nothing is written to the source tree, so pin a real
//! finding as a unit test of its module.

use super::aeth::{self, NakCode, RetryCounter, Syndrome};
use super::cqe::{Cqe, WcStatus, UVERBS_WC_BYTES};
use super::icrc::{self, IcrcError};
use super::ip::{self, IpAddrs, IPV4_HDR, IPV6_HDR, UDP_HDR};
use super::limits::{MAX_MSG_SIZE, MAX_READ_PSNS};
use super::psn::{Psn, PSN_MASK};
use super::queue::{Geometry, GeometryError, HDR_BYTES, MAX_ELEM_SIZE};
use super::read_res::{self, ReadRes, ReadResError, ReadResources};
use super::resp_seq::{classify, validate_pad, validate_payload, LengthError, OpSeq, Position, PsnClass, SeqOutcome};
use super::segment::{Message, MsgKind, SegmentError, ATOMIC_LEN};
use super::wire::{flags, op_info, Aeth, AtomicEth, Bth, Deth, Packet, Reth, Transport, WireError, BTH_LEN, ICRC_LEN};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::vec::Vec;

/// Case count from `PROPTEST_CASES` (proptest's default reads it), and no
/// regression files written next to the sources.
fn config() -> ProptestConfig {
    ProptestConfig { failure_persistence: None, ..ProptestConfig::default() }
}

const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];
const TRANSPORTS: [Transport; 4] = [Transport::Rc, Transport::Uc, Transport::Ud, Transport::Cnp];
const KINDS: [MsgKind; 8] = [
    MsgKind::Send,
    MsgKind::SendImm,
    MsgKind::SendInv,
    MsgKind::Write,
    MsgKind::WriteImm,
    MsgKind::ReadRequest,
    MsgKind::CompareSwap,
    MsgKind::FetchAdd,
];

fn known_opcodes() -> Vec<u8> {
    (0..=255u8).filter(|&o| op_info(o).is_some()).collect()
}

/// Mostly opcodes rroce speaks, sometimes any byte.
fn opcode() -> impl Strategy<Value = u8> {
    prop_oneof![3 => select(known_opcodes()), 1 => any::<u8>()]
}

fn mtu() -> impl Strategy<Value = u32> {
    prop_oneof![4 => select(&MTUS[..]), 1 => any::<u32>(), 1 => 0u32..=8192]
}

// ---------------------------------------------------------------- wire

/// Headers with every field at any value, out-of-range ones included; the
/// opcode decides which of them go on the wire.
fn any_headers() -> impl Strategy<Value = Packet> {
    let fields = (any::<[bool; 5]>(), any::<u8>(), any::<u16>(), any::<[u32; 10]>(), any::<[u64; 4]>(), any::<u8>());
    (opcode(), fields).prop_map(
        |(opcode, (b, pad, pkey, d, w, syndrome))| Packet {
            bth: Bth {
                opcode,
                se: b[0],
                mig: b[1],
                pad,
                pkey,
                fecn: b[2],
                becn: b[3],
                dest_qpn: d[0],
                ack_req: b[4],
                psn: d[1],
            },
            flags: 0,
            reth: Reth { va: w[0], rkey: d[2], dma_len: d[3] },
            aeth: Aeth { syndrome, msn: d[4] },
            deth: Deth { qkey: d[5], src_qpn: d[6] },
            atmeth: AtomicEth { va: w[1], rkey: d[7], swap_add: w[2], compare: w[3] },
            atomic_orig: w[0] ^ w[3],
            imm: d[8],
            inv_rkey: d[9],
            payload_off: 0,
            payload_len: 0,
        },
    )
}

/// What `Packet::parse` returns for the encoding of `p` (a known opcode)
/// followed by `payload_len` bytes of payload: fields cut to their wire
/// width, headers the opcode lacks left at their defaults.
fn as_parsed(p: &Packet, payload_len: usize) -> Packet {
    let info = op_info(p.bth.opcode).unwrap();
    let has = |f| info.has(f);
    Packet {
        bth: Bth { pad: p.bth.pad & 3, dest_qpn: p.bth.dest_qpn & PSN_MASK, psn: p.bth.psn & PSN_MASK, ..p.bth },
        flags: info.flags,
        reth: if has(flags::RETH) { p.reth } else { Reth::default() },
        aeth: if has(flags::AETH) { Aeth { msn: p.aeth.msn & PSN_MASK, ..p.aeth } } else { Aeth::default() },
        deth: if has(flags::DETH) { Deth { src_qpn: p.deth.src_qpn & PSN_MASK, ..p.deth } } else { Deth::default() },
        atmeth: if has(flags::ATMETH) { p.atmeth } else { AtomicEth::default() },
        atomic_orig: if has(flags::ATMACK) { p.atomic_orig } else { 0 },
        imm: if has(flags::IMMDT) { p.imm } else { 0 },
        inv_rkey: if has(flags::IETH) { p.inv_rkey } else { 0 },
        payload_off: info.hdr_len(),
        payload_len: if info.transport == Transport::Cnp { 0 } else { payload_len },
    }
}

/// Headers of `p`, `payload`, `p.bth.pad` pad bytes and an ICRC slot.
fn encode_packet(p: &Packet, payload: &[u8]) -> Vec<u8> {
    let mut b = std::vec![0u8; 64];
    let n = p.encode_headers(&mut b).unwrap();
    b.truncate(n);
    b.extend_from_slice(payload);
    b.resize(b.len() + (p.bth.pad & 3) as usize + ICRC_LEN, 0);
    b
}

fn payload_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// The acceptance rules of `Packet::parse`, written out from the format.
fn parse_verdict(b: &[u8]) -> Result<(), WireError> {
    if b.len() < BTH_LEN {
        return Err(WireError::Truncated);
    }
    if b[1] & 0x0f != 0 {
        return Err(WireError::BadVersion);
    }
    let info = op_info(b[0]).ok_or(WireError::UnknownOpcode)?;
    if b.len() < info.hdr_len() + ICRC_LEN {
        return Err(WireError::Truncated);
    }
    let rest = b.len() - info.hdr_len() - ICRC_LEN;
    let pad = ((b[1] >> 4) & 3) as usize;
    if !info.has(flags::PAYLOAD) {
        if pad != 0 {
            return Err(WireError::BadPad);
        }
        if rest != 0 && info.transport != Transport::Cnp {
            return Err(WireError::UnexpectedPayload);
        }
    }
    if rest < pad {
        return Err(WireError::BadPad);
    }
    Ok(())
}

/// Checks what `Packet::parse` promises about a packet it accepted from `b`.
fn check_parsed(b: &[u8], p: &Packet) -> Result<(), TestCaseError> {
    let info = op_info(p.bth.opcode).unwrap();
    prop_assert_eq!(p.bth.opcode, b[0]);
    prop_assert_eq!(p.flags, info.flags);
    prop_assert_eq!(p.payload_off, info.hdr_len());
    prop_assert!(p.bth.pad <= 3);
    for v in [p.bth.dest_qpn, p.bth.psn, p.aeth.msn, p.deth.src_qpn] {
        prop_assert!(v <= PSN_MASK);
    }
    let end = p.payload_off + p.payload_len + p.bth.pad as usize + ICRC_LEN;
    if info.transport == Transport::Cnp {
        prop_assert_eq!(p.payload_len, 0);
        prop_assert!(p.payload_off + ICRC_LEN <= b.len());
    } else {
        // Headers, payload, pad and ICRC fill the buffer exactly.
        prop_assert_eq!(end, b.len());
    }
    if !info.has(flags::PAYLOAD) {
        prop_assert_eq!(p.payload_len, 0);
        prop_assert_eq!(p.bth.pad, 0);
    }
    prop_assert!(b.get(p.payload_off..p.payload_off + p.payload_len).is_some());
    // Headers the opcode lacks stay empty, so no consumer reads stale values.
    prop_assert_eq!(*p, as_parsed(p, p.payload_len));
    // Re-encoding gives back the input headers but for their reserved bits.
    let mut hdr = [0u8; 64];
    let n = p.encode_headers(&mut hdr).unwrap();
    prop_assert_eq!(n, p.payload_off);
    let mut want = b[..n].to_vec();
    want[4] &= 0xc0; // FECN, BECN; the rest is reserved
    want[8] &= 0x80; // AckReq; the rest is reserved
    if info.has(flags::DETH) {
        want[BTH_LEN + 4] = 0; // reserved byte before the source QPN
    }
    prop_assert_eq!(&hdr[..n], &want[..]);
    Ok(())
}

/// Parses `b` and checks the result against the rules and the promises.
fn parse_and_check(b: &[u8]) -> Result<Option<Packet>, TestCaseError> {
    let r = Packet::parse(b);
    prop_assert_eq!(r.map(|_| ()), parse_verdict(b));
    if let Ok(p) = r {
        check_parsed(b, &p)?;
    }
    Ok(r.ok())
}

/// Input bytes that often get past the first checks: a known opcode and
/// transport version 0 in front, lengths around the header sizes.
fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    let plausible = (select(known_opcodes()), any::<u8>(), vec(any::<u8>(), 0..80)).prop_map(|(o, b1, mut b)| {
        if let Some(x) = b.get_mut(0) {
            *x = o;
        }
        if let Some(x) = b.get_mut(1) {
            *x = b1 & 0xf0;
        }
        b
    });
    prop_oneof![vec(any::<u8>(), 0..200), plausible]
}

/// A hostile change to a packet in flight.
#[derive(Clone, Debug)]
enum Mutation {
    FlipBits(Index, u8),
    SetByte(Index, u8),
    Truncate(Index),
    Append(Vec<u8>),
    Opcode(u8),
    /// SE, MigReq, pad and transport version.
    FlagsByte(u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 1u8..).prop_map(|(i, m)| Mutation::FlipBits(i, m)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => vec(any::<u8>(), 1..40).prop_map(Mutation::Append),
        2 => opcode().prop_map(Mutation::Opcode),
        2 => any::<u8>().prop_map(Mutation::FlagsByte),
    ]
}

/// Applies `m` to `b`, its bytes from `from` on (where the packet starts).
fn mutate(b: &mut Vec<u8>, from: usize, m: &Mutation) {
    let n = b.len().saturating_sub(from);
    match m {
        Mutation::FlipBits(i, v) if n > 0 => b[from + i.index(n)] ^= *v,
        Mutation::SetByte(i, v) if n > 0 => b[from + i.index(n)] = *v,
        Mutation::Truncate(i) => b.truncate(from + i.index(n + 1)),
        Mutation::Append(tail) => b.extend_from_slice(tail),
        Mutation::Opcode(o) if n > 0 => b[from] = *o,
        Mutation::FlagsByte(v) if n > 1 => b[from + 1] = *v,
        _ => {}
    }
}

/// A valid packet of a known opcode with its pad matching its payload.
fn valid_packet() -> impl Strategy<Value = (Packet, Vec<u8>)> {
    (any_headers(), select(known_opcodes()), prop_oneof![3 => 0usize..=300, 1 => 0usize..=4096], any::<u8>()).prop_map(
        |(mut p, opcode, len, seed)| {
            p.bth.opcode = opcode;
            let info = op_info(opcode).unwrap();
            let payload = if info.has(flags::PAYLOAD) || info.transport == Transport::Cnp {
                payload_bytes(len, seed)
            } else {
                Vec::new()
            };
            p.bth.pad = if info.has(flags::PAYLOAD) { (payload.len().wrapping_neg() & 3) as u8 } else { 0 };
            (p, payload)
        },
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn parse_arbitrary_bytes(b in wire_bytes()) {
        parse_and_check(&b)?;
    }

    #[test]
    fn parse_mutated_valid_packets((p, payload) in valid_packet(), ms in vec(mutation(), 0..4)) {
        let mut b = encode_packet(&p, &payload);
        if ms.is_empty() {
            let q = parse_and_check(&b)?;
            prop_assert_eq!(q, Some(as_parsed(&p, payload.len())));
        }
        for m in &ms {
            mutate(&mut b, 0, m);
        }
        parse_and_check(&b)?;
    }

    #[test]
    fn encode_then_parse_every_opcode(h in any_headers(), len in 0usize..=300, seed in any::<u8>()) {
        for opcode in known_opcodes() {
            let info = op_info(opcode).unwrap();
            let mut p = h;
            p.bth.opcode = opcode;
            let carries = info.has(flags::PAYLOAD) || info.transport == Transport::Cnp;
            let payload = if carries { payload_bytes(len, seed) } else { Vec::new() };
            let payload_len = if info.has(flags::PAYLOAD) { len } else { 0 };
            p.bth.pad = (payload_len.wrapping_neg() & 3) as u8;
            let b = encode_packet(&p, &payload);
            let q = parse_and_check(&b)?;
            prop_assert_eq!(q, Some(as_parsed(&p, payload_len)), "opcode {:#x}", opcode);
            let q = q.unwrap();
            prop_assert_eq!(&b[q.payload_off..q.payload_off + q.payload_len], &payload[..q.payload_len]);
        }
    }

    #[test]
    fn encode_hostile_headers(h in any_headers(), buf_len in 0usize..64) {
        let mut buf = std::vec![0xa5u8; buf_len];
        let r = h.encode_headers(&mut buf);
        let Some(info) = op_info(h.bth.opcode) else {
            prop_assert_eq!(r, Err(WireError::UnknownOpcode));
            return Ok(());
        };
        if buf_len < info.hdr_len() {
            prop_assert_eq!(r, Err(WireError::Truncated));
            return Ok(());
        }
        prop_assert_eq!(r, Ok(info.hdr_len()));
        // Out-of-range fields are cut to their width; pad without payload is refused.
        let b = encode_packet(&h, &[]);
        let pad = h.bth.pad & 3;
        let want = if info.has(flags::PAYLOAD) || pad == 0 { Ok(as_parsed(&h, 0)) } else { Err(WireError::BadPad) };
        prop_assert_eq!(Packet::parse(&b), want);
    }
}

// ---------------------------------------------------------------- ip, icrc

/// One's-complement sum in 64 bits, which no input length can overflow.
fn reference_checksum(h: &[u8]) -> u16 {
    let mut sum: u64 = h.chunks(2).map(|c| u64::from(c[0]) << 8 | u64::from(*c.get(1).unwrap_or(&0))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

/// Bytes with, often, an IPv4 or IPv6 first byte and UDP as protocol.
fn ip_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let first = prop_oneof![Just(0x45u8), Just(0x46), Just(0x40), 0x60u8..=0x6f, any::<u8>()];
    (vec(any::<u8>(), 0..max), prop::option::of(first), any::<bool>()).prop_map(|(mut b, first, udp)| {
        if let (Some(f), Some(x)) = (first, b.get_mut(0)) {
            *x = f;
        }
        if udp {
            for at in [6, 9] {
                if let Some(x) = b.get_mut(at) {
                    *x = 17;
                }
            }
        }
        b
    })
}

/// IPv4 or IPv6 and UDP headers, `body`, and the ICRC of it all.
fn ip_packet(v6: bool, src: [u8; 16], dst: [u8; 16], body: &[u8]) -> Vec<u8> {
    let ip_len = if v6 { IPV6_HDR } else { IPV4_HDR };
    let total = ip_len + UDP_HDR + body.len() + ICRC_LEN;
    let mut b = std::vec![0u8; total];
    let ok = if v6 {
        ip::write_ipv6_udp(&mut b, &src, &dst, 0x68, 64, 0x12345, total as u16, 0xc001)
    } else {
        let (s, d) = ([src[0], src[1], src[2], src[3]], [dst[0], dst[1], dst[2], dst[3]]);
        ip::write_ipv4_udp(&mut b, s, d, 0x02, 64, total as u16, 0xc001)
    };
    assert!(ok);
    b[ip_len + UDP_HDR..total - ICRC_LEN].copy_from_slice(body);
    icrc::fill(&mut b).unwrap();
    b
}

/// Bits of byte `at` that the ICRC replaces by ones (routers rewrite them).
fn icrc_masked(ip_len: usize, at: usize) -> u8 {
    let ip: &[(usize, u8)] = if ip_len == IPV4_HDR {
        &[(1, 0xff), (8, 0xff), (10, 0xff), (11, 0xff)]
    } else {
        &[(0, 0x0f), (1, 0xff), (2, 0xff), (3, 0xff), (7, 0xff)]
    };
    let udp_bth = [(ip_len + 6, 0xff), (ip_len + 7, 0xff), (ip_len + UDP_HDR + 4, 0xff)];
    ip.iter().chain(udp_bth.iter()).filter(|&&(i, _)| i == at).fold(0, |a, &(_, m)| a | m)
}

/// Bits a flip may not touch to test the CRC: masked ones, and the version
/// and header length (a change there is a header error, not a wrong CRC).
fn icrc_untestable(ip_len: usize, at: usize) -> u8 {
    icrc_masked(ip_len, at) | if at == 0 { 0xf0 | if ip_len == IPV4_HDR { 0x0f } else { 0 } } else { 0 }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ip_parse_arbitrary_bytes(b in ip_bytes(64), gid in any::<[u8; 16]>()) {
        let r = IpAddrs::parse(&b);
        let v4 = b.len() >= IPV4_HDR && b[0] == 0x45 && b[9] == 17;
        let v6 = b.len() >= IPV6_HDR && b[0] >> 4 == 6 && b[6] == 17;
        prop_assert_eq!(r.is_some(), v4 || v6);
        let Some((addrs, len)) = r else { return Ok(()) };
        prop_assert!(len <= b.len());
        let _ = addrs.source_is(&gid);
        match addrs {
            IpAddrs::V4 { src, dst } => {
                prop_assert_eq!(len, IPV4_HDR);
                prop_assert_eq!(&src[..], &b[12..16]);
                prop_assert_eq!(&dst[..], &b[16..20]);
                prop_assert!(addrs.source_is(&v4_mapped(src)));
            }
            IpAddrs::V6 { src, dst } => {
                prop_assert_eq!(len, IPV6_HDR);
                prop_assert_eq!(&src[..], &b[8..24]);
                prop_assert_eq!(&dst[..], &b[24..40]);
                // A v4-mapped source never passes for an IPv6 peer.
                prop_assert_eq!(addrs.source_is(&src), ip::ipv4_of_gid(&src).is_none());
            }
        }
    }

    #[test]
    fn ip_headers_written_parse_back(v6 in any::<bool>(), src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(),
                                     tos in any::<u8>(), ttl in any::<u8>(), fl in any::<u32>(),
                                     total in any::<u16>(), sport in any::<u16>(), buf_len in 0usize..80) {
        let mut b = std::vec![0u8; buf_len];
        let (ip_len, written) = if v6 {
            (IPV6_HDR, ip::write_ipv6_udp(&mut b, &src, &dst, tos, ttl, fl, total, sport))
        } else {
            let (s, d) = ([src[0], src[1], src[2], src[3]], [dst[0], dst[1], dst[2], dst[3]]);
            (IPV4_HDR, ip::write_ipv4_udp(&mut b, s, d, tos, ttl, total, sport))
        };
        prop_assert_eq!(written, buf_len >= ip_len + UDP_HDR);
        if !written {
            prop_assert!(b.iter().all(|&x| x == 0));
            return Ok(());
        }
        let (addrs, len) = IpAddrs::parse(&b).unwrap();
        prop_assert_eq!(len, ip_len);
        if v6 {
            prop_assert_eq!(addrs, IpAddrs::V6 { src, dst });
        } else {
            prop_assert_eq!(ip::ipv4_checksum(&b[..IPV4_HDR]), 0);
            prop_assert!(addrs.source_is(&v4_mapped([src[0], src[1], src[2], src[3]])));
        }
        prop_assert_eq!(&b[ip_len + 2..ip_len + 4], &ip::ROCE_V2_PORT.to_be_bytes()[..]);
    }

    /// Every length an IP datagram can have.
    #[test]
    fn ipv4_checksum_matches_reference(b in prop_oneof![
        vec(any::<u8>(), 0..80),
        (0usize..=65_535, any::<u8>()).prop_map(|(n, v)| std::vec![v; n]),
    ]) {
        prop_assert_eq!(ip::ipv4_checksum(&b), reference_checksum(&b));
    }

    #[test]
    fn icrc_arbitrary_bytes(b in ip_bytes(120)) {
        let r = icrc::compute(&b);
        let hdrs = match b.first() {
            Some(0x45) => Some(IPV4_HDR + UDP_HDR + BTH_LEN),
            Some(f) if f >> 4 == 6 => Some(IPV6_HDR + UDP_HDR + BTH_LEN),
            _ => None,
        };
        let want_err = match hdrs {
            _ if b.is_empty() => Some(IcrcError::Truncated),
            None => Some(IcrcError::BadIpHeader),
            Some(h) if b.len() < h + ICRC_LEN => Some(IcrcError::Truncated),
            Some(_) => None,
        };
        prop_assert_eq!(r.err(), want_err);
        let n = b.len();
        match icrc::verify(&b) {
            Ok(ok) => {
                let trailer = u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]);
                prop_assert_eq!(ok, r == Ok(trailer));
            }
            Err(e) => prop_assert_eq!(Some(e), want_err),
        }
        let mut filled = b.clone();
        match icrc::fill(&mut filled) {
            Ok(()) => {
                prop_assert_eq!(icrc::verify(&filled), Ok(true));
                prop_assert_eq!(&filled[..n - ICRC_LEN], &b[..n - ICRC_LEN]);
            }
            Err(e) => {
                prop_assert_eq!(Some(e), want_err);
                prop_assert_eq!(&filled, &b);
            }
        }
    }

    /// CRC-32 catches every single-bit error and every burst of up to 32
    /// bits; the masked fields never count.
    #[test]
    fn icrc_detects_changes_to_covered_bits(v6 in any::<bool>(), src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(),
                                            body in vec(any::<u8>(), BTH_LEN..200), at in any::<Index>(),
                                            bit in 0u32..8, burst in any::<u32>(), noise in vec(any::<u8>(), 64)) {
        let ip_len = if v6 { IPV6_HDR } else { IPV4_HDR };
        let good = ip_packet(v6, src, dst, &body);
        let n = good.len();
        prop_assert_eq!(icrc::verify(&good), Ok(true));

        let i = at.index(n - ICRC_LEN);
        let mut one = good.clone();
        one[i] ^= (1u8 << bit) & !icrc_untestable(ip_len, i);
        prop_assert_eq!(icrc::verify(&one), Ok(one == good));

        // A burst of up to 32 bits from some bit of the BTH or after it.
        let start = ip_len + UDP_HDR + at.index(body.len());
        let pattern = u64::from(burst | 1) << bit;
        let mut b = good.clone();
        for k in 0..5 {
            if let Some(x) = b.get_mut(start + k).filter(|_| start + k < n - ICRC_LEN) {
                *x ^= (pattern >> (8 * k)) as u8 & !icrc_untestable(ip_len, start + k);
            }
        }
        prop_assert_eq!(icrc::verify(&b), Ok(b == good));

        let mut m = good.clone();
        for (at, v) in noise.iter().enumerate().take(ip_len + UDP_HDR + BTH_LEN) {
            let mask = icrc_masked(ip_len, at);
            m[at] = (m[at] & !mask) | (v & mask);
        }
        prop_assert_eq!(icrc::verify(&m), Ok(true));
    }

    /// The receive path in order: IP header, ICRC, transport headers, and
    /// the responder's length checks, on valid packets with hostile changes.
    #[test]
    fn receive_path_mutated_packets(v6 in any::<bool>(), src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(),
                                    (p, payload) in valid_packet(), ms in vec(mutation(), 0..3),
                                    refill in any::<bool>(), mtu in select(&MTUS[..])) {
        let transport = encode_packet(&p, &payload);
        let mut b = ip_packet(v6, src, dst, &transport[..transport.len() - ICRC_LEN]);
        let ip_len = if v6 { IPV6_HDR } else { IPV4_HDR };
        let clean = ms.is_empty();
        for m in &ms {
            mutate(&mut b, ip_len + UDP_HDR, m);
        }
        if refill {
            // A peer that computes the ICRC over its hostile packet.
            let _ = icrc::fill(&mut b);
        }
        let Some((_, len)) = IpAddrs::parse(&b) else { return Ok(()) };
        prop_assert_eq!(len, ip_len);
        let Ok(icrc_ok) = icrc::verify(&b) else { return Ok(()) };
        prop_assert!(!clean || icrc_ok);
        let udp_payload = &b[len + UDP_HDR..];
        let Some(q) = parse_and_check(udp_payload)? else { return Ok(()) };
        if clean {
            prop_assert_eq!(q, as_parsed(&p, payload.len()));
        }
        let _ = Syndrome::decode(q.aeth.syndrome);
        let pos = Position::of(q.bth.opcode).unwrap();
        if validate_payload(pos, q.payload_len, mtu).is_ok() {
            prop_assert!(q.payload_len <= mtu as usize);
        }
        let _ = validate_pad(q.payload_len, q.bth.pad);
    }

    /// Any length: (length, fill byte), so that a failure prints two numbers.
    #[test]
    fn ipv4_checksum_any_length((n, v) in (0usize..=262_144, any::<u8>())) {
        let b = std::vec![v; n];
        prop_assert_eq!(ip::ipv4_checksum(&b), reference_checksum(&b));
    }
}

// ---------------------------------------------------------------- resp_seq

#[derive(Clone, Debug)]
enum SeqStep {
    Packet(u8),
    /// A PSN gap (UC) or a silently dropped message.
    Abort,
}

fn seq_run() -> impl Strategy<Value = (Transport, Vec<SeqStep>)> {
    select(&TRANSPORTS[..]).prop_flat_map(|t| {
        let mut requests: Vec<u8> = known_opcodes()
            .into_iter()
            .filter(|&o| matches!(op_info(o), Some(i) if i.has(flags::REQUEST) && i.transport == t))
            .collect();
        if requests.is_empty() {
            requests = known_opcodes();
        }
        let step = prop_oneof![
            6 => select(requests).prop_map(SeqStep::Packet),
            2 => any::<u8>().prop_map(SeqStep::Packet),
            1 => Just(SeqStep::Abort),
        ];
        (Just(t), vec(step, 0..64))
    })
}

fn position() -> impl Strategy<Value = Position> {
    select(&[Position::First, Position::Middle, Position::Last, Position::Only][..])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn classify_any_psns(e in any::<u32>(), g in prop_oneof![any::<u32>(), Just(0), Just(PSN_MASK), Just(1 << 23)]) {
        let (e, g) = (Psn::new(e), Psn::new(g));
        let want = if g == e {
            PsnClass::Expected
        } else if g.before(e) {
            PsnClass::Duplicate
        } else {
            PsnClass::OutOfSequence
        };
        prop_assert_eq!(classify(e, g), want);
        // The two windows split the PSN space: 2^23 behind, 2^23 - 1 ahead.
        let ahead = g.get().wrapping_sub(e.get()) & PSN_MASK;
        prop_assert_eq!(want == PsnClass::OutOfSequence, ahead != 0 && ahead < 1 << 23);
    }

    /// Accepted packets always form whole messages: no MIDDLE or LAST
    /// without the FIRST of the same operation, no FIRST inside a message.
    #[test]
    fn op_seq_accepts_only_well_formed_messages((t, steps) in seq_run()) {
        let mut seq = OpSeq::new(t);
        // SEND or WRITE flag of the message in progress.
        let mut open: Option<u16> = None;
        for step in steps {
            let opcode = match step {
                SeqStep::Abort => {
                    prop_assert_eq!(seq.abort(), open.is_some());
                    open = None;
                    continue;
                }
                SeqStep::Packet(o) => o,
            };
            let out = seq.check(opcode);
            prop_assert_eq!(seq.transport(), t);
            let Some(info) = op_info(opcode).filter(|i| i.has(flags::REQUEST) && i.transport == t) else {
                prop_assert_eq!(out, SeqOutcome::Ignore, "opcode {:#x}", opcode);
                prop_assert_eq!(seq.in_progress(), open.is_some());
                continue;
            };
            let family = info.flags & (flags::SEND | flags::WRITE);
            let start = info.has(flags::START);
            let fits = if start { open.is_none() } else { open == Some(family) };
            let want = if fits {
                SeqOutcome::Accept
            } else if t == Transport::Rc {
                SeqOutcome::InvalidRequest
            } else if start {
                SeqOutcome::RestartMessage
            } else {
                SeqOutcome::DropUntilNewMessage
            };
            prop_assert_eq!(out, want, "opcode {:#x} after {:?}", opcode, open);
            open = match out {
                SeqOutcome::Accept | SeqOutcome::RestartMessage if !info.has(flags::END) => Some(family),
                _ => None,
            };
            prop_assert_eq!(seq.in_progress(), open.is_some());
            prop_assert!(open != Some(0), "a READ or atomic left a message open");
        }
    }

    #[test]
    fn payload_and_pad_checks_any_input(pos in position(), len in prop_oneof![0usize..=8200, any::<usize>()],
                                        mtu in mtu(), pad in any::<u8>(), opcode in any::<u8>()) {
        let r = validate_payload(pos, len, mtu);
        let m = mtu as usize;
        let ok = match pos {
            Position::First | Position::Middle => len == m,
            Position::Last => (1..=m).contains(&len),
            Position::Only => len <= m,
        };
        prop_assert_eq!(r.is_ok(), ok);
        if let Err(e) = r {
            prop_assert_ne!(e, LengthError::BadPad);
        }
        let pad_ok = pad < 4 && (len as u128 + u128::from(pad)).is_multiple_of(4);
        prop_assert_eq!(validate_pad(len, pad), if pad_ok { Ok(()) } else { Err(LengthError::BadPad) });
        let want = op_info(opcode).map(|i| match (i.has(flags::START), i.has(flags::END)) {
            (true, true) => Position::Only,
            (true, false) => Position::First,
            (false, false) => Position::Middle,
            (false, true) => Position::Last,
        });
        prop_assert_eq!(Position::of(opcode), want);
    }
}

// ---------------------------------------------------------------- segment

fn message_len() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..=20_000,
        Just(ATOMIC_LEN),
        (prop_oneof![0u32..=1 << 23, (1u32 << 22) - 2..=(1 << 22) + 2], -1i64..=1).prop_map(|(k, d)| (i64::from(k) * 256 + d).clamp(0, u32::MAX.into()) as u32),
        MAX_MSG_SIZE - 4096..=MAX_MSG_SIZE + 4096,
        any::<u32>(),
    ]
}

fn allowed(kind: MsgKind, t: Transport) -> bool {
    use MsgKind::*;
    match t {
        Transport::Rc => true,
        Transport::Uc => matches!(kind, Send | SendImm | Write | WriteImm),
        Transport::Ud => matches!(kind, Send | SendImm),
        Transport::Cnp => false,
    }
}

/// Checks packet `k` of `m`, which is `Some` exactly for `k` below the count.
fn check_segment(m: &Message, k: u32) -> Result<(), TestCaseError> {
    let count = m.packet_count();
    let s = m.segment(k);
    prop_assert_eq!(s.is_some(), k < count);
    let Some(s) = s else { return Ok(()) };
    let (len, mtu) = (u64::from(m.len()), u64::from(m.mtu()));
    prop_assert_eq!(s.psn_offset, k);
    prop_assert_eq!((s.first, s.last), (k == 0, k + 1 == count));
    if m.kind().has_payload() {
        let offset = u64::from(k) * mtu;
        prop_assert_eq!(u64::from(s.offset), offset);
        prop_assert_eq!(u64::from(s.len), mtu.min(len - offset));
        prop_assert!(u64::from(s.offset) + u64::from(s.len) <= len);
        if s.last {
            prop_assert_eq!(u64::from(s.offset) + u64::from(s.len), len);
        } else {
            prop_assert_eq!(u64::from(s.len), mtu);
        }
    } else {
        prop_assert_eq!((s.offset, s.len), (0, 0));
    }
    prop_assert!(s.pad < 4 && (s.len + u32::from(s.pad)).is_multiple_of(4));
    Ok(())
}

/// The wire packet of segment `s` with PSN `psn`.
fn segment_packet(s: &super::segment::Segment, psn: Psn, seed: u8) -> Vec<u8> {
    let p = Packet {
        bth: Bth { opcode: s.opcode, pad: s.pad, psn: psn.get(), ..Bth::default() },
        reth: Reth { va: 0x1000, rkey: 7, dma_len: 12345 },
        ..Packet::default()
    };
    encode_packet(&p, &payload_bytes(s.len as usize, seed))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn message_any_input(kind in select(&KINDS[..]), t in select(&TRANSPORTS[..]), len in message_len(), mtu in mtu(),
                         k in any::<u32>(), from in prop_oneof![0u32..10, any::<u32>()]) {
        let r = Message::new(kind, t, len, mtu);
        let atomic = matches!(kind, MsgKind::CompareSwap | MsgKind::FetchAdd);
        let want = if !MTUS.contains(&mtu) {
            Err(SegmentError::BadMtu)
        } else if !allowed(kind, t) {
            Err(SegmentError::Unsupported)
        } else if len > MAX_MSG_SIZE || (t == Transport::Ud && len > mtu) {
            Err(SegmentError::TooLong)
        } else if atomic && len != ATOMIC_LEN {
            Err(SegmentError::BadAtomicLength)
        } else if kind == MsgKind::ReadRequest && u64::from(len).div_ceil(u64::from(mtu)) > u64::from(MAX_READ_PSNS) {
            Err(SegmentError::TooLong)
        } else {
            Ok(())
        };
        prop_assert_eq!(r.map(|_| ()), want);
        let Ok(m) = r else { return Ok(()) };
        prop_assert_eq!((m.kind(), m.transport(), m.len(), m.mtu()), (kind, t, len, mtu));
        let pieces = u64::from(len).div_ceil(u64::from(mtu)).max(1);
        let (packets, psns) = match kind {
            _ if kind.has_payload() => (pieces, pieces),
            MsgKind::ReadRequest => (1, pieces),
            _ => (1, 1),
        };
        prop_assert_eq!(u64::from(m.packet_count()), packets);
        prop_assert_eq!(u64::from(m.psn_count()), psns);
        prop_assert!(psns <= 1 << 23, "more PSNs than half the PSN space");
        let count = m.packet_count();
        for i in [0, count - 1, count, count.saturating_add(1), u32::MAX, k % count, k] {
            check_segment(&m, i)?;
        }
        let mut rest = m.segments_from(from);
        prop_assert_eq!(rest.len() as u32, count.saturating_sub(from));
        if let Some(s) = rest.next() {
            prop_assert_eq!(s.psn_offset, from);
        }
    }

    /// Packets of a message cover it exactly, each with the next PSN, and as
    /// wire packets they pass every responder check.
    #[test]
    fn segments_tile_the_message(kind in select(&KINDS[..]), t in select(&TRANSPORTS[..3]), mtu in select(&MTUS[..]),
                                 raw in 0u32..=20_000, pieces in 0u32..40, delta in -1i64..=1,
                                 use_pieces in any::<bool>(), first_psn in any::<u32>(), seed in any::<u8>()) {
        let len = if use_pieces { (i64::from(pieces * mtu) + delta).max(0) as u32 } else { raw };
        let len = if matches!(kind, MsgKind::CompareSwap | MsgKind::FetchAdd) { ATOMIC_LEN } else { len };
        let Ok(m) = Message::new(kind, t, len, mtu) else { return Ok(()) };
        let first = Psn::new(first_psn);
        let mut seq = OpSeq::new(t);
        let mut covered = 0u32;
        let mut expected = first;
        for (i, s) in m.segments().enumerate() {
            check_segment(&m, i as u32)?;
            prop_assert_eq!(Some(s), m.segment(i as u32));
            prop_assert_eq!(s.offset, covered);
            covered += s.len;
            let psn = first.add(s.psn_offset);
            prop_assert_eq!(classify(expected, psn), PsnClass::Expected);
            expected = psn.next();
            let b = segment_packet(&s, psn, seed);
            let q = parse_and_check(&b)?.unwrap();
            prop_assert_eq!(q.payload_len, s.len as usize);
            prop_assert_eq!((q.has(flags::RETH), q.has(flags::IMMDT), q.has(flags::IETH)), (s.reth, s.imm, s.ieth));
            prop_assert_eq!(seq.check(q.bth.opcode), SeqOutcome::Accept);
            let pos = Position::of(q.bth.opcode).unwrap();
            prop_assert_eq!(validate_payload(pos, q.payload_len, mtu), Ok(()));
            prop_assert_eq!(validate_pad(q.payload_len, q.bth.pad), Ok(()));
        }
        prop_assert!(!seq.in_progress());
        prop_assert_eq!(covered, if kind.has_payload() { len } else { 0 });
        prop_assert_eq!(expected.diff(first) as u32, m.packet_count());
    }

    /// Requester and responder agree on the PSNs a READ takes, and its
    /// responses are cut like the packets of a WRITE of the same length.
    #[test]
    fn read_request_psns_agree(len in message_len(), mtu in select(&MTUS[..]), va in any::<u64>(), k in any::<u32>()) {
        let Ok(m) = Message::new(MsgKind::ReadRequest, Transport::Rc, len, mtu) else { return Ok(()) };
        let Some(r) = ReadRes::new(Psn::new(0), va, 1, len, mtu) else {
            prop_assert!(va.checked_add(u64::from(len)).is_none(), "the responder refused a READ the requester sends");
            return Ok(());
        };
        prop_assert_eq!(r.n_psn, m.psn_count());
        let w = Message::new(MsgKind::Write, Transport::Rc, len, mtu).unwrap();
        for k in [0, r.n_psn - 1, k % r.n_psn] {
            let (resp, seg) = (r.response(k, mtu).unwrap(), w.segment(k).unwrap());
            prop_assert_eq!((resp.len, resp.va - va), (seg.len, u64::from(seg.offset)));
            prop_assert_eq!((resp.first, resp.last), (seg.first, seg.last));
        }
    }
}

// ---------------------------------------------------------------- read_res

#[derive(Clone, Debug)]
enum ReadOp {
    Reset(u32),
    Admit { psn: u32, va: u64, rkey: u32, len: u32 },
    /// A duplicate of a held READ from its response `k` on, `tweak` names a
    /// field to alter (0: none).
    ReplayHeld { which: Index, k: u32, tweak: u8, by: u64 },
    ReplayAny { psn: u32, va: u64, rkey: u32, len: u32, mtu: u32 },
    /// The send work sends up to this many responses.
    Respond(u8),
}

fn read_op() -> impl Strategy<Value = ReadOp> {
    let psn = prop_oneof![0u32..64, any::<u32>()];
    let va = prop_oneof![Just(0x1000u64), any::<u64>(), u64::MAX - 20_000..=u64::MAX];
    let rkey = prop_oneof![0u32..3, any::<u32>()];
    let len = prop_oneof![0u32..=20_000, any::<u32>()];
    prop_oneof![
        1 => prop_oneof![0u32..=read_res::MAX as u32 + 2, any::<u32>()].prop_map(ReadOp::Reset),
        6 => (psn.clone(), va.clone(), rkey.clone(), len.clone())
            .prop_map(|(psn, va, rkey, len)| ReadOp::Admit { psn, va, rkey, len }),
        4 => (any::<Index>(), prop_oneof![0u32..8, any::<u32>()], 0u8..8, any::<u64>())
            .prop_map(|(which, k, tweak, by)| ReadOp::ReplayHeld { which, k, tweak, by }),
        2 => (psn, va, rkey, len, mtu())
            .prop_map(|(psn, va, rkey, len, mtu)| ReadOp::ReplayAny { psn, va, rkey, len, mtu }),
        4 => any::<u8>().prop_map(ReadOp::Respond),
    ]
}

/// The resources as a list in PSN order, next to the real ones.
struct ReadModel {
    held: Vec<ReadRes>,
    limit: usize,
}

impl ReadModel {
    fn admit(&mut self, r: ReadRes) -> Result<(), ReadResError> {
        if self.held.len() == self.limit {
            match self.held.first() {
                Some(oldest) if oldest.done() => {
                    self.held.remove(0);
                }
                _ => return Err(ReadResError::Busy),
            }
        }
        self.held.push(r);
        Ok(())
    }

    /// The first held READ whose PSNs include `psn` decides; the duplicate
    /// must ask for exactly the rest of it from that response on.
    fn replay(&mut self, psn: Psn, va: u64, rkey: u32, len: u32, mtu: u32) -> Result<(), ReadResError> {
        let r = self.held.iter_mut().find(|r| psn.in_window(r.first_psn, r.n_psn)).ok_or(ReadResError::NotFound)?;
        let k = psn.diff(r.first_psn) as u32;
        let off = u64::from(k) * u64::from(mtu);
        let exact = off <= u64::from(r.len)
            && rkey == r.rkey
            && u128::from(va) == u128::from(r.va) + u128::from(off)
            && u64::from(len) == u64::from(r.len) - off;
        if !exact {
            return Err(ReadResError::Mismatch);
        }
        r.next = r.next.min(k);
        Ok(())
    }

    fn pending(&self) -> Option<ReadRes> {
        self.held.iter().find(|r| !r.done()).copied()
    }
}

/// Response `k` of `r`, if any, lies inside the region the READ named;
/// returns whether there is one.
fn check_response(r: &ReadRes, k: u32, mtu: u32) -> Result<bool, TestCaseError> {
    let Some(s) = r.response(k, mtu) else { return Ok(false) };
    prop_assert!(k < r.n_psn);
    prop_assert!(s.len <= mtu);
    prop_assert!(s.va >= r.va);
    prop_assert!(u128::from(s.va) + u128::from(s.len) <= u128::from(r.va) + u128::from(r.len));
    prop_assert_eq!(s.psn, r.first_psn.add(k));
    prop_assert_eq!((s.first, s.last), (k == 0, k + 1 == r.n_psn));
    Ok(true)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn read_resources_any_sequence(slots in select(std::vec![0usize, 1, 2, 7, read_res::MAX, read_res::MAX + 5]),
                                   mtu in select(&MTUS[..]), ops in vec(read_op(), 0..64)) {
        let mut rr = ReadResources::new(std::vec![None; slots]);
        let mut model = ReadModel { held: Vec::new(), limit: 0 };
        for op in ops {
            match op {
                ReadOp::Reset(n) => {
                    rr.reset(n);
                    model = ReadModel { held: Vec::new(), limit: (n as usize).min(slots).min(read_res::MAX) };
                }
                ReadOp::Admit { psn, va, rkey, len } => {
                    let res = ReadRes::new(Psn::new(psn), va, rkey, len, mtu);
                    let fits = len.div_ceil(mtu) <= MAX_READ_PSNS && va.checked_add(u64::from(len)).is_some();
                    prop_assert_eq!(res.is_some(), fits);
                    let Some(res) = res else { continue };
                    prop_assert_eq!((res.next, res.n_psn), (0, len.div_ceil(mtu).max(1)));
                    prop_assert_eq!(rr.admit(res), model.admit(res));
                }
                ReadOp::ReplayHeld { which, k, tweak, by } => {
                    let Some(r) = model.held.get(which.index(model.held.len().max(1))).copied() else { continue };
                    let k = k % (r.n_psn + 1);
                    let off = u64::from(k) * u64::from(mtu);
                    let (mut psn, mut va, mut rkey) = (r.first_psn.add(k), r.va.wrapping_add(off), r.rkey);
                    let mut len = u64::from(r.len).saturating_sub(off) as u32;
                    match tweak {
                        1 => psn = psn.add(by as u32),
                        2 => va = va.wrapping_add(by),
                        3 => rkey ^= by as u32,
                        4 => len = len.wrapping_add(by as u32),
                        _ => {}
                    }
                    prop_assert_eq!(rr.replay(psn, va, rkey, len, mtu), model.replay(psn, va, rkey, len, mtu));
                }
                ReadOp::ReplayAny { psn, va, rkey, len, mtu: any_mtu } => {
                    let psn = Psn::new(psn);
                    let got = rr.replay(psn, va, rkey, len, any_mtu);
                    prop_assert_eq!(got, model.replay(psn, va, rkey, len, any_mtu));
                    if got.is_ok() {
                        // Only the rest of a held READ, under its key.
                        let held = model.held.iter().any(|r| {
                            psn.in_window(r.first_psn, r.n_psn) && r.rkey == rkey && va >= r.va
                                && u128::from(va) + u128::from(len) == u128::from(r.va) + u128::from(r.len)
                        });
                        prop_assert!(held);
                    }
                }
                ReadOp::Respond(n) => {
                    for _ in 0..n {
                        let Some(p) = rr.pending() else { break };
                        prop_assert_eq!(Some(*p), model.pending());
                        prop_assert!(check_response(p, p.next, mtu)?, "no response {} of a pending READ", p.next);
                        p.next += 1;
                        let i = model.held.iter().position(|r| !r.done()).unwrap();
                        model.held[i].next += 1;
                    }
                }
            }
            let busy = model.held.iter().filter(|r| !r.done()).count();
            prop_assert!(model.held.len() <= model.limit);
            prop_assert!(busy <= model.limit, "{} READs answered at once, limit {}", busy, model.limit);
            prop_assert_eq!(rr.busy(), busy > 0);
            prop_assert_eq!(rr.pending().copied(), model.pending());
            if let Some(p) = model.pending() {
                prop_assert!(check_response(&p, p.next, mtu)?, "no response {} of a pending READ", p.next);
            }
        }
    }

    #[test]
    fn read_response_any_index(psn in any::<u32>(), va in any::<u64>(), len in any::<u32>(),
                               mtu in mtu(), k in prop_oneof![0u32..8, any::<u32>()], other_mtu in mtu()) {
        let Some(r) = ReadRes::new(Psn::new(psn), va, 1, len, mtu) else { return Ok(()) };
        prop_assert!(mtu.is_power_of_two());
        // Every response up to the last exists; none after it.
        prop_assert!(check_response(&r, k % r.n_psn, mtu)?);
        prop_assert!(check_response(&r, r.n_psn - 1, mtu)?);
        prop_assert_eq!(check_response(&r, k, mtu)?, k < r.n_psn);
        // Cut with another MTU (a changed path MTU) they stay inside too.
        check_response(&r, k, other_mtu)?;
        prop_assert_eq!(r.end_psn().diff(r.first_psn) as u32, r.n_psn);
    }
}

// ---------------------------------------------------------------- aeth

#[derive(Clone, Debug)]
enum RetryStep {
    Consume,
    Reset,
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn syndrome_any_byte(b in any::<u8>(), kind in 0u8..3, v in any::<u8>()) {
        match Syndrome::decode(b) {
            Some(s) => prop_assert_eq!(s.encode(), b),
            None => prop_assert!(b & 0x80 != 0 || b & 0x60 == 0x40 || (b & 0x60 == 0x60 && b & 0x1f > 4)),
        }
        let s = match kind {
            0 => Syndrome::Ack { credits: v },
            1 => Syndrome::RnrNak { timer: v },
            _ => Syndrome::Nak(NakCode::from_u8(v % 5).unwrap()),
        };
        let back = Syndrome::decode(s.encode()).unwrap();
        let want = match s {
            Syndrome::Ack { credits } => Syndrome::Ack { credits: credits & 0x1f },
            Syndrome::RnrNak { timer } => Syndrome::RnrNak { timer: timer & 0x1f },
            nak => nak,
        };
        prop_assert_eq!(back, want);
        prop_assert_eq!(NakCode::from_u8(v).is_some(), v < 5);
    }

    #[test]
    fn aeth_tables_any_input(code in any::<u8>(), wqes in prop_oneof![0u32..40_000, any::<u32>()]) {
        prop_assert_eq!(aeth::credit_count(code).is_some(), code < aeth::CREDITS_INVALID);
        let c = aeth::credit_code(wqes);
        prop_assert!(c < aeth::CREDITS_INVALID);
        prop_assert!(u32::from(aeth::credit_count(c).unwrap()) <= wqes);
        prop_assert_eq!(aeth::rnr_timer_us(code), aeth::rnr_timer_us(code & 0x1f));
        prop_assert!(aeth::rnr_timer_us(code) >= 10);
        match aeth::ack_timeout_ns(code) {
            Some(ns) => prop_assert_eq!(ns, 4096u64 << code),
            None => prop_assert!(code == 0 || code > 31),
        }
    }

    #[test]
    fn retry_counter_any_sequence(count in any::<u8>(), rnr in any::<bool>(),
                                  steps in vec(prop_oneof![3 => Just(RetryStep::Consume), 1 => Just(RetryStep::Reset)],
                                               0..40)) {
        let mut c = if rnr { RetryCounter::rnr(count) } else { RetryCounter::transport(count) };
        let initial = count & RetryCounter::MAX;
        let infinite = rnr && initial == RetryCounter::MAX;
        let mut left = initial;
        for step in steps {
            match step {
                RetryStep::Consume => {
                    let want = infinite || left > 0;
                    if !infinite && left > 0 {
                        left -= 1;
                    }
                    prop_assert_eq!(c.consume(), want);
                }
                RetryStep::Reset => {
                    c.reset();
                    left = initial;
                }
            }
            prop_assert_eq!(c.remaining(), if infinite { None } else { Some(left) });
        }
    }
}

// ---------------------------------------------------------------- queue, cqe

fn ring_param() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..=70_000,
        any::<u32>(),
        (0u32..32).prop_map(|s| 1 << s),
        (1u32..=32).prop_map(|s| ((1u64 << s) - 1) as u32),
        MAX_ELEM_SIZE - 1..=MAX_ELEM_SIZE + 1,
    ]
}

/// Who sets an index: the kernel, or user space with any value.
#[derive(Clone, Debug)]
enum RingStep {
    UserProducer(u32),
    UserConsumer(u32),
    /// The kernel takes what user space produced, at most this many.
    KernelConsumes(u8),
    /// The kernel adds entries (completions) while there is room.
    KernelProduces(u8),
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn geometry_any_parameters(capacity in ring_param(), elem in ring_param(),
                               min_slot in ring_param(), max_cap in ring_param(),
                               p in any::<u32>(), c in any::<u32>()) {
        let r = Geometry::new(capacity, elem, min_slot, max_cap);
        let want = if capacity == 0 || capacity > max_cap || capacity >= 1 << 30 {
            Err(GeometryError::BadCapacity)
        } else if elem.max(min_slot) > MAX_ELEM_SIZE {
            Err(GeometryError::BadElemSize)
        } else {
            Ok(())
        };
        prop_assert_eq!(r.map(|_| ()), want);
        let Ok(g) = r else { return Ok(()) };
        prop_assert!(g.num_slots().is_power_of_two());
        prop_assert!(g.capacity() >= capacity && g.capacity() <= 2 * capacity);
        let slot = g.elem_size();
        prop_assert!(slot.is_power_of_two() && slot >= elem.max(min_slot) as usize && slot <= MAX_ELEM_SIZE as usize);
        prop_assert_eq!(g.buf_bytes() as u128, HDR_BYTES as u128 + u128::from(g.num_slots()) * slot as u128);
        let count = g.count(p, c);
        prop_assert!(count <= g.capacity());
        let off = g.slot_offset(p);
        prop_assert!(off >= HDR_BYTES && off + slot <= g.buf_bytes() && (off - HDR_BYTES).is_multiple_of(slot));
        prop_assert!(g.next(p) <= g.index_mask);
        prop_assert_eq!(g.is_full(p, c), count == g.capacity());
        if count < g.capacity() {
            prop_assert_eq!(g.count(g.next(p), c), count + 1);
        }
    }

    /// A ring whose user side writes any index: the kernel's reads and
    /// writes stay in the buffer and never exceed the capacity.
    #[test]
    fn ring_with_hostile_indices(capacity in 1u32..=64, elem in 1u32..=256, steps in vec(prop_oneof![
        any::<u32>().prop_map(RingStep::UserProducer),
        any::<u32>().prop_map(RingStep::UserConsumer),
        any::<u8>().prop_map(RingStep::KernelConsumes),
        any::<u8>().prop_map(RingStep::KernelProduces),
    ], 0..32)) {
        let g = Geometry::new(capacity, elem, 64, 1 << 15).unwrap();
        let mut buf = std::vec![0u8; g.buf_bytes()];
        let (mut user_prod, mut user_cons) = (0u32, 0u32);
        let (mut kernel_cons, mut kernel_prod) = (0u32, 0u32);
        for step in steps {
            match step {
                RingStep::UserProducer(v) => user_prod = v,
                RingStep::UserConsumer(v) => user_cons = v,
                RingStep::KernelConsumes(n) => {
                    let avail = g.count(user_prod, kernel_cons);
                    prop_assert!(avail <= g.capacity());
                    for _ in 0..u32::from(n).min(avail) {
                        let at = g.slot_offset(kernel_cons);
                        prop_assert!(buf.get(at..at + g.elem_size()).is_some());
                        kernel_cons = g.next(kernel_cons);
                    }
                }
                RingStep::KernelProduces(n) => {
                    for _ in 0..n {
                        if g.is_full(kernel_prod, user_cons) {
                            break;
                        }
                        let at = g.slot_offset(kernel_prod);
                        let slot = buf.get_mut(at..at + g.elem_size());
                        prop_assert!(slot.is_some());
                        slot.unwrap().fill(0xee);
                        kernel_prod = g.next(kernel_prod);
                    }
                    prop_assert!(g.count(kernel_prod, user_cons) <= g.capacity());
                }
            }
            prop_assert!(kernel_cons <= g.index_mask && kernel_prod <= g.index_mask);
        }
        prop_assert!(buf[..HDR_BYTES].iter().all(|&x| x == 0), "the kernel wrote into the ring header");
    }

    #[test]
    fn cqe_image_any_bytes(b in vec(any::<u8>(), UVERBS_WC_BYTES)) {
        let b: [u8; UVERBS_WC_BYTES] = b.try_into().unwrap();
        let c = Cqe::from_uverbs_wc(&b);
        prop_assert_eq!(c.network_hdr_type, 0);
        let mut want = b;
        for reserved in [42, 43, 45, 47] {
            want[reserved] = 0;
        }
        // A status no completion has reads as a general error.
        let status = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
        if WcStatus::from_u32(status).is_none() {
            want[8..12].copy_from_slice(&(WcStatus::GeneralErr as u32).to_ne_bytes());
        }
        prop_assert_eq!(c.to_uverbs_wc(), want);
    }
}
