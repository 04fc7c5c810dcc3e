// SPDX-License-Identifier: GPL-2.0
//! Bounded counters: at most a fixed number of something (objects of a
//! kind, packets waiting, registered pages) at a time. A take that would
//! pass the bound fails instead of waiting; what was taken is given back
//! when its [`Slots`] drop, or by [`Quota::release`] once kept.
//!
//! The counts order nothing else (each holder synchronizes its own data),
//! so every access is `Relaxed`.

use core::sync::atomic::{AtomicUsize, Ordering};

/// A count that never exceeds `max`.
#[derive(Debug)]
pub struct Quota {
    taken: AtomicUsize,
    max: usize,
}

impl Quota {
    /// A quota with nothing taken.
    pub const fn new(max: usize) -> Self {
        Self { taken: AtomicUsize::new(0), max }
    }

    /// Takes `n`, if the count stays at most the quota's bound.
    pub fn try_take(&self, n: usize) -> Option<Slots<'_>> {
        self.try_take_within(n, self.max)
    }

    /// [`Quota::try_take`] against `max` in place of the quota's own bound,
    /// for a bound that moves (the machine's memory).
    pub fn try_take_within(&self, n: usize, max: usize) -> Option<Slots<'_>> {
        self.taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| t.checked_add(n).filter(|&m| m <= max))
            .ok()?;
        Some(Slots { quota: self, n })
    }

    /// Gives back `n` that [`Slots::keep`] kept. Saturating: giving back
    /// more than was taken is a bug, never a wrap to a full quota.
    pub fn release(&self, n: usize) {
        let _ = self.taken.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| Some(t.saturating_sub(n)));
    }

    /// How much is taken now.
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }
}

/// Part of a [`Quota`], given back when dropped.
#[derive(Debug)]
#[must_use = "dropping the slots gives them back at once"]
pub struct Slots<'a> {
    quota: &'a Quota,
    n: usize,
}

impl Slots<'_> {
    /// Keeps the slots taken past this value, for a holder that cannot
    /// borrow the quota; it gives them back with [`Quota::release`].
    pub fn keep(self) {
        core::mem::forget(self);
    }
}

impl Drop for Slots<'_> {
    fn drop(&mut self) {
        // Taken, so no underflow.
        self.quota.taken.fetch_sub(self.n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_given_back() {
        let q = Quota::new(3);
        let a = q.try_take(1).unwrap();
        let b = q.try_take(2).unwrap();
        assert!(q.try_take(1).is_none());
        assert_eq!(q.taken(), 3);
        drop(a);
        assert_eq!(q.taken(), 2);
        q.try_take(1).unwrap().keep();
        assert!(q.try_take(1).is_none());
        q.release(1);
        drop(b);
        assert_eq!(q.taken(), 0);
        // More than the bound at once, and an overflowing request.
        assert!(q.try_take(4).is_none());
        assert!(q.try_take(usize::MAX).is_none());
        assert_eq!(q.taken(), 0);
        assert!(q.try_take(0).is_some());
    }

    #[test]
    fn moving_bound() {
        let q = Quota::new(0);
        let a = q.try_take_within(5, 8).unwrap();
        assert!(q.try_take_within(4, 8).is_none());
        assert!(q.try_take_within(3, 8).is_some());
        // A bound that shrank below what is taken refuses, and gives back as usual.
        assert!(q.try_take_within(1, 4).is_none());
        drop(a);
        assert_eq!(q.taken(), 0);
    }

    #[test]
    fn release_saturates() {
        let q = Quota::new(2);
        q.release(1);
        assert_eq!(q.taken(), 0);
        assert!(q.try_take(2).is_some());
    }

    #[test]
    fn concurrent_holders_never_exceed_the_bound() {
        use std::sync::atomic::AtomicUsize;
        const MAX: usize = 3;
        let q = Quota::new(MAX);
        let held = AtomicUsize::new(0);
        let granted = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..2000 {
                        if let Some(slot) = q.try_take(1) {
                            let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(now <= MAX);
                            granted.fetch_add(1, Ordering::Relaxed);
                            held.fetch_sub(1, Ordering::SeqCst);
                            drop(slot);
                        }
                    }
                });
            }
        });
        assert_eq!(q.taken(), 0);
        assert!(granted.load(Ordering::Relaxed) > 0);
    }
}
