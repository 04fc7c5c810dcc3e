// SPDX-License-Identifier: GPL-2.0
//! GUIDs derived from the Ethernet MAC address (modified EUI-64), or from a
//! random local one on devices without a MAC.

/// Modified EUI-64 interface identifier of a 48-bit MAC, as IPv6 link-local
/// addresses and RoCE node/port GUIDs use it: `ff:fe` inserted in the middle
/// and the universal/local bit flipped.
pub fn eui64_from_mac(mac: &[u8; 6]) -> [u8; 8] {
    [mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]]
}

/// The GUID as the RDMA core stores it: the EUI-64 bytes in network order
/// inside a `__be64`, returned here as the native-endian integer whose
/// in-memory bytes are those network-order bytes.
pub fn guid_from_mac(mac: &[u8; 6]) -> u64 {
    u64::from_ne_bytes(eui64_from_mac(mac))
}

/// A MAC address for a device without one (tun, IP tunnels), made from
/// random bytes: unicast and locally administered, so its GUID cannot
/// collide with one derived from a NIC's address. The CM needs every
/// device's GUID unique.
pub fn local_mac_from_random(random: [u8; 6]) -> [u8; 6] {
    let mut mac = random;
    mac[0] = (mac[0] & !0x01) | 0x02;
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_macs_are_local_unicast() {
        for b in 0..=255u8 {
            let mac = local_mac_from_random([b, 1, 2, 3, 4, b]);
            assert_eq!(mac[0] & 0x03, 0x02);
            assert_eq!(mac[1..], [1, 2, 3, 4, b]);
            // The GUID's universal/local bit (flipped by EUI-64) says "local": 0.
            assert_eq!(eui64_from_mac(&mac)[0] & 0x02, 0);
        }
    }

    #[test]
    fn known_mac() {
        // 52:54:00:12:34:56 -> 5054:00ff:fe12:3456 (as in fe80::5054:ff:fe12:3456)
        assert_eq!(
            eui64_from_mac(&[0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
    }

    #[test]
    fn guid_bytes_are_network_order() {
        let g = guid_from_mac(&[0x02, 0, 0, 0, 0, 1]);
        assert_eq!(g.to_ne_bytes(), [0, 0, 0, 0xff, 0xfe, 0, 0, 1]);
    }
}
