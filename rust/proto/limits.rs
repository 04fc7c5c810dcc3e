// SPDX-License-Identifier: GPL-2.0
//! Device and port limits rroce advertises. They match rdma_rxe's where the
//! rxe user ABI or interoperability depends on them (SGE counts, inline size,
//! CQE count), so unmodified rdma-core and perftest size their work the same.

/// IBTA vendor id "none" (A3.3.1), as soft devices use.
pub const VENDOR_ID: u32 = 0x00ff_ffff;
/// Default ceiling of the per-device object tables.
pub const TABLE_MAX: u32 = 1 << 20;
/// Work requests per QP ring: rings are vmalloc'ed and mapped into the
/// process, and the requester keeps a copy for retransmission, so this bounds
/// the memory one QP can pin in the kernel.
pub const MAX_QP_WR: u32 = 1 << 15;
/// Queue pairs per device (QPNs 0..16 are reserved for QP0/QP1 and specials).
pub const MAX_QP: u32 = TABLE_MAX - MIN_QP_INDEX;
/// First QPN handed to a regular QP.
pub const MIN_QP_INDEX: u32 = 16;
/// Scatter/gather entries per send or receive WQE.
pub const MAX_SGE: u32 = 32;
/// Scatter/gather entries per RDMA READ.
pub const MAX_SGE_RD: u32 = 32;
/// Bytes of the fixed part of a send WQE in the rxe user ABI.
pub const SEND_WQE_HDR_BYTES: u32 = 208;
/// Bytes of one SGE in the rxe user ABI.
pub const SGE_BYTES: u32 = 16;
/// Inline data bytes per send WQE: the room of `MAX_SGE` SGEs.
pub const MAX_INLINE_DATA: u32 = MAX_SGE * SGE_BYTES;
/// Completion queues per device.
pub const MAX_CQ: u32 = TABLE_MAX;
/// Entries per completion queue.
pub const MAX_CQE: u32 = (1 << 15) - 1;
/// Memory regions per device.
pub const MAX_MR: u32 = (TABLE_MAX >> 1) - 1;
/// Memory windows per device, in the upper half of the key index space.
pub const MAX_MW: u32 = TABLE_MAX - (TABLE_MAX >> 1) - 1;
/// Pages one fast-registration MR maps (`max_fast_reg_page_list_len`), as
/// rdma_rxe: 2 MiB in 4 KiB pages, more than a ULP asks (nvme-rdma 256).
pub const MAX_FAST_REG_PAGES: u32 = 512;
/// Protection domains per device.
pub const MAX_PD: u32 = TABLE_MAX;
/// Outstanding RDMA READ/atomic requests a QP may have as responder.
pub const MAX_QP_RD_ATOM: u32 = 128;
/// Outstanding RDMA READ/atomic requests a QP may initiate.
pub const MAX_QP_INIT_RD_ATOM: u32 = 128;
/// Responder resources per device.
pub const MAX_RES_RD_ATOM: u32 = 0x3f000;
/// Address handles per device (`ah_num` is 1-based).
pub const MAX_AH: u32 = (1 << 15) - 1;
/// Multicast groups per device, QPs of one user per group (advertised as
/// `max_mcast_qp_attach`, what one program gets) and attachments in all,
/// as rdma_rxe.
pub const MAX_MCAST_GRP: u32 = 8192;
pub const MAX_MCAST_QP_ATTACH: u32 = 56;
pub const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 0x70000;
/// QPs of all users in one group: room for sixteen users' full shares, so
/// one user filling a group leaves it open to the others (`mcast_user.rs`).
/// Bounds what the receive path does for one datagram.
pub const MAX_MCAST_GRP_MEMBERS: u32 = MAX_MCAST_QP_ATTACH * 16;
/// Groups of a device one user's QPs may be attached to at a time: a
/// sixteenth of the device's, so one user leaves room for the others
/// (`mcast_user.rs`).
pub const MAX_MCAST_GRP_PER_USER: u32 = MAX_MCAST_GRP / 16;
/// Shared receive queues per device.
pub const MAX_SRQ: u32 = TABLE_MAX - 0x0002_0001;
/// Work requests per SRQ.
pub const MAX_SRQ_WR: u32 = MAX_QP_WR;
/// SGEs per SRQ receive WQE.
pub const MAX_SRQ_SGE: u32 = 27;
/// Partition keys (only the default key is used on RoCE).
pub const MAX_PKEYS: u16 = 64;
/// Local CA ACK delay exponent advertised to peers.
pub const LOCAL_CA_ACK_DELAY: u8 = 15;
/// User contexts per device.
pub const MAX_UCONTEXT: u32 = TABLE_MAX;
/// Page sizes the device maps (any multiple of 4 KiB).
pub const PAGE_SIZE_CAP: u64 = 0xffff_f000;
/// Size of the port's GID table: room for the addresses of the netdev and
/// its VLAN devices, as on mlx5 (256). The core creates three sysfs files
/// per entry at every `rdma link add`: rdma_rxe's 1024 make adding and
/// deleting a device twice as slow.
pub const GID_TABLE_LEN: u32 = 256;
/// Entries of the port's P_Key table.
pub const PKEY_TABLE_LEN: u16 = 1;
/// The default, full-membership partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// Largest message, as IBTA allows (2 GiB).
pub const MAX_MSG_SIZE: u32 = 1 << 31;
/// Most response packets one READ may take (1 GiB at the smallest path MTU,
/// every size at 4096): the requester's and responder's PSN comparisons need
/// a READ to stay well inside half the PSN space. Both sides refuse more.
pub const MAX_READ_PSNS: u32 = 1 << 22;
/// Version of the rxe user ABI spoken to rdma-core's provider.
pub const UVERBS_ABI_VERSION: u32 = 2;
/// Number of ports per device; IB ports are numbered from 1.
pub const NUM_PORTS: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ranges_do_not_overlap() {
        // MR and MW keys come from one 20-bit index space, MRs in the lower half.
        assert!(MAX_MR + MAX_MW < TABLE_MAX);
        assert!(MIN_QP_INDEX + MAX_QP <= TABLE_MAX);
    }

    #[test]
    fn inline_fits_wqe_slot() {
        assert_eq!(MAX_INLINE_DATA, 512);
        assert!(SEND_WQE_HDR_BYTES + MAX_INLINE_DATA <= 1024);
    }
}

/// Data rate of an IB port speed (`IB_SPEED_*`) and width (`IB_WIDTH_*`) as
/// the core derives them from an Ethernet link, kbit/s; `None` for values
/// the core does not define.
pub fn link_kbps(speed: u16, width: u8) -> Option<u64> {
    let lane_kbps: u64 = match speed {
        1 => 2_500_000,
        2 => 5_000_000,
        4 | 8 => 10_000_000,
        16 => 14_000_000,
        32 => 25_000_000,
        64 => 50_000_000,
        128 => 100_000_000,
        256 => 200_000_000,
        _ => return None,
    };
    let lanes: u64 = match width {
        1 => 1,
        16 => 2,
        2 => 4,
        4 => 8,
        8 => 12,
        _ => return None,
    };
    Some(lane_kbps * lanes)
}

#[cfg(test)]
mod link_tests {
    use super::link_kbps;

    #[test]
    fn link_rates() {
        assert_eq!(link_kbps(1, 1), Some(2_500_000));
        assert_eq!(link_kbps(32, 2), Some(100_000_000));
        assert_eq!(link_kbps(4, 16), Some(20_000_000));
        assert_eq!(link_kbps(3, 1), None);
        assert_eq!(link_kbps(1, 3), None);
    }
}
