// SPDX-License-Identifier: GPL-2.0
//! Which CPU a QP's runner runs on when nothing binds it to one
//! (`proto::spread` has the rules and why): where its work came in, unless
//! the QP, or the poster on that CPU, streams.
//!
//! Only heuristics live here: a wrong guess moves work to another CPU or
//! keeps it where it is, never reorders a QP's packets (the sending-CPU
//! rule in `task.rs` comes first) or loses work.

use crate::proto::spread::{poster_streams, stream_cpu, Stream};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// QPs created so far, to deal streams over the CPUs.
static CREATED: AtomicU32 = AtomicU32::new(0);

/// Until when (monotonic ns) each CPU hosts a streaming poster, or the
/// runner that sends for one: the runners that work coming in on it wakes
/// run elsewhere, so the poster keeps its CPU, and the peer's runner does
/// not pile onto the sender's (a READ stream's responses and completions
/// would otherwise run where its requests are sent). Indexed by CPU
/// number modulo the length: CPUs that share a slot share the mark, which
/// only moves work to another CPU.
static STREAM_POSTER_UNTIL: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];
/// How long a streaming doorbell marks its CPU and its QP.
const STREAM_POSTER_NS: u64 = 4_000_000;

/// This CPU's slot of a per-CPU array (CPUs past its length share).
fn this_cpus<T, const N: usize>(slots: &[T; N]) -> &T {
    &slots[crate::net::this_cpu() as usize % N]
}

fn stream_poster_slot() -> &'static AtomicU64 {
    this_cpus(&STREAM_POSTER_UNTIL)
}

/// When the last doorbell on each CPU, of whatever QP, began and returned
/// (monotonic ns): a poster that feeds many QPs in turn comes back to the
/// same QP only after the others, but to its CPU at once.
struct CpuDoorbell {
    start: AtomicU64,
    end: AtomicU64,
}

static LAST_DOORBELL: [CpuDoorbell; 64] =
    [const { CpuDoorbell { start: AtomicU64::new(0), end: AtomicU64::new(0) } }; 64];

/// What a QP's runner placement is judged by.
pub(super) struct Placement {
    /// Whether the runner finds its packets in batches.
    stream: Stream,
    /// The QP's place in the order QPs were created: streams are dealt
    /// over the CPUs by it.
    home: u32,
    /// Until when (monotonic ns) the QP's own poster streams: its
    /// doorbells only give the runner send work, and the runner runs on
    /// another CPU than the poster's.
    posting_until: AtomicU64,
    /// The CPU of the streaming poster's last doorbell: the QP's runner
    /// sends from another one.
    poster_cpu: AtomicU32,
    /// Requests the QP received (its responder's packets, not ACKs), and
    /// their count at its last doorbell: a QP that received one between
    /// two doorbells converses, it does not stream.
    requests_in: AtomicU32,
    requests_at_doorbell: AtomicU32,
    /// A WQE started since the last doorbell asked for no completion: its
    /// poster does not wait for each message.
    unsignaled: AtomicBool,
    /// The WQE the QP started last is an RDMA READ: the peer's responses
    /// outweigh its requests, so a READ stream sends from its poster's CPU
    /// and leaves the other CPUs to the peer's responder and the responses'
    /// receive processing.
    reads: AtomicBool,
}

impl Placement {
    pub(super) fn new() -> Self {
        Self {
            stream: Stream::new(),
            home: CREATED.fetch_add(1, Ordering::Relaxed),
            posting_until: AtomicU64::new(0),
            poster_cpu: AtomicU32::new(0),
            requests_in: AtomicU32::new(0),
            requests_at_doorbell: AtomicU32::new(0),
            unsignaled: AtomicBool::new(false),
            reads: AtomicBool::new(false),
        }
    }

    /// Notes a doorbell that began at `start` (monotonic ns), on this CPU,
    /// and found `outstanding` WQEs posted and not completed (the new ones
    /// included). Called under the QP's state lock, before it sends.
    pub(super) fn note_doorbell(&self, start: u64, outstanding: u32) {
        let last = this_cpus(&LAST_DOORBELL);
        let last_start = last.start.load(Ordering::Relaxed);
        let last_end = last.end.load(Ordering::Relaxed);
        let requests = self.requests_in.load(Ordering::Relaxed);
        // A ping-pong's answer may come in while its doorbell still runs
        // (the peer posts as soon as the request lands, and its packet is
        // processed before this CPU leaves the softirq): its gap is short,
        // but the QP received a request since its last doorbell.
        let conversed = self.requests_at_doorbell.swap(requests, Ordering::Relaxed) != requests;
        // A poster that asks for every completion may wait for each (a READ
        // ping-pong completes within its doorbell, and posts again at once).
        let waits = !self.unsignaled.swap(false, Ordering::Relaxed);
        // Nothing measured yet (or a doorbell that moved CPUs): no gap to
        // judge by.
        let (gap, cost) = match (start.checked_sub(last_end), last_end.checked_sub(last_start)) {
            (Some(gap), Some(cost)) if last_start != 0 && !conversed && !waits => (gap, cost),
            _ => (u64::MAX, 0),
        };
        if poster_streams(outstanding, gap, cost) {
            let until = start.saturating_add(STREAM_POSTER_NS);
            stream_poster_slot().store(until, Ordering::Relaxed);
            self.poster_cpu.store(crate::net::this_cpu(), Ordering::Relaxed);
            self.posting_until.store(until, Ordering::Relaxed);
        }
    }

    /// Notes that the doorbell that began at `start` returned, the softirq
    /// work its system call ran as it let go of the QP included.
    pub(super) fn note_doorbell_end(start: u64) {
        let last = this_cpus(&LAST_DOORBELL);
        last.start.store(start, Ordering::Relaxed);
        last.end.store(crate::net::ktime_ns(), Ordering::Relaxed);
    }

    /// Notes a WQE the QP started sending; `signaled`: it asked for a
    /// completion.
    /// `read`: it is an RDMA READ.
    pub(super) fn note_wqe(&self, signaled: bool, read: bool) {
        if !signaled {
            self.unsignaled.store(true, Ordering::Relaxed);
        }
        if self.reads.load(Ordering::Relaxed) != read {
            self.reads.store(read, Ordering::Relaxed);
        }
    }

    /// Counts a request packet the QP's runner took.
    pub(super) fn note_request(&self) {
        self.requests_in.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a run that processed `packets` packets.
    pub(super) fn note_run(&self, packets: usize) {
        self.stream.note_run(packets);
    }

    /// Notes a run of the QP on this CPU: the runner of a streaming poster
    /// marks its CPU as the poster's own, for as long as the poster's mark.
    pub(super) fn note_run_here(&self) {
        if self.poster_is_streaming(crate::net::ktime_ns()) {
            stream_poster_slot().store(self.posting_until.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Whether the QP's poster streams at `now` (monotonic ns), and not
    /// RDMA READs: its doorbells leave the sending to the runner, on
    /// another CPU.
    pub(super) fn poster_is_streaming(&self, now: u64) -> bool {
        now < self.posting_until.load(Ordering::Relaxed) && !self.reads.load(Ordering::Relaxed)
    }

    /// The CPU new work for the QP runs on when no sending CPU binds it;
    /// `None`: where the work came in.
    pub(super) fn new_work_cpu(&self) -> Option<u32> {
        let now = crate::net::ktime_ns();
        // A streaming poster's QP runs away from the poster's CPU: the
        // poster only writes WQEs and rings, the runner finds them in
        // batches, and its packets (and the peer's answers) are processed
        // off the poster's CPU. A READ stream's runner stays with the
        // poster's doorbells, which send inline.
        if now < self.posting_until.load(Ordering::Relaxed) {
            let poster = self.poster_cpu.load(Ordering::Relaxed);
            if self.reads.load(Ordering::Relaxed) {
                return Some(poster);
            }
            return Some(stream_cpu(self.home, poster, crate::net::online_cpus(), crate::net::spread_cpu));
        }
        // A stream leaves the CPU its work comes in on to the poster (or
        // the receive path) and runs on another, and so does work that
        // comes in on a streaming poster's CPU: a poster's peers run
        // elsewhere.
        let poster_here = now < stream_poster_slot().load(Ordering::Relaxed);
        (self.stream.is_stream() || poster_here).then(|| {
            stream_cpu(self.home, crate::net::this_cpu(), crate::net::online_cpus(), crate::net::spread_cpu)
        })
    }
}
