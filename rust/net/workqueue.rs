// SPDX-License-Identifier: GPL-2.0
//! Workqueues: the module's own (drained when dropped), the system ones,
//! and cancelling or flushing `Arc`-owned work items, which the kernel
//! crate does not offer.

use crate::sys;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::sync::Arc;

/// A workqueue of this module, drained and destroyed on drop.
///
/// Work is queued on it only now, never delayed: `destroy_workqueue` drains
/// queued work but not a timer that has yet to queue its item, whose expiry
/// would then queue onto the freed queue. So it hands out no
/// `kernel::workqueue::Queue`, whose `enqueue_delayed` would allow that;
/// delayed work goes on a system queue ([`bh_queue`], [`dfl_queue`]), which
/// is never destroyed.
///
/// ```compile_fail
/// fn arm(q: &crate::net::OwnedQueue, qp: kernel::sync::Arc<crate::qp::QpShared>) {
///     q.get().enqueue_delayed(qp, 1); // no `get`, no `enqueue_delayed`
/// }
/// ```
pub(crate) struct OwnedQueue(NonNull<sys::workqueue_struct>);

// SAFETY: workqueues may be used from any context.
unsafe impl Send for OwnedQueue {}
// SAFETY: as above.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    pub(crate) fn new(name: &'static CStr) -> Result<Self> {
        kernel::task::might_sleep();
        // SAFETY: `name` is a static NUL-terminated string.
        let q = unsafe { sys::rroce_alloc_workqueue(name.as_char_ptr()) };
        NonNull::new(q).map(Self).ok_or(ENOMEM)
    }

    /// A queue whose work runs in softirq, on the CPU that queued it: work
    /// that never sleeps. Queue it with softirqs off (`BhDisabled`) from
    /// process context, so it runs when they go back on rather than in a
    /// softirq thread that must be woken up.
    pub(crate) fn new_bh(name: &'static CStr) -> Result<Self> {
        kernel::task::might_sleep();
        // SAFETY: `name` is a static NUL-terminated string.
        let q = unsafe { sys::rroce_alloc_bh_workqueue(name.as_char_ptr()) };
        NonNull::new(q).map(Self).ok_or(ENOMEM)
    }

    /// A queue for work that may sleep for long (it ties up no per-CPU worker).
    pub(crate) fn new_unbound(name: &'static CStr) -> Result<Self> {
        kernel::task::might_sleep();
        // SAFETY: `name` is a static NUL-terminated string.
        let q = unsafe { sys::rroce_alloc_unbound_workqueue(name.as_char_ptr()) };
        NonNull::new(q).map(Self).ok_or(ENOMEM)
    }

    /// Waits for every work item queued before this call to finish. Not
    /// from a work item of this queue.
    pub(crate) fn flush(&self) {
        kernel::task::might_sleep();
        // SAFETY: the queue lives while `self` does.
        unsafe { sys::rroce_flush_workqueue(self.0.as_ptr()) };
    }

    /// An unbound queue that runs at most `max_active` items at once (so at
    /// most that many of its workers wait at a time).
    pub(crate) fn new_unbound_max(name: &'static CStr, max_active: i32) -> Result<Self> {
        kernel::task::might_sleep();
        // SAFETY: `name` is a static NUL-terminated string.
        let q = unsafe { sys::rroce_alloc_unbound_workqueue_max(name.as_char_ptr(), max_active) };
        NonNull::new(q).map(Self).ok_or(ENOMEM)
    }

    /// Queues `w` on CPU `cpu` (this CPU if that one is offline): work of a
    /// BH queue then runs in that CPU's softirq.
    pub(crate) fn enqueue_on<W, const ID: u64>(&self, cpu: u32, w: W) -> W::EnqueueOutput
    where
        W: kernel::workqueue::RawWorkItem<ID> + Send + 'static,
    {
        let queue = self.0.as_ptr();
        // SAFETY: as the kernel crate's `Queue::enqueue`: `__enqueue` hands a
        // valid `work_struct` pointer for the duration of the closure and keeps
        // it valid until the work runs if the closure returns true, which
        // `queue_work_on` does only if it queued it; the queue outlives `self`.
        unsafe { w.__enqueue(move |work| sys::rroce_queue_work_on(cpu, queue, work.cast())) }
    }

    /// Queues `w` now, on the CPU that queues it unless the queue is
    /// unbound.
    pub(crate) fn enqueue<W, const ID: u64>(&self, w: W) -> W::EnqueueOutput
    where
        W: kernel::workqueue::RawWorkItem<ID> + Send + 'static,
    {
        // SAFETY: the queue lives until `drop` destroys it, after `&self` ends, and the
        // reference does not leave this function (so no delayed work reaches it).
        let queue = unsafe { kernel::workqueue::Queue::from_raw(self.0.as_ptr().cast()) };
        queue.enqueue(w)
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        kernel::task::might_sleep();
        // SAFETY: waits for queued and running work, then frees the queue; nothing
        // enqueues after the owner is dropped.
        unsafe { sys::destroy_workqueue(self.0.as_ptr().cast()) };
    }
}

/// The CPU the caller runs on: stable only where it cannot migrate
/// (softirq, or softirqs or preemption off).
pub(crate) fn this_cpu() -> u32 {
    // SAFETY: reads the caller's CPU number; callable anywhere.
    unsafe { sys::rroce_this_cpu() }
}

/// The `i`-th of the CPUs [`online_cpus`] counts, counting round: spreads
/// work over the CPUs.
pub(crate) fn spread_cpu(i: u32) -> u32 {
    // SAFETY: reads the online and housekeeping CPU masks (under RCU in
    // the helper); callable anywhere.
    unsafe { sys::rroce_spread_cpu(i) }
}

/// How many CPUs work may be spread over: the online ones that are not
/// isolated (`isolcpus=`, cpuset isolated partitions, `nohz_full=`), as
/// unbound workqueues place theirs; all online ones if every one is.
pub(crate) fn online_cpus() -> u32 {
    // SAFETY: reads the online and housekeeping CPU masks (under RCU in
    // the helper); callable anywhere.
    unsafe { sys::rroce_online_cpus() }
}

/// Cancels a pending or running delayed work item `ID` of an `Arc`-owned
/// object and waits for it; gives back the reference a pending item held.
pub(crate) fn cancel_delayed_work<T, const ID: u64>(this: &Arc<T>)
where
    T: kernel::workqueue::HasDelayedWork<T, ID> + kernel::workqueue::WorkItem<ID, Pointer = Arc<T>> + Send + Sync,
{
    kernel::task::might_sleep();
    cancel_delayed_with::<T, ID>(this, sys::cancel_delayed_work_sync);
}

/// Cancels a pending delayed work item `ID` of an `Arc`-owned object without
/// waiting for a running one (callable with locks held that the work takes);
/// gives back the reference a pending item held.
pub(crate) fn cancel_delayed_work_nowait<T, const ID: u64>(this: &Arc<T>)
where
    T: kernel::workqueue::HasDelayedWork<T, ID> + kernel::workqueue::WorkItem<ID, Pointer = Arc<T>> + Send + Sync,
{
    cancel_delayed_with::<T, ID>(this, sys::rroce_cancel_delayed_work);
}

/// Runs `cancel` (a kernel function that returns whether it took a pending
/// item off its queue) on delayed work `ID` of `this`, and drops the
/// reference the pending item held if it did.
fn cancel_delayed_with<T, const ID: u64>(this: &Arc<T>, cancel: unsafe extern "C" fn(*mut sys::delayed_work) -> bool)
where
    T: kernel::workqueue::HasDelayedWork<T, ID> + kernel::workqueue::WorkItem<ID, Pointer = Arc<T>> + Send + Sync,
{
    let ptr = Arc::as_ptr(this).cast_mut();
    // SAFETY: `ptr` points to a live `T` (we hold `this`). Its delayed work's `work_struct`
    // is the first member of the `delayed_work`, so the pointers coincide; both cancel
    // functions take an initialised `delayed_work` and may be called at any time.
    let cancelled = unsafe {
        let work = <T as kernel::workqueue::HasWork<T, ID>>::raw_get_work(ptr);
        let ws = kernel::workqueue::Work::raw_get(work);
        cancel(ws.cast())
    };
    if cancelled {
        // SAFETY: a pending item owned one reference, leaked by `Arc::into_raw` when it was
        // enqueued; it will not run now, so the reference is ours to drop.
        drop(unsafe { Arc::from_raw(ptr) });
    }
}

/// Whether delayed work item `ID` of `this` is pending (its timer running,
/// or queued and not yet started): arming it again would do nothing.
pub(crate) fn delayed_work_pending<T, const ID: u64>(this: &Arc<T>) -> bool
where
    T: kernel::workqueue::HasDelayedWork<T, ID> + Send + Sync,
{
    let ptr = Arc::as_ptr(this).cast_mut();
    // SAFETY: `ptr` points to a live `T` (we hold `this`) whose delayed work was initialised
    // when `T` was; testing its pending bit reads it only.
    unsafe {
        let work = <T as kernel::workqueue::HasWork<T, ID>>::raw_get_work(ptr);
        sys::rroce_work_pending(kernel::workqueue::Work::raw_get(work))
    }
}

/// Waits until work item `ID` of `this`, if queued or running now, has run to
/// completion. Must not be called from that work item itself.
pub(crate) fn flush_work<T, const ID: u64>(this: &Arc<T>)
where
    T: kernel::workqueue::HasWork<T, ID> + Send + Sync,
{
    kernel::task::might_sleep();
    let ptr = Arc::as_ptr(this).cast_mut();
    // SAFETY: `ptr` points to a live `T` (we hold `this`) whose work item was initialised
    // when `T` was; flushing neither queues nor consumes references.
    unsafe {
        let work = <T as kernel::workqueue::HasWork<T, ID>>::raw_get_work(ptr);
        sys::rroce_flush_work(kernel::workqueue::Work::raw_get(work));
    }
}

/// The kernel's system softirq workqueue (`system_bh_wq`): never destroyed,
/// so delayed work may go on it (see [`OwnedQueue`]).
pub(crate) fn bh_queue() -> &'static kernel::workqueue::Queue {
    kernel::workqueue::system_bh()
}

/// The kernel's unbound system workqueue (`system_dfl_wq`, which replaces
/// `system_unbound_wq`): work runs on any CPU.
pub(crate) fn dfl_queue() -> &'static kernel::workqueue::Queue {
    // SAFETY: the system workqueues exist from boot on and are never destroyed.
    unsafe { kernel::workqueue::Queue::from_raw(sys::rroce_system_dfl_wq().cast()) }
}

/// Cancels a pending or running work item `ID` of an `Arc`-owned object and
/// waits for it; gives back the reference a pending item held.
pub(crate) fn cancel_work<T, const ID: u64>(this: &Arc<T>)
where
    T: kernel::workqueue::HasWork<T, ID> + kernel::workqueue::WorkItem<ID, Pointer = Arc<T>> + Send + Sync,
{
    kernel::task::might_sleep();
    let ptr = Arc::as_ptr(this).cast_mut();
    // SAFETY: `ptr` points to a live `T` (we hold `this`).
    let cancelled = unsafe {
        let work = <T as kernel::workqueue::HasWork<T, ID>>::raw_get_work(ptr);
        sys::cancel_work_sync(kernel::workqueue::Work::raw_get(work))
    };
    if cancelled {
        // SAFETY: a pending item owned one reference, leaked by `Arc::into_raw` when it was
        // enqueued; it will never run now, so the reference is ours to drop.
        drop(unsafe { Arc::from_raw(ptr) });
    }
}
