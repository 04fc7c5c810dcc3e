#!/usr/bin/env python3
"""Where the guest's kernel spends its CPU time, without perf(1).

Samples every CPU on its cpu-clock (a software event, so it works under
TCG) through perf_event_open, kernel side only, with call chains, and
names the addresses from /proc/kallsyms (module symbols included; rroce's
Rust names are shortened to their last path segments). `Profiler` is what
bench.py --profile wraps around each client; run as a script it profiles a
command:

    kprofile.py [--top N] -- COMMAND...

Self: samples whose innermost frame is the function. Total: samples with
the function anywhere in the chain (what it and its callees cost). Both
are shares of the busy samples: those of the idle loop are only counted.
"""
import argparse
import bisect
import collections
import ctypes
import mmap
import os
import re
import struct
import subprocess
import sys
import threading
import time

_NR_PERF_EVENT_OPEN = 298  # x86_64
_PERF_TYPE_SOFTWARE = 1
_PERF_COUNT_SW_CPU_CLOCK = 0
_PERF_SAMPLE_IP = 1 << 0
_PERF_SAMPLE_CALLCHAIN = 1 << 5
_ATTR_DISABLED = 1 << 0
_ATTR_EXCLUDE_USER = 1 << 4
_ATTR_EXCLUDE_HV = 1 << 6
_PERF_RECORD_LOST = 2
_PERF_RECORD_SAMPLE = 9
_PERF_CONTEXT_MAX = 2**64 - 4095  # call chain markers (PERF_CONTEXT_KERNEL...) are above
_KERNEL_START = 0xffff800000000000  # the chain goes on into user space; that part is left out
_PERF_EVENT_IOC_ENABLE = 0x2400
_PERF_EVENT_IOC_DISABLE = 0x2401
_DATA_PAGES = 64

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _Attr(ctypes.Structure):
    # struct perf_event_attr up to config2 (PERF_ATTR_SIZE_VER1), then padding.
    _fields_ = [('type', ctypes.c_uint32), ('size', ctypes.c_uint32), ('config', ctypes.c_uint64),
                ('sample_period', ctypes.c_uint64), ('sample_type', ctypes.c_uint64),
                ('read_format', ctypes.c_uint64), ('flags', ctypes.c_uint64),
                ('wakeup_events', ctypes.c_uint32), ('bp_type', ctypes.c_uint32),
                ('config1', ctypes.c_uint64), ('config2', ctypes.c_uint64)]


def _rust_short(name):
    """`_RNvNtCs1a_5rroce2rx6accept` -> `rx::accept`; other names as they are."""
    if not name.startswith('_R'):
        return name
    idents, i = [], 2
    while i < len(name):
        m = re.match(r'(\d+)_?', name[i:])
        if not m:
            i += 1
            continue
        n = int(m.group(1))
        start = i + m.end()
        ident = name[start:start + n]
        if n and re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', ident):
            idents.append(ident)
            i = start + n
        else:
            i += m.end()
    # Crate hashes and the crate name itself add nothing here.
    idents = [x for x in idents if x not in ('rroce', 'kernel', 'core', 'alloc')]
    return '::'.join(idents[-3:]) if idents else name


class Symbols:
    def __init__(self):
        addrs, names = [], []
        with open('/proc/kallsyms') as f:
            for line in f:
                p = line.split()
                if len(p) < 3 or p[1] not in 'tTwW':
                    continue
                a = int(p[0], 16)
                if a == 0:
                    continue
                mod = p[3] if len(p) > 3 else ''
                addrs.append(a)
                names.append(_rust_short(p[2]) + (f' {mod}' if mod else ''))
        order = sorted(range(len(addrs)), key=addrs.__getitem__)
        self.addrs = [addrs[i] for i in order]
        self.names = [names[i] for i in order]

    def name(self, ip):
        i = bisect.bisect_right(self.addrs, ip) - 1
        return self.names[i] if i >= 0 else hex(ip)


class _CpuStream:
    def __init__(self, cpu, period_ns):
        attr = _Attr(type=_PERF_TYPE_SOFTWARE, size=ctypes.sizeof(_Attr), config=_PERF_COUNT_SW_CPU_CLOCK,
                     sample_period=period_ns, sample_type=_PERF_SAMPLE_IP | _PERF_SAMPLE_CALLCHAIN,
                     flags=_ATTR_DISABLED | _ATTR_EXCLUDE_USER | _ATTR_EXCLUDE_HV)
        fd = _libc.syscall(_NR_PERF_EVENT_OPEN, ctypes.byref(attr), -1, cpu, -1, 0)
        if fd < 0:
            raise OSError(ctypes.get_errno(), f'perf_event_open on CPU {cpu}')
        self.fd = fd
        self.page = mmap.PAGESIZE
        self.size = _DATA_PAGES * self.page
        self.buf = mmap.mmap(fd, self.page + self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.pending = b''

    def drain(self, out):
        head = struct.unpack_from('Q', self.buf, 1024)[0]
        tail = struct.unpack_from('Q', self.buf, 1032)[0]
        if head == tail:
            return
        a, b = tail % self.size, head % self.size
        base = self.page
        if head - tail >= self.size or a >= b:
            data = self.buf[base + a:base + self.size] + self.buf[base:base + b]
        else:
            data = self.buf[base + a:base + b]
        struct.pack_into('Q', self.buf, 1032, head)
        data = self.pending + data
        off = 0
        while off + 8 <= len(data):
            rtype, _, size = struct.unpack_from('IHH', data, off)
            if size < 8 or off + size > len(data):
                break
            if rtype == _PERF_RECORD_SAMPLE:
                ip, nr = struct.unpack_from('QQ', data, off + 8)
                chain = struct.unpack_from(f'{nr}Q', data, off + 24) if off + 24 + 8 * nr <= off + size else ()
                out.append((ip, chain))
            elif rtype == _PERF_RECORD_LOST:
                out.append(None)
            off += size
        self.pending = data[off:]

    def ioctl(self, req):
        import fcntl
        fcntl.ioctl(self.fd, req, 0)

    def close(self):
        self.buf.close()
        os.close(self.fd)


class Profiler:
    """Samples all online CPUs between start() and stop()."""

    def __init__(self, period_us=250):
        self.period_ns = period_us * 1000
        self.samples = []
        self.streams = []
        self.thread = None
        self.running = False

    def start(self):
        self.samples = []
        self.streams = [_CpuStream(c, self.period_ns) for c in sorted(os.sched_getaffinity(0))]
        self.running = True
        self.thread = threading.Thread(target=self._reader, daemon=True)
        self.thread.start()
        for s in self.streams:
            s.ioctl(_PERF_EVENT_IOC_ENABLE)

    def _reader(self):
        while self.running:
            for s in self.streams:
                s.drain(self.samples)
            time.sleep(0.02)

    def stop(self):
        for s in self.streams:
            s.ioctl(_PERF_EVENT_IOC_DISABLE)
        self.running = False
        self.thread.join()
        for s in self.streams:
            s.drain(self.samples)
            s.close()
        self.streams = []
        return self.samples


def report(samples, syms, top=25):
    """Lines of a flat profile: self and total shares of kernel samples."""
    lost = sum(1 for s in samples if s is None)
    samples = [s for s in samples if s is not None]
    self_c, total_c = collections.Counter(), collections.Counter()
    idle = 0
    for ip, chain in samples:
        seen = {syms.name(a) for a in chain if _KERNEL_START <= a < _PERF_CONTEXT_MAX}
        if 'do_idle' in seen:
            idle += 1
            continue
        self_c[syms.name(ip)] += 1
        seen.add(syms.name(ip))
        total_c.update(seen)
    n = len(samples) - idle
    if not n:
        return [f'no busy samples ({idle} idle)']
    lines = [f'{n} busy samples, {idle} idle ({lost} lost records); shares of the busy ones',
             f'{"self %":>7} {"total %":>8}  function']
    shown = [f for f, _ in self_c.most_common(top)]
    shown += [f for f, _ in total_c.most_common(top) if f not in shown]
    for f in sorted(shown, key=lambda f: (-self_c[f], -total_c[f]))[:2 * top]:
        lines.append(f'{100 * self_c[f] / n:7.1f} {100 * total_c[f] / n:8.1f}  {f}')
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--top', type=int, default=25)
    ap.add_argument('--period-us', type=int, default=250)
    ap.add_argument('command', nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not cmd:
        ap.error('a command to profile')
    p = Profiler(args.period_us)
    p.start()
    rc = subprocess.call(cmd)
    samples = p.stop()
    for line in report(samples, Symbols(), args.top):
        print(line)
    return rc


if __name__ == '__main__':
    sys.exit(main())
