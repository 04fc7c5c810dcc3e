// SPDX-License-Identifier: GPL-2.0
//! RC atomics (IBTA 9.4.5, 9.7.5.1.7): the two operations, what the
//! responder checks before executing one, and the value each leaves behind.
//! The responder executes them with the CPU's own atomic instructions, so
//! they are atomic across every QP and against local CPU access; this module
//! says what those instructions must compute, for tests and for the checks.

use super::wire::AtomicEth;

/// Bytes an atomic reads and writes, and the alignment its address needs.
pub const ATOMIC_BYTES: u64 = 8;

/// An atomic operation on one 8-byte value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Writes `swap` if the value equals `compare`.
    CompareSwap { compare: u64, swap: u64 },
    /// Adds `add`, wrapping.
    FetchAdd { add: u64 },
    /// Stores `value` (ATOMIC WRITE, IBTA annex A19), ordered after every
    /// earlier access. It has no AtomicETH: the value travels as payload.
    Store { value: u64 },
}

impl AtomicOp {
    /// The value the operation leaves in place of `old`.
    #[cfg(test)]
    pub const fn apply(self, old: u64) -> u64 {
        match self {
            Self::CompareSwap { compare, swap } => {
                if old == compare {
                    swap
                } else {
                    old
                }
            }
            Self::FetchAdd { add } => old.wrapping_add(add),
            Self::Store { value } => value,
        }
    }

    /// The operation an atomic request of `opcode` (without transport bits)
    /// asks for with its AtomicETH.
    pub const fn of_request(opcode: u8, eth: &AtomicEth) -> Option<Self> {
        match opcode & 0x1f {
            super::wire::op::COMPARE_SWAP => Some(Self::CompareSwap { compare: eth.compare, swap: eth.swap_add }),
            super::wire::op::FETCH_ADD => Some(Self::FetchAdd { add: eth.swap_add }),
            _ => None,
        }
    }

    /// The AtomicETH fields (swap or addend, compare) of a request; `None`
    /// for a store, which is sent without one.
    pub const fn eth_values(self) -> Option<(u64, u64)> {
        match self {
            Self::CompareSwap { compare, swap } => Some((swap, compare)),
            Self::FetchAdd { add } => Some((add, 0)),
            Self::Store { .. } => None,
        }
    }
}

/// Whether `va` may be the target of an atomic: 8-byte aligned. A
/// misaligned one is refused with an Invalid Request NAK, as rdma_rxe does.
pub const fn aligned(va: u64) -> bool {
    va % ATOMIC_BYTES == 0
}

#[cfg(test)]
mod tests {
    use super::super::wire::op;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn compare_swap_swaps_only_on_equal() {
        let cas = AtomicOp::CompareSwap { compare: 5, swap: 9 };
        assert_eq!(cas.apply(5), 9);
        assert_eq!(cas.apply(6), 6);
    }

    #[test]
    fn fetch_add_wraps() {
        assert_eq!(AtomicOp::FetchAdd { add: 2 }.apply(u64::MAX), 1);
    }

    #[test]
    fn store_replaces_and_has_no_eth() {
        assert_eq!(AtomicOp::Store { value: 4 }.apply(9), 4);
        assert_eq!(AtomicOp::Store { value: 4 }.eth_values(), None);
    }

    #[test]
    fn requests_decode_from_the_eth() {
        let eth = AtomicEth { va: 0x1000, rkey: 3, swap_add: 7, compare: 1 };
        assert_eq!(AtomicOp::of_request(op::RC | op::COMPARE_SWAP, &eth), Some(AtomicOp::CompareSwap { compare: 1, swap: 7 }));
        assert_eq!(AtomicOp::of_request(op::RC | op::FETCH_ADD, &eth), Some(AtomicOp::FetchAdd { add: 7 }));
        assert_eq!(AtomicOp::of_request(op::RC | op::READ_REQUEST, &eth), None);
    }

    #[test]
    fn alignment() {
        assert!(aligned(0) && aligned(0x1008));
        assert!(!aligned(0x1004) && !aligned(u64::MAX));
    }

    proptest! {
        #[test]
        fn eth_values_round_trip(compare: u64, swap: u64, add: u64) {
            for a in [AtomicOp::CompareSwap { compare, swap }, AtomicOp::FetchAdd { add }] {
                let (swap_add, compare) = a.eth_values().unwrap();
                let eth = AtomicEth { va: 0, rkey: 0, swap_add, compare };
                let code = if matches!(a, AtomicOp::CompareSwap { .. }) { op::COMPARE_SWAP } else { op::FETCH_ADD };
                prop_assert_eq!(AtomicOp::of_request(code, &eth), Some(a));
            }
        }

        #[test]
        fn fetch_adds_commute(start: u64, adds in proptest::collection::vec(any::<u64>(), 0..16)) {
            let forward = adds.iter().fold(start, |v, &a| AtomicOp::FetchAdd { add: a }.apply(v));
            let backward = adds.iter().rev().fold(start, |v, &a| AtomicOp::FetchAdd { add: a }.apply(v));
            prop_assert_eq!(forward, backward);
        }
    }
}
