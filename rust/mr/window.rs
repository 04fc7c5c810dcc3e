// SPDX-License-Identifier: GPL-2.0
//! Memory windows (IBTA 10.6.7): remote rights over part of a user region,
//! granted by a bind through a send queue and taken back by rebinding
//! (type 1), invalidation (type 2B) or deallocation. The rules are in
//! `proto::mw`; this file keeps the windows, their keys and what they
//! are bound to. A window holds its region, which cannot be deregistered
//! while bound (IBTA 10.6.7.2.6); every access through it checks the
//! window again, under its lock, so one unbound meanwhile lets nothing more
//! through.

use super::{KeyUse, MrError, MrInner, MrMem, Target};
use crate::proto::limits;
use crate::proto::mw::{self, BindWr, MwState, MwType, RegionView, Window};
use crate::table::Table;
use kernel::prelude::*;
use kernel::sync::{new_spinlock_irq, Arc, SpinLockIrq};

/// First key index of a window: windows and regions share the 20-bit index
/// space, regions in the lower half, so a key's index says which it names.
pub(crate) const FIRST_INDEX: u32 = limits::TABLE_MAX >> 1;

/// Whether `key` names a window rather than a region.
pub(crate) fn is_window_key(key: u32) -> bool {
    key >> 8 >= FIRST_INDEX
}

/// The QP that binds, invalidates or uses a window: its PD, and its
/// identity for type 2B windows (never reused, unlike QP numbers).
#[derive(Clone, Copy, Debug)]
pub(crate) struct QpRef {
    pub(crate) pdn: u64,
    pub(crate) serial: u64,
}

/// A window in force.
struct Binding {
    mr: Arc<MrInner>,
    window: Window,
    /// Type 2B: the QP it was bound through, whose peer alone may use it.
    qp: Option<u64>,
}

/// What a window's lock protects.
struct WindowState {
    rkey: u32,
    state: MwState,
    bound: Option<Binding>,
    /// Deallocated: nothing binds or uses it any more.
    gone: bool,
}

/// A memory window, shared by the key table and the data path.
#[pin_data]
pub(crate) struct MwInner {
    ty: MwType,
    pdn: u64,
    #[pin]
    state: SpinLockIrq<WindowState>,
}

/// The data the core's `ib_mw` container carries: the window and its key index.
pub(crate) struct MwData {
    index: u32,
    mw: Arc<MwInner>,
}

/// The windows of a device, by key index.
#[pin_data]
pub(crate) struct MwTable {
    #[pin]
    table: Table<MwInner>,
}

impl MwTable {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            table <- Table::new(FIRST_INDEX, FIRST_INDEX + limits::MAX_MW - 1, limits::MAX_MW),
        }? Error)
    }

    /// `alloc_mw`: a window of PD `pdn`, valid but bound to nothing (type
    /// 1) or free (type 2B); returns its data and R_Key.
    pub(crate) fn alloc(&self, pdn: u64, ty: MwType) -> Result<(MwData, u32)> {
        // Allocated here, charged to the process, not under the table's lock:
        // windows pin no memory, so nothing else bounds what one user takes.
        let state = WindowState { rkey: 0, state: MwState::initial(ty), bound: None, gone: false };
        let mw = Arc::pin_init(
            pin_init!(MwInner {
                ty,
                pdn,
                state <- new_spinlock_irq!(state, "rroce_mw"),
            }),
            GFP_KERNEL_ACCOUNT,
        )?;
        let mut rkey = 0;
        let index = self.table.insert_allocated(&mw, |index, w| {
            rkey = index << 8 | u32::from(crate::ib::random_u8());
            w.state.lock().rkey = rkey;
        })?;
        Ok((MwData { index, mw }, rkey))
    }

    /// `dealloc_mw`: the window leaves the table and lets nothing through;
    /// its region may be deregistered again.
    pub(crate) fn dealloc(&self, mw: MwData) {
        drop(self.table.remove(mw.index, &mw.mw));
        let bound = {
            let mut st = mw.mw.state.lock();
            st.gone = true;
            st.bound.take().map(Binding::release)
        };
        // Packets that resolved the window before may still be copying
        // through it; once they are done (those the lanes handed to QPs'
        // own work: see `MrTable::dealloc_window`), nothing reaches its
        // region.
        crate::rx::quiesce();
        drop(bound);
    }

    fn lookup(&self, key: u32) -> Option<Arc<MwInner>> {
        self.table.get(key >> 8)
    }

    /// Executes a BIND_MW posted on QP `qp`: `mr` is what the work
    /// request's L_Key names (looked up only for a bind of some length).
    pub(crate) fn bind(&self, qp: QpRef, wr: &BindWr, mr: Option<Arc<MrInner>>) -> Result<(), mw::MwError> {
        let mw = self.lookup(wr.mw_rkey).ok_or(mw::MwError::Key)?;
        // Only a user region registered under exactly this L_Key binds.
        let mr = mr.filter(|m| matches!(m.mem, MrMem::User(_) | MrMem::Odp(_)) && m.key() == wr.mr_lkey);
        let view = mr.as_ref().map(|m| RegionView { iova: m.iova, len: m.len, access: m.access(), same_pd: m.pdn() == mw.pdn });
        // Whatever region reference is left over (the former binding's, or
        // `mr` if the bind fails) is dropped after the lock: the last one
        // unpins pages, which may sleep.
        let (result, leftover) = Self::bind_locked(&mut mw.state.lock(), &mw, qp, wr, view, mr);
        drop(leftover);
        result
    }

    /// The part of [`Self::bind`] under the window's lock; returns the
    /// outcome and the region references to drop once unlocked.
    fn bind_locked(
        st: &mut WindowState,
        mw: &MwInner,
        qp: QpRef,
        wr: &BindWr,
        view: Option<RegionView>,
        mr: Option<Arc<MrInner>>,
    ) -> (Result<(), mw::MwError>, [Option<Arc<MrInner>>; 2]) {
        if st.gone {
            return (Err(mw::MwError::Key), [mr, None]);
        }
        let b = match mw::check_bind(mw.ty, st.state, st.rkey, qp.pdn == mw.pdn, wr, view) {
            Ok(b) => b,
            Err(e) => return (Err(e), [mr, None]),
        };
        let (binding, unused) = match (b.window, mr) {
            (Some(window), Some(mr)) => {
                // A region being deregistered or re-registered takes no new windows.
                if !mr.hold_window() {
                    return (Err(mw::MwError::Key), [Some(mr), None]);
                }
                (Some(Binding { mr, window, qp: (mw.ty == MwType::Type2).then_some(qp.serial) }), None)
            }
            // A type 1 unbind holds no region.
            (_, mr) => (None, mr),
        };
        (Ok(()), [Self::commit(st, b.rkey, binding), unused])
    }

    /// Puts a bind that passed its checks in force; returns the former
    /// binding's region, released from its window count.
    fn commit(st: &mut WindowState, rkey: u32, binding: Option<Binding>) -> Option<Arc<MrInner>> {
        st.rkey = rkey;
        st.state = MwState::Valid;
        core::mem::replace(&mut st.bound, binding).map(Binding::release)
    }

    /// Invalidates window key `rkey` for QP `qp`: locally (LOCAL_INV, any
    /// QP of the window's PD) or, with `remote`, by a SEND with Invalidate
    /// received on the QP a type 2B window is bound to.
    pub(crate) fn invalidate(&self, rkey: u32, qp: QpRef, remote: bool) -> Result<(), mw::MwError> {
        let mw = self.lookup(rkey).ok_or(mw::MwError::Key)?;
        if mw.pdn != qp.pdn {
            return Err(mw::MwError::Owner);
        }
        let old = {
            let mut st = mw.state.lock();
            if st.gone {
                return Err(mw::MwError::Key);
            }
            mw::check_invalidate(mw.ty, st.state, st.rkey, rkey)?;
            if remote && st.bound.as_ref().and_then(|b| b.qp) != Some(qp.serial) {
                return Err(mw::MwError::Owner);
            }
            st.state = MwState::Free;
            st.bound.take().map(Binding::release)
        };
        drop(old);
        Ok(())
    }

    /// Resolves window key `rkey` for a remote access by QP `qp` needing
    /// `rights` over `len` bytes at `va` (anywhere in the window with
    /// `None`): the region and the address the access lands at.
    pub(crate) fn remote(&self, rkey: u32, qp: QpRef, rights: u32, range: Option<(u64, u64)>) -> Result<Target, MrError> {
        let mw = self.lookup(rkey).ok_or(MrError::Denied)?;
        if mw.pdn != qp.pdn {
            return Err(MrError::Denied);
        }
        let st = mw.state.lock();
        let b = st.bound.as_ref().filter(|_| !st.gone && st.state == MwState::Valid && st.rkey == rkey).ok_or(MrError::Denied)?;
        if b.qp.is_some_and(|serial| serial != qp.serial) {
            return Err(MrError::Denied);
        }
        let va = match range {
            Some((va, len)) => b.window.translate(va, len, rights).map_err(|e| match e {
                mw::MwError::Range => MrError::Range,
                _ => MrError::Denied,
            })?,
            None if b.window.grants(rights) => b.window.addr,
            None => return Err(MrError::Denied),
        };
        // The region's own rights were checked at the bind; its key, PD
        // and bounds are checked again by every copy.
        let by = KeyUse { key: b.mr.key(), pdn: mw.pdn, rights: 0 };
        Ok(Target { mr: b.mr.clone(), by, va })
    }
}

impl Binding {
    /// Ends the binding: the region's window count goes down; the caller
    /// drops the reference outside the window's lock (the last reference
    /// to a region unpins its pages).
    fn release(self) -> Arc<MrInner> {
        self.mr.release_window();
        self.mr
    }
}
