// SPDX-License-Identifier: GPL-2.0
//! Memory windows (IBTA 10.6.7): the rules for binding, invalidating and
//! using a window, without the kernel. A window grants remote rights over
//! part of a region of its PD. Type 1 windows are bound by `ibv_bind_mw`
//! (a send WQE too, in the rxe ABI) and stay valid, a bind of length 0
//! leaving them unusable; type 2B windows start free, are bound through a
//! QP's send queue to that QP alone, and are freed by an invalidation.

use super::access;

/// `enum ib_mw_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwType {
    Type1,
    /// Type 2B: bound to one QP.
    Type2,
}

impl MwType {
    pub fn from_ib(ty: u32) -> Option<Self> {
        match ty {
            1 => Some(Self::Type1),
            2 => Some(Self::Type2),
            _ => None,
        }
    }
}

/// A window's state (IBTA 10.6.7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwState {
    /// Type 2B, not bound: a bind makes it valid.
    Free,
    /// Usable under its current key (a type 1 window bound with length 0
    /// is valid and grants nothing).
    Valid,
}

impl MwState {
    pub fn initial(ty: MwType) -> Self {
        match ty {
            MwType::Type1 => Self::Valid,
            MwType::Type2 => Self::Free,
        }
    }
}

/// A BIND_MW work request (`wr.mw` of `struct rxe_send_wr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BindWr {
    /// Start of the window in the region's addresses.
    pub addr: u64,
    pub len: u64,
    /// L_Key of the region to bind to.
    pub mr_lkey: u32,
    /// The window's current R_Key.
    pub mw_rkey: u32,
    /// The R_Key after the bind: its low byte replaces the window's.
    pub rkey: u32,
    pub access: u32,
}

/// What a bind needs to know of the region named by `mr_lkey`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionView {
    pub iova: u64,
    pub len: u64,
    pub access: u32,
    /// The region is in the window's PD.
    pub same_pd: bool,
}

/// Why a bind, an invalidation or an access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MwError {
    /// The key does not name the window now.
    Key,
    /// The window is not in the state the operation needs.
    State,
    /// Another PD's window or region, or another QP's type 2B window.
    Owner,
    /// Rights the window cannot grant, or the region does not allow.
    Access,
    /// The range is not inside the region (or the window).
    Range,
    /// A type 2B bind without a region or of length 0, or a zero-based type 1.
    Invalid,
}

/// A window in force: what remote accesses it lets through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Start in the region's addresses.
    pub addr: u64,
    pub len: u64,
    pub access: u32,
}

impl Window {
    /// The region address of a remote access of `len` bytes at `va` (an
    /// offset from the start for a zero-based window), if the window
    /// covers it and grants every right in `rights`.
    pub fn translate(&self, va: u64, len: u64, rights: u32) -> Result<u64, MwError> {
        if self.access & rights != rights {
            return Err(MwError::Access);
        }
        let offset = if self.access & access::ZERO_BASED != 0 { va } else { va.checked_sub(self.addr).ok_or(MwError::Range)? };
        let end = offset.checked_add(len).ok_or(MwError::Range)?;
        if end > self.len {
            return Err(MwError::Range);
        }
        // `addr + offset` lies inside a window inside the region.
        self.addr.checked_add(offset).ok_or(MwError::Range)
    }

    /// Whether the window grants every right in `rights` anywhere.
    pub fn grants(&self, rights: u32) -> bool {
        self.access & rights == rights && self.len != 0
    }
}

/// The outcome of a bind that passed its checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The window's new R_Key.
    pub rkey: u32,
    /// `None`: a type 1 window bound with length 0, which grants nothing
    /// and holds no region.
    pub window: Option<Window>,
}

/// Checks a bind of a window of type `ty`, in `state`, whose key is
/// `current_rkey`, posted on a QP of the window's PD (`qp_same_pd`), to
/// the region `mr` (`None` if `mr_lkey` names none) (IBTA 10.6.7.2.1
/// and rdma_rxe's checks).
pub fn check_bind(ty: MwType, state: MwState, current_rkey: u32, qp_same_pd: bool, wr: &BindWr, mr: Option<RegionView>) -> Result<Bound, MwError> {
    if wr.mw_rkey != current_rkey {
        return Err(MwError::Key);
    }
    if !qp_same_pd {
        return Err(MwError::Owner);
    }
    let rights = wr.access & !access::OPTIONAL;
    if rights & !(access::WINDOW | access::ZERO_BASED) != 0 {
        return Err(MwError::Access);
    }
    match ty {
        MwType::Type1 => {
            if state != MwState::Valid {
                return Err(MwError::State);
            }
            if rights & access::ZERO_BASED != 0 {
                return Err(MwError::Invalid);
            }
        }
        MwType::Type2 => {
            if state != MwState::Free {
                return Err(MwError::State);
            }
            if wr.len == 0 {
                return Err(MwError::Invalid);
            }
        }
    }
    let rkey = (current_rkey & !0xff) | (wr.rkey & 0xff);
    if wr.len == 0 {
        // Type 1 only (type 2B was refused above): unbinds.
        return Ok(Bound { rkey, window: None });
    }
    let mr = mr.ok_or(MwError::Invalid)?;
    if !mr.same_pd {
        return Err(MwError::Owner);
    }
    if mr.access & access::MW_BIND == 0 {
        return Err(MwError::Access);
    }
    // Remote writers through the window need the region locally writable.
    if rights & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0 && mr.access & access::LOCAL_WRITE == 0 {
        return Err(MwError::Access);
    }
    let offset = wr.addr.checked_sub(mr.iova).ok_or(MwError::Range)?;
    let end = offset.checked_add(wr.len).ok_or(MwError::Range)?;
    if end > mr.len {
        return Err(MwError::Range);
    }
    Ok(Bound { rkey, window: Some(Window { addr: wr.addr, len: wr.len, access: rights }) })
}

/// Checks an invalidation of `rkey` (LOCAL_INV, or a peer's SEND with
/// Invalidate) of a window of type `ty` in `state` with key
/// `current_rkey`. Only a bound type 2B window is invalidated (IBTA
/// o10-37.2.26); the caller checks the PD, and for a remote invalidation
/// that the window is bound to the receiving QP.
pub fn check_invalidate(ty: MwType, state: MwState, current_rkey: u32, rkey: u32) -> Result<(), MwError> {
    if rkey != current_rkey {
        return Err(MwError::Key);
    }
    match (ty, state) {
        (MwType::Type2, MwState::Valid) => Ok(()),
        (MwType::Type1, _) => Err(MwError::Invalid),
        (MwType::Type2, MwState::Free) => Err(MwError::State),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MR: RegionView = RegionView { iova: 0x1000, len: 0x1000, access: access::LOCAL_WRITE | access::MW_BIND, same_pd: true };

    fn wr(addr: u64, len: u64, access: u32) -> BindWr {
        BindWr { addr, len, mr_lkey: 0x100, mw_rkey: 0x2000_0011, rkey: 0x2000_0012, access }
    }

    #[test]
    fn type2_bind_rotates_the_key_byte_and_grants_the_range() {
        let b = check_bind(MwType::Type2, MwState::Free, 0x2000_0011, true, &wr(0x1800, 0x100, access::REMOTE_WRITE), Some(MR)).unwrap();
        assert_eq!(b.rkey, 0x2000_0012);
        let w = b.window.unwrap();
        assert_eq!(w.translate(0x1800, 0x100, access::REMOTE_WRITE), Ok(0x1800));
        assert_eq!(w.translate(0x1801, 0x100, access::REMOTE_WRITE), Err(MwError::Range));
        assert_eq!(w.translate(0x17ff, 1, access::REMOTE_WRITE), Err(MwError::Range));
        assert_eq!(w.translate(0x1800, 8, access::REMOTE_READ), Err(MwError::Access));
    }

    #[test]
    fn only_the_low_byte_of_the_new_key_is_taken() {
        let mut w = wr(0x1000, 8, access::REMOTE_READ);
        w.rkey = 0xdead_be42;
        let b = check_bind(MwType::Type2, MwState::Free, 0x2000_0011, true, &w, Some(MR)).unwrap();
        assert_eq!(b.rkey, 0x2000_0042);
    }

    #[test]
    fn zero_based_windows_count_from_their_start() {
        let b = check_bind(MwType::Type2, MwState::Free, 0x2000_0011, true, &wr(0x1800, 0x100, access::REMOTE_READ | access::ZERO_BASED), Some(MR)).unwrap();
        let w = b.window.unwrap();
        assert_eq!(w.translate(0, 0x100, access::REMOTE_READ), Ok(0x1800));
        assert_eq!(w.translate(0x80, 0x80, access::REMOTE_READ), Ok(0x1880));
        assert_eq!(w.translate(0x80, 0x81, access::REMOTE_READ), Err(MwError::Range));
        assert_eq!(w.translate(u64::MAX, 2, access::REMOTE_READ), Err(MwError::Range));
    }

    #[test]
    fn bind_refusals() {
        let ok = wr(0x1000, 0x1000, access::REMOTE_WRITE);
        let t2 = |state, qp_same_pd, w: &BindWr, mr| check_bind(MwType::Type2, state, 0x2000_0011, qp_same_pd, w, mr);
        assert!(t2(MwState::Free, true, &ok, Some(MR)).is_ok());
        assert_eq!(t2(MwState::Valid, true, &ok, Some(MR)), Err(MwError::State));
        assert_eq!(t2(MwState::Free, false, &ok, Some(MR)), Err(MwError::Owner));
        assert_eq!(t2(MwState::Free, true, &ok, None), Err(MwError::Invalid));
        assert_eq!(t2(MwState::Free, true, &wr(0x1000, 0, 0), Some(MR)), Err(MwError::Invalid));
        assert_eq!(t2(MwState::Free, true, &BindWr { mw_rkey: 0x2000_0010, ..ok }, Some(MR)), Err(MwError::Key));
        assert_eq!(t2(MwState::Free, true, &ok, Some(RegionView { same_pd: false, ..MR })), Err(MwError::Owner));
        assert_eq!(t2(MwState::Free, true, &ok, Some(RegionView { access: access::LOCAL_WRITE, ..MR })), Err(MwError::Access));
        assert_eq!(t2(MwState::Free, true, &ok, Some(RegionView { access: access::MW_BIND, ..MR })), Err(MwError::Access));
        assert_eq!(t2(MwState::Free, true, &wr(0x1000, 0x1001, access::REMOTE_READ), Some(MR)), Err(MwError::Range));
        assert_eq!(t2(MwState::Free, true, &wr(0xfff, 1, access::REMOTE_READ), Some(MR)), Err(MwError::Range));
        assert_eq!(t2(MwState::Free, true, &wr(0x1001, u64::MAX, access::REMOTE_READ), Some(MR)), Err(MwError::Range));
        assert_eq!(t2(MwState::Free, true, &wr(0x1000, 8, access::MW_BIND), Some(MR)), Err(MwError::Access));
        assert_eq!(t2(MwState::Free, true, &wr(0x1000, 8, 1 << 9), Some(MR)), Err(MwError::Access));
        // Relaxed ordering is a hint: accepted, and not kept as a right.
        let b = t2(MwState::Free, true, &wr(0x1000, 8, access::REMOTE_READ | 1 << 20), Some(MR)).unwrap();
        assert_eq!(b.window.unwrap().access, access::REMOTE_READ);
    }

    #[test]
    fn type1_binds_when_valid_and_unbinds_with_length_zero() {
        let t1 = |w: &BindWr| check_bind(MwType::Type1, MwState::Valid, 0x2000_0011, true, w, Some(MR));
        assert!(t1(&wr(0x1000, 0x10, access::REMOTE_READ)).unwrap().window.is_some());
        assert_eq!(t1(&wr(0x1000, 0, 0)).unwrap(), Bound { rkey: 0x2000_0012, window: None });
        assert_eq!(t1(&wr(0x1000, 0x10, access::REMOTE_READ | access::ZERO_BASED)), Err(MwError::Invalid));
        assert_eq!(
            check_bind(MwType::Type1, MwState::Free, 0x2000_0011, true, &wr(0x1000, 0x10, 0), Some(MR)),
            Err(MwError::State)
        );
    }

    #[test]
    fn only_valid_type2_windows_are_invalidated() {
        assert_eq!(check_invalidate(MwType::Type2, MwState::Valid, 7, 7), Ok(()));
        assert_eq!(check_invalidate(MwType::Type2, MwState::Valid, 7, 8), Err(MwError::Key));
        assert_eq!(check_invalidate(MwType::Type2, MwState::Free, 7, 7), Err(MwError::State));
        assert_eq!(check_invalidate(MwType::Type1, MwState::Valid, 7, 7), Err(MwError::Invalid));
    }

    #[test]
    fn a_window_of_length_zero_grants_nothing() {
        let w = Window { addr: 0x1000, len: 0, access: access::REMOTE_READ };
        assert!(!w.grants(access::REMOTE_READ));
        assert_eq!(w.translate(0x1000, 1, access::REMOTE_READ), Err(MwError::Range));
    }

    proptest! {
        /// Whatever a bind and a peer ask, an access the window lets
        /// through lies inside the window, and the window inside the region.
        #[test]
        fn accesses_stay_inside_the_window_and_the_region(
            iova in any::<u64>(), mr_len in any::<u64>(),
            addr in any::<u64>(), len in any::<u64>(), zero_based in any::<bool>(),
            va in any::<u64>(), n in any::<u64>(),
        ) {
            let mr = RegionView { iova, len: mr_len, access: access::LOCAL_WRITE | access::MW_BIND, same_pd: true };
            let acc = access::REMOTE_READ | if zero_based { access::ZERO_BASED } else { 0 };
            let w = BindWr { addr, len, mr_lkey: 1, mw_rkey: 0x300, rkey: 0x301, access: acc };
            if let Ok(Bound { window: Some(win), .. }) = check_bind(MwType::Type2, MwState::Free, 0x300, true, &w, Some(mr)) {
                prop_assert!(win.addr >= iova && win.addr - iova <= mr_len && win.len <= mr_len - (win.addr - iova));
                if let Ok(at) = win.translate(va, n, access::REMOTE_READ) {
                    prop_assert!(at >= win.addr && at - win.addr <= win.len && n <= win.len - (at - win.addr));
                }
            }
        }
    }
}
