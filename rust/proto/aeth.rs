// SPDX-License-Identifier: GPL-2.0
//! Meaning of the AETH syndrome byte (IBTA 9.7.5.1) and of the timers and
//! retry counts that drive RC retransmission: the RNR NAK timer table, the
//! local ACK timeout and the QP's retry counters.
//!
//! Syndrome layout: bit 7 is reserved (0), bits 6..5 select ACK (00), RNR
//! NAK (01) or NAK (11), bits 4..0 carry the credit code, the RNR timer code
//! or the NAK code. Type 10 and NAK codes above 4 are reserved and rejected.

/// Bits that select the syndrome type, the reserved bit 7 included.
const TYPE_MASK: u8 = 0xe0;
const TYPE_ACK: u8 = 0x00;
const TYPE_RNR_NAK: u8 = 0x20;
const TYPE_NAK: u8 = 0x60;
/// Low five bits: credit code, timer code or NAK code.
const VALUE_MASK: u8 = 0x1f;

/// Credit code telling the requester that the responder does no end-to-end
/// flow control (an SRQ, or rdma_rxe's "unlimited" ACK).
pub const CREDITS_INVALID: u8 = 31;

/// Reason carried by a NAK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum NakCode {
    /// A request PSN was ahead of the expected one; the requester resends
    /// from the PSN the NAK carries.
    PsnSequenceError = 0,
    /// Bad opcode sequence, length or unsupported operation.
    InvalidRequest = 1,
    /// R_Key, access or bounds check failed.
    RemoteAccessError = 2,
    /// The responder could not carry out a valid request.
    RemoteOperationalError = 3,
    /// Invalid RD request; reliable datagram only, decoded for completeness.
    InvalidRdRequest = 4,
}

impl NakCode {
    /// How traces name a NAK (`nak_` and the code, as IBTA 9.7.5.2.4 names it).
    pub fn name(self) -> &'static core::ffi::CStr {
        match self {
            Self::PsnSequenceError => c"nak_psn_sequence_error",
            Self::InvalidRequest => c"nak_invalid_request",
            Self::RemoteAccessError => c"nak_remote_access_error",
            Self::RemoteOperationalError => c"nak_remote_operational_error",
            Self::InvalidRdRequest => c"nak_invalid_rd_request",
        }
    }
}

impl NakCode {
    /// The NAK code of a five-bit value; `None` for the reserved 5..=31.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::PsnSequenceError),
            1 => Some(Self::InvalidRequest),
            2 => Some(Self::RemoteAccessError),
            3 => Some(Self::RemoteOperationalError),
            4 => Some(Self::InvalidRdRequest),
            _ => None,
        }
    }
}

/// A decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syndrome {
    /// Positive acknowledgement.
    Ack {
        /// End-to-end credit code (low five bits), [`CREDITS_INVALID`] for none.
        credits: u8,
    },
    /// Receiver not ready: retry after the time [`rnr_timer_us`] gives.
    RnrNak {
        /// RNR timer code (low five bits).
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
}

impl Syndrome {
    /// The syndrome byte. Only the low five bits of `credits` and `timer`
    /// are encoded, as the field has no room for more.
    pub const fn encode(self) -> u8 {
        match self {
            Self::Ack { credits } => TYPE_ACK | (credits & VALUE_MASK),
            Self::RnrNak { timer } => TYPE_RNR_NAK | (timer & VALUE_MASK),
            Self::Nak(code) => TYPE_NAK | code as u8,
        }
    }

    /// Reads a syndrome byte; `None` for reserved encodings (bit 7 set, type
    /// 10, or a reserved NAK code).
    pub const fn decode(b: u8) -> Option<Self> {
        let v = b & VALUE_MASK;
        match b & TYPE_MASK {
            TYPE_ACK => Some(Self::Ack { credits: v }),
            TYPE_RNR_NAK => Some(Self::RnrNak { timer: v }),
            TYPE_NAK => match NakCode::from_u8(v) {
                Some(code) => Some(Self::Nak(code)),
                None => None,
            },
            _ => None,
        }
    }
}

/// Receive WQEs each credit code stands for; code 31 ([`CREDITS_INVALID`]) has none.
// The responder always advertises CREDITS_INVALID: only tests use the counts.
#[cfg(test)]
const CREDIT_COUNT: [u16; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048,
    3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// Receive WQEs a credit code advertises; `None` for [`CREDITS_INVALID`] or
/// a value that does not fit the five-bit field.
#[cfg(test)]
pub const fn credit_count(code: u8) -> Option<u16> {
    if code as usize >= CREDIT_COUNT.len() {
        return None;
    }
    Some(CREDIT_COUNT[code as usize])
}

/// The largest credit code that does not promise more than `wqes` posted
/// receive WQEs, so the requester never overruns the receive queue.
#[cfg(test)]
pub const fn credit_code(wqes: u32) -> u8 {
    let mut code = CREDIT_COUNT.len() - 1;
    while code > 0 && CREDIT_COUNT[code] as u32 > wqes {
        code -= 1;
    }
    code as u8
}

/// RNR NAK timer in microseconds, indexed by timer code. Code 0 is the
/// longest, 655.36 ms.
const RNR_TIMER_US: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
    5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840, 245_760,
    327_680, 491_520,
];

/// Microseconds a requester waits before retrying after an RNR NAK with
/// timer `code` (the `min_rnr_timer` QP attribute on the responder side).
/// Only the low five bits of `code` count, as on the wire.
pub const fn rnr_timer_us(code: u8) -> u32 {
    RNR_TIMER_US[(code & VALUE_MASK) as usize]
}

/// Nanoseconds of the local ACK timeout for the five-bit `timeout` QP
/// attribute: 4.096 us * 2^timeout. `None` for 0, which disables the timer,
/// and for values the attribute cannot hold.
pub const fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    match timeout {
        1..=31 => Some(4096u64 << timeout),
        _ => None,
    }
}

/// Retries left of one of a QP's three-bit retry attributes: `retry_cnt`,
/// spent when the requester retransmits after a local ACK timeout or a PSN
/// sequence error NAK, or `rnr_retry`, spent on RNR NAKs, where 7 means
/// retry forever.
// The requester keeps its own counts (rc/req.rs); tests check the rules here.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryCounter {
    initial: u8,
    left: u8,
    infinite: bool,
}

#[cfg(test)]
impl RetryCounter {
    /// Largest value of the attributes; as `rnr_retry` it means infinite.
    pub const MAX: u8 = 7;

    /// A `retry_cnt` counter: `count` (low three bits) retries, 7 included.
    pub const fn transport(count: u8) -> Self {
        let count = count & Self::MAX;
        Self { initial: count, left: count, infinite: false }
    }

    /// An `rnr_retry` counter: `count` (low three bits) retries, or no limit
    /// for 7.
    pub const fn rnr(count: u8) -> Self {
        let count = count & Self::MAX;
        Self { initial: count, left: count, infinite: count == Self::MAX }
    }

    /// Spends one retry. `false` when none is left: the WQE then completes
    /// with a retry-exceeded error.
    pub fn consume(&mut self) -> bool {
        if self.infinite {
            return true;
        }
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }

    /// Refills the counter; the requester does so whenever a response shows
    /// forward progress.
    pub fn reset(&mut self) {
        self.left = self.initial;
    }

    /// Retries left, `None` when unlimited.
    pub const fn remaining(&self) -> Option<u8> {
        if self.infinite {
            None
        } else {
            Some(self.left)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_bytes() {
        // rdma_rxe: AETH_ACK_UNLIMITED 0x1f, AETH_RNR_NAK 0x20, AETH_NAK_* 0x60..=0x63
        assert_eq!(Syndrome::decode(0x1f), Some(Syndrome::Ack { credits: CREDITS_INVALID }));
        assert_eq!(Syndrome::decode(0x00), Some(Syndrome::Ack { credits: 0 }));
        assert_eq!(Syndrome::decode(0x2e), Some(Syndrome::RnrNak { timer: 14 }));
        assert_eq!(Syndrome::decode(0x60), Some(Syndrome::Nak(NakCode::PsnSequenceError)));
        assert_eq!(Syndrome::decode(0x61), Some(Syndrome::Nak(NakCode::InvalidRequest)));
        assert_eq!(Syndrome::decode(0x62), Some(Syndrome::Nak(NakCode::RemoteAccessError)));
        assert_eq!(Syndrome::decode(0x63), Some(Syndrome::Nak(NakCode::RemoteOperationalError)));
        assert_eq!(Syndrome::decode(0x64), Some(Syndrome::Nak(NakCode::InvalidRdRequest)));
        assert_eq!(Syndrome::Nak(NakCode::RemoteAccessError).encode(), 0x62);
        assert_eq!(Syndrome::RnrNak { timer: 31 }.encode(), 0x3f);
        assert_eq!(Syndrome::Ack { credits: CREDITS_INVALID }.encode(), 0x1f);
    }

    #[test]
    fn reserved_encodings_are_rejected() {
        for b in 0x65..=0x7f {
            assert_eq!(Syndrome::decode(b), None, "{b:#x}");
        }
        for b in 0x40..=0x5f {
            assert_eq!(Syndrome::decode(b), None, "{b:#x}");
        }
        for b in 0x80..=0xff {
            assert_eq!(Syndrome::decode(b), None, "{b:#x}");
        }
        for v in 5..=31 {
            assert_eq!(NakCode::from_u8(v), None);
        }
    }

    #[test]
    fn every_valid_byte_round_trips() {
        let mut valid = 0;
        for b in 0..=255u8 {
            if let Some(s) = Syndrome::decode(b) {
                assert_eq!(s.encode(), b);
                valid += 1;
            }
        }
        // 32 ACK credit codes, 32 RNR timer codes, 5 NAK codes
        assert_eq!(valid, 69);
    }

    #[test]
    fn rnr_table() {
        assert_eq!(rnr_timer_us(0), 655_360);
        assert_eq!(rnr_timer_us(1), 10);
        assert_eq!(rnr_timer_us(12), 640);
        assert_eq!(rnr_timer_us(14), 1280);
        assert_eq!(rnr_timer_us(31), 491_520);
        // each step is x1.5 or x4/3 (the table has two entries per doubling)
        for c in 2..=31u8 {
            let (a, b) = (rnr_timer_us(c - 1), rnr_timer_us(c));
            assert!(b > a, "code {c}");
            assert!(b * 2 == a * 3 || b * 3 == a * 4 || b == a * 2, "code {c}: {a} -> {b}");
        }
        assert!(rnr_timer_us(0) > rnr_timer_us(31));
    }

    #[test]
    fn ack_timeout() {
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(1), Some(8192));
        // 14 is the usual default: about 67 ms
        assert_eq!(ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(ack_timeout_ns(31), Some(1 << 43));
        assert_eq!(ack_timeout_ns(32), None);
        assert_eq!(ack_timeout_ns(255), None);
    }

    #[test]
    fn credits() {
        assert_eq!(credit_count(0), Some(0));
        assert_eq!(credit_count(5), Some(6));
        assert_eq!(credit_count(30), Some(32768));
        assert_eq!(credit_count(CREDITS_INVALID), None);
        assert_eq!(credit_count(200), None);
        assert_eq!(credit_code(0), 0);
        assert_eq!(credit_code(5), 4);
        assert_eq!(credit_code(6), 5);
        assert_eq!(credit_code(u32::MAX), 30);
        for c in 0..31u8 {
            assert_eq!(credit_code(credit_count(c).unwrap() as u32), c);
        }
    }

    #[test]
    fn retry_counters() {
        let mut t = RetryCounter::transport(7);
        for _ in 0..7 {
            assert!(t.consume());
        }
        assert!(!t.consume());
        assert_eq!(t.remaining(), Some(0));
        t.reset();
        assert_eq!(t.remaining(), Some(7));

        let mut r = RetryCounter::rnr(7);
        for _ in 0..10_000 {
            assert!(r.consume());
        }
        assert_eq!(r.remaining(), None);

        let mut z = RetryCounter::rnr(0);
        assert!(!z.consume());
        // only three bits count
        assert_eq!(RetryCounter::transport(9).remaining(), Some(1));
        assert_eq!(RetryCounter::rnr(15).remaining(), None);
    }

    proptest! {
        #[test]
        fn decode_never_misreads(b in any::<u8>()) {
            match Syndrome::decode(b) {
                Some(s) => prop_assert_eq!(s.encode(), b),
                None => prop_assert!(b & 0x80 != 0 || b & 0x60 == 0x40 || (b & 0x60 == 0x60 && b & 0x1f > 4)),
            }
        }

        #[test]
        fn encode_then_decode(kind in 0u8..3, v in 0u8..32) {
            let s = match kind {
                0 => Syndrome::Ack { credits: v },
                1 => Syndrome::RnrNak { timer: v },
                _ => Syndrome::Nak(NakCode::from_u8(v % 5).unwrap()),
            };
            prop_assert_eq!(Syndrome::decode(s.encode()), Some(s));
        }

        #[test]
        fn encode_masks_out_of_range_fields(v in any::<u8>()) {
            // a too-large field never changes the syndrome type
            let ack = Syndrome::decode(Syndrome::Ack { credits: v }.encode());
            let rnr = Syndrome::decode(Syndrome::RnrNak { timer: v }.encode());
            prop_assert_eq!(ack, Some(Syndrome::Ack { credits: v & 0x1f }));
            prop_assert_eq!(rnr, Some(Syndrome::RnrNak { timer: v & 0x1f }));
            prop_assert_eq!(rnr_timer_us(v), rnr_timer_us(v & 0x1f));
        }

        #[test]
        fn credit_code_is_the_largest_safe_one(wqes in any::<u32>()) {
            let c = credit_code(wqes);
            let n = credit_count(c).unwrap() as u32;
            prop_assert!(n <= wqes);
            if let Some(next) = credit_count(c + 1) {
                prop_assert!(next as u32 > wqes);
            }
        }

        #[test]
        fn ack_timeout_doubles(t in 1u8..31) {
            prop_assert_eq!(ack_timeout_ns(t + 1).unwrap(), 2 * ack_timeout_ns(t).unwrap());
        }

        #[test]
        fn finite_counters_allow_exactly_count_retries(
            n in 0u8..7,
            rnr in any::<bool>(),
            extra in 1usize..20,
        ) {
            let mut c = if rnr { RetryCounter::rnr(n) } else { RetryCounter::transport(n) };
            for _ in 0..n {
                prop_assert!(c.consume());
            }
            for _ in 0..extra {
                prop_assert!(!c.consume());
            }
            c.reset();
            prop_assert_eq!(c.remaining(), Some(n));
        }
    }
}
