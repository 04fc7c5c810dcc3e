// SPDX-License-Identifier: GPL-2.0
//! Host fuzz targets for the parsers and state machines of the protocol
//! core. Everything they read comes from the wire or from memory user space
//! can write, so each target feeds arbitrary input as well as valid input
//! with hostile mutations, and checks what the crate promises: no panic,
//! every offset and count inside its buffer or ring, and the protocol
//! invariants of each module.
//!
//! The targets are proptest properties on the stable toolchain. They run
//! with the other tests, 256 cases each (`cargo test fuzz::` runs only
//! them). `PROPTEST_CASES` sets the number of cases of every target; a long
//! run:
//!
//! ```text
//! CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
//! CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
//! PROPTEST_CASES=1000000 cargo test --release fuzz::
//! ```
//!
//! The two profile variables keep the arithmetic overflow checks and debug
//! assertions that release builds drop: the kernel module is built with
//! overflow checks (`CONFIG_RUST_OVERFLOW_CHECKS`), so an overflow is a
//! panic there. `PROPTEST_RNG_SEED=<n>` repeats a run. A failure prints the
//! shrunk input; nothing is written to the source tree, so pin a real
//! finding as a unit test of its module.

use super::aeth::{self, NakCode, RetryCounter, Syndrome};
use super::cqe::{Cqe, WcStatus, UVERBS_WC_BYTES};
use super::icrc::{self, IcrcError};
use super::ip::{self, IpAddrs, IPV4_HDR, IPV6_HDR, UDP_HDR};
use super::limits::{MAX_MSG_SIZE, MAX_READ_PSNS};
use super::psn::{Psn, PSN_MASK};
use super::queue::{Geometry, GeometryError, HDR_BYTES, MAX_ELEM_SIZE};
use super::read_res::{self, ReadRes, Executed, ReadResError, ReadResources, ResKind};
use super::resp_seq::{classify, validate_pad, validate_payload, LengthError, OpSeq, Position, PsnClass, SeqOutcome};
use super::segment::{Message, MsgKind, SegmentError, ATOMIC_LEN};
use super::wire::{flags, op_info, Aeth, AtomicEth, Bth, Deth, Feth, Packet, Reth, Transport, WireError, BTH_LEN, ICRC_LEN};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};
use std::vec::Vec;

mod packets;
use packets::{as_parsed, encode_packet, mutate, mutation, parse_and_check, payload_bytes, valid_packet};
mod ip_icrc;
mod responder_seq;
mod segmentation;
mod read_resources;
mod ack_syndromes;
mod rings;

/// Case count from `PROPTEST_CASES` (proptest's default reads it), and no
/// regression files written next to the sources.
fn config() -> ProptestConfig {
    ProptestConfig { failure_persistence: None, ..ProptestConfig::default() }
}

const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];
const TRANSPORTS: [Transport; 4] = [Transport::Rc, Transport::Uc, Transport::Ud, Transport::Cnp];
const KINDS: [MsgKind; 10] = MsgKind::ALL;

fn known_opcodes() -> Vec<u8> {
    (0..=255u8).filter(|&o| op_info(o).is_some()).collect()
}

/// Mostly opcodes rroce speaks, sometimes any byte.
fn opcode() -> impl Strategy<Value = u8> {
    prop_oneof![3 => select(known_opcodes()), 1 => any::<u8>()]
}

fn mtu() -> impl Strategy<Value = u32> {
    prop_oneof![4 => select(&MTUS[..]), 1 => any::<u32>(), 1 => 0u32..=8192]
}
