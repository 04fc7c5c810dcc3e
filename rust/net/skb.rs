// SPDX-License-Identifier: GPL-2.0
//! Socket buffers: a received packet, and a packet being built and sent
//! through the IP layer with an owner told when it leaves the host.

use super::NetDev;
use crate::proto::qos::TxClass;
use crate::sys;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::Arc;

/// A received packet, owned: freed when dropped.
pub(crate) struct Skb(NonNull<sys::sk_buff>);

// SAFETY: an skb we own may be handed to any context.
unsafe impl Send for Skb {}

impl Skb {
    /// # Safety
    ///
    /// `skb` must be a valid skb whose ownership passes to the new value.
    pub(super) unsafe fn from_raw(skb: *mut sys::sk_buff) -> Option<Self> {
        NonNull::new(skb).map(Self)
    }

    /// The device the packet arrived on.
    pub(crate) fn dev(&self) -> Option<&NetDev> {
        // SAFETY: a received skb's device is alive while the skb is processed.
        let d = unsafe { sys::rroce_skb_dev(self.0.as_ptr()) };
        // SAFETY: as above; non-null checked.
        (!d.is_null()).then(|| unsafe { NetDev::from_raw(d) })
    }

    /// Another owner of the same packet, sharing its data (which neither
    /// writes).
    pub(crate) fn try_clone(&self) -> Result<Self> {
        // SAFETY: we own the skb; the clone is a new skb whose ownership we take.
        unsafe { Self::from_raw(sys::rroce_skb_clone(self.0.as_ptr())) }.ok_or(ENOMEM)
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

/// A packet being built for transmission: IP header to ICRC, linear.
pub(crate) struct TxSkb {
    skb: NonNull<sys::sk_buff>,
    data: NonNull<u8>,
    len: usize,
    /// An owner is attached: the skb's destructor slot is taken.
    owned: bool,
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
    /// the host (or is dropped), with the reference given here. A packet has
    /// one owner: a second is refused (`EBUSY`) and its reference dropped,
    /// since replacing the destructor would lose the first one's reference
    /// and the count unload waits on.
    pub(crate) fn attach_owner<O: TxOwner>(&mut self, owner: Arc<O>) -> Result {
        if self.owned {
            return Err(EBUSY);
        }
        self.owned = true;
        TX_ATTACHED.fetch_add(1, core::sync::atomic::Ordering::AcqRel);
        let arg = Arc::into_raw(owner).cast_mut().cast::<kernel::ffi::c_void>();
        // SAFETY: we own the unsent skb; `released_skb::<O>` takes back the reference
        // in `arg` exactly once, when the skb is freed or orphaned.
        unsafe { sys::rroce_skb_set_destructor(self.skb.as_ptr(), Some(released_skb::<O>), arg) };
        Ok(())
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
        Ok(Self { skb, data, len, owned: false })
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
    pub(crate) fn into_received(self, ndev: &NetDev) -> Skb {
        let skb = self.into_raw();
        // SAFETY: we own the skb; the receive path only reads `dev` while `ndev` is held
        // by the caller.
        unsafe { sys::rroce_skb_set_dev(skb.as_ptr(), ndev.as_raw()) };
        Skb(skb)
    }

    /// Routes the finished packet from `saddr` to `daddr` out of interface
    /// `oif` (with the route `route` keeps for `saddr`, if any: its owner
    /// resets it when `daddr` or `oif` change) and hands it to the IP layer.
    /// `class` gives its priority and whether it carries a priority tag, which
    /// it gets only if it leaves through interface `port` itself.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send4(
        self,
        net: *mut sys::net,
        route: Option<&super::RouteCache>,
        saddr: [u8; 4],
        daddr: [u8; 4],
        oif: i32,
        class: TxClass,
        port: i32,
    ) -> Result<XmitStatus> {
        let skb = self.into_raw().as_ptr();
        // SAFETY: `net` is the live namespace of the sending device; the helper consumes
        // the skb in every case. Addresses are passed in network order.
        let ret = unsafe {
            sys::rroce_tx_send4(
                net,
                super::RouteCache::ptr_or_null(route),
                skb,
                u32::from_ne_bytes(saddr),
                u32::from_ne_bytes(daddr),
                oif,
                class.priority.into(),
                if class.priority_tag { port } else { 0 },
            )
        };
        XmitStatus::from_helper(ret)
    }

    /// As [`TxSkb::send4`], for IPv6.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send6(
        self,
        net: *mut sys::net,
        route: Option<&super::RouteCache>,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        oif: i32,
        class: TxClass,
        port: i32,
    ) -> Result<XmitStatus> {
        let skb = self.into_raw().as_ptr();
        // SAFETY: as in `send4`; the addresses are 16-byte arrays read during the call.
        let ret = unsafe {
            let tag = if class.priority_tag { port } else { 0 };
            sys::rroce_tx_send6(net, super::RouteCache::ptr_or_null(route), skb, saddr.as_ptr(), daddr.as_ptr(), oif, class.priority.into(), tag)
        };
        XmitStatus::from_helper(ret)
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
