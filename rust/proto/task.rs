// SPDX-License-Identifier: GPL-2.0
//! Who runs a QP's work: at most one runner at a time, and no request lost.
//!
//! Anything that gives a QP work (a packet for it, a doorbell, a timer)
//! first records the work where the runner will find it, then calls
//! [`RunState::schedule`]. Only the caller that moved the state from idle
//! to busy starts a runner (queues the QP's work item); a request that
//! finds the QP busy marks it armed instead, and the runner, before it
//! lets go ([`RunState::finish`]), looks once more. A runner out of budget
//! keeps the state busy and queues itself again, so its turn passes on
//! with no gap in which a second one could start.
//!
//! This is rdma_rxe's idle/busy/armed task state, with stopping as a flag
//! beside it: once stopped, nothing starts a runner again.

use core::sync::atomic::{AtomicU8, Ordering};

/// A runner owns the work.
const BUSY: u8 = 1 << 0;
/// Work was added while the runner ran: it must look again before it lets go.
const ARMED: u8 = 1 << 1;
/// The QP is being destroyed: no runner starts any more.
const STOPPED: u8 = 1 << 2;

/// What a caller of [`RunState::schedule`] must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// The caller made the state busy: it must start a runner.
    Start,
    /// A runner is on it (it will see the work before it lets go), or the
    /// state is stopped.
    Covered,
}

/// What a runner that found no more work must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The state is idle (or stopped): the runner is done.
    Idle,
    /// Work came in meanwhile: look again, still the runner.
    Again,
}

/// The run state of one QP's work.
#[derive(Default)]
pub struct RunState(AtomicU8);

impl RunState {
    pub const fn new() -> Self {
        Self(AtomicU8::new(0))
    }

    /// Called after recording new work. Every path is a read-modify-write
    /// (armed is written again when already set), so it reads the latest
    /// state: either the runner's letting go came first (then this starts
    /// a runner), or the runner's next look comes after this and sees the
    /// work.
    pub fn schedule(&self) -> Schedule {
        let prev = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
            if cur & STOPPED != 0 {
                None
            } else if cur & BUSY != 0 {
                Some(cur | ARMED)
            } else {
                Some(cur | BUSY)
            }
        });
        match prev {
            Ok(cur) if cur & BUSY == 0 => Schedule::Start,
            _ => Schedule::Covered,
        }
    }

    /// Called by the runner once it found no work left: lets go unless work
    /// came in since it last looked.
    pub fn finish(&self) -> Finish {
        let prev = self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
            Some(if cur & ARMED != 0 { cur & !ARMED } else { cur & !BUSY })
        });
        match prev {
            Ok(cur) | Err(cur) if cur & ARMED != 0 => Finish::Again,
            _ => Finish::Idle,
        }
    }

    /// Stops the state for good: no runner starts from now on. Returns
    /// whether a runner still owns it (its work item is queued or running).
    pub fn stop(&self) -> bool {
        self.0.fetch_or(STOPPED, Ordering::AcqRel) & BUSY != 0
    }

    /// Whether [`Self::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Acquire) & STOPPED != 0
    }

    /// Whether a runner owns the state.
    pub fn is_busy(&self) -> bool {
        self.0.load(Ordering::Acquire) & BUSY != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, Mutex};
    use std::vec::Vec;

    #[test]
    fn idle_busy_armed() {
        let s = RunState::new();
        assert_eq!(s.schedule(), Schedule::Start);
        assert_eq!(s.schedule(), Schedule::Covered);
        assert_eq!(s.schedule(), Schedule::Covered);
        assert_eq!(s.finish(), Finish::Again);
        assert!(s.is_busy(), "a runner told to look again still owns the state");
        assert_eq!(s.schedule(), Schedule::Covered);
        assert_eq!(s.finish(), Finish::Again);
        assert_eq!(s.finish(), Finish::Idle);
        assert!(!s.is_busy());
        assert_eq!(s.schedule(), Schedule::Start);
        assert_eq!(s.finish(), Finish::Idle);
    }

    #[test]
    fn stopped_starts_nothing() {
        let s = RunState::new();
        assert_eq!(s.schedule(), Schedule::Start);
        assert!(s.stop());
        assert_eq!(s.schedule(), Schedule::Covered);
        assert_eq!(s.finish(), Finish::Idle);
        assert!(!s.stop());
        assert_eq!(s.schedule(), Schedule::Covered);
        assert!(s.is_stopped());
    }

    /// Producers record items and schedule; a started runner drains in a
    /// thread of its own (as a work item would), sometimes out of budget
    /// (then it runs again with the state still busy). Every item must be
    /// taken, and never two runners at once.
    fn stress(producers: usize, items: usize, budget: usize) {
        struct Shared {
            state: RunState,
            queue: Mutex<Vec<usize>>,
            running: AtomicUsize,
            taken: AtomicUsize,
        }
        fn runner(sh: Arc<Shared>, budget: usize) {
            assert_eq!(sh.running.fetch_add(1, Ordering::SeqCst), 0, "two runners at once");
            let mut done = 0;
            loop {
                let item = sh.queue.lock().unwrap().pop();
                match item {
                    Some(_) => {
                        sh.taken.fetch_add(1, Ordering::SeqCst);
                        done += 1;
                        if done == budget {
                            sh.running.fetch_sub(1, Ordering::SeqCst);
                            let again = sh.clone();
                            std::thread::spawn(move || runner(again, budget));
                            return;
                        }
                    }
                    None => {
                        if sh.state.finish() == Finish::Idle {
                            sh.running.fetch_sub(1, Ordering::SeqCst);
                            return;
                        }
                    }
                }
            }
        }
        let sh = Arc::new(Shared {
            state: RunState::new(),
            queue: Mutex::new(Vec::new()),
            running: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
        });
        let threads: Vec<_> = (0..producers)
            .map(|p| {
                let sh = sh.clone();
                std::thread::spawn(move || {
                    for i in 0..items {
                        sh.queue.lock().unwrap().push(p * items + i);
                        if sh.state.schedule() == Schedule::Start {
                            let r = sh.clone();
                            std::thread::spawn(move || runner(r, budget));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let total = producers * items;
        for _ in 0..10_000 {
            if sh.taken.load(Ordering::SeqCst) == total && !sh.state.is_busy() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(sh.taken.load(Ordering::SeqCst), total, "an item was queued with no runner");
        assert!(sh.queue.lock().unwrap().is_empty());
        assert!(!sh.state.is_busy());
    }

    #[test]
    fn stress_many_producers() {
        stress(4, 5_000, usize::MAX);
    }

    #[test]
    fn stress_budgeted_runner() {
        stress(3, 3_000, 7);
    }
}
