// SPDX-License-Identifier: GPL-2.0
//! Driver-private command and response data of user verbs (`ib_udata`).

use crate::sys;
use kernel::prelude::*;

/// The driver part of a verbs command: input from, and response to, user
/// space. Absent for kernel consumers.
pub(crate) struct Udata<'a>(Option<&'a mut sys::ib_udata>);

impl<'a> Udata<'a> {
    /// # Safety
    ///
    /// `raw` must be null or point to a valid `ib_udata` for `'a`.
    pub(super) unsafe fn from_raw(raw: *mut sys::ib_udata) -> Self {
        // SAFETY: per the contract.
        Self(unsafe { raw.as_mut() })
    }

    /// Whether the call comes from user space.
    #[allow(dead_code)]
    pub(crate) fn is_user(&self) -> bool {
        self.0.is_some()
    }

    /// Bytes of driver input.
    #[allow(dead_code)]
    pub(crate) fn inlen(&self) -> usize {
        self.0.as_ref().map_or(0, |u| u.inlen)
    }

    /// Room for the driver response.
    pub(crate) fn outlen(&self) -> usize {
        self.0.as_ref().map_or(0, |u| u.outlen)
    }

    /// Fails with `EINVAL` unless any driver input is all zeroes: the verb
    /// defines none, and non-zero bytes would be a request we do not know.
    pub(crate) fn require_no_driver_input(&self) -> Result {
        let Some(u) = self.0.as_ref() else { return Ok(()) };
        if u.inlen == 0 {
            return Ok(());
        }
        let raw = core::ptr::from_ref::<sys::ib_udata>(u).cast_mut();
        // SAFETY: `raw` is a valid udata for the call.
        if unsafe { sys::rroce_ib_is_udata_cleared(raw, 0, u.inlen) } {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }

    /// Reads the driver command `R` (`EINVAL` if user space sent less).
    pub(crate) fn read<R: Copy + Default>(&mut self) -> Result<R> {
        let u = self.0.as_mut().ok_or(EINVAL)?;
        let len = core::mem::size_of::<R>();
        if u.inlen < len {
            return Err(EINVAL);
        }
        let mut v = R::default();
        // SAFETY: `v` is writable for `len` bytes and any bytes are a valid `R` (plain
        // integers); the udata is valid for the call.
        kernel::error::to_result(unsafe {
            sys::rroce_ib_copy_from_udata(core::ptr::from_mut(&mut v).cast(), &mut **u, len)
        })?;
        Ok(v)
    }

    /// Writes `v` to the user address `addr` of the calling process: the
    /// rxe ABI returns some answers through a pointer in the command.
    pub(crate) fn write_to_user<R: Copy>(&mut self, addr: u64, v: &R) -> Result {
        if self.0.is_none() {
            return Err(EINVAL);
        }
        // SAFETY: a udata exists, so this runs in the system call of the process owning
        // `addr`; the copy checks the user range itself and `v` is readable.
        let left = unsafe {
            sys::rroce_copy_to_user(addr, core::ptr::from_ref(v).cast(), core::mem::size_of::<R>())
        };
        if left == 0 {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }

    /// Copies a response struct to user space; the response is cut to the
    /// room user space gave, as older libraries pass shorter buffers.
    pub(crate) fn respond<R: Copy>(&mut self, resp: &R) -> Result {
        let Some(u) = self.0.as_mut() else { return Ok(()) };
        let len = core::mem::size_of::<R>().min(u.outlen);
        // SAFETY: `resp` is readable for `len <= size_of::<R>()` bytes; the udata is valid.
        kernel::error::to_result(unsafe {
            sys::rroce_ib_copy_to_udata(&mut **u, core::ptr::from_ref(resp).cast(), len)
        })
    }
}
