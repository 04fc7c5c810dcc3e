// SPDX-License-Identifier: GPL-2.0
//! The module's tables of users: those with PDs whose memory may fault
//! (`pd_paging.rs`), and those with on-demand regions (`odp.rs`). One of
//! each for all devices, so a user's share of those PDs, of the packets
//! waiting for them and of the address space regions span is the same
//! however many devices it is given. Global locks, set up at module load;
//! the paging table and its counting are the driver's.

use super::odp::SpanUsers;
use crate::pd_paging::PagingUsers;
use core::sync::atomic::{AtomicU8, Ordering};
use kernel::prelude::*;

kernel::sync::global_lock! {
    // SAFETY: initialised by `init`, from module init, before any device exists; every
    // other use is through `with_paging_users`, which checks `STATE` first.
    unsafe(uninit) static PAGING_USERS: Mutex<PagingUsers> = PagingUsers::new();
}

kernel::sync::global_lock! {
    // SAFETY: as `PAGING_USERS`, initialised with it; every other use is through
    // `with_span_users`, which checks `STATE` first.
    unsafe(uninit) static SPAN_USERS: Mutex<SpanUsers> = SpanUsers::new();
}

/// `PAGING_USERS` and `SPAN_USERS` are being initialised / is initialised: nothing locks it before.
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
            unsafe {
                PAGING_USERS.init();
                SPAN_USERS.init();
            }
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

/// Runs `f` on the table of users with on-demand regions under its lock
/// (process context: a mutex); `ENODEV` before `init`.
pub(crate) fn with_span_users<R>(f: impl FnOnce(&mut SpanUsers) -> R) -> Result<R> {
    if STATE.load(Ordering::Acquire) != READY {
        return Err(ENODEV);
    }
    Ok(f(&mut SPAN_USERS.lock()))
}

/// Empties the table of users with on-demand regions (module unload, once
/// the devices are gone): a static, it would keep what it holds.
pub(crate) fn clear_span_users() {
    let _ = with_span_users(|users| users.clear());
}
