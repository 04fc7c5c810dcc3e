// SPDX-License-Identifier: GPL-2.0
//! Where a QP's work runs: on the CPU it comes in on, or, for a stream, on
//! another one.
//!
//! A QP's runner normally runs where its work came in: a doorbell sends in
//! the poster's system call, and the peer's packets are processed in the
//! softirq of the CPU they arrive on. Between two local QPs (a veth pair,
//! loopback) that CPU is the poster's, so one doorbell carries a message's
//! whole round trip (request, the peer's responder, the ACK, the
//! completion) before the poster gets its CPU back. For a ping-pong that
//! is the shortest path: crossing CPUs would cost a wake-up per packet.
//! For a stream it serializes both ends on one CPU while the others idle,
//! and every message pays its own ACK.
//!
//! A poster streams when it rings again sooner than the last doorbell on
//! its CPU took (it does not wait for the peer between messages, whichever
//! of its QPs it feeds), or when it finds WQEs of its own still
//! outstanding. Then its doorbells send nothing themselves: they give
//! the QP's runner send work, and the runner runs on another CPU than the
//! poster's (the `home`'s, [`stream_cpu`]). The poster only writes WQEs
//! and rings, the runner finds them in batches and sends them, and the
//! work its packets wake (the peer's responder, whose packets now arrive
//! on the runner's CPU, and which is a stream too) runs away from that
//! CPU, by the peer QP's own `home` (with two CPUs, on the poster's); the
//! peer acknowledges each batch once. A stream of RDMA READs keeps
//! sending from its poster's CPU: the peer's responses, and their receive
//! processing, are the heavier half, and they take the other CPU.
//!
//! A runner that finds many packets waiting is a stream too. The estimate
//! has hysteresis: one large batch makes a stream, and only
//! [`STREAM_RUNS`] small ones in a row end it, so a stream that runs
//! elsewhere (and so drains its queue in smaller batches now and then)
//! does not flap between CPUs.

use core::sync::atomic::{AtomicU8, Ordering};

/// Packets found in one run that mark a stream. A ping-pong has at most a
/// message (4 KiB is 4 packets at the usual 1 KiB RoCE MTU) and an ACK
/// waiting; more means messages are pipelined.
pub const STREAM_BATCH: usize = 8;
/// Small runs in a row that end a stream.
pub const STREAM_RUNS: u8 = 32;
/// WQEs posted and not completed at a doorbell that make a stream.
pub const STREAM_OUTSTANDING: u32 = 4;

/// Whether a doorbell comes from a streaming poster: `outstanding` WQEs
/// are posted and not completed (the new ones included), `gap_ns` passed
/// since the previous doorbell on its CPU returned, which took
/// `last_cost_ns`.
/// A poster that waits for its peer between messages waits at least as
/// long as the peer's part of the round trip, which the last doorbell
/// mostly was; one that streams comes back in a fraction of it.
pub fn poster_streams(outstanding: u32, gap_ns: u64, last_cost_ns: u64) -> bool {
    outstanding >= STREAM_OUTSTANDING || gap_ns.saturating_mul(2) < last_cost_ns
}

/// Whether a packet that finds its QP's runner idle leaves the run to the
/// runner's queue instead of running it in the receive hook: a READ
/// response that does not end its message. The peer's responder sent the
/// rest of the message in the same go, and it arrives right behind: one
/// run then takes the burst (and a stream shows as one, [`Stream`]),
/// where runs in the hook would take it a packet at a time, each paying
/// a whole run. `flags`: the packet's [`super::wire::flags`].
pub fn defers_run(flags: u32) -> bool {
    use super::wire::flags::{END, READ, REQUEST};
    flags & READ != 0 && flags & (REQUEST | END) == 0
}

/// The stream estimate of one QP's runner.
#[derive(Default)]
pub struct Stream(AtomicU8);

impl Stream {
    pub const fn new() -> Self {
        Self(AtomicU8::new(0))
    }

    /// Records a run that processed `packets` packets. Only the runner
    /// calls it (one at a time); readers may race, and see either value.
    pub fn note_run(&self, packets: usize) {
        let cur = self.0.load(Ordering::Relaxed);
        let next = if packets >= STREAM_BATCH {
            STREAM_RUNS
        } else if packets > 0 {
            cur.saturating_sub(1)
        } else {
            // A run for timers or send work only says nothing of the rate.
            cur
        };
        if next != cur {
            self.0.store(next, Ordering::Relaxed);
        }
    }

    /// Whether the runner should run away from the CPU its work came in on.
    pub fn is_stream(&self) -> bool {
        self.0.load(Ordering::Relaxed) != 0
    }
}

/// Which of `cpus` CPUs (numbered by spread order) a stream's runner uses:
/// its own `home`, unless that is `here`, where the work came in; then the
/// next one. With one CPU, that one.
pub fn stream_cpu(home: u32, here: u32, cpus: u32, nth: impl Fn(u32) -> u32) -> u32 {
    let first = nth(home);
    if first != here || cpus <= 1 {
        return first;
    }
    nth(home.wrapping_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_responses_before_the_last_defer_their_run() {
        use super::super::wire::{op, op_info};
        let defers = |opcode: u8| defers_run(op_info(op::RC | opcode).unwrap().flags);
        assert!(defers(op::READ_RESPONSE_FIRST));
        assert!(defers(op::READ_RESPONSE_MIDDLE));
        assert!(!defers(op::READ_RESPONSE_LAST));
        assert!(!defers(op::READ_RESPONSE_ONLY));
        assert!(!defers(op::READ_REQUEST));
        assert!(!defers(op::WRITE_FIRST));
        assert!(!defers(op::SEND_MIDDLE));
        assert!(!defers(op::ACKNOWLEDGE));
    }

    #[test]
    fn ping_pong_is_no_stream() {
        let s = Stream::new();
        for _ in 0..1000 {
            s.note_run(1);
            s.note_run(5);
            s.note_run(0);
        }
        assert!(!s.is_stream());
    }

    #[test]
    fn one_batch_makes_a_stream_and_small_runs_end_it() {
        let s = Stream::new();
        s.note_run(STREAM_BATCH);
        assert!(s.is_stream());
        for _ in 0..STREAM_RUNS - 1 {
            s.note_run(1);
            assert!(s.is_stream());
        }
        // Runs with no packets leave it as it is.
        s.note_run(0);
        assert!(s.is_stream());
        s.note_run(2);
        assert!(!s.is_stream());
    }

    #[test]
    fn a_batch_among_small_runs_keeps_it() {
        let s = Stream::new();
        for i in 0..10 * STREAM_RUNS as usize {
            s.note_run(if i % (STREAM_RUNS as usize / 2) == 0 { 64 } else { 1 });
            assert!(s.is_stream());
        }
    }

    #[test]
    fn doorbells() {
        // A ping-pong: one WQE, and the poster waited about as long as the
        // last doorbell took.
        assert!(!poster_streams(1, 40_000, 40_000));
        assert!(!poster_streams(1, 20_000, 40_000));
        // Back at once, or with a queue of its own WQEs.
        assert!(poster_streams(1, 5_000, 40_000));
        assert!(poster_streams(STREAM_OUTSTANDING, 1_000_000, 1));
        // The first doorbell of a QP (nothing measured yet).
        assert!(!poster_streams(1, u64::MAX, 0));
        assert!(!poster_streams(1, 0, 0));
    }

    #[test]
    fn stream_cpu_avoids_the_receiving_cpu() {
        let two = |i: u32| i % 2;
        assert_eq!(stream_cpu(0, 0, 2, two), 1);
        assert_eq!(stream_cpu(0, 1, 2, two), 0);
        assert_eq!(stream_cpu(1, 1, 2, two), 0);
        assert_eq!(stream_cpu(u32::MAX, 1, 2, two), 0);
        let one = |_: u32| 0;
        assert_eq!(stream_cpu(5, 0, 1, one), 0);
        let four = |i: u32| i % 4;
        assert_eq!(stream_cpu(6, 2, 4, four), 3);
        assert_eq!(stream_cpu(6, 1, 4, four), 2);
    }
}
