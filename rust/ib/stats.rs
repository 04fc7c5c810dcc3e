// SPDX-License-Identifier: GPL-2.0
//! Descriptors of a driver's hardware counters (`struct rdma_stat_desc`), as
//! `rdma statistic` and sysfs name them.

use crate::sys;

/// One counter's descriptor.
#[repr(transparent)]
pub(crate) struct StatDesc(sys::rdma_stat_desc);

impl StatDesc {
    pub(crate) const fn new(name: &'static core::ffi::CStr) -> Self {
        Self(sys::rdma_stat_desc { name: name.as_ptr().cast(), flags: 0, priv_: core::ptr::null() })
    }

    /// The table as the core takes it; the core keeps the pointer as long as
    /// its stats struct lives, so the table is `'static`.
    pub(super) fn as_raw(table: &'static [Self]) -> *const sys::rdma_stat_desc {
        table.as_ptr().cast()
    }
}
