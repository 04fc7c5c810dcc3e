// SPDX-License-Identifier: GPL-2.0
//! The IP and UDP headers in front of RoCEv2 transport headers, and the
//! mapping of GIDs to IP addresses and of flows to UDP source ports.

/// Bytes of an IPv4 header without options.
pub const IPV4_HDR: usize = 20;
/// Bytes of a UDP header.
pub const UDP_HDR: usize = 8;
/// The RoCEv2 UDP destination port.
pub const ROCE_V2_PORT: u16 = 4791;

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
pub fn ipv4_of_gid(gid: &[u8; 16]) -> Option<[u8; 4]> {
    if gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff {
        Some([gid[12], gid[13], gid[14], gid[15]])
    } else {
        None
    }
}

/// The IPv4-mapped GID of an IPv4 address.
pub fn gid_of_ipv4(addr: [u8; 4]) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[10] = 0xff;
    gid[11] = 0xff;
    gid[12..].copy_from_slice(&addr);
    gid
}

/// UDP's IP protocol number.
const PROTO_UDP: u8 = 17;

/// The addresses of a RoCEv2 packet given from its IP header on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpAddrs {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

impl IpAddrs {
    /// The addresses and header length of an IPv4 packet without options or
    /// an IPv6 packet without extension headers, carrying UDP; `None` for
    /// anything else (RoCEv2 uses neither options nor extension headers).
    pub fn parse(ip_packet: &[u8]) -> Option<(Self, usize)> {
        let first = *ip_packet.first()?;
        match first >> 4 {
            4 if first & 0x0f == 5 && ip_packet.len() >= IPV4_HDR && ip_packet[9] == PROTO_UDP => {
                let a = |at: usize| [ip_packet[at], ip_packet[at + 1], ip_packet[at + 2], ip_packet[at + 3]];
                Some((Self::V4 { src: a(12), dst: a(16) }, IPV4_HDR))
            }
            6 if ip_packet.len() >= IPV6_HDR && ip_packet[6] == PROTO_UDP => {
                let mut src = [0u8; 16];
                let mut dst = [0u8; 16];
                src.copy_from_slice(&ip_packet[8..24]);
                dst.copy_from_slice(&ip_packet[24..40]);
                Some((Self::V6 { src, dst }, IPV6_HDR))
            }
            _ => None,
        }
    }

    /// Whether the packet is addressed to the address of GID `gid`: a
    /// connected QP takes packets to its own source GID only (on another
    /// address, VLAN or interface of the host they are not its).
    pub fn destination_is(&self, gid: &[u8; 16]) -> bool {
        match self {
            Self::V4 { dst, .. } => ipv4_of_gid(gid) == Some(*dst),
            Self::V6 { dst, .. } => ipv4_of_gid(gid).is_none() && dst == gid,
        }
    }

    /// Whether the destination is a multicast address (IPv4 224/4, IPv6 ff00::/8).
    pub fn destination_is_group(&self) -> bool {
        match self {
            Self::V4 { dst, .. } => (224..240).contains(&dst[0]),
            Self::V6 { dst, .. } => dst[0] == 0xff,
        }
    }

    /// Whether the source is a multicast or broadcast address, which no
    /// reply (a CNP) may go to.
    pub fn source_is_group(&self) -> bool {
        match self {
            Self::V4 { src, .. } => src[0] >= 224 || *src == [255; 4],
            Self::V6 { src, .. } => src[0] == 0xff,
        }
    }

    /// Source and destination as GIDs (IPv4-mapped for IPv4).
    pub fn gids(&self) -> ([u8; 16], [u8; 16]) {
        match self {
            Self::V4 { src, dst } => (gid_of_ipv4(*src), gid_of_ipv4(*dst)),
            Self::V6 { src, dst } => (*src, *dst),
        }
    }

    /// Whether the packet comes from the address of GID `gid` (an IPv4-mapped
    /// GID for IPv4): a connected QP takes packets from its peer only.
    pub fn source_is(&self, gid: &[u8; 16]) -> bool {
        match self {
            Self::V4 { src, .. } => ipv4_of_gid(gid) == Some(*src),
            Self::V6 { src, .. } => ipv4_of_gid(gid).is_none() && src == gid,
        }
    }
}

/// The ECN bits of an IPv4 or IPv6 packet.
pub fn ecn(ip_packet: &[u8]) -> Option<u8> {
    let first = *ip_packet.first()?;
    let second = *ip_packet.get(1)?;
    match first >> 4 {
        4 => Some(second & 0b11),
        // The traffic class straddles the first two bytes.
        6 => Some((second >> 4) & 0b11),
        _ => None,
    }
}

/// Flow label of a connection without one, as the RDMA core derives it
/// (`rdma_calc_flow_label`), so both ends hash a QP pair alike.
pub fn calc_flow_label(lqpn: u32, rqpn: u32) -> u32 {
    let mut v = u64::from(lqpn) * u64::from(rqpn);
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0x000f_ffff) as u32
}

/// UDP source port from a flow label (`rdma_flow_label_to_udp_sport`): ECMP
/// entropy in the RoCEv2 range 0xC000..=0xFFFF.
pub fn udp_sport(flow_label: u32) -> u16 {
    let mut low = flow_label & 0x03fff;
    let high = flow_label & 0xfc000;
    low ^= high >> 14;
    (low | 0xc000) as u16
}

/// Writes an IPv4 header (DF, no options, ID 0 as for atomic datagrams,
/// checksum filled in) and a UDP header without checksum to the RoCEv2 port.
pub fn write_ipv4_udp(b: &mut [u8], src: [u8; 4], dst: [u8; 4], tos: u8, ttl: u8, total_len: u16, sport: u16) -> bool {
    let Some(h) = b.get_mut(..IPV4_HDR + UDP_HDR) else { return false };
    h[0] = 0x45;
    h[1] = tos;
    h[2..4].copy_from_slice(&total_len.to_be_bytes());
    h[4..6].copy_from_slice(&[0, 0]);
    h[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    h[8] = ttl;
    h[9] = 17;
    h[10..12].copy_from_slice(&[0, 0]);
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let csum = ipv4_checksum(&h[..IPV4_HDR]);
    h[10..12].copy_from_slice(&csum.to_be_bytes());
    let udp_len = total_len.saturating_sub(IPV4_HDR as u16);
    h[20..22].copy_from_slice(&sport.to_be_bytes());
    h[22..24].copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
    h[24..26].copy_from_slice(&udp_len.to_be_bytes());
    h[26..28].copy_from_slice(&[0, 0]);
    true
}

/// Bytes of an IPv6 header.
pub const IPV6_HDR: usize = 40;

/// Writes an IPv6 header and a UDP header to the RoCEv2 port. The UDP
/// checksum stays zero: the ICRC covers the packet, and RoCEv2 receivers
/// (rroce's and rdma_rxe's sockets) accept zero checksums (RFC 6935).
#[allow(clippy::too_many_arguments)]
pub fn write_ipv6_udp(
    b: &mut [u8],
    src: &[u8; 16],
    dst: &[u8; 16],
    tclass: u8,
    hop_limit: u8,
    flow_label: u32,
    total_len: u16,
    sport: u16,
) -> bool {
    let Some(h) = b.get_mut(..IPV6_HDR + UDP_HDR) else { return false };
    let vtf = 6u32 << 28 | u32::from(tclass) << 20 | (flow_label & 0x000f_ffff);
    h[0..4].copy_from_slice(&vtf.to_be_bytes());
    let udp_len = total_len.saturating_sub(IPV6_HDR as u16);
    h[4..6].copy_from_slice(&udp_len.to_be_bytes());
    h[6] = 17;
    h[7] = hop_limit;
    h[8..24].copy_from_slice(src);
    h[24..40].copy_from_slice(dst);
    h[40..42].copy_from_slice(&sport.to_be_bytes());
    h[42..44].copy_from_slice(&ROCE_V2_PORT.to_be_bytes());
    h[44..46].copy_from_slice(&udp_len.to_be_bytes());
    h[46..48].copy_from_slice(&[0, 0]);
    true
}

/// The one's-complement header checksum.
pub fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for pair in h.chunks(2) {
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |&b| u32::from(b));
        // Folded as it goes, so no input length overflows the sum.
        sum += hi | lo;
        sum = (sum & 0xffff) + (sum >> 16);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn multicast_destinations() {
        let v4 = |d: [u8; 4]| IpAddrs::V4 { src: [10, 0, 0, 1], dst: d };
        assert!(v4([224, 0, 0, 1]).destination_is_group());
        assert!(v4([239, 255, 255, 255]).destination_is_group());
        assert!(!v4([240, 0, 0, 1]).destination_is_group());
        assert!(!v4([255, 255, 255, 255]).destination_is_group());
        assert!(!v4([223, 255, 255, 255]).destination_is_group());
        let mut g = [0u8; 16];
        g[0] = 0xff;
        assert!(IpAddrs::V6 { src: [0; 16], dst: g }.destination_is_group());
        g[0] = 0xfe;
        assert!(!IpAddrs::V6 { src: [0; 16], dst: g }.destination_is_group());
    }

    #[test]
    fn ecn_bits_of_both_families() {
        let mut v4 = [0u8; IPV4_HDR + UDP_HDR];
        assert!(write_ipv4_udp(&mut v4, [1; 4], [2; 4], 0x6a, 64, 28, 0xc000));
        assert_eq!(ecn(&v4), Some(0b10));
        let mut v6 = [0u8; IPV6_HDR + UDP_HDR];
        assert!(write_ipv6_udp(&mut v6, &[1; 16], &[2; 16], 0x6b, 64, 0xfffff, 48, 0xc000));
        assert_eq!(ecn(&v6), Some(0b11));
        assert_eq!(ecn(&[0x45]), None);
        assert_eq!(ecn(&[0x15, 3]), None);
    }

    #[test]
    fn gids_of_addresses() {
        let a = IpAddrs::V4 { src: [198, 18, 0, 1], dst: [198, 18, 0, 2] };
        let (s, d) = a.gids();
        assert_eq!(ipv4_of_gid(&s), Some([198, 18, 0, 1]));
        assert_eq!(ipv4_of_gid(&d), Some([198, 18, 0, 2]));
        assert!(a.source_is(&s));
        assert!(a.destination_is(&d) && !a.destination_is(&s));
        assert!(!a.source_is_group());
        let b = IpAddrs::V6 { src: [0xfd; 16], dst: [0xfe; 16] };
        assert_eq!(b.gids(), ([0xfd; 16], [0xfe; 16]));
        assert!(b.destination_is(&[0xfe; 16]) && !b.destination_is(&d));
        assert!(IpAddrs::V4 { src: [224, 0, 0, 1], dst: [1; 4] }.source_is_group());
        assert!(IpAddrs::V4 { src: [255; 4], dst: [1; 4] }.source_is_group());
        assert!(IpAddrs::V6 { src: [0xff; 16], dst: [1; 16] }.source_is_group());
    }

    #[test]
    fn mapped_gids() {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[198, 18, 0, 1]);
        assert_eq!(ipv4_of_gid(&g), Some([198, 18, 0, 1]));
        g[0] = 0xfe;
        assert_eq!(ipv4_of_gid(&g), None);
    }

    fn v4_gid(a: [u8; 4]) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&a);
        g
    }

    #[test]
    fn parses_plain_udp_headers_only() {
        let mut b = [0u8; 28];
        assert!(write_ipv4_udp(&mut b, [198, 18, 0, 1], [198, 18, 0, 2], 0, 64, 28, 0xc001));
        let (a, len) = IpAddrs::parse(&b).unwrap();
        assert_eq!(len, IPV4_HDR);
        assert!(a.source_is(&v4_gid([198, 18, 0, 1])));
        assert!(!a.source_is(&v4_gid([198, 18, 0, 3])));
        let mut opts = b;
        opts[0] = 0x46; // IHL 6: options
        assert_eq!(IpAddrs::parse(&opts), None);
        let mut tcp = b;
        tcp[9] = 6;
        assert_eq!(IpAddrs::parse(&tcp), None);
        assert_eq!(IpAddrs::parse(&b[..19]), None);

        let mut v6 = [0u8; 48];
        let s = [0xfd, 0x72, 0x6f, 0x63, 0x65, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        let d = [0xfd, 0x72, 0x6f, 0x63, 0x65, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2];
        assert!(write_ipv6_udp(&mut v6, &s, &d, 0, 64, 0, 48, 0xc001));
        let (a, len) = IpAddrs::parse(&v6).unwrap();
        assert_eq!(len, IPV6_HDR);
        assert!(a.source_is(&s));
        assert!(!a.source_is(&d));
        v6[6] = 0; // hop-by-hop options header
        assert_eq!(IpAddrs::parse(&v6), None);
        assert_eq!(IpAddrs::parse(&[]), None);
    }

    #[test]
    fn header_checksums_to_zero() {
        let mut b = [0u8; 28];
        assert!(write_ipv4_udp(&mut b, [198, 18, 0, 1], [198, 18, 0, 2], 0, 64, 100, 0xc001));
        assert_eq!(ipv4_checksum(&b[..20]), 0);
        assert_eq!(&b[22..24], &[0x12, 0xb7]);
        assert_eq!(u16::from_be_bytes([b[24], b[25]]), 80);
    }

    #[test]
    fn known_checksum() {
        // RFC 1071 style example header
        let h = [0x45, 0, 0, 0x73, 0, 0, 0x40, 0, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0, 1, 0xc0, 0xa8, 0, 0xc7];
        assert_eq!(ipv4_checksum(&h), 0xb861);
    }

    #[test]
    fn ipv6_header() {
        let mut b = [0u8; 48];
        let (s, d) = ([0xfd; 16], [0xfe; 16]);
        assert!(write_ipv6_udp(&mut b, &s, &d, 0x68, 64, 0xabcde, 100, 0xc123));
        assert_eq!(&b[0..4], &[0x66, 0x8a, 0xbc, 0xde]);
        assert_eq!(u16::from_be_bytes([b[4], b[5]]), 60);
        assert_eq!((b[6], b[7]), (17, 64));
        assert_eq!(&b[8..24], &s);
        assert_eq!(&b[42..44], &[0x12, 0xb7]);
    }

    proptest! {
        #[test]
        fn sport_in_roce_range(fl in any::<u32>()) {
            prop_assert!(udp_sport(fl) >= 0xc000);
        }

        #[test]
        fn flow_label_is_20_bits(a in 0u32..(1 << 24), b in 0u32..(1 << 24)) {
            prop_assert!(calc_flow_label(a, b) < (1 << 20));
            prop_assert_eq!(calc_flow_label(a, b), calc_flow_label(b, a));
        }
    }
}
