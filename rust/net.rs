// SPDX-License-Identifier: GPL-2.0
//! Safe views of the networking objects rroce uses: network devices and the
//! netdevice notifier chain.

use crate::proto::dcb;
use crate::proto::qos::TxClass;
use crate::sys;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::types::Opaque;

mod workqueue;
pub(crate) use workqueue::{
    cancel_delayed_work, cancel_delayed_work_nowait, cancel_work, dfl_queue, flush_work, percpu_queue, OwnedQueue,
};

/// `ARPHRD_ETHER`: Ethernet, with a MAC address and PFC priority tags.
const ARPHRD_ETHER: u16 = 1;
/// `ARPHRD_LOOPBACK`: `lo`.
const ARPHRD_LOOPBACK: u16 = 772;

/// What kind of link a netdev is, as far as an RDMA device on it cares.
pub(crate) enum LinkKind {
    /// Ethernet, and its MAC address.
    Ethernet([u8; ETH_ALEN]),
    /// The loopback device.
    Loopback,
    /// A device that carries IP packets without an Ethernet header: tun,
    /// IP-in-IP and GRE tunnels, WireGuard. Routing delivers RoCEv2 over it
    /// like over Ethernet; it has no MAC address to derive a GUID from.
    IpOnly,
}
/// Bytes of an Ethernet MAC.
pub(crate) const ETH_ALEN: usize = 6;

/// A network device borrowed for the duration of a callback.
///
/// # Invariants
///
/// The wrapped `net_device` is registered (or being unregistered) and alive
/// for the lifetime of the reference.
#[repr(transparent)]
pub(crate) struct NetDev(Opaque<sys::net_device>);

impl NetDev {
    /// # Safety
    ///
    /// `ptr` must point to a live `net_device` that stays alive for `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut sys::net_device) -> &'a Self {
        // SAFETY: `NetDev` is a transparent wrapper of `net_device`; liveness per the contract.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut sys::net_device {
        self.0.get()
    }

    /// The interface name, for messages.
    pub(crate) fn name(&self) -> &str {
        // SAFETY: the device is alive; `name` is a NUL-terminated array inside it.
        let name = unsafe { CStr::from_char_ptr(sys::rroce_netdev_name(self.as_raw())) };
        name.to_str().unwrap_or("?")
    }

    pub(crate) fn ifindex(&self) -> i32 {
        // SAFETY: the device is alive by the type invariant.
        unsafe { sys::rroce_netdev_ifindex(self.as_raw()) }
    }

    pub(crate) fn mtu(&self) -> u32 {
        // SAFETY: the device is alive by the type invariant.
        unsafe { sys::rroce_netdev_mtu(self.as_raw()) }
    }

    /// The kind of link, with the MAC address of an Ethernet device.
    pub(crate) fn link_kind(&self) -> LinkKind {
        // SAFETY: the device is alive by the type invariant.
        match unsafe { sys::rroce_netdev_type(self.as_raw()) } {
            ARPHRD_ETHER => {
                let mut mac = [0u8; ETH_ALEN];
                // SAFETY: the device is alive; the helper writes at most `ETH_ALEN` bytes.
                let len = unsafe { sys::rroce_netdev_addr(self.as_raw(), mac.as_mut_ptr(), ETH_ALEN as u32) };
                if len as usize == ETH_ALEN {
                    LinkKind::Ethernet(mac)
                } else {
                    LinkKind::IpOnly
                }
            }
            ARPHRD_LOOPBACK => LinkKind::Loopback,
            _ => LinkKind::IpOnly,
        }
    }

    /// The device a VLAN device sends and receives through; `self` otherwise.
    pub(crate) fn vlan_real_dev(&self) -> &NetDev {
        // SAFETY: the device is alive; a VLAN device holds its real device, which stays
        // registered as long as the VLAN device does.
        unsafe { NetDev::from_raw(sys::rroce_vlan_real_dev(self.as_raw())) }
    }

    pub(crate) fn is_vlan(&self) -> bool {
        // SAFETY: the device is alive by the type invariant.
        unsafe { sys::rroce_is_vlan_dev(self.as_raw()) }
    }

    /// Whether the interface is administratively up and has carrier.
    pub(crate) fn is_active(&self) -> bool {
        // SAFETY: the device is alive by the type invariant.
        unsafe { sys::rroce_netif_running(self.as_raw()) && sys::rroce_netif_carrier_ok(self.as_raw()) }
    }

    /// Whether the interface is registered and not unregistering.
    pub(crate) fn is_registered(&self) -> bool {
        // SAFETY: the device is alive by the type invariant.
        unsafe { sys::rroce_netdev_is_registered(self.as_raw()) }
    }

    /// Whether the interface is administratively up (IFF_UP).
    pub(crate) fn is_up(&self) -> bool {
        // SAFETY: the device is alive by the type invariant.
        let flags = unsafe { sys::netif_get_flags(self.as_raw()) };
        flags & sys::net_device_flags_IFF_UP != 0
    }

    /// The local netdev that owns IPv4 address `addr` in `net`, if any.
    pub(crate) fn by_local_ipv4(net: *mut sys::net, addr: [u8; 4]) -> Option<NetDevRef> {
        // SAFETY: `net` is a live namespace; the helper returns a held device or null.
        unsafe { NetDevRef::from_held(sys::rroce_ip_dev_find(net, u32::from_ne_bytes(addr))) }
    }

    /// The local netdev that owns IPv6 address `addr` in `net`, if any.
    pub(crate) fn by_local_ipv6(net: *mut sys::net, addr: &[u8; 16]) -> Option<NetDevRef> {
        // SAFETY: `net` is a live namespace; the helper returns a held device or null.
        unsafe { NetDevRef::from_held(sys::rroce_ipv6_dev_find(net, addr.as_ptr())) }
    }

    /// Joins (`join`) or leaves the IP multicast group of RoCEv2 multicast
    /// GID `gid` on this device (IGMP or MLD), so its packets reach the
    /// host. Process context; may sleep.
    pub(crate) fn multicast_group(&self, gid: &[u8; 16], join: bool) -> Result {
        // SAFETY: the device is alive while `self` is borrowed; `gid` is 16 readable bytes.
        let ret = unsafe { sys::rroce_mc_group(self.as_raw(), gid.as_ptr(), join) };
        kernel::error::to_result(ret)
    }

    /// A counted reference to this device.
    pub(crate) fn hold(&self) -> NetDevRef {
        // SAFETY: the device is alive by the type invariant; the reference taken here is
        // released by the `NetDevRef`'s drop.
        unsafe { sys::rroce_dev_hold(self.as_raw()) };
        NetDevRef(NonNull::from(&self.0).cast())
    }

    /// The device's DCB state (`None` without DCB operations) and the
    /// traffic class of each priority (ETS, or its mqprio map; all 0 with
    /// neither). The DCB operations may sleep and expect RTNL.
    pub(crate) fn dcb_state(&self, _rtnl: &Rtnl) -> (Option<dcb::Dcb>, dcb::PrioTc) {
        let mut raw = sys::rroce_dcb::default();
        // SAFETY: the device is alive, RTNL is held (`_rtnl`), `raw` is a valid out struct.
        unsafe { sys::rroce_dcb_read(self.as_raw(), &mut raw) };
        let state = (raw.has_dcbnl != 0).then(|| dcb::Dcb {
            pfc: (raw.pfc_valid != 0).then_some(raw.pfc_en),
            dscp_prio_mask: raw.dscp_prio_mask,
            default_prio_mask: raw.default_prio_mask,
            trust_order: usize::try_from(raw.trust_count).ok().and_then(|n| raw.trust.get(..n)).map(dcb::trust_of_order),
        });
        let prio_tc = if raw.tc_valid != 0 { raw.prio_tc } else { [0; crate::proto::qos::PRIORITIES] };
        (state, prio_tc)
    }

    /// The network namespace the device lives in.
    pub(crate) fn net(&self) -> *mut sys::net {
        // SAFETY: the device is alive by the type invariant.
        unsafe { sys::rroce_dev_net(self.as_raw()) }
    }
}

/// A counted reference to a network device (`dev_hold` / `dev_put`).
pub(crate) struct NetDevRef(NonNull<sys::net_device>);

impl NetDevRef {
    /// Takes over a reference the caller already holds.
    ///
    /// # Safety
    ///
    /// `ptr` must be a live `net_device` on which the caller owns one `dev_hold` reference.
    pub(crate) unsafe fn from_held(ptr: *mut sys::net_device) -> Option<Self> {
        NonNull::new(ptr).map(Self)
    }
}

// SAFETY: `dev_put` may run in any context and on any thread, and `NetDev`'s
// methods only read the device or call functions safe from any thread.
unsafe impl Send for NetDevRef {}
// SAFETY: as for `Send`; `&NetDevRef` gives only `&NetDev`.
unsafe impl Sync for NetDevRef {}

impl core::ops::Deref for NetDevRef {
    type Target = NetDev;
    fn deref(&self) -> &NetDev {
        // SAFETY: the held reference keeps the device alive as long as `self`.
        unsafe { NetDev::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for NetDevRef {
    fn drop(&mut self) {
        // SAFETY: `self` owns one reference, released exactly once here.
        unsafe { sys::rroce_dev_put(self.0.as_ptr()) };
    }
}

/// RTNL, held: the lock netdev configuration operations expect.
pub(crate) struct Rtnl(PhantomData<*mut ()>);

impl Rtnl {
    /// Takes RTNL unless someone holds it. Work that a holder of RTNL may
    /// wait for (cancelling it) must never block on RTNL.
    pub(crate) fn try_lock() -> Option<Self> {
        // SAFETY: takes the lock or not; no precondition.
        let taken = unsafe { sys::rroce_rtnl_trylock() };
        // Never build the guard unless the lock was taken: dropping it unlocks.
        if taken {
            Some(Self(PhantomData))
        } else {
            None
        }
    }
}

impl Drop for Rtnl {
    fn drop(&mut self) {
        // SAFETY: `self` exists only while this task holds RTNL (`!Send`).
        unsafe { sys::rroce_rtnl_unlock() };
    }
}

/// The netdevice events rroce reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NetdevEvent {
    Up,
    Down,
    Change,
    ChangeMtu,
    ChangeAddr,
    Unregister,
    Other,
}

impl NetdevEvent {
    fn from_raw(ev: u64) -> Self {
        let ev = ev as u32;
        match ev {
            sys::netdev_cmd_NETDEV_UP => Self::Up,
            sys::netdev_cmd_NETDEV_DOWN => Self::Down,
            sys::netdev_cmd_NETDEV_CHANGE => Self::Change,
            sys::netdev_cmd_NETDEV_CHANGEMTU => Self::ChangeMtu,
            sys::netdev_cmd_NETDEV_CHANGEADDR => Self::ChangeAddr,
            sys::netdev_cmd_NETDEV_UNREGISTER => Self::Unregister,
            _ => Self::Other,
        }
    }
}

/// Receiver of netdevice events.
pub(crate) trait NetdevHandler {
    /// Called in process context under RTNL for every event of every netdev.
    fn event(ev: NetdevEvent, dev: &NetDev);
}

/// The callback of a notifier block.
pub(crate) type NotifierCall =
    unsafe extern "C" fn(*mut sys::notifier_block, kernel::ffi::c_ulong, *mut kernel::ffi::c_void) -> kernel::ffi::c_int;
/// A notifier chain's register or unregister function.
pub(crate) type NotifierChainOp = unsafe extern "C" fn(*mut sys::notifier_block) -> kernel::ffi::c_int;

/// A notifier block registered on one of the kernel's notifier chains;
/// unregistered on drop.
#[pin_data(PinnedDrop)]
pub(crate) struct Notifier {
    #[pin]
    nb: Opaque<sys::notifier_block>,
    unregister: NotifierChainOp,
}

// SAFETY: the notifier block is only touched by the notifier chain under its own locking.
unsafe impl Send for Notifier {}
// SAFETY: no `&self` method mutates the block.
unsafe impl Sync for Notifier {}

impl Notifier {
    /// Registers `call` with `register`.
    ///
    /// # Safety
    ///
    /// `register` and `unregister` are the two operations of one chain, and
    /// `call` is sound for any event that chain delivers.
    pub(crate) unsafe fn register(
        call: NotifierCall,
        register: NotifierChainOp,
        unregister: NotifierChainOp,
    ) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            nb <- Opaque::try_ffi_init(|nb: *mut sys::notifier_block| {
                // SAFETY: `nb` points to pinned, writable storage for the block, which stays
                // registered until `drop`; the chain's operations are the caller's.
                unsafe {
                    nb.write(pin_init::zeroed());
                    (*nb).notifier_call = Some(call);
                    kernel::error::to_result(register(nb))
                }
            }),
            unregister,
        })
    }
}

#[pinned_drop]
impl PinnedDrop for Notifier {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: the block was registered on this chain in `register` and is still pinned.
        unsafe { (self.unregister)(self.nb.get()) };
    }
}

/// A registered netdevice notifier; unregistered on drop.
#[pin_data]
pub(crate) struct NetdevNotifier<H: NetdevHandler> {
    #[pin]
    block: Notifier,
    _handler: PhantomData<H>,
}

impl<H: NetdevHandler + 'static> NetdevNotifier<H> {
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            // SAFETY: the netdevice chain's operations; `call` handles its events.
            block <- unsafe {
                Notifier::register(Self::call, sys::register_netdevice_notifier, sys::unregister_netdevice_notifier)
            },
            _handler: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only for the netdevice notifier chain, which passes notifier info whose
    /// netdev is alive for the call.
    unsafe extern "C" fn call(
        _nb: *mut sys::notifier_block,
        event: kernel::ffi::c_ulong,
        ptr: *mut kernel::ffi::c_void,
    ) -> kernel::ffi::c_int {
        // SAFETY: netdevice notifiers receive a `netdev_notifier_info` naming a device that
        // is alive for the duration of the call.
        let dev = unsafe { NetDev::from_raw(sys::rroce_netdev_notifier_info_to_dev(ptr)) };
        H::event(NetdevEvent::from_raw(event as u64), dev);
        sys::NOTIFY_DONE as kernel::ffi::c_int
    }
}

/// A received packet, owned: freed when dropped.
pub(crate) struct Skb(NonNull<sys::sk_buff>);

// SAFETY: an skb we own may be handed to any context.
unsafe impl Send for Skb {}

impl Skb {
    /// # Safety
    ///
    /// `skb` must be a valid skb whose ownership passes to the new value.
    unsafe fn from_raw(skb: *mut sys::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(Self)
    }

    /// The device the packet arrived on.
    pub(crate) fn dev(&self) -> Option<&NetDev> {
        // SAFETY: a received skb's device is alive while the skb is processed.
        let d = unsafe { sys::rroce_skb_dev(self.0.as_ptr()) };
        // SAFETY: as above; non-null checked.
        (!d.is_null()).then(|| unsafe { NetDev::from_raw(d) })
    }

    /// Pulls paged data into the linear area, so [`Skb::ip_packet`] sees it all.
    pub(crate) fn linearize(&mut self) -> Result {
        // SAFETY: we own the skb.
        kernel::error::to_result(unsafe { sys::rroce_skb_linearize(self.0.as_ptr()) })
    }

    /// The IP packet, from the IP header to the end of the linear data.
    pub(crate) fn ip_packet(&self) -> &[u8] {
        let mut len = 0u32;
        // SAFETY: we own the skb; its linear data from the network header to the tail is
        // initialised, and nobody writes it while we hold it.
        unsafe {
            let p = sys::rroce_skb_network(self.0.as_ptr(), &mut len);
            core::slice::from_raw_parts(p, len as usize)
        }
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: we own the skb.
        unsafe { sys::rroce_kfree_skb(self.0.as_ptr()) };
    }
}

/// Receiver of packets arriving on the RoCEv2 UDP port.
pub(crate) trait UdpReceiver {
    /// What the socket hands the receiver with each packet.
    type Ctx: Send + Sync + 'static;
    /// Called in softirq context for every datagram to UDP port 4791.
    fn receive(ctx: ArcBorrow<'_, Self::Ctx>, skb: Skb);
}

/// A kernel UDP socket bound to the RoCEv2 port in one namespace, whose
/// datagrams go to `R`. Released on drop.
pub(crate) struct UdpTunnel<R: UdpReceiver> {
    sock: NonNull<sys::socket>,
    /// The reference `Arc::into_raw` gave up for the socket's `sk_user_data`.
    ctx: *const R::Ctx,
    _receiver: PhantomData<R>,
}

// SAFETY: the socket is only released, once, by the owner.
unsafe impl<R: UdpReceiver> Send for UdpTunnel<R> {}
// SAFETY: no `&self` method touches the socket.
unsafe impl<R: UdpReceiver> Sync for UdpTunnel<R> {}

impl<R: UdpReceiver> UdpTunnel<R> {
    /// Binds port 4791 in `net` for IPv4 or IPv6.
    ///
    /// # Safety
    ///
    /// `net` must be a live namespace that outlives the socket (the owner releases
    /// it from the namespace's exit at the latest).
    pub(crate) unsafe fn open(net: *mut sys::net, ipv6: bool, ctx: Arc<R::Ctx>) -> Result<Self> {
        let raw = Arc::into_raw(ctx);
        // SAFETY: per the contract; `rcv` is a valid encap callback; `raw` stays valid
        // until `drop` takes the reference back after releasing the socket.
        let s = unsafe { sys::rroce_udp_tunnel_open(net, ipv6, Some(Self::rcv), raw.cast_mut().cast()) };
        // SAFETY: `s` is a pointer or an error pointer.
        let failed = unsafe { sys::rroce_is_err(s.cast()) } || s.is_null();
        if failed {
            // SAFETY: the socket never saw `raw`; take the reference back.
            drop(unsafe { Arc::from_raw(raw) });
            // SAFETY: `s` is an error pointer (or null, reported as ENOMEM).
            if s.is_null() {
                return Err(ENOMEM);
            }
            // SAFETY: `s` is an error pointer.
            return Err(Error::from_errno(unsafe { sys::rroce_ptr_err(s.cast()) } as i32));
        }
        Ok(Self { sock: NonNull::new(s).ok_or(ENOMEM)?, ctx: raw, _receiver: PhantomData })
    }

    /// # Safety
    ///
    /// Only as the UDP socket's `encap_rcv`: `sk` is the tunnel socket this
    /// module opened and `skb` a received datagram it now owns.
    unsafe extern "C" fn rcv(sk: *mut sys::sock, skb: *mut sys::sk_buff) -> kernel::ffi::c_int {
        // SAFETY: an encap receive callback owns the skb it is given when it returns 0.
        let Some(skb) = (unsafe { Skb::from_raw(skb) }) else { return 0 };
        // SAFETY: the callback runs under RCU on a socket `open` set up with an `Arc`
        // reference, which `drop` gives back only after releasing the socket.
        let ctx = unsafe { sys::rroce_sk_user_data(sk) }.cast::<R::Ctx>().cast_const();
        if !ctx.is_null() {
            // SAFETY: as above.
            R::receive(unsafe { ArcBorrow::from_raw(ctx) }, skb);
        }
        0
    }
}

impl<R: UdpReceiver> Drop for UdpTunnel<R> {
    fn drop(&mut self) {
        // SAFETY: releases the socket opened in `open`, once. Receive callbacks run under
        // RCU: after the grace period none still holds `ctx`, and the reference goes.
        unsafe {
            sys::rroce_udp_tunnel_close(self.sock.as_ptr());
            kernel::sync::rcu::synchronize_rcu();
            drop(Arc::from_raw(self.ctx));
        }
    }
}

/// Receiver of namespace teardown.
pub(crate) trait NetnsExit {
    /// Called in process context when `net` is being destroyed.
    fn exit(net: *mut sys::net);
}

/// Registered pernet operations; unregistered on drop (which calls `exit`
/// for every namespace still alive).
#[pin_data(PinnedDrop)]
pub(crate) struct PernetOps<H: NetnsExit> {
    #[pin]
    ops: Opaque<sys::pernet_operations>,
    _handler: PhantomData<H>,
}

// SAFETY: written once before registration, then only used by the core.
unsafe impl<H: NetnsExit> Send for PernetOps<H> {}
// SAFETY: as above.
unsafe impl<H: NetnsExit> Sync for PernetOps<H> {}

impl<H: NetnsExit + 'static> PernetOps<H> {
    pub(crate) fn register() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(|ops: *mut sys::pernet_operations| {
                // SAFETY: pinned, writable storage that outlives the registration.
                unsafe {
                    ops.write(pin_init::zeroed());
                    (*ops).exit = Some(Self::exit);
                    kernel::error::to_result(sys::register_pernet_subsys(ops))
                }
            }),
            _handler: PhantomData,
        })
    }

    /// # Safety
    ///
    /// Only as the `exit` of this module's pernet operations, with the namespace
    /// that is going away.
    unsafe extern "C" fn exit(net: *mut sys::net) {
        H::exit(net);
    }
}

#[pinned_drop]
impl<H: NetnsExit> PinnedDrop for PernetOps<H> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: registered in `register`, still pinned.
        unsafe { sys::unregister_pernet_subsys(self.ops.get()) };
    }
}

/// A packet being built for transmission: IP header to ICRC, linear.
pub(crate) struct TxSkb {
    skb: NonNull<sys::sk_buff>,
    data: NonNull<u8>,
    len: usize,
}

// SAFETY: an skb we own may be handed to any context.
unsafe impl Send for TxSkb {}

/// Outcome of handing a packet to the IP layer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum XmitStatus {
    /// Queued for the wire.
    Sent,
    /// Dropped by a qdisc (`NET_XMIT_DROP`): a local loss, not a fatal error.
    Dropped,
    /// Queued, but the qdisc signals congestion (`NET_XMIT_CN`).
    Congested,
}

/// Owner of transmitted packets, told when each has left the host.
pub(crate) trait TxOwner: Send + Sync + 'static {
    /// A packet attached with [`TxSkb::attach_owner`] was freed or orphaned: sent by
    /// the lower device, taken by the peer's IP layer, or dropped. Called in any
    /// context but hard interrupt, often in softirq.
    fn released(this: Arc<Self>);
}

/// Packets with an owner attached and not yet released: unload waits for
/// them, since their destructor is this module's code.
static TX_ATTACHED: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Waits until every packet handed out with an owner attached has been
/// released. Process context, at unload, once nothing sends any more.
pub(crate) fn wait_tx_released() {
    let mut waited_ms = 0u32;
    while TX_ATTACHED.load(core::sync::atomic::Ordering::Acquire) != 0 {
        if waited_ms % 10_000 == 0 && waited_ms != 0 {
            pr_warn!("rroce: unload waits for {} packets still queued for transmission\n",
                TX_ATTACHED.load(core::sync::atomic::Ordering::Relaxed));
        }
        // SAFETY: process context.
        unsafe { sys::rroce_msleep(10) };
        waited_ms = waited_ms.wrapping_add(10);
    }
    // The last destructor may still be returning: it runs in softirq (an RCU
    // read-side section) or was called just before the count reached zero.
    kernel::sync::rcu::synchronize_rcu();
}

impl TxSkb {
    /// Attaches `owner`: its [`TxOwner::released`] runs when the packet leaves
    /// the host (or is dropped), with the reference given here.
    pub(crate) fn attach_owner<O: TxOwner>(&mut self, owner: Arc<O>) {
        TX_ATTACHED.fetch_add(1, core::sync::atomic::Ordering::AcqRel);
        let arg = Arc::into_raw(owner).cast_mut().cast::<kernel::ffi::c_void>();
        // SAFETY: we own the unsent skb; `released_skb::<O>` takes back the reference
        // in `arg` exactly once, when the skb is freed or orphaned.
        unsafe { sys::rroce_skb_set_destructor(self.skb.as_ptr(), Some(released_skb::<O>), arg) };
    }

    /// Allocates room for `len` bytes plus `ndev`'s link-layer headers.
    pub(crate) fn alloc(ndev: &NetDev, len: usize, ipv6: bool) -> Result<Self> {
        let mut data = core::ptr::null_mut();
        // SAFETY: the device is alive; `data` receives a pointer into the new skb.
        let skb = unsafe { sys::rroce_tx_alloc(ndev.as_raw(), len as u32, ipv6, &mut data) };
        let skb = NonNull::new(skb).ok_or(ENOMEM)?;
        let data = match NonNull::new(data) {
            Some(d) => d,
            None => {
                // SAFETY: the fresh skb is ours.
                unsafe { sys::rroce_kfree_skb(skb.as_ptr()) };
                return Err(ENOMEM);
            }
        };
        Ok(Self { skb, data, len })
    }

    /// The packet bytes, to be written.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes at `data` were put into the skb we exclusively own.
        unsafe { core::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) }
    }

    /// Turns the finished packet into a received one arriving on `ndev`: local
    /// delivery, as the IP stack would loop it back, without a UDP round trip.
    pub(crate) fn into_received(self, ndev: &NetDev) -> Skb {
        let skb = self.skb;
        core::mem::forget(self);
        // SAFETY: we own the skb; the receive path only reads `dev` while `ndev` is held
        // by the caller.
        unsafe { sys::rroce_skb_set_dev(skb.as_ptr(), ndev.as_raw()) };
        Skb(skb)
    }

    /// Routes the finished packet from `saddr` to `daddr` out of interface
    /// `oif` and hands it to the IP layer.
    /// `class` gives its priority and whether it carries a priority tag, which
    /// it gets only if it leaves through interface `port` itself.
    pub(crate) fn send4(
        self,
        net: *mut sys::net,
        saddr: [u8; 4],
        daddr: [u8; 4],
        oif: i32,
        class: TxClass,
        port: i32,
    ) -> Result<XmitStatus> {
        let skb = self.skb.as_ptr();
        core::mem::forget(self);
        // SAFETY: `net` is the live namespace of the sending device; the helper consumes
        // the skb in every case. Addresses are passed in network order.
        let ret = unsafe {
            sys::rroce_tx_send4(
                net,
                skb,
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                oif,
                class.priority.into(),
                if class.priority_tag { port } else { 0 },
            )
        };
        match ret {
            0 => Ok(XmitStatus::Sent),
            1 => Ok(XmitStatus::Dropped),
            2 => Ok(XmitStatus::Congested),
            e if e < 0 => Err(Error::from_errno(e)),
            _ => Ok(XmitStatus::Dropped),
        }
    }
}

impl TxSkb {
    /// As [`TxSkb::send4`], for IPv6.
    pub(crate) fn send6(
        self,
        net: *mut sys::net,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        oif: i32,
        class: TxClass,
        port: i32,
    ) -> Result<XmitStatus> {
        let skb = self.skb.as_ptr();
        core::mem::forget(self);
        // SAFETY: as in `send4`; the addresses are 16-byte arrays read during the call.
        let ret = unsafe {
            let tag = if class.priority_tag { port } else { 0 };
            sys::rroce_tx_send6(net, skb, saddr.as_ptr(), daddr.as_ptr(), oif, class.priority.into(), tag)
        };
        match ret {
            0 => Ok(XmitStatus::Sent),
            1 => Ok(XmitStatus::Dropped),
            2 => Ok(XmitStatus::Congested),
            e if e < 0 => Err(Error::from_errno(e)),
            _ => Ok(XmitStatus::Dropped),
        }
    }
}

/// # Safety
///
/// Only as the destructor of an skb [`TxSkb::attach_owner`] gave an owner
/// reference of type `O`, called once when the skb is freed.
unsafe extern "C" fn released_skb<O: TxOwner>(skb: *mut sys::sk_buff) {
    // SAFETY: the destructor runs once per skb `attach_owner` set it on, whose
    // destructor argument holds the reference `Arc::into_raw` gave up.
    let owner = unsafe { Arc::from_raw(sys::rroce_skb_destructor_arg(skb).cast::<O>().cast_const()) };
    O::released(owner);
    TX_ATTACHED.fetch_sub(1, core::sync::atomic::Ordering::AcqRel);
}

impl Drop for TxSkb {
    fn drop(&mut self) {
        // SAFETY: an unsent skb is still ours.
        unsafe { sys::rroce_kfree_skb(self.skb.as_ptr()) };
    }
}

/// The kernel's CRC-32 (`crc32_le`), which uses the CPU's carry-less
/// multiply where there is one.
pub(crate) struct KernelCrc32;

impl crate::proto::icrc::Crc32 for KernelCrc32 {
    fn update(crc: u32, data: &[u8]) -> u32 {
        // SAFETY: `data` is a valid slice for the call; the function only reads it.
        unsafe { sys::rroce_crc32_le(crc, data.as_ptr().cast(), data.len()) }
    }
}

/// The monotonic clock in nanoseconds.
pub(crate) fn ktime_ns() -> u64 {
    // SAFETY: reads the clock; callable from any context.
    unsafe { sys::rroce_ktime_ns() }
}
