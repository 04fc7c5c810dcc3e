// SPDX-License-Identifier: GPL-2.0
//! Safe views of the networking objects rroce uses: network devices here;
//! notifier chains, socket buffers and the RoCEv2 port in the files below.

use crate::proto::dcb;
use crate::sys;
use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::rcu;
use kernel::types::Opaque;

mod index_set;
mod notifier;
mod roce_port;
mod route;
mod skb;
mod sync;
mod workqueue;
pub(crate) use index_set::IndexSet;
pub(crate) use notifier::{NetdevEvent, NetdevHandler, NetdevNotifier, Notifier};
pub(crate) use roce_port::{PortHold, RocePort, UdpReceiver};
pub(crate) use route::RouteCache;
pub(crate) use skb::{ReceivedSkb, Routed, Skb, TxCredits, TxOwners, TxSkb, XmitStatus};
pub(crate) use sync::{may_sleep, new_spinlock_bh, RunnerGuard, RunnerLock, SpinLockBh, SpinLockBhGuard};
pub(crate) use workqueue::{
    bh_queue, cancel_delayed_work, cancel_delayed_work_nowait, cancel_work, delayed_work_pending, dfl_queue, flush_work, online_cpus, spread_cpu, this_cpu, OwnedQueue,
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

/// An interface name's length, NUL included (`IFNAMSIZ`).
const IFNAMSIZ: usize = 16;

/// A copy of a name the kernel may change at any time (an interface's, an
/// RDMA device's), for messages: NUL-terminated within `N` bytes.
pub(crate) struct NameCopy<const N: usize>(pub(crate) [u8; N]);

impl<const N: usize> NameCopy<N> {
    /// The text up to the NUL; `?` if it is not UTF-8 (a copy torn by a
    /// concurrent rename may not be).
    pub(crate) fn as_str(&self) -> &str {
        let len = self.0.iter().position(|&b| b == 0).unwrap_or(N);
        self.0.get(..len).and_then(|b| core::str::from_utf8(b).ok()).unwrap_or("?")
    }
}

/// A copy of an interface name.
pub(crate) type IfName = NameCopy<IFNAMSIZ>;

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

    /// The interface name, for messages: a copy, since a rename may rewrite
    /// the device's own at any time.
    pub(crate) fn name(&self) -> IfName {
        let mut buf = [0u8; IFNAMSIZ];
        // SAFETY: the device is alive by the type invariant; the helper writes at most
        // `IFNAMSIZ` bytes, NUL included, into `buf`.
        unsafe { sys::rroce_netdev_copy_name(self.as_raw(), buf.as_mut_ptr().cast()) };
        NameCopy(buf)
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
    pub(crate) fn by_local_ipv4(net: &Net, addr: [u8; 4]) -> Option<NetDevRef> {
        // SAFETY: `net` is alive while borrowed (`Net`'s invariant); the helper looks the
        // address up under its own RCU read lock and returns a held device or null.
        unsafe { NetDevRef::from_held(sys::rroce_ip_dev_find(net.as_raw(), u32::from_ne_bytes(addr))) }
    }

    /// The local netdev that owns IPv6 address `addr` in `net`, if any.
    pub(crate) fn by_local_ipv6(net: &Net, addr: &[u8; 16]) -> Option<NetDevRef> {
        // SAFETY: as in `by_local_ipv4`; `addr` is 16 bytes read during the call.
        unsafe { NetDevRef::from_held(sys::rroce_ipv6_dev_find(net.as_raw(), addr.as_ptr())) }
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

    /// The network namespace the device lives in, for as long as `_rcu` is
    /// held: the device may move to another namespace and the old one be
    /// destroyed at any time (neither RTNL nor a reference holds it), but not
    /// freed before the RCU readers that saw it are done (`dev_net_rcu`).
    /// No count per packet; [`NetDev::get_net`] keeps it beyond the section.
    pub(crate) fn net<'a>(&'a self, _rcu: &'a rcu::Guard) -> &'a Net {
        // SAFETY: the device is alive by the type invariant; `_rcu` holds the RCU read lock
        // for `'a`, through which the namespace read here stays allocated and usable.
        unsafe { Net::from_raw(sys::rroce_dev_net_rcu(self.as_raw())) }
    }

    /// A counted reference to the device's namespace; `None` if that
    /// namespace is being destroyed.
    pub(crate) fn get_net(&self) -> Option<NetRef> {
        // SAFETY: the device is alive by the type invariant; the helper reads its
        // namespace under RCU and returns a counted reference or null.
        NonNull::new(unsafe { sys::rroce_dev_get_net(self.as_raw()) }).map(NetRef)
    }
}

/// A network namespace, borrowed: from a [`NetRef`], or from a device
/// under the RCU read lock ([`NetDev::net`]). Only the namespace's identity
/// and its lookups (addresses, routes) are used through it.
///
/// # Invariants
///
/// The wrapped `net` stays allocated, and its pernet state usable by RCU
/// readers, for the lifetime of the reference.
#[repr(transparent)]
pub(crate) struct Net(Opaque<sys::net>);

impl Net {
    /// # Safety
    ///
    /// `ptr` must be a namespace that stays usable, as the type invariant
    /// says, for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut sys::net) -> &'a Self {
        // SAFETY: `Net` is a transparent wrapper of `net`; liveness per the contract.
        unsafe { &*ptr.cast::<Self>() }
    }

    pub(crate) fn as_raw(&self) -> *mut sys::net {
        self.0.get()
    }
}

/// A counted reference to a network namespace (`maybe_get_net` / `put_net`):
/// while it is held, the namespace's exit does not run.
pub(crate) struct NetRef(NonNull<sys::net>);

impl core::ops::Deref for NetRef {
    type Target = Net;
    fn deref(&self) -> &Net {
        // SAFETY: the counted reference keeps the namespace alive, its exit not yet run,
        // as long as `self`.
        unsafe { Net::from_raw(self.0.as_ptr()) }
    }
}

impl Drop for NetRef {
    fn drop(&mut self) {
        // SAFETY: gives back the reference `NetDev::get_net` took.
        unsafe { sys::rroce_put_net(self.0.as_ptr()) };
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
    /// wait for (cancelling it) must never block on RTNL. `None` where the
    /// caller may not sleep: RTNL is a mutex, and dropping the guard runs the
    /// netdev to-do list, which sleeps.
    pub(crate) fn try_lock() -> Option<Self> {
        // A refusal, not a report: this is safe to call anywhere.
        if !sync::may_block() {
            return None;
        }
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

/// Softirqs held off on this CPU while it lives: a lock that softirq also
/// takes is taken in process context under one, so the softirq cannot
/// interrupt its holder on the same CPU and spin on it forever. Not `Send`:
/// it must be dropped on the CPU that made it. Made only with interrupts on
/// ([`BhDisabled::unless_irqs_off`]): enabling softirqs with interrupts off
/// (hard interrupt context included) may run them there, and a softirq
/// turns interrupts on.
pub(crate) struct BhDisabled(PhantomData<*mut ()>);

impl BhDisabled {
    /// # Safety
    ///
    /// Interrupts are on, and stay on until the guard is dropped.
    unsafe fn new() -> Self {
        // SAFETY: nests; undone by `drop` on this CPU (the guard is not `Send`), with
        // interrupts on (the contract).
        unsafe { sys::rroce_local_bh_disable() };
        Self(PhantomData)
    }

    /// Softirqs held off, unless interrupts are off already (then no
    /// softirq can run here anyway, and enabling them again would be wrong).
    pub(crate) fn unless_irqs_off() -> Option<Self> {
        // SAFETY: reads this CPU's interrupt flag; callable from any context.
        let irqs_off = unsafe { sys::rroce_irqs_disabled() };
        // SAFETY: interrupts are on; code that turns them off restores them before it
        // returns (its own guard or `irqsave` section, nested inside this one).
        (!irqs_off).then(|| unsafe { Self::new() })
    }
}

impl Drop for BhDisabled {
    fn drop(&mut self) {
        // SAFETY: pairs with the disable in `new`, on the same CPU. Should a
        // guard that turned interrupts off outlive this one, the helper
        // leaves pending softirqs for later instead of running them with
        // interrupts off.
        unsafe { sys::rroce_local_bh_enable() };
    }
}
