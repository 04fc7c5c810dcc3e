// SPDX-License-Identifier: GPL-2.0
//! Key material: random bytes for memory keys, and the test knob that ages
//! protection-domain identities.

use crate::sys;

/// A random byte from the kernel's generator, for the variable part of keys.
pub(crate) fn random_u8() -> u8 {
    // SAFETY: no arguments; callable in any context.
    unsafe { sys::rroce_random_u8() }
}

/// How many identities the next PD allocation skips (module parameter
/// `pd_id_skip`, root only, consumed on read). Zero outside tests.
pub(crate) fn take_pd_id_skip() -> u64 {
    // SAFETY: an atomic exchange on a module-owned variable.
    unsafe { sys::rroce_take_pd_id_skip() }
}
