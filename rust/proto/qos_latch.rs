// SPDX-License-Identifier: GPL-2.0
//! The part of a device's QoS settings every transmitted packet reads (its
//! priority, DS field and PFC tag), published so that readers take no lock:
//! a device-wide lock per packet is a cache line every CPU that sends
//! writes, and a spin for each sender that meets another.
//!
//! Two copies and a sequence count, as the kernel's `seqcount_latch`: the
//! writer (one at a time, under the settings' lock) points readers at one
//! copy while it rewrites the other, then the other way round. A reader
//! reads the copy the count names and tries again only if the count moved
//! meanwhile, which takes a whole update: it never waits for a writer, so a
//! reader that interrupted the writer on its own CPU cannot spin forever.
//! Every word is an atomic, so a torn read is a retry, never a data race.

use super::qos::{QosConfig, TxClass, Trust, DSCPS};
use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// DSCP priorities a word holds: 4 bits each.
const DSCPS_PER_WORD: usize = 16;
const DSCP_WORDS: usize = DSCPS / DSCPS_PER_WORD;

/// One copy: the settings packed into words.
struct Copy {
    /// Trust, PFC priorities, ECN, CNP DSCP and priority ([`Head`]).
    head: AtomicU32,
    /// The DSCP-to-priority table, 4 bits an entry.
    dscp_prio: [AtomicU64; DSCP_WORDS],
}

impl Copy {
    const fn new() -> Self {
        Self { head: AtomicU32::new(0), dscp_prio: [const { AtomicU64::new(0) }; DSCP_WORDS] }
    }
}

/// The fields of [`QosConfig`] but the DSCP table, in one word.
#[derive(Clone, Copy)]
struct Head(u32);

impl Head {
    fn pack(c: &QosConfig) -> Self {
        let trust = u32::from(matches!(c.trust, Trust::Dscp));
        Self(trust | u32::from(c.pfc) << 1 | u32::from(c.ecn) << 9 | u32::from(c.cnp_dscp & 0x3f) << 10 | u32::from(c.cnp_prio & 7) << 16)
    }

    /// The settings with the one DSCP entry a class needs (others 0).
    fn config(self, dscp: usize, prio: u8) -> QosConfig {
        let mut c = QosConfig {
            trust: if self.0 & 1 != 0 { Trust::Dscp } else { Trust::Pcp },
            dscp_prio: [0; DSCPS],
            pfc: (self.0 >> 1) as u8,
            ecn: self.0 & 1 << 9 != 0,
            cnp_dscp: (self.0 >> 10 & 0x3f) as u8,
            cnp_prio: (self.0 >> 16 & 7) as u8,
        };
        c.dscp_prio[dscp] = prio;
        c
    }
}

/// The published settings; see the module's comment.
pub struct QosLatch {
    /// Even: readers read copy 0; odd: copy 1.
    seq: AtomicU32,
    copies: [Copy; 2],
}

impl Default for QosLatch {
    fn default() -> Self {
        let latch = Self::new();
        latch.publish(&QosConfig::default());
        latch
    }
}

impl QosLatch {
    /// Zero settings (trust PCP, no PFC, no ECN) until the first publish.
    pub const fn new() -> Self {
        Self { seq: AtomicU32::new(0), copies: [Copy::new(), Copy::new()] }
    }

    /// Publishes `c`. Callers serialize (the settings' lock): two writers
    /// at once could both rewrite the copy readers use.
    pub fn publish(&self, c: &QosConfig) {
        let head = Head::pack(c).0;
        let mut words = [0u64; DSCP_WORDS];
        for (i, p) in c.dscp_prio.iter().enumerate() {
            words[i / DSCPS_PER_WORD] |= u64::from(p & 7) << (i % DSCPS_PER_WORD * 4);
        }
        for _ in 0..2 {
            // The copy rewritten last is whole before readers move to it.
            fence(Ordering::Release);
            let seq = self.seq.load(Ordering::Relaxed).wrapping_add(1);
            self.seq.store(seq, Ordering::Relaxed);
            // A reader that sees a word of the rewrite below sees the count
            // moved, and tries again.
            fence(Ordering::Release);
            let copy = &self.copies[(seq as usize + 1) & 1];
            copy.head.store(head, Ordering::Relaxed);
            for (w, v) in copy.dscp_prio.iter().zip(words) {
                w.store(v, Ordering::Relaxed);
            }
        }
        // The copy rewritten second is read after the next publish's first
        // count, which its first fence orders after it.
    }

    /// The settings' head and the priority of DSCP `dscp`, from one copy.
    fn read(&self, dscp: usize) -> QosConfig {
        let dscp = dscp % DSCPS;
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            let copy = &self.copies[seq as usize & 1];
            let head = Head(copy.head.load(Ordering::Relaxed));
            let word = copy.dscp_prio[dscp / DSCPS_PER_WORD].load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == seq {
                let prio = (word >> (dscp % DSCPS_PER_WORD * 4)) as u8 & 7;
                return head.config(dscp, prio);
            }
        }
    }

    /// [`QosConfig::data_class`] of the published settings.
    pub fn data_class(&self, traffic_class: u8, sl: u8) -> TxClass {
        self.read(usize::from(traffic_class >> 2)).data_class(traffic_class, sl)
    }

    /// [`QosConfig::cnp_class`] of the published settings.
    pub fn cnp_class(&self) -> TxClass {
        self.read(0).cnp_class()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs() -> impl Iterator<Item = QosConfig> {
        let mut odd = QosConfig { trust: Trust::Dscp, pfc: 0xa5, ecn: false, cnp_dscp: 63, cnp_prio: 7, ..QosConfig::default() };
        for (d, p) in odd.dscp_prio.iter_mut().enumerate() {
            *p = (d * 5 % 8) as u8;
        }
        [QosConfig::default(), odd, QosConfig { trust: Trust::Pcp, pfc: 0xff, ..odd }].into_iter()
    }

    #[test]
    fn classes_as_the_settings_give() {
        let latch = QosLatch::new();
        for c in configs() {
            latch.publish(&c);
            for tc in 0..=255u8 {
                for sl in 0..16u8 {
                    assert_eq!(latch.data_class(tc, sl), c.data_class(tc, sl));
                }
            }
            assert_eq!(latch.cnp_class(), c.cnp_class());
        }
    }

    #[test]
    fn default_is_published() {
        let c = QosConfig::default();
        assert_eq!(QosLatch::default().data_class(104, 0), c.data_class(104, 0));
    }

    /// Readers racing a writer see one published settings or the other,
    /// never a mix.
    #[test]
    fn no_torn_reads() {
        extern crate std;
        let a = QosConfig { trust: Trust::Dscp, dscp_prio: [1; DSCPS], pfc: 0x02, ..QosConfig::default() };
        let b = QosConfig { trust: Trust::Dscp, dscp_prio: [6; DSCPS], pfc: 0x40, ..QosConfig::default() };
        let latch = QosLatch::new();
        latch.publish(&a);
        let stop = core::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..20_000 {
                    latch.publish(if i % 2 == 0 { &b } else { &a });
                }
                stop.store(true, Ordering::Relaxed);
            });
            for _ in 0..2 {
                s.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        for tc in (0..=255u8).step_by(4) {
                            let k = latch.data_class(tc, 0);
                            assert!(k == a.data_class(tc, 0) || k == b.data_class(tc, 0), "{k:?}");
                        }
                    }
                });
            }
        });
    }
}
