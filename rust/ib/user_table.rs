// SPDX-License-Identifier: GPL-2.0
//! The module's table of users with PDs whose memory may fault
//! (`pd_paging.rs`): one for all devices, so a user's share of those PDs
//! and of the packets waiting for them is the same however many devices it
//! is given. A global lock, set up at module load; the table and its
//! counting are the driver's.

use crate::pd_paging::PagingUsers;
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::prelude::*;

kernel::sync::global_lock! {
    // SAFETY: initialised by `init`, from module init, before any device exists; every
    // other use is through `with_paging_users`, which checks `STATE` first.
    unsafe(uninit) static PAGING_USERS: Mutex<PagingUsers> = PagingUsers::new();
}

/// `PAGING_USERS` is being initialised / is initialised: nothing locks it before.
static STATE: AtomicU8 = AtomicU8::new(UNINIT);
const UNINIT: u8 = 0;
const INITIALISING: u8 = 1;
const READY: u8 = 2;

/// Sets up the table; call from module init before devices can be added.
/// Once per module load: later calls do nothing.
pub(crate) fn init() -> Result {
    match STATE.compare_exchange(UNINIT, INITIALISING, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {
            // SAFETY: only the caller that moved the state out of `UNINIT` gets here, once;
            // nothing locks the table before the state reads `READY`.
            unsafe { PAGING_USERS.init() };
            STATE.store(READY, Ordering::Release);
            Ok(())
        }
        Err(READY) => Ok(()),
        // Another caller is initialising it right now.
        Err(_) => Err(EBUSY),
    }
}

/// Runs `f` on the table under its lock (process context: a mutex);
/// `ENODEV` before `init`.
pub(crate) fn with_paging_users<R>(f: impl FnOnce(&mut PagingUsers) -> R) -> Result<R> {
    if STATE.load(Ordering::Acquire) != READY {
        return Err(ENODEV);
    }
    Ok(f(&mut PAGING_USERS.lock()))
}
