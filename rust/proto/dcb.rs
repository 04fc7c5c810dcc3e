// SPDX-License-Identifier: GPL-2.0
//! What a port's Data Center Bridging settings mean for rroce's priorities.
//! When the netdev has DCB (dcbnl: PFC, ETS, the APP table and its trust
//! order, as `dcb pfc`, `dcb ets`, `dcb app` and `dcb apptrust` edit them),
//! they replace rroce's own trust mode, DSCP table and PFC priorities, as on
//! a RoCE NIC whose DCB the host's LLDP agent or administrator sets.

use super::qos::{QosConfig, Trust, DSCPS, PRIORITIES};

/// APP selector of DSCP entries (`IEEE_8021QAZ_APP_SEL_DSCP`).
pub const SEL_DSCP: u8 = 5;
/// APP trust selector of the VLAN PCP (`DCB_APP_SEL_PCP`).
pub const SEL_PCP: u8 = 255;

/// A netdev's DCB state, as read from its DCB operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dcb {
    /// Priorities with PFC enabled, if the device reports PFC.
    pub pfc: Option<u8>,
    /// APP table: for each DSCP, the priorities it maps to (bit N = N).
    pub dscp_prio_mask: [u8; DSCPS],
    /// APP table: the default priority entries (bit N = N).
    pub default_prio_mask: u8,
    /// APP trust order, most trusted first, if the device has one.
    pub trust_order: Option<Trust>,
}

impl Default for Dcb {
    fn default() -> Self {
        Self { pfc: None, dscp_prio_mask: [0; DSCPS], default_prio_mask: 0, trust_order: None }
    }
}

/// The trust a DCB trust order gives: the first of DSCP and PCP in it;
/// PCP when neither is trusted (priority then comes from SL, as untrusted
/// traffic on a port takes its default priority).
pub fn trust_of_order(selectors: &[u8]) -> Trust {
    match selectors.iter().find(|&&s| s == SEL_DSCP || s == SEL_PCP) {
        Some(&SEL_DSCP) => Trust::Dscp,
        _ => Trust::Pcp,
    }
}

/// The highest priority of a mask (802.1Q: the APP entry that wins).
fn highest(mask: u8) -> Option<u8> {
    mask.checked_ilog2().map(|p| p as u8)
}

impl Dcb {
    /// The device reports PFC: it decides the PFC priorities.
    pub fn governs_pfc(&self) -> bool {
        self.pfc.is_some()
    }

    /// The device has a trust order or maps DSCPs in its APP table: it
    /// decides the trust mode and the DSCP table. A device with DCB
    /// operations but neither leaves them to rroce, so enabling DCB for PFC
    /// alone does not undo a DSCP setup.
    pub fn governs_trust(&self) -> bool {
        self.trust_order.is_some() || self.maps_dscp()
    }

    /// The APP table maps some DSCP.
    fn maps_dscp(&self) -> bool {
        self.dscp_prio_mask.iter().any(|&m| m != 0)
    }

    /// Trust mode: the device's trust order if it has one; else DSCP as soon
    /// as the APP table maps any DSCP (what mlx5 does without a trust order).
    pub fn trust(&self) -> Trust {
        self.trust_order.unwrap_or(if self.maps_dscp() { Trust::Dscp } else { Trust::Pcp })
    }

    /// DSCP-to-priority table from the APP table: each DSCP's highest
    /// priority; DSCPs without an entry take the default priority, or 0.
    pub fn dscp_prio(&self) -> [u8; DSCPS] {
        let default = highest(self.default_prio_mask).unwrap_or(0);
        self.dscp_prio_mask.map(|m| highest(m).unwrap_or(default))
    }

    /// `own` with the settings the device governs in place of rroce's own;
    /// ECN and CNP settings stay rroce's.
    pub fn apply(&self, own: &QosConfig) -> QosConfig {
        let mut q = *own;
        if let Some(pfc) = self.pfc {
            q.pfc = pfc;
        }
        if self.governs_trust() {
            q.trust = self.trust();
            q.dscp_prio = self.dscp_prio();
        }
        q
    }
}

/// Traffic class of each priority on the port (ETS, or the netdev's own
/// mqprio map): shown, not used for sending, since the lower device's
/// queues take it from `skb->priority`.
pub type PrioTc = [u8; PRIORITIES];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_order() {
        assert_eq!(trust_of_order(&[SEL_DSCP, SEL_PCP]), Trust::Dscp);
        assert_eq!(trust_of_order(&[SEL_PCP, SEL_DSCP]), Trust::Pcp);
        assert_eq!(trust_of_order(&[1, SEL_DSCP]), Trust::Dscp, "ethertype entries do not count");
        assert_eq!(trust_of_order(&[]), Trust::Pcp);
    }

    #[test]
    fn app_table_gives_dscp_trust_and_table() {
        let mut d = Dcb::default();
        assert_eq!(d.trust(), Trust::Pcp);
        d.dscp_prio_mask[26] = 1 << 5;
        d.dscp_prio_mask[46] = (1 << 2) | (1 << 6);
        assert_eq!(d.trust(), Trust::Dscp);
        let t = d.dscp_prio();
        assert_eq!((t[26], t[46], t[0]), (5, 6, 0));
        d.default_prio_mask = 1 << 1;
        assert_eq!(d.dscp_prio()[0], 1, "unmapped DSCPs take the default priority");
        d.trust_order = Some(Trust::Pcp);
        assert_eq!(d.trust(), Trust::Pcp, "an explicit trust order wins");
    }

    #[test]
    fn apply_keeps_congestion_settings() {
        let own = QosConfig { pfc: 1 << 2, ecn: false, cnp_dscp: 40, ..QosConfig::default() };
        let d = Dcb { pfc: Some(1 << 3), ..Dcb::default() };
        let q = d.apply(&own);
        assert_eq!((q.pfc, q.ecn, q.cnp_dscp, q.trust), (1 << 3, false, 40, Trust::Pcp));
        let q = Dcb::default().apply(&own);
        assert_eq!(q.pfc, 1 << 2, "a device without PFC leaves rroce's");
        let own = QosConfig { trust: Trust::Dscp, ..QosConfig::default() };
        assert_eq!(d.apply(&own).trust, Trust::Dscp, "no APP DSCP entry, no trust order: rroce's");
        assert_eq!(d.apply(&own).dscp_prio, own.dscp_prio);
        let mut d = d;
        d.trust_order = Some(Trust::Pcp);
        assert_eq!(d.apply(&own).trust, Trust::Pcp);
        assert!(d.apply(&own).dscp_prio.iter().all(|&p| p == 0), "the APP table's, empty");
    }

    proptest::proptest! {
        #[test]
        fn imported_priorities_in_range(masks in proptest::collection::vec(proptest::prelude::any::<u8>(), DSCPS), def: u8) {
            let mut d = Dcb { default_prio_mask: def, ..Dcb::default() };
            d.dscp_prio_mask.copy_from_slice(&masks);
            let q = d.apply(&QosConfig::default());
            proptest::prop_assert!(q.dscp_prio.iter().all(|&p| p < 8));
            for tc in 0..=255u8 {
                proptest::prop_assert!(q.data_class(tc, 0).priority < 8);
            }
        }
    }
}
