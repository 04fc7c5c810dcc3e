// SPDX-License-Identifier: GPL-2.0
//! The destinations a UD QP sent to lately. A CNP names only the QP it is
//! for, and UD QP numbers are handed out in order, so anyone could slow a
//! UD QP down to the DCQCN minimum rate with one guessed packet. A CNP
//! counts only when it comes from an address the QP sent a datagram to
//! within [`WINDOW_NS`]: the receivers whose congestion the QP can cause.

/// Destinations remembered; a QP sending to more in turn forgets the one
/// it sent to longest ago.
pub const SLOTS: usize = 8;
/// How long after the last datagram to it a destination's CNPs count.
pub const WINDOW_NS: u64 = 1_000_000_000;

#[derive(Clone, Copy, Default)]
struct Slot {
    gid: [u8; 16],
    last_ns: u64,
    used: bool,
}

/// Up to [`SLOTS`] destination GIDs, with when the QP last sent to each.
#[derive(Clone, Default)]
pub struct RecentPeers {
    slots: [Slot; SLOTS],
}

impl RecentPeers {
    /// The QP sent a datagram to `gid` at `now_ns`.
    pub fn note(&mut self, gid: &[u8; 16], now_ns: u64) {
        let at = match self.slots.iter().position(|s| s.used && s.gid == *gid) {
            Some(i) => i,
            // A free slot, else the one sent to longest ago.
            None => self
                .slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| (s.used, s.last_ns))
                .map_or(0, |(i, _)| i),
        };
        if let Some(s) = self.slots.get_mut(at) {
            *s = Slot { gid: *gid, last_ns: now_ns, used: true };
        }
    }

    /// Whether the QP sent, within the window before `now_ns`, to an
    /// address `is_source` recognises as the CNP's source.
    pub fn sent_recently(&self, now_ns: u64, is_source: impl Fn(&[u8; 16]) -> bool) -> bool {
        self.slots
            .iter()
            .any(|s| s.used && now_ns.saturating_sub(s.last_ns) <= WINDOW_NS && is_source(&s.gid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid(n: u8) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[15] = n;
        g
    }

    #[test]
    fn only_destinations_count() {
        let mut p = RecentPeers::default();
        assert!(!p.sent_recently(0, |_| true), "nothing sent yet");
        p.note(&gid(1), 100);
        assert!(p.sent_recently(200, |g| *g == gid(1)));
        assert!(!p.sent_recently(200, |g| *g == gid(2)));
    }

    #[test]
    fn old_sends_expire() {
        let mut p = RecentPeers::default();
        p.note(&gid(1), 100);
        assert!(p.sent_recently(100 + WINDOW_NS, |g| *g == gid(1)));
        assert!(!p.sent_recently(101 + WINDOW_NS, |g| *g == gid(1)));
        // Sending again renews it, in its own slot.
        p.note(&gid(1), 5 * WINDOW_NS);
        assert!(p.sent_recently(5 * WINDOW_NS + 1, |g| *g == gid(1)));
        assert_eq!(p.slots.iter().filter(|s| s.used).count(), 1);
    }

    #[test]
    fn the_oldest_is_forgotten_first() {
        let mut p = RecentPeers::default();
        for n in 0..SLOTS as u8 {
            p.note(&gid(n), 10 + u64::from(n));
        }
        p.note(&gid(0), 100); // renews 0: 1 is now the oldest
        p.note(&gid(200), 101);
        assert!(p.sent_recently(102, |g| *g == gid(0)));
        assert!(!p.sent_recently(102, |g| *g == gid(1)));
        assert!(p.sent_recently(102, |g| *g == gid(200)));
        for n in 2..SLOTS as u8 {
            assert!(p.sent_recently(102, |g| *g == gid(n)));
        }
    }

    #[test]
    fn a_clock_going_back_does_not_expire() {
        let mut p = RecentPeers::default();
        p.note(&gid(1), 1000);
        assert!(p.sent_recently(10, |g| *g == gid(1)));
    }
}
