// SPDX-License-Identifier: GPL-2.0
//! The user a verb runs for, for the bounds that keep one user from taking
//! what the others need (multicast groups, PDs whose memory may fault).

/// A user: the effective user id as the kernel knows it (the same in every
/// namespace) of the process that called the verb.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct UserId(u32);

impl UserId {
    /// The caller's, in a verb of a user context.
    pub(crate) fn current() -> Self {
        Self(kernel::task::Kuid::current_euid().into_raw().val)
    }
}
