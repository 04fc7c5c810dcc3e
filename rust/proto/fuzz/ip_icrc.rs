// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets: IP/UDP headers and the ICRC (`ip`, `icrc`).

use super::*;

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
