// SPDX-License-Identifier: GPL-2.0
//! Protocol logic that needs no kernel: it uses `core` only, never allocates
//! and never panics on any input, so the module and host tests share it.

#![forbid(unsafe_code)]

pub mod abi;
pub mod ack_request;
pub mod access;
pub mod aeth;
pub mod atomic;
pub mod cqe;
pub mod dcb;
pub mod dcqcn;
pub mod eui;
pub mod icrc;
pub mod ip;
pub mod limits;
pub mod links;
pub mod mcast_user;
pub mod mtu;
pub mod mw;
pub mod odp_span;
pub mod page_list;
pub mod paging_user;
pub mod psn;
pub mod qos;
pub mod qos_latch;
pub mod qp_state;
pub mod qp_stats;
pub mod queue;
pub mod quota;
pub mod read_res;
pub mod recent_peers;
pub mod resp_seq;
pub mod segment;
pub mod spread;
pub mod task;
pub mod wire;
pub mod wqe;
#[cfg(test)]
mod fuzz;
