// SPDX-License-Identifier: GPL-2.0
//! Locks for state the data path shares with softirq.
//!
//! [`SpinLockBh`]: a spinlock that every holder takes with softirqs off
//! (unless interrupts are off already), so a softirq that wants it never
//! spins on a holder it interrupted on the same CPU. The kernel crate has
//! spinlocks with interrupts off, none with softirqs off.
//!
//! [`RunnerLock`]: the state of an object whose work has one runner at a
//! time, which runs in softirq or, where its work may sleep (a page fault
//! of on-demand paging memory), in a process context of its own. The
//! runner takes the half that fits where it runs; every other holder
//! (verbs, process context) takes both, so it excludes the runner wherever
//! that runs, and never sleeps while it holds the state.

use crate::sys;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::lock::{Backend, Guard, Lock};
use kernel::sync::{new_mutex, Mutex, MutexGuard};

/// The backend of [`SpinLockBh`].
pub(crate) struct SpinLockBhBackend;

/// A spinlock held with softirqs off, or with interrupts off where the
/// holder has them off already.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;
pub(crate) type SpinLockBhGuard<'a, T> = Guard<'a, T, SpinLockBhBackend>;

/// A [`SpinLockBh`] initialiser with its own lock class for lockdep.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal $(,)?) => {
        $crate::net::SpinLockBh::new($inner, kernel::c_str!($name), kernel::static_lock_class!())
    };
}
pub(crate) use new_spinlock_bh;

// SAFETY: `lock` and `unlock` take and release the spinlock `init`
// initialised; the guard state says whether softirqs went off with it, so
// `unlock` (on the same CPU: guards are not `Send`) undoes exactly that.
unsafe impl Backend for SpinLockBhBackend {
    type State = sys::spinlock_t;
    /// Softirqs were turned off with the lock.
    type GuardState = bool;

    unsafe fn init(ptr: *mut Self::State, name: *const kernel::ffi::c_char, key: *mut sys::lock_class_key) {
        // SAFETY: per the trait's contract `ptr` is valid for writes and
        // `name` and `key` live forever.
        unsafe { sys::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `init` ran on `ptr` (the trait's contract).
        unsafe { sys::rroce_spin_lock_bh_unless_irqs_off(ptr) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        let mut bh = false;
        // SAFETY: `init` ran on `ptr`; `bh` is a valid out pointer.
        unsafe { sys::rroce_spin_trylock_bh_unless_irqs_off(ptr, &mut bh) }.then_some(bh)
    }

    unsafe fn unlock(ptr: *mut Self::State, bh: &Self::GuardState) {
        // SAFETY: the caller holds the lock, taken with softirqs off if `bh`.
        unsafe { sys::rroce_spin_unlock_bh_if(ptr, *bh) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `init` ran on `ptr`.
        unsafe { sys::rroce_spin_assert_held(ptr) }
    }
}

/// Whether the caller may sleep (a task, no spinlock, softirqs and
/// interrupts on, no RCU read lock). False where the kernel cannot tell.
pub(crate) fn may_sleep() -> bool {
    // SAFETY: reads this CPU's and task's context; callable anywhere.
    unsafe { sys::rroce_may_sleep() }
}

/// Whether the caller is a task outside every atomic section the kernel
/// can see; unlike [`may_sleep`], true on a kernel without a preemption
/// count.
pub(crate) fn may_block() -> bool {
    // SAFETY: reads this CPU's and task's context; callable anywhere.
    unsafe { sys::rroce_may_block() }
}

/// State taken by one runner at a time, in softirq ([`Self::lock_runner`]
/// with `may_sleep` false: the spinning half) or in process context where
/// it may sleep (`may_sleep` true: the sleeping half), and by anyone else
/// in process context with both halves ([`Self::lock`]).
#[pin_data]
pub(crate) struct RunnerLock<T> {
    #[pin]
    sleeping: Mutex<()>,
    #[pin]
    spinning: SpinLockBh<()>,
    /// Set while a runner holds one half: a second runner holding the other
    /// half (a bug of the caller) is refused rather than let in.
    runner_in: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the data is only reached through a guard, and a guard excludes
// every other (see `RunnerGuard`), so sending the lock sends the data.
unsafe impl<T: Send> Send for RunnerLock<T> {}
// SAFETY: as above: sharing the lock hands `&mut T` to one holder at a time.
unsafe impl<T: Send> Sync for RunnerLock<T> {}

/// A holder of a [`RunnerLock`]. Any two holders exclude each other:
/// - two that hold both halves, or one of those and a runner: they share a
///   half;
/// - two runners: they share a half, or each holds a different one, and
///   then the second finds `runner_in` set and never gets a guard.
pub(crate) struct RunnerGuard<'a, T> {
    lock: &'a RunnerLock<T>,
    runner: bool,
    _sleeping: Option<MutexGuard<'a, ()>>,
    _spinning: Option<SpinLockBhGuard<'a, ()>>,
}

impl<T> RunnerLock<T> {
    pub(crate) fn new(data: T) -> impl PinInit<Self> {
        pin_init!(Self {
            sleeping <- new_mutex!((), "rroce_runner_lock_sleeping"),
            spinning <- new_spinlock_bh!((), "rroce_runner_lock_spinning"),
            runner_in: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        })
    }

    /// Both halves: excludes the runner wherever it runs. Process context;
    /// the holder must not sleep until it lets go.
    pub(crate) fn lock(&self) -> RunnerGuard<'_, T> {
        let sleeping = self.sleeping.lock();
        let spinning = self.spinning.lock();
        RunnerGuard { lock: self, runner: false, _sleeping: Some(sleeping), _spinning: Some(spinning) }
    }

    /// The runner's half: the sleeping one where it may sleep (process
    /// context), else the spinning one. `None` if another runner holds the
    /// other half, which a correct caller (one runner at a time) never sees.
    pub(crate) fn lock_runner(&self, may_sleep: bool) -> Option<RunnerGuard<'_, T>> {
        let (sleeping, spinning) =
            if may_sleep { (Some(self.sleeping.lock()), None) } else { (None, Some(self.spinning.lock())) };
        if self.runner_in.swap(true, Ordering::Acquire) {
            // Not ours to clear: the other runner's guard does.
            return None;
        }
        Some(RunnerGuard { lock: self, runner: true, _sleeping: sleeping, _spinning: spinning })
    }
}

impl<T> Drop for RunnerGuard<'_, T> {
    fn drop(&mut self) {
        if self.runner {
            self.lock.runner_in.store(false, Ordering::Release);
        }
        // The halves are let go after, in field order.
    }
}

impl<T> Deref for RunnerGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard excludes every other holder (see its type).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for RunnerGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only use.
        unsafe { &mut *self.lock.data.get() }
    }
}
