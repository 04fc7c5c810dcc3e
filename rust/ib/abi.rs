// SPDX-License-Identifier: GPL-2.0
//! The rxe user ABI's driver commands and responses (`rdma/rdma_user_rxe.h`):
//! plain structs that cross to and from user space as bytes. Each is checked
//! here to have no padding, so a response never carries uninitialised
//! kernel bytes out and any bytes user space sends are a valid command.

use kernel::transmute::{AsBytes, FromBytes};

/// Declares that `$t`, a `repr(C)` struct of integer fields (or of structs
/// declared here), is plain bytes both ways, after checking at build time
/// that its fields fill it without padding.
macro_rules! plain_abi {
    ($t:ty => $($field:ty),+) => {
        const _: () = assert!(core::mem::size_of::<$t>() == 0 $(+ core::mem::size_of::<$field>())+);
        // SAFETY: `repr(C)` with only integer (or plain-ABI) fields and no padding, as the
        // assertion above checks: every byte is a field byte, and any bytes are a valid value.
        unsafe impl FromBytes for $t {}
        // SAFETY: as above: no padding, so every byte of a value is initialised.
        unsafe impl AsBytes for $t {}
    };
}

/// `struct mminfo`: where user space finds a ring.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct MmInfo {
    pub(crate) offset: u64,
    pub(crate) size: u32,
    pub(crate) pad: u32,
}
plain_abi!(MmInfo => u64, u32, u32);

/// `struct rxe_create_qp_resp`: where user space finds the two rings.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateQpResp {
    pub(crate) rq_mi: MmInfo,
    pub(crate) sq_mi: MmInfo,
}
plain_abi!(CreateQpResp => MmInfo, MmInfo);

/// `struct rxe_create_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateSrqResp {
    pub(crate) mi: MmInfo,
    pub(crate) srq_num: u32,
    pub(crate) reserved: u32,
}
plain_abi!(CreateSrqResp => MmInfo, u32, u32);

/// `struct rxe_modify_srq_cmd`: where the new ring's `mminfo` goes on a resize.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ModifySrqCmd {
    pub(crate) mmap_info_addr: u64,
}
plain_abi!(ModifySrqCmd => u64);

/// `struct rxe_create_ah_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateAhResp {
    pub(crate) ah_num: u32,
    pub(crate) reserved: u32,
}
plain_abi!(CreateAhResp => u32, u32);
