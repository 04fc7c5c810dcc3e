// SPDX-License-Identifier: GPL-2.0
//! Responder resources for RDMA READ and atomics (IBTA 9.7.5.1.6, 9.7.5.1.7
//! and 9.7.7): what the responder keeps of each READ or atomic request it
//! accepted, so that
//!
//! - at most `max_dest_rd_atomic` of them are being answered at once (a
//!   requester that sends more, or any when it is zero, gets an Invalid
//!   Request NAK, as rdma_rxe does),
//! - READ responses go out a few packets at a time instead of all at once,
//! - a duplicate READ (its responses were lost) is answered from what the
//!   original request asked for, and only within it: a "duplicate" that
//!   names another region, key or length is not executed,
//! - a duplicate atomic is answered with the value the original one
//!   returned, never executed twice.
//!
//! Resources are kept in PSN order. One whose responses have all been sent
//! stays for duplicates until a new READ needs its place.

use super::limits::MAX_READ_PSNS;
use super::psn::Psn;

/// Most resources a QP can have (`max_dest_rd_atomic` is at most this).
pub const MAX: usize = super::limits::MAX_QP_RD_ATOM as usize;

/// What a resource answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResKind {
    /// READ responses with the region's data.
    Read,
    /// An atomic acknowledgement carrying `orig`, the value the atomic found
    /// (it was executed when accepted).
    Atomic { orig: u64 },
    /// A FLUSH, done when accepted: one READ response without data.
    Flush,
    /// An ATOMIC WRITE, done when accepted: one READ response without data.
    AtomicWrite,
}

/// The requests executed when accepted and answered by one response, as a
/// duplicate names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Executed {
    Atomic,
    Flush,
    AtomicWrite,
}

impl ResKind {
    /// Which executed request this resource answers; `None` for a READ.
    pub const fn executed(self) -> Option<Executed> {
        match self {
            Self::Read => None,
            Self::Atomic { .. } => Some(Executed::Atomic),
            Self::Flush => Some(Executed::Flush),
            Self::AtomicWrite => Some(Executed::AtomicWrite),
        }
    }
}

/// One accepted READ or atomic request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadRes {
    pub kind: ResKind,
    /// PSN of the request, which is also the PSN of the first response.
    pub first_psn: Psn,
    /// Responses the request takes (at least one).
    pub n_psn: u32,
    pub va: u64,
    pub rkey: u32,
    pub len: u32,
    /// Responses sent so far (`n_psn` when done); a duplicate rewinds it.
    pub next: u32,
}

/// One READ response to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    pub psn: Psn,
    pub first: bool,
    pub last: bool,
    /// Where its payload comes from, and how long it is.
    pub va: u64,
    pub len: u32,
}

impl ReadRes {
    /// A resource for a READ of `len` bytes at `va` with path MTU `mtu`
    /// (a power of two). `None` beyond [`MAX_READ_PSNS`] responses, the
    /// limit the requester applies too.
    pub fn new(first_psn: Psn, va: u64, rkey: u32, len: u32, mtu: u32) -> Option<Self> {
        if mtu == 0 || !mtu.is_power_of_two() {
            return None;
        }
        let n_psn = len.div_ceil(mtu).max(1);
        if n_psn > MAX_READ_PSNS {
            return None;
        }
        // The last byte must be addressable.
        va.checked_add(u64::from(len))?;
        Some(Self { kind: ResKind::Read, first_psn, n_psn, va, rkey, len, next: 0 })
    }

    /// A resource for an atomic at `va` that was executed and found `orig`:
    /// one acknowledgement to send.
    pub fn atomic(psn: Psn, va: u64, rkey: u32, orig: u64) -> Self {
        Self { kind: ResKind::Atomic { orig }, first_psn: psn, n_psn: 1, va, rkey, len: super::atomic::ATOMIC_BYTES as u32, next: 0 }
    }

    /// A resource for a FLUSH of `len` bytes at `va`, or an ATOMIC WRITE to
    /// `va`, that was executed: one response without data to send.
    pub fn executed(kind: Executed, psn: Psn, va: u64, rkey: u32, len: u32) -> Self {
        let kind = match kind {
            Executed::Atomic => ResKind::Atomic { orig: 0 },
            Executed::Flush => ResKind::Flush,
            Executed::AtomicWrite => ResKind::AtomicWrite,
        };
        Self { kind, first_psn: psn, n_psn: 1, va, rkey, len, next: 0 }
    }

    /// All responses sent.
    pub fn done(&self) -> bool {
        self.next >= self.n_psn
    }

    /// Response `k` of this READ.
    pub fn response(&self, k: u32, mtu: u32) -> Option<Response> {
        if k >= self.n_psn {
            return None;
        }
        let off = k.checked_mul(mtu)?;
        let len = self.len.checked_sub(off)?.min(mtu);
        Some(Response {
            psn: self.first_psn.add(k),
            first: k == 0,
            last: k + 1 == self.n_psn,
            va: self.va.checked_add(u64::from(off))?,
            len,
        })
    }

    /// PSN after the last response.
    pub fn end_psn(&self) -> Psn {
        self.first_psn.add(self.n_psn)
    }
}

/// Why a READ request was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadResError {
    /// Every resource is still answering a READ: the requester exceeded
    /// `max_dest_rd_atomic` (Invalid Request NAK).
    Busy,
    /// A duplicate that matches no resource, or asks for something the
    /// original request did not: dropped.
    NotFound,
    Mismatch,
}

/// The resources of one QP, in PSN order, in storage `S` of `MAX` slots
/// (the kernel allocates it; tests use an array).
#[derive(Clone, Debug)]
pub struct ReadResources<S> {
    slots: S,
    /// Index of the oldest resource.
    head: usize,
    count: usize,
    /// The resources before this one (counted from the oldest) are all
    /// answered: a search for the ones still answering starts here. The
    /// answered stay for duplicates, up to every slot, and a READ stream's
    /// responder looks for its pending READ for every response it sends.
    answered: usize,
    /// `max_dest_rd_atomic`, at most `MAX`.
    limit: usize,
}

impl<S: AsRef<[Option<ReadRes>]> + AsMut<[Option<ReadRes>]>> ReadResources<S> {
    /// Resources in `slots`, which must have `MAX` entries (fewer limit
    /// `max_dest_rd_atomic` further).
    pub fn new(slots: S) -> Self {
        let mut r = Self { slots, head: 0, count: 0, answered: 0, limit: 0 };
        r.reset(0);
        r
    }

    fn cap(&self) -> usize {
        self.slots.as_ref().len().clamp(1, MAX)
    }

    /// Forgets every resource and sets how many there may be.
    pub fn reset(&mut self, max_dest_rd_atomic: u32) {
        self.slots.as_mut().fill(None);
        self.head = 0;
        self.count = 0;
        self.answered = 0;
        self.limit = (max_dest_rd_atomic as usize).min(self.cap());
    }

    /// Changes how many resources there may be, keeping the ones held (a
    /// lower limit takes effect as they complete).
    pub fn set_limit(&mut self, max_dest_rd_atomic: u32) {
        self.limit = (max_dest_rd_atomic as usize).min(self.cap());
    }

    /// Index of the `i`-th resource from the oldest (no panicking
    /// arithmetic: `head` and `i` stay below `cap`, which is at least 1).
    fn index(&self, i: usize) -> usize {
        self.head.wrapping_add(i).checked_rem(self.cap()).unwrap_or(0)
    }

    fn slot(&self, i: usize) -> Option<&ReadRes> {
        self.slots.as_ref().get(self.index(i))?.as_ref()
    }

    fn slot_mut(&mut self, i: usize) -> Option<&mut ReadRes> {
        let at = self.index(i);
        self.slots.as_mut().get_mut(at)?.as_mut()
    }

    /// READs, atomics and ATOMIC WRITEs still being answered: at most
    /// `max_dest_rd_atomic` of them (FLUSHes do not count).
    fn answering(&self) -> usize {
        (self.answered.min(self.count)..self.count).filter(|&i| self.slot(i).is_some_and(|r| !r.done() && r.kind != ResKind::Flush)).count()
    }

    /// Resources in use and how many there may be (`max_dest_rd_atomic`):
    /// what a QP's peer has left of its outstanding READs and atomics.
    pub fn in_use(&self) -> (usize, usize) {
        (self.answering(), self.limit)
    }

    /// Takes a new READ, atomic or ATOMIC WRITE and gives access to its
    /// resource; refused while `max_dest_rd_atomic` of them are still being
    /// answered, or when every slot is.
    pub fn admit(&mut self, res: ReadRes) -> Result<&mut ReadRes, ReadResError> {
        if self.answering() >= self.limit {
            return Err(ReadResError::Busy);
        }
        self.insert(res)
    }

    /// Takes a FLUSH. Requesters need not count FLUSHes against
    /// `max_dest_rd_atomic` (rdma_rxe's do not), so it takes any slot not
    /// still answering (it is answered at once, freeing its place soon).
    pub fn admit_flush(&mut self, res: ReadRes) -> Result<&mut ReadRes, ReadResError> {
        self.insert(res)
    }

    /// Stores a new resource after the others. Answered resources stay (a
    /// duplicate may still ask for them) until their slot is needed, oldest
    /// first; if the oldest is still answering, there is no room.
    fn insert(&mut self, res: ReadRes) -> Result<&mut ReadRes, ReadResError> {
        while self.count >= self.cap() {
            if !self.slot(0).is_some_and(ReadRes::done) {
                return Err(ReadResError::Busy);
            }
            if let Some(s) = self.slots.as_mut().get_mut(self.head) {
                *s = None;
            }
            self.head = self.index(1);
            self.count = self.count.saturating_sub(1);
            self.answered = self.answered.saturating_sub(1);
        }
        let at = self.index(self.count);
        let slot = self.slots.as_mut().get_mut(at).ok_or(ReadResError::Busy)?;
        self.count += 1;
        Ok(slot.insert(res))
    }

    /// A duplicate READ request with PSN `psn`: the responder resends from
    /// there, provided the request asks for exactly the rest of the original
    /// one (IBTA 9.7.5.1.6: same key, address and length adjusted by the
    /// responses already covered).
    pub fn replay(&mut self, psn: Psn, va: u64, rkey: u32, len: u32, mtu: u32) -> Result<(), ReadResError> {
        let full = self.answering() >= self.limit;
        for i in 0..self.count {
            let Some(r) = self.slot_mut(i) else { continue };
            if !psn.in_window(r.first_psn, r.n_psn) {
                continue;
            }
            if r.kind != ResKind::Read {
                return Err(ReadResError::Mismatch);
            }
            let k = psn.diff(r.first_psn) as u32;
            let Some(resp) = r.response(k, mtu) else { return Err(ReadResError::Mismatch) };
            let rest = u64::from(r.len).saturating_sub(u64::from(k) * u64::from(mtu));
            if rkey != r.rkey || va != resp.va || u64::from(len) != rest {
                return Err(ReadResError::Mismatch);
            }
            // An answered READ answers again only within the limit.
            if r.done() && full {
                return Err(ReadResError::Busy);
            }
            r.next = r.next.min(k);
            self.answered = self.answered.min(i);
            return Ok(());
        }
        Err(ReadResError::NotFound)
    }

    /// A duplicate atomic, FLUSH or ATOMIC WRITE request with PSN `psn`: its
    /// response (for an atomic, with the value the original found) is sent
    /// again if the request is of the same kind and names the same address
    /// and key. The request is not executed again.
    pub fn replay_executed(&mut self, kind: Executed, psn: Psn, va: u64, rkey: u32) -> Result<(), ReadResError> {
        let full = self.answering() >= self.limit;
        for i in 0..self.count {
            let Some(r) = self.slot_mut(i) else { continue };
            if r.first_psn != psn {
                continue;
            }
            if r.kind.executed() != Some(kind) || r.va != va || r.rkey != rkey {
                return Err(ReadResError::Mismatch);
            }
            if r.done() && full && kind != Executed::Flush {
                return Err(ReadResError::Busy);
            }
            r.next = 0;
            self.answered = self.answered.min(i);
            return Ok(());
        }
        Err(ReadResError::NotFound)
    }

    /// The oldest resource with responses left to send.
    pub fn pending(&mut self) -> Option<&mut ReadRes> {
        let found = (self.answered.min(self.count)..self.count).find(|&i| self.slot(i).is_some_and(|r| !r.done()));
        // Only a replay makes an answered resource pending again (and moves
        // `answered` back); what callers do with the one returned only
        // answers more of it.
        self.answered = found.unwrap_or(self.count);
        self.slot_mut(found?)
    }

    /// Whether some READ still has responses to send: acknowledgements of
    /// later requests must wait for them (responses go in PSN order).
    pub fn busy(&self) -> bool {
        (self.answered.min(self.count)..self.count).any(|i| self.slot(i).is_some_and(|r| !r.done()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MTU: u32 = 1024;

    fn res(psn: u32, len: u32) -> ReadRes {
        ReadRes::new(Psn::new(psn), 0x1000, 7, len, MTU).unwrap()
    }

    #[test]
    fn responses_cover_the_request() {
        let r = res(10, 2500);
        assert_eq!(r.n_psn, 3);
        let all: [Response; 3] = core::array::from_fn(|k| r.response(k as u32, MTU).unwrap());
        assert!(all[0].first && !all[0].last && all[0].len == 1024 && all[0].va == 0x1000);
        assert!(!all[1].first && !all[1].last && all[1].psn == Psn::new(11));
        assert!(all[2].last && all[2].len == 452 && all[2].va == 0x1000 + 2048);
        assert_eq!(r.response(3, MTU), None);
        let empty = res(5, 0);
        assert_eq!(empty.n_psn, 1);
        let only = empty.response(0, MTU).unwrap();
        assert!(only.first && only.last && only.len == 0);
    }

    #[test]
    fn refuses_unaddressable_or_huge_reads() {
        assert_eq!(ReadRes::new(Psn::new(0), u64::MAX - 10, 1, 100, MTU), None);
        assert_eq!(ReadRes::new(Psn::new(0), 0, 1, u32::MAX, 256), None);
        assert!(ReadRes::new(Psn::new(0), 0, 1, u32::MAX, 4096).is_some());
        assert_eq!(ReadRes::new(Psn::new(0), 0, 1, 10, 1000), None);
    }

    #[test]
    fn limit_is_enforced_while_busy() {
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(2);
        rr.admit(res(0, 100)).unwrap();
        rr.admit(res(1, 100)).unwrap();
        assert_eq!(rr.in_use(), (2, 2));
        assert_eq!(rr.admit(res(2, 100)), Err(ReadResError::Busy));
        // Once the oldest is answered it makes room.
        rr.pending().unwrap().next = 1;
        assert_eq!(rr.in_use(), (1, 2), "an answered READ kept for duplicates is not in use");
        rr.admit(res(2, 100)).unwrap();
        assert_eq!(rr.pending().unwrap().first_psn, Psn::new(1));
        assert!(rr.busy());
        rr.pending().unwrap().next = 1;
        rr.pending().unwrap().next = 1;
        assert!(!rr.busy());
        assert!(rr.pending().is_none());
    }

    #[test]
    fn lowered_limit_takes_effect() {
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(4);
        for p in 0..4 {
            rr.admit(res(p, 100)).unwrap();
        }
        rr.set_limit(1);
        rr.pending().unwrap().next = 1;
        // Three READs are still being answered: no room under a limit of one.
        assert_eq!(rr.admit(res(4, 100)), Err(ReadResError::Busy));
        for _ in 0..3 {
            rr.pending().unwrap().next = 1;
        }
        rr.admit(res(4, 100)).unwrap();
        assert_eq!(rr.answering(), 1);
        // The answered ones are kept for duplicates, answered again within the limit.
        assert_eq!(rr.replay(Psn::new(0), 0x1000, 7, 100, MTU), Err(ReadResError::Busy));
        rr.pending().unwrap().next = 1;
        assert_eq!(rr.replay(Psn::new(0), 0x1000, 7, 100, MTU), Ok(()));
    }

    #[test]
    fn zero_limit_takes_no_read() {
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(0);
        assert_eq!(rr.admit(res(0, 1)), Err(ReadResError::Busy));
        rr.reset(1);
        rr.admit(res(0, 1)).unwrap();
        assert_eq!(rr.admit(res(1, 1)), Err(ReadResError::Busy));
    }

    #[test]
    fn duplicates_replay_only_the_original() {
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(4);
        rr.admit(res(100, 4096)).unwrap();
        rr.pending().unwrap().next = 4;
        // The whole request again.
        assert_eq!(rr.replay(Psn::new(100), 0x1000, 7, 4096, MTU), Ok(()));
        assert_eq!(rr.pending().unwrap().next, 0);
        rr.pending().unwrap().next = 4;
        // From the third response on.
        assert_eq!(rr.replay(Psn::new(102), 0x1000 + 2048, 7, 2048, MTU), Ok(()));
        assert_eq!(rr.pending().unwrap().next, 2);
        // Another key, address or length: not executed.
        assert_eq!(rr.replay(Psn::new(100), 0x1000, 8, 4096, MTU), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay(Psn::new(100), 0x9000, 7, 4096, MTU), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay(Psn::new(100), 0x1000, 7, 1 << 20, MTU), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay(Psn::new(104), 0x1000, 7, 64, MTU), Err(ReadResError::NotFound));
        assert_eq!(rr.replay(Psn::new(99), 0x1000, 7, 64, MTU), Err(ReadResError::NotFound));
    }

    #[test]
    fn duplicate_atomics_replay_the_saved_value() {
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(2);
        rr.admit(ReadRes::atomic(Psn::new(7), 0x2000, 5, 42)).unwrap();
        assert!(rr.busy());
        let p = rr.pending().unwrap();
        assert_eq!((p.kind, p.n_psn, p.len), (ResKind::Atomic { orig: 42 }, 1, 8));
        p.next = 1;
        assert!(!rr.busy());
        // Same PSN, address and key: answered again with the same value.
        assert_eq!(rr.replay_executed(Executed::Atomic, Psn::new(7), 0x2000, 5), Ok(()));
        assert_eq!(rr.pending().unwrap().kind, ResKind::Atomic { orig: 42 });
        rr.pending().unwrap().next = 1;
        // Anything else is not answered.
        assert_eq!(rr.replay_executed(Executed::Atomic, Psn::new(7), 0x2008, 5), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay_executed(Executed::Atomic, Psn::new(7), 0x2000, 6), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay_executed(Executed::Atomic, Psn::new(8), 0x2000, 5), Err(ReadResError::NotFound));
        // A READ replay never matches an atomic, nor an atomic replay a READ.
        assert_eq!(rr.replay(Psn::new(7), 0x2000, 5, 8, MTU), Err(ReadResError::Mismatch));
        rr.admit(res(8, 100)).unwrap();
        assert_eq!(rr.replay_executed(Executed::Atomic, Psn::new(8), 0x1000, 7), Err(ReadResError::Mismatch));
        // Atomics and READs share the limit: the answered atomic gives its
        // place, the READ being answered does not.
        rr.admit(ReadRes::atomic(Psn::new(9), 0, 1, 0)).unwrap();
        assert_eq!(rr.admit(ReadRes::atomic(Psn::new(10), 0, 1, 0)), Err(ReadResError::Busy));
    }

    #[test]
    fn flushes_go_beyond_the_limit_up_to_every_slot() {
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(0);
        let flush = |psn| ReadRes::executed(Executed::Flush, Psn::new(psn), 0, 1, 0);
        // No READ or atomic at max_dest_rd_atomic 0, but FLUSHes.
        assert_eq!(rr.admit(res(0, 1)), Err(ReadResError::Busy));
        for psn in 0..MAX as u32 {
            rr.admit_flush(flush(psn)).unwrap();
        }
        assert_eq!(rr.admit_flush(flush(MAX as u32)), Err(ReadResError::Busy));
        // Once the oldest is answered, it makes room.
        rr.pending().unwrap().next = 1;
        rr.admit_flush(flush(MAX as u32)).unwrap();
        // FLUSHes being answered do not hold READs back.
        rr.set_limit(1);
        rr.admit(res(100, 1)).unwrap_err(); // every slot is still answering
        rr.pending().unwrap().next = 1;
        rr.admit(res(100, 1)).unwrap();
        assert_eq!(rr.admit(res(101, 1)), Err(ReadResError::Busy));
        assert_eq!(rr.answering(), 1);
    }

    #[test]
    fn flushes_being_answered_leave_the_limit_to_others() {
        // rdma_rxe's requester: READ, FLUSH, ATOMIC WRITE, FLUSH, ATOMIC WRITE,
        // ATOMIC WRITE with max_rd_atomic 4 sends them all before any answer.
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(4);
        let flush = |psn| ReadRes::executed(Executed::Flush, Psn::new(psn), 0, 1, 0);
        let aw = |psn| ReadRes::executed(Executed::AtomicWrite, Psn::new(psn), 0, 1, 8);
        rr.admit(res(0, 100)).unwrap();
        rr.admit_flush(flush(1)).unwrap();
        rr.admit(aw(2)).unwrap();
        rr.admit_flush(flush(3)).unwrap();
        rr.admit(aw(4)).unwrap();
        rr.admit(aw(5)).unwrap();
        assert_eq!(rr.admit(aw(6)), Err(ReadResError::Busy));
        assert_eq!(rr.answering(), 4);
    }

    #[test]
    fn duplicate_placements_replay_without_executing() {
        let mut rr = ReadResources::new([None; MAX]);
        rr.reset(2);
        rr.admit(ReadRes::executed(Executed::Flush, Psn::new(3), 0x4000, 9, 1 << 20)).unwrap();
        let p = rr.pending().unwrap();
        assert_eq!((p.kind, p.n_psn), (ResKind::Flush, 1));
        p.next = 1;
        rr.admit(ReadRes::executed(Executed::AtomicWrite, Psn::new(4), 0x4008, 9, 8)).unwrap();
        rr.pending().unwrap().next = 1;
        assert!(!rr.busy());
        assert_eq!(rr.replay_executed(Executed::Flush, Psn::new(3), 0x4000, 9), Ok(()));
        assert_eq!(rr.pending().unwrap().kind, ResKind::Flush);
        rr.pending().unwrap().next = 1;
        assert_eq!(rr.replay_executed(Executed::AtomicWrite, Psn::new(4), 0x4008, 9), Ok(()));
        rr.pending().unwrap().next = 1;
        // Same PSN, another kind: not the request that was executed.
        assert_eq!(rr.replay_executed(Executed::AtomicWrite, Psn::new(3), 0x4000, 9), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay_executed(Executed::Atomic, Psn::new(4), 0x4008, 9), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay(Psn::new(3), 0x4000, 9, 0, MTU), Err(ReadResError::Mismatch));
        assert_eq!(rr.replay_executed(Executed::Flush, Psn::new(3), 0x4000, 10), Err(ReadResError::Mismatch));
    }

    proptest! {
        #[test]
        fn responses_tile_the_range(psn in 0u32..0x00ff_ffff, len in 0u32..(1 << 20), shift in 8u32..=12) {
            let mtu = 1 << shift;
            let r = ReadRes::new(Psn::new(psn), 1 << 40, 1, len, mtu).unwrap();
            let mut at = 1u64 << 40;
            for k in 0..r.n_psn {
                let s = r.response(k, mtu).unwrap();
                prop_assert_eq!(s.va, at);
                prop_assert_eq!(s.psn, Psn::new(psn).add(k));
                prop_assert!(s.len <= mtu);
                prop_assert_eq!(s.last, k + 1 == r.n_psn);
                at += u64::from(s.len);
            }
            prop_assert_eq!(at, (1u64 << 40) + u64::from(len));
        }

        #[test]
        fn never_more_busy_than_the_limit(limit in 0u32..8, ops in proptest::collection::vec(0u8..3, 0..64)) {
            let mut rr = ReadResources::new([None; MAX]);
            rr.reset(limit);
            let mut psn = 0;
            for op in ops {
                match op {
                    0 => { let _ = rr.admit(res(psn, 3000)); psn += 3; }
                    1 => if let Some(r) = rr.pending() { r.next += 1; },
                    _ => { let _ = rr.replay(Psn::new(psn.saturating_sub(2)), 0x1000, 7, 3000, MTU); }
                }
                let busy = (0..rr.count).filter(|&i| rr.slot(i).is_some_and(|r| !r.done())).count();
                prop_assert!(busy <= limit as usize);
                prop_assert!(rr.count <= MAX);
            }
        }

        /// The search that starts after the answered resources finds what a
        /// search of all of them finds, through admissions that evict the
        /// oldest, answers, and replays of answered READs and atomics.
        #[test]
        fn pending_is_the_oldest_unanswered(limit in 1u32..(MAX as u32), ops in proptest::collection::vec((0u8..5, 0u32..400), 0..600)) {
            let mut rr = ReadResources::new([None; MAX]);
            rr.reset(limit);
            let mut psn = 0u32;
            for (op, n) in ops {
                match op {
                    0 => if rr.admit(res(psn, 3000)).is_ok() { psn += 3; },
                    1 => if rr.admit(ReadRes::atomic(Psn::new(psn), 0x2000, 9, 0)).is_ok() { psn += 1; },
                    2 => for _ in 0..n % 8 { if let Some(r) = rr.pending() { r.next += 1; } },
                    3 => { let _ = rr.replay(Psn::new(psn.saturating_sub(n % 400)), 0x1000, 7, 3000, MTU); }
                    _ => { let _ = rr.replay_executed(Executed::Atomic, Psn::new(psn.saturating_sub(n % 400)), 0x2000, 9); }
                }
                let oldest = (0..rr.count).find_map(|i| rr.slot(i).filter(|r| !r.done()).map(|r| r.first_psn));
                prop_assert_eq!(rr.busy(), oldest.is_some());
                prop_assert_eq!(rr.pending().map(|r| r.first_psn), oldest);
            }
        }
    }
}
