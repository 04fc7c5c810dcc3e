// SPDX-License-Identifier: GPL-2.0
//! The rxe user ABI's driver commands and responses (`rdma/rdma_user_rxe.h`):
//! plain structs that cross to and from user space as bytes. Each is checked
//! here to have no padding, so a response never carries uninitialised
//! kernel bytes out and any bytes user space sends are a valid command.

use kernel::transmute::{AsBytes, FromBytes};

/// Declares that `$t`, a `repr(C)` struct of integer fields (or of structs
/// declared here), is plain bytes both ways, after checking at build time
/// that its fields fill it without padding. The invocation names every
/// field with its type, which the build checks against the struct (a
/// pattern without `..` names each field exactly once), so the sizes summed
/// are the fields' own.
macro_rules! plain_abi {
    ($t:ident { $($f:ident: $field:ty),+ $(,)? }) => {
        const _: () = {
            #[allow(dead_code)]
            fn fields_are(v: &$t) {
                let $t { $($f),+ } = v;
                $(let _: &$field = $f;)+
            }
            assert!(core::mem::size_of::<$t>() == 0 $(+ core::mem::size_of::<$field>())+);
            // Every field is plain bytes itself (an integer or a struct
            // declared here): a `bool` or an enum field would make some
            // bytes an invalid value.
            fn plain<T: FromBytes + AsBytes>() {}
            $(let _ = plain::<$field>;)+
        };
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
plain_abi!(MmInfo { offset: u64, size: u32, pad: u32 });

/// `struct rxe_create_qp_resp`: where user space finds the two rings.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateQpResp {
    pub(crate) rq_mi: MmInfo,
    pub(crate) sq_mi: MmInfo,
}
plain_abi!(CreateQpResp { rq_mi: MmInfo, sq_mi: MmInfo });

/// `struct rxe_create_srq_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateSrqResp {
    pub(crate) mi: MmInfo,
    pub(crate) srq_num: u32,
    pub(crate) reserved: u32,
}
plain_abi!(CreateSrqResp { mi: MmInfo, srq_num: u32, reserved: u32 });

/// `struct rxe_modify_srq_cmd`: where the new ring's `mminfo` goes on a resize.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct ModifySrqCmd {
    pub(crate) mmap_info_addr: u64,
}
plain_abi!(ModifySrqCmd { mmap_info_addr: u64 });

/// `struct rxe_create_ah_resp`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct CreateAhResp {
    pub(crate) ah_num: u32,
    pub(crate) reserved: u32,
}
plain_abi!(CreateAhResp { ah_num: u32, reserved: u32 });
