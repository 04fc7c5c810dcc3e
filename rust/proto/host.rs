//! Host build of rroce's protocol core. The kernel module compiles the very
//! same files as its `proto` module; this root only lets `cargo test` run
//! them on the build machine.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

#[path = "mod.rs"]
mod proto;
pub use proto::*;
