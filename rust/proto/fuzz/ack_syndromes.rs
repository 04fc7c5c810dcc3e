// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets: AETH syndromes and retry counters (`aeth`).

use super::*;

#[derive(Clone, Debug)]
enum RetryStep {
    Consume,
    Reset,
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn syndrome_any_byte(b in any::<u8>(), kind in 0u8..3, v in any::<u8>()) {
        match Syndrome::decode(b) {
            Some(s) => prop_assert_eq!(s.encode(), b),
            None => prop_assert!(b & 0x80 != 0 || b & 0x60 == 0x40 || (b & 0x60 == 0x60 && b & 0x1f > 4)),
        }
        let s = match kind {
            0 => Syndrome::Ack { credits: v },
            1 => Syndrome::RnrNak { timer: v },
            _ => Syndrome::Nak(NakCode::from_u8(v % 5).unwrap()),
        };
        let back = Syndrome::decode(s.encode()).unwrap();
        let want = match s {
            Syndrome::Ack { credits } => Syndrome::Ack { credits: credits & 0x1f },
            Syndrome::RnrNak { timer } => Syndrome::RnrNak { timer: timer & 0x1f },
            nak => nak,
        };
        prop_assert_eq!(back, want);
        prop_assert_eq!(NakCode::from_u8(v).is_some(), v < 5);
    }

    #[test]
    fn aeth_tables_any_input(code in any::<u8>(), wqes in prop_oneof![0u32..40_000, any::<u32>()]) {
        prop_assert_eq!(aeth::credit_count(code).is_some(), code < aeth::CREDITS_INVALID);
        let c = aeth::credit_code(wqes);
        prop_assert!(c < aeth::CREDITS_INVALID);
        prop_assert!(u32::from(aeth::credit_count(c).unwrap()) <= wqes);
        prop_assert_eq!(aeth::rnr_timer_us(code), aeth::rnr_timer_us(code & 0x1f));
        prop_assert!(aeth::rnr_timer_us(code) >= 10);
        match aeth::ack_timeout_ns(code) {
            Some(ns) => prop_assert_eq!(ns, 4096u64 << code),
            None => prop_assert!(code == 0 || code > 31),
        }
    }

    #[test]
    fn retry_counter_any_sequence(count in any::<u8>(), rnr in any::<bool>(),
                                  steps in vec(prop_oneof![3 => Just(RetryStep::Consume), 1 => Just(RetryStep::Reset)],
                                               0..40)) {
        let mut c = if rnr { RetryCounter::rnr(count) } else { RetryCounter::transport(count) };
        let initial = count & RetryCounter::MAX;
        let infinite = rnr && initial == RetryCounter::MAX;
        let mut left = initial;
        for step in steps {
            match step {
                RetryStep::Consume => {
                    let want = infinite || left > 0;
                    if !infinite && left > 0 {
                        left -= 1;
                    }
                    prop_assert_eq!(c.consume(), want);
                }
                RetryStep::Reset => {
                    c.reset();
                    left = initial;
                }
            }
            prop_assert_eq!(c.remaining(), if infinite { None } else { Some(left) });
        }
    }
}
