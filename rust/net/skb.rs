// SPDX-License-Identifier: GPL-2.0
//! Socket buffers: a received packet, and a packet being built and sent
//! through the IP layer with an owner told when it leaves the host.

use super::{Net, NetDev};
use crate::proto::qos::TxClass;
use crate::sys;
use core::ptr::NonNull;
use kernel::prelude::*;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::sync::{rcu, Arc};

/// A received packet, owned: freed when dropped. It may be queued and
/// processed anywhere later; the device it arrived on is known only to its
/// [`ReceivedSkb`], on arrival.
///
/// # Invariants
///
/// Outside a [`ReceivedSkb`], the skb holds no device and no route (the
/// receive path's may be valid only for an RCU reader).
pub(crate) struct Skb {
    raw: NonNull<sys::sk_buff>,
    /// Freed as consumed rather than dropped.
    processed: bool,
}

// SAFETY: an skb we own may be handed to any context; `Skb` reads nothing that is valid
// only in the receive hook (its device and route are cleared when it leaves it).
unsafe impl Send for Skb {}

impl Skb {
    /// # Safety
    ///
    /// `skb` must be a valid skb whose ownership passes to the new value, and
    /// which holds no device or route valid only for an RCU reader (`Skb`'s
    /// invariant).
    unsafe fn from_raw(skb: *mut sys::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(|raw| Self { raw, processed: false })
    }

    /// Another owner of the same packet, sharing its data (which neither
    /// writes).
    pub(crate) fn try_clone(&self) -> Result<Self> {
        // SAFETY: we own the skb; the clone is a new skb whose ownership we take, with the
        // same (cleared) device and route.
        unsafe { Self::from_raw(sys::rroce_skb_clone(self.raw.as_ptr())) }.ok_or(ENOMEM)
    }

    /// Pulls paged data into the linear area, so [`Skb::ip_packet`] sees it all.
    pub(crate) fn linearize(&mut self) -> Result {
        // SAFETY: we own the skb.
        kernel::error::to_result(unsafe { sys::rroce_skb_linearize(self.raw.as_ptr()) })
    }

    /// The IP packet, from the IP header to the end of the linear data.
    pub(crate) fn ip_packet(&self) -> &[u8] {
        let mut len = 0u32;
        // SAFETY: we own the skb; its linear data from the network header to the tail is
        // initialised, and nobody writes it while we hold it.
        unsafe {
            let p = sys::rroce_skb_network(self.raw.as_ptr(), &mut len);
            core::slice::from_raw_parts(p, len as usize)
        }
    }
}

impl Skb {
    /// The packet was processed: it will be freed as consumed, not as a
    /// drop, so drop monitors (the `kfree_skb` tracepoint) see only real drops.
    pub(crate) fn mark_processed(&mut self) {
        self.processed = true;
    }
}

impl Drop for Skb {
    /// An skb let go unprocessed (invalid, refused, its QP gone) is a drop.
    fn drop(&mut self) {
        // SAFETY: we own the skb.
        unsafe {
            if self.processed {
                sys::rroce_consume_skb(self.raw.as_ptr())
            } else {
                sys::rroce_kfree_skb(self.raw.as_ptr())
            }
        }
    }
}

/// A packet as it arrives, with the device it arrived on: in the UDP
/// receive hook, or handed over by a local sender that holds that device.
/// It lives no longer than the RCU read section `'a` names (it is not
/// `Send` and borrows the guard), which keeps the device and its namespace
/// alive without a reference counted per packet; to be kept or queued, it
/// becomes a plain [`Skb`] ([`ReceivedSkb::into_queued`]).
pub(crate) struct ReceivedSkb<'a> {
    /// Its device and route are still those of the arrival.
    skb: Skb,
    dev: &'a NetDev,
    rcu: &'a rcu::Guard,
}

impl<'a> ReceivedSkb<'a> {
    /// The packet the UDP receive hook was given; `None` (and freed) if it
    /// names no device.
    ///
    /// # Safety
    ///
    /// Only in the receive hook, with a guard `rcu` it took and drops before
    /// it returns: `skb` is a received datagram whose ownership passes to the
    /// new value, and whose device stays alive while the hook runs (the
    /// stack's own RCU read section, which `rcu` nests in).
    pub(super) unsafe fn from_hook(skb: *mut sys::sk_buff, rcu: &'a rcu::Guard) -> Option<Self> {
        let skb = Skb { raw: NonNull::new(skb)?, processed: false };
        // SAFETY: `skb` is valid and ours by the contract.
        let dev = unsafe { sys::rroce_skb_dev(skb.raw.as_ptr()) };
        if dev.is_null() {
            // Freed by `skb`'s drop.
            return None;
        }
        // SAFETY: non-null, and alive for `'a` by the contract: `'a` ends with `rcu`,
        // before the hook returns.
        let dev = unsafe { NetDev::from_raw(dev) };
        Some(Self { skb, dev, rcu })
    }

    /// The device the packet arrived on (a VLAN device's own, for a tagged
    /// packet).
    pub(crate) fn dev(&self) -> &'a NetDev {
        self.dev
    }

    /// The namespace the packet arrived in.
    pub(crate) fn net(&self) -> &'a Net {
        self.dev.net(self.rcu)
    }

    /// Pulls paged data into the linear area, so [`ReceivedSkb::ip_packet`] sees it all.
    pub(crate) fn linearize(&mut self) -> Result {
        self.skb.linearize()
    }

    /// The IP packet, from the IP header to the end of the linear data.
    pub(crate) fn ip_packet(&self) -> &[u8] {
        self.skb.ip_packet()
    }

    /// The packet, to be kept past the arrival: it drops what only the
    /// arrival keeps valid, its device and its route (the stack's may be
    /// one it holds no reference on), as a socket's receive queue does.
    pub(crate) fn into_queued(self) -> Skb {
        // SAFETY: we own the skb; after the call it holds no device or route, as `Skb`
        // requires.
        unsafe { sys::rroce_skb_leave_arrival(self.skb.raw.as_ptr()) };
        self.skb
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

impl XmitStatus {
    /// The transmit helpers' return: 0 sent, 1 dropped, 2 congestion, or a
    /// negative errno (the packet was not sent).
    fn from_helper(ret: kernel::ffi::c_int) -> Result<Self> {
        match ret {
            0 => Ok(Self::Sent),
            2 => Ok(Self::Congested),
            e if e < 0 => Err(Error::from_errno(e)),
            _ => Ok(Self::Dropped),
        }
    }
}

/// A count of an owner's packets that the host still holds: queued in a
/// qdisc, a device queue or a CPU's receive backlog, not yet gone from the
/// host nor taken by the peer's IP layer ([`RoutedSkb::count_in`]).
#[derive(Default)]
pub(crate) struct TxCredits {
    in_host: AtomicU32,
}

impl TxCredits {
    /// Packets counted here and not yet released.
    pub(crate) fn in_host(&self) -> u32 {
        self.in_host.load(Ordering::Acquire)
    }
}

/// Lets packets be counted in [`TxCredits`] while it lives; dropping it
/// waits until every packet counted has been released and its destructor
/// has returned into the core (`csrc/skb.c` says how), since the destructor
/// is this module's code. One at a time: the module keeps it, to be dropped
/// at unload once nothing sends any more.
pub(crate) struct TxOwners(());

impl TxOwners {
    /// Starts taking owners; `EBUSY` while another `TxOwners` lives.
    pub(crate) fn open() -> Result<Self> {
        kernel::task::might_sleep();
        // SAFETY: `released_credits` is the destructor's callback for every owner
        // `count_in` attaches, which are `Arc<TxCredits>` references.
        kernel::error::to_result(unsafe { sys::rroce_tx_owners_open(Some(released_credits)) })?;
        Ok(Self(()))
    }
}

impl Drop for TxOwners {
    /// Process context, at unload.
    fn drop(&mut self) {
        kernel::task::might_sleep();
        // SAFETY: process context; from its return on, no packet gets an owner.
        unsafe { sys::rroce_tx_owners_close() };
        let mut waited_ms = 0u32;
        // SAFETY: this value opened the owners, which stay open until it releases them.
        while let n @ 1.. = unsafe { sys::rroce_tx_owners_pending() } {
            if waited_ms % 10_000 == 0 && waited_ms != 0 {
                pr_warn!("rroce: unload waits for {} packets still queued for transmission\n", n);
            }
            // SAFETY: process context.
            unsafe { sys::rroce_msleep(10) };
            waited_ms = waited_ms.wrapping_add(10);
        }
        // SAFETY: closed, nothing pending: the socket is no packet's any more.
        unsafe { sys::rroce_tx_owners_release() };
    }
}

/// The owner callback of the destructor `rroce_skb_set_owner` installs.
///
/// # Safety
///
/// Only from that destructor, once per packet, with the owner pointer
/// [`RoutedSkb::count_in`] gave it: an `Arc<TxCredits>` reference it gave up.
unsafe extern "C" fn released_credits(owner: *mut kernel::ffi::c_void) {
    // SAFETY: per the contract, the reference `Arc::into_raw` gave up, taken back once.
    let credits = unsafe { Arc::from_raw(owner.cast::<TxCredits>().cast_const()) };
    credits.in_host.fetch_sub(1, Ordering::AcqRel);
}

impl TxSkb {
    /// Allocates room for `len` bytes plus `ndev`'s link-layer headers.
    /// `len` is at most an IP packet's 65,535 bytes.
    pub(crate) fn alloc(ndev: &NetDev, len: usize, ipv6: bool) -> Result<Self> {
        // Bounded so that the C side's sum of headroom, length and tailroom
        // cannot wrap and the skb holds exactly the `len` bytes `bytes_mut` lends.
        let len32 = u32::try_from(len).ok().filter(|&l| l <= u32::from(u16::MAX)).ok_or(EINVAL)?;
        let mut data = core::ptr::null_mut();
        // SAFETY: the device is alive; `data` receives a pointer into the new skb.
        let skb = unsafe { sys::rroce_tx_alloc(ndev.as_raw(), len32, ipv6, &mut data) };
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

    /// Gives up the skb without freeing it: its new owner does.
    fn into_raw(self) -> NonNull<sys::sk_buff> {
        let skb = self.skb;
        core::mem::forget(self);
        skb
    }

    /// Turns the finished packet into a received one arriving on `ndev`: local
    /// delivery, as the IP stack would loop it back, without a UDP round trip.
    pub(crate) fn into_received<'a>(self, ndev: &'a NetDev, rcu: &'a rcu::Guard) -> ReceivedSkb<'a> {
        let skb = self.into_raw();
        // SAFETY: we own the skb; its device is `ndev`, borrowed (and so alive) for as long
        // as the `ReceivedSkb`, which clears it again before the skb is kept longer.
        unsafe { sys::rroce_skb_set_dev(skb.as_ptr(), ndev.as_raw()) };
        ReceivedSkb { skb: Skb { raw: skb, processed: false }, dev: ndev, rcu }
    }

    /// Routes the finished packet from `saddr` to `daddr` out of interface
    /// `oif`, with the route `route` keeps for `saddr`, if any (its owner
    /// resets it when `daddr` or `oif` change). A destination that is an
    /// address of `net` gives the packet back for local delivery, as the IP
    /// stack would loop it back.
    pub(crate) fn route4<'n>(
        self,
        net: &'n Net,
        route: Option<&super::RouteCache>,
        saddr: [u8; 4],
        daddr: [u8; 4],
        oif: i32,
    ) -> Result<Routed<'n>> {
        // SAFETY: `net` is alive while borrowed (`Net`'s invariant), through the call; the
        // skb is ours and stays ours (the helper at most attaches a route to it).
        // Addresses are passed in network order.
        let ret = unsafe {
            sys::rroce_tx_route4(
                net.as_raw(),
                super::RouteCache::ptr_or_null(route),
                self.skb.as_ptr(),
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                oif,
            )
        };
        self.routed(net, ret, false)
    }

    /// As [`TxSkb::route4`], for IPv6.
    pub(crate) fn route6<'n>(
        self,
        net: &'n Net,
        route: Option<&super::RouteCache>,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        oif: i32,
    ) -> Result<Routed<'n>> {
        // SAFETY: as in `route4`; the addresses are 16-byte arrays read during the call.
        let ret = unsafe {
            sys::rroce_tx_route6(
                net.as_raw(),
                super::RouteCache::ptr_or_null(route),
                self.skb.as_ptr(),
                saddr.as_ptr(),
                daddr.as_ptr(),
                oif,
            )
        };
        self.routed(net, ret, true)
    }

    /// The routing helpers' return: `RROCE_ROUTE_OUT` (0), `RROCE_ROUTE_LOCAL`
    /// (1, `csrc/ip.c`) or a negative errno (the skb is freed with `self`).
    fn routed(self, net: &Net, ret: kernel::ffi::c_int, ipv6: bool) -> Result<Routed<'_>> {
        match ret {
            0 => Ok(Routed::Out(RoutedSkb { skb: self, ipv6, net })),
            1 => Ok(Routed::Local(self)),
            e => Err(Error::from_errno(e.min(-1))),
        }
    }
}

/// Where routing sends a finished packet.
pub(crate) enum Routed<'n> {
    /// To the wire: the route is attached, [`RoutedSkb::send`] hands it on.
    Out(RoutedSkb<'n>),
    /// To a local address: nothing attached; the caller delivers it.
    Local(TxSkb),
}

/// A finished packet with its route attached. It borrows the namespace it
/// was routed in, so it is sent there, and cannot be kept past the guard that
/// keeps the namespace (and so the route's device) alive.
pub(crate) struct RoutedSkb<'n> {
    skb: TxSkb,
    ipv6: bool,
    net: &'n Net,
}

impl RoutedSkb<'_> {
    /// Counts the packet in `credits` until it leaves the host, or is
    /// dropped. A packet is counted once: again is `EBUSY`; `ENODEV` when no
    /// [`TxOwners`] lives.
    pub(crate) fn count_in(&mut self, credits: &Arc<TxCredits>) -> Result {
        // Before the destructor can run: it takes the packet out again.
        credits.in_host.fetch_add(1, Ordering::AcqRel);
        let owner = Arc::into_raw(credits.clone()).cast_mut().cast::<kernel::ffi::c_void>();
        // SAFETY: we own the unsent skb; on success its destructor passes `owner` to
        // `released_credits` once, which takes the reference back.
        let ret = unsafe { sys::rroce_skb_set_owner(self.skb.skb.as_ptr(), owner) };
        if ret != 0 {
            // SAFETY: not attached: the reference is still ours.
            drop(unsafe { Arc::from_raw(owner.cast::<TxCredits>().cast_const()) });
            credits.in_host.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }

    /// Hands the packet to the IP layer of the namespace it was routed in.
    /// `class` gives its priority and whether it carries a priority tag,
    /// which it gets only if it leaves through interface `port` itself.
    pub(crate) fn send(self, class: TxClass, port: i32) -> Result<XmitStatus> {
        let tag = if class.priority_tag { port } else { 0 };
        let ipv6 = self.ipv6;
        let net = self.net;
        let skb = self.skb.into_raw().as_ptr();
        // SAFETY: `net` is alive while borrowed, through the call; the skb carries the
        // route `rroce_tx_route4/6` attached (a `RoutedSkb` is made only then), and the
        // helper consumes it in every case.
        let ret = unsafe {
            if ipv6 {
                sys::rroce_tx_out6(net.as_raw(), skb, class.priority.into(), tag)
            } else {
                sys::rroce_tx_out4(net.as_raw(), skb, class.priority.into(), tag)
            }
        };
        XmitStatus::from_helper(ret)
    }
}

impl Drop for TxSkb {
    fn drop(&mut self) {
        // SAFETY: an unsent skb is still ours.
        unsafe { sys::rroce_kfree_skb(self.skb.as_ptr()) };
    }
}
