// SPDX-License-Identifier: GPL-2.0
//! A QP's work, run by one runner at a time (the role of rdma_rxe's
//! `rxe_task.c`): the packets the receive hook queued for it, its send work
//! (what the requester, the READ responder or a flush left for their
//! budget, and kernel consumers' posts), retry timer expiries and pacing
//! wake-ups. Whoever gives the QP work records it, then queues the runner
//! only if the QP was idle; a runner that is on it looks again before it
//! lets go (`proto::task`). No per-packet wake-up of a thread that already
//! runs.
//!
//! The runner runs on the module's per-CPU workqueue, or, once the memory
//! of the QP's PD (or receive PD) may fault, on that PD's own queue
//! (`pd_paging.rs`), where a fault that waits holds up no other user. The
//! queue is chosen each time the runner is queued, so a QP created before
//! its PD's first on-demand region moves there with its next run, timers
//! and send work included: nothing of it waits on a fault on a shared
//! queue.

use super::*;
use crate::pd_paging::PdPaging;
use crate::proto::quota::{Quota, Slots};
use super::placement::Placement;
use crate::proto::task::Schedule;
use crate::net::{BhDisabled, RunnerGuard};
use crate::run_queue::{RunEnd, RunQueue};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8};
use kernel::sync::ArcBorrow;

/// Packets waiting for one QP, its queue's room allocated with it (charged
/// to its creator); more are dropped (and counted) until its runner
/// catches up. A reliable peer sends them again.
const DEPTH: usize = 1024;
/// Packets waiting for the QPs whose memory may fault, all together, and
/// for the others: the packets a flood pins have a bound, and the QPs that
/// wait on faults (held up as long as the memory behind them) cannot take
/// the room of those that do not. Each PD and each user has a share of the
/// first (`pd_paging.rs`).
const TOTAL_FAULTABLE: usize = crate::pd_paging::TOTAL_WAITING;
const TOTAL_RUNNABLE: usize = 8192;
/// What one run does before it queues itself again: a packet is one unit,
/// a retry timer expiry one, a round of send work [`SEND_ROUND`] (each of
/// its parts has its own budget of 64 packets). Bounds how long a run holds
/// a CPU, and how long an ACK it owes waits.
const RUN_BUDGET: usize = 64;
const SEND_ROUND: usize = 16;

/// Packets queued and not yet processed or dropped, of the QPs whose memory
/// may fault and of the others.
static FAULTABLE: Quota = Quota::new(TOTAL_FAULTABLE);
static RUNNABLE: Quota = Quota::new(TOTAL_RUNNABLE);

/// Work of a QP recorded outside its packet queue.
#[derive(Clone, Copy)]
pub(in crate::qp) enum Want {
    /// The send work: requester, READ responses, flush.
    Send = 1 << 0,
    /// The retry timer expired.
    Timer = 1 << 1,
    /// The ACK probe expired.
    AckProbe = 1 << 2,
}

/// The total a packet for a QP counts in.
fn total(faultable: bool) -> &'static Quota {
    if faultable {
        &FAULTABLE
    } else {
        &RUNNABLE
    }
}

/// A packet queued for a QP (one of [`FAULTABLE`] or [`RUNNABLE`]).
pub(super) struct Queued {
    pkt: RxPacket,
    /// A copy of a multicast datagram, for this QP as one attached to its group.
    multicast: bool,
    /// Its place in its total, given back when it is processed or dropped.
    _total: Slots<'static>,
    /// The share of its PD's room the packet holds (a QP whose memory may
    /// fault), given back when it is processed or dropped. Dropped where
    /// the QP, which holds the PD too, is alive: never the last reference.
    pd_share: Option<Arc<PdPaging>>,
}

impl Queued {
    /// Counts the packet in, if its total allows it.
    fn new(pkt: RxPacket, multicast: bool, pd_share: Option<Arc<PdPaging>>) -> Result<Self, RxPacket> {
        match total(pd_share.is_some()).try_take(1) {
            Some(place) => Ok(Self { pkt, multicast, _total: place, pd_share }),
            None => {
                if let Some(pd) = pd_share {
                    pd.release_waiting(1);
                }
                Err(pkt)
            }
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(pd) = &self.pd_share {
            pd.release_waiting(1);
        }
    }
}

/// Which PD's queue the runner uses once the QP's memory may fault, chosen once.
const QUEUE_UNCHOSEN: u8 = 0;
const QUEUE_OF_PD: u8 = 1;
const QUEUE_OF_RECV_PD: u8 = 2;

/// A QP's queued work and who runs it.
#[pin_data]
pub(super) struct QpTask {
    #[pin]
    queue: RunQueue<Queued>,
    /// [`Want`] bits.
    wants: AtomicU8,
    /// The runner was last queued on a PD's queue; written only by whoever
    /// owns the busy state, before it queues the runner.
    on_pd_queue: AtomicBool,
    /// The PD (the QP's, or its receive PD) whose queue the runner uses
    /// once its memory may fault: once chosen it stays.
    queue_of: AtomicU8,
    /// The CPU the QP last sent from ([`NO_CPU`]: none yet). Written under
    /// the QP's state lock, by whoever is about to send.
    tx_cpu: AtomicU32,
    /// Which CPU the runner goes to when nothing binds it (`placement.rs`).
    pub(super) placement: Placement,
}

/// [`QpTask::tx_cpu`] before the QP's first send.
const NO_CPU: u32 = u32::MAX;

impl QpTask {
    pub(super) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            queue <- RunQueue::new(DEPTH),
            wants: AtomicU8::new(0),
            on_pd_queue: AtomicBool::new(false),
            queue_of: AtomicU8::new(QUEUE_UNCHOSEN),
            tx_cpu: AtomicU32::new(NO_CPU),
            placement: Placement::new(),
        }? Error)
    }
}

/// The PD whose queue a QP of PD `pd`, whose receives are checked against
/// `recv_pd`, would use now: its own first.
fn queue_of_now(pd: &PdPaging, recv_pd: &PdPaging) -> u8 {
    if pd.on() {
        QUEUE_OF_PD
    } else if recv_pd.on() {
        QUEUE_OF_RECV_PD
    } else {
        QUEUE_UNCHOSEN
    }
}

impl QpShared {
    /// The queue of the PD the QP's runner uses, once its memory may fault;
    /// `None`: the module's queue.
    pub(super) fn paging_queue(&self) -> Option<&crate::net::OwnedQueue> {
        self.rx_paging().and_then(PdPaging::queue)
    }

    /// The PD of [`Self::paging_queue`], chosen once.
    fn rx_paging_arc(&self) -> Option<&Arc<PdPaging>> {
        let chosen = match self.task.queue_of.load(Ordering::Acquire) {
            QUEUE_UNCHOSEN => {
                let pick = queue_of_now(&self.paging, &self.recv_paging);
                if pick == QUEUE_UNCHOSEN {
                    return None;
                }
                match self.task.queue_of.compare_exchange(QUEUE_UNCHOSEN, pick, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => pick,
                    Err(first) => first,
                }
            }
            chosen => chosen,
        };
        Some(if chosen == QUEUE_OF_PD { &self.paging } else { &self.recv_paging })
    }

    fn rx_paging(&self) -> Option<&PdPaging> {
        self.rx_paging_arc().map(|pd| &**pd)
    }
}

/// The CPU the QP must send from, while packets it sent from there are
/// still in the host. A packet goes through the stack on the CPU that
/// sent it (a veth hands it to that CPU's backlog; a NIC's transmit queue
/// is chosen by CPU): sent from another CPU, a later packet could overtake
/// it, and the peer would see a gap (a lost READ response, an
/// out-of-sequence request) where nothing was lost. Once they have left
/// the host (or reached the peer's IP layer), any CPU may send.
fn tx_home(q: &QpShared) -> Option<u32> {
    let cpu = q.task.tx_cpu.load(Ordering::Acquire);
    (cpu != NO_CPU && q.tx.in_host() != 0).then_some(cpu)
}

/// Whether the caller, holding the QP's state lock where it cannot migrate
/// (softirqs off), may send from this CPU; if so it becomes the QP's
/// sending CPU.
pub(super) fn claim_tx_here(q: &QpShared) -> bool {
    let here = crate::net::this_cpu();
    match tx_home(q) {
        Some(cpu) if cpu != here => false,
        _ => {
            q.task.tx_cpu.store(here, Ordering::Release);
            true
        }
    }
}

/// Whether the QP's runner owns its work now (queued, running or armed):
/// then a doorbell leaves the sending to it.
pub(super) fn runner_busy(q: &QpShared) -> bool {
    q.task.queue.is_busy()
}

/// Who queues a runner.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Starter {
    /// New work for an idle QP (a packet, a doorbell, a timer), on the CPU
    /// it came in on.
    NewWork,
    /// The runner itself, out of budget or moving to the queue it must
    /// run on: it stays where it runs unless it must move.
    Runner,
}

/// The CPU a runner queued by `starter` runs on; `None`: the queueing one.
fn runner_cpu(q: &QpShared, starter: Starter) -> Option<u32> {
    // On the CPU the QP sends from while its packets are in the host.
    if let Some(cpu) = tx_home(q) {
        return Some(cpu);
    }
    if starter == Starter::Runner {
        return None;
    }
    q.task.placement.new_work_cpu()
}

/// Queues the runner on the queue the QP's work belongs on now. Only the
/// owner of the busy state calls this (the one that made it busy, or the
/// runner going on after its budget), so the runner is never on two
/// queues at once, but for the moment a run that moved finishes returning.
fn start(q: ArcBorrow<'_, QpShared>, starter: Starter) {
    match q.paging_queue() {
        Some(wq) => {
            q.task.on_pd_queue.store(true, Ordering::Release);
            drop(wq.enqueue::<_, PAGING_TASK_WORK>(Arc::from(q)));
        }
        None => {
            q.task.on_pd_queue.store(false, Ordering::Release);
            // From process context with softirqs off: the run starts when
            // they go back on, here, instead of in a woken softirq thread.
            let _bh = BhDisabled::unless_irqs_off();
            let run = Arc::from(q);
            drop(match runner_cpu(&q, starter) {
                Some(cpu) => q.rxq.bh().enqueue_on::<_, TASK_WORK>(cpu, run),
                None => q.rxq.queue().enqueue::<_, TASK_WORK>(run),
            });
        }
    }
}

impl QpShared {
    /// The QP's state for its runner, with the half of the lock that fits
    /// where the runner runs: spinning in softirq, sleeping on a PD's
    /// queue, where a fault may wait. `None` only if a second runner were
    /// in (never: one runs at a time); the caller then leaves the work.
    pub(super) fn run_state(&self) -> Option<RunnerGuard<'_, QpState>> {
        self.state.lock_runner(self.task.on_pd_queue.load(Ordering::Acquire))
    }
}

/// Records work of kind `want` and starts the runner if the QP was idle.
/// Any context but hard interrupts.
pub(in crate::qp) fn schedule(q: &Arc<QpShared>, want: Want) {
    q.task.wants.fetch_or(want as u8, Ordering::AcqRel);
    if q.task.queue.schedule() == Schedule::Start {
        start(q.as_arc_borrow(), Starter::NewWork);
    }
}

/// A packet that could not be queued for its QP: the caller counts it
/// and drops it while it holds the QP (its PD share must not be the last
/// reference to the PD).
pub(super) enum Refused {
    /// Over the PD's share or the total.
    Packet(RxPacket),
    /// Over the QP's depth.
    Queued(Queued),
}

impl Refused {
    pub(super) fn counters(&self) -> &crate::counters::Counters {
        let pkt = match self {
            Refused::Packet(pkt) => pkt,
            Refused::Queued(q) => &q.pkt,
        };
        &pkt.dev.data().counters
    }
}

/// Queues a packet for the QP (softirq, or the multicast dispatcher).
/// `multicast`: a copy of a datagram to a group the QP is attached to.
/// `inline_ok`: the caller is the network's receive hook, which may run
/// the runner it starts itself ([`InlineRun`]) once it let go of the QP
/// table. On refusal the caller counts and drops the packet while it still
/// holds the QP.
pub(super) fn push_packet(
    q: ArcBorrow<'_, QpShared>,
    pkt: RxPacket,
    multicast: bool,
    inline_ok: bool,
) -> Result<Option<InlineRun>, Refused> {
    // The PD's and its user's shares first, then the total: a PD whose QPs
    // wait on faults, or a user's, cannot take the room of the others.
    let pd_share = match q.rx_paging_arc() {
        Some(pd) if !pd.take_waiting() => return Err(Refused::Packet(pkt)),
        Some(pd) => Some(pd.clone()),
        None => None,
    };
    let queued = Queued::new(pkt, multicast, pd_share).map_err(Refused::Packet)?;
    match q.task.queue.push(queued) {
        Ok(Schedule::Start) => {
            if inline_ok {
                if let Some(run) = InlineRun::claim(q) {
                    return Ok(Some(run));
                }
            }
            start(q, Starter::NewWork)
        }
        Ok(Schedule::Covered) => {}
        Err(queued) => return Err(Refused::Queued(queued)),
    }
    Ok(None)
}

/// Each CPU's inline runs, counted twice: odd while one is under way. A
/// wait that took an object out of its table (a QP, an MR, a window) and
/// then sees every count move on from the odd value it read, or even,
/// knows that no run that could still use the object is under way
/// ([`wait_inline_runs`]). CPUs past the array's length queue their runs
/// instead.
static INLINE_RUNS: [AtomicU32; 64] = [const { AtomicU32::new(0) }; 64];

/// A runner the receive hook started and runs itself, where the packet
/// already is, instead of queueing a work item for the CPU it is on: no
/// hand-over and no wake-up. Claimed under the QP table's lock, so a QP's
/// destruction, which takes it out of the table first, then sees the claim
/// and waits for the run; the run's reference is never the last.
pub(crate) struct InlineRun {
    q: Arc<QpShared>,
    /// This CPU's count in [`INLINE_RUNS`], odd while the run holds it.
    count: &'static AtomicU32,
}

impl InlineRun {
    /// A run here for the QP whose busy state the caller just took, if it
    /// may run on this CPU now: its memory cannot fault (that work sleeps,
    /// on its PD's queue), nothing sends it elsewhere, and this CPU runs no
    /// other QP inline (a run is never nested in another).
    fn claim(q: ArcBorrow<'_, QpShared>) -> Option<Self> {
        let here = crate::net::this_cpu();
        let count = INLINE_RUNS.get(here as usize)?;
        let even = count.load(Ordering::Relaxed);
        if even % 2 == 1 || q.paging_queue().is_some() || runner_cpu(&q, Starter::NewWork).is_some_and(|cpu| cpu != here) {
            return None;
        }
        // Odd before anything the run looks up. Only this CPU, in softirq,
        // changes its count, so nothing moved it since the load.
        count.store(even.wrapping_add(1), Ordering::SeqCst);
        core::sync::atomic::fence(Ordering::SeqCst);
        Some(Self { q: Arc::from(q), count })
    }

    /// Runs the QP's work, as its work item would, then lets go of it.
    pub(crate) fn run(self) {
        let Self { q, count } = self;
        // The caller owns the busy state and queued nothing.
        q.task.on_pd_queue.store(false, Ordering::Release);
        run_in_softirq(q);
        // The reference is gone: a destruction may go on.
        count.fetch_add(1, Ordering::Release);
    }
}

/// Waits until the inline runs under way when it was called have ended:
/// an object out of its table is used by none of them any more. Process
/// context.
pub(crate) fn wait_inline_runs() {
    core::sync::atomic::fence(Ordering::SeqCst);
    for count in &INLINE_RUNS {
        let seen = count.load(Ordering::Acquire);
        if seen % 2 == 1 {
            // A run in softirq on another CPU: at most a budget's worth.
            while count.load(Ordering::Acquire) == seen {
                core::hint::spin_loop();
            }
        }
    }
}

impl_has_work! {
    impl HasWork<Self, TASK_WORK> for QpShared { self.task_work }
}

impl_has_work! {
    impl HasWork<Self, PAGING_TASK_WORK> for QpShared { self.paging_task_work }
}

/// The run on the module's softirq queue.
impl WorkItem<TASK_WORK> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        run_in_softirq(this);
    }
}

/// A run in softirq: on the module's queue, or inline in the receive hook.
fn run_in_softirq(this: Arc<QpShared>) {
    // A run started just before the PD's memory could fault moves to the
    // PD's queue before it touches anything.
    if this.paging_queue().is_some() {
        start(this.as_arc_borrow(), Starter::Runner);
        return;
    }
    // In softirq a run sends from the CPU it runs on, which must be the
    // QP's sending CPU while its packets are in the host (see `tx_home`):
    // if another one is, the run goes there.
    let here = this.run_state().map(|_st| claim_tx_here(&this));
    if here == Some(false) {
        start(this.as_arc_borrow(), Starter::Runner);
        return;
    }
    this.task.placement.note_run_here();
    run_task(this);
}

/// The run on a PD's queue, where it may sleep on a fault. (It may migrate
/// while it sleeps: no sending CPU is kept there.)
impl WorkItem<PAGING_TASK_WORK> for QpShared {
    type Pointer = Arc<QpShared>;

    fn run(this: Arc<QpShared>) {
        run_task(this);
    }
}

fn run_task(this: Arc<QpShared>) {
    let mut packets = 0usize;
    // Only a request owes an ACK (`rc::send_owed_ack`), and every settling
    // sends what is owed: a run of responses alone (a READ stream's
    // requester) takes no lock for it.
    let requests = core::cell::Cell::new(false);
    let end = this.task.queue.run(
        RUN_BUDGET,
        || run_wants(&this),
        |mut d| {
            packets += 1;
            if super::recv::receive_queued(&this, &d.pkt, d.multicast) {
                requests.set(true);
            }
            d.pkt.mark_processed();
            1
        },
        || {
            if requests.replace(false) {
                send_owed_ack(&this);
            }
        },
    );
    this.task.placement.note_run(packets);
    if end == RunEnd::OutOfBudget {
        start(this.as_arc_borrow(), Starter::Runner);
    }
}

/// Runs the work recorded outside the packet queue; the part of the run's
/// budget it used.
fn run_wants(q: &Arc<QpShared>) -> usize {
    let wants = q.task.wants.swap(0, Ordering::AcqRel);
    let mut used = 0;
    if wants & Want::Timer as u8 != 0 {
        rc::on_timer(q);
        if let Some(st) = q.run_state() {
            continue_flush(q, &st);
        }
        used += 1;
    }
    if wants & Want::AckProbe as u8 != 0 {
        rc::on_ack_probe(q);
        if let Some(st) = q.run_state() {
            continue_flush(q, &st);
        }
        used += 1;
    }
    if wants & Want::Send as u8 != 0 {
        let Some(mut st) = q.run_state() else { return used };
        if !st.dead {
            // READ responses first: the peer's requester waits for them.
            if let Some(dev) = st.dev.take() {
                rc::respond(&dev, q, &mut st);
                st.dev = Some(dev);
            }
            run_send_held(q, &mut st);
        }
        used += SEND_ROUND;
    }
    used
}

/// Sends the ACK the packets of the run asked for, once for all of them.
fn send_owed_ack(q: &Arc<QpShared>) {
    if q.qp_type != QpType::Rc {
        return;
    }
    let Some(mut st) = q.run_state() else { return };
    if st.dead {
        return;
    }
    if let Some(dev) = st.dev.take() {
        rc::send_owed_ack(&dev, q, &mut st);
        st.dev = Some(dev);
    }
}

/// Stops the QP's work for good and drops what it had not processed
/// (`destroy_qp`, once the QP has left its table). When this returns no
/// runner of the QP is queued or running.
pub(super) fn stop(q: &Arc<QpShared>) {
    q.task.queue.stop();
    // Out of its table: no inline run of it starts any more.
    wait_inline_runs();
    // The softirq runner first: it may still move the run to the PD's
    // queue, and runs never move back (a PD's memory, once it may fault,
    // stays so). Not the PD's queue as a whole: the QPs of the PD that
    // wait on faults do not hold up this one.
    crate::net::cancel_work::<_, TASK_WORK>(q);
    crate::net::cancel_work::<_, PAGING_TASK_WORK>(q);
    if q.qp_type == QpType::Ud {
        // The multicast dispatcher may be delivering to it.
        crate::rx::wait_multicast();
    }
    drop(q.task.queue.drain());
}
