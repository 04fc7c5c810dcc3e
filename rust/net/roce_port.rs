// SPDX-License-Identifier: GPL-2.0
//! The RoCEv2 UDP port: one IPv4 and one IPv6 socket on port 4791 per
//! network namespace that has devices. Devices hold a reference; the last
//! one closes the sockets, and so does the namespace's teardown (pernet
//! exit), so a socket never outlives its namespace. One registration per
//! module names the receiver of every datagram and its context.

use super::{NetDev, ReceivedSkb};
use crate::sys;
use core::any::TypeId;
use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::alloc::KVec;
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::types::Opaque;

/// Receiver of packets arriving on the RoCEv2 UDP port.
pub(crate) trait UdpReceiver: 'static {
    /// What the sockets hand the receiver with each packet.
    type Ctx: Send + Sync + 'static;
    /// Called in softirq context for every datagram to UDP port 4791; the
    /// packet is kept past the call only as a plain `Skb`.
    fn receive(ctx: ArcBorrow<'_, Self::Ctx>, skb: ReceivedSkb<'_>);

    /// Called once every socket is closed, before the registry lets go of
    /// its reference: stop work that holds references to the context, so
    /// that such work never drops the last one (the context's drop may
    /// destroy the very workqueue that work runs on).
    fn stop(_ctx: &Arc<Self::Ctx>) {}
}

/// One reference to a receiver's context, with its type erased so that one
/// static registry serves whichever receiver registers.
struct ErasedCtx {
    /// From `Arc::into_raw` on an `Arc<R::Ctx>`.
    ptr: *const c_void,
    /// `R`, checked before the pointer is turned back into a typed `Arc`.
    receiver: TypeId,
    /// Gives the reference back: `release_arc::<R::Ctx>`.
    release: unsafe fn(*const c_void),
}

// SAFETY: the pointee is an `R::Ctx`, which is `Send + Sync`.
unsafe impl Send for ErasedCtx {}

impl ErasedCtx {
    fn new<R: UdpReceiver>(ctx: Arc<R::Ctx>) -> Self {
        // The socket hands `sk_user_data` back with its low 3 bits cleared
        // (they are the kernel's flags): the context must be at least
        // 8-aligned, so that `Arc::into_raw` gives a pointer whose low bits
        // are 0, or the callback would see a pointer into the refcount.
        const { assert!(core::mem::align_of::<R::Ctx>() >= 8) };
        Self { ptr: Arc::into_raw(ctx).cast(), receiver: TypeId::of::<R>(), release: release_arc::<R::Ctx> }
    }

    /// A new reference, if the context is `R`'s.
    fn get<R: UdpReceiver>(&self) -> Option<Arc<R::Ctx>> {
        if self.receiver != TypeId::of::<R>() {
            return None;
        }
        // SAFETY: `ptr` came from `Arc::<R::Ctx>::into_raw` (the receiver type is the same),
        // and this value holds that reference while borrowed.
        let ctx = unsafe { ArcBorrow::<R::Ctx>::from_raw(self.ptr.cast()) };
        Some(ctx.into())
    }
}

impl Drop for ErasedCtx {
    fn drop(&mut self) {
        // SAFETY: gives back the reference taken in `new`, once.
        unsafe { (self.release)(self.ptr) };
    }
}

/// # Safety
///
/// `ptr` came from `Arc::<T>::into_raw`, whose reference passes to this call.
unsafe fn release_arc<T: Send + Sync>(ptr: *const c_void) {
    // SAFETY: per the contract.
    drop(unsafe { Arc::<T>::from_raw(ptr.cast()) });
}

/// A kernel UDP socket bound to the RoCEv2 port in one namespace, whose
/// datagrams go to the receiver it was opened for. Released on drop.
struct UdpTunnel {
    sock: NonNull<sys::socket>,
    /// The socket's `sk_user_data`: one reference to the receiver's context.
    _ctx: ErasedCtx,
}

// SAFETY: the socket is only released, once, by the owner.
unsafe impl Send for UdpTunnel {}

impl UdpTunnel {
    /// Binds port 4791 in `net` for IPv4 or IPv6.
    ///
    /// # Safety
    ///
    /// `net` must be a live namespace that outlives the socket (the registry
    /// releases it from the namespace's exit at the latest).
    unsafe fn open<R: UdpReceiver>(net: *mut sys::net, ipv6: bool, ctx: Arc<R::Ctx>) -> Result<Self> {
        let ctx = ErasedCtx::new::<R>(ctx);
        // SAFETY: per the contract; `rcv::<R>` is a valid encap callback for a context of
        // `R::Ctx`, which stays valid until `drop` releases it after the socket.
        let s = unsafe { sys::rroce_udp_tunnel_open(net, ipv6, Some(Self::rcv::<R>), ctx.ptr.cast_mut()) };
        // On failure the socket never saw the context: dropping `ctx` gives its reference back.
        let sock = NonNull::new(s).ok_or(ENOMEM)?;
        // SAFETY: `s` is a pointer or an error pointer.
        if unsafe { sys::rroce_is_err(s.cast()) } {
            // SAFETY: `s` is an error pointer.
            return Err(Error::from_errno(unsafe { sys::rroce_ptr_err(s.cast()) } as i32));
        }
        Ok(Self { sock, _ctx: ctx })
    }

    /// # Safety
    ///
    /// Only as the UDP socket's `encap_rcv`: `sk` is a tunnel socket opened
    /// for `R` and `skb` a received datagram it now owns.
    unsafe extern "C" fn rcv<R: UdpReceiver>(sk: *mut sys::sock, skb: *mut sys::sk_buff) -> kernel::ffi::c_int {
        // Nested in the stack's own read section (UDP receives under RCU), so
        // it costs no more than a count; it bounds what `ReceivedSkb` borrows.
        let rcu = kernel::sync::rcu::read_lock();
        // SAFETY: an encap receive callback owns the skb it is given when it returns 0; the
        // skb's device stays alive while the stack's RCU read section lasts, and `rcu` is
        // dropped before this returns.
        let Some(skb) = (unsafe { ReceivedSkb::from_hook(skb, &rcu) }) else { return 0 };
        // SAFETY: the callback runs under RCU on a socket `open` set up with a reference to
        // an `R::Ctx`, which `drop` gives back only after releasing the socket.
        let ctx = unsafe { sys::rroce_sk_user_data(sk) }.cast::<R::Ctx>().cast_const();
        if !ctx.is_null() {
            // SAFETY: as above.
            R::receive(unsafe { ArcBorrow::from_raw(ctx) }, skb);
        }
        0
    }
}

impl Drop for UdpTunnel {
    fn drop(&mut self) {
        kernel::task::might_sleep();
        // SAFETY: releases the socket opened in `open`, once. Receive callbacks run under
        // RCU: after the grace period none still holds the context, and `self._ctx` then
        // gives its reference back.
        unsafe { sys::rroce_udp_tunnel_close(self.sock.as_ptr()) };
        kernel::sync::rcu::synchronize_rcu();
    }
}

/// What the registry's mutex protects.
struct Registry {
    /// The pernet operations are registered and not being unregistered:
    /// only then is every entry closed by a namespace exit or the drop.
    open: bool,
    entries: KVec<NsSockets>,
}

/// One namespace's sockets.
struct NsSockets {
    net: usize,
    /// Tells this entry apart from a later namespace at the same address.
    generation: u64,
    users: u32,
    _v4: UdpTunnel,
    _v6: Option<UdpTunnel>,
}

kernel::sync::global_lock! {
    // SAFETY: initialised by the first `RocePort::register`, before any other use
    // (every use checks `INITIALISED` first).
    unsafe(uninit) static SOCKETS: Mutex<Registry> = Registry { open: false, entries: KVec::new() };
}

kernel::sync::global_lock! {
    // The registered receiver's context; apart from `SOCKETS`, which is held
    // while sockets open (a sleep), since the context is asked for on every
    // response packet and doorbell.
    // SAFETY: as `SOCKETS`.
    unsafe(uninit) static CTX: SpinLock<Option<ErasedCtx>> = None;
}

/// Both locks are initialised (once per module load).
static INITIALISED: AtomicBool = AtomicBool::new(false);
/// A `RocePort` exists.
static REGISTERED: AtomicBool = AtomicBool::new(false);
static GENERATION: AtomicU64 = AtomicU64::new(1);

/// The port's registration for receiver `R`: its pernet operations close a
/// namespace's sockets when it goes away. Dropping it closes every socket
/// and releases the context.
#[pin_data(PinnedDrop)]
pub(crate) struct RocePort<R: UdpReceiver> {
    #[pin]
    ops: Opaque<sys::pernet_operations>,
    _receiver: PhantomData<R>,
}

// SAFETY: written once before registration, then only used by the core.
unsafe impl<R: UdpReceiver> Send for RocePort<R> {}
// SAFETY: as above.
unsafe impl<R: UdpReceiver> Sync for RocePort<R> {}

impl<R: UdpReceiver> RocePort<R> {
    /// Registers `R` with `ctx` as the context of every socket; one
    /// registration at a time (`EBUSY` otherwise).
    pub(crate) fn register(ctx: Arc<R::Ctx>) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            ops <- Opaque::try_ffi_init(move |ops: *mut sys::pernet_operations| {
                kernel::task::might_sleep();
                if REGISTERED.swap(true, Ordering::AcqRel) {
                    return Err(EBUSY);
                }
                if !INITIALISED.load(Ordering::Acquire) {
                    // SAFETY: once per module load (`REGISTERED` excludes a concurrent
                    // call), before any use: users check `INITIALISED`, set just after.
                    unsafe {
                        SOCKETS.init();
                        CTX.init();
                    }
                    INITIALISED.store(true, Ordering::Release);
                }
                *CTX.lock() = Some(ErasedCtx::new::<R>(ctx));
                // SAFETY: pinned, writable storage that outlives the registration.
                let registered = unsafe {
                    ops.write(pin_init::zeroed());
                    (*ops).exit = Some(Self::exit);
                    kernel::error::to_result(sys::register_pernet_subsys(ops))
                };
                match registered {
                    Ok(()) => SOCKETS.lock().open = true,
                    Err(_) => {
                        // Released outside the lock: the last reference may sleep.
                        let ctx = CTX.lock().take();
                        drop(ctx);
                        REGISTERED.store(false, Ordering::Release);
                    }
                }
                registered
            }),
            _receiver: PhantomData,
        })
    }

    /// The registered context, if `R` is registered. Process context.
    pub(crate) fn ctx() -> Option<Arc<R::Ctx>> {
        if !INITIALISED.load(Ordering::Acquire) {
            return None;
        }
        CTX.lock().as_ref()?.get::<R>()
    }

    /// Opens the sockets of `ndev`'s namespace if it has none yet, and takes
    /// a reference to them. Process context.
    pub(crate) fn hold(ndev: &NetDev) -> Result<PortHold> {
        kernel::task::might_sleep();
        let ctx = Self::ctx().ok_or(ENODEV)?;
        // Held until the sockets are in the registry: the namespace's exit,
        // which closes them, cannot have run before and runs after.
        let net_ref = ndev.get_net().ok_or(ENODEV)?;
        let net = net_ref.as_raw();
        let key = net as usize;
        let mut reg = SOCKETS.lock();
        if !reg.open {
            return Err(ENODEV);
        }
        let all = &mut reg.entries;
        if let Some(e) = all.iter_mut().find(|e| e.net == key) {
            e.users += 1;
            return Ok(PortHold { net: key, generation: e.generation });
        }
        // SAFETY: `net` is alive (`net_ref`) and its exit has not run; with the registry
        // open, that exit or the registration's drop closes the sockets.
        let v4 = unsafe { UdpTunnel::open::<R>(net, false, ctx.clone()) }.inspect_err(|e| {
            pr_err!("cannot bind UDP port 4791 (IPv4): error {}\n", e.to_errno());
        })?;
        // SAFETY: as above.
        let v6 = match unsafe { UdpTunnel::open::<R>(net, true, ctx) } {
            Ok(s) => Some(s),
            Err(e) if e == EAFNOSUPPORT => None,
            Err(e) => {
                pr_err!("cannot bind UDP port 4791 (IPv6): error {}\n", e.to_errno());
                return Err(e);
            }
        };
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
        all.push(NsSockets { net: key, generation, users: 1, _v4: v4, _v6: v6 }, GFP_KERNEL)?;
        Ok(PortHold { net: key, generation })
    }

    /// # Safety
    ///
    /// Only as the `exit` of the port's pernet operations, with the namespace
    /// that is going away.
    unsafe extern "C" fn exit(net: *mut sys::net) {
        let closed = {
            let all = &mut SOCKETS.lock().entries;
            let pos = all.iter().position(|e| e.net == net as usize);
            pos.and_then(|i| all.remove(i).ok())
        };
        drop(closed);
    }
}

#[pinned_drop]
impl<R: UdpReceiver> PinnedDrop for RocePort<R> {
    fn drop(self: Pin<&mut Self>) {
        kernel::task::might_sleep();
        // No socket opens from now on.
        SOCKETS.lock().open = false;
        // SAFETY: registered in `register`, still pinned. Unregistering runs `exit` for
        // every namespace still alive, which closes its sockets.
        unsafe { sys::unregister_pernet_subsys(self.ops.get()) };
        // A static is never dropped: the vector's buffer goes now, or every load
        // and unload of the module would leak it.
        let rest = core::mem::take(&mut SOCKETS.lock().entries);
        drop(rest);
        // Released outside the lock: the last reference may sleep.
        let ctx = CTX.lock().take();
        if let Some(typed) = ctx.as_ref().and_then(ErasedCtx::get::<R>) {
            R::stop(&typed);
        }
        drop(ctx);
        REGISTERED.store(false, Ordering::Release);
    }
}

/// A device's hold on the sockets of its namespace.
pub(crate) struct PortHold {
    net: usize,
    generation: u64,
}

impl Drop for PortHold {
    fn drop(&mut self) {
        // A hold exists only after a registration initialised the lock.
        let closed = {
            let all = &mut SOCKETS.lock().entries;
            let pos = all.iter().position(|e| e.net == self.net && e.generation == self.generation);
            match pos {
                Some(i) => match all.get_mut(i) {
                    Some(e) if e.users > 1 => {
                        e.users -= 1;
                        None
                    }
                    _ => all.remove(i).ok(),
                },
                // The namespace went away first and closed them.
                None => None,
            }
        };
        drop(closed);
    }
}
