// SPDX-License-Identifier: GPL-2.0
//! Address handles. UD work requests name their destination by `ah_num`
//! (rxe ABI); the handle must belong to the QP's protection domain.

use crate::device::Pd;
use crate::ib::{CreateAhResp, RoceAv, Udata};
use crate::proto::limits;
use crate::table::Table;
use kernel::prelude::*;
use kernel::sync::Arc;

/// A resolved destination.
pub(crate) struct AhInner {
    pub(crate) ah_num: u32,
    pub(crate) pdn: u64,
    pub(crate) av: RoceAv,
}

/// AHs of a device by `ah_num`.
pub(crate) type AhTable = Table<AhInner>;

pub(crate) fn new_table() -> impl PinInit<AhTable, Error> {
    Table::new(1, limits::MAX_AH, limits::MAX_AH)
}

/// Per-AH data in the core's AH object.
pub(crate) struct AhData(Arc<AhInner>);

impl AhData {
    /// The number UD work requests name the handle by.
    pub(crate) fn ah_num(&self) -> u32 {
        self.0.ah_num
    }
}

pub(crate) fn create(table: &AhTable, pd: &Pd, av: &RoceAv, udata: &mut Udata<'_>) -> Result<AhData> {
    if !av.source_is_roce_v2() {
        return Err(EINVAL);
    }
    let inner = table.insert(|ah_num| Ok::<_, Error>(AhInner { ah_num, pdn: pd.pdn, av: *av }))?;
    // Providers too old for `ah_num` pass no room for it; they embed the AV in each WQE.
    if udata.outlen() >= core::mem::size_of::<CreateAhResp>() {
        if let Err(e) = udata.respond(&CreateAhResp { ah_num: inner.ah_num, reserved: 0 }) {
            drop(table.remove(inner.ah_num, &inner));
            return Err(e);
        }
    }
    Ok(AhData(inner))
}

pub(crate) fn destroy(table: &AhTable, ah: AhData) {
    drop(table.remove(ah.0.ah_num, &ah.0));
}

