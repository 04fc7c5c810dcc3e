// SPDX-License-Identifier: GPL-2.0
//! Kernel consumers' memory. With a null DMA device the core's virtual DMA
//! ops hand consumers kernel virtual addresses as "DMA" addresses, and the
//! SGEs they post carry those. Reads are fault-checked and writes must land
//! in the linear map, so a consumer's bad address becomes an error
//! completion, not an oops.

use crate::proto::atomic::AtomicOp;
use crate::sys;
use kernel::prelude::*;

/// Copies `dst.len()` bytes from kernel virtual address `src`.
pub(crate) fn copy_from_kernel(src: u64, dst: &mut [u8]) -> Result {
    // SAFETY: `dst` is writable for its length; the source is checked by the nofault copy.
    let r = unsafe { sys::rroce_copy_from_kernel(dst.as_mut_ptr().cast(), src, dst.len()) };
    if r == 0 {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// Copies `src` to kernel virtual address `dst`.
pub(crate) fn copy_to_kernel(dst: u64, src: &[u8]) -> Result {
    // SAFETY: `src` is readable for its length; the helper refuses destinations outside the
    // linear map. Kernel consumers hand out these addresses for the device to write.
    let r = unsafe { sys::rroce_copy_to_kernel(dst, src.as_ptr().cast(), src.len()) };
    if r == 0 {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// The helpers' operation code and operands for `op`.
pub(super) fn helper_atomic(op: AtomicOp) -> (sys::rroce_atomic_op, u64, u64) {
    match op {
        AtomicOp::CompareSwap { compare, swap } => (sys::rroce_atomic_op_RROCE_ATOMIC_COMPARE_SWAP, compare, swap),
        AtomicOp::FetchAdd { add } => (sys::rroce_atomic_op_RROCE_ATOMIC_FETCH_ADD, 0, add),
        AtomicOp::Store { value } => (sys::rroce_atomic_op_RROCE_ATOMIC_STORE, 0, value),
    }
}

/// Executes `op` on the 8 bytes at kernel virtual address `addr` (8-byte
/// aligned, in the linear map). Returns the value found.
pub(crate) fn atomic_on_kernel(addr: u64, op: AtomicOp) -> Result<u64> {
    let (code, compare, operand) = helper_atomic(op);
    let mut old = 0u64;
    // SAFETY: the helper checks alignment and that the address is in the linear map;
    // `old` is a valid out pointer.
    let r = unsafe { sys::rroce_kernel_atomic(addr, code, compare, operand, &mut old) };
    if r == 0 {
        Ok(old)
    } else {
        Err(EFAULT)
    }
}
