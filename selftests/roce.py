"""RoCEv2 packets for rroce's selftests: the transport headers of every
opcode, pad and ICRC for IPv4 and IPv6, parsing of what comes back, a fake
remote endpoint (Peer) on UDP port 4791, and mutation helpers for fuzzing.

The packet part needs only the standard library, so it is checked on any
host: `python3 roce.py ../rust/proto/testdata/rxe-packets.hex` verifies the
ICRC and the header encoding against packets rdma_rxe sent. The helpers at
the end (namespaces, GIDs) run in the guest, where pyverbs is installed.

Packets are sent through a plain UDP socket: the kernel adds the IP and UDP
headers. With IP_PMTUDISC_DO an unconnected IPv4 socket sends with DF set
and IP ID 0, and every other field the ICRC covers is known in advance
(addresses, ports, lengths), so the ICRC is computed before sending."""
import ipaddress
import os
import random
import select
import socket
import struct
import time
import zlib

ROCE_PORT = 4791
DEFAULT_PKEY = 0xffff
PSN_MASK = 0xffffff

# Opcodes (IBTA 9.2, table 38): transport in the top three bits.
RC, UC, UD = 0x00, 0x20, 0x60
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM = 0x00, 0x01, 0x02, 0x03
SEND_ONLY, SEND_ONLY_IMM = 0x04, 0x05
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM = 0x06, 0x07, 0x08, 0x09
WRITE_ONLY, WRITE_ONLY_IMM = 0x0a, 0x0b
READ_REQUEST = 0x0c
READ_RESPONSE_FIRST, READ_RESPONSE_MIDDLE, READ_RESPONSE_LAST, READ_RESPONSE_ONLY = 0x0d, 0x0e, 0x0f, 0x10
ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE = 0x11, 0x12
COMPARE_SWAP, FETCH_ADD = 0x13, 0x14
SEND_LAST_INV, SEND_ONLY_INV = 0x16, 0x17
FLUSH, ATOMIC_WRITE = 0x1c, 0x1d  # memory placement extensions (annex A19)
CNP = 0x81  # RoCEv2 congestion notification (Annex A17)

OP_NAMES = {
    SEND_FIRST: 'SEND_FIRST', SEND_MIDDLE: 'SEND_MIDDLE', SEND_LAST: 'SEND_LAST', SEND_LAST_IMM: 'SEND_LAST_IMM',
    SEND_ONLY: 'SEND_ONLY', SEND_ONLY_IMM: 'SEND_ONLY_IMM', WRITE_FIRST: 'WRITE_FIRST', WRITE_MIDDLE: 'WRITE_MIDDLE',
    WRITE_LAST: 'WRITE_LAST', WRITE_LAST_IMM: 'WRITE_LAST_IMM', WRITE_ONLY: 'WRITE_ONLY', WRITE_ONLY_IMM: 'WRITE_ONLY_IMM',
    READ_REQUEST: 'READ_REQUEST', READ_RESPONSE_FIRST: 'READ_RESPONSE_FIRST', READ_RESPONSE_MIDDLE: 'READ_RESPONSE_MIDDLE',
    READ_RESPONSE_LAST: 'READ_RESPONSE_LAST', READ_RESPONSE_ONLY: 'READ_RESPONSE_ONLY', ACKNOWLEDGE: 'ACKNOWLEDGE',
    ATOMIC_ACKNOWLEDGE: 'ATOMIC_ACKNOWLEDGE', COMPARE_SWAP: 'COMPARE_SWAP', FETCH_ADD: 'FETCH_ADD',
    SEND_LAST_INV: 'SEND_LAST_INV', SEND_ONLY_INV: 'SEND_ONLY_INV', FLUSH: 'FLUSH', ATOMIC_WRITE: 'ATOMIC_WRITE',
}

# Header sizes and the order extended headers follow the BTH in.
BTH_LEN, DETH_LEN, RETH_LEN, ATMETH_LEN, AETH_LEN, ATMACK_LEN, IMMDT_LEN, IETH_LEN, ICRC_LEN = 12, 8, 16, 28, 4, 8, 4, 4, 4
FETH_LEN = 4
HEADER_ORDER = ('deth', 'feth', 'reth', 'atmeth', 'aeth', 'atmack', 'imm', 'ieth')
HEADER_LEN = {'deth': DETH_LEN, 'feth': FETH_LEN, 'reth': RETH_LEN, 'atmeth': ATMETH_LEN, 'aeth': AETH_LEN,
              'atmack': ATMACK_LEN, 'imm': IMMDT_LEN, 'ieth': IETH_LEN}

# AETH syndromes (IBTA 9.7.5.1): ACK with "no credits" as rroce and rdma_rxe send it, NAK codes.
SYN_ACK = 0x1f
NAK_PSN_SEQ, NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS, NAK_REMOTE_OP = 0x60, 0x61, 0x62, 0x63


def syndrome_name(s):
    kind = s & 0x60
    if s & 0x80:
        return f'reserved({s:#x})'
    if kind == 0x00:
        return 'ACK'
    if kind == 0x20:
        return f'RNR_NAK(timer {s & 0x1f})'
    if kind == 0x60:
        return {0: 'NAK_PSN_SEQ', 1: 'NAK_INVALID_REQUEST', 2: 'NAK_REMOTE_ACCESS', 3: 'NAK_REMOTE_OP'}.get(s & 0x1f, f'NAK({s & 0x1f})')
    return f'reserved({s:#x})'


def op_layout(opcode):
    """(extended headers in wire order, carries payload) of `opcode`, or None
    for opcodes rroce does not speak. Mirrors op_info in rust/proto/wire.rs."""
    if opcode == CNP:
        return (), False
    transport, op = opcode & 0xe0, opcode & 0x1f
    if transport not in (RC, UC, UD):
        return None
    table = {
        SEND_FIRST: ((), True), SEND_MIDDLE: ((), True), SEND_LAST: ((), True), SEND_LAST_IMM: (('imm',), True),
        SEND_ONLY: ((), True), SEND_ONLY_IMM: (('imm',), True),
        WRITE_FIRST: (('reth',), True), WRITE_MIDDLE: ((), True), WRITE_LAST: ((), True),
        WRITE_LAST_IMM: (('imm',), True), WRITE_ONLY: (('reth',), True), WRITE_ONLY_IMM: (('reth', 'imm'), True),
        READ_REQUEST: (('reth',), False),
        READ_RESPONSE_FIRST: (('aeth',), True), READ_RESPONSE_MIDDLE: ((), True),
        READ_RESPONSE_LAST: (('aeth',), True), READ_RESPONSE_ONLY: (('aeth',), True),
        ACKNOWLEDGE: (('aeth',), False), ATOMIC_ACKNOWLEDGE: (('aeth', 'atmack'), False),
        COMPARE_SWAP: (('atmeth',), False), FETCH_ADD: (('atmeth',), False),
        SEND_LAST_INV: (('ieth',), True), SEND_ONLY_INV: (('ieth',), True),
        FLUSH: (('feth', 'reth'), False), ATOMIC_WRITE: (('reth',), True),
    }
    if op not in table:
        return None
    hdrs, payload = table[op]
    if transport == UC and not (op <= WRITE_ONLY_IMM):
        return None
    if transport == UD:
        if op not in (SEND_ONLY, SEND_ONLY_IMM):
            return None
        hdrs = ('deth',) + hdrs
    return hdrs, payload


def is_known(opcode):
    return op_layout(opcode) is not None


def header_len(opcode):
    """BTH plus extended headers of a known opcode."""
    hdrs, _ = op_layout(opcode)
    return BTH_LEN + sum(HEADER_LEN[h] for h in hdrs)


def bth(opcode, qpn, psn, *, se=False, mig=False, pad=0, pkey=DEFAULT_PKEY, tver=0, fecn=False, becn=False,
        ack_req=False, resv8a=0, resv7=0):
    """The 12-byte base transport header. resv8a/resv7 let a test set the
    reserved bits (resv8a shares a byte with FECN/BECN and is masked in the ICRC)."""
    return struct.pack('!BBHBBHBBH', opcode & 0xff, se << 7 | mig << 6 | (pad & 3) << 4 | (tver & 0xf), pkey & 0xffff,
                       fecn << 7 | becn << 6 | (resv8a & 0x3f), (qpn >> 16) & 0xff, qpn & 0xffff,
                       ack_req << 7 | (resv7 & 0x7f), (psn >> 16) & 0xff, psn & 0xffff)


def reth(va, rkey, length):
    return struct.pack('!QII', va & (2**64 - 1), rkey & 0xffffffff, length & 0xffffffff)


def aeth(syndrome, msn):
    return struct.pack('!I', (syndrome & 0xff) << 24 | (msn & PSN_MASK))


def deth(qkey, src_qpn):
    return struct.pack('!II', qkey & 0xffffffff, src_qpn & PSN_MASK)


def atmeth(va, rkey, swap_add, compare):
    return struct.pack('!QIQQ', va & (2**64 - 1), rkey & 0xffffffff, swap_add & (2**64 - 1), compare & (2**64 - 1))


def feth(placement, level):
    return struct.pack('!I', (level & 3) << 4 | (placement & 0xf))


def packet(opcode, qpn, psn, payload=b'', *, reth_=None, aeth_=None, deth_=None, atmeth_=None, atmack=0, imm=0,
           ieth=0, feth_=None, pad=None, headers=None, **bth_fields):
    """A UDP payload without its ICRC: BTH, the extended headers `opcode`
    carries (built from the arguments, zeros where none is given), payload
    and pad. Tuples: reth_=(va, rkey, len), aeth_=(syndrome, msn),
    deth_=(qkey, src_qpn), atmeth_=(va, rkey, swap_add, compare),
    feth_=(placement type, selectivity level).
    `headers` overrides the opcode's header list (to build a wrong layout);
    `pad` overrides the pad count (the pad bytes appended follow it too)."""
    layout = op_layout(opcode)
    if headers is None:
        headers = layout[0] if layout else ()
    if pad is None:
        pad = (-len(payload)) % 4
    out = [bth(opcode, qpn, psn, pad=pad, **bth_fields)]
    for h in HEADER_ORDER:
        if h not in headers:
            continue
        if h == 'deth':
            out.append(deth(*(deth_ or (0, 0))))
        elif h == 'feth':
            out.append(feth(*(feth_ or (0, 0))))
        elif h == 'reth':
            out.append(reth(*(reth_ or (0, 0, 0))))
        elif h == 'atmeth':
            out.append(atmeth(*(atmeth_ or (0, 0, 0, 0))))
        elif h == 'aeth':
            out.append(aeth(*(aeth_ or (SYN_ACK, 0))))
        elif h == 'atmack':
            out.append(struct.pack('!Q', atmack & (2**64 - 1)))
        elif h == 'imm':
            out.append(struct.pack('!I', imm & 0xffffffff))
        elif h == 'ieth':
            out.append(struct.pack('!I', ieth & 0xffffffff))
    out.append(payload)
    out.append(b'\0' * (pad & 3))
    return b''.join(out)


# --- ICRC -------------------------------------------------------------------

def _masked_bth(udp_payload):
    b = bytearray(udp_payload[:BTH_LEN])
    if len(b) > 4:
        b[4] = 0xff  # resv8a (FECN/BECN byte)
    return bytes(b)


def _addr_bytes(addr):
    ip = ipaddress.ip_address(addr)
    return ip.version, ip.packed


def icrc(udp_payload, src, dst, sport=ROCE_PORT, dport=ROCE_PORT, ip_id=0, df=True):
    """The 4 ICRC bytes for `udp_payload` (BTH onwards, ICRC excluded) as the
    kernel will wrap it when sent from src:sport to dst:dport: IPv4 without
    options (ID `ip_id`, DF per `df`) or IPv6. Variant fields masked to ones:
    IPv4 TOS, TTL, header checksum; IPv6 traffic class, flow label, hop limit;
    the UDP checksum; the BTH resv8a byte. Seed: 8 bytes of 0xff (masked LRH)."""
    ver, s = _addr_bytes(src)
    _, d = _addr_bytes(dst)
    udp_len = 8 + len(udp_payload) + ICRC_LEN
    if ver == 4:
        ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0xff, 20 + udp_len, ip_id, 0x4000 if df else 0, 0xff, 17, 0xffff, s, d)
    else:
        ip = struct.pack('!IHBB16s16s', 0x6fffffff, udp_len, 17, 0xff, s, d)
    udp = struct.pack('!HHHH', sport, dport, udp_len, 0xffff)
    crc = zlib.crc32(b'\xff' * 8 + ip + udp + _masked_bth(udp_payload) + udp_payload[BTH_LEN:])
    return struct.pack('<I', crc)


def icrc_of_ip_packet(ip_packet):
    """ICRC of a whole IP packet (trailer excluded from the sum), computed
    from its own headers the way rust/proto/icrc.rs does; as an int equal
    to int.from_bytes(trailer, 'little')."""
    v = ip_packet[0] >> 4
    if v == 4 and ip_packet[0] & 0xf == 5:
        n = 20
    elif v == 6:
        n = 40
    else:
        raise ValueError('not IPv4 without options or IPv6')
    h = bytearray(ip_packet[:n + 8 + BTH_LEN])
    if n == 20:
        h[1] = h[8] = h[10] = h[11] = 0xff
    else:
        h[0] |= 0x0f
        h[1] = h[2] = h[3] = h[7] = 0xff
    h[n + 6] = h[n + 7] = 0xff
    h[n + 8 + 4] = 0xff
    return zlib.crc32(b'\xff' * 8 + bytes(h) + ip_packet[n + 8 + BTH_LEN:-ICRC_LEN])


# --- parsing ------------------------------------------------------------------

class Pkt:
    """A parsed UDP payload. Fields absent from the opcode are None."""
    __slots__ = ('raw', 'opcode', 'se', 'mig', 'pad', 'tver', 'pkey', 'fecn', 'becn', 'qpn', 'ack_req', 'psn',
                 'feth', 'reth', 'aeth', 'deth', 'atmeth', 'atmack', 'imm', 'ieth', 'payload', 'icrc')

    def __init__(self, raw):
        for f in self.__slots__:
            setattr(self, f, None)
        self.raw = raw

    @property
    def syndrome(self):
        return self.aeth[0] if self.aeth else None

    @property
    def msn(self):
        return self.aeth[1] if self.aeth else None

    @property
    def name(self):
        return OP_NAMES.get(self.opcode & 0x1f, f'op{self.opcode:#x}') if self.opcode != CNP else 'CNP'

    def __repr__(self):
        extra = f' {syndrome_name(self.syndrome)} msn {self.msn}' if self.aeth else ''
        return f'<{self.name} qpn {self.qpn:#x} psn {self.psn}{extra} +{len(self.payload or b"")}B>'


def parse(data):
    """Parses a UDP payload (BTH to ICRC). Returns a Pkt, or None when it is
    shorter than its headers and ICRC or its opcode is unknown."""
    if len(data) < BTH_LEN + ICRC_LEN:
        return None
    p = Pkt(data)
    b0, b1, p.pkey, b4, qh, ql, b8, ph, pl = struct.unpack('!BBHBBHBBH', data[:BTH_LEN])
    p.opcode, p.se, p.mig, p.pad, p.tver = b0, bool(b1 & 0x80), bool(b1 & 0x40), (b1 >> 4) & 3, b1 & 0xf
    p.fecn, p.becn, p.qpn, p.ack_req, p.psn = bool(b4 & 0x80), bool(b4 & 0x40), qh << 16 | ql, bool(b8 & 0x80), ph << 16 | pl
    layout = op_layout(p.opcode)
    if layout is None:
        return None
    hdrs, has_payload = layout
    at = BTH_LEN
    end = len(data) - ICRC_LEN
    for h in hdrs:
        n = HEADER_LEN[h]
        if at + n > end:
            return None
        f = data[at:at + n]
        if h == 'deth':
            q, s = struct.unpack('!II', f)
            p.deth = (q, s & PSN_MASK)
        elif h == 'feth':
            w, = struct.unpack('!I', f)
            p.feth = (w & 0xf, (w >> 4) & 3)
        elif h == 'reth':
            p.reth = struct.unpack('!QII', f)
        elif h == 'atmeth':
            p.atmeth = struct.unpack('!QIQQ', f)
        elif h == 'aeth':
            w, = struct.unpack('!I', f)
            p.aeth = (w >> 24, w & PSN_MASK)
        elif h == 'atmack':
            p.atmack, = struct.unpack('!Q', f)
        elif h == 'imm':
            p.imm, = struct.unpack('!I', f)
        elif h == 'ieth':
            p.ieth, = struct.unpack('!I', f)
        at += n
    body = data[at:end]
    p.payload = body[:len(body) - p.pad] if has_payload else body
    p.icrc = data[end:]
    return p


# --- the fake remote endpoint ---------------------------------------------------

class Peer:
    """A remote RoCE endpoint played from a UDP socket bound to `addr`:4791
    (IPv4 or IPv6) in the current network namespace. Sends crafted packets
    with their ICRC and receives what the device answers."""

    def __init__(self, addr, port=ROCE_PORT, rcvbuf=8 << 20):
        self.addr = addr
        self.family = socket.AF_INET6 if ipaddress.ip_address(addr).version == 6 else socket.AF_INET
        self.sock = socket.socket(self.family, socket.SOCK_DGRAM)
        try:  # root may exceed rmem_max: room for a burst of READ responses
            self.sock.setsockopt(socket.SOL_SOCKET, 33, rcvbuf)  # SO_RCVBUFFORCE
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        if self.family == socket.AF_INET:
            self.sock.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = IP_PMTUDISC_DO: DF set, IP ID 0
        else:
            # RoCEv2 senders leave the UDP checksum zero (the ICRC covers the
            # packet); IPv6 drops such datagrams unless told otherwise.
            self.sock.setsockopt(socket.IPPROTO_UDP, 102, 1)  # UDP_NO_CHECK6_RX
        self.sock.bind((addr, port))
        self.port = self.sock.getsockname()[1]
        self.sent = self.send_errors = 0

    def send(self, udp_payload, dst, crc=True, dport=ROCE_PORT):
        """Sends `udp_payload` to dst:4791 with its correct ICRC appended
        (crc=True), none (crc=False: the payload is sent as is) or the given
        4 bytes. Returns False if the kernel refused it (e.g. too big for DF)."""
        if crc is True:
            udp_payload += icrc(udp_payload, self.addr, dst, self.port, dport)
        elif crc:
            udp_payload += crc
        try:
            self.sock.sendto(udp_payload, (dst, dport))
        except OSError:
            self.send_errors += 1
            return False
        self.sent += 1
        return True

    def recv(self, timeout=0.0):
        """The next datagram parsed, with its source address: (Pkt or None, addr),
        or None when nothing arrives within `timeout` seconds."""
        r, _, _ = select.select([self.sock], [], [], max(timeout, 0))
        if not r:
            return None
        data, src = self.sock.recvfrom(65536)
        return parse(data), src[0]

    def collect(self, secs, qpn=None, until=None, quiet=None):
        """Packets (Pkt) received within `secs` seconds, optionally only those for
        `qpn`. Stops early when until(list) is true, or after `quiet` seconds
        without a packet once at least one arrived."""
        got = []
        end = time.time() + secs
        last = None
        while True:
            now = time.time()
            if now >= end or (until and until(got)):
                break
            wait = end - now
            if quiet is not None and last is not None:
                wait = min(wait, last + quiet - now)
                if wait <= 0:
                    break
            r = self.recv(wait)
            if r is None:
                continue
            p, _ = r
            if p is not None and (qpn is None or p.qpn == qpn):
                got.append(p)
                last = time.time()
        return got

    def drain(self):
        """Discards everything already received; returns how many datagrams."""
        n = 0
        while n < 1_000_000 and self.recv(0) is not None:
            n += 1
        return n

    def close(self):
        self.sock.close()


# --- mutation helpers for fuzzing ---------------------------------------------------

# Values that tend to find length and bounds bugs.
INTERESTING32 = (0, 1, 2, 3, 4, 7, 8, 63, 64, 255, 256, 1023, 1024, 1025, 2047, 2048, 4095, 4096, 4097,
                 0xffff, 0x10000, 0x7fffffff, 0x80000000, 0x80000001, 0xfffffffe, 0xffffffff)
INTERESTING24 = (0, 1, 2, 0x7fffff, 0x800000, 0x800001, 0xfffffe, 0xffffff)
INTERESTING64 = (0, 1, 0x7fffffffffffffff, 0x8000000000000000, 0xfffffffffffff000, 0xffffffffffffffff - 15,
                 0xffffffffffffffff)


def flip_bits(data, rng, n=1):
    """`data` with `n` random bits inverted."""
    b = bytearray(data)
    for _ in range(n):
        if b:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def set_bytes(data, rng, n=1):
    """`data` with `n` random bytes replaced by random or boundary values."""
    b = bytearray(data)
    for _ in range(n):
        if b:
            b[rng.randrange(len(b))] = rng.choice((0, 0xff, 0x7f, 0x80, rng.randrange(256)))
    return bytes(b)


def truncate(data, rng, keep_min=0):
    """A random prefix of `data` (at least keep_min bytes)."""
    return data[:rng.randrange(min(keep_min, len(data)), len(data) + 1)]


def extend(data, rng, max_extra=64):
    """`data` with up to max_extra random bytes appended."""
    return data + rng.randbytes(rng.randrange(1, max_extra + 1))


def pick32(rng, near=()):
    """A 32-bit value: boundary, near one of `near`, or random."""
    c = rng.random()
    if c < 0.4:
        return rng.choice(INTERESTING32)
    if c < 0.7 and near:
        return (rng.choice(near) + rng.randrange(-8, 9)) & 0xffffffff
    return rng.getrandbits(32)


def pick64(rng, near=()):
    c = rng.random()
    if c < 0.3:
        return rng.choice(INTERESTING64)
    if c < 0.8 and near:
        return (rng.choice(near) + rng.choice((0, 1, -1, 8, 4096, -4096, rng.randrange(-65536, 65536)))) & (2**64 - 1)
    return rng.getrandbits(64)


def psn_near(rng, psn, spread=4):
    """A PSN near `psn`: mostly it, else a few before or after, or far off."""
    c = rng.random()
    if c < 0.6:
        d = 0
    elif c < 0.9:
        d = rng.randrange(-spread, spread + 1)
    else:
        d = rng.choice((0x7fffff, 0x800000, -0x800000, rng.getrandbits(24)))
    return (psn + d) & PSN_MASK


# --- guest helpers ------------------------------------------------------------------

def enter_netns(name):
    """Moves this thread (and what it opens from now on) into network namespace `name`."""
    fd = os.open(f'/var/run/netns/{name}', os.O_RDONLY)
    try:
        os.setns(fd, os.CLONE_NEWNET)
    finally:
        os.close(fd)


def gid_str(addr):
    """The 8-group GID string pyverbs takes for an IPv6 or IPv4 address (IPv4-mapped)."""
    ip = ipaddress.ip_address(addr)
    if ip.version == 4:
        ip = ipaddress.IPv6Address('::ffff:' + addr)
    # Not .exploded: newer Pythons write IPv4-mapped addresses with a dotted tail.
    return ':'.join(ip.packed[i:i + 2].hex() for i in range(0, 16, 2))


def gid(addr):
    from pyverbs.addr import GID
    return GID(gid_str(addr))


def gid_index(ctx, addr, port=1, limit=16):
    """Index of the GID of `addr` in the device's port table, or None."""
    want = ipaddress.IPv6Address(gid_str(addr))
    for i in range(limit):
        try:
            g = ctx.query_gid(port, i)
        except Exception:
            continue
        try:
            if ipaddress.IPv6Address(str(g.gid)) == want:
                return i
        except ValueError:
            continue
    return None


# --- host self-test ---------------------------------------------------------------------

def _selftest(testdata):
    """Checks ICRC, parsing and re-encoding against packets rdma_rxe sent
    (IPv4), and IPv4/IPv6 consistency of the two ICRC paths."""
    lines = [l.strip() for l in open(testdata) if l.strip()]
    assert len(lines) >= 10, 'too few test vectors'
    ops = set()
    for line in lines:
        ip_pkt = bytes.fromhex(line)
        trailer = int.from_bytes(ip_pkt[-4:], 'little')
        assert icrc_of_ip_packet(ip_pkt) == trailer, f'ICRC of {line[:60]}'
        # The builder path: the headers the kernel would put in front, from the packet's own fields.
        src, dst = socket.inet_ntoa(ip_pkt[12:16]), socket.inet_ntoa(ip_pkt[16:20])
        ip_id, frag = struct.unpack('!HH', ip_pkt[4:8])
        sport, dport = struct.unpack('!HH', ip_pkt[20:24])
        udp = ip_pkt[28:]
        assert icrc(udp[:-4], src, dst, sport, dport, ip_id=ip_id, df=bool(frag & 0x4000)) == ip_pkt[-4:], 'builder ICRC'
        p = parse(udp)
        assert p is not None, 'parse'
        ops.add(p.opcode)
        again = packet(p.opcode, p.qpn, p.psn, p.payload, feth_=p.feth, reth_=p.reth, aeth_=p.aeth, deth_=p.deth, atmeth_=p.atmeth,
                       atmack=p.atmack or 0, imm=p.imm or 0, ieth=p.ieth or 0, pad=p.pad, se=p.se, mig=p.mig,
                       pkey=p.pkey, tver=p.tver, fecn=p.fecn, becn=p.becn, ack_req=p.ack_req, resv8a=udp[4] & 0x3f,
                       resv7=udp[8] & 0x7f)
        # Pad bytes on the wire are zero in rxe's packets.
        assert again == udp[:-4], f're-encoding {p}'
        bad = bytearray(ip_pkt)
        bad[-5] ^= 1
        assert icrc_of_ip_packet(bytes(bad)) != trailer
    assert {SEND_FIRST, SEND_MIDDLE, SEND_LAST, ACKNOWLEDGE} <= ops, ops
    # Both ICRC paths agree for IPv6 and IPv4, whatever the masked fields hold.
    rng = random.Random(1)
    for ver in (4, 6):
        for _ in range(50):
            pl = packet(rng.choice((RC | SEND_ONLY, RC | WRITE_ONLY, UD | SEND_ONLY_IMM, RC | ACKNOWLEDGE)),
                        rng.getrandbits(24), rng.getrandbits(24), rng.randbytes(rng.randrange(0, 64)),
                        becn=rng.random() < 0.5)
            if ver == 4:
                s, d = '198.18.0.1', '198.18.0.2'
                udp_len = 8 + len(pl) + 4
                iph = struct.pack('!BBHHHBBH4s4s', 0x45, rng.getrandbits(8), 20 + udp_len, 0, 0x4000, rng.getrandbits(8),
                                  17, rng.getrandbits(16), socket.inet_aton(s), socket.inet_aton(d))
            else:
                s, d = 'fd72:6f63:6501::1', 'fd72:6f63:6501::2'
                udp_len = 8 + len(pl) + 4
                iph = struct.pack('!IHBB16s16s', 0x60000000 | rng.getrandbits(28), udp_len, 17, rng.getrandbits(8),
                                  ipaddress.ip_address(s).packed, ipaddress.ip_address(d).packed)
            udph = struct.pack('!HHHH', ROCE_PORT, ROCE_PORT, udp_len, rng.getrandbits(16))
            c = icrc(pl, s, d)
            assert icrc_of_ip_packet(iph + udph + pl + c) == int.from_bytes(c, 'little'), f'IPv{ver} paths differ'
    # Parser bounds: no exception on any prefix or random junk.
    for n in range(0, 80):
        parse(bytes(n))
        parse(rng.randbytes(n))
    print(f'roce.py: {len(lines)} rdma_rxe packets (opcodes {sorted(ops)}) verified; IPv4/IPv6 ICRC paths agree')


if __name__ == '__main__':
    import sys
    _selftest(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '../rust/proto/testdata/rxe-packets.hex'))
