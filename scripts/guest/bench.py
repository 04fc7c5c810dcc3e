#!/usr/bin/env python3
"""rroce against rdma_rxe and siw in one guest boot (scripts/bench runs it).

Every provider runs the same perftest workloads over the two-namespace veth
topology (selftests/lib.sh topo_up), connected through rdma_cm (`-R`, which
siw needs), one provider loaded at a time (rroce and rdma_rxe both claim
RDMA_DRIVER_RXE). Providers alternate within each repetition so drift of
the host hits all of them alike. Prints a table of medians with ratios and
writes every sample as JSON (--json). Numbers from a TCG guest are only
meaningful as ratios.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import kprofile

A, B = 'rroce-a', 'rroce-b'
A4, B4 = '198.18.0.1', '198.18.0.2'
PROVIDERS = [('rroce', 'rroce', 'rroce'), ('rdma_rxe', 'rxe', 'rdma_rxe'), ('siw', 'siw', 'siw')]
BW_SIZES = [64, 4096, 65536, 1048576]
LAT_SIZES = [2, 4096]


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)


def busy_jiffies():
    """Non-idle CPU time of the whole guest, in clock ticks."""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


PROFILER = None  # a kprofile.Profiler with --profile
PROFILES = {}  # (tool, args) -> the kernel samples of its last client run


def pair(tool, args, timeout=120):
    """Runs a perftest server in B and its client in A; the client's output,
    the guest CPU seconds spent while it ran, and its wall time. With
    --profile, the kernel is sampled meanwhile (PROFILES)."""
    # Both ends bind rdma_cm to their own address: a wildcard listen would
    # make siw listen on every siw device the namespace sees (in shared netns
    # mode, both), and the second listen fails with EADDRINUSE.
    srv = subprocess.Popen(f'ip netns exec {B} timeout {timeout} {tool} -d bench-b -R --bind_source_ip {B4} {args}',
                           shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    if PROFILER:
        PROFILER.start()
    j0, t0 = busy_jiffies(), time.time()
    cli = sh(f'ip netns exec {A} timeout {timeout} {tool} -d bench-a -R --bind_source_ip {A4} {args} {B4}')
    cpu = (busy_jiffies() - j0) / os.sysconf('SC_CLK_TCK')
    wall = time.time() - t0
    if PROFILER:
        PROFILES[(tool, args)] = PROFILER.stop()
    try:
        srv.wait(timeout=30)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.wait()
    return cli.stdout if cli.returncode == 0 else None, cpu, wall


def result_line(out, size):
    for line in (out or '').splitlines():
        f = line.split()
        if len(f) >= 5 and f[0] == str(size):
            try:
                return [float(x) for x in f]
            except ValueError:
                continue
    return None


def run_bw(test, size, qps, seconds):
    """Average Gb/s, message rate (Mpps) and guest CPU seconds per GB moved."""
    out, cpu, _ = pair(f'ib_{test}_bw', f'-F -s {size} -q {qps} -D {seconds} --report_gbits')
    f = result_line(out, size)
    if not f:
        return None
    gbps, mpps = f[3], f[4]
    gbytes = gbps * seconds / 8
    return {'gbps': gbps, 'mpps': mpps, 'cpu_s_per_gb': cpu / gbytes if gbytes else None}


def run_lat(test, size, iters):
    """Median (t_typical) and 99th percentile in microseconds."""
    out, _, _ = pair(f'ib_{test}_lat', f'-F -s {size} -n {iters}')
    f = result_line(out, size)
    if not f or len(f) < 8:
        return None
    return {'median_us': f[4], 'p99_us': f[7]}


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


def workloads(args):
    for w in all_workloads(args):
        if not args.only or re.search(args.only, w[0]):
            yield w


def all_workloads(args):
    for test in ('write', 'read', 'send'):
        for size in BW_SIZES:
            yield (f'ib_{test}_bw', size, 1, lambda t=test, s=size: run_bw(t, s, 1, args.seconds))
    yield ('ib_write_bw 8 QPs', 64, 8, lambda: run_bw('write', 64, 8, args.seconds))
    for test in ('write', 'send'):
        for size in LAT_SIZES:
            yield (f'ib_{test}_lat', size, 1, lambda t=test, s=size: run_lat(t, s, args.lat_iters))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--seconds', type=int, default=1, help='duration of each bandwidth run')
    ap.add_argument('--lat-iters', type=int, default=300)
    ap.add_argument('--providers', default='rroce,rdma_rxe,siw')
    ap.add_argument('--only', default=None, help='run only the workloads whose name matches this regex')
    ap.add_argument('--json', default=None, help='write all samples here')
    ap.add_argument('--profile', type=int, default=0, metavar='N',
                    help="print the N functions the kernel spent most time in during each run's client "
                         '(scripts/guest/kprofile.py; sampling costs some throughput)')
    args = ap.parse_args()
    global PROFILER
    if args.profile:
        PROFILER = kprofile.Profiler()
    wanted = args.providers.split(',')
    providers = [p for p in PROVIDERS if p[0] in wanted]
    start = time.time()

    samples = {}  # (workload, size, provider) -> [result dicts]
    for rep in range(args.reps):
        for name, linktype, module in providers:
            if sh(f'modprobe {module}').returncode != 0:
                print(f'# {name}: cannot load {module}', flush=True)
                continue
            sh(f'ip netns exec {A} rdma link add bench-a type {linktype} netdev veth-a')
            sh(f'ip netns exec {B} rdma link add bench-b type {linktype} netdev veth-b')
            for wl, size, _, fn in workloads(args):
                PROFILES.clear()
                r = fn()
                samples.setdefault((wl, size, name), []).append(r)
                print(f'# rep {rep + 1} {name:8} {wl:18} {size:>8}: {r}', flush=True)
                if PROFILER:
                    syms = kprofile.Symbols()  # the provider's module is loaded now
                    for prof in PROFILES.values():
                        for line in kprofile.report(prof, syms, args.profile):
                            print(f'# profile {name} {wl} {size}: {line}', flush=True)
            sh(f'ip netns exec {A} rdma link delete bench-a')
            sh(f'ip netns exec {B} rdma link delete bench-b')
            sh(f'modprobe -r {module}')

    def median(wl, size, prov, key):
        vals = [r[key] for r in samples.get((wl, size, prov), []) if r and r.get(key) is not None]
        return statistics.median(vals) if vals else None

    rows = []
    for wl, size, _, _ in workloads(args):
        keys = [('median_us', 'us'), ('p99_us', 'us')] if wl.endswith('_lat') else \
            [('gbps', 'Gb/s'), ('mpps', 'Mpps'), ('cpu_s_per_gb', 'CPU s/GB')] if 'QPs' in wl else \
            [('gbps', 'Gb/s'), ('cpu_s_per_gb', 'CPU s/GB')]
        for key, unit in keys:
            row = {'workload': wl, 'size': size, 'metric': key, 'unit': unit}
            for name, _, _ in providers:
                row[name] = median(wl, size, name, key)
            rows.append(row)

    mc = memcpy_gbps()
    print(f'{"workload":18} {"size":>8} {"metric":>13} ' +
          ' '.join(f'{p[0]:>9}' for p in providers) + '   vs rxe   vs siw')
    for r in rows:
        def ratio(other):
            a, b = r.get('rroce'), r.get(other)
            return f'{a / b:8.2f}' if a and b else '     n/a'
        vals = ' '.join(f'{r[p[0]]:9.3f}' if r[p[0]] is not None else '     fail' for p in providers)
        print(f'{r["workload"]:18} {r["size"]:>8} {r["unit"]:>13} {vals} {ratio("rdma_rxe")} {ratio("siw")}')
    print(f'guest memcpy: {mc:.1f} Gb/s' if mc else 'guest memcpy: n/a')
    print(f'(medians of {args.reps} runs, providers alternating; bandwidth and message rate: higher is better; '
          f'latency and CPU per GB: lower is better; TCG guest, so ratios only) in {time.time() - start:.0f} s')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'reps': args.reps, 'seconds': args.seconds, 'lat_iters': args.lat_iters,
                       'memcpy_gbps': mc, 'rows': rows,
                       'samples': [{'workload': k[0], 'size': k[1], 'provider': k[2], 'runs': v}
                                   for k, v in samples.items()]}, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
