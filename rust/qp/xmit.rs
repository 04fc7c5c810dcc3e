// SPDX-License-Identifier: GPL-2.0
//! Transmit: builds a RoCEv2 packet (IP, UDP, transport headers, payload,
//! ICRC) for an address vector, routes it and sends it, or delivers it to a
//! local rroce device without the network.

use super::*;
use crate::net::{RouteCache, Routed};
use crate::proto::qos::TxClass;
use kernel::sync::rcu;

/// Source and destination of a packet, from the GIDs of an address vector.
enum IpPair {
    V4([u8; 4], [u8; 4]),
    V6([u8; 16], [u8; 16]),
}

impl IpPair {
    /// IPv4-mapped GIDs give IPv4; others IPv6; a mix cannot be routed.
    fn of(av: &RoceAv) -> Option<Self> {
        match (ip::ipv4_of_gid(&av.sgid), ip::ipv4_of_gid(&av.dgid)) {
            (Some(s), Some(d)) => Some(Self::V4(s, d)),
            (None, None) => Some(Self::V6(av.sgid, av.dgid)),
            _ => None,
        }
    }

    fn header_len(&self) -> usize {
        match self {
            Self::V4(..) => ip::IPV4_HDR,
            Self::V6(..) => ip::IPV6_HDR,
        }
    }
}

/// Builds one RoCEv2 packet to `av` with the headers of `pkt` and
/// `payload_len` bytes that `fill` writes, computes its ICRC and sends it,
/// with the priority and DS field the device's QoS settings give the QP's
/// traffic class and SL. Returns a completion status: local drops and
/// missing routes are losses the transport recovers from, not errors.
/// The packet counts in the QP's `credits` until it leaves the host.
#[allow(clippy::too_many_arguments)]
pub(super) fn emit(
    dev: &Device,
    av: &RoceAv,
    route: Option<&RouteCache>,
    flow: (u32, u32),
    pkt: &wire::Packet,
    credits: &Arc<TxCredits>,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> WcStatus,
) -> WcStatus {
    match emit_counted(dev, av, route, flow, pkt, credits, payload_len, fill) {
        Ok(_) => WcStatus::Success,
        Err(status) => status,
    }
}

/// What became of a packet the requester sent.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Transmit {
    /// On its way (or delivered locally).
    Sent,
    /// A local qdisc dropped it: nothing went out, send it again.
    LocalDrop,
}

/// A QP's packets that the host holds (a paused priority's qdisc, say).
/// While any are, the retry timer does not count a timeout (nothing was
/// lost), and the QP sends from the CPU it sent them from (`task::tx_home`),
/// so none is overtaken.
pub(crate) use crate::net::TxCredits;

/// [`emit`] for the requester: the packet is accounted to `credits` until it
/// leaves the host, and a local drop is reported so it goes out again.
#[allow(clippy::too_many_arguments)]
pub(super) fn emit_counted(
    dev: &Device,
    av: &RoceAv,
    route: Option<&RouteCache>,
    flow: (u32, u32),
    pkt: &wire::Packet,
    credits: &Arc<TxCredits>,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> WcStatus,
) -> core::result::Result<Transmit, WcStatus> {
    let class = dev.data().qos.data_class(av.traffic_class, av.sl);
    emit_as(dev, av, route, flow, pkt, class, Some(credits), payload_len, fill)
}

/// Bytes after the BTH of a RoCEv2 CNP (Annex A17.9.3): reserved, zero.
const CNP_RESERVED: usize = 16;

/// Sends CNP `pkt` to the peer of a QP, with the device's CNP priority and DSCP.
pub(super) fn emit_cnp(dev: &Device, av: &RoceAv, flow: (u32, u32), pkt: &wire::Packet) -> WcStatus {
    let class = dev.data().qos.cnp_class();
    let sent = emit_as(dev, av, None, flow, pkt, class, None, CNP_RESERVED, |b| {
        b.fill(0);
        WcStatus::Success
    });
    match sent {
        Ok(Transmit::Sent) => WcStatus::Success,
        Ok(Transmit::LocalDrop) => WcStatus::LocQpOpErr,
        Err(status) => status,
    }
}

/// [`emit`] with the class given, and the owner to account the packet to.
#[allow(clippy::too_many_arguments)]
fn emit_as(
    dev: &Device,
    av: &RoceAv,
    route: Option<&RouteCache>,
    flow: (u32, u32),
    pkt: &wire::Packet,
    class: TxClass,
    credits: Option<&Arc<TxCredits>>,
    payload_len: usize,
    fill: impl FnOnce(&mut [u8]) -> WcStatus,
) -> core::result::Result<Transmit, WcStatus> {
    let data = dev.data();
    let Some(info) = wire::op_info(pkt.bth.opcode) else { return Err(WcStatus::LocQpOpErr) };
    let Some(addrs) = IpPair::of(av) else { return Err(WcStatus::LocQpOpErr) };
    let hdr = info.hdr_len();
    let pad = pkt.bth.pad as usize;
    let start = addrs.header_len() + ip::UDP_HDR;
    let total = start + hdr + payload_len + pad + wire::ICRC_LEN;
    let Some(ndev) = dev.netdev() else { return Err(WcStatus::LocQpOpErr) };
    let Ok(mut tx) = TxSkb::alloc(&ndev, total, matches!(addrs, IpPair::V6(..))) else {
        // Atomic allocation under memory pressure: a loss the transport
        // recovers from, as a full qdisc is, not an error of the QP.
        data.counters.inc(Counter::TxLocalDrop);
        return Ok(Transmit::LocalDrop);
    };
    let b = tx.bytes_mut();
    let fl = if av.flow_label != 0 { av.flow_label } else { ip::calc_flow_label(flow.0, flow.1) };
    let ttl = if av.hop_limit == 0 { 64 } else { av.hop_limit };
    let sport = ip::udp_sport(fl);
    let written = match &addrs {
        IpPair::V4(s, d) => ip::write_ipv4_udp(b, *s, *d, class.tos, ttl, total as u16, sport),
        IpPair::V6(s, d) => ip::write_ipv6_udp(b, s, d, class.tos, ttl, fl, total as u16, sport),
    };
    if !written || pkt.encode_headers(&mut b[start..]) != Ok(hdr) {
        return Err(WcStatus::LocQpOpErr);
    }
    let body = start + hdr;
    fill(&mut b[body..body + payload_len]).result()?;
    b[body + payload_len..body + payload_len + pad].fill(0);
    if icrc::fill_with::<crate::net::KernelCrc32>(b).is_err() {
        return Err(WcStatus::LocQpOpErr);
    }
    // The netdev's namespace, which a move and `ip netns del` may take away at
    // any time, lasts while the RCU read lock is held: from the lookup to the
    // packet's hand-off (after the payload was copied, which may fault).
    let reader = rcu::read_lock();
    let net = ndev.net(&reader);
    // Out through the source GID's own interface: a VLAN's GID sends tagged,
    // with the PCP its egress map gives the priority.
    let oif = if av.ifindex != 0 { av.ifindex } else { ndev.ifindex() };
    let routed = match &addrs {
        IpPair::V4(s, d) => tx.route4(net, route, *s, *d, oif),
        IpPair::V6(s, d) => tx.route6(net, route, s, d, oif),
    };
    let sent = match routed {
        Ok(Routed::Out(mut out)) => {
            if let Some(credits) = credits {
                // A packet just allocated has no owner yet.
                if out.count_in(credits).is_err() {
                    return Err(WcStatus::LocQpOpErr);
                }
            }
            out.send(class, ndev.ifindex())
        }
        // To a local address: hand it to the receiving device directly, as the
        // stack would loop it back (and attribute it to `lo`, which has no rroce
        // device).
        Ok(Routed::Local(tx)) => {
            let local = match &addrs {
                IpPair::V4(_, d) => NetDev::by_local_ipv4(net, *d),
                IpPair::V6(_, d) => NetDev::by_local_ipv6(net, d),
            };
            match local.as_ref().and_then(|l| DeviceRef::<Rroce>::by_netdev(l).map(|t| (l, t))) {
                Some((local, target)) => {
                    data.counters.inc(Counter::SentPkts);
                    crate::rx::deliver_local(tx.into_received(local, &reader), target);
                }
                None => data.counters.inc(Counter::SendErr),
            }
            return Ok(Transmit::Sent);
        }
        Err(e) => Err(e),
    };
    drop(reader);
    let counters = &data.counters;
    match sent {
        Ok(XmitStatus::Sent) => counters.inc(Counter::SentPkts),
        Ok(XmitStatus::Congested) => {
            counters.inc(Counter::SentPkts);
            counters.inc(Counter::TxLocalCongestion);
        }
        Ok(XmitStatus::Dropped) => counters.inc(Counter::TxLocalDrop),
        Err(_) => counters.inc(Counter::SendErr),
    }
    if matches!(sent, Ok(XmitStatus::Sent | XmitStatus::Congested)) {
        counters.inc(Counter::tx_prio(class.priority));
    }
    // A route missing now may appear; the transport's timer covers it.
    Ok(if matches!(sent, Ok(XmitStatus::Dropped)) { Transmit::LocalDrop } else { Transmit::Sent })
}
