#!/usr/bin/env python3
"""rroce against rdma_rxe and siw in one guest boot (scripts/bench runs it).

Every provider runs the same perftest workloads over the two-namespace veth
topology (selftests/lib.sh topo_up), connected through rdma_cm (`-R`, which
siw needs), one provider loaded at a time (rroce and rdma_rxe both claim
RDMA_DRIVER_RXE). Providers alternate within each repetition so drift of
the host hits all of them alike.

Bandwidth runs are sized by message count, not by time: a run moves
--bw-mbytes MiB or --bw-msgs messages, whichever is fewer, and never fewer
than 50 messages per queue pair, so a 1 MiB run is as meaningful as a 64 B
one however slow the guest is. CPU per GB comes from separate runs at
64 KiB and 1 MiB on completion events (`-e`: perftest sleeps instead of
polling, which would keep a CPU busy whatever the provider costs; it has
none for WRITE, so only READ and SEND have CPU rows), counting
the guest's busy time only while perftest measured (the seconds before its
result line). Each client starts once its server's rdma_cm ID listens. A
run that fails is retried once; a cell whose runs all failed reads `fail`,
with the tool's error below the table.
Prints a table of medians with ratios and writes every sample, failed
attempts included, as JSON (--json; scripts/bench-table turns that into
the table in docs/performance.md). Numbers from a TCG guest are only meaningful as ratios.
"""
import argparse
import bisect
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import kprofile

A, B = 'rroce-a', 'rroce-b'
A4, B4 = '198.18.0.1', '198.18.0.2'
PROVIDERS = [('rroce', 'rroce', 'rroce'), ('rdma_rxe', 'rxe', 'rdma_rxe'), ('siw', 'siw', 'siw')]
# Another build of rroce (scripts/bench --base-ko): before and after a
# change, in the same boot.
BASE_KO = '/job/rroce-base.ko'
if os.path.exists(BASE_KO):
    PROVIDERS.insert(1, ('rroce_base', 'rroce', BASE_KO))


def load_cmd(module):
    """A module file is loaded with insmod, its dependencies first."""
    if not module.endswith('.ko'):
        return f'modprobe {module}'
    return (f'for d in $(modinfo -F depends {module} | tr , " "); do modprobe $d || exit 1; done; '
            f'insmod {module}')


def unload_cmd(module):
    return 'rmmod rroce' if module.endswith('.ko') else f'modprobe -r {module}'
BW_TESTS = ('write', 'read', 'send')
BW_SIZES = [64, 4096, 65536, 1048576]
LAT_TESTS = ('write', 'send')
LAT_SIZES = [2, 4096]
CPU_SIZES = [65536, 1048576]  # CPU per GB, from runs on completion events
# perftest has no completion events for WRITE (nor WRITE with immediate):
# its polling would count as provider CPU, so writes have no CPU rows.
CPU_TESTS = ('read', 'send')
MULTI_QPS = 8
MIN_MSGS = 50  # per queue pair and run
CM_PORT = 18515  # perftest's default


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)


def busy_jiffies():
    """Non-idle CPU time of the whole guest, in clock ticks."""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


PROFILER = None  # a kprofile.Profiler with --profile
PROFILES = {}  # (tool, args) -> the kernel samples of its last client run


def accelerator():
    """kvm when the guest has KVM's clock, else tcg (scripts/vm's two)."""
    try:
        with open('/sys/devices/system/clocksource/clocksource0/available_clocksource') as f:
            return 'kvm' if 'kvm-clock' in f.read() else 'tcg'
    except OSError:
        return None


def size_name(size):
    for unit, n in (('MiB', 1 << 20), ('KiB', 1 << 10)):
        if size >= n and size % n == 0:
            return f'{size // n} {unit}'
    return f'{size} B'


def wait_listen(srv, deadline):
    """Waits until the server's rdma_cm ID listens on its address (`rdma res
    show cm_id`), so the client neither races the server's start-up nor
    waits a fixed time; False if it did not (or the server exited) first."""
    while time.time() < deadline and srv.poll() is None:
        out = sh(f'ip netns exec {B} rdma res show cm_id').stdout
        if any('LISTEN' in line and f'{B4}:{CM_PORT}' in line for line in out.splitlines()):
            return True
        time.sleep(0.1)
    return False


def error_of(rc, out, err, timeout):
    """The tool's own words for why a run failed: its last error lines."""
    if rc == 124:
        why = f'timed out after {timeout} s'
    elif rc < 0 or rc > 128:
        why = f'killed by signal {rc - 128 if rc > 128 else -rc}'
    else:
        why = f'exit {rc}'
    lines = [ln.strip() for ln in (err + '\n' + out).splitlines()]
    lines = [ln for ln in lines if ln and not set(ln) <= set('-*')]
    flagged = [ln for ln in lines if re.search(r"fail|error|unable|couldn'?t|cannot|can't|refused|invalid|"
                                               r'not supported|unsupported|timeout|timed out|rejected', ln, re.I)]
    words = (flagged or lines)[-2:]
    return (why + ': ' + ' / '.join(words)) if words else why


class CpuSampler:
    """The guest's busy CPU time, sampled every 50 ms from a thread, so that
    the time spent moving data can be told from the set-up's."""

    def __init__(self):
        self.samples = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        hz = os.sysconf('SC_CLK_TCK')
        while self.running:
            self.samples.append((time.time(), busy_jiffies() / hz))
            time.sleep(0.05)

    def stop(self):
        self.running = False
        self.thread.join()
        self.samples.append((time.time(), busy_jiffies() / os.sysconf('SC_CLK_TCK')))

    def at(self, t):
        """Busy seconds at time t, interpolated between samples."""
        s = self.samples
        i = bisect.bisect_left(s, (t,))
        if i <= 0:
            return s[0][1]
        if i >= len(s):
            return s[-1][1]
        (t0, c0), (t1, c1) = s[i - 1], s[i]
        return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1


def pair(tool, args, timeout):
    """Runs a perftest server in B and its client in A. Returns the client's
    output lines with the time each arrived (None if either end failed),
    the error, the guest CPU seconds spent while the client ran, its wall
    time, and the CpuSampler of the run. With --profile, the kernel is
    sampled meanwhile (PROFILES)."""
    # Both ends bind rdma_cm to their own address: a wildcard listen would
    # make siw listen on every siw device the namespace sees (in shared netns
    # mode, both), and the second listen fails with EADDRINUSE.
    with tempfile.TemporaryFile('w+') as so, tempfile.TemporaryFile('w+') as se, \
            tempfile.TemporaryFile('w+') as ce:
        srv = subprocess.Popen(f'exec ip netns exec {B} timeout {timeout} {tool} -d bench-b -R '
                               f'--bind_source_ip {B4} {args}', shell=True, stdout=so, stderr=se, text=True)
        if not wait_listen(srv, time.time() + 15) and srv.poll() is None:
            print(f'# {tool}: the server was not seen listening within 15 s; starting the client anyway',
                  flush=True)
        if PROFILER:
            PROFILER.start()
        cpu = CpuSampler()
        t0 = time.time()
        # Line-buffered, so that each line's arrival time is when perftest
        # printed it: the result line marks the end of the measured transfer.
        cli = subprocess.Popen(f'exec ip netns exec {A} timeout {timeout} stdbuf -oL {tool} -d bench-a -R '
                               f'--bind_source_ip {A4} {args} {B4}', shell=True, stdout=subprocess.PIPE,
                               stderr=ce, text=True)
        lines = [(time.time(), line) for line in cli.stdout]
        cli.wait()
        cpu.stop()
        wall = time.time() - t0
        if PROFILER:
            PROFILES[(tool, args)] = PROFILER.stop()
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
        for f in (so, se, ce):
            f.seek(0)
        srv_out, srv_err, cli_err = so.read(), se.read(), ce.read()
    cli_out = ''.join(line for _, line in lines)
    error = None
    if cli.returncode != 0:
        error = 'client ' + error_of(cli.returncode, cli_out, cli_err, timeout)
        if srv.returncode not in (0, None):
            error += '; server ' + error_of(srv.returncode, srv_out, srv_err, timeout)
    elif srv.returncode != 0:
        error = 'server ' + error_of(srv.returncode, srv_out, srv_err, timeout)
    else:
        # perftest converts cycles to time with a CPU frequency it fits at
        # start; a fit it rejects (a vCPU stalled while it sampled) becomes
        # 0 MHz, and every figure of the run 0 or infinite.
        fit = [line for line in cli_err.splitlines() if 'Correlation coefficient' in line]
        if fit:
            error = 'client could not estimate the CPU frequency: ' + fit[0].strip()
    total = cpu.samples[-1][1] - cpu.samples[0][1]
    return (lines if error is None else None), error, total, wall, cpu


def result_line(lines, size):
    """The numbers of perftest's result line and the time it was printed."""
    for t, line in lines or ():
        f = line.split()
        if len(f) >= 5 and f[0] == str(size):
            try:
                return [float(x) for x in f], t
            except ValueError:
                continue
    return None, None


def tail(lines, n=2):
    return ' / '.join(line.strip() for _, line in (lines or [])[-n:]) or 'no output'


def bw_iters(args, size, qps):
    """Messages per queue pair: --bw-mbytes or --bw-msgs, whichever is fewer
    (split over the QPs), and at least MIN_MSGS; a multiple of 10."""
    n = min(args.bw_msgs, math.ceil(args.bw_mbytes * (1 << 20) / size)) / qps
    return max(MIN_MSGS, int(math.ceil(n / 10) * 10))


def run_bw(args, test, size, qps, events=False):
    """Average Gb/s and message rate (Mpps), and the guest's CPU seconds
    (both ends) per GB moved while perftest measured. With events, perftest
    sleeps on completion events instead of polling its CQs, so the CPU time
    is the provider's work rather than a poll loop's."""
    iters = bw_iters(args, size, qps)
    a = f'-F -s {size} -q {qps} -n {iters}' + (' -e' if events else '')
    lines, err, cpu, wall, sampler = pair(f'ib_{test}_bw', a, args.timeout)
    run = {'args': a, 'cpu_s': round(cpu, 3), 'wall_s': round(wall, 3)}
    if err:
        return None, err, run
    f, t_end = result_line(lines, size)
    if not f:
        return None, 'no result line in the output: ' + tail(lines), run
    # perftest prints MB/s (MiB/s) with two decimals and Mpps with six; take
    # the rate from whichever of the two is the more precise here.
    mibs, mpps = f[3], f[4]
    if mibs <= 0 or mpps <= 0:
        return None, f'reported {mibs} MB/s, {mpps} Mpps: ' + tail(lines, 1), run
    if 0.005 / mibs < 5e-7 / mpps:
        bytes_s = mibs * (1 << 20)
        mpps = bytes_s / size / 1e6
    else:
        bytes_s = mpps * 1e6 * size
    moved = iters * qps * size
    # The transfer is the `seconds` before the result line was printed;
    # connection set-up and teardown are left out.
    seconds = moved / bytes_s
    xfer_cpu = sampler.at(t_end) - sampler.at(t_end - seconds)
    run.update({'transfer_s': round(seconds, 3), 'transfer_cpu_s': round(xfer_cpu, 3)})
    r = {'gbps': bytes_s * 8 / 1e9, 'mpps': mpps, 'msgs': iters * qps}
    if events:
        r['cpu_s_per_gb'] = xfer_cpu / (moved / 1e9)
    return r, None, run


def run_lat(args, test, size):
    """Median (t_typical) and 99th percentile in microseconds."""
    a = f'-F -s {size} -n {args.lat_iters}'
    lines, err, cpu, wall, _ = pair(f'ib_{test}_lat', a, args.timeout)
    run = {'args': a, 'cpu_s': round(cpu, 3), 'wall_s': round(wall, 3)}
    if err:
        return None, err, run
    f, _ = result_line(lines, size)
    if not f or len(f) < 8:
        return None, 'no result line in the output: ' + tail(lines), run
    # perftest prints inf when its clock went wrong: a failed run, not a
    # value (a ratio to it would read 0).
    if not (0 < f[4] < math.inf and 0 < f[7] < math.inf):
        return None, f'reported a median of {f[4]} us and a 99th percentile of {f[7]} us', run
    return {'median_us': f[4], 'p99_us': f[7]}, None, run


def memcpy_gbps():
    """The guest's memcpy bandwidth: what moving payload could cost at best."""
    src = r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(void) {
	size_t n = 64 << 20; int reps = 16;
	char *a = malloc(n), *b = malloc(n);
	memset(a, 1, n); memset(b, 2, n);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < reps; i++) { memcpy(b, a, n); a[i] = b[n - 1 - i]; }
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%f\n", (double)n * reps * 8 / s / 1e9);
	return b[7] == 3;
}
'''
    with tempfile.TemporaryDirectory() as d:
        c, exe = os.path.join(d, 'm.c'), os.path.join(d, 'm')
        with open(c, 'w') as f:
            f.write(src)
        if sh(f'gcc -O2 -o {exe} {c}').returncode != 0:
            return None
        r = sh(exe)
        try:
            return float(r.stdout.strip())
        except ValueError:
            return None


def all_workloads(args):
    """(name, size, qps, function returning (result, error, run))."""
    sizes = [s for s in BW_SIZES if not args.sizes or s in args.sizes]
    for test in BW_TESTS:
        for size in sizes:
            yield (f'ib_{test}_bw', size, 1, lambda t=test, s=size: run_bw(args, t, s, 1))
    yield (f'ib_write_bw {MULTI_QPS} QPs', 64, MULTI_QPS, lambda: run_bw(args, 'write', 64, MULTI_QPS))
    for test in LAT_TESTS:
        for size in LAT_SIZES:
            yield (f'ib_{test}_lat', size, 1, lambda t=test, s=size: run_lat(args, t, s))
    for test in CPU_TESTS:
        for size in CPU_SIZES:
            if not args.sizes or size in args.sizes:
                yield (f'ib_{test}_bw -e', size, 1, lambda t=test, s=size: run_bw(args, t, s, 1, events=True))


def workloads(args):
    for w in all_workloads(args):
        if not args.only or re.search(args.only, w[0]):
            yield w


def row_specs():
    """The rows of the table: (id, label, unit, better, workload, size, key)."""
    for test in BW_TESTS:
        for size in BW_SIZES:
            yield (f'{test}_bw_{size}', f'{test} bandwidth {size_name(size)}', 'Gb/s', 'higher',
                   f'ib_{test}_bw', size, 'gbps')
    yield (f'write_rate_{MULTI_QPS}qp_64', f'write message rate, {MULTI_QPS} QPs, 64 B', 'Mpps', 'higher',
           f'ib_write_bw {MULTI_QPS} QPs', 64, 'mpps')
    for test in LAT_TESTS:
        for size in LAT_SIZES:
            for key, what in (('median_us', 'median'), ('p99_us', 'p99')):
                yield (f'{test}_lat_{size}_{what}', f'{test} latency {size_name(size)} {what}', 'us', 'lower',
                       f'ib_{test}_lat', size, key)
    for test in CPU_TESTS:
        for size in CPU_SIZES:
            yield (f'{test}_cpu_{size}', f'{test} guest CPU per GB, {size_name(size)}', 'CPU s/GB', 'lower',
                   f'ib_{test}_bw -e', size, 'cpu_s_per_gb')
    for test in BW_TESTS:
        yield (f'{test}_memcpy_pct_1048576', f'{test} 1 MiB, share of memcpy', '%', 'higher',
               f'ib_{test}_bw', 1048576, 'memcpy_pct')


def fmt(v):
    """Four significant digits, never a rounded-away 0.000."""
    if v is None:
        return 'fail'
    if v == 0:
        return '0'
    return f'{v:.4g}' if 1e-4 <= abs(v) < 1e6 else f'{v:.3e}'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--bw-msgs', type=int, default=4000,
                    help='messages per bandwidth run at most (default 4000; split over the QPs)')
    ap.add_argument('--bw-mbytes', type=float, default=32,
                    help='MiB per bandwidth run at most (default 32), but never fewer than '
                         f'{MIN_MSGS} messages per QP')
    ap.add_argument('--lat-iters', type=int, default=500)
    ap.add_argument('--timeout', type=int, default=120, help='seconds each perftest run may take')
    ap.add_argument('--sizes', default=None,
                    help='comma-separated bandwidth message sizes to run (default: all of '
                         f'{",".join(map(str, BW_SIZES))})')
    ap.add_argument('--providers', default='rroce,rdma_rxe,siw',
                    help='which providers, in the order each repetition runs them')
    ap.add_argument('--only', default=None, help='run only the workloads whose name matches this regex')
    ap.add_argument('--json', default=None, help='write all samples here')
    ap.add_argument('--profile', type=int, default=0, metavar='N',
                    help="print the N functions the kernel spent most time in during each run's client "
                         '(scripts/guest/kprofile.py; sampling costs some throughput)')
    args = ap.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(',')] if args.sizes else None
    global PROFILER
    if args.profile:
        PROFILER = kprofile.Profiler()
    wanted = args.providers.split(',')
    if os.path.exists(BASE_KO) and 'rroce' in wanted and 'rroce_base' not in wanted:
        wanted.append('rroce_base')
    # The order given is the order within a repetition: reversing it shows
    # whether a difference follows the provider or its place in the run.
    known = {p[0]: p for p in PROVIDERS}
    providers = [known[w] for w in dict.fromkeys(wanted) if w in known]
    start = time.time()

    samples = {}  # (workload, size, qps, provider) -> [one entry per repetition]
    memcpy = []
    retried = 0
    for rep in range(args.reps):
        mc = memcpy_gbps()
        if mc:
            memcpy.append(mc)
        for name, linktype, module in providers:
            load = sh(load_cmd(module))
            if load.returncode != 0:
                err = f'cannot load {module}: {(load.stderr or load.stdout).strip()}'
                print(f'# {name}: {err}', flush=True)
                for wl, size, qps, _ in workloads(args):
                    samples.setdefault((wl, size, qps, name), []).append(
                        {'rep': rep + 1, 'result': None, 'attempts': [{'error': err}]})
                continue
            for ns, dev, veth in ((A, 'bench-a', 'veth-a'), (B, 'bench-b', 'veth-b')):
                r = sh(f'ip netns exec {ns} rdma link add {dev} type {linktype} netdev {veth}')
                if r.returncode != 0:
                    print(f'# {name}: rdma link add {dev}: {r.stderr.strip()}', flush=True)
            for wl, size, qps, fn in workloads(args):
                attempts = []
                for attempt in range(2):
                    PROFILES.clear()
                    result, err, run = fn()
                    run['error'] = err
                    attempts.append(run)
                    if result:
                        break
                    note = 'retrying' if attempt == 0 else 'failed twice'
                    print(f'# rep {rep + 1} {name:8} {wl:18} {size:>8}: fail ({err}); {note}', flush=True)
                    retried += attempt == 0
                samples.setdefault((wl, size, qps, name), []).append(
                    {'rep': rep + 1, 'result': result, 'attempts': attempts})
                if result:
                    again = ' (on the retry)' if len(attempts) > 1 else ''
                    print(f'# rep {rep + 1} {name:8} {wl:18} {size:>8}: {result}{again}', flush=True)
                if PROFILER:
                    syms = kprofile.Symbols()  # the provider's module is loaded now
                    for prof in PROFILES.values():
                        for line in kprofile.report(prof, syms, args.profile):
                            print(f'# profile {name} {wl} {size}: {line}', flush=True)
            sh(f'ip netns exec {A} rdma link delete bench-a')
            sh(f'ip netns exec {B} rdma link delete bench-b')
            sh(unload_cmd(module))
    mc = statistics.median(memcpy) if memcpy else None

    def cell(wl, size, prov, key):
        """The median of the successful repetitions, how many there were,
        and the last error if none succeeded."""
        entries = [e for k, v in samples.items() if k[0] == wl and k[1] == size and k[3] == prov for e in v]
        src = 'gbps' if key == 'memcpy_pct' else key
        vals = [e['result'][src] for e in entries if e['result'] and e['result'].get(src) is not None]
        if not vals:
            errs = [a['error'] for e in entries for a in e['attempts'] if a.get('error')]
            return None, 0, (errs[-1] if errs else 'no successful run')
        v = statistics.median(vals)
        if key == 'memcpy_pct':
            if not mc:
                return None, 0, 'the guest memcpy measurement failed'
            v = 100 * v / mc
        return v, len(vals), None

    ran = {(wl, size) for wl, size, _, _ in workloads(args)}
    rows = []
    for rid, label, unit, better, wl, size, key in row_specs():
        if (wl, size) not in ran:
            continue
        row = {'id': rid, 'label': label, 'unit': unit, 'better': better,
               'workload': wl, 'size': size, 'metric': key, 'values': {}, 'ok_runs': {}, 'errors': {}}
        for name, _, _ in providers:
            v, n, err = cell(wl, size, name, key)
            row['values'][name] = v
            row['ok_runs'][name] = n
            if err:
                row['errors'][name] = err
        rows.append(row)

    names = [p[0] for p in providers]
    others = [p for p in ('rroce_base', 'rdma_rxe', 'siw') if p in names and 'rroce' in names]
    print(f'{"":38} {"unit":>8} ' + ' '.join(f'{p:>9}' for p in names) +
          ''.join(f' {"/" + p:>9}' for p in others))
    failures = []
    for r in rows:
        vals = []
        for p in names:
            v = r['values'][p]
            mark = '' if r['ok_runs'][p] in (0, args.reps) else f'({r["ok_runs"][p]})'
            vals.append(f'{fmt(v) + mark:>9}')
            if v is None:
                failures.append(f'{p} {r["label"]}: {r["errors"][p]}')

        def ratio(other):
            a, b = r['values'].get('rroce'), r['values'].get(other)
            return f'{a / b:9.2f}' if a and b else f'{"n/a":>9}'
        print(f'{r["label"]:38} {r["unit"]:>8} ' + ' '.join(vals) + ''.join(' ' + ratio(o) for o in others))
    print(f'guest memcpy: {fmt(mc)} Gb/s' if mc else 'guest memcpy: fail (could not build or run the copy loop)')
    for f in failures:
        print(f'fail: {f}')
    print(f'(medians of {args.reps} repetitions, providers alternating; "(n)": only n runs succeeded; '
          f'{retried} runs retried once after a failure; /p: rroce\'s value divided by p\'s; '
          f'bandwidth, rate and memcpy share: higher is better; latency and CPU per GB: lower is better; '
          f'TCG guest, so ratios only) in {time.time() - start:.0f} s', flush=True)
    if args.json:
        params = {k: getattr(args, k) for k in ('reps', 'bw_msgs', 'bw_mbytes', 'lat_iters', 'timeout',
                                                'sizes', 'providers', 'only', 'profile')}
        with open(args.json, 'w') as f:
            json.dump({'format': 2, 'kernel': platform.release(), 'accel': accelerator(),
                       'cpus': os.cpu_count(), 'params': params, 'providers': names,
                       'min_msgs_per_qp': MIN_MSGS, 'memcpy_gbps': mc, 'memcpy_samples': memcpy,
                       'seconds': round(time.time() - start), 'retried': retried, 'rows': rows,
                       'samples': [{'workload': k[0], 'size': k[1], 'qps': k[2], 'provider': k[3], 'reps': v}
                                   for k, v in samples.items()]}, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
