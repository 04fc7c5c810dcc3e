// SPDX-License-Identifier: GPL-2.0
//! The user a verb runs for, for the bounds that keep one user from taking
//! what the others need (multicast groups, PDs whose memory may fault).

/// A user: the one the caller's use of shared bounds is charged to. Its
/// effective user id in the initial namespace; inside a user namespace the
/// namespace's owner, so the ids a user maps in its own namespaces (its
/// subordinate ids) do not each get a share; but a namespace root created
/// (one container of a runtime that runs as root) is the host uid its ids
/// map to, so that containers do not share root's one share.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct UserId(u32);

impl UserId {
    /// The caller's, in a verb of a user context.
    pub(crate) fn current() -> Self {
        Self(crate::ib::charged_uid())
    }
}
