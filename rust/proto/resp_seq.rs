// SPDX-License-Identifier: GPL-2.0
//! Responder checks of an incoming request before it touches memory: where
//! its PSN lies relative to the expected one, whether its opcode may follow
//! the previous packet, and whether its payload length fits its place in the
//! message.
//!
//! RC calls [`OpSeq::check`] only for packets whose PSN is the expected one:
//! duplicates are answered from the responder's history and PSNs ahead of
//! it are NAKed with a sequence error, neither touching the opcode state.
//!
//! UC has no duplicates or NAKs. On any PSN other than the expected one the
//! responder calls [`OpSeq::abort`] (a packet was lost, so the message in
//! progress is), then [`OpSeq::check`]; if that accepts the packet, the
//! expected PSN restarts from the packet's PSN. [`OpSeq::abort`] also serves
//! UC errors that silently drop the rest of a message (R_Key, length).

use super::psn::Psn;
use super::wire::{flags, op_info, Transport};

/// Where a request PSN lies relative to the expected PSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsnClass {
    /// The expected PSN: process the packet.
    Expected,
    /// In the 2^23 PSNs before the expected one: already executed, so RC
    /// replays the response (re-ACK, READ response, atomic result).
    Duplicate,
    /// In the 2^23 - 1 PSNs after the expected one: packets were lost, RC
    /// NAKs with a PSN sequence error.
    OutOfSequence,
}

/// Classifies request PSN `got` against the responder's expected PSN.
pub const fn classify(expected: Psn, got: Psn) -> PsnClass {
    let d = got.diff(expected);
    if d == 0 {
        PsnClass::Expected
    } else if d < 0 {
        PsnClass::Duplicate
    } else {
        PsnClass::OutOfSequence
    }
}

/// What the responder does with a packet after the opcode sequence check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqOutcome {
    /// The opcode may come here: go on with the packet.
    Accept,
    /// UC: a FIRST or ONLY arrived while a message was in progress. That
    /// message is lost (rewind its receive WQE, complete nothing) and this
    /// packet starts a new one.
    RestartMessage,
    /// RC: MIDDLE or LAST without a message in progress, or a packet other
    /// than MIDDLE or LAST of the same operation within one. NAK with
    /// Invalid Request; the QP goes to the error state.
    InvalidRequest,
    /// UC: drop the packet silently, and with it any message in progress;
    /// later MIDDLE and LAST packets are dropped until a FIRST or ONLY.
    DropUntilNewMessage,
    /// Not a request opcode of this QP's transport: drop it silently, the
    /// sequence state stays as it was.
    Ignore,
}

/// Operation whose FIRST packet has been accepted and whose LAST has not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InProgress {
    None,
    Send,
    Write,
}

/// Responder state of the multi-packet SEND or WRITE in progress on a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSeq {
    transport: Transport,
    cur: InProgress,
}

impl OpSeq {
    /// State of a fresh QP of `transport`, between messages.
    pub const fn new(transport: Transport) -> Self {
        Self { transport, cur: InProgress::None }
    }

    /// Transport the state machine checks for.
    pub const fn transport(&self) -> Transport {
        self.transport
    }

    /// Whether a FIRST has been accepted and its LAST has not.
    pub const fn in_progress(&self) -> bool {
        !matches!(self.cur, InProgress::None)
    }

    /// Forgets the message in progress; `true` if there was one, whose
    /// partly filled receive WQE the caller rewinds.
    pub fn abort(&mut self) -> bool {
        let was = self.in_progress();
        self.cur = InProgress::None;
        was
    }

    /// Checks that `opcode` may follow the packets accepted so far and
    /// advances the state.
    pub fn check(&mut self, opcode: u8) -> SeqOutcome {
        let info = match op_info(opcode) {
            Some(i) if i.has(flags::REQUEST) && i.transport == self.transport => i,
            _ => return SeqOutcome::Ignore,
        };
        let family = if info.has(flags::SEND) {
            InProgress::Send
        } else if info.has(flags::WRITE) {
            InProgress::Write
        } else {
            // READ requests and atomics are single packets and never continue a message.
            InProgress::None
        };
        let start = info.has(flags::START);
        let after = if info.has(flags::END) { InProgress::None } else { family };
        let continues = !start && family == self.cur;
        match self.cur {
            InProgress::None if start => {
                self.cur = after;
                SeqOutcome::Accept
            }
            InProgress::Send | InProgress::Write if continues => {
                self.cur = after;
                SeqOutcome::Accept
            }
            InProgress::Send | InProgress::Write if start && !self.is_rc() => {
                self.cur = after;
                SeqOutcome::RestartMessage
            }
            _ => {
                self.cur = InProgress::None;
                if self.is_rc() {
                    SeqOutcome::InvalidRequest
                } else {
                    SeqOutcome::DropUntilNewMessage
                }
            }
        }
    }

    const fn is_rc(&self) -> bool {
        matches!(self.transport, Transport::Rc)
    }
}

/// Place of a packet in its message, from the START and END opcode flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// FIRST: starts a message that continues.
    First,
    /// MIDDLE.
    Middle,
    /// LAST: ends a message that began earlier.
    Last,
    /// ONLY: the whole message, also every packet without payload.
    Only,
}

impl Position {
    /// Position of a packet of `opcode`; `None` for opcodes rroce does not speak.
    pub const fn of(opcode: u8) -> Option<Self> {
        match op_info(opcode) {
            Some(i) => Some(match (i.has(flags::START), i.has(flags::END)) {
                (true, true) => Self::Only,
                (true, false) => Self::First,
                (false, false) => Self::Middle,
                (false, true) => Self::Last,
            }),
            None => None,
        }
    }
}

/// Why a packet's payload length or pad does not fit its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LengthError {
    /// FIRST or MIDDLE packet not carrying exactly the path MTU.
    NotFull,
    /// More payload than the path MTU.
    TooLong,
    /// LAST packet without payload: the message would have ended before it.
    EmptyLast,
    /// Pad count that does not round the payload up to a multiple of 4.
    #[cfg(test)]
    BadPad,
}

/// Checks the payload length of a packet at `pos` against the QP's path MTU
/// of `mtu` bytes: FIRST and MIDDLE carry exactly the MTU, LAST 1..=MTU,
/// ONLY 0..=MTU. Length errors are Invalid Request NAKs on RC and silent
/// drops on UC and UD.
pub const fn validate_payload(pos: Position, payload_len: usize, mtu: u32) -> Result<(), LengthError> {
    let mtu = mtu as usize;
    match pos {
        Position::First | Position::Middle if payload_len != mtu => Err(LengthError::NotFull),
        Position::Last if payload_len == 0 => Err(LengthError::EmptyLast),
        _ if payload_len > mtu => Err(LengthError::TooLong),
        _ => Ok(()),
    }
}

/// Checks the BTH pad count: payload plus pad is a multiple of 4 and the pad
/// below 4, so only a LAST or ONLY packet of odd length has any. Like
/// rdma_rxe, the responder does not check it; tests do.
#[cfg(test)]
pub const fn validate_pad(payload_len: usize, pad: u8) -> Result<(), LengthError> {
    if pad as usize == payload_len.wrapping_neg() & 3 {
        Ok(())
    } else {
        Err(LengthError::BadPad)
    }
}

#[cfg(test)]
mod tests {
    use super::super::psn::PSN_MASK;
    use super::super::segment::{Message, MsgKind};
    use super::super::wire::op;
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn psn_classes() {
        let e = Psn::new(100);
        assert_eq!(classify(e, Psn::new(100)), PsnClass::Expected);
        assert_eq!(classify(e, Psn::new(99)), PsnClass::Duplicate);
        assert_eq!(classify(e, Psn::new(101)), PsnClass::OutOfSequence);
        // across the wrap
        let e = Psn::new(1);
        assert_eq!(classify(e, Psn::new(PSN_MASK)), PsnClass::Duplicate);
        assert_eq!(classify(Psn::new(PSN_MASK), Psn::new(0)), PsnClass::OutOfSequence);
        // the window edges: 2^23 behind is still a duplicate, 2^23 - 1 ahead is not
        let e = Psn::new(0);
        assert_eq!(classify(e, Psn::new(1 << 23)), PsnClass::Duplicate);
        assert_eq!(classify(e, Psn::new((1 << 23) - 1)), PsnClass::OutOfSequence);
    }

    const KINDS: [MsgKind; 10] = MsgKind::ALL;

    fn run(t: Transport, ops: &[u8]) -> Vec<SeqOutcome> {
        let mut s = OpSeq::new(t);
        ops.iter().map(|&o| s.check(o)).collect()
    }

    #[test]
    fn rc_sequences() {
        use SeqOutcome::*;
        let rc = |o: u8| op::RC | o;
        assert_eq!(
            run(
                Transport::Rc,
                &[
                    rc(op::SEND_FIRST),
                    rc(op::SEND_MIDDLE),
                    rc(op::SEND_LAST_INV),
                    rc(op::READ_REQUEST),
                    rc(op::WRITE_FIRST),
                    rc(op::WRITE_LAST_IMM),
                    rc(op::COMPARE_SWAP),
                    rc(op::SEND_ONLY),
                ]
            ),
            [Accept; 8]
        );
        assert_eq!(run(Transport::Rc, &[rc(op::SEND_MIDDLE)]), [InvalidRequest]);
        assert_eq!(run(Transport::Rc, &[rc(op::WRITE_LAST)]), [InvalidRequest]);
        assert_eq!(run(Transport::Rc, &[rc(op::SEND_FIRST), rc(op::WRITE_MIDDLE)]), [Accept, InvalidRequest]);
        assert_eq!(run(Transport::Rc, &[rc(op::WRITE_FIRST), rc(op::SEND_LAST)]), [Accept, InvalidRequest]);
        assert_eq!(run(Transport::Rc, &[rc(op::SEND_FIRST), rc(op::SEND_ONLY)]), [Accept, InvalidRequest]);
        assert_eq!(run(Transport::Rc, &[rc(op::SEND_FIRST), rc(op::SEND_FIRST)]), [Accept, InvalidRequest]);
        assert_eq!(
            run(Transport::Rc, &[rc(op::WRITE_FIRST), rc(op::READ_REQUEST)]),
            [Accept, InvalidRequest]
        );
        assert_eq!(run(Transport::Rc, &[rc(op::SEND_FIRST), rc(op::FETCH_ADD)]), [Accept, InvalidRequest]);
    }

    #[test]
    fn uc_sequences() {
        use SeqOutcome::*;
        let uc = |o: u8| op::UC | o;
        assert_eq!(
            run(
                Transport::Uc,
                &[
                    uc(op::SEND_MIDDLE),
                    uc(op::SEND_LAST),
                    uc(op::SEND_ONLY),
                    uc(op::WRITE_FIRST),
                    uc(op::WRITE_LAST),
                ]
            ),
            [DropUntilNewMessage, DropUntilNewMessage, Accept, Accept, Accept]
        );
        // a new message while one is in progress replaces it
        assert_eq!(
            run(
                Transport::Uc,
                &[uc(op::SEND_FIRST), uc(op::WRITE_FIRST), uc(op::WRITE_MIDDLE), uc(op::WRITE_LAST)]
            ),
            [Accept, RestartMessage, Accept, Accept]
        );
        assert_eq!(
            run(Transport::Uc, &[uc(op::WRITE_FIRST), uc(op::SEND_ONLY_IMM), uc(op::WRITE_MIDDLE)]),
            [Accept, RestartMessage, DropUntilNewMessage]
        );
        // a wrong continuation loses the message and what follows of it
        assert_eq!(
            run(
                Transport::Uc,
                &[
                    uc(op::SEND_FIRST),
                    uc(op::WRITE_MIDDLE),
                    uc(op::SEND_MIDDLE),
                    uc(op::SEND_LAST),
                    uc(op::SEND_FIRST),
                ]
            ),
            [Accept, DropUntilNewMessage, DropUntilNewMessage, DropUntilNewMessage, Accept]
        );
    }

    #[test]
    fn uc_lost_packet() {
        let uc = |o: u8| op::UC | o;
        let mut s = OpSeq::new(Transport::Uc);
        assert_eq!(s.check(uc(op::SEND_FIRST)), SeqOutcome::Accept);
        // PSN gap: the caller aborts, then checks the packet that arrived
        assert!(s.abort());
        assert_eq!(s.check(uc(op::SEND_MIDDLE)), SeqOutcome::DropUntilNewMessage);
        assert!(!s.abort());
        assert_eq!(s.check(uc(op::SEND_FIRST)), SeqOutcome::Accept);
        assert!(s.in_progress());
    }

    #[test]
    fn foreign_opcodes_are_ignored() {
        let mut s = OpSeq::new(Transport::Rc);
        assert_eq!(s.check(op::RC | op::SEND_FIRST), SeqOutcome::Accept);
        for o in [
            op::UC | op::SEND_MIDDLE,
            op::UD | op::SEND_ONLY,
            op::RC | op::ACKNOWLEDGE,
            op::RC | op::READ_RESPONSE_MIDDLE,
            op::CNP,
            0x1f,
            0xff,
        ] {
            assert_eq!(s.check(o), SeqOutcome::Ignore, "{o:#x}");
        }
        assert!(s.in_progress());
        assert_eq!(s.check(op::RC | op::SEND_LAST), SeqOutcome::Accept);
        // UC has no SEND with invalidate
        let mut u = OpSeq::new(Transport::Uc);
        assert_eq!(u.check(op::UC | op::SEND_ONLY_INV), SeqOutcome::Ignore);
        // UD: every request is an ONLY
        let mut d = OpSeq::new(Transport::Ud);
        assert_eq!(d.check(op::UD | op::SEND_ONLY_IMM), SeqOutcome::Accept);
        assert!(!d.in_progress());
    }

    #[test]
    fn positions() {
        assert_eq!(Position::of(op::RC | op::SEND_FIRST), Some(Position::First));
        assert_eq!(Position::of(op::UC | op::WRITE_MIDDLE), Some(Position::Middle));
        assert_eq!(Position::of(op::RC | op::SEND_LAST_INV), Some(Position::Last));
        assert_eq!(Position::of(op::UD | op::SEND_ONLY), Some(Position::Only));
        assert_eq!(Position::of(op::RC | op::READ_REQUEST), Some(Position::Only));
        assert_eq!(Position::of(op::RC | op::READ_RESPONSE_MIDDLE), Some(Position::Middle));
        assert_eq!(Position::of(0x1f), None);
    }

    #[test]
    fn payload_lengths() {
        use LengthError::*;
        use Position::*;
        assert_eq!(validate_payload(First, 1024, 1024), Ok(()));
        assert_eq!(validate_payload(First, 1020, 1024), Err(NotFull));
        assert_eq!(validate_payload(Middle, 1028, 1024), Err(NotFull));
        assert_eq!(validate_payload(Last, 0, 1024), Err(EmptyLast));
        assert_eq!(validate_payload(Last, 1, 1024), Ok(()));
        assert_eq!(validate_payload(Last, 1025, 1024), Err(TooLong));
        assert_eq!(validate_payload(Only, 0, 256), Ok(()));
        assert_eq!(validate_payload(Only, 256, 256), Ok(()));
        assert_eq!(validate_payload(Only, 257, 256), Err(TooLong));
        assert_eq!(validate_pad(5, 3), Ok(()));
        assert_eq!(validate_pad(4, 0), Ok(()));
        assert_eq!(validate_pad(0, 0), Ok(()));
        assert_eq!(validate_pad(4, 1), Err(BadPad));
        assert_eq!(validate_pad(6, 3), Err(BadPad));
        assert_eq!(validate_pad(1, 7), Err(BadPad));
    }

    /// A model in the style of rdma_rxe's check_op_seq: it remembers the last
    /// accepted opcode and lists, per remembered opcode, what may follow.
    fn model(t: Transport, last: &mut Option<u8>, opcode: u8) -> SeqOutcome {
        let req = |o: u8| matches!(op_info(o), Some(i) if i.has(flags::REQUEST) && i.transport == t);
        if !req(opcode) {
            return SeqOutcome::Ignore;
        }
        let base = opcode & 0x1f;
        let in_send = matches!(last.map(|o| o & 0x1f), Some(op::SEND_FIRST | op::SEND_MIDDLE));
        let in_write = matches!(last.map(|o| o & 0x1f), Some(op::WRITE_FIRST | op::WRITE_MIDDLE));
        let send_cont =
            matches!(base, op::SEND_MIDDLE | op::SEND_LAST | op::SEND_LAST_IMM | op::SEND_LAST_INV);
        let write_cont = matches!(base, op::WRITE_MIDDLE | op::WRITE_LAST | op::WRITE_LAST_IMM);
        let ok = if in_send {
            send_cont
        } else if in_write {
            write_cont
        } else {
            !send_cont && !write_cont
        };
        let starts = !send_cont && !write_cont;
        let out = if ok {
            SeqOutcome::Accept
        } else if t == Transport::Rc {
            SeqOutcome::InvalidRequest
        } else if starts {
            SeqOutcome::RestartMessage
        } else {
            SeqOutcome::DropUntilNewMessage
        };
        *last = match out {
            SeqOutcome::Accept | SeqOutcome::RestartMessage => Some(opcode),
            _ => None,
        };
        out
    }

    fn arb_request(t: Transport) -> impl Strategy<Value = u8> {
        let ops: Vec<u8> = (0u16..=255)
            .map(|o| o as u8)
            .filter(|&o| matches!(op_info(o), Some(i) if i.has(flags::REQUEST) && i.transport == t))
            .collect();
        // mostly requests of the QP's transport, sometimes any byte
        prop_oneof![4 => proptest::sample::select(ops), 1 => any::<u8>()]
    }

    fn arb_run() -> impl Strategy<Value = (Transport, Vec<u8>)> {
        prop_oneof![Just(Transport::Rc), Just(Transport::Uc), Just(Transport::Ud)]
            .prop_flat_map(|t| (Just(t), proptest::collection::vec(arb_request(t), 0..40)))
    }

    proptest! {
        #[test]
        fn classify_matches_distance(e in 0u32..=PSN_MASK, n in 1u32..=(1 << 23)) {
            let e = Psn::new(e);
            prop_assert_eq!(classify(e, e), PsnClass::Expected);
            prop_assert_eq!(classify(e, e.add((1 << 24) - n)), PsnClass::Duplicate);
            if n < 1 << 23 {
                prop_assert_eq!(classify(e, e.add(n)), PsnClass::OutOfSequence);
            }
        }

        #[test]
        fn op_seq_matches_model((t, ops) in arb_run()) {
            let mut s = OpSeq::new(t);
            let mut last = None;
            for o in ops {
                let got = s.check(o);
                prop_assert_eq!(got, model(t, &mut last, o), "opcode {:#x}", o);
                if matches!(got, SeqOutcome::InvalidRequest | SeqOutcome::DropUntilNewMessage) {
                    prop_assert!(!s.in_progress());
                }
                if matches!(got, SeqOutcome::RestartMessage | SeqOutcome::DropUntilNewMessage) {
                    prop_assert_eq!(t, Transport::Uc);
                }
                if got == SeqOutcome::InvalidRequest {
                    prop_assert_eq!(t, Transport::Rc);
                }
            }
        }

        #[test]
        fn segmented_messages_pass_every_check(
            msgs in proptest::collection::vec((proptest::sample::select(&KINDS[..]), 0u32..10_000), 1..8),
            t in prop_oneof![Just(Transport::Rc), Just(Transport::Uc), Just(Transport::Ud)],
            shift in 8u32..=12,
        ) {
            let mtu = 1 << shift;
            let mut s = OpSeq::new(t);
            let mut expected = Psn::new(PSN_MASK - 3);
            for (kind, len) in msgs {
                let len = if kind.is_eight_bytes() { 8 } else { len };
                let Ok(m) = Message::new(kind, t, len, mtu) else { continue };
                let first = expected;
                for p in m.segments() {
                    let psn = first.add(p.psn_offset);
                    prop_assert_eq!(classify(expected, psn), PsnClass::Expected);
                    prop_assert_eq!(s.check(p.opcode), SeqOutcome::Accept);
                    let pos = Position::of(p.opcode).unwrap();
                    prop_assert_eq!(validate_payload(pos, p.len as usize, mtu), Ok(()));
                    prop_assert_eq!(validate_pad(p.len as usize, p.pad), Ok(()));
                    expected = psn.next();
                }
                // a READ consumes the PSNs of its responses
                expected = first.add(m.psn_count());
                prop_assert!(!s.in_progress());
            }
        }

        #[test]
        fn payload_rules(pos in 0u8..4, len in 0usize..9000, shift in 8u32..=12) {
            let mtu = 1u32 << shift;
            let pos = [Position::First, Position::Middle, Position::Last, Position::Only][pos as usize];
            let ok = match pos {
                Position::First | Position::Middle => len == mtu as usize,
                Position::Last => len >= 1 && len <= mtu as usize,
                Position::Only => len <= mtu as usize,
            };
            prop_assert_eq!(validate_payload(pos, len, mtu).is_ok(), ok);
        }

        #[test]
        fn exactly_one_pad_fits(len in any::<usize>()) {
            let good: Vec<u8> = (0u8..=255).filter(|&p| validate_pad(len, p).is_ok()).collect();
            prop_assert_eq!(good.len(), 1);
            prop_assert_eq!((len as u128 + good[0] as u128) % 4, 0);
        }
    }
}
