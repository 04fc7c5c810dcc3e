// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets: Responder sequence checks (`resp_seq`).

use super::*;

#[derive(Clone, Debug)]
enum SeqStep {
    Packet(u8),
    /// A PSN gap (UC) or a silently dropped message.
    Abort,
}

fn seq_run() -> impl Strategy<Value = (Transport, Vec<SeqStep>)> {
    select(&TRANSPORTS[..]).prop_flat_map(|t| {
        let mut requests: Vec<u8> = known_opcodes()
            .into_iter()
            .filter(|&o| matches!(op_info(o), Some(i) if i.has(flags::REQUEST) && i.transport == t))
            .collect();
        if requests.is_empty() {
            requests = known_opcodes();
        }
        let step = prop_oneof![
            6 => select(requests).prop_map(SeqStep::Packet),
            2 => any::<u8>().prop_map(SeqStep::Packet),
            1 => Just(SeqStep::Abort),
        ];
        (Just(t), vec(step, 0..64))
    })
}

fn position() -> impl Strategy<Value = Position> {
    select(&[Position::First, Position::Middle, Position::Last, Position::Only][..])
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn classify_any_psns(e in any::<u32>(), g in prop_oneof![any::<u32>(), Just(0), Just(PSN_MASK), Just(1 << 23)]) {
        let (e, g) = (Psn::new(e), Psn::new(g));
        let want = if g == e {
            PsnClass::Expected
        } else if g.before(e) {
            PsnClass::Duplicate
        } else {
            PsnClass::OutOfSequence
        };
        prop_assert_eq!(classify(e, g), want);
        // The two windows split the PSN space: 2^23 behind, 2^23 - 1 ahead.
        let ahead = g.get().wrapping_sub(e.get()) & PSN_MASK;
        prop_assert_eq!(want == PsnClass::OutOfSequence, ahead != 0 && ahead < 1 << 23);
    }

    /// Accepted packets always form whole messages: no MIDDLE or LAST
    /// without the FIRST of the same operation, no FIRST inside a message.
    #[test]
    fn op_seq_accepts_only_well_formed_messages((t, steps) in seq_run()) {
        let mut seq = OpSeq::new(t);
        // SEND or WRITE flag of the message in progress.
        let mut open: Option<u32> = None;
        for step in steps {
            let opcode = match step {
                SeqStep::Abort => {
                    prop_assert_eq!(seq.abort(), open.is_some());
                    open = None;
                    continue;
                }
                SeqStep::Packet(o) => o,
            };
            let out = seq.check(opcode);
            prop_assert_eq!(seq.transport(), t);
            let Some(info) = op_info(opcode).filter(|i| i.has(flags::REQUEST) && i.transport == t) else {
                prop_assert_eq!(out, SeqOutcome::Ignore, "opcode {:#x}", opcode);
                prop_assert_eq!(seq.in_progress(), open.is_some());
                continue;
            };
            let family = info.flags & (flags::SEND | flags::WRITE);
            let start = info.has(flags::START);
            let fits = if start { open.is_none() } else { open == Some(family) };
            let want = if fits {
                SeqOutcome::Accept
            } else if t == Transport::Rc {
                SeqOutcome::InvalidRequest
            } else if start {
                SeqOutcome::RestartMessage
            } else {
                SeqOutcome::DropUntilNewMessage
            };
            prop_assert_eq!(out, want, "opcode {:#x} after {:?}", opcode, open);
            open = match out {
                SeqOutcome::Accept | SeqOutcome::RestartMessage if !info.has(flags::END) => Some(family),
                _ => None,
            };
            prop_assert_eq!(seq.in_progress(), open.is_some());
            prop_assert!(open != Some(0), "a READ or atomic left a message open");
        }
    }

    #[test]
    fn payload_and_pad_checks_any_input(pos in position(), len in prop_oneof![0usize..=8200, any::<usize>()],
                                        mtu in mtu(), pad in any::<u8>(), opcode in any::<u8>()) {
        let r = validate_payload(pos, len, mtu);
        let m = mtu as usize;
        let ok = match pos {
            Position::First | Position::Middle => len == m,
            Position::Last => (1..=m).contains(&len),
            Position::Only => len <= m,
        };
        prop_assert_eq!(r.is_ok(), ok);
        if let Err(e) = r {
            prop_assert_ne!(e, LengthError::BadPad);
        }
        let pad_ok = pad < 4 && (len as u128 + u128::from(pad)).is_multiple_of(4);
        prop_assert_eq!(validate_pad(len, pad), if pad_ok { Ok(()) } else { Err(LengthError::BadPad) });
        let want = op_info(opcode).map(|i| match (i.has(flags::START), i.has(flags::END)) {
            (true, true) => Position::Only,
            (true, false) => Position::First,
            (false, false) => Position::Middle,
            (false, true) => Position::Last,
        });
        prop_assert_eq!(Position::of(opcode), want);
    }
}
