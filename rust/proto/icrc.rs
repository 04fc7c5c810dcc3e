// SPDX-License-Identifier: GPL-2.0
//! The RoCEv2 invariant CRC (IBTA Annex A17.3.3): CRC-32 (IEEE 802.3,
//! reflected) over eight 0xff bytes standing for the masked LRH, the IP and
//! UDP headers with their variant fields set to ones, the BTH with its
//! reserved byte set to ones, then the rest of the packet up to the ICRC.
//! The complement of the CRC is stored little-endian after the payload.
//! Masking the fields routers rewrite (TOS/traffic class, TTL/hop limit,
//! flow label, checksums) keeps the ICRC valid across ECN marking.

use super::wire::{BTH_LEN, ICRC_LEN};

/// Why no ICRC could be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcrcError {
    /// Not an IPv4 header without options or an IPv6 header.
    BadIpHeader,
    /// Shorter than IP + UDP + BTH + ICRC.
    Truncated,
}

const IPV4_HDR: usize = 20;
const IPV6_HDR: usize = 40;
const UDP_HDR: usize = 8;

const fn make_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
}

/// Slice-by-8 tables: `TABLES[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    t[0] = make_table();
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            k += 1;
        }
        i += 1;
    }
    t
}

static TABLES: [[u32; 256]; 8] = make_tables();

/// A CRC-32 (IEEE 802.3, reflected) register update without pre- or
/// post-inversion: the kernel's `crc32_le`. The module plugs in the
/// kernel's, which uses the CPU's carry-less multiply where it has one;
/// [`TableCrc32`] is the portable one, the reference the other is checked
/// against.
pub trait Crc32 {
    fn update(crc: u32, data: &[u8]) -> u32;
}

/// [`crc32_update`], slice-by-8 tables.
pub struct TableCrc32;

impl Crc32 for TableCrc32 {
    fn update(crc: u32, data: &[u8]) -> u32 {
        crc32_update(crc, data)
    }
}

/// Whether `C` computes the same CRC as [`TableCrc32`] on a set of inputs
/// covering every length up to 64 bytes, every alignment, and a long
/// buffer.
pub fn agrees_with_table<C: Crc32>() -> bool {
    let mut buf = [0u8; 4096 + 8];
    let mut x: u32 = 0x1234_5678;
    for b in buf.iter_mut() {
        // xorshift: a fixed, irregular pattern.
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    let short = (0..8).flat_map(|off| (0..=64).map(move |len| (off, len)));
    let long = [(0, 4096), (3, 4096), (5, 1500)];
    short.chain(long).all(|(off, len)| {
        let d = &buf[off..off + len];
        C::update(SEED, d) == crc32_update(SEED, d) && C::update(!0, d) == crc32_update(!0, d)
    })
}

/// CRC-32 register update without pre- or post-inversion (`crc32_le`),
/// eight bytes per step.
pub fn crc32_update(mut crc: u32, data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) ^ crc;
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// CRC register after 0xffffffff and the eight 0xff bytes of the masked LRH.
pub const SEED: u32 = 0xdebb_20e3;

/// Computes the ICRC of a RoCEv2 packet given from its IP header to its end
/// (the trailing four ICRC bytes are excluded from the sum). Returns the
/// value as it is compared and stored: `u32::from_le_bytes` of the trailer.
#[cfg(test)]
pub fn compute(ip_packet: &[u8]) -> Result<u32, IcrcError> {
    compute_with::<TableCrc32>(ip_packet)
}

/// [`compute`] with the CRC implementation `C`.
pub fn compute_with<C: Crc32>(ip_packet: &[u8]) -> Result<u32, IcrcError> {
    let (crc, _) = register::<C>(ip_packet)?;
    Ok(!crc)
}

/// The CRC register after the whole packet (before the final inversion), and
/// where its BTH starts.
fn register<C: Crc32>(ip_packet: &[u8]) -> Result<(u32, usize), IcrcError> {
    let first = *ip_packet.first().ok_or(IcrcError::Truncated)?;
    let ip_len = match first >> 4 {
        4 if first & 0x0f == 5 => IPV4_HDR,
        6 => IPV6_HDR,
        _ => return Err(IcrcError::BadIpHeader),
    };
    let hdrs = ip_len + UDP_HDR + BTH_LEN;
    if ip_packet.len() < hdrs + ICRC_LEN {
        return Err(IcrcError::Truncated);
    }
    let mut masked = [0u8; IPV6_HDR + UDP_HDR + BTH_LEN];
    let m = &mut masked[..hdrs];
    m.copy_from_slice(&ip_packet[..hdrs]);
    if ip_len == IPV4_HDR {
        m[1] = 0xff; // TOS (DSCP + ECN)
        m[8] = 0xff; // TTL
        m[10] = 0xff; // header checksum
        m[11] = 0xff;
    } else {
        m[0] |= 0x0f; // traffic class, high nibble
        m[1] = 0xff; // traffic class low nibble + flow label
        m[2] = 0xff;
        m[3] = 0xff;
        m[7] = 0xff; // hop limit
    }
    m[ip_len + 6] = 0xff; // UDP checksum
    m[ip_len + 7] = 0xff;
    m[ip_len + UDP_HDR + 4] = 0xff; // BTH resv8a (FECN/BECN byte)
    let crc = C::update(SEED, m);
    let end = ip_packet.len() - ICRC_LEN;
    Ok((C::update(crc, &ip_packet[hdrs..end]), ip_len + UDP_HDR))
}

fn trailer(ip_packet: &[u8]) -> u32 {
    let n = ip_packet.len();
    u32::from_le_bytes([ip_packet[n - 4], ip_packet[n - 3], ip_packet[n - 2], ip_packet[n - 1]])
}

/// Whether the trailer of `ip_packet` holds its correct ICRC.
#[cfg(test)]
pub fn verify(ip_packet: &[u8]) -> Result<bool, IcrcError> {
    verify_with::<TableCrc32>(ip_packet)
}

/// [`verify`] with the CRC implementation `C`.
pub fn verify_with<C: Crc32>(ip_packet: &[u8]) -> Result<bool, IcrcError> {
    let want = compute_with::<C>(ip_packet)?;
    Ok(want == trailer(ip_packet))
}

/// Whether `ip_packet` is an RC FLUSH whose trailer holds the ICRC rdma_rxe
/// computes for FLUSH: its opcode table gives FLUSH no payload offset, so
/// after the headers its sum covers the BTH, FETH and RETH a second time,
/// unmasked. rdma_rxe checks FLUSH the same way, so it drops FLUSHes with
/// the specified ICRC.
#[cfg(test)]
pub fn verify_rdma_rxe_flush(ip_packet: &[u8]) -> Result<bool, IcrcError> {
    verify_rdma_rxe_flush_with::<TableCrc32>(ip_packet)
}

/// [`verify_rdma_rxe_flush`] with the CRC implementation `C`.
pub fn verify_rdma_rxe_flush_with<C: Crc32>(ip_packet: &[u8]) -> Result<bool, IcrcError> {
    let (crc, bth) = register::<C>(ip_packet)?;
    if ip_packet.get(bth) != Some(&(super::wire::op::RC | super::wire::op::FLUSH)) {
        return Ok(false);
    }
    let end = ip_packet.len() - ICRC_LEN;
    Ok(!C::update(crc, &ip_packet[bth..end]) == trailer(ip_packet))
}

/// Computes the ICRC of `ip_packet` and writes it into its last four bytes.
#[cfg(test)]
pub fn fill(ip_packet: &mut [u8]) -> Result<(), IcrcError> {
    fill_with::<TableCrc32>(ip_packet)
}

/// [`fill`] with the CRC implementation `C`.
pub fn fill_with<C: Crc32>(ip_packet: &mut [u8]) -> Result<(), IcrcError> {
    let v = compute_with::<C>(ip_packet)?;
    let n = ip_packet.len();
    ip_packet[n - ICRC_LEN..].copy_from_slice(&v.to_le_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::wire;
    use super::*;

    /// Bit by bit, straight from the polynomial.
    struct BitwiseCrc32;
    impl Crc32 for BitwiseCrc32 {
        fn update(mut crc: u32, data: &[u8]) -> u32 {
            for &b in data {
                crc ^= u32::from(b);
                for _ in 0..8 {
                    crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
                }
            }
            crc
        }
    }

    /// Right except on inputs of 33 bytes or more.
    struct WrongOnLong;
    impl Crc32 for WrongOnLong {
        fn update(crc: u32, data: &[u8]) -> u32 {
            crc32_update(crc, data) ^ u32::from(data.len() > 32)
        }
    }

    #[test]
    fn the_self_check_accepts_a_correct_crc_and_refuses_a_wrong_one() {
        assert!(agrees_with_table::<BitwiseCrc32>());
        assert!(agrees_with_table::<TableCrc32>());
        assert!(!agrees_with_table::<WrongOnLong>());
    }
    use proptest::prelude::*;

    /// Plain CRC-32 as zlib computes it (pre- and post-inverted), bit by bit:
    /// an implementation independent of the table above.
    fn zlib_crc32(data: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0xedb8_8320 } else { c >> 1 };
            }
        }
        !c
    }

    #[test]
    fn seed_is_masked_lrh() {
        assert_eq!(crc32_update(0xffff_ffff, &[0xff; 8]), SEED);
        assert_eq!(zlib_crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(!crc32_update(!0, b"123456789"), 0xcbf4_3926);
    }

    fn v4_packet(tos: u8, ttl: u8, payload: &[u8]) -> std::vec::Vec<u8> {
        let mut p = std::vec![0x45, tos, 0, 0, 0, 0, 0x40, 0, ttl, 17, 0xab, 0xcd, 198, 18, 0, 1, 198, 18, 0, 2];
        p.extend_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0, 0, 0x12, 0x34]); // UDP 49152 -> 4791
        p.extend_from_slice(&[0x04, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1]); // RC SEND ONLY
        p.extend_from_slice(payload);
        p.extend_from_slice(&[0; 4]);
        p
    }

    #[test]
    fn matches_zlib_over_the_masked_packet() {
        let p = v4_packet(0x02, 64, b"hello world!");
        let mut masked = std::vec![0xffu8; 8];
        let mut hdr = p[..p.len() - 4].to_vec();
        hdr[1] = 0xff;
        hdr[8] = 0xff;
        hdr[10] = 0xff;
        hdr[11] = 0xff;
        hdr[26] = 0xff;
        hdr[27] = 0xff;
        hdr[32] = 0xff;
        masked.extend_from_slice(&hdr);
        assert_eq!(compute(&p).unwrap(), zlib_crc32(&masked));
    }

    #[test]
    fn rdma_rxe_flush_icrc() {
        // A FLUSH (FETH placement 1, RETH) with the specified ICRC, then with
        // rdma_rxe's, which sums the 32 header bytes after the headers again.
        let mut p = v4_packet(0, 64, &[]);
        p.truncate(28);
        let bth = [0x1c, 0, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 1];
        let feth_reth = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0x40];
        p.extend_from_slice(&bth);
        p.extend_from_slice(&feth_reth);
        p.extend_from_slice(&[0; 4]);
        fill(&mut p).unwrap();
        assert!(verify(&p).unwrap() && !verify_rdma_rxe_flush(&p).unwrap());
        let mut masked = std::vec![0xffu8; 8];
        let mut hdr = p[..p.len() - 4].to_vec();
        for at in [1, 8, 10, 11, 26, 27, 32] {
            hdr[at] = 0xff;
        }
        masked.extend_from_slice(&hdr);
        masked.extend_from_slice(&bth);
        masked.extend_from_slice(&feth_reth);
        let n = p.len();
        p[n - 4..].copy_from_slice(&zlib_crc32(&masked).to_le_bytes());
        assert!(!verify(&p).unwrap() && verify_rdma_rxe_flush(&p).unwrap());
        // Only FLUSH gets the allowance.
        p[28] = 0x0c;
        assert!(!verify_rdma_rxe_flush(&p).unwrap());
    }

    #[test]
    fn fill_then_verify() {
        let mut p = v4_packet(0, 64, &[1, 2, 3, 4]);
        fill(&mut p).unwrap();
        assert!(verify(&p).unwrap());
        let n = p.len();
        p[n - 5] ^= 1; // payload bit flip
        assert!(!verify(&p).unwrap());
    }

    #[test]
    fn rejects_bad_headers() {
        assert_eq!(compute(&[]), Err(IcrcError::Truncated));
        assert_eq!(compute(&[0x46; 80]), Err(IcrcError::BadIpHeader)); // IPv4 with options
        assert_eq!(compute(&[0x45; 40]), Err(IcrcError::Truncated));
    }

    fn unhex(s: &str) -> std::vec::Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// Packets the kernel's rdma_rxe sent (captured by
    /// scripts/guest/capture-rxe-vectors.sh): an independent implementation of
    /// the ICRC and the headers. UDP payload = IP packet minus 28 bytes.
    #[test]
    fn rdma_rxe_packets() {
        let lines: std::vec::Vec<&str> = include_str!("testdata/rxe-packets.hex").lines().collect();
        assert!(lines.len() >= 10);
        let mut opcodes = std::collections::BTreeSet::new();
        for line in lines {
            let mut pkt = unhex(line);
            assert!(verify(&pkt).unwrap(), "ICRC of {}", &line[..80]);
            let p = wire::Packet::parse(&pkt[28..]).unwrap();
            assert_eq!(p.payload_off + p.payload_len + p.bth.pad as usize + 4, pkt.len() - 28);
            assert_eq!(p.bth.pkey, 0xffff);
            opcodes.insert(p.bth.opcode);
            // re-encoding the parsed headers gives the same bytes
            let mut hdr = [0u8; 64];
            let n = p.encode_headers(&mut hdr).unwrap();
            assert_eq!(&hdr[..n], &pkt[28..28 + n]);
            let last = pkt.len() - 1;
            pkt[last] ^= 0x80;
            assert!(!verify(&pkt).unwrap());
        }
        // SEND FIRST/MIDDLE/LAST and ACK at least
        for op in [0x00u8, 0x01, 0x02, 0x11] {
            assert!(opcodes.contains(&op), "no opcode {op:#x} in the capture");
        }
    }

    proptest! {
        #[test]
        fn slice_by_8_equals_bytewise(data in proptest::collection::vec(any::<u8>(), 0..300), seed in any::<u32>(), split in 0usize..300) {
            let bytewise = |mut crc: u32, d: &[u8]| {
                for &b in d {
                    crc = TABLES[0][((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
                }
                crc
            };
            let split = split.min(data.len());
            prop_assert_eq!(crc32_update(seed, &data), bytewise(seed, &data));
            prop_assert_eq!(crc32_update(crc32_update(seed, &data[..split]), &data[split..]), bytewise(seed, &data));
        }

        #[test]
        fn invariant_fields_do_not_matter(tos in any::<u8>(), ttl in any::<u8>(), resv in any::<u8>(),
                                          payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let base = v4_packet(0, 64, &payload);
            let mut other = v4_packet(tos, ttl, &payload);
            other[10] = 0x11; // checksum
            other[26] = 0x22; // UDP checksum
            other[32] = resv;
            prop_assert_eq!(compute(&base).unwrap(), compute(&other).unwrap());
        }

        #[test]
        fn covered_fields_matter(i in 0usize..52, flip in 1u8..=255) {
            let payload = [7u8; 12];
            let base = v4_packet(0, 64, &payload);
            // bytes that are masked or are the ICRC itself
            if [1usize, 8, 10, 11, 26, 27, 32].contains(&i) { return Ok(()); }
            let mut other = base.clone();
            other[i] ^= flip;
            if other[0] >> 4 != 4 || other[0] & 0xf != 5 { return Ok(()); }
            prop_assert_ne!(compute(&base).unwrap(), compute(&other).unwrap());
        }

        #[test]
        fn ipv6_flow_label_and_hop_limit_masked(fl in any::<u32>(), hop in any::<u8>()) {
            let mut p = std::vec![0u8; 40 + 8 + 12 + 8 + 4];
            p[0] = 0x60;
            p[6] = 17;
            p[7] = 64;
            let mut q = p.clone();
            q[0] = 0x60 | (fl as u8 & 0x0f);
            q[1] = (fl >> 8) as u8;
            q[2] = (fl >> 16) as u8;
            q[3] = (fl >> 24) as u8;
            q[7] = hop;
            prop_assert_eq!(compute(&p).unwrap(), compute(&q).unwrap());
        }
    }
}
