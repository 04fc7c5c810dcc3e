// SPDX-License-Identifier: GPL-2.0
//! The module's table of users with PDs whose memory may fault
//! (`pd_paging.rs`): one for all devices, so a user's share of those PDs
//! and of the packets waiting for them is the same however many devices it
//! is given. A global lock, set up at module load; the table and its
//! counting are the driver's.

use crate::pd_paging::PagingUsers;
use crate::proto::init_once::InitOnce;
use kernel::prelude::*;

kernel::sync::global_lock! {
    // SAFETY: initialised by `init`, from module init, before any device exists; every
    // other use is through `with_paging_users`, which checks `STATE` first.
    unsafe(uninit) static PAGING_USERS: Mutex<PagingUsers> = PagingUsers::new();
}

/// Whether `PAGING_USERS` is initialised: nothing locks it before.
static STATE: InitOnce = InitOnce::new();

/// Sets up the table; call from module init before devices can be added.
/// Once per module load: later calls do nothing.
pub(crate) fn init() -> Result {
    // SAFETY: `run` calls this once per load, and nothing locks the table before
    // `is_done` reads true, after it returned.
    STATE.run(|| unsafe { PAGING_USERS.init() }).map_err(|_| EBUSY)
}

/// Runs `f` on the table under its lock (process context: a mutex);
/// `ENODEV` before `init`.
pub(crate) fn with_paging_users<R>(f: impl FnOnce(&mut PagingUsers) -> R) -> Result<R> {
    if !STATE.is_done() {
        return Err(ENODEV);
    }
    Ok(f(&mut PAGING_USERS.lock()))
}
