// SPDX-License-Identifier: GPL-2.0
//! Whether a PD's memory may fault. The module's workqueue serves the QPs
//! of every user, so nothing on it may wait on a page fault: a fault on an
//! on-demand paging region can wait as long as the memory behind it (a FUSE
//! daemon that does not answer, a slow disk). Once a PD has such a region,
//! it gets a workqueue of its own: the runners of its QPs (`qp/task.rs`:
//! their packets, send work and timer expiries) move there with their next
//! run, where a fault holds up that PD's QPs only.
//! What one PD can hold is bounded: workers, packets waiting, and the
//! number of such PDs, in all and of one user (`proto::paging_user`). So
//! are the packets waiting for all of one user's PDs: QPs held up by
//! faults for good (a FUSE daemon that never answers) keep theirs, and one
//! user's few such PDs must not fill the room of every other user's. A
//! user's shares are over all devices together (one table for the module,
//! `ib::with_paging_users`): a share per device would let a user given
//! eight devices take everything.
//! A QP of one PD on an SRQ of another reaches the memory of both and runs
//! on the queue of either: each PD links to the other's queue for as long
//! as the QP exists ([`PagingLink`]), so that what goes from one PD's
//! memory waits for the other's queue too. The links are the PDs' own,
//! counted per pair of PDs: none outlives its QPs, and none is searched
//! under a lock of the whole device.

use crate::ib;
use crate::net::OwnedQueue;
use crate::proto::links::{self, Link, Place};
use crate::proto::paging_user::{MAX_PAGING_PDS, USER_MAX_PAGING_PDS};
use crate::proto::quota::{Quota, Slots};
use crate::user::UserId;
use kernel::alloc::KVec;
use kernel::prelude::*;
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::sync::{new_mutex, Arc, Mutex, SetOnce};

/// Work items of one PD's queue running at once: at most this many of its
/// workers wait on faults at a time.
const PD_MAX_ACTIVE: i32 = 4;
/// Packets queued for the QPs of every PD whose memory may fault and not
/// taken by their runners yet (`qp/task.rs`).
pub(crate) const TOTAL_WAITING: usize = 8192;
/// Of those, for the QPs of one PD: a PD whose QPs wait on faults cannot
/// hold them all.
const PD_MAX_WAITING: usize = 1024;
/// For the QPs of all of one user's PDs, on all devices: an eighth of all,
/// as for the PDs with a queue, so no user's stalled PDs fill the room.
const USER_MAX_WAITING: usize = TOTAL_WAITING / 8;

/// PDs with a queue, on all devices: bounds the workers that faults can
/// hold, [`PD_MAX_ACTIVE`] each. More get `ENOMEM` for an on-demand region.
static PAGING_PDS: Quota = Quota::new(MAX_PAGING_PDS);

/// A PD's workqueue, one of [`PAGING_PDS`].
struct PdQueue {
    queue: OwnedQueue,
    /// Given back once the queue is destroyed: fields drop in order.
    _slot: Slots<'static>,
}

/// The user a PD with a queue counts for.
struct PdUser {
    id: UserId,
    /// The packets waiting for the QPs of the user's PDs, shared by those
    /// PDs (of any device).
    waiting: Arc<Quota>,
}

/// Shared by a PD, its QPs and SRQs (the receive side of a QP on an SRQ is
/// the SRQ's PD).
#[pin_data]
pub(crate) struct PdPaging {
    /// The PD's workqueue, set once by [`PdPaging::start`]: from then on
    /// the PD's memory may fault (read whenever a QP's runner is queued).
    queue: SetOnce<PdQueue>,
    /// The user whose share of the PDs with a queue the PD holds, set
    /// before the queue.
    user: SetOnce<PdUser>,
    /// Packets waiting for the runners of the PD's QPs.
    waiting: Quota,
    /// Held by [`PdPaging::start`] until the module's queue is clear, so a second
    /// region of the PD waits for the first one's start.
    #[pin]
    started: Mutex<bool>,
    /// The queues of the other PDs whose QPs' work reaches this PD's memory
    /// ([`PagingLink`]). A slot let go stays empty, so that
    /// [`PdPaging::flush_linked`], which looks at one slot at a time,
    /// misses none that stays.
    #[pin]
    links: Mutex<KVec<Option<Link<Arc<PdPaging>>>>>,
}

impl PdPaging {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                queue: SetOnce::new(),
                user: SetOnce::new(),
                waiting: Quota::new(PD_MAX_WAITING),
                started <- new_mutex!(false, "rroce_pd_paging"),
                links <- new_mutex!(KVec::new(), "rroce_pd_links"),
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Whether the PD's memory may fault.
    pub(crate) fn on(&self) -> bool {
        self.queue.as_ref().is_some()
    }

    /// The PD's own workqueue, once its memory may fault.
    pub(crate) fn queue(&self) -> Option<&OwnedQueue> {
        self.queue.as_ref().map(|q| &q.queue)
    }

    /// Counts a packet in for the PD's QPs, if the PD's share and its
    /// user's allow it. Only once the PD's memory may fault ([`Self::on`]):
    /// its user is set then. Each is given back by
    /// [`PdPaging::release_waiting`].
    pub(crate) fn take_waiting(&self) -> bool {
        let Some(pd) = self.waiting.try_take(1) else { return false };
        if let Some(user) = self.user.as_ref() {
            let Some(slot) = user.waiting.try_take(1) else { return false };
            slot.keep();
        }
        pd.keep();
        true
    }

    /// Counts `n` packets out (processed or dropped).
    pub(crate) fn release_waiting(&self, n: usize) {
        if let Some(user) = self.user.as_ref() {
            user.waiting.release(n);
        }
        self.waiting.release(n);
    }

    /// Called before an on-demand region of the PD can be found by key:
    /// once it returns, no send a doorbell started before the switch and
    /// no runner of a QP of the PD that started on the module's queue
    /// before it is still running there (a later run
    /// moves to the PD's queue before it does anything), so none touches
    /// the region from a shared queue. Process context.
    pub(crate) fn start(&self, user: UserId) -> Result {
        let mut started = self.started.lock();
        if *started {
            return Ok(());
        }
        let slot = PAGING_PDS.try_take(1).ok_or(ENOMEM)?;
        let waiting = take_share(user)?;
        // Unbound: its work may sleep for long and ties up no per-CPU worker.
        let queue = match OwnedQueue::new_unbound_max(c"rroce_pd", PD_MAX_ACTIVE) {
            Ok(queue) => PdQueue { queue, _slot: slot },
            Err(e) => {
                give_back_share(user);
                return Err(e);
            }
        };
        // Given back by `forget`, when the PD goes. Set before the queue, so
        // whoever sees the queue sees the user: a packet counted in for the
        // PD is counted in for its user and given back the same way.
        let _ = self.user.populate(PdUser { id: user, waiting });
        // Only `start` populates it, under `started`, once; published with
        // release ordering, so a runner that sees it sees the queue.
        let _ = self.queue.populate(queue);
        // What runs with softirqs off and may have missed the switch (a
        // doorbell's send in its system call, softirq work) is an RCU
        // read-side section: those that began before it end first. Then
        // the runs queued on the module's queue before it.
        kernel::sync::rcu::synchronize_rcu();
        crate::rx::quiesce();
        // The multicast dispatcher hands datagrams to the UD QPs it found
        // could not fault without queueing them: its run under way, which
        // may have looked before the switch, ends too.
        crate::rx::wait_multicast();
        *started = true;
        Ok(())
    }

    /// The PD goes (`dealloc_pd`): its share of its user's PDs with a queue
    /// is given back. (Its queue goes with the last reference.)
    pub(crate) fn forget(&self) {
        if let Some(user) = self.user.as_ref() {
            give_back_share(user.id);
        }
    }

    /// Waits for the work of the PD's QPs queued before the call: packets
    /// queued for them, timers and sends (`dereg_mr`, `dealloc_mw`).
    /// Process context, not from that work.
    pub(crate) fn flush(&self) {
        if let Some(q) = self.queue.as_ref() {
            q.queue.flush();
        }
    }

    /// [`Self::flush`], and the same on the queues linked to the PD: all
    /// the work queued before the call that may reach the PD's memory.
    pub(crate) fn flush_linked(&self) {
        self.flush();
        let mut at = 0;
        loop {
            // One at a time, out of the lock: a queue whose QPs wait on a
            // fault holds up this call only, not the PD's QPs coming and
            // going.
            let next = {
                let links = self.links.lock();
                let Some(slot) = links.get(at) else { return };
                slot.as_ref().map(|l| l.to.clone())
            };
            if let Some(to) = next {
                to.flush();
            }
            at += 1;
        }
    }

    /// Counts one more QP linking this PD to `to`'s queue.
    fn link(&self, to: &Arc<PdPaging>) -> Result {
        let mut links = self.links.lock();
        match links::place(&links, |l| Arc::ptr_eq(l, to)) {
            Place::Counted(at) => {
                let l = links.get_mut(at).and_then(Option::as_mut).ok_or(EINVAL)?;
                l.count = l.count.checked_add(1).ok_or(ENOMEM)?;
            }
            Place::Free(at) => *links.get_mut(at).ok_or(EINVAL)? = Some(Link { to: to.clone(), count: 1 }),
            Place::Append => links.push(Some(Link { to: to.clone(), count: 1 }), GFP_KERNEL_ACCOUNT)?,
        }
        Ok(())
    }

    /// Counts one out; the link goes with its last QP.
    fn unlink(&self, to: &Arc<PdPaging>) {
        let gone = {
            let mut links = self.links.lock();
            let gone = links::count_out(&mut links, |l| Arc::ptr_eq(l, to));
            if links::all_free(&links) {
                // No slot is kept once the PD has no links.
                *links = KVec::new();
            }
            gone
        };
        // Not the last reference: the QP holds one. Dropped out of the lock
        // all the same.
        drop(gone);
    }
}

/// The links of a QP of one PD on an SRQ of another, each PD's to the
/// other's queue: a region or window of either that goes waits for the
/// work of the QP, which may run on either's queue. Ended when the QP is
/// destroyed, or dropped with a QP not created.
pub(crate) struct PagingLink {
    a: Arc<PdPaging>,
    b: Arc<PdPaging>,
    ended: AtomicBool,
}

impl PagingLink {
    /// Links `a` and `b`, before the QP can run. Process context.
    pub(crate) fn new(a: &Arc<PdPaging>, b: &Arc<PdPaging>) -> Result<Self> {
        a.link(b)?;
        if let Err(e) = b.link(a) {
            a.unlink(b);
            return Err(e);
        }
        Ok(Self { a: a.clone(), b: b.clone(), ended: AtomicBool::new(false) })
    }

    /// Unlinks the PDs, once the QP's work is over (`destroy_qp`). Process
    /// context.
    pub(crate) fn end(&self) {
        if !self.ended.swap(true, Ordering::AcqRel) {
            self.a.unlink(&self.b);
            self.b.unlink(&self.a);
        }
    }
}

impl Drop for PagingLink {
    fn drop(&mut self) {
        // Ended by `destroy_qp`, unless the QP was never created (then in
        // process context, where creating it failed).
        self.end();
    }
}

/// A user with PDs that have a queue, on any device.
struct PagingUser {
    id: UserId,
    /// How many of them, within the user's share.
    pds: Quota,
    /// The packets waiting for their QPs.
    waiting: Arc<Quota>,
}

/// The users with PDs that have a queue: one table for the whole module
/// (`ib::with_paging_users`), so that a user's shares hold over all the
/// devices it may use.
pub(crate) struct PagingUsers(KVec<PagingUser>);

impl PagingUsers {
    /// No users; the module's table is a static.
    pub(crate) const fn new() -> Self {
        Self(KVec::new())
    }

    /// Counts one more PD with a queue for `user`, within its share;
    /// returns the user's count of waiting packets.
    fn take(&mut self, user: UserId) -> Result<Arc<Quota>> {
        match self.0.binary_search_by(|u| u.id.cmp(&user)) {
            Ok(at) => {
                let u = self.0.get(at).ok_or(EINVAL)?;
                u.pds.try_take(1).ok_or(ENOMEM)?.keep();
                Ok(u.waiting.clone())
            }
            Err(at) => {
                // A record per user with a PD that has a queue: users with
                // none are taken out.
                let waiting = Arc::new(Quota::new(USER_MAX_WAITING), GFP_KERNEL_ACCOUNT)?;
                self.0.reserve(1, GFP_KERNEL_ACCOUNT)?;
                let record = PagingUser { id: user, pds: Quota::new(USER_MAX_PAGING_PDS), waiting: waiting.clone() };
                record.pds.try_take(1).ok_or(ENOMEM)?.keep();
                self.0.insert_within_capacity(at, record).map_err(|_| ENOMEM)?;
                Ok(waiting)
            }
        }
    }

    /// Counts one out for `user`.
    fn give_back(&mut self, user: UserId) {
        if let Ok(at) = self.0.binary_search_by(|u| u.id.cmp(&user)) {
            let gone = self.0.get(at).is_some_and(|u| {
                u.pds.release(1);
                u.pds.taken() == 0
            });
            if gone {
                drop(self.0.remove(at));
            }
        }
        if self.0.is_empty() {
            // The static outlives the module's devices: nothing stays
            // allocated once no PD has a queue (at unload, none has).
            self.0 = KVec::new();
        }
    }
}

/// Counts one more PD with a queue for `user` in the module's table.
fn take_share(user: UserId) -> Result<Arc<Quota>> {
    ib::with_paging_users(|users| users.take(user))?
}

/// Counts one out for `user` in the module's table.
fn give_back_share(user: UserId) {
    // Only fails before module init, when no PD took a share.
    let _ = ib::with_paging_users(|users| users.give_back(user));
}
