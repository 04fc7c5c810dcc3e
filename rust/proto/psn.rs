// SPDX-License-Identifier: GPL-2.0
//! Packet sequence numbers: 24-bit counters that wrap. Two PSNs compare by
//! their signed distance modulo 2^24, which is meaningful while the window of
//! PSNs in flight stays below 2^23 (IBTA 9.7.1).

/// A 24-bit packet sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Psn(u32);

/// Mask of the 24 PSN bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;

impl Psn {
    /// A PSN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Self {
        Self(v & PSN_MASK)
    }

    /// The PSN as an integer in `0..2^24`.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `self + n`, wrapping at 2^24.
    pub const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// The next PSN.
    #[cfg(test)]
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// Signed distance `self - other` in `-2^23 .. 2^23`.
    pub const fn diff(self, other: Psn) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back down to
        // sign-extend it.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Whether `self` comes before `other` in sequence order.
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// Whether `self` lies in the half-open window `[start, start + len)`.
    pub const fn in_window(self, start: Psn, len: u32) -> bool {
        let d = self.diff(start);
        d >= 0 && (d as u32) < len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wrap() {
        assert_eq!(Psn::new(PSN_MASK).next(), Psn::new(0));
        assert_eq!(Psn::new(0).diff(Psn::new(PSN_MASK)), 1);
        assert_eq!(Psn::new(PSN_MASK).diff(Psn::new(0)), -1);
        assert!(Psn::new(PSN_MASK).before(Psn::new(3)));
        assert!(Psn::new(2).in_window(Psn::new(PSN_MASK - 1), 8));
        assert!(!Psn::new(7).in_window(Psn::new(PSN_MASK - 1), 8));
    }

    proptest! {
        #[test]
        fn add_then_diff(a in 0u32..=PSN_MASK, n in 0u32..(1 << 23)) {
            let p = Psn::new(a);
            prop_assert_eq!(p.add(n).diff(p), n as i32);
            prop_assert_eq!(p.diff(p.add(n)), -(n as i32));
        }

        #[test]
        fn order_is_antisymmetric(a in any::<u32>(), b in any::<u32>()) {
            let (x, y) = (Psn::new(a), Psn::new(b));
            if x.diff(y) != -(1 << 23) {
                prop_assert_eq!(x.before(y), y.diff(x) > 0);
                prop_assert_eq!(x.diff(y), -y.diff(x));
            }
        }

        #[test]
        fn window(start in 0u32..=PSN_MASK, len in 1u32..(1 << 20), off in 0u32..(1 << 21)) {
            let s = Psn::new(start);
            prop_assert_eq!(s.add(off).in_window(s, len), off < len);
        }
    }
}
