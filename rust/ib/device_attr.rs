// SPDX-License-Identifier: GPL-2.0
//! What a device and its port report and accept: the core's `struct
//! ib_device_attr`, `ib_port_attr`, `ib_port_immutable` and
//! `ib_device_modify` as kernel-owned values the driver fills or reads, with
//! named capabilities instead of the core's bit constants.

use crate::proto::mtu::IbMtu;
use crate::sys;

/// Saturates a count into the core's `int` fields.
fn int(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// Device capabilities (`enum ib_device_cap_flags`).
#[derive(Clone, Copy, Default)]
pub(crate) struct DeviceCaps(u64);

impl DeviceCaps {
    pub(crate) const SYS_IMAGE_GUID: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_SYS_IMAGE_GUID as u64);
    pub(crate) const PORT_ACTIVE_EVENT: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_PORT_ACTIVE_EVENT as u64);
    pub(crate) const SRQ_RESIZE: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_SRQ_RESIZE as u64);
    /// Fast registration, local invalidation and SEND with Invalidate.
    pub(crate) const MEM_MGT_EXTENSIONS: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_MEM_MGT_EXTENSIONS as u64);
    pub(crate) const MEM_WINDOW: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW as u64);
    pub(crate) const MEM_WINDOW_TYPE_2B: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_MEM_WINDOW_TYPE_2B as u64);
    pub(crate) const FLUSH_GLOBAL: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_FLUSH_GLOBAL as u64);
    pub(crate) const ATOMIC_WRITE: Self = Self(sys::ib_device_cap_flags_IB_DEVICE_ATOMIC_WRITE as u64);
}

impl core::ops::BitOr for DeviceCaps {
    type Output = Self;
    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// Operations a transport can do on on-demand paged memory (`enum
/// ib_odp_transport_cap_bits`).
#[derive(Clone, Copy, Default)]
pub(crate) struct OdpOps(u32);

impl OdpOps {
    pub(crate) const SEND: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SEND);
    pub(crate) const RECV: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_RECV);
    pub(crate) const WRITE: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_WRITE);
    pub(crate) const READ: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_READ);
    pub(crate) const ATOMIC: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC);
    pub(crate) const SRQ_RECV: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_SRQ_RECV);
    pub(crate) const FLUSH: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_FLUSH);
    pub(crate) const ATOMIC_WRITE: Self = Self(sys::ib_odp_transport_cap_bits_IB_ODP_SUPPORT_ATOMIC_WRITE);
}

impl core::ops::BitOr for OdpOps {
    type Output = Self;
    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// On-demand paging of explicit regions, per transport.
#[derive(Clone, Copy, Default)]
pub(crate) struct OdpCaps {
    pub(crate) rc: OdpOps,
    pub(crate) ud: OdpOps,
}

/// How far atomics are atomic (`enum ib_atomic_cap`).
#[derive(Clone, Copy, Default)]
pub(crate) enum AtomicCap {
    #[default]
    None,
    /// Across every QP of the device.
    Device,
}

/// A device's attributes, as `query_device` reports them.
#[derive(Clone, Copy, Default)]
pub(crate) struct DeviceAttrs {
    /// Big-endian, as the core keeps GUIDs.
    pub(crate) sys_image_guid: u64,
    pub(crate) vendor_id: u32,
    pub(crate) max_mr_size: u64,
    pub(crate) page_size_cap: u64,
    pub(crate) caps: DeviceCaps,
    /// User space may deregister a region the device still uses
    /// (`IBK_ALLOW_USER_UNREG`).
    pub(crate) allow_user_unreg: bool,
    /// `Some` advertises on-demand paging (`IBK_ON_DEMAND_PAGING`).
    pub(crate) odp: Option<OdpCaps>,
    pub(crate) atomic: AtomicCap,
    pub(crate) max_qp: u32,
    pub(crate) max_qp_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_sge_rd: u32,
    pub(crate) max_cq: u32,
    pub(crate) max_cqe: u32,
    pub(crate) max_mr: u32,
    pub(crate) max_mw: u32,
    pub(crate) max_pd: u32,
    pub(crate) max_qp_rd_atom: u32,
    pub(crate) max_qp_init_rd_atom: u32,
    pub(crate) max_res_rd_atom: u32,
    pub(crate) max_mcast_grp: u32,
    pub(crate) max_mcast_qp_attach: u32,
    pub(crate) max_total_mcast_qp_attach: u32,
    pub(crate) max_ah: u32,
    pub(crate) max_srq: u32,
    pub(crate) max_srq_wr: u32,
    pub(crate) max_srq_sge: u32,
    pub(crate) max_fast_reg_page_list_len: u32,
    pub(crate) max_pkeys: u16,
    pub(crate) local_ca_ack_delay: u8,
}

impl DeviceAttrs {
    pub(super) fn write(&self, a: &mut sys::ib_device_attr) {
        a.sys_image_guid = self.sys_image_guid;
        a.vendor_id = self.vendor_id;
        a.max_mr_size = self.max_mr_size;
        a.page_size_cap = self.page_size_cap;
        a.device_cap_flags = self.caps.0;
        a.kernel_cap_flags = 0;
        if self.allow_user_unreg {
            a.kernel_cap_flags |= u64::from(sys::ib_kernel_cap_flags_IBK_ALLOW_USER_UNREG);
        }
        if let Some(odp) = self.odp {
            a.kernel_cap_flags |= u64::from(sys::ib_kernel_cap_flags_IBK_ON_DEMAND_PAGING);
            a.odp_caps.general_caps = u64::from(sys::ib_odp_general_cap_bits_IB_ODP_SUPPORT);
            a.odp_caps.per_transport_caps.rc_odp_caps = odp.rc.0;
            a.odp_caps.per_transport_caps.ud_odp_caps = odp.ud.0;
        }
        a.atomic_cap = match self.atomic {
            AtomicCap::None => sys::ib_atomic_cap_IB_ATOMIC_NONE,
            AtomicCap::Device => sys::ib_atomic_cap_IB_ATOMIC_HCA,
        };
        a.max_qp = self.max_qp;
        a.max_qp_wr = self.max_qp_wr;
        a.max_send_sge = self.max_send_sge;
        a.max_recv_sge = self.max_recv_sge;
        a.max_sge_rd = self.max_sge_rd;
        a.max_cq = self.max_cq;
        a.max_cqe = self.max_cqe;
        a.max_mr = self.max_mr;
        a.max_mw = self.max_mw;
        a.max_pd = self.max_pd;
        a.max_qp_rd_atom = self.max_qp_rd_atom;
        a.max_qp_init_rd_atom = self.max_qp_init_rd_atom;
        a.max_res_rd_atom = self.max_res_rd_atom;
        a.max_mcast_grp = self.max_mcast_grp;
        a.max_mcast_qp_attach = self.max_mcast_qp_attach;
        a.max_total_mcast_qp_attach = self.max_total_mcast_qp_attach;
        a.max_ah = self.max_ah;
        a.max_srq = self.max_srq;
        a.max_srq_wr = self.max_srq_wr;
        a.max_srq_sge = self.max_srq_sge;
        a.max_fast_reg_page_list_len = self.max_fast_reg_page_list_len;
        a.max_pkeys = self.max_pkeys;
        a.local_ca_ack_delay = self.local_ca_ack_delay;
    }
}

/// Logical state of a port (`enum ib_port_state`).
#[derive(Clone, Copy)]
pub(crate) enum PortState {
    Down,
    Active,
}

/// Physical state of a port (`enum ib_port_phys_state`).
#[derive(Clone, Copy)]
pub(crate) enum PortPhysState {
    Disabled,
    Polling,
    LinkUp,
}

/// A port's attributes, as `query_port` reports them.
#[derive(Clone, Copy)]
pub(crate) struct PortAttrs {
    pub(crate) state: PortState,
    pub(crate) phys_state: PortPhysState,
    pub(crate) max_mtu: IbMtu,
    pub(crate) active_mtu: IbMtu,
    pub(crate) gid_tbl_len: u32,
    /// The port takes connection management MADs (`IB_PORT_CM_SUP`).
    pub(crate) cm_supported: bool,
    pub(crate) max_msg_sz: u32,
    pub(crate) pkey_tbl_len: u16,
    pub(crate) max_vl_num: u8,
    /// `enum ib_port_speed` and `enum ib_port_width`, as the core's
    /// Ethernet speed query answers them.
    pub(crate) active_speed: u16,
    pub(crate) active_width: u8,
}

impl PortAttrs {
    pub(super) fn write(&self, a: &mut sys::ib_port_attr) {
        a.state = match self.state {
            PortState::Down => sys::ib_port_state_IB_PORT_DOWN,
            PortState::Active => sys::ib_port_state_IB_PORT_ACTIVE,
        };
        a.phys_state = match self.phys_state {
            PortPhysState::Disabled => sys::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED,
            PortPhysState::Polling => sys::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING,
            PortPhysState::LinkUp => sys::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP,
        } as u8;
        a.max_mtu = self.max_mtu as u32;
        a.active_mtu = self.active_mtu as u32;
        a.gid_tbl_len = int(self.gid_tbl_len);
        a.port_cap_flags = if self.cm_supported { sys::ib_port_capability_mask_bits_IB_PORT_CM_SUP } else { 0 };
        a.max_msg_sz = self.max_msg_sz;
        a.pkey_tbl_len = self.pkey_tbl_len;
        a.max_vl_num = self.max_vl_num;
        a.active_speed = self.active_speed;
        a.active_width = self.active_width;
    }
}

/// What never changes about a port, read once at registration.
#[derive(Clone, Copy)]
pub(crate) struct PortImmutable {
    pub(crate) gid_tbl_len: u32,
    pub(crate) pkey_tbl_len: u16,
    /// Largest MAD the port's GSI QP carries.
    pub(crate) max_mad_size: u32,
}

impl PortImmutable {
    /// Writes the attributes of a RoCEv2 port (the only protocol of this layer).
    pub(super) fn write(&self, imm: &mut sys::ib_port_immutable) {
        imm.core_cap_flags = sys::RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
        imm.gid_tbl_len = int(self.gid_tbl_len);
        imm.pkey_tbl_len = int(u32::from(self.pkey_tbl_len));
        imm.max_mad_size = self.max_mad_size;
    }
}

/// Bytes of a node description.
pub(crate) const NODE_DESC_LEN: usize = 64;

/// A `modify_device` request: what to change; `None` leaves it.
pub(crate) struct DeviceModify {
    /// Host order, as the request carries it.
    pub(crate) sys_image_guid: Option<u64>,
    pub(crate) node_desc: Option<[u8; NODE_DESC_LEN]>,
}

impl DeviceModify {
    /// Reads a request; `None` if it asks for a change this layer does not know.
    pub(super) fn from_raw(mask: i32, m: &sys::ib_device_modify) -> Option<Self> {
        let guid = sys::ib_device_modify_flags_IB_DEVICE_MODIFY_SYS_IMAGE_GUID as i32;
        let desc = sys::ib_device_modify_flags_IB_DEVICE_MODIFY_NODE_DESC as i32;
        if mask & !(guid | desc) != 0 {
            return None;
        }
        Some(Self {
            sys_image_guid: (mask & guid != 0).then_some(m.sys_image_guid),
            node_desc: (mask & desc != 0).then_some(m.node_desc),
        })
    }
}
