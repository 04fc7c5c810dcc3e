#!/usr/bin/env python3
"""Incast through an ECN-marking bottleneck (scripts/incast runs it).

Two senders (namespaces ic-a1, ic-a2) write to one receiver (ic-b) through
a "switch" namespace (ic-s) whose egress to the receiver is rate-limited
(tbf) with RED marking CE (Kmin/Kmax as DCQCN's paper, scaled to the
rate). For each provider in turn: both flows' goodput second by second,
the bottleneck queue's backlog sampled every 100 ms, its drops and marks,
and the congestion counters. Prints a table and writes JSON.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import threading
import time

NS = ['ic-a1', 'ic-a2', 'ic-s', 'ic-b']
PROVIDERS = {'rroce': ('rroce', 'rroce'), 'rroce-vm': ('rroce', 'rroce'), 'rdma_rxe': ('rxe', 'rdma_rxe')}
# DCQCN's defaults (mlx5's) assume microsecond round trips: alpha decays
# every microsecond and the rate climbs every 300. Through a software switch
# in a TCG guest a round trip takes milliseconds, so `rroce-vm` runs the
# same algorithm with its timers scaled to the path.
VM_TIMERS = {'rp_dce_tcp_rtt': 20000, 'rp_time_reset': 20000, 'rp_ai_rate': 1, 'rp_hai_rate': 2,
             'rp_rate_reduce_monitor_period': 5000, 'np_min_time_between_cnps': 5000}


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120)
    if check and r.returncode != 0:
        raise RuntimeError(f'{cmd}: {r.stderr.strip()}')
    return r.stdout


def topo_up(rate_mbit):
    for n in NS:
        sh(f'ip netns add {n}')
        sh(f'ip -n {n} link set lo up')
    links = [('ic-a1', 'eth-a1', 'sw-a1', 1), ('ic-a2', 'eth-a2', 'sw-a2', 2), ('ic-b', 'eth-b', 'sw-b', 3)]
    for ns, host_if, sw_if, net in links:
        sh(f'ip link add name {host_if} netns {ns} type veth peer name {sw_if} netns ic-s')
        sh(f'ip -n {ns} addr add 198.18.{net}.1/24 dev {host_if}')
        sh(f'ip -n ic-s addr add 198.18.{net}.254/24 dev {sw_if}')
        sh(f'ip -n {ns} link set {host_if} up')
        sh(f'ip -n ic-s link set {sw_if} up')
        sh(f'ip -n {ns} route add default via 198.18.{net}.254')
    sh('ip netns exec ic-s sysctl -qw net.ipv4.ip_forward=1')
    # perftest's TCP exchange ECN-capable too, so RED marks it rather than
    # dropping it (RED drops what it cannot mark).
    for n in ('ic-a1', 'ic-a2', 'ic-b'):
        sh(f'ip netns exec {n} sysctl -qw net.ipv4.tcp_ecn=1')
    # The bottleneck: the switch's port to the receiver. RED on the average
    # queue, marking ECN-capable packets (dropping the others) between
    # min and max with up to 10 % probability.
    q = rate_mbit * 1000 // 8  # bytes per ms at the rate
    lo, hi = max(5000, q // 4), max(20000, q)
    # A deep buffer, as a lossless switch port has: congestion control has
    # to keep the queue near the marking thresholds; a drop means it did not.
    limit = 4_000_000
    sh(f'tc -n ic-s qdisc add dev sw-b root handle 1: tbf rate {rate_mbit}mbit burst 16kb limit {limit}')
    sh(f'tc -n ic-s qdisc add dev sw-b parent 1:1 handle 10: red limit {limit} min {lo} max {hi} '
       f'avpkt 1100 burst {lo // 1100 + 1} probability 0.1 bandwidth {rate_mbit}mbit ecn')


def topo_down():
    for n in NS:
        sh(f'ip netns del {n}', check=False)


def counters(dev):
    base = f'/sys/class/infiniband/{dev}/ports/1/hw_counters'
    out = {}
    if os.path.isdir(base):
        for name in os.listdir(base):
            try:
                with open(f'{base}/{name}') as f:
                    out[name] = int(f.read())
            except (OSError, ValueError):
                pass
    return out


def red_stats():
    out = sh('tc -n ic-s -s qdisc show dev sw-b parent 1:1', check=False)
    stats = {}
    for key, pat in [('dropped', r'dropped (\d+)'), ('marked', r'marked (\d+)'), ('early', r'early (\d+)')]:
        m = re.search(pat, out)
        stats[key] = int(m.group(1)) if m else None
    return stats


def backlog_bytes():
    out = sh('tc -n ic-s -s qdisc show dev sw-b parent 1:1', check=False)
    m = re.search(r'backlog (\d+)([KMG]?)b', out)
    if not m:
        return None
    return int(m.group(1)) * {'': 1, 'K': 1000, 'M': 1000000, 'G': 1000000000}[m.group(2)]


def finish(proc):
    """The output of a process told to stop; one that will not even die
    (stuck in the kernel) is reported and left behind."""
    try:
        out, _ = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            stack = sh(f'cat /proc/{proc.pid}/stack', check=False)
            print(f'# pid {proc.pid} does not exit: {stack!r}', flush=True)
            out = ''
    return out or ''


def run(provider, seconds, rate_mbit):
    print(f'# {provider}: setting up', flush=True)
    link_type, module = PROVIDERS[provider]
    sh('modprobe -r rroce rdma_rxe', check=False)
    sh(f'modprobe {module}')
    topo_up(rate_mbit)
    devs = {'ic-a1': ('eth-a1', 'ic-d1'), 'ic-a2': ('eth-a2', 'ic-d2'), 'ic-b': ('eth-b', 'ic-db')}
    for ns, (ifname, dev) in devs.items():
        sh(f'ip netns exec {ns} rdma link add {dev} type {link_type} netdev {ifname}')
        if provider == 'rroce-vm':
            for k, v in VM_TIMERS.items():
                sh(f'echo {v} > /sys/class/infiniband/{dev}/qos/{k}')
    time.sleep(2)
    # Two servers on the receiver, one per sender; per-second reports.
    # ACK timeout 1 s (-u 18): queueing delay at a deep bottleneck is not loss.
    args = f'-F -s 65536 -D 1 --run_infinitely --report_gbits -u 18'
    # Not through a shell: a signal must reach ib_write_bw itself.
    srvs = [subprocess.Popen(f'ip netns exec ic-b ib_write_bw -d ic-db -x 1 -p {port} {args}'.split(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for port in (18601, 18602)]
    time.sleep(3)
    clis = [subprocess.Popen(f'ip netns exec {ns} ib_write_bw -d {dev} -x 1 -p {port} {args} 198.18.3.1'.split(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for (ns, dev, port) in (('ic-a1', 'ic-d1', 18601), ('ic-a2', 'ic-d2', 18602))]
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            b = backlog_bytes()
            if b is not None:
                samples.append(b)
            time.sleep(0.1)

    print(f'# {provider}: both flows started', flush=True)
    t = threading.Thread(target=sample)
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    series = []
    failed = []
    for c in clis:
        c.terminate()
        out = finish(c)
        rows = []
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 5 and f[0] == '65536':
                try:
                    rows.append(float(f[3]))
                except ValueError:
                    pass
        series.append(rows)
        failed.append('Completion with error' in out or 'Failed status' in out)
        if not rows:
            print(f'# {provider}: a client reported nothing: {out[-300:]!r}', flush=True)
    for s in srvs:
        s.terminate()
        finish(s)
    stats = red_stats()
    cnt = {dev: counters(dev) for (_, dev) in devs.values()}
    for ns, (_, dev) in devs.items():
        sh(f'ip netns exec {ns} rdma link delete {dev}', check=False)
    topo_down()
    sh(f'modprobe -r {module}', check=False)
    return {'provider': provider, 'gbps_per_second': series, 'flow_failed': failed, 'backlog_samples': samples, 'red': stats,
            'counters': {d: {k: v for k, v in c.items() if k.startswith(('np_', 'rp_', 'tx_local', 'completer_retry', 'retry'))}
                         for d, c in cnt.items()}}


def summarize(r, rate_mbit):
    s1, s2 = r['gbps_per_second']
    n = min(len(s1), len(s2))
    steady = slice(n // 2, n)
    g1 = statistics.median(s1[steady]) if n else None
    g2 = statistics.median(s2[steady]) if n else None
    total = (g1 or 0) + (g2 or 0)
    jain = (total ** 2) / (2 * ((g1 or 0) ** 2 + (g2 or 0) ** 2)) if total else None
    conv = None
    for i in range(n):
        a, b = s1[i], s2[i]
        if a + b and min(a, b) / max(a, b) >= 0.8:
            conv = i + 1
            break
    bl = r['backlog_samples']
    return {'flow1_gbps': g1, 'flow2_gbps': g2, 'goodput_gbps': total, 'bottleneck_gbps': rate_mbit / 1000,
            'jain': jain, 'first_second_within_80pct': conv,
            'backlog_median_bytes': statistics.median(bl) if bl else None, 'backlog_max_bytes': max(bl) if bl else None}


def report(r):
    s, red, c = r['summary'], r['red'], r['counters']
    cnp = sum(v.get('np_cnp_sent', 0) for v in c.values())
    handled = sum(v.get('rp_cnp_handled', 0) for v in c.values())
    retx = sum(v.get('completer_retry_err', 0) for v in c.values())
    failed = ', '.join(f'flow{i + 1} ended in an error completion' for i, f in enumerate(r['flow_failed']) if f)
    mbit = lambda v, w: f'{v * 1000:>{w}.2f}' if isinstance(v, float) else f'{str(v):>{w}}'
    jain = f'{s["jain"]:>5.2f}' if isinstance(s['jain'], float) else f'{str(s["jain"]):>5}'
    print(f'{r["provider"]:10} {mbit(s["flow1_gbps"], 7)} {mbit(s["flow2_gbps"], 7)} {mbit(s["goodput_gbps"], 8)} '
          f'{jain} {str(s["first_second_within_80pct"]):>6} {str(s["backlog_median_bytes"]):>8} '
          f'{str(s["backlog_max_bytes"]):>8} {str(red["dropped"]):>6} {str(red["marked"]):>6}  '
          f'cnp_sent {cnp} cnp_handled {handled} retransmit_timeouts {retx}{"; " + failed if failed else ""}')
    for i, series in enumerate(r['gbps_per_second']):
        print(f'  flow{i + 1} Mbit/s per second: {[round(v * 1000, 1) for v in series]}', flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=int, default=30)
    ap.add_argument('--rate', type=int, default=10, help='bottleneck rate, Mbit/s')
    ap.add_argument('--providers', default='rroce,rroce-vm,rdma_rxe')
    ap.add_argument('--json', default='/tmp/incast.json')
    a = ap.parse_args()
    print(f'incast: 2 senders -> 1 receiver through {a.rate} Mbit/s with RED ECN marking, {a.seconds} s each; '
          'goodput in Mbit/s, medians of the second half; queue in bytes')
    print(f'{"provider":10} {"flow1":>7} {"flow2":>7} {"goodput":>8} {"Jain":>5} {"fair@s":>6} '
          f'{"q med":>8} {"q max":>8} {"drops":>6} {"marks":>6}  counters', flush=True)
    results = []
    for p in a.providers.split(','):
        try:
            r = run(p, a.seconds, a.rate)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            topo_down()
            print(f'# {p}: {e}', flush=True)
            continue
        r['summary'] = summarize(r, a.rate)
        results.append(r)
        report(r)
    with open(a.json, 'w') as f:
        json.dump(results, f)


if __name__ == '__main__':
    main()
