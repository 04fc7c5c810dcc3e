// SPDX-License-Identifier: GPL-2.0
//! Receive path, first stage (softirq): every datagram to port 4791 is
//! attributed to the rroce device of its netdev, its ICRC and headers are
//! checked once, and anything invalid is dropped and counted.

use crate::counters::Counter;
use crate::device::Rroce;
use crate::ib::DeviceRef;
use crate::net::{Skb, UdpReceiver};
use crate::proto::{icrc, wire};

const UDP_HDR: usize = 8;

/// Length of the IP header of a RoCEv2 packet; ICRC checking accepted it.
fn ip_header_len(pkt: &[u8]) -> usize {
    match pkt.first().map(|b| b >> 4) {
        Some(6) => 40,
        _ => 20,
    }
}

impl UdpReceiver for Rroce {
    fn receive(mut skb: Skb) {
        let Some(dev) = skb.dev().and_then(DeviceRef::<Rroce>::by_netdev) else {
            // Not a netdev of ours (rroce binds the port namespace-wide).
            return;
        };
        let counters = &dev.data().counters;
        if skb.linearize().is_err() {
            counters.inc(Counter::RcvdDropped);
            return;
        }
        let pkt = skb.ip_packet();
        if !matches!(icrc::verify(pkt), Ok(true)) {
            counters.inc(Counter::RcvdIcrcErr);
            return;
        }
        let Some(payload) = pkt.get(ip_header_len(pkt) + UDP_HDR..) else {
            counters.inc(Counter::RcvdMalformed);
            return;
        };
        match wire::Packet::parse(payload) {
            Ok(_) => counters.inc(Counter::RcvdPkts),
            Err(_) => counters.inc(Counter::RcvdMalformed),
        }
    }
}
