// SPDX-License-Identifier: GPL-2.0
//! Set-up that runs once per module load, for a static that nothing may
//! use before it (a global lock, which must be initialised in place): the
//! first caller runs it, later ones find it done, and a caller that comes
//! while it runs is refused rather than let use it half made.

use core::sync::atomic::{AtomicU8, Ordering};

const UNINIT: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;

/// Whether a set-up ran.
#[derive(Debug)]
pub struct InitOnce(AtomicU8);

/// [`InitOnce::run`] found another caller running the set-up.
#[derive(Debug, PartialEq, Eq)]
pub struct Busy;

impl InitOnce {
    pub const fn new() -> Self {
        Self(AtomicU8::new(UNINIT))
    }

    /// Runs `set_up` if no caller did before; `Ok` once it has run (by this
    /// caller or an earlier one).
    pub fn run(&self, set_up: impl FnOnce()) -> Result<(), Busy> {
        match self.0.compare_exchange(UNINIT, RUNNING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                set_up();
                self.0.store(DONE, Ordering::Release);
                Ok(())
            }
            Err(DONE) => Ok(()),
            Err(_) => Err(Busy),
        }
    }

    /// Whether the set-up has finished: what it made may be used.
    pub fn is_done(&self) -> bool {
        self.0.load(Ordering::Acquire) == DONE
    }
}

impl Default for InitOnce {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_once() {
        let once = InitOnce::new();
        let mut runs = 0;
        assert!(!once.is_done());
        assert_eq!(once.run(|| runs += 1), Ok(()));
        assert!(once.is_done());
        assert_eq!(once.run(|| runs += 1), Ok(()));
        assert_eq!(runs, 1);
    }

    #[test]
    fn a_caller_during_the_set_up_is_refused() {
        let once = InitOnce::new();
        let mut inner = None;
        once.run(|| {
            assert!(!once.is_done());
            inner = Some(once.run(|| unreachable!()));
        })
        .unwrap();
        assert_eq!(inner, Some(Err(Busy)));
        assert!(once.is_done());
    }
}
