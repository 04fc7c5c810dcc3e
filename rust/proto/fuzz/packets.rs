// SPDX-License-Identifier: GPL-2.0
//! Fuzz targets: Packet parsing and encoding (`wire`).

use super::*;

/// Headers with every field at any value, out-of-range ones included; the
/// opcode decides which of them go on the wire.
fn any_headers() -> impl Strategy<Value = Packet> {
    let fields = (any::<[bool; 5]>(), any::<u8>(), any::<u16>(), any::<[u32; 10]>(), any::<[u64; 4]>(), any::<u8>());
    (opcode(), fields).prop_map(
        |(opcode, (b, pad, pkey, d, w, syndrome))| Packet {
            bth: Bth {
                opcode,
                se: b[0],
                mig: b[1],
                pad,
                pkey,
                fecn: b[2],
                becn: b[3],
                dest_qpn: d[0],
                ack_req: b[4],
                psn: d[1],
            },
            flags: 0,
            feth: Feth { placement: syndrome & 0xf, selectivity: (syndrome >> 4) & 3 },
            reth: Reth { va: w[0], rkey: d[2], dma_len: d[3] },
            aeth: Aeth { syndrome, msn: d[4] },
            deth: Deth { qkey: d[5], src_qpn: d[6] },
            atmeth: AtomicEth { va: w[1], rkey: d[7], swap_add: w[2], compare: w[3] },
            atomic_orig: w[0] ^ w[3],
            imm: d[8],
            inv_rkey: d[9],
            payload_off: 0,
            payload_len: 0,
        },
    )
}

/// What `Packet::parse` returns for the encoding of `p` (a known opcode)
/// followed by `payload_len` bytes of payload: fields cut to their wire
/// width, headers the opcode lacks left at their defaults.
pub(super) fn as_parsed(p: &Packet, payload_len: usize) -> Packet {
    let info = op_info(p.bth.opcode).unwrap();
    let has = |f| info.has(f);
    Packet {
        bth: Bth { pad: p.bth.pad & 3, dest_qpn: p.bth.dest_qpn & PSN_MASK, psn: p.bth.psn & PSN_MASK, ..p.bth },
        flags: info.flags,
        feth: if has(flags::FETH) { p.feth } else { Feth::default() },
        reth: if has(flags::RETH) { p.reth } else { Reth::default() },
        aeth: if has(flags::AETH) { Aeth { msn: p.aeth.msn & PSN_MASK, ..p.aeth } } else { Aeth::default() },
        deth: if has(flags::DETH) { Deth { src_qpn: p.deth.src_qpn & PSN_MASK, ..p.deth } } else { Deth::default() },
        atmeth: if has(flags::ATMETH) { p.atmeth } else { AtomicEth::default() },
        atomic_orig: if has(flags::ATMACK) { p.atomic_orig } else { 0 },
        imm: if has(flags::IMMDT) { p.imm } else { 0 },
        inv_rkey: if has(flags::IETH) { p.inv_rkey } else { 0 },
        payload_off: info.hdr_len(),
        payload_len: if info.transport == Transport::Cnp { 0 } else { payload_len },
    }
}

/// Headers of `p`, `payload`, `p.bth.pad` pad bytes and an ICRC slot.
pub(super) fn encode_packet(p: &Packet, payload: &[u8]) -> Vec<u8> {
    let mut b = std::vec![0u8; 64];
    let n = p.encode_headers(&mut b).unwrap();
    b.truncate(n);
    b.extend_from_slice(payload);
    b.resize(b.len() + (p.bth.pad & 3) as usize + ICRC_LEN, 0);
    b
}

pub(super) fn payload_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// The acceptance rules of `Packet::parse`, written out from the format.
fn parse_verdict(b: &[u8]) -> Result<(), WireError> {
    if b.len() < BTH_LEN {
        return Err(WireError::Truncated);
    }
    if b[1] & 0x0f != 0 {
        return Err(WireError::BadVersion);
    }
    let info = op_info(b[0]).ok_or(WireError::UnknownOpcode)?;
    if b.len() < info.hdr_len() + ICRC_LEN {
        return Err(WireError::Truncated);
    }
    let rest = b.len() - info.hdr_len() - ICRC_LEN;
    let pad = ((b[1] >> 4) & 3) as usize;
    if !info.has(flags::PAYLOAD) {
        if pad != 0 {
            return Err(WireError::BadPad);
        }
        if rest != 0 && info.transport != Transport::Cnp {
            return Err(WireError::UnexpectedPayload);
        }
    }
    if rest < pad {
        return Err(WireError::BadPad);
    }
    Ok(())
}

/// Checks what `Packet::parse` promises about a packet it accepted from `b`.
fn check_parsed(b: &[u8], p: &Packet) -> Result<(), TestCaseError> {
    let info = op_info(p.bth.opcode).unwrap();
    prop_assert_eq!(p.bth.opcode, b[0]);
    prop_assert_eq!(p.flags, info.flags);
    prop_assert_eq!(p.payload_off, info.hdr_len());
    prop_assert!(p.bth.pad <= 3);
    for v in [p.bth.dest_qpn, p.bth.psn, p.aeth.msn, p.deth.src_qpn] {
        prop_assert!(v <= PSN_MASK);
    }
    let end = p.payload_off + p.payload_len + p.bth.pad as usize + ICRC_LEN;
    if info.transport == Transport::Cnp {
        prop_assert_eq!(p.payload_len, 0);
        prop_assert!(p.payload_off + ICRC_LEN <= b.len());
    } else {
        // Headers, payload, pad and ICRC fill the buffer exactly.
        prop_assert_eq!(end, b.len());
    }
    if !info.has(flags::PAYLOAD) {
        prop_assert_eq!(p.payload_len, 0);
        prop_assert_eq!(p.bth.pad, 0);
    }
    prop_assert!(b.get(p.payload_off..p.payload_off + p.payload_len).is_some());
    // Headers the opcode lacks stay empty, so no consumer reads stale values.
    prop_assert_eq!(*p, as_parsed(p, p.payload_len));
    // Re-encoding gives back the input headers but for their reserved bits.
    let mut hdr = [0u8; 64];
    let n = p.encode_headers(&mut hdr).unwrap();
    prop_assert_eq!(n, p.payload_off);
    let mut want = b[..n].to_vec();
    want[4] &= 0xc0; // FECN, BECN; the rest is reserved
    want[8] &= 0x80; // AckReq; the rest is reserved
    if info.has(flags::DETH) {
        want[BTH_LEN + 4] = 0; // reserved byte before the source QPN
    }
    if info.has(flags::FETH) {
        // Placement type and selectivity level; the rest is reserved.
        want[BTH_LEN..BTH_LEN + 3].fill(0);
        want[BTH_LEN + 3] &= 0x3f;
    }
    prop_assert_eq!(&hdr[..n], &want[..]);
    Ok(())
}

/// Parses `b` and checks the result against the rules and the promises.
pub(super) fn parse_and_check(b: &[u8]) -> Result<Option<Packet>, TestCaseError> {
    let r = Packet::parse(b);
    prop_assert_eq!(r.map(|_| ()), parse_verdict(b));
    if let Ok(p) = r {
        check_parsed(b, &p)?;
    }
    Ok(r.ok())
}

/// Input bytes that often get past the first checks: a known opcode and
/// transport version 0 in front, lengths around the header sizes.
fn wire_bytes() -> impl Strategy<Value = Vec<u8>> {
    let plausible = (select(known_opcodes()), any::<u8>(), vec(any::<u8>(), 0..80)).prop_map(|(o, b1, mut b)| {
        if let Some(x) = b.get_mut(0) {
            *x = o;
        }
        if let Some(x) = b.get_mut(1) {
            *x = b1 & 0xf0;
        }
        b
    });
    prop_oneof![vec(any::<u8>(), 0..200), plausible]
}

/// A hostile change to a packet in flight.
#[derive(Clone, Debug)]
pub(super) enum Mutation {
    FlipBits(Index, u8),
    SetByte(Index, u8),
    Truncate(Index),
    Append(Vec<u8>),
    Opcode(u8),
    /// SE, MigReq, pad and transport version.
    FlagsByte(u8),
}

pub(super) fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<Index>(), 1u8..).prop_map(|(i, m)| Mutation::FlipBits(i, m)),
        2 => (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Mutation::SetByte(i, v)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => vec(any::<u8>(), 1..40).prop_map(Mutation::Append),
        2 => opcode().prop_map(Mutation::Opcode),
        2 => any::<u8>().prop_map(Mutation::FlagsByte),
    ]
}

/// Applies `m` to `b`, its bytes from `from` on (where the packet starts).
pub(super) fn mutate(b: &mut Vec<u8>, from: usize, m: &Mutation) {
    let n = b.len().saturating_sub(from);
    match m {
        Mutation::FlipBits(i, v) if n > 0 => b[from + i.index(n)] ^= *v,
        Mutation::SetByte(i, v) if n > 0 => b[from + i.index(n)] = *v,
        Mutation::Truncate(i) => b.truncate(from + i.index(n + 1)),
        Mutation::Append(tail) => b.extend_from_slice(tail),
        Mutation::Opcode(o) if n > 0 => b[from] = *o,
        Mutation::FlagsByte(v) if n > 1 => b[from + 1] = *v,
        _ => {}
    }
}

/// A valid packet of a known opcode with its pad matching its payload.
pub(super) fn valid_packet() -> impl Strategy<Value = (Packet, Vec<u8>)> {
    (any_headers(), select(known_opcodes()), prop_oneof![3 => 0usize..=300, 1 => 0usize..=4096], any::<u8>()).prop_map(
        |(mut p, opcode, len, seed)| {
            p.bth.opcode = opcode;
            let info = op_info(opcode).unwrap();
            let payload = if info.has(flags::PAYLOAD) || info.transport == Transport::Cnp {
                payload_bytes(len, seed)
            } else {
                Vec::new()
            };
            p.bth.pad = if info.has(flags::PAYLOAD) { (payload.len().wrapping_neg() & 3) as u8 } else { 0 };
            (p, payload)
        },
    )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn parse_arbitrary_bytes(b in wire_bytes()) {
        parse_and_check(&b)?;
    }

    #[test]
    fn parse_mutated_valid_packets((p, payload) in valid_packet(), ms in vec(mutation(), 0..4)) {
        let mut b = encode_packet(&p, &payload);
        if ms.is_empty() {
            let q = parse_and_check(&b)?;
            prop_assert_eq!(q, Some(as_parsed(&p, payload.len())));
        }
        for m in &ms {
            mutate(&mut b, 0, m);
        }
        parse_and_check(&b)?;
    }

    #[test]
    fn encode_then_parse_every_opcode(h in any_headers(), len in 0usize..=300, seed in any::<u8>()) {
        for opcode in known_opcodes() {
            let info = op_info(opcode).unwrap();
            let mut p = h;
            p.bth.opcode = opcode;
            let carries = info.has(flags::PAYLOAD) || info.transport == Transport::Cnp;
            let payload = if carries { payload_bytes(len, seed) } else { Vec::new() };
            let payload_len = if info.has(flags::PAYLOAD) { len } else { 0 };
            p.bth.pad = (payload_len.wrapping_neg() & 3) as u8;
            let b = encode_packet(&p, &payload);
            let q = parse_and_check(&b)?;
            prop_assert_eq!(q, Some(as_parsed(&p, payload_len)), "opcode {:#x}", opcode);
            let q = q.unwrap();
            prop_assert_eq!(&b[q.payload_off..q.payload_off + q.payload_len], &payload[..q.payload_len]);
        }
    }

    #[test]
    fn encode_hostile_headers(h in any_headers(), buf_len in 0usize..64) {
        let mut buf = std::vec![0xa5u8; buf_len];
        let r = h.encode_headers(&mut buf);
        let Some(info) = op_info(h.bth.opcode) else {
            prop_assert_eq!(r, Err(WireError::UnknownOpcode));
            return Ok(());
        };
        if buf_len < info.hdr_len() {
            prop_assert_eq!(r, Err(WireError::Truncated));
            return Ok(());
        }
        prop_assert_eq!(r, Ok(info.hdr_len()));
        // Out-of-range fields are cut to their width; pad without payload is refused.
        let b = encode_packet(&h, &[]);
        let pad = h.bth.pad & 3;
        let want = if info.has(flags::PAYLOAD) || pad == 0 { Ok(as_parsed(&h, 0)) } else { Err(WireError::BadPad) };
        prop_assert_eq!(Packet::parse(&b), want);
    }
}
