"""A minimal raw uverbs client for rroce's selftests: the legacy write()
command ABI of <rdma/ib_user_verbs.h> on /dev/infiniband/uverbsN, the
driver data of <rdma/rdma_user_rxe.h>, and the rings the driver maps into
the process (mmap of the command fd at mminfo.offset).

It exists so tests can do what libibverbs never does: write any byte of a
command, a ring header or a WQE, at any time. Layouts are x86-64 and were
checked against the kernel headers (sizes in _SIZES, asserted at import).
Errors come back as OSError with the kernel's errno."""
import ctypes
import glob
import mmap
import os
import struct
import time
from collections import namedtuple

# Command numbers (enum ib_uverbs_write_cmds).
GET_CONTEXT, QUERY_PORT, ALLOC_PD, DEALLOC_PD = 0, 2, 3, 4
CREATE_AH, DESTROY_AH = 5, 8
REG_MR, REREG_MR, DEREG_MR = 9, 11, 13
ALLOC_MW, DEALLOC_MW = 14, 16
CREATE_CQ, DESTROY_CQ, REQ_NOTIFY_CQ = 18, 20, 23
CREATE_QP, QUERY_QP, MODIFY_QP, DESTROY_QP, POST_SEND = 24, 25, 26, 27, 28
CREATE_SRQ, DESTROY_SRQ = 32, 35
ATTACH_MCAST, DETACH_MCAST = 30, 31

# Access rights (IB_UVERBS_ACCESS_*) and rereg flags (IB_MR_REREG_*).
LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC = 1, 2, 4, 8
MW_BIND, ZERO_BASED, ON_DEMAND = 16, 32, 64
REREG_TRANS, REREG_PD, REREG_ACCESS = 1, 2, 4

# QP types, states, path MTUs and modify masks (enum ib_qp_attr_mask).
QPT_RC, QPT_UC, QPT_UD = 2, 3, 4
RESET, INIT, RTR, RTS, SQD, SQE, ERR = range(7)
MTU_256, MTU_512, MTU_1024, MTU_2048, MTU_4096 = 1, 2, 3, 4, 5
QP_STATE, QP_CUR_STATE, QP_ACCESS_FLAGS, QP_PKEY_INDEX = 1, 2, 8, 16
QP_PORT, QP_QKEY, QP_AV, QP_PATH_MTU, QP_TIMEOUT = 32, 64, 128, 256, 512
QP_RETRY_CNT, QP_RNR_RETRY, QP_RQ_PSN, QP_MAX_QP_RD_ATOMIC = 1 << 10, 1 << 11, 1 << 12, 1 << 13
QP_MIN_RNR_TIMER, QP_SQ_PSN, QP_MAX_DEST_RD_ATOMIC, QP_DEST_QPN = 1 << 15, 1 << 16, 1 << 17, 1 << 20

# Send opcodes (IB_UVERBS_WR_*) and flags (IB_SEND_*).
WR_RDMA_WRITE, WR_RDMA_WRITE_IMM, WR_SEND, WR_SEND_IMM, WR_RDMA_READ = 0, 1, 2, 3, 4
WR_CMP_SWP, WR_FETCH_ADD, WR_LOCAL_INV, WR_BIND_MW, WR_SEND_INV = 5, 6, 7, 8, 9
WR_TSO, WR_FLUSH, WR_ATOMIC_WRITE = 10, 14, 15
SEND_FENCE, SEND_SIGNALED, SEND_SOLICITED, SEND_INLINE = 1, 2, 4, 8

# Completion status codes (enum ib_wc_status) used by the tests.
WC_SUCCESS, WC_LOC_LEN_ERR, WC_LOC_QP_OP_ERR, WC_LOC_PROT_ERR, WC_WR_FLUSH_ERR = 0, 1, 2, 4, 5
WC_REM_INV_REQ_ERR, WC_REM_ACCESS_ERR, WC_REM_OP_ERR, WC_RETRY_EXC_ERR = 9, 10, 11, 12
WC_RNR_RETRY_EXC_ERR, WC_GENERAL_ERR = 13, 21
WC_RECV = 128

# The ioctl ABI (<rdma/rdma_user_ioctl_cmds.h>): _IOWR(0x1b, 1, 24-byte
# header), then 16-byte attributes; UVERBS_OBJECT_MR's ADVISE_MR method.
RDMA_VERBS_IOCTL = 0xC0181B01
DRIVER_RXE = 14                       # enum rdma_driver_id: the header must name the device's driver
OBJECT_MR, METHOD_ADVISE_MR = 7, 2
ADVISE_PREFETCH, ADVISE_PREFETCH_WRITE, ADVISE_PREFETCH_NO_FAULT = 0, 1, 2
ADVISE_FLAG_FLUSH = 1

# Byte layouts, x86-64. Sizes checked against the uapi headers with a C program.
HDR = '=IHH'                          # struct ib_uverbs_cmd_hdr
MMINFO = '=QII'                       # struct mminfo
F_QUERY_PORT = '=B7x'                 # ib_uverbs_query_port after `response`
F_QUERY_PORT_RESP = '=5I3H14B'
F_REG_MR = '=QQQII'
F_REG_MR_RESP = '=III'
F_REREG_MR = '=IIQQQII'
F_REREG_MR_RESP = '=II'
F_CREATE_CQ = '=QIIiI'
F_CREATE_CQ_RESP = '=II'
F_CREATE_QP = '=QIIIIIIIIIBBBB'
F_CREATE_QP_RESP = '=8I'
F_QP_DEST = '=16sIHHBBBBBBBB'         # struct ib_uverbs_qp_dest
F_MODIFY_QP_TAIL = '=7I2H14B2x'       # ib_uverbs_modify_qp after dest and alt_dest
F_AH_ATTR = '=16sIBBBBHBBBBBB'        # struct ib_uverbs_ah_attr
F_CREATE_SRQ = '=QIIII'
F_CREATE_SRQ_RESP = '=4I'
F_WC = '=QIIIIIIIIHHBBBB'             # struct ib_uverbs_wc
_SIZES = {HDR: 8, MMINFO: 16, F_QUERY_PORT: 8, F_QUERY_PORT_RESP: 40, F_REG_MR: 32, F_REG_MR_RESP: 12,
          F_REREG_MR: 40, F_REREG_MR_RESP: 8, F_CREATE_CQ: 24, F_CREATE_CQ_RESP: 8, F_CREATE_QP: 48,
          F_CREATE_QP_RESP: 32, F_QP_DEST: 32, F_MODIFY_QP_TAIL: 48, F_AH_ATTR: 32, F_CREATE_SRQ: 24,
          F_CREATE_SRQ_RESP: 16, F_WC: 48}
for _f, _n in _SIZES.items():
    assert struct.calcsize(_f) == _n, (_f, struct.calcsize(_f), _n)
SEND_WR_BYTES = 56                    # sizeof(struct ib_uverbs_send_wr): the doorbell's wqe_size
QUERY_QP_RESP_BYTES, QUERY_QP_STATE_AT = 128, 108

# The rxe ring format (struct rxe_queue_buf) and WQE offsets (rdma_user_rxe.h).
RING_HDR_BYTES, RING_PRODUCER, RING_CONSUMER = 384, 128, 256
SWQE_HDR_BYTES, RWQE_HDR_BYTES, SGE_BYTES = 208, 40, 16
SWQE_OPCODE, SWQE_FLAGS, SWQE_IMM, SWQE_RADDR, SWQE_RKEY = 12, 16, 20, 24, 32
SWQE_UD_QPN, SWQE_UD_QKEY, SWQE_UD_AH = 24, 28, 36
SWQE_ATOMIC_RKEY, SWQE_IOVA = 48, 152
SWQE_MW = 24                          # wr.mw: addr, length (u64), mr_lkey, mw_rkey, rkey, access
SWQE_DMA_LENGTH, SWQE_DMA_RESID, SWQE_NUM_SGE, SWQE_SGES = 184, 188, 196, 208
RWQE_DMA_LENGTH, RWQE_NUM_SGE, RWQE_SGES = 16, 28, 40

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_MAP_FAILED = ctypes.c_void_p(-1).value


class Mapping:
    """Memory mapped with libc mmap(), so its address can go into commands
    and WQEs. Word accesses are single 4-byte loads and stores."""

    def __init__(self, length, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                 flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, fd=-1, offset=0):
        addr = _libc.mmap(None, length, prot, flags, fd, offset)
        if addr in (None, _MAP_FAILED):
            e = ctypes.get_errno()
            raise OSError(e, f'mmap: {os.strerror(e)}')
        self.addr, self.length = addr, length

    def read(self, off, n):
        return ctypes.string_at(self.addr + off, n)

    def write(self, off, data):
        ctypes.memmove(self.addr + off, bytes(data), len(data))

    def u32(self, off):
        return ctypes.c_uint32.from_address(self.addr + off).value

    def set_u32(self, off, v):
        ctypes.c_uint32.from_address(self.addr + off).value = v & 0xffffffff

    def close(self):
        if self.addr is not None:
            _libc.munmap(self.addr, self.length)
            self.addr = None


class Ring:
    """A mapped rxe ring. The geometry is read once at creation, so later
    scribbles on the header do not change where this side puts slots."""

    def __init__(self, ctx, mi):
        offset, size, _ = mi
        self.map = Mapping(size, flags=mmap.MAP_SHARED, fd=ctx.fd, offset=offset)
        self.log2 = self.map.u32(0)
        self.mask = self.map.u32(4)
        self.elem = 1 << self.log2

    producer = property(lambda s: s.map.u32(RING_PRODUCER), lambda s, v: s.map.set_u32(RING_PRODUCER, v))
    consumer = property(lambda s: s.map.u32(RING_CONSUMER), lambda s, v: s.map.set_u32(RING_CONSUMER, v))

    def slot_off(self, i):
        return RING_HDR_BYTES + ((i & self.mask) << self.log2)

    def read_slot(self, i, n=None):
        return self.map.read(self.slot_off(i), self.elem if n is None else min(n, self.elem))

    def write_slot(self, i, data):
        self.map.write(self.slot_off(i), bytes(data[:self.elem]))

    def post(self, data):
        """Appends an entry as an honest producer; False if the ring is full."""
        p, c = self.producer & self.mask, self.consumer & self.mask
        if (p + 1 - c) & self.mask == 0:
            return False
        self.write_slot(p, data)
        self.producer = (p + 1) & self.mask
        return True

    def close(self):
        self.map.close()


CQ = namedtuple('CQ', 'handle cqe ring')
QP = namedtuple('QP', 'handle qpn qp_type max_send_wr max_recv_wr max_send_sge max_recv_sge max_inline sq rq')
SRQ = namedtuple('SRQ', 'handle srqn max_wr max_sge ring')
Wc = namedtuple('Wc', 'wr_id status opcode vendor_err byte_len imm qp_num src_qp wc_flags pkey_index slid sl dlid_path_bits port_num reserved')


def find_uverbs(ibdev, wait=30):
    """/dev/infiniband/uverbsN of an RDMA device, waiting for it to appear.
    ib_uverbs must be loaded (libibverbs gets it loaded through its netlink
    char device query; without libibverbs, modprobe it)."""
    end = time.time() + wait
    while True:
        for d in glob.glob('/sys/class/infiniband_verbs/uverbs*'):
            try:
                with open(os.path.join(d, 'ibdev')) as f:
                    if f.read().strip() == ibdev:
                        path = '/dev/infiniband/' + os.path.basename(d)
                        if os.path.exists(path):
                            return path
            except OSError:
                pass
        if time.time() > end:
            raise FileNotFoundError(f'no uverbs device for {ibdev}')
        time.sleep(0.2)


def gid_of(ibdev, ipv4=True):
    """(index, 16-byte GID) of the port's first RoCEv2 GID, IPv4-mapped if asked."""
    base = f'/sys/class/infiniband/{ibdev}/ports/1'
    for i in range(16):
        try:
            with open(f'{base}/gids/{i}') as f:
                g = bytes.fromhex(f.read().strip().replace(':', ''))
            with open(f'{base}/gid_attrs/types/{i}') as f:
                t = f.read().strip()
        except OSError:
            continue
        if g == bytes(16) or 'v2' not in t:
            continue
        if ipv4 == (g[:12] == bytes(10) + b'\xff\xff'):
            return i, g
    raise LookupError(f'no RoCEv2 GID on {ibdev}')


def send_wqe(wr_id=0, opcode=WR_SEND, flags=SEND_SIGNALED, sges=(), imm=0, raddr=0, rkey=0,
             ud=None, inline=None, length=None, num_sge=None):
    """A struct rxe_send_wqe as the rxe provider writes it. `sges` are
    (addr, length, lkey); `ud` is (remote_qpn, qkey, ah_num); `inline` is
    the payload of an inline send; `length`/`num_sge` override the
    computed dma fields."""
    body = bytes(inline) if inline is not None else b''.join(struct.pack('=QII', *s) for s in sges)
    b = bytearray(SWQE_HDR_BYTES + len(body))
    if inline is not None:
        flags |= SEND_INLINE
    struct.pack_into('=QIIII', b, 0, wr_id, 0, opcode, flags, imm)
    if ud is not None:
        struct.pack_into('=II', b, SWQE_UD_QPN, ud[0], ud[1])
        struct.pack_into('=I', b, SWQE_UD_AH, ud[2])
    else:
        struct.pack_into('=QI', b, SWQE_RADDR, raddr, rkey)
        struct.pack_into('=Q', b, SWQE_IOVA, raddr)
    total = len(body) if inline is not None else sum(s[1] for s in sges) & 0xffffffff
    total = total if length is None else length
    n = len(sges) if num_sge is None else num_sge
    struct.pack_into('=IIII', b, SWQE_DMA_LENGTH, total, total, 0, n)
    b[SWQE_SGES:] = body
    return bytes(b)


def recv_wqe(wr_id=0, sges=(), num_sge=None, length=None):
    """A struct rxe_recv_wqe with its SGEs."""
    body = b''.join(struct.pack('=QII', *s) for s in sges)
    total = sum(s[1] for s in sges) & 0xffffffff if length is None else length
    return struct.pack('=QII', wr_id, 0, 0) + struct.pack('=IIIIII', total, total, 0,
                                                          len(sges) if num_sge is None else num_sge, 0, 0) + body


class FailNth:
    """Arms the kernel's fail-nth fault injection for exactly one system
    call (Context.around_next_command) and tells whether the failure was
    injected (the counter ran out) or the call made fewer allocations than
    that."""

    def __init__(self):
        self.fd = os.open('/proc/thread-self/fail-nth', os.O_RDWR)
        self.injected = None

    def around(self, nth):
        def run(call):
            os.write(self.fd, b'%d' % nth)
            try:
                call()
            finally:
                left = int(os.pread(self.fd, 16, 0))
                os.write(self.fd, b'0')
                self.injected = left == 0
        return run


def parse_wc(b):
    return Wc(*struct.unpack_from(F_WC, b))


class Context:
    """An open uverbs file with a user context (GET_CONTEXT)."""

    def __init__(self, ibdev):
        self.ibdev = ibdev
        self.fd = os.open(find_uverbs(ibdev), os.O_RDWR | os.O_CLOEXEC)
        # Called around the next command's write (test_alloc_failures arms
        # fault injection for exactly that system call); None: nothing.
        self.around_next_command = None
        try:
            self.async_fd, self.num_comp_vectors = struct.unpack('=II', self.command(GET_CONTEXT, b'', 8))
        except OSError:
            os.close(self.fd)
            raise

    def close(self):
        """Closing the file destroys everything left in the context."""
        if self.fd is not None:
            os.close(self.async_fd)
            os.close(self.fd)
            self.fd = None

    def command(self, cmd, fields, resp_len=0, drv_out=0, drv_in=b''):
        """Writes one command. Commands with a response start with the
        address of the response buffer (core part, then `drv_out` bytes of
        driver data); returns the response bytes. OSError on failure."""
        body = bytes(fields) + bytes(drv_in)
        buf = None
        if resp_len or drv_out:
            buf = ctypes.create_string_buffer(resp_len + drv_out)
            body = struct.pack('=Q', ctypes.addressof(buf)) + body
        total = struct.calcsize(HDR) + len(body)
        assert total % 4 == 0 and (resp_len + drv_out) % 4 == 0
        msg = struct.pack(HDR, cmd, total // 4, (resp_len + drv_out) // 4) + body
        around, self.around_next_command = self.around_next_command, None
        if around is None:
            os.write(self.fd, msg)
        else:
            around(lambda: os.write(self.fd, msg))
        return buf.raw if buf is not None else b''

    # Ports, PDs, MRs.
    def query_port(self, port=1):
        return struct.unpack(F_QUERY_PORT_RESP, self.command(QUERY_PORT, struct.pack(F_QUERY_PORT, port), 40))

    def alloc_pd(self):
        return struct.unpack('=I', self.command(ALLOC_PD, b'', 4))[0]

    def dealloc_pd(self, pd):
        self.command(DEALLOC_PD, struct.pack('=I', pd))

    def reg_mr(self, pd, addr, length, access, iova=None):
        """Returns (mr_handle, lkey, rkey)."""
        iova = addr if iova is None else iova
        return struct.unpack(F_REG_MR_RESP, self.command(REG_MR, struct.pack(F_REG_MR, addr, length, iova, pd, access), 12))

    def rereg_mr(self, mr, flags, pd=0, addr=0, length=0, access=0, iova=None):
        """Returns the (lkey, rkey) the MR has afterwards."""
        iova = addr if iova is None else iova
        f = struct.pack(F_REREG_MR, mr, flags, addr, length, iova, pd, access)
        return struct.unpack(F_REREG_MR_RESP, self.command(REREG_MR, f, 8))

    def dereg_mr(self, mr):
        self.command(DEREG_MR, struct.pack('=I', mr))

    def advise_mr(self, pd, advice, flags, sges):
        """ibv_advise_mr through the ioctl ABI (rdma-core's rxe provider
        never calls it); `sges` are (addr, length, lkey)."""
        import fcntl
        arr = ctypes.create_string_buffer(b''.join(struct.pack('=QII', *sge) for sge in sges) or bytes(16))
        attr = '=HHHHQ'                   # attr_id, len, flags, reserved, data
        attrs = (struct.pack(attr, 0, 0, 0, 0, pd) +                      # PD handle (IDR)
                 struct.pack(attr, 1, 8, 0, 0, advice) +                  # advice (const, inline)
                 struct.pack(attr, 2, 4, 0, 0, flags) +                   # flags (inline u32)
                 struct.pack(attr, 3, 16 * len(sges), 0, 0, ctypes.addressof(arr)))
        hdr = struct.pack('=HHHHQII', 24 + len(attrs), OBJECT_MR, METHOD_ADVISE_MR, 4, 0, DRIVER_RXE, 0)
        fcntl.ioctl(self.fd, RDMA_VERBS_IOCTL, bytearray(hdr + attrs))

    # Memory windows (struct ib_uverbs_alloc_mw: pd_handle, mw_type, 3 reserved bytes).
    def alloc_mw(self, pd, mw_type):
        """Returns (mw_handle, rkey)."""
        return struct.unpack('=II', self.command(ALLOC_MW, struct.pack('=IB3x', pd, mw_type), 8))

    def dealloc_mw(self, mw):
        self.command(DEALLOC_MW, struct.pack('=I', mw))

    # Completion queues.
    def create_cq(self, cqe, user_handle=0):
        r = self.command(CREATE_CQ, struct.pack(F_CREATE_CQ, user_handle, cqe, 0, -1, 0), 8, 16)
        handle, real = struct.unpack_from(F_CREATE_CQ_RESP, r)
        return CQ(handle, real, Ring(self, struct.unpack_from(MMINFO, r, 8)))

    def destroy_cq(self, cq, unmap=True):
        self.command(DESTROY_CQ, struct.pack('=II', cq.handle, 0), 8)
        if unmap:
            cq.ring.close()

    def req_notify_cq(self, cq, solicited_only=0):
        self.command(REQ_NOTIFY_CQ, struct.pack('=II', cq.handle, solicited_only))

    def poll_cq(self, cq, max_n=64):
        """Takes completions off the CQ ring as the rxe provider does."""
        r, out = cq.ring, []
        c = r.consumer & r.mask
        while len(out) < max_n and c != (r.producer & r.mask):
            out.append(parse_wc(r.read_slot(c, 48)))
            c = (c + 1) & r.mask
            r.consumer = c
        return out

    def wait_wcs(self, cq, n, secs=10):
        """Polls until `n` completions arrived or `secs` passed."""
        got, end = [], time.time() + secs
        while len(got) < n and time.time() < end:
            w = self.poll_cq(cq, n - len(got))
            got += w
            if not w:
                time.sleep(0.005)
        return got

    # Queue pairs.
    def create_qp(self, pd, send_cq, recv_cq, qp_type=QPT_RC, max_send_wr=16, max_recv_wr=16,
                  max_send_sge=1, max_recv_sge=1, max_inline=0, sq_sig_all=0, srq=None):
        f = struct.pack(F_CREATE_QP, 0, pd, send_cq.handle, recv_cq.handle, srq.handle if srq else 0,
                        max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline, sq_sig_all,
                        qp_type, 1 if srq else 0, 0)
        r = self.command(CREATE_QP, f, 32, 32)
        h, qpn, msw, mrw, mss, mrs, mi, _ = struct.unpack_from(F_CREATE_QP_RESP, r)
        rq_mi, sq_mi = struct.unpack_from(MMINFO, r, 32), struct.unpack_from(MMINFO, r, 48)
        rq = Ring(self, rq_mi) if rq_mi[1] else None
        return QP(h, qpn, qp_type, msw, mrw, mss, mrs, mi, Ring(self, sq_mi), rq)

    def destroy_qp(self, qp, unmap=True):
        self.command(DESTROY_QP, struct.pack('=II', qp.handle, 0), 4)
        if unmap:
            qp.sq.close()
            if qp.rq:
                qp.rq.close()

    def query_qp_state(self, qp):
        r = self.command(QUERY_QP, struct.pack('=II', qp.handle, QP_STATE), QUERY_QP_RESP_BYTES)
        return r[QUERY_QP_STATE_AT]

    def modify_qp(self, qp, mask, state=0, cur_state=0, path_mtu=0, qkey=0, rq_psn=0, sq_psn=0,
                  dest_qpn=0, access=0, pkey_index=0, port=0, max_rd_atomic=0, max_dest_rd_atomic=0,
                  min_rnr_timer=0, timeout=0, retry_cnt=0, rnr_retry=0, dgid=None, sgid_index=0,
                  hop_limit=64, traffic_class=0, flow_label=0):
        dest = struct.pack(F_QP_DEST, dgid or bytes(16), flow_label, 0, 0, sgid_index, hop_limit,
                           traffic_class, 0, 0, 0, 1, 1)
        tail = struct.pack(F_MODIFY_QP_TAIL, qp.handle, mask, qkey, rq_psn, sq_psn, dest_qpn, access,
                           pkey_index, 0, state, cur_state, path_mtu, 0, 0, max_rd_atomic,
                           max_dest_rd_atomic, min_rnr_timer, port, timeout, retry_cnt, rnr_retry, 0, 0)
        self.command(MODIFY_QP, dest + bytes(32) + tail)

    def connect(self, qp, remote_qpn, dgid, sgid_index, access=LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ,
                psn=0, mtu=MTU_1024, timeout=14, retry_cnt=7, rnr_retry=7, min_rnr_timer=1, rd_atomic=4):
        """RESET -> INIT -> RTR -> RTS of an RC or UC QP towards `remote_qpn`."""
        self.modify_qp(qp, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS, state=INIT, port=1, access=access)
        m = QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN
        if qp.qp_type == QPT_RC:
            m |= QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER
        self.modify_qp(qp, m, state=RTR, path_mtu=mtu, dest_qpn=remote_qpn, rq_psn=psn,
                       max_dest_rd_atomic=rd_atomic, min_rnr_timer=min_rnr_timer, dgid=dgid, sgid_index=sgid_index)
        m = QP_STATE | QP_SQ_PSN
        if qp.qp_type == QPT_RC:
            m |= QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_MAX_QP_RD_ATOMIC
        self.modify_qp(qp, m, state=RTS, sq_psn=psn, timeout=timeout, retry_cnt=retry_cnt,
                       rnr_retry=rnr_retry, max_rd_atomic=rd_atomic)

    def ud_ready(self, qp, qkey, psn=0):
        """RESET -> INIT -> RTR -> RTS of a UD QP."""
        self.modify_qp(qp, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_QKEY, state=INIT, port=1, qkey=qkey)
        self.modify_qp(qp, QP_STATE, state=RTR)
        self.modify_qp(qp, QP_STATE | QP_SQ_PSN, state=RTS, sq_psn=psn)

    def doorbell(self, qp):
        """The rxe provider's send doorbell: POST_SEND with no work requests."""
        self.command(POST_SEND, struct.pack('=IIII', qp.handle, 0, 0, SEND_WR_BYTES), 4)

    def post_send(self, qp, wqe, ring=True):
        if not qp.sq.post(wqe):
            raise OSError(12, 'send queue full')
        if ring:
            self.doorbell(qp)

    # Multicast (struct ib_uverbs_attach_mcast: gid, qp_handle, mlid, reserved).
    def attach_mcast(self, qp, gid, lid=0):
        self.command(ATTACH_MCAST, struct.pack('=16sIHH', bytes(gid), qp.handle, lid, 0))

    def detach_mcast(self, qp, gid, lid=0):
        self.command(DETACH_MCAST, struct.pack('=16sIHH', bytes(gid), qp.handle, lid, 0))

    def post_recv(self, qp, wqe):
        if not qp.rq.post(wqe):
            raise OSError(12, 'receive queue full')

    # Address handles and SRQs.
    def create_ah(self, pd, dgid, sgid_index, port=1):
        """Returns (ah_handle, ah_num)."""
        attr = struct.pack(F_AH_ATTR, dgid, 0, sgid_index, 64, 0, 0, 0, 0, 0, 0, 1, port, 0)
        r = self.command(CREATE_AH, struct.pack('=QII', 0, pd, 0) + attr, 4, 8)
        return struct.unpack_from('=II', r)

    def destroy_ah(self, ah):
        self.command(DESTROY_AH, struct.pack('=I', ah))

    def create_srq(self, pd, max_wr=16, max_sge=1, srq_limit=0):
        r = self.command(CREATE_SRQ, struct.pack(F_CREATE_SRQ, 0, pd, max_wr, max_sge, srq_limit), 16, 24)
        h, mw, ms, srqn = struct.unpack_from(F_CREATE_SRQ_RESP, r)
        return SRQ(h, srqn, mw, ms, Ring(self, struct.unpack_from(MMINFO, r, 16)))

    def destroy_srq(self, srq, unmap=True):
        self.command(DESTROY_SRQ, struct.pack('=II', srq.handle, 0), 4)
        if unmap:
            srq.ring.close()
