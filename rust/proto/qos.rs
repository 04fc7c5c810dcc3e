// SPDX-License-Identifier: GPL-2.0
//! Priority of a RoCEv2 packet on lossless Ethernet: which Linux priority
//! (`skb->priority`, hence queue, traffic class and VLAN PCP) and which IP
//! DS field a QP's packets get from its traffic class and SL, under the
//! device's trust mode; and the device's QoS settings as text for sysfs.

use super::dcb::{Dcb, PrioTc};
use super::dcqcn::{Params, PARAMS};

/// IP ECN codepoint ECT(0): an ECN-capable transport (RFC 3168).
pub const ECN_ECT0: u8 = 0b10;
/// IP ECN codepoint CE: congestion experienced, set by a switch.
pub const ECN_CE: u8 = 0b11;
/// Mask of the ECN bits in the IPv4 TOS / IPv6 traffic class byte.
pub const ECN_MASK: u8 = 0b11;
/// 802.1p priorities.
pub const PRIORITIES: usize = 8;
/// DSCP values.
pub const DSCPS: usize = 64;

/// What classifies a packet into a priority at the next hop, and so which
/// of the QP's attributes picks its priority here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// The VLAN PCP: the QP's SL (or, with SL 0, the priority the IP stack
    /// gives its ToS) is the priority.
    Pcp,
    /// The DSCP: the device's DSCP-to-priority table maps the traffic class.
    Dscp,
}

/// A device's QoS settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QosConfig {
    pub trust: Trust,
    /// Priority of each DSCP under [`Trust::Dscp`].
    pub dscp_prio: [u8; DSCPS],
    /// Priorities with PFC enabled (bit N = priority N). Their packets carry
    /// an 802.1Q priority tag (VLAN 0) when they leave an untagged port, so
    /// the link can pause their class.
    pub pfc: u8,
    /// Data packets are ECN-capable (ECT(0)) and CNPs answer CE marks:
    /// congestion control is on.
    pub ecn: bool,
    /// DSCP and priority of the CNPs this device sends.
    pub cnp_dscp: u8,
    pub cnp_prio: u8,
}

impl Default for QosConfig {
    /// Trust PCP with SL 0: priority 0 and the traffic class as the DS field,
    /// as rdma_rxe sends; the default DSCP table takes the class selector
    /// (DSCP 26 -> 3, 46 -> 5, 48 -> 6), as RoCE NICs ship it; no PFC
    /// priority; ECN on, CNPs at DSCP 48, priority 6 (mlx5's defaults).
    fn default() -> Self {
        let mut dscp_prio = [0u8; DSCPS];
        for (d, p) in dscp_prio.iter_mut().enumerate() {
            *p = (d >> 3) as u8;
        }
        Self { trust: Trust::Pcp, dscp_prio, pfc: 0, ecn: true, cnp_dscp: 48, cnp_prio: 6 }
    }
}

/// How one packet leaves: its Linux priority, its IP DS field (DSCP and
/// ECN), and whether it needs a VLAN 0 priority tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxClass {
    pub priority: u8,
    pub tos: u8,
    /// PFC is on for the priority: if the egress device adds no VLAN tag of
    /// its own, add an 802.1Q tag with VLAN 0 and PCP = `priority`.
    pub priority_tag: bool,
}

/// The priority the IP stack gives a ToS byte (`rt_tos2priority`): only
/// the RFC 1349 bits count, so DSCP 26 (ToS 104) gives 2.
pub fn tos_to_priority(tos: u8) -> u8 {
    // ip_tos2prio, with TC_PRIO_* as their values.
    const TABLE: [u8; 16] = [0, 1, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
    TABLE[usize::from((tos & 0x1e) >> 1)]
}

impl QosConfig {
    /// The priority of a QP's packets with `traffic_class` and `sl`.
    pub fn priority(&self, traffic_class: u8, sl: u8) -> u8 {
        match self.trust {
            Trust::Pcp if sl != 0 => sl & 7,
            Trust::Pcp => tos_to_priority(traffic_class),
            Trust::Dscp => self.dscp_prio[usize::from(traffic_class >> 2)] & 7,
        }
    }

    /// Class of a data, ACK or response packet of a QP.
    pub fn data_class(&self, traffic_class: u8, sl: u8) -> TxClass {
        let priority = self.priority(traffic_class, sl);
        let ecn = if self.ecn { ECN_ECT0 } else { traffic_class & ECN_MASK };
        TxClass { priority, tos: (traffic_class & !ECN_MASK) | ecn, priority_tag: self.is_pfc(priority) }
    }

    /// Class of a CNP: its own DSCP and priority, never ECN-capable (a
    /// congestion notification must not itself be marked or dropped early).
    pub fn cnp_class(&self) -> TxClass {
        let priority = self.cnp_prio & 7;
        TxClass { priority, tos: (self.cnp_dscp & 0x3f) << 2, priority_tag: self.is_pfc(priority) }
    }

    fn is_pfc(&self, priority: u8) -> bool {
        self.pfc & (1 << (priority & 7)) != 0
    }
}

/// Errors of parsing a setting written through sysfs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadSetting;

/// The words of a sysfs write (whitespace- or comma-separated, a trailing
/// newline allowed).
fn words(input: &[u8]) -> impl Iterator<Item = &[u8]> {
    input.split(|b| b.is_ascii_whitespace() || *b == b',').filter(|w| !w.is_empty())
}

/// A decimal number, or hexadecimal with `0x`, at most `max`.
pub fn parse_number(word: &[u8], max: u64) -> Result<u64, BadSetting> {
    let (digits, radix) = match word {
        [b'0', b'x' | b'X', rest @ ..] => (rest, 16),
        _ => (word, 10),
    };
    if digits.is_empty() || digits.len() > 20 {
        return Err(BadSetting);
    }
    let mut v: u64 = 0;
    for &c in digits {
        let d = (c as char).to_digit(radix).ok_or(BadSetting)?;
        v = v.checked_mul(u64::from(radix)).and_then(|v| v.checked_add(u64::from(d))).ok_or(BadSetting)?;
    }
    if v > max {
        return Err(BadSetting);
    }
    Ok(v)
}

/// One number as the whole write.
pub fn parse_single(input: &[u8], max: u64) -> Result<u64, BadSetting> {
    let mut w = words(input);
    let v = parse_number(w.next().ok_or(BadSetting)?, max)?;
    if w.next().is_some() {
        return Err(BadSetting);
    }
    Ok(v)
}

/// `pcp` or `dscp`.
pub fn parse_trust(input: &[u8]) -> Result<Trust, BadSetting> {
    let mut w = words(input);
    let t = match w.next() {
        Some(b"pcp") => Trust::Pcp,
        Some(b"dscp") => Trust::Dscp,
        _ => return Err(BadSetting),
    };
    if w.next().is_some() {
        return Err(BadSetting);
    }
    Ok(t)
}

/// A list of priorities (`3` or `3,4` or `none`) as a bit mask.
pub fn parse_priorities(input: &[u8]) -> Result<u8, BadSetting> {
    let mut mask = 0u8;
    let mut any = false;
    for w in words(input) {
        if w == b"none" {
            if any {
                return Err(BadSetting);
            }
            any = true;
            continue;
        }
        if any && mask == 0 {
            // `none` mixed with priorities.
            return Err(BadSetting);
        }
        mask |= 1 << parse_number(w, 7)?;
        any = true;
    }
    if !any {
        return Err(BadSetting);
    }
    Ok(mask)
}

/// Applies `DSCP:PRIO` pairs (`26:3 46:5`) to `table`; nothing changes
/// unless every pair is valid.
pub fn parse_dscp_prio(input: &[u8], table: &mut [u8; DSCPS]) -> Result<(), BadSetting> {
    let mut next = *table;
    let mut any = false;
    for w in words(input) {
        let colon = w.iter().position(|&b| b == b':').ok_or(BadSetting)?;
        let dscp = parse_number(&w[..colon], (DSCPS - 1) as u64)?;
        let prio = parse_number(&w[colon + 1..], 7)?;
        next[dscp as usize] = prio as u8;
        any = true;
    }
    if !any {
        return Err(BadSetting);
    }
    *table = next;
    Ok(())
}

/// A small writer into a sysfs page.
pub struct TextBuf<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> TextBuf<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self { buf, len: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `s`, cut at the end of the buffer.
    pub fn push(&mut self, s: &[u8]) {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    pub fn number(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }
}

/// `pcp` or `dscp`, newline-terminated.
pub fn show_trust(t: Trust, out: &mut TextBuf<'_>) {
    out.push(match t {
        Trust::Pcp => b"pcp\n",
        Trust::Dscp => b"dscp\n",
    });
}

/// A priority mask as a list (`3,4`), or `none`.
pub fn show_priorities(mask: u8, out: &mut TextBuf<'_>) {
    if mask == 0 {
        out.push(b"none\n");
        return;
    }
    let mut first = true;
    for p in 0..8u64 {
        if mask & (1 << p) != 0 {
            if !first {
                out.push(b",");
            }
            out.number(p);
            first = false;
        }
    }
    out.push(b"\n");
}

/// The whole table as `DSCP:PRIO` pairs, eight to a line.
pub fn show_dscp_prio(table: &[u8; DSCPS], out: &mut TextBuf<'_>) {
    for (d, p) in table.iter().enumerate() {
        out.number(d as u64);
        out.push(b":");
        out.number(u64::from(*p));
        out.push(if d % 8 == 7 { b"\n" } else { b" " });
    }
}

/// Everything a device's `qos` sysfs directory shows: the priority
/// settings, where they come from, and the congestion control parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// rroce's own priority settings, used unless DCB governs.
    own: QosConfig,
    pub cc: Params,
    /// Follow the netdev's DCB settings when it has them.
    follow_dcb: bool,
    /// The netdev's DCB state, if it has DCB.
    dcb: Option<Dcb>,
    prio_tc: PrioTc,
    /// What packets get: `own`, or `own` under the DCB settings.
    effective: QosConfig,
}

impl Default for Settings {
    fn default() -> Self {
        let own = QosConfig::default();
        Self { own, cc: Params::default(), follow_dcb: true, dcb: None, prio_tc: [0; PRIORITIES], effective: own }
    }
}

/// Why a write to a setting was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// Not a valid value for the setting.
    Invalid(BadSetting),
    /// The netdev's DCB sets it (write `dcb` 0 to set it here).
    SetByDcb,
    /// The setting is shown only.
    ReadOnly,
}

impl From<BadSetting> for StoreError {
    fn from(e: BadSetting) -> Self {
        Self::Invalid(e)
    }
}

/// The attributes before the DCQCN parameters, in order.
const FIXED_ATTRS: [&core::ffi::CStr; 8] =
    [c"trust", c"dscp2prio", c"pfc", c"cc", c"np_cnp_dscp", c"np_cnp_prio", c"dcb", c"prio2tc"];
const ATTR_TRUST: usize = 0;
const ATTR_DSCP2PRIO: usize = 1;
const ATTR_PFC: usize = 2;
const ATTR_CC: usize = 3;
const ATTR_CNP_DSCP: usize = 4;
const ATTR_CNP_PRIO: usize = 5;
const ATTR_DCB: usize = 6;
const ATTR_PRIO2TC: usize = 7;

/// Name of attribute `id`; ids run from 0 without gaps.
pub fn attr_name(id: usize) -> Option<&'static core::ffi::CStr> {
    match id.checked_sub(FIXED_ATTRS.len()) {
        None => FIXED_ATTRS.get(id).copied(),
        Some(i) => PARAMS.get(i).map(|d| d.name),
    }
}

/// Attribute `id` can only be read.
pub fn attr_read_only(id: usize) -> bool {
    id == ATTR_PRIO2TC
}

impl Settings {
    /// The priority settings packets get.
    pub fn qos(&self) -> &QosConfig {
        &self.effective
    }

    /// The DCB state followed, if any.
    fn followed(&self) -> Option<&Dcb> {
        self.dcb.as_ref().filter(|_| self.follow_dcb)
    }

    /// The netdev's DCB settings govern some of the priority settings.
    pub fn set_by_dcb(&self) -> bool {
        self.followed().is_some_and(|d| d.governs_pfc() || d.governs_trust())
    }

    /// Takes the port's DCB state (`None`: the netdev has no DCB) and its
    /// priority-to-traffic-class map. Returns whether that changed whether
    /// DCB governs (for a log line).
    pub fn set_port(&mut self, dcb: Option<Dcb>, prio_tc: PrioTc) -> bool {
        let before = self.set_by_dcb();
        self.dcb = dcb;
        self.prio_tc = prio_tc;
        self.update();
        before != self.set_by_dcb()
    }

    fn update(&mut self) {
        self.effective = match self.dcb {
            Some(d) if self.follow_dcb => d.apply(&self.own),
            _ => self.own,
        };
    }

    /// Writes attribute `id` as text.
    pub fn show(&self, id: usize, out: &mut TextBuf<'_>) -> Result<(), BadSetting> {
        let q = &self.effective;
        let number = |out: &mut TextBuf<'_>, v: u64| {
            out.number(v);
            out.push(b"\n");
        };
        match id {
            ATTR_TRUST => show_trust(q.trust, out),
            ATTR_DSCP2PRIO => show_dscp_prio(&q.dscp_prio, out),
            ATTR_PFC => show_priorities(q.pfc, out),
            ATTR_CC => number(out, u64::from(q.ecn)),
            ATTR_CNP_DSCP => number(out, u64::from(q.cnp_dscp)),
            ATTR_CNP_PRIO => number(out, u64::from(q.cnp_prio)),
            ATTR_DCB => number(out, u64::from(self.follow_dcb)),
            ATTR_PRIO2TC => show_prio_tc(&self.prio_tc, out),
            _ => {
                let d = id.checked_sub(FIXED_ATTRS.len()).and_then(|i| PARAMS.get(i)).ok_or(BadSetting)?;
                number(out, u64::from((d.get)(&self.cc)));
            }
        }
        Ok(())
    }

    /// Applies a write to attribute `id`; nothing changes if it is refused.
    pub fn store(&mut self, id: usize, input: &[u8]) -> Result<(), StoreError> {
        let governed = match (id, self.followed()) {
            (ATTR_TRUST | ATTR_DSCP2PRIO, Some(d)) => d.governs_trust(),
            (ATTR_PFC, Some(d)) => d.governs_pfc(),
            _ => false,
        };
        if governed {
            return Err(StoreError::SetByDcb);
        }
        let q = &mut self.own;
        match id {
            ATTR_TRUST => q.trust = parse_trust(input)?,
            ATTR_DSCP2PRIO => parse_dscp_prio(input, &mut q.dscp_prio)?,
            ATTR_PFC => q.pfc = parse_priorities(input)?,
            ATTR_CC => q.ecn = parse_single(input, 1)? != 0,
            ATTR_CNP_DSCP => q.cnp_dscp = parse_single(input, (DSCPS - 1) as u64)? as u8,
            ATTR_CNP_PRIO => q.cnp_prio = parse_single(input, 7)? as u8,
            ATTR_DCB => self.follow_dcb = parse_single(input, 1)? != 0,
            ATTR_PRIO2TC => return Err(StoreError::ReadOnly),
            _ => {
                let d = id.checked_sub(FIXED_ATTRS.len()).and_then(|i| PARAMS.get(i)).ok_or(BadSetting)?;
                let v = parse_single(input, u64::from(d.max))?;
                (d.set)(&mut self.cc, v as u32);
            }
        }
        self.update();
        Ok(())
    }
}

/// `prio:tc` pairs, as `dscp2prio` shows its table.
pub fn show_prio_tc(map: &PrioTc, out: &mut TextBuf<'_>) {
    for (p, tc) in map.iter().enumerate() {
        if p > 0 {
            out.push(b" ");
        }
        out.number(p as u64);
        out.push(b":");
        out.number(u64::from(*tc));
    }
    out.push(b"\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_send_what_rdma_rxe_sends() {
        let c = QosConfig { ecn: false, ..QosConfig::default() };
        for tc in 0..=255u8 {
            let class = c.data_class(tc, 0);
            // The DS field verbatim; priority 0 for every ToS rdma_cm sets by default.
            assert_eq!(class.tos, tc);
            assert!(!class.priority_tag);
        }
        assert_eq!(c.data_class(0, 0).priority, 0);
    }

    #[test]
    fn ip_stack_priorities_of_tos() {
        // route.c's ip_tos2prio: the old TOS bits only.
        assert_eq!(tos_to_priority(0), 0);
        assert_eq!(tos_to_priority(8), 2);
        assert_eq!(tos_to_priority(16), 6);
        assert_eq!(tos_to_priority(24), 4);
        assert_eq!(tos_to_priority(104), 2); // DSCP 26
        assert_eq!(tos_to_priority(184), 4); // DSCP 46 (EF)
        assert_eq!(tos_to_priority(192), 0); // DSCP 48
    }

    #[test]
    fn pcp_trust_takes_sl_then_tos() {
        let c = QosConfig::default();
        assert_eq!(c.priority(0, 3), 3);
        assert_eq!(c.priority(104, 5), 5);
        assert_eq!(c.priority(104, 0), 2);
        assert_eq!(c.priority(0, 11), 3, "SL is four bits, priorities three");
    }

    #[test]
    fn dscp_trust_uses_the_table() {
        let mut c = QosConfig { trust: Trust::Dscp, ..QosConfig::default() };
        assert_eq!(c.priority(104, 0), 3); // DSCP 26, class selector 3
        assert_eq!(c.priority(184, 7), 5); // EF; SL ignored
        parse_dscp_prio(b"26:6\n", &mut c.dscp_prio).unwrap();
        assert_eq!(c.priority(104 | 2, 0), 6);
    }

    #[test]
    fn ecn_sets_ect0_and_keeps_dscp() {
        let c = QosConfig::default();
        assert_eq!(c.data_class(104, 0).tos, 106);
        assert_eq!(c.data_class(107, 0).tos, 106, "CE from the application is not kept");
        let off = QosConfig { ecn: false, ..c };
        assert_eq!(off.data_class(107, 0).tos, 107);
    }

    #[test]
    fn priority_tag_only_for_pfc_priorities() {
        let c = QosConfig { pfc: 1 << 3, ..QosConfig::default() };
        assert!(c.data_class(0, 3).priority_tag);
        assert!(!c.data_class(0, 2).priority_tag);
    }

    #[test]
    fn cnp_class() {
        let c = QosConfig { pfc: 1 << 6, ..QosConfig::default() };
        let k = c.cnp_class();
        assert_eq!((k.priority, k.tos, k.priority_tag), (6, 48 << 2, true));
        assert_eq!(k.tos & ECN_MASK, 0);
    }

    #[test]
    fn parsing() {
        assert_eq!(parse_trust(b"dscp\n"), Ok(Trust::Dscp));
        assert_eq!(parse_trust(b"pcp"), Ok(Trust::Pcp));
        assert_eq!(parse_trust(b"pcp dscp"), Err(BadSetting));
        assert_eq!(parse_trust(b""), Err(BadSetting));
        assert_eq!(parse_priorities(b"3\n"), Ok(8));
        assert_eq!(parse_priorities(b"3,4"), Ok(0x18));
        assert_eq!(parse_priorities(b"none\n"), Ok(0));
        assert_eq!(parse_priorities(b"8"), Err(BadSetting));
        assert_eq!(parse_priorities(b"none 3"), Err(BadSetting));
        assert_eq!(parse_priorities(b"3 none"), Err(BadSetting));
        assert_eq!(parse_priorities(b""), Err(BadSetting));
        assert_eq!(parse_single(b"0x30\n", 63), Ok(48));
        assert_eq!(parse_single(b"64", 63), Err(BadSetting));
        assert_eq!(parse_single(b"99999999999999999999999", u64::MAX), Err(BadSetting));
        assert_eq!(parse_single(b"1 2", 9), Err(BadSetting));
        assert_eq!(parse_single(b"-1", 9), Err(BadSetting));
        let mut t = QosConfig::default().dscp_prio;
        let before = t;
        assert_eq!(parse_dscp_prio(b"26:3 64:1", &mut t), Err(BadSetting));
        assert_eq!(t, before, "all or nothing");
        assert_eq!(parse_dscp_prio(b"26", &mut t), Err(BadSetting));
        assert_eq!(parse_dscp_prio(b"0:7,63:0", &mut t), Ok(()));
        assert_eq!((t[0], t[63]), (7, 0));
    }

    #[test]
    fn showing() {
        let mut page = [0u8; 4096];
        let mut out = TextBuf::new(&mut page);
        show_priorities(0x18, &mut out);
        show_priorities(0, &mut out);
        show_trust(Trust::Dscp, &mut out);
        let n = out.len();
        assert_eq!(&page[..n], b"3,4\nnone\ndscp\n");
        let mut out = TextBuf::new(&mut page);
        show_dscp_prio(&QosConfig::default().dscp_prio, &mut out);
        let n = out.len();
        let text = core::str::from_utf8(&page[..n]).unwrap();
        assert!(text.starts_with("0:0 1:0 "));
        assert!(text.contains("26:3 "));
        assert!(text.ends_with("63:7\n"));
        // What `show` prints, `store` takes back.
        let mut t = [9u8; DSCPS];
        parse_dscp_prio(&page[..n], &mut t).unwrap();
        assert_eq!(t, QosConfig::default().dscp_prio);
        let mut small = [0u8; 3];
        let mut out = TextBuf::new(&mut small);
        out.number(123456);
        assert_eq!(out.len(), 3, "cut at the end of the buffer");
    }

    #[test]
    fn settings_attributes_round_trip() {
        let mut st = Settings::default();
        let mut id = 0;
        while let Some(name) = attr_name(id) {
            let mut page = [0u8; 4096];
            let mut out = TextBuf::new(&mut page);
            st.show(id, &mut out).unwrap();
            let n = out.len();
            assert!(n > 0 && page[n - 1] == b'\n', "{name:?}");
            let before = st;
            if attr_read_only(id) {
                assert_eq!(st.store(id, &page[..n]), Err(StoreError::ReadOnly), "{name:?}");
            } else {
                st.store(id, &page[..n]).unwrap();
            }
            assert_eq!(st, before, "{name:?}: what show prints, store takes back");
            id += 1;
        }
        assert_eq!(id, 8 + PARAMS.len());
        assert_eq!(attr_name(3), Some(c"cc"));
        assert_eq!(attr_name(8), Some(c"rp_time_reset"));
        let bad = Err(StoreError::Invalid(BadSetting));
        assert_eq!(st.store(id, b"1"), bad);
        assert_eq!(st.store(3, b"0\n"), Ok(()));
        assert!(!st.qos().ecn);
        assert_eq!(st.store(8, b"0x10"), Ok(()));
        assert_eq!(st.cc.rp_time_reset, 16);
        assert_eq!(st.store(8, b"1000001"), bad, "above its bound");
        assert_eq!(st.cc.rp_time_reset, 16);
    }

    #[test]
    fn dcb_governs_priority_settings() {
        let mut st = Settings::default();
        st.store(ATTR_PFC, b"2").unwrap();
        let mut dcb = Dcb { pfc: Some(1 << 3), ..Dcb::default() };
        dcb.dscp_prio_mask[26] = 1 << 5;
        assert!(st.set_port(Some(dcb), [0, 0, 0, 1, 1, 2, 2, 2]));
        assert!(st.set_by_dcb());
        assert_eq!((st.qos().pfc, st.qos().trust, st.qos().dscp_prio[26]), (1 << 3, Trust::Dscp, 5));
        assert_eq!(st.store(ATTR_PFC, b"4"), Err(StoreError::SetByDcb));
        assert_eq!(st.store(ATTR_TRUST, b"pcp"), Err(StoreError::SetByDcb));
        assert_eq!(st.store(ATTR_CC, b"0"), Ok(()), "congestion settings stay rroce's");
        let mut page = [0u8; 64];
        let mut out = TextBuf::new(&mut page);
        st.show(ATTR_PRIO2TC, &mut out).unwrap();
        let n = out.len();
        assert_eq!(&page[..n], b"0:0 1:0 2:0 3:1 4:1 5:2 6:2 7:2\n");
        // Not following DCB: rroce's own settings come back.
        st.store(ATTR_DCB, b"0").unwrap();
        assert!(!st.set_by_dcb());
        assert_eq!((st.qos().pfc, st.qos().trust), (1 << 2, Trust::Pcp));
        st.store(ATTR_DCB, b"1").unwrap();
        // DCB for PFC only: trust and the DSCP table stay rroce's.
        assert!(!st.set_port(Some(Dcb { pfc: Some(0), ..Dcb::default() }), [0; PRIORITIES]));
        assert_eq!(st.store(ATTR_TRUST, b"dscp"), Ok(()));
        assert_eq!(st.store(ATTR_PFC, b"4"), Err(StoreError::SetByDcb));
        assert_eq!((st.qos().trust, st.qos().pfc), (Trust::Dscp, 0));
        assert!(st.set_port(None, [0; PRIORITIES]));
        assert_eq!(st.qos().pfc, 1 << 2, "the netdev lost DCB");
        assert_eq!(st.store(ATTR_PFC, b"4"), Ok(()));
    }

    proptest::proptest! {
        #[test]
        fn class_never_out_of_range(tc in 0u8..=255, sl in 0u8..=255, trust in 0..2u8, pfc in 0u8..=255, ecn: bool) {
            let c = QosConfig { trust: if trust == 0 { Trust::Pcp } else { Trust::Dscp }, pfc, ecn, ..QosConfig::default() };
            let k = c.data_class(tc, sl);
            proptest::prop_assert!(k.priority < 8);
            proptest::prop_assert_eq!(k.tos >> 2, tc >> 2);
        }

        #[test]
        fn parsers_never_panic(input in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80)) {
            let _ = parse_trust(&input);
            let _ = parse_priorities(&input);
            let _ = parse_single(&input, 1000);
            let mut t = [0u8; DSCPS];
            let _ = parse_dscp_prio(&input, &mut t);
            proptest::prop_assert!(t.iter().all(|&p| p < 8));
        }
    }
}
