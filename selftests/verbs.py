"""Helpers shared by rroce's Python selftests: KTAP result lines numbered
in the sequence of the calling test script, opening both devices of the
two-namespace topology, bringing an RC QP up to RTS against a peer, and
waiting for completions."""
import errno
import os
import time
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPAttr
import pyverbs.enums as e


def ktap_result(kind):
    """Records a result (pass, fail or skip) in the test script's KTAP_RESULTS
    file (selftests/lib.sh) and returns its number; counts alone without one."""
    path = os.environ.get('KTAP_RESULTS')
    if path:
        try:
            with open(path, 'a') as f:
                f.write(kind + '\n')
            with open(path) as f:
                return sum(1 for _ in f)
        except OSError as ex:
            # The line is still printed (and counted by the runner); only
            # its number is this process's own.
            print(f'# cannot record in {path}: {ex}', flush=True)
    ktap_result.alone = getattr(ktap_result, 'alone', 0) + 1
    return ktap_result.alone


def ktap_line(kind, suite, what, why=''):
    """Prints one KTAP result line: ok / not ok / ok ... # SKIP why."""
    n = ktap_result(kind)
    what = what.replace('#', 'no.')
    if kind == 'skip':
        print(f'ok {n} {suite}: {what} # SKIP {why}', flush=True)
    else:
        print(f'{"ok" if kind == "pass" else "not ok"} {n} {suite}: {what}', flush=True)


def _stopped_early(kind, value, tb):
    """An exception that ends a script between its checks is a failed check
    of its own: the checks after it never ran."""
    import traceback
    traceback.print_exception(kind, value, tb)
    if _stopped_early.suite and not issubclass(kind, KeyboardInterrupt):
        ktap_line('fail', _stopped_early.suite, f'checks stopped early: {kind.__name__}: {value}')


_stopped_early.suite = None


class Checks:
    """Prints one KTAP result line per check."""

    def __init__(self, suite):
        import sys
        self.suite = suite
        _stopped_early.suite = suite
        sys.excepthook = _stopped_early

    def ok(self, what, cond, detail=''):
        extra = f' ({detail})' if detail != '' and not cond else ''
        ktap_line('pass' if cond else 'fail', self.suite, what + extra)

    def skip(self, what, why):
        ktap_line('skip', self.suite, what, why)

    def fails(self, what, fn, code=None):
        """Passes when fn() raises an RDMA error (with errno `code`, if given)."""
        try:
            fn()
        except PyverbsRDMAError as ex:
            good = code is None or ex.error_code == code
            self.ok(what, good, f'errno {ex.error_code}')
            return
        self.ok(what, False, 'succeeded')


def ipv4_gid_index(ctx):
    """Index of the device's IPv4-mapped GID."""
    for i in range(16):
        if ctx.query_gid(1, i).gid.startswith('0000:0000:0000:0000:0000:ffff:'):
            return i
    raise RuntimeError('no IPv4 GID')


def open_devices(names=('rroce-a', 'rroce-b')):
    """Each device of the topology, opened from this process (verbs devices
    are visible in every namespace): name -> (context, PD, IPv4 GID index,
    that GID)."""
    from pyverbs.device import Context
    from pyverbs.pd import PD
    side = {}
    for name in names:
        ctx = Context(name=name)
        idx = ipv4_gid_index(ctx)
        side[name] = (ctx, PD(ctx), idx, ctx.query_gid(1, idx))
    return side


def connect_rc(qp, peer_qpn, dgid, access, psn=0, sgid_index=1, rnr_retry=7, retry_cnt=7, timeout=14,
               min_rnr_timer=1, rd_atomic=16, path_mtu=e.IBV_MTU_1024):
    """RESET -> INIT -> RTR -> RTS for an RC QP talking to `peer_qpn` at `dgid`
    (path MTU 1024 unless given, both PSNs `psn`)."""
    a = QPAttr(qp_state=e.IBV_QPS_INIT)
    a.pkey_index = 0
    a.port_num = 1
    a.qp_access_flags = access
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    r = QPAttr(qp_state=e.IBV_QPS_RTR)
    r.path_mtu = path_mtu
    r.dest_qp_num = peer_qpn
    r.rq_psn = psn
    r.max_dest_rd_atomic = rd_atomic
    r.min_rnr_timer = min_rnr_timer
    r.ah_attr = AHAttr(gr=GlobalRoute(dgid=dgid, sgid_index=sgid_index), is_global=1, port_num=1)
    for attempt in range(3):
        try:
            qp.modify(r, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN
                      | e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
            break
        except PyverbsRDMAError as ex:
            # ETIMEDOUT is the RDMA core's, not the driver's: it resolves the
            # peer's MAC address (ARP, neighbour discovery) within 1 s, which
            # a guest its host holds up can miss. The QP is still in INIT.
            if ex.error_code != errno.ETIMEDOUT or attempt == 2:
                raise
    t = QPAttr(qp_state=e.IBV_QPS_RTS)
    t.sq_psn = psn
    t.timeout = timeout
    t.retry_cnt = retry_cnt
    t.rnr_retry = rnr_retry
    t.max_rd_atomic = rd_atomic
    qp.modify(t, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT
              | e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)


def wait_wcs(cq, n, secs=10):
    """Polls `cq` until `n` completions arrived or `secs` passed; returns them."""
    got = []
    end = time.time() + secs
    while len(got) < n and time.time() < end:
        k, w = cq.poll(16)
        got += w
        if k == 0:
            time.sleep(0.01)
    return got


def async_event_fds():
    """The process's uverbs async event descriptors, one per open context."""
    fds = set()
    for name in os.listdir('/proc/self/fd'):
        try:
            if os.readlink(f'/proc/self/fd/{name}') == 'anon_inode:[infinibandevent]':
                fds.add(int(name))
        except OSError:
            pass
    return fds


def async_event(ctx, secs=10):
    """The type of the next asynchronous event of `ctx`, or None if none came
    within `secs`. Waits on the context's event file without pyverbs, whose
    ibv_get_async_event blocks holding the GIL: it is called only once an
    event is there. (Assumes the process has no other open verbs context.)"""
    import select
    ready, _, _ = select.select(list(async_event_fds()), [], [], secs)
    if not ready:
        return None
    ev = ctx.get_async_event()
    ev.ack()
    return ev.event_type
