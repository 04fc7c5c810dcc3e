// SPDX-License-Identifier: GPL-2.0
//! SGE walking: gathers a message out of local MRs (or inline data) and
//! scatters payload into them, checking each region's PD and access.

use super::*;
use crate::proto::access;

/// The status of a walk over SGEs: `LOC_LEN_ERR` if they are shorter than
/// the range, else the first status a piece returned.
pub(super) fn walk_status(r: Result<(), WalkError<WcStatus>>) -> WcStatus {
    match r {
        Ok(()) => WcStatus::Success,
        Err(WalkError::TooShort) => WcStatus::LocLenErr,
        Err(WalkError::Piece(status)) => status,
    }
}

/// Where a message's bytes come from: a WQE's SGEs or its inline data.
#[derive(Clone, Copy)]
pub(super) enum Source<'a> {
    Sges(SgeList<'a>),
    Inline(&'a [u8]),
}

/// Copies `dst.len()` bytes of a message, starting `offset` bytes into it,
/// out of the local MRs (or the inline data).
pub(super) fn gather(data: &DevData, pdn: u64, src: Source<'_>, offset: usize, dst: &mut [u8]) -> WcStatus {
    let sges = match src {
        Source::Inline(bytes) => {
            let Some(src) = offset.checked_add(dst.len()).and_then(|end| bytes.get(offset..end)) else {
                return WcStatus::LocLenErr;
            };
            dst.copy_from_slice(src);
            return WcStatus::Success;
        }
        Source::Sges(sges) => sges,
    };
    walk_status(sges.walk(offset, dst.len(), |addr, lkey, r| {
        let Some(mr) = data.mrs.lookup(lkey) else { return Err(WcStatus::LocProtErr) };
        let by = mr::KeyUse { key: lkey, pdn, rights: 0 };
        mr.read(by, addr, &mut dst[r]).map_err(|_| WcStatus::LocProtErr)
    }))
}

/// Writes `src` into SGEs at byte `offset` of the message; the regions must
/// allow local writes.
pub(super) fn scatter_sges(data: &DevData, pdn: u64, sges: SgeList<'_>, offset: usize, src: &[u8]) -> WcStatus {
    walk_status(sges.walk(offset, src.len(), |addr, lkey, r| {
        let Some(mr) = data.mrs.lookup(lkey) else { return Err(WcStatus::LocProtErr) };
        let by = mr::KeyUse { key: lkey, pdn, rights: access::LOCAL_WRITE };
        mr.write(by, addr, &src[r]).map_err(|_| WcStatus::LocProtErr)
    }))
}
