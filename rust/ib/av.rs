// SPDX-License-Identifier: GPL-2.0
//! RoCE address vectors: the core's `struct rdma_ah_attr` read into and
//! written from a kernel-owned [`RoceAv`].

use crate::sys;

/// The RoCE address vector of an `rdma_ah_attr`: where packets go and how
/// they are marked.
#[derive(Clone, Copy, Default)]
pub(crate) struct RoceAv {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid: [u8; 16],
    /// `IB_GID_TYPE_*` of the source GID.
    pub(crate) sgid_type: u32,
    pub(crate) sgid_index: u8,
    pub(crate) flow_label: u32,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    pub(crate) dmac: [u8; 6],
    /// Interface of the source GID (a VLAN device for a VLAN's GID), which
    /// packets leave through; 0 if the GID had none.
    pub(crate) ifindex: i32,
}

/// Why an address vector cannot be used on a RoCEv2 port.
#[derive(Clone, Copy)]
pub(crate) enum AvError {
    /// Not a RoCE attribute, or no GRH (RoCE always routes by GID).
    NotRoce,
    /// The core resolved no source GID entry.
    NoSourceGid,
}

/// Reads the RoCE address vector of `a`.
///
/// # Safety
///
/// `a` must be attributes the core passed for a verb in progress: its
/// `sgid_attr`, if set, is a GID entry the core holds for the verb.
pub(crate) unsafe fn read_av(a: &sys::rdma_ah_attr) -> core::result::Result<RoceAv, AvError> {
    if a.type_ != sys::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE || a.ah_flags as u32 & sys::ib_ah_flags_IB_AH_GRH == 0 {
        return Err(AvError::NotRoce);
    }
    let g = &a.grh;
    if g.sgid_attr.is_null() {
        return Err(AvError::NoSourceGid);
    }
    // SAFETY: the union members are byte arrays over the same storage; `sgid_attr` is a
    // GID entry the core holds a reference on for the duration of the verb (the contract).
    let (dgid, dmac, sgid, sgid_type, ifindex) = unsafe {
        (
            *g.dgid.raw.as_ref(),
            a.__bindgen_anon_1.roce.as_ref().dmac,
            *(*g.sgid_attr).gid.raw.as_ref(),
            (*g.sgid_attr).gid_type,
            sys::rroce_gid_attr_ifindex(g.sgid_attr),
        )
    };
    Ok(RoceAv {
        dgid,
        sgid,
        sgid_type,
        sgid_index: g.sgid_index,
        flow_label: g.flow_label,
        hop_limit: g.hop_limit,
        traffic_class: g.traffic_class,
        sl: a.sl,
        dmac,
        ifindex,
    })
}

/// Writes `av` into `a` for a query (without a GID entry reference).
pub(crate) fn write_av(a: &mut sys::rdma_ah_attr, av: &RoceAv, port: u32) {
    a.type_ = sys::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
    a.ah_flags = sys::ib_ah_flags_IB_AH_GRH as u8;
    a.sl = av.sl;
    a.port_num = port;
    a.grh.sgid_attr = core::ptr::null();
    a.grh.sgid_index = av.sgid_index;
    a.grh.flow_label = av.flow_label;
    a.grh.hop_limit = av.hop_limit;
    a.grh.traffic_class = av.traffic_class;
    // SAFETY: as in `read_av`: plain byte arrays over the unions' storage.
    unsafe {
        *a.grh.dgid.raw.as_mut() = av.dgid;
        a.__bindgen_anon_1.roce.as_mut().dmac = av.dmac;
    }
}

impl RoceAv {
    /// Whether the source GID is a RoCEv2 one (`IB_GID_TYPE_ROCE_UDP_ENCAP`).
    pub(crate) fn source_is_roce_v2(&self) -> bool {
        self.sgid_type == sys::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP
    }
}
