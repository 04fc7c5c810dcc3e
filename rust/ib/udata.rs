// SPDX-License-Identifier: GPL-2.0
//! Driver-private command and response data of user verbs (`ib_udata`).

use crate::sys;
use kernel::prelude::*;
use kernel::transmute::{AsBytes, FromBytes};

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
    pub(crate) fn read<R: FromBytes>(&mut self) -> Result<R> {
        kernel::task::might_sleep();
        let u = self.0.as_mut().ok_or(EINVAL)?;
        let len = core::mem::size_of::<R>();
        if u.inlen < len {
            return Err(EINVAL);
        }
        let mut v = core::mem::MaybeUninit::<R>::zeroed();
        // SAFETY: `v` is writable for `len` bytes; the udata is valid for the call.
        kernel::error::to_result(unsafe { sys::rroce_ib_copy_from_udata(v.as_mut_ptr().cast(), &mut **u, len) })?;
        // SAFETY: `R: FromBytes`: any bytes, here zeroes overwritten by the user's, are a valid `R`.
        Ok(unsafe { v.assume_init() })
    }

    /// Writes `v` to the user address `addr` of the calling process: the
    /// rxe ABI returns some answers through a pointer in the command.
    pub(crate) fn write_to_user<R: AsBytes>(&mut self, addr: u64, v: &R) -> Result {
        kernel::task::might_sleep();
        if self.0.is_none() {
            return Err(EINVAL);
        }
        let bytes = v.as_bytes();
        // SAFETY: a udata exists, so this runs in the system call of the process owning
        // `addr`; the copy checks the user range itself; `bytes` is readable and, as
        // `R: AsBytes`, initialised.
        let left = unsafe { sys::rroce_copy_to_user(addr, bytes.as_ptr().cast(), bytes.len()) };
        if left == 0 {
            Ok(())
        } else {
            Err(EFAULT)
        }
    }

    /// Copies a response struct to user space; the response is cut to the
    /// room user space gave, as older libraries pass shorter buffers.
    pub(crate) fn respond<R: AsBytes>(&mut self, resp: &R) -> Result {
        kernel::task::might_sleep();
        let Some(u) = self.0.as_mut() else { return Ok(()) };
        let bytes = resp.as_bytes();
        let bytes = bytes.get(..u.outlen).unwrap_or(bytes);
        // SAFETY: `bytes` is readable and, as `R: AsBytes`, initialised; the udata is valid.
        kernel::error::to_result(unsafe { sys::rroce_ib_copy_to_udata(&mut **u, bytes.as_ptr().cast(), bytes.len()) })
    }
}
