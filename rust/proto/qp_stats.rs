// SPDX-License-Identifier: GPL-2.0
//! Accounting of per-QP counters bound to the RDMA core's counter objects
//! (`rdma statistic qp`).
//!
//! Every QP counts its events in a block of its own, from its creation on,
//! and the port counts the same events too. A counter object shows what its
//! QPs counted while bound to it: each binding keeps the QP's values at the
//! bind ([`Binding`]), and what a QP counted when it leaves its counter stays
//! with the counter ([`Binding::close`]). The core shows a port counter as
//! the driver's value plus every counter object's (live or gone), as for a
//! NIC whose bound QPs count only in their counter: so the driver's port
//! value leaves out what the counter objects show ([`port_value`]).

/// A QP's binding to a counter object: the QP's values when it was bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding<const N: usize> {
    /// The counter object's number (`cntn`).
    pub counter: u32,
    base: [u64; N],
}

impl<const N: usize> Binding<N> {
    /// Binds a QP whose values are `now`.
    pub fn new(counter: u32, now: &[u64; N]) -> Self {
        Self { counter, base: *now }
    }

    /// What the QP counted since it was bound (values wrap as the counters do).
    pub fn since(&self, now: &[u64; N]) -> [u64; N] {
        let mut d = [0u64; N];
        for ((d, n), b) in d.iter_mut().zip(now).zip(&self.base) {
            *d = n.wrapping_sub(*b);
        }
        d
    }

    /// Unbinds the QP: what it counted while bound, which its counter keeps.
    pub fn close(self, now: &[u64; N]) -> [u64; N] {
        self.since(now)
    }
}

/// Adds `v` into `acc`, value by value.
pub fn add<const N: usize>(acc: &mut [u64; N], v: &[u64; N]) {
    for (a, v) in acc.iter_mut().zip(v) {
        *a = a.wrapping_add(*v);
    }
}

/// The driver's value of a port counter whose total is `total` when the
/// counter objects show `attributed` of it: never below zero, should an
/// event counted for a QP not be visible in the port's total yet.
pub fn port_value(total: u64, attributed: u64) -> u64 {
    total.saturating_sub(attributed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_counts_from_the_bind() {
        let b = Binding::new(3, &[5, 7]);
        assert_eq!(b.since(&[5, 7]), [0, 0]);
        assert_eq!(b.since(&[9, 8]), [4, 1]);
        assert_eq!(b.close(&[10, 7]), [5, 0]);
    }

    #[test]
    fn wrapping_values_still_give_the_difference() {
        let b = Binding::new(1, &[u64::MAX - 1]);
        assert_eq!(b.since(&[1]), [3]);
    }

    #[test]
    fn port_value_never_goes_below_zero() {
        assert_eq!(port_value(10, 4), 6);
        assert_eq!(port_value(3, 4), 0);
    }

    /// The port as the core shows it (the driver's value plus what the
    /// counter objects show, live and gone) is the true total through a
    /// bind and an unbind, and a counter keeps what its QP counted while bound.
    #[test]
    fn the_core_sum_is_the_true_total() {
        // Two QPs' values and the port's, each event counted in both.
        let (mut qa, mut qb, mut port) = ([0u64; 1], [0u64; 1], 0u64);
        qa[0] += 4;
        port += 4;
        let ba = Binding::new(1, &qa);
        let bb = Binding::new(2, &qb);
        qa[0] += 3;
        qb[0] += 2;
        port += 5;
        // Counter 1 has QP a, counter 2 QP b; nothing was moved yet.
        let shown = |kept: u64, b: &Binding<1>, q: &[u64; 1]| kept + b.since(q)[0];
        assert_eq!((shown(0, &ba, &qa), shown(0, &bb, &qb)), (3, 2));
        let attributed = ba.since(&qa)[0] + bb.since(&qb)[0];
        assert_eq!(port_value(port, attributed) + shown(0, &ba, &qa) + shown(0, &bb, &qb), port);
        // QP a leaves counter 1, which keeps its 3 (and later becomes history).
        let mut moved = [0u64; 1];
        let kept = ba.close(&qa);
        add(&mut moved, &kept);
        qa[0] += 1;
        port += 1;
        let attributed = moved[0] + bb.since(&qb)[0];
        assert_eq!(port_value(port, attributed) + kept[0] + shown(0, &bb, &qb), port);
        assert_eq!((port, qa[0]), (10, 8));
    }
}
