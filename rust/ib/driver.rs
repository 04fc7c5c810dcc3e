// SPDX-License-Identifier: GPL-2.0
//! The provider's side of `struct ib_device_ops`: the trait a driver
//! implements, in safe Rust, with its driver-specific constants.

use super::*;
use kernel::build_error;
use kernel::error::VTABLE_DEFAULT_ERROR;

/// Operations a provider implements. Every method runs in process context
/// and may sleep unless noted. A `#[vtable]` trait, as `kernel::net::phy`'s
/// `Driver`: the methods with a default body are optional, and the ops table
/// points the core at them only when the driver implements them
/// (`HAS_<METHOD>`); the core then treats the verb as unsupported.
#[vtable]
pub(crate) trait IbDriver: Sized + Send + Sync + 'static {
    /// The user-space provider that binds the driver's devices.
    const DRIVER_ID: DriverId;
    /// Version of the user ABI the driver speaks (`uverbs_abi_ver`).
    const UVERBS_ABI_VERSION: u32;
    /// Link layer of every port.
    const LINK_LAYER: LinkLayer;
    /// Other modules that register devices with the same driver id and take
    /// any device of that id for their own (rdma_rxe's netdev handler does):
    /// while this driver has devices they may not load, and while one is
    /// loaded this driver adds no device.
    const CONFLICTING_MODULES: &'static [&'static CStr] = &[];

    /// Per-device state, stored after the core's `struct ib_device`.
    type DevData: Send + Sync;
    /// Per-user-context state.
    type UctxData: Send + Sync;
    /// Per-protection-domain state.
    type PdData: Send + Sync;
    /// Per-completion-queue state.
    type CqData: Send + Sync;
    /// Per-memory-region state.
    type MrData: Send + Sync;
    /// Per-memory-window state.
    type MwData: Send + Sync;
    /// Per-queue-pair state.
    type QpData: Send + Sync;
    /// Per-address-handle state.
    type AhData: Send + Sync;
    /// Per-shared-receive-queue state.
    type SrqData: Send + Sync;
    /// Per-counter-object state (`rdma statistic qp`). It may not need
    /// dropping: the core frees a counter whose first binding failed
    /// without telling the driver.
    type CounterData: Send + Sync;

    /// Names of the port counters `rdma statistic` shows, in order.
    const HW_STATS: &'static [StatDesc];
    /// Directory under each device that holds the driver's sysfs attributes.
    const ATTR_GROUP: &'static CStr = c"";

    /// Name of sysfs attribute `id` (from 0 on, without gaps; `None` past
    /// the last).
    fn attr_name(_id: usize) -> Option<&'static CStr> {
        None
    }
    /// The driver's own static that holds its attribute group, built at
    /// module load (`init_device_attrs`). Needed with `attr_show`.
    fn attr_group() -> Option<&'static AttrGroup<Self>> {
        None
    }
    /// Attribute `id` can only be read (mode 0444; writes are refused).
    fn attr_read_only(_id: usize) -> bool {
        false
    }
    /// Writes attribute `id` of `dev` as text into `page`; returns its
    /// length. Optional, with `attr_group`: without them the device has no
    /// attributes.
    fn attr_show(_dev: &Device<Self>, _id: usize, _page: &mut [u8]) -> Result<usize> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Applies a write of `input` to attribute `id` of `dev`.
    fn attr_store(_dev: &Device<Self>, _id: usize, _input: &[u8]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    fn query_device(dev: &Device<Self>) -> Result<DeviceAttrs>;
    fn query_port(dev: &Device<Self>, port: u32) -> Result<PortAttrs>;
    fn port_immutable(dev: &Device<Self>, port: u32) -> Result<PortImmutable>;
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;
    /// Changes device attributes (`ib_modify_device`). Optional.
    fn modify_device(_dev: &Device<Self>, _change: &DeviceModify) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    fn alloc_ucontext(dev: &Device<Self>, udata: &mut Udata<'_>) -> Result<Self::UctxData>;
    fn dealloc_ucontext(dev: &Device<Self>, uctx: Self::UctxData);
    /// The device is going away or moving to another network namespace
    /// while a process still has `uctx` open: the core has destroyed every
    /// object of the context, and `dealloc_ucontext` follows; the process's
    /// later verbs fail. Optional: with it the core takes the device from
    /// its users at once (`rdma link delete`, `rdma dev set ... netns`)
    /// instead of waiting for them to close it, and moving a device to
    /// another namespace is allowed at all.
    fn disassociate_ucontext(_dev: &Device<Self>, _uctx: &Self::UctxData) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    fn alloc_pd(dev: &Device<Self>, udata: &mut Udata<'_>) -> Result<Self::PdData>;
    fn dealloc_pd(dev: &Device<Self>, pd: Self::PdData);
    /// Fills `out` (one slot per [`IbDriver::HW_STATS`] entry) with the current
    /// values. Optional: without it the device has no port counters.
    fn read_hw_stats(_dev: &Device<Self>, _port: u32, _out: &mut [u64]) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }

    /// Creates a CQ; returns its data and the number of entries it holds.
    fn create_cq(
        dev: &Device<Self>,
        init: &CqInit,
        uctx: Option<&UserContext>,
        udata: &mut Udata<'_>,
    ) -> Result<(impl PinInit<Self::CqData, Error>, u32)>;
    /// Called before the CQ's data is dropped.
    fn destroy_cq(cq: &Cq<Self>);
    /// Moves completions of a kernel consumer's CQ into `out` until it is full.
    fn poll_cq(cq: &Cq<Self>, out: &mut WcSink<'_>);
    /// Arms the CQ; returns whether completions are pending, if asked.
    fn req_notify_cq(cq: &Cq<Self>, how: CqNotify) -> Result<bool>;
    /// Registers user memory.
    #[allow(clippy::too_many_arguments)]
    fn reg_user_mr(
        dev: &Device<Self>,
        pd: &Self::PdData,
        start: u64,
        len: u64,
        iova: u64,
        access: i32,
        udata: &mut Udata<'_>,
    ) -> Result<(Self::MrData, MrKeys)>;
    /// Creates an MR covering kernel memory for kernel consumers, which
    /// `grant` lets the driver write. Optional.
    fn get_dma_mr(
        _dev: &Device<Self>,
        _pd: &Self::PdData,
        _access: i32,
        _grant: KernelMemory,
    ) -> Result<(Self::MrData, MrKeys)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Changes a user MR: in place (returns `None`), or, with a new
    /// translation, as a new MR the core swaps in for the old one. Optional.
    fn rereg_user_mr(
        _dev: &Device<Self>,
        _mr: &Self::MrData,
        _pd: &Self::PdData,
        _change: Rereg<'_, Self::PdData>,
        _udata: &mut Udata<'_>,
    ) -> Result<Option<(Self::MrData, MrKeys)>> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Allocates a fast-registration MR for up to `max_num_sg` pages, in the
    /// free state: `IB_WR_REG_MR` makes it valid. Optional, with `map_mr_sg`.
    /// `id` makes the MR's [`FastMr`](super::FastMr), whose pages the ib
    /// layer revokes when the consumer deregisters the MR.
    fn alloc_mr(_dev: &Device<Self>, _pd: &Self::PdData, _max_num_sg: u32, _id: FastMrId<'_>) -> Result<(Self::MrData, MrKeys)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Maps a scatterlist into a fast-registration MR; returns the number of
    /// entries mapped.
    fn map_mr_sg(_mr: &Self::MrData, _sg: &MrSg) -> Result<i32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Deregisters an MR of `pd` (its PD now, after any `rereg_user_mr`),
    /// which is dropped after this succeeds. It may refuse (memory windows
    /// bound to the region); the MR stays then.
    fn dereg_mr(dev: &Device<Self>, pd: &Self::PdData, mr: &Self::MrData) -> Result;
    /// Advice on the use of MRs of `pd` (`ib_advise_mr`): prefetching the
    /// pages of on-demand regions. With `sync` it returns once done.
    /// Optional.
    fn advise_mr(_dev: &Device<Self>, _pd: &Self::PdData, _advice: Advice, _sync: bool, _sges: &[AdviseSge]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Allocates a memory window of type `ty` (`enum ib_mw_type`, checked
    /// by the core); returns its data and R_Key. Optional, with `dealloc_mw`.
    fn alloc_mw(_dev: &Device<Self>, _pd: &Self::PdData, _ty: u32, _udata: &mut Udata<'_>) -> Result<(Self::MwData, u32)> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Deallocates a memory window of `pd`.
    fn dealloc_mw(_dev: &Device<Self>, _pd: &Self::PdData, _mw: Self::MwData) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Creates a QP; returns its data, its QP number and the capacities it
    /// really has (the asked-for ones rounded up).
    fn create_qp(
        dev: &Device<Self>,
        pd: &Self::PdData,
        init: QpInit<'_, Self>,
        uctx: Option<&UserContext>,
        udata: &mut Udata<'_>,
    ) -> Result<(impl PinInit<Self::QpData, Error>, u32, QpCaps)>;
    /// Applies the attributes `attr.mask` selects.
    fn modify_qp(qp: &Qp<Self>, attr: &ModifyAttrs, udata: &mut Udata<'_>) -> Result;
    /// Reports the QP's attributes.
    fn query_qp(qp: &Qp<Self>) -> Result<QueryAttrs>;
    /// Called before the QP's data is dropped.
    fn destroy_qp(qp: &Qp<Self>);
    /// The send doorbell of a user QP: new WQEs are in its send ring.
    fn send_doorbell(qp: &Qp<Self>) -> Result;
    /// Queues a kernel consumer's send work request. Any context; must not
    /// sleep. A REG_MR's `posted` goes to its MR before the request can run,
    /// for the number the WQE carries.
    fn post_send(qp: &Qp<Self>, wr: SendWr<'_, Self>) -> Result;
    /// Starts on the requests `post_send` queued. Any context; must not sleep.
    fn kick_send(qp: &Qp<Self>);
    /// Queues a kernel consumer's receive work request. Any context; must not sleep.
    fn post_recv(qp: &Qp<Self>, wr: &RecvWr<'_>) -> Result;
    /// Attaches a UD QP to multicast group `gid` (the core checked both).
    /// Optional, with `detach_mcast`.
    fn attach_mcast(_qp: &Qp<Self>, _gid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Detaches a QP from multicast group `gid`.
    fn detach_mcast(_qp: &Qp<Self>, _gid: &[u8; 16]) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Creates an address handle; kernel consumers may call this in atomic
    /// context, so it must not sleep.
    fn create_ah(dev: &Device<Self>, pd: &Self::PdData, av: &RoceAv, udata: &mut Udata<'_>) -> Result<Self::AhData>;
    /// Destroys an address handle.
    fn destroy_ah(dev: &Device<Self>, ah: Self::AhData);
    /// Creates an SRQ; returns its data and the sizes it really has.
    /// Optional, with the other SRQ methods: the ops table offers SRQs only
    /// when the driver implements `create_srq`.
    fn create_srq(
        _dev: &Device<Self>,
        _pd: &Self::PdData,
        _attrs: SrqAttrs,
        _events: SrqEvents,
        _uctx: Option<&UserContext>,
        _udata: &mut Udata<'_>,
    ) -> Result<(impl PinInit<Self::SrqData, Error>, SrqAttrs)> {
        // Names a concrete initialiser type for the default; never called.
        if true {
            build_error!(VTABLE_DEFAULT_ERROR)
        }
        Err::<(Result<Self::SrqData>, SrqAttrs), Error>(EOPNOTSUPP)
    }
    /// Resizes (`SRQ_MAX_WR`) and/or arms (`SRQ_LIMIT`) an SRQ; updates `attrs`
    /// to what the SRQ really has.
    fn modify_srq(
        _srq: &Srq<Self>,
        _attrs: &mut SrqAttrs,
        _mask: u32,
        _uctx: Option<&UserContext>,
        _udata: &mut Udata<'_>,
    ) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// The SRQ's current sizes and limit.
    fn query_srq(_srq: &Srq<Self>) -> SrqAttrs {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Called before the SRQ's data is dropped.
    fn destroy_srq(_srq: &Srq<Self>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Queues a kernel consumer's receive work request on an SRQ. Any
    /// context; must not sleep.
    fn post_srq_recv(_srq: &Srq<Self>, _wr: &RecvWr<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// The driver's details of a QP in `rdma res show qp -dd`. Process
    /// context, may sleep; the core holds the QP, no lock. Optional, with
    /// `fill_res_cq` and `fill_res_mr`.
    fn fill_res_qp(_qp: &Qp<Self>, _out: &mut ResAttrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// The driver's details of a CQ in `rdma res show cq -dd`, as `fill_res_qp`.
    fn fill_res_cq(_cq: &Cq<Self>, _out: &mut ResAttrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// The driver's details of an MR in `rdma res show mr -dd`, as `fill_res_qp`.
    fn fill_res_mr(_mr: &Self::MrData, _out: &mut ResAttrs<'_>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Whether QPs count port counter `index` (of `HW_STATS`) for
    /// themselves: a counter object shows only these.
    fn qp_stat(_index: usize) -> bool {
        false
    }
    /// Per-QP counters (`rdma statistic qp`): the data of a new counter
    /// object. Optional, with the other `counter_*` methods: without them the
    /// core binds no QP to a counter.
    fn counter_init(_dev: &Device<Self>) -> Self::CounterData {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// A number (`cntn`, not 0) for a counter object at its first binding,
    /// unique on the device.
    fn counter_new_id(_dev: &Device<Self>) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Binds a QP to a counter: from now on the counter shows what the QP counts.
    fn counter_bind_qp(_counter: &QpCounter<Self>, _qp: &Qp<Self>) -> Result {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Takes a QP out of its counter (which keeps what the QP counted);
    /// also before the QP is destroyed.
    fn counter_unbind_qp(_counter: &QpCounter<Self>, _qp: &Qp<Self>) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// Fills `out` (one slot per `HW_STATS` entry) with the counter's values.
    fn counter_read(_counter: &QpCounter<Self>, _out: &mut [u64]) {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
    /// The counter goes away, with no QP bound to it.
    fn counter_dealloc(_counter: &QpCounter<Self>) {}
    /// Resizes a user CQ; returns the new number of entries. Optional.
    fn resize_cq(_cq: &Cq<Self>, _cqe: u32, _uctx: Option<&UserContext>, _udata: &mut Udata<'_>) -> Result<u32> {
        build_error!(VTABLE_DEFAULT_ERROR)
    }
}
