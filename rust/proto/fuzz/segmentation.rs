// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets: Segmentation of messages into packets (`segment`).

use super::*;

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
fn segment_packet(s: &super::super::segment::Segment, psn: Psn, seed: u8) -> Vec<u8> {
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
        let eight = matches!(kind, MsgKind::CompareSwap | MsgKind::FetchAdd | MsgKind::AtomicWrite);
        let want = if !MTUS.contains(&mtu) {
            Err(SegmentError::BadMtu)
        } else if !allowed(kind, t) {
            Err(SegmentError::Unsupported)
        } else if kind != MsgKind::Flush && (len > MAX_MSG_SIZE || (t == Transport::Ud && len > mtu)) {
            Err(SegmentError::TooLong)
        } else if eight && len != ATOMIC_LEN {
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
        let len = if matches!(kind, MsgKind::CompareSwap | MsgKind::FetchAdd | MsgKind::AtomicWrite) { ATOMIC_LEN } else { len };
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
