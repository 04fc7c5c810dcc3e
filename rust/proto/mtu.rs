// SPDX-License-Identifier: GPL-2.0
//! Mapping of the Ethernet MTU to the IB path MTU of the RoCE port.

/// Largest RoCEv2 header stack in front of the payload: IPv6 (40) + UDP (8)
/// + BTH (12) + the longest extended transport header chain (RETH/ATMETH
/// etc.) + ICRC, rounded up the same way as rdma_rxe so both sides of an
/// interop link pick the same path MTU.
pub const MAX_ROCE_OVERHEAD: u32 = 80;

/// IB MTU enumeration values (`enum ib_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256 = 1,
    /// 512 bytes.
    Mtu512 = 2,
    /// 1024 bytes.
    Mtu1024 = 3,
    /// 2048 bytes.
    Mtu2048 = 4,
    /// 4096 bytes.
    Mtu4096 = 5,
}

impl IbMtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }

    /// Decodes `enum ib_mtu`; `None` for values outside 1..=5.
    pub const fn from_enum(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::Mtu256),
            2 => Some(Self::Mtu512),
            3 => Some(Self::Mtu1024),
            4 => Some(Self::Mtu2048),
            5 => Some(Self::Mtu4096),
            _ => None,
        }
    }

    /// Largest IB MTU whose packets fit an Ethernet MTU of `eth_mtu` bytes.
    /// Links too small for even 256-byte payloads still get 256: such a port
    /// cannot carry full packets, but the port attributes stay valid.
    pub fn from_eth_mtu(eth_mtu: u32) -> Self {
        let room = eth_mtu.saturating_sub(MAX_ROCE_OVERHEAD);
        match room {
            4096.. => Self::Mtu4096,
            2048.. => Self::Mtu2048,
            1024.. => Self::Mtu1024,
            512.. => Self::Mtu512,
            _ => Self::Mtu256,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn common_links() {
        assert_eq!(IbMtu::from_eth_mtu(1500), IbMtu::Mtu1024);
        assert_eq!(IbMtu::from_eth_mtu(9000), IbMtu::Mtu4096);
        assert_eq!(IbMtu::from_eth_mtu(4200), IbMtu::Mtu4096);
        assert_eq!(IbMtu::from_eth_mtu(4175), IbMtu::Mtu2048);
        assert_eq!(IbMtu::from_eth_mtu(68), IbMtu::Mtu256);
        assert_eq!(IbMtu::from_eth_mtu(0), IbMtu::Mtu256);
    }

    #[test]
    fn enum_roundtrip() {
        for v in 1..=5 {
            let m = IbMtu::from_enum(v).unwrap();
            assert_eq!(m as u32, v);
            assert_eq!(m.bytes(), 256 << (v - 1));
        }
        assert_eq!(IbMtu::from_enum(0), None);
        assert_eq!(IbMtu::from_enum(6), None);
    }

    proptest! {
        #[test]
        fn packets_fit_the_link(eth in 0u32..100_000) {
            let m = IbMtu::from_eth_mtu(eth);
            if eth >= 256 + MAX_ROCE_OVERHEAD {
                prop_assert!(m.bytes() + MAX_ROCE_OVERHEAD <= eth);
            }
            // and it is the largest that fits
            if let Some(next) = IbMtu::from_enum(m as u32 + 1) {
                prop_assert!(next.bytes() + MAX_ROCE_OVERHEAD > eth);
            }
        }

        #[test]
        fn monotonic(a in 0u32..100_000, b in 0u32..100_000) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(IbMtu::from_eth_mtu(lo) <= IbMtu::from_eth_mtu(hi));
        }
    }
}
