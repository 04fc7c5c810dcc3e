// SPDX-License-Identifier: GPL-2.0
//! The rroce device: creation on `rdma link add`, reaction to netdevice
//! events, and the device-level verbs. Safe Rust over the `ib` and `net`
//! abstractions.

use crate::counters::{Counter, Counters};
use crate::ah;
use crate::cq;
use crate::mr;
use crate::qp;
use crate::srq;
use crate::pd_paging::PdPaging;
use crate::ib::{self, IbDriver, LinkHandler, Udata, UserContext};
use crate::net::{LinkKind, NetDev, NetdevEvent, NetdevHandler};
use crate::proto::quota::{Quota, Slots};
use crate::proto::{eui, limits, mtu::IbMtu, qos};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use crate::port_qos::PortQos;

/// The driver type: ties the verbs, link and netdevice callbacks together.
pub(crate) struct Rroce;

/// A rroce device.
pub(crate) type Device = ib::Device<Rroce>;

/// Per-device state.
#[pin_data]
pub(crate) struct DevData {
    #[pin]
    pub(crate) mrs: mr::MrTable,
    #[pin]
    pub(crate) qps: qp::QpTable,
    #[pin]
    pub(crate) ahs: ah::AhTable,
    #[pin]
    pub(crate) srqs: srq::SrqTable,
    #[pin]
    pub(crate) mcast: qp::mcast::McastTable,
    /// IB MTU enum of the port, following the netdev's MTU.
    port_mtu: AtomicU32,
    /// The port's data rate in kbit/s as the core last derived it from the
    /// netdev (each `query_port`), for congestion control; 0 until known.
    line_kbps: AtomicU64,
    /// Port state last seen, to count transitions to down.
    port_active: AtomicBool,
    sys_image_guid: AtomicU64,
    /// Per-device object limits; each object's slot is given back when it
    /// is destroyed.
    ucontexts: Quota,
    pds: Quota,
    cqs: Quota,
    /// Identity of the next PD; never wraps (allocation fails first).
    next_pdn: AtomicU64,
    pub(crate) counters: Counters,
    /// QPs bound to counter objects (`rdma statistic qp`).
    #[pin]
    qp_bindings: crate::qp_counters::Bindings,
    /// Priority, ECN and congestion control settings (sysfs `qos/`).
    pub(crate) qos: PortQos,
    /// The module's receive queues, for packets this host sends itself
    /// (taken once here: looking them up takes a lock process context holds
    /// with softirqs on).
    pub(crate) rxq: Arc<crate::rx::RxQueue>,
    /// Keeps the namespace's UDP sockets open while the device exists.
    _sockets: crate::net::PortHold,
}

impl DevData {
    fn new(
        eth_mtu: u32,
        active: bool,
        guid: u64,
        sockets: crate::net::PortHold,
        rxq: Arc<crate::rx::RxQueue>,
        qos: PortQos,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            mrs <- mr::MrTable::new(),
            qps <- qp::new_table(),
            ahs <- ah::new_table(),
            srqs <- srq::new_table(),
            mcast <- qp::mcast::McastTable::new(),
            port_mtu: AtomicU32::new(IbMtu::from_eth_mtu(eth_mtu) as u32),
            line_kbps: AtomicU64::new(0),
            port_active: AtomicBool::new(active),
            sys_image_guid: AtomicU64::new(guid),
            ucontexts: Quota::new(limits::MAX_UCONTEXT as usize),
            pds: Quota::new(limits::MAX_PD as usize),
            cqs: Quota::new(limits::MAX_CQ as usize),
            next_pdn: AtomicU64::new(1),
            counters: Counters::new(),
            qp_bindings <- crate::qp_counters::Bindings::new(),
            qos,
            rxq,
            _sockets: sockets,
        }? Error)
    }

    fn set_eth_mtu(&self, eth_mtu: u32) {
        self.port_mtu.store(IbMtu::from_eth_mtu(eth_mtu) as u32, Ordering::Relaxed);
    }

    /// The port's data rate in kbit/s, if known. Read on the data path: the
    /// core's speed query takes RTNL, so it is cached here by `query_port`.
    pub(crate) fn line_kbps(&self) -> Option<u64> {
        match self.line_kbps.load(Ordering::Relaxed) {
            0 => None,
            v => Some(v),
        }
    }

    pub(crate) fn active_mtu(&self) -> IbMtu {
        IbMtu::from_enum(self.port_mtu.load(Ordering::Relaxed)).unwrap_or(IbMtu::Mtu256)
    }

    /// Counts a fall of the port. (The core tells the consumers of the
    /// change: `IB_EVENT_PORT_ACTIVE`, `IB_EVENT_PORT_ERR`.)
    fn port_state_changed(&self, active: bool) {
        let was_active = self.port_active.swap(active, Ordering::Relaxed);
        if was_active && !active {
            self.counters.inc(Counter::LinkDowned);
        }
    }
}

/// Takes one slot of a per-device object limit, or fails with `ENOMEM` as
/// hardware does when a table is full.
fn take_slot(quota: &Quota) -> Result<Slots<'_>> {
    quota.try_take(1).ok_or(ENOMEM)
}

/// Per-user-context state.
pub(crate) struct Ucontext;

/// Per-protection-domain state.
pub(crate) struct Pd {
    /// Protection domain identity: objects of one PD match on it. Unique for
    /// the device's lifetime, so a PD can never take the identity of another
    /// (a kernel PD whose DMA MR covers all memory, say).
    pub(crate) pdn: u64,
    /// Whether the PD has on-demand paging regions, shared with its QPs and SRQs.
    pub(crate) paging: Arc<PdPaging>,
}

const PORT: u32 = 1;

/// A C string for messages; device and interface names are ASCII.
fn text(s: &CStr) -> &str {
    s.to_str().unwrap_or("?")
}

fn check_port(port: u32) -> Result {
    if port == PORT {
        Ok(())
    } else {
        Err(EINVAL)
    }
}

/// The sysfs attributes of rroce devices (`qos/`).
static ATTRS: ib::AttrGroup<Rroce> = ib::AttrGroup::new();

#[vtable]
impl IbDriver for Rroce {
    type DevData = DevData;
    type UctxData = Ucontext;
    type PdData = Pd;
    type CqData = cq::CqData;
    type MrData = mr::MrData;
    type MwData = mr::MwData;
    type QpData = qp::QpData;
    type SrqData = srq::SrqData;
    type AhData = ah::AhData;
    type CounterData = crate::qp_counters::CounterData;

    const HW_STATS: &'static [ib::StatDesc] = crate::counters::DESCS;
    const ATTR_GROUP: &'static CStr = c"qos";

    fn attr_name(id: usize) -> Option<&'static CStr> {
        qos::attr_name(id)
    }

    fn attr_group() -> Option<&'static ib::AttrGroup<Self>> {
        Some(&ATTRS)
    }

    fn attr_show(dev: &Device, id: usize, page: &mut [u8]) -> Result<usize> {
        let settings = dev.data().qos.settings();
        let mut out = qos::TextBuf::new(page);
        settings.show(id, &mut out).map_err(|_| EINVAL)?;
        Ok(out.len())
    }

    fn attr_store(dev: &Device, id: usize, input: &[u8]) -> Result {
        dev.data().qos.update(|s| s.store(id, input)).map_err(|e| match e {
            qos::StoreError::Invalid(_) => EINVAL,
            qos::StoreError::SetByDcb => EBUSY,
            qos::StoreError::ReadOnly => EPERM,
        })
    }

    fn attr_read_only(id: usize) -> bool {
        qos::attr_read_only(id)
    }
    // rdma-core's unmodified rxe provider drives rroce devices.
    const DRIVER_ID: ib::DriverId = ib::DriverId::Rxe;
    const UVERBS_ABI_VERSION: u32 = crate::proto::limits::UVERBS_ABI_VERSION;
    const LINK_LAYER: ib::LinkLayer = ib::LinkLayer::Ethernet;
    const CONFLICTING_MODULES: &'static [&'static CStr] = &[c"rdma_rxe"];

    fn query_device(dev: &Device) -> Result<ib::DeviceAttrs> {
        let recv = ib::OdpOps::SEND | ib::OdpOps::RECV | ib::OdpOps::SRQ_RECV;
        Ok(ib::DeviceAttrs {
            sys_image_guid: dev.data().sys_image_guid.load(Ordering::Relaxed),
            vendor_id: limits::VENDOR_ID,
            max_mr_size: u64::MAX,
            page_size_cap: limits::PAGE_SIZE_CAP,
            caps: ib::DeviceCaps::SYS_IMAGE_GUID
                | ib::DeviceCaps::PORT_ACTIVE_EVENT
                | ib::DeviceCaps::SRQ_RESIZE
                | ib::DeviceCaps::MEM_MGT_EXTENSIONS
                // Memory windows of type 1 and 2B.
                | ib::DeviceCaps::MEM_WINDOW
                | ib::DeviceCaps::MEM_WINDOW_TYPE_2B
                // FLUSH for global visibility (not persistence: rroce has no
                // persistent memory support) and ATOMIC WRITE.
                | ib::DeviceCaps::FLUSH_GLOBAL
                | ib::DeviceCaps::ATOMIC_WRITE,
            allow_user_unreg: true,
            // On-demand paging, explicit regions only, for what rdma_rxe offers it.
            odp: mr::odp_enabled().then_some(ib::OdpCaps {
                ud: recv,
                rc: recv
                    | ib::OdpOps::WRITE
                    | ib::OdpOps::READ
                    | ib::OdpOps::ATOMIC
                    | ib::OdpOps::FLUSH
                    | ib::OdpOps::ATOMIC_WRITE,
            }),
            // Atomic across every QP of the device, as rdma_rxe promises. (They
            // are locked CPU instructions, so atomic against the CPU too, but
            // that is not what is tested.)
            atomic: ib::AtomicCap::Device,
            max_qp: limits::MAX_QP,
            max_qp_wr: limits::MAX_QP_WR,
            max_send_sge: limits::MAX_SGE,
            max_recv_sge: limits::MAX_SGE,
            max_sge_rd: limits::MAX_SGE_RD,
            max_cq: limits::MAX_CQ,
            max_cqe: limits::MAX_CQE,
            max_mr: limits::MAX_MR,
            max_mw: limits::MAX_MW,
            max_pd: limits::MAX_PD,
            max_qp_rd_atom: limits::MAX_QP_RD_ATOM,
            max_qp_init_rd_atom: limits::MAX_QP_INIT_RD_ATOM,
            max_res_rd_atom: limits::MAX_RES_RD_ATOM,
            max_mcast_grp: limits::MAX_MCAST_GRP,
            max_mcast_qp_attach: limits::MAX_MCAST_QP_ATTACH,
            max_total_mcast_qp_attach: limits::MAX_TOTAL_MCAST_QP_ATTACH,
            max_ah: limits::MAX_AH,
            max_srq: limits::MAX_SRQ,
            max_srq_wr: limits::MAX_SRQ_WR,
            max_srq_sge: limits::MAX_SRQ_SGE,
            max_fast_reg_page_list_len: limits::MAX_FAST_REG_PAGES,
            max_pkeys: limits::MAX_PKEYS,
            local_ca_ack_delay: limits::LOCAL_CA_ACK_DELAY,
        })
    }

    fn query_port(dev: &Device, port: u32) -> Result<ib::PortAttrs> {
        check_port(port)?;
        let ndev = dev.netdev().ok_or(ENODEV)?;
        let active = ndev.is_active();
        // Link speed as ethtool reports it; virtual links without one get the core's default.
        let (speed, width) = dev.eth_speed(port).unwrap_or((1, 1));
        if let Some(kbps) = limits::link_kbps(speed, width) {
            dev.data().line_kbps.store(kbps, Ordering::Relaxed);
        }
        Ok(ib::PortAttrs {
            state: if active { ib::PortState::Active } else { ib::PortState::Down },
            phys_state: if active {
                ib::PortPhysState::LinkUp
            } else if ndev.is_up() {
                ib::PortPhysState::Polling
            } else {
                ib::PortPhysState::Disabled
            },
            max_mtu: IbMtu::Mtu4096,
            active_mtu: dev.data().active_mtu(),
            gid_tbl_len: limits::GID_TABLE_LEN,
            cm_supported: true,
            max_msg_sz: limits::MAX_MSG_SIZE,
            pkey_tbl_len: limits::PKEY_TABLE_LEN,
            max_vl_num: 1,
            active_speed: speed,
            active_width: width,
        })
    }

    fn port_immutable(_dev: &Device, port: u32) -> Result<ib::PortImmutable> {
        check_port(port)?;
        Ok(ib::PortImmutable {
            gid_tbl_len: limits::GID_TABLE_LEN,
            pkey_tbl_len: limits::PKEY_TABLE_LEN,
            // IB_MGMT_MAD_SIZE: the GSI QP carries standard 256-byte MADs.
            max_mad_size: 256,
        })
    }

    fn query_pkey(_dev: &Device, port: u32, index: u16) -> Result<u16> {
        check_port(port)?;
        if index != 0 {
            return Err(EINVAL);
        }
        Ok(limits::DEFAULT_PKEY)
    }

    fn modify_device(dev: &Device, change: &ib::DeviceModify) -> Result {
        if let Some(guid) = change.sys_image_guid {
            // The modify request carries the GUID in host order; attributes keep it big-endian.
            dev.data().sys_image_guid.store(guid.to_be(), Ordering::Relaxed);
        }
        if let Some(desc) = &change.node_desc {
            dev.set_node_desc(desc);
        }
        Ok(())
    }

    fn alloc_ucontext(dev: &Device, udata: &mut Udata<'_>) -> Result<Ucontext> {
        udata.require_no_driver_input()?;
        take_slot(&dev.data().ucontexts)?.keep();
        Ok(Ucontext)
    }

    fn dealloc_ucontext(dev: &Device, _uctx: Ucontext) {
        dev.data().ucontexts.release(1);
    }

    fn disassociate_ucontext(_dev: &Device, _uctx: &Ucontext) {
        // Nothing is left to take back. The core destroyed the context's
        // objects first, and each destroy waited for the packet processing
        // that held its object. The rings the process still maps are
        // vmalloc pages its mapping holds a reference on, which the kernel
        // no longer reads or writes; they are freed with the mapping. New
        // mappings and verbs of the context are refused by the core.
    }

    fn alloc_pd(dev: &Device, udata: &mut Udata<'_>) -> Result<Pd> {
        udata.require_no_driver_input()?;
        let d = dev.data();
        let skip = ib::take_pd_id_skip();
        let pdn = d
            .next_pdn
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(skip)?.checked_add(1))
            .map_err(|_| ENOSPC)?
            .checked_add(skip)
            .ok_or(ENOSPC)?;
        let paging = PdPaging::new()?;
        take_slot(&d.pds)?.keep();
        Ok(Pd { pdn, paging })
    }

    fn dealloc_pd(dev: &Device, pd: Pd) {
        // Its queue goes with the last reference (its QPs and SRQs went
        // first, and with its QPs their links).
        pd.paging.forget();
        dev.data().pds.release(1);
    }

    fn read_hw_stats(dev: &Device, _port: u32, out: &mut [u64]) {
        let d = dev.data();
        d.qp_bindings.read_port(&d.counters, out);
    }

    fn qp_stat(index: usize) -> bool {
        Counter::index_is_per_qp(index)
    }

    fn counter_init(_dev: &Device) -> crate::qp_counters::CounterData {
        crate::qp_counters::CounterData::new()
    }

    fn counter_new_id(dev: &Device) -> Result<u32> {
        dev.data().qp_bindings.new_id()
    }

    fn counter_bind_qp(counter: &ib::QpCounter<Self>, qp: &qp::Qp) -> Result {
        counter.device().data().qp_bindings.bind(counter.id(), qp::counters(qp))
    }

    fn counter_unbind_qp(counter: &ib::QpCounter<Self>, qp: &qp::Qp) {
        counter.device().data().qp_bindings.unbind(counter.data(), qp::counters(qp));
    }

    fn counter_read(counter: &ib::QpCounter<Self>, out: &mut [u64]) {
        counter.device().data().qp_bindings.read_counter(counter.id(), counter.data(), out);
    }

    fn create_cq(
        dev: &Device,
        init: &ib::CqInit,
        uctx: Option<&UserContext>,
        udata: &mut Udata<'_>,
    ) -> Result<(impl PinInit<cq::CqData, Error>, u32)> {
        let d = dev.data();
        let slot = take_slot(&d.cqs)?;
        let cq = cq::create(init, uctx, udata)?;
        slot.keep();
        Ok(cq)
    }

    fn reg_user_mr(
        dev: &Device,
        pd: &Pd,
        start: u64,
        len: u64,
        iova: u64,
        access: i32,
        udata: &mut Udata<'_>,
    ) -> Result<(mr::MrData, ib::MrKeys)> {
        mr::reg_user(dev, &dev.data().mrs, pd, start, len, iova, access, udata)
    }

    fn rereg_user_mr(
        dev: &Device,
        mr: &mr::MrData,
        pd: &Pd,
        change: ib::Rereg<'_, Pd>,
        udata: &mut Udata<'_>,
    ) -> Result<Option<(mr::MrData, ib::MrKeys)>> {
        mr::rereg_user(dev, &dev.data().mrs, mr, pd, change, udata)
    }

    fn get_dma_mr(dev: &Device, pd: &Pd, access: i32, grant: ib::KernelMemory) -> Result<(mr::MrData, ib::MrKeys)> {
        mr::get_dma(&dev.data().mrs, pd, access, grant)
    }

    fn alloc_mr(dev: &Device, pd: &Pd, max_num_sg: u32, id: ib::FastMrId<'_>) -> Result<(mr::MrData, ib::MrKeys)> {
        mr::alloc_fast(&dev.data().mrs, pd, max_num_sg, id)
    }

    fn map_mr_sg(mr: &mr::MrData, sg: &ib::MrSg) -> Result<i32> {
        mr::map_sg(mr, sg)
    }

    fn dereg_mr(dev: &Device, pd: &Pd, data: &mr::MrData) -> Result {
        mr::dereg(&dev.data().mrs, pd, data)
    }

    fn advise_mr(dev: &Device, pd: &Pd, advice: ib::Advice, sync: bool, sges: &[ib::AdviseSge]) -> Result {
        mr::advise(&dev.data().mrs, pd, advice, sync, sges)
    }

    fn alloc_mw(dev: &Device, pd: &Pd, ty: u32, udata: &mut Udata<'_>) -> Result<(mr::MwData, u32)> {
        // rxe's `alloc_mw` carries no driver data either way.
        udata.require_no_driver_input()?;
        dev.data().mrs.alloc_window(pd, ty)
    }

    fn dealloc_mw(dev: &Device, pd: &Pd, mw: mr::MwData) {
        dev.data().mrs.dealloc_window(pd, mw);
    }

    fn create_qp(
        dev: &Device,
        pd: &Pd,
        init: ib::QpInit<'_, Rroce>,
        uctx: Option<&UserContext>,
        udata: &mut Udata<'_>,
    ) -> Result<(impl PinInit<qp::QpData, Error>, u32, ib::QpCaps)> {
        qp::create(dev, &dev.data().qps, pd, init, uctx, udata)
    }

    fn modify_qp(qp: &qp::Qp, attr: &ib::ModifyAttrs, udata: &mut Udata<'_>) -> Result {
        udata.require_no_driver_input()?;
        qp::modify(qp, attr)
    }

    fn query_qp(qp: &qp::Qp) -> Result<ib::QueryAttrs> {
        Ok(qp::query(qp))
    }

    fn destroy_qp(qp: &qp::Qp) {
        qp::destroy(&qp.device().data().qps, qp);
    }

    fn create_srq(
        dev: &Device,
        pd: &Pd,
        attrs: ib::SrqAttrs,
        events: ib::SrqEvents,
        uctx: Option<&UserContext>,
        udata: &mut Udata<'_>,
    ) -> Result<(impl PinInit<srq::SrqData, Error>, ib::SrqAttrs)> {
        srq::create(&dev.data().srqs, pd, attrs, events, uctx, udata)
    }

    fn modify_srq(
        s: &srq::Srq,
        attrs: &mut ib::SrqAttrs,
        mask: u32,
        uctx: Option<&UserContext>,
        udata: &mut Udata<'_>,
    ) -> Result {
        srq::modify(s, attrs, mask, uctx, udata)
    }

    fn query_srq(s: &srq::Srq) -> ib::SrqAttrs {
        srq::query(s)
    }

    fn destroy_srq(s: &srq::Srq) {
        srq::destroy(&s.device().data().srqs, s);
    }

    fn post_srq_recv(s: &srq::Srq, wr: &ib::RecvWr<'_>) -> Result {
        srq::post_recv(s, wr)
    }

    fn post_send(qp: &qp::Qp, wr: ib::SendWr<'_, Rroce>) -> Result {
        qp::post_send(qp, wr)
    }

    fn kick_send(qp: &qp::Qp) {
        qp::kick_send(qp)
    }

    fn post_recv(qp: &qp::Qp, wr: &ib::RecvWr<'_>) -> Result {
        qp::post_recv(qp, wr)
    }

    fn attach_mcast(qp: &qp::Qp, gid: &[u8; 16]) -> Result {
        qp::attach_mcast(qp, gid)
    }

    fn detach_mcast(qp: &qp::Qp, gid: &[u8; 16]) -> Result {
        qp::detach_mcast(qp, gid)
    }

    fn send_doorbell(qp: &qp::Qp) -> Result {
        qp::send_doorbell(qp.device(), qp)
    }

    fn create_ah(dev: &Device, pd: &Pd, av: &ib::RoceAv, udata: &mut Udata<'_>) -> Result<ah::AhData> {
        ah::create(&dev.data().ahs, pd, av, udata)
    }

    fn destroy_ah(dev: &Device, data: ah::AhData) {
        ah::destroy(&dev.data().ahs, data);
    }

    fn destroy_cq(cq: &cq::Cq) {
        cq.device().data().cqs.release(1);
    }

    fn poll_cq(cq: &cq::Cq, out: &mut ib::WcSink<'_>) {
        cq::poll(cq, out)
    }

    fn req_notify_cq(cq: &cq::Cq, how: ib::CqNotify) -> Result<bool> {
        cq::req_notify(cq, how)
    }

    fn resize_cq(cq: &cq::Cq, cqe: u32, uctx: Option<&UserContext>, udata: &mut Udata<'_>) -> Result<u32> {
        cq::resize(cq, cqe, uctx, udata)
    }

    fn fill_res_qp(qp: &qp::Qp, out: &mut ib::ResAttrs<'_>) -> Result {
        qp::fill_res(qp, out)
    }

    fn fill_res_cq(cq: &cq::Cq, out: &mut ib::ResAttrs<'_>) -> Result {
        cq::fill_res(cq, out)
    }

    fn fill_res_mr(data: &mr::MrData, out: &mut ib::ResAttrs<'_>) -> Result {
        mr::fill_res(data, out)
    }
}

impl LinkHandler for Rroce {
    const TYPE: &'static CStr = c"rroce";

    fn newlink(name: &CStr, ndev: &NetDev) -> Result {
        if ndev.is_vlan() {
            pr_err!(
                "cannot add {} on VLAN device {}: add it on the real device; VLAN traffic is received there\n",
                text(name),
                ndev.name().as_str()
            );
            return Err(EPERM);
        }
        let mac = match ndev.link_kind() {
            LinkKind::Ethernet(mac) => mac,
            LinkKind::Loopback => {
                pr_err!("cannot add {} on {}: a loopback device; add it on the interface whose addresses it should use\n", text(name), ndev.name().as_str());
                return Err(EINVAL);
            }
            // No MAC address: the GUID comes from a random one, as on rdma_rxe.
            LinkKind::IpOnly => eui::local_mac_from_random(core::array::from_fn(|_| ib::random_u8())),
        };
        // The module's own list, which also sees a device in the middle of a
        // namespace move (newlink calls are serialised).
        if ib::with_device::<Rroce, _>(ndev, |existing| {
            pr_err!("cannot add {}: {} already has device {}\n", text(name), ndev.name().as_str(), existing.name().as_str());
        })
        .is_some()
        {
            return Err(EEXIST);
        }
        let guid = eui::guid_from_mac(&mac);
        let params = ib::DeviceParams { name, node_desc: b"rroce", node_guid: guid };
        let sockets = crate::net::RocePort::<Rroce>::hold(ndev)?;
        let rxq = crate::rx::rx_queue().ok_or(ENODEV)?;
        let qos = PortQos::new(ndev.hold())?;
        let data = DevData::new(ndev.mtu(), ndev.is_active(), guid, sockets, rxq, qos);
        ib::register_device::<Rroce>(&params, ndev, data).map_err(|e| {
            // The core reports a taken name as ENFILE; users expect "exists".
            if e == ENFILE {
                pr_err!("cannot add {}: another RDMA device has that name\n", text(name));
                EEXIST
            } else {
                pr_err!("failed to add {} on {}: error {}\n", text(name), ndev.name().as_str(), e.to_errno());
                e
            }
        })?;
        pr_info!("added {} on {} (ifindex {})\n", text(name), ndev.name().as_str(), ndev.ifindex());
        Ok(())
    }
}

impl NetdevHandler for Rroce {
    fn event(ev: NetdevEvent, ndev: &NetDev) {
        if ev == NetdevEvent::Other {
            return;
        }
        // Found through the module's list: the core's lookup misses a device
        // whose namespace move is in progress, and an unregistering netdev
        // would then wait forever for the reference its device holds.
        match ev {
            NetdevEvent::Unregister => ib::detach_device::<Rroce>(ndev, |dev| {
                pr_info!("{} is going away: removing {}\n", ndev.name().as_str(), dev.name().as_str());
                dev.data().qos.port_going();
            }),
            NetdevEvent::ChangeMtu => {
                ib::with_device::<Rroce, _>(ndev, |dev| dev.data().set_eth_mtu(ndev.mtu()));
            }
            NetdevEvent::Up | NetdevEvent::Down | NetdevEvent::Change => {
                ib::with_device::<Rroce, _>(ndev, |dev| dev.data().port_state_changed(ndev.is_active()));
            }
            NetdevEvent::ChangeAddr | NetdevEvent::Other => {}
        }
    }
}

/// The module's devices: the list is set up at load, and at unload every
/// device of this module (and only of this module: rdma_rxe's share the
/// driver id) is unregistered.
pub(crate) struct AllDevices;

impl AllDevices {
    pub(crate) fn new() -> Result<Self> {
        ib::init_registry()?;
        ib::init_user_table()?;
        Ok(Self)
    }
}

impl Drop for AllDevices {
    fn drop(&mut self) {
        ib::unregister_all_devices();
        // No region is left: each held its user's count until it went.
        ib::clear_span_users();
    }
}
