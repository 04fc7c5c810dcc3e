// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets: READ and atomic responder resources (`read_res`).

use super::*;

#[derive(Clone, Debug)]
enum ReadOp {
    Reset(u32),
    Admit { psn: u32, va: u64, rkey: u32, len: u32 },
    /// A duplicate of a held READ from its response `k` on, `tweak` names a
    /// field to alter (0: none).
    ReplayHeld { which: Index, k: u32, tweak: u8, by: u64 },
    ReplayAny { psn: u32, va: u64, rkey: u32, len: u32, mtu: u32 },
    /// An atomic executed, that found `orig`.
    AdmitAtomic { psn: u32, va: u64, rkey: u32, orig: u64 },
    /// A duplicate of a held resource as an atomic, `tweak` naming a field to alter.
    ReplayAtomicHeld { which: Index, tweak: u8, by: u64 },
    /// The send work sends up to this many responses.
    Respond(u8),
}

fn read_op() -> impl Strategy<Value = ReadOp> {
    let psn = prop_oneof![0u32..64, any::<u32>()];
    let va = prop_oneof![Just(0x1000u64), any::<u64>(), u64::MAX - 20_000..=u64::MAX];
    let rkey = prop_oneof![0u32..3, any::<u32>()];
    let len = prop_oneof![0u32..=20_000, any::<u32>()];
    prop_oneof![
        1 => prop_oneof![0u32..=read_res::MAX as u32 + 2, any::<u32>()].prop_map(ReadOp::Reset),
        6 => (psn.clone(), va.clone(), rkey.clone(), len.clone())
            .prop_map(|(psn, va, rkey, len)| ReadOp::Admit { psn, va, rkey, len }),
        4 => (any::<Index>(), prop_oneof![0u32..8, any::<u32>()], 0u8..8, any::<u64>())
            .prop_map(|(which, k, tweak, by)| ReadOp::ReplayHeld { which, k, tweak, by }),
        2 => (psn, va, rkey, len, mtu())
            .prop_map(|(psn, va, rkey, len, mtu)| ReadOp::ReplayAny { psn, va, rkey, len, mtu }),
        3 => (prop_oneof![0u32..64, any::<u32>()], any::<u64>(), 0u32..3, any::<u64>())
            .prop_map(|(psn, va, rkey, orig)| ReadOp::AdmitAtomic { psn, va, rkey, orig }),
        3 => (any::<Index>(), 0u8..5, any::<u64>())
            .prop_map(|(which, tweak, by)| ReadOp::ReplayAtomicHeld { which, tweak, by }),
        4 => any::<u8>().prop_map(ReadOp::Respond),
    ]
}

/// The resources as a list in PSN order, next to the real ones.
struct ReadModel {
    held: Vec<ReadRes>,
    limit: usize,
    /// Slots: answered resources stay until one is needed.
    cap: usize,
}

impl ReadModel {
    fn admit(&mut self, r: ReadRes) -> Result<(), ReadResError> {
        if self.answering() >= self.limit {
            return Err(ReadResError::Busy);
        }
        if self.held.len() == self.cap {
            match self.held.first() {
                Some(oldest) if oldest.done() => {
                    self.held.remove(0);
                }
                _ => return Err(ReadResError::Busy),
            }
        }
        self.held.push(r);
        Ok(())
    }

    /// The first held READ whose PSNs include `psn` decides; the duplicate
    /// must ask for exactly the rest of it from that response on.
    /// READs, atomics and ATOMIC WRITEs still being answered.
    fn answering(&self) -> usize {
        self.held.iter().filter(|h| !h.done() && h.kind != ResKind::Flush).count()
    }

    fn replay(&mut self, psn: Psn, va: u64, rkey: u32, len: u32, mtu: u32) -> Result<(), ReadResError> {
        let full = self.answering() >= self.limit;
        let r = self.held.iter_mut().find(|r| psn.in_window(r.first_psn, r.n_psn)).ok_or(ReadResError::NotFound)?;
        if r.kind != ResKind::Read {
            return Err(ReadResError::Mismatch);
        }
        let k = psn.diff(r.first_psn) as u32;
        let off = u64::from(k) * u64::from(mtu);
        let exact = off <= u64::from(r.len)
            && rkey == r.rkey
            && u128::from(va) == u128::from(r.va) + u128::from(off)
            && u64::from(len) == u64::from(r.len) - off;
        if !exact {
            return Err(ReadResError::Mismatch);
        }
        if r.done() && full {
            return Err(ReadResError::Busy);
        }
        r.next = r.next.min(k);
        Ok(())
    }

    /// The first held resource with PSN `psn` decides: an atomic with the
    /// same address and key is answered again, never executed again.
    fn replay_executed(&mut self, kind: Executed, psn: Psn, va: u64, rkey: u32) -> Result<(), ReadResError> {
        let full = self.answering() >= self.limit;
        let r = self.held.iter_mut().find(|r| r.first_psn == psn).ok_or(ReadResError::NotFound)?;
        if r.kind.executed() != Some(kind) || r.va != va || r.rkey != rkey {
            return Err(ReadResError::Mismatch);
        }
        if r.done() && full && kind != Executed::Flush {
            return Err(ReadResError::Busy);
        }
        r.next = 0;
        Ok(())
    }

    fn pending(&self) -> Option<ReadRes> {
        self.held.iter().find(|r| !r.done()).copied()
    }
}

/// Response `k` of `r`, if any, lies inside the region the READ named;
/// returns whether there is one.
fn check_response(r: &ReadRes, k: u32, mtu: u32) -> Result<bool, TestCaseError> {
    let Some(s) = r.response(k, mtu) else { return Ok(false) };
    prop_assert!(k < r.n_psn);
    prop_assert!(s.len <= mtu);
    prop_assert!(s.va >= r.va);
    prop_assert!(u128::from(s.va) + u128::from(s.len) <= u128::from(r.va) + u128::from(r.len));
    prop_assert_eq!(s.psn, r.first_psn.add(k));
    prop_assert_eq!((s.first, s.last), (k == 0, k + 1 == r.n_psn));
    Ok(true)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn read_resources_any_sequence(slots in select(std::vec![0usize, 1, 2, 7, read_res::MAX, read_res::MAX + 5]),
                                   mtu in select(&MTUS[..]), ops in vec(read_op(), 0..64)) {
        let mut rr = ReadResources::new(std::vec![None; slots]);
        // Slots the resources really have; the limit is clamped as the real one is.
        let cap = slots.min(read_res::MAX);
        let mut model = ReadModel { held: Vec::new(), limit: 0, cap };
        for op in ops {
            match op {
                ReadOp::Reset(n) => {
                    rr.reset(n);
                    model = ReadModel { held: Vec::new(), limit: (n as usize).min(slots.clamp(1, read_res::MAX)), cap };
                }
                ReadOp::Admit { psn, va, rkey, len } => {
                    let res = ReadRes::new(Psn::new(psn), va, rkey, len, mtu);
                    let fits = len.div_ceil(mtu) <= MAX_READ_PSNS && va.checked_add(u64::from(len)).is_some();
                    prop_assert_eq!(res.is_some(), fits);
                    let Some(res) = res else { continue };
                    prop_assert_eq!((res.next, res.n_psn), (0, len.div_ceil(mtu).max(1)));
                    prop_assert_eq!(rr.admit(res).map(|_| ()), model.admit(res));
                }
                ReadOp::ReplayHeld { which, k, tweak, by } => {
                    let Some(r) = model.held.get(which.index(model.held.len().max(1))).copied() else { continue };
                    let k = k % (r.n_psn + 1);
                    let off = u64::from(k) * u64::from(mtu);
                    let (mut psn, mut va, mut rkey) = (r.first_psn.add(k), r.va.wrapping_add(off), r.rkey);
                    let mut len = u64::from(r.len).saturating_sub(off) as u32;
                    match tweak {
                        1 => psn = psn.add(by as u32),
                        2 => va = va.wrapping_add(by),
                        3 => rkey ^= by as u32,
                        4 => len = len.wrapping_add(by as u32),
                        _ => {}
                    }
                    prop_assert_eq!(rr.replay(psn, va, rkey, len, mtu), model.replay(psn, va, rkey, len, mtu));
                }
                ReadOp::ReplayAny { psn, va, rkey, len, mtu: any_mtu } => {
                    let psn = Psn::new(psn);
                    let got = rr.replay(psn, va, rkey, len, any_mtu);
                    prop_assert_eq!(got, model.replay(psn, va, rkey, len, any_mtu));
                    if got.is_ok() {
                        // Only the rest of a held READ, under its key.
                        let held = model.held.iter().any(|r| {
                            psn.in_window(r.first_psn, r.n_psn) && r.rkey == rkey && va >= r.va
                                && u128::from(va) + u128::from(len) == u128::from(r.va) + u128::from(r.len)
                        });
                        prop_assert!(held);
                    }
                }
                ReadOp::AdmitAtomic { psn, va, rkey, orig } => {
                    let res = ReadRes::atomic(Psn::new(psn), va, rkey, orig);
                    prop_assert_eq!((res.next, res.n_psn, res.len), (0, 1, 8));
                    prop_assert_eq!(rr.admit(res).map(|_| ()), model.admit(res));
                }
                ReadOp::ReplayAtomicHeld { which, tweak, by } => {
                    let Some(r) = model.held.get(which.index(model.held.len().max(1))).copied() else { continue };
                    let (mut psn, mut va, mut rkey) = (r.first_psn, r.va, r.rkey);
                    match tweak {
                        1 => psn = psn.add(by as u32),
                        2 => va = va.wrapping_add(by),
                        3 => rkey ^= by as u32,
                        _ => {}
                    }
                    let before: Vec<ResKind> = model.held.iter().map(|r| r.kind).collect();
                    let got = rr.replay_executed(Executed::Atomic, psn, va, rkey);
                    prop_assert_eq!(got, model.replay_executed(Executed::Atomic, psn, va, rkey));
                    // A replay never changes what an atomic found.
                    prop_assert_eq!(before, model.held.iter().map(|r| r.kind).collect::<Vec<_>>());
                }
                ReadOp::Respond(n) => {
                    for _ in 0..n {
                        let Some(p) = rr.pending() else { break };
                        prop_assert_eq!(Some(*p), model.pending());
                        prop_assert!(check_response(p, p.next, mtu)?, "no response {} of a pending READ", p.next);
                        p.next += 1;
                        let i = model.held.iter().position(|r| !r.done()).unwrap();
                        model.held[i].next += 1;
                    }
                }
            }
            let busy = model.held.iter().filter(|r| !r.done()).count();
            prop_assert!(model.held.len() <= model.cap);
            prop_assert!(busy <= model.limit, "{} READs answered at once, limit {}", busy, model.limit);
            prop_assert_eq!(rr.busy(), busy > 0);
            prop_assert_eq!(rr.pending().copied(), model.pending());
            if let Some(p) = model.pending() {
                prop_assert!(check_response(&p, p.next, mtu)?, "no response {} of a pending READ", p.next);
            }
        }
    }

    #[test]
    fn read_response_any_index(psn in any::<u32>(), va in any::<u64>(), len in any::<u32>(),
                               mtu in mtu(), k in prop_oneof![0u32..8, any::<u32>()], other_mtu in mtu()) {
        let Some(r) = ReadRes::new(Psn::new(psn), va, 1, len, mtu) else { return Ok(()) };
        prop_assert!(mtu.is_power_of_two());
        // Every response up to the last exists; none after it.
        prop_assert!(check_response(&r, k % r.n_psn, mtu)?);
        prop_assert!(check_response(&r, r.n_psn - 1, mtu)?);
        prop_assert_eq!(check_response(&r, k, mtu)?, k < r.n_psn);
        // Cut with another MTU (a changed path MTU) they stay inside too.
        check_response(&r, k, other_mtu)?;
        prop_assert_eq!(r.end_psn().diff(r.first_psn) as u32, r.n_psn);
    }
}
