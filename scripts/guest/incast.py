#!/usr/bin/env python3
"""Incast through an ECN-marking bottleneck (scripts/incast runs it).

Two senders (namespaces ic-a1, ic-a2) write to one receiver (ic-b) through
a "switch" namespace (ic-s) whose egress to the receiver is rate-limited
(htb) with RED marking CE (Kmin/Kmax as DCQCN's paper, scaled to the
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
PROVIDERS = {'rroce': ('rroce', 'rroce'), 'rdma_rxe': ('rxe', 'rdma_rxe')}


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f'{cmd}: {r.stderr.strip()}')
    return r.stdout


def topo_up(rate_mbit):
    for n in NS:
        sh(f'ip netns add {n}')
        sh(f'ip -n {n} link set lo up')
    links = [('ic-a1', 'a1', 's1', 1), ('ic-a2', 'a2', 's2', 2), ('ic-b', 'b', 'sb', 3)]
    for ns, host_if, sw_if, net in links:
        sh(f'ip link add {host_if} netns {ns} type veth peer name {sw_if} netns ic-s')
        sh(f'ip -n {ns} addr add 198.18.{net}.1/24 dev {host_if}')
        sh(f'ip -n ic-s addr add 198.18.{net}.254/24 dev {sw_if}')
        sh(f'ip -n {ns} link set {host_if} up')
        sh(f'ip -n ic-s link set {sw_if} up')
        sh(f'ip -n {ns} route add default via 198.18.{net}.254')
    sh('ip netns exec ic-s sysctl -qw net.ipv4.ip_forward=1')
    # The bottleneck: the switch's port to the receiver. RED on the average
    # queue, marking ECN-capable packets (dropping the others) between
    # min and max with up to 10 % probability.
    q = rate_mbit * 1000 // 8  # bytes per ms at the rate
    lo, hi = max(5000, q // 4), max(20000, q)
    sh('tc -n ic-s qdisc add dev sb root handle 1: htb default 1')
    sh(f'tc -n ic-s class add dev sb parent 1: classid 1:1 htb rate {rate_mbit}mbit')
    sh(f'tc -n ic-s qdisc add dev sb parent 1:1 handle 10: red limit {hi * 4} min {lo} max {hi} '
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
    out = sh('tc -n ic-s -s qdisc show dev sb parent 1:1', check=False)
    stats = {}
    for key, pat in [('dropped', r'dropped (\d+)'), ('marked', r'marked (\d+)'), ('early', r'early (\d+)')]:
        m = re.search(pat, out)
        stats[key] = int(m.group(1)) if m else None
    return stats


def backlog_bytes():
    out = sh('tc -n ic-s -s qdisc show dev sb parent 1:1', check=False)
    m = re.search(r'backlog (\d+)([KMG]?)b', out)
    if not m:
        return None
    return int(m.group(1)) * {'': 1, 'K': 1000, 'M': 1000000, 'G': 1000000000}[m.group(2)]


def run(provider, seconds, rate_mbit):
    link_type, module = PROVIDERS[provider]
    sh('modprobe -r rroce rdma_rxe', check=False)
    sh(f'modprobe {module}')
    topo_up(rate_mbit)
    devs = {'ic-a1': ('a1', 'ic-d1'), 'ic-a2': ('a2', 'ic-d2'), 'ic-b': ('b', 'ic-db')}
    for ns, (ifname, dev) in devs.items():
        sh(f'ip netns exec {ns} rdma link add {dev} type {link_type} netdev {ifname}')
    time.sleep(2)
    # Two servers on the receiver, one per sender; per-second reports.
    args = f'-F -s 65536 -D 1 --run_infinitely --report_gbits'
    srvs = [subprocess.Popen(f'ip netns exec ic-b ib_write_bw -d ic-db -x 1 -p {port} {args}', shell=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for port in (18601, 18602)]
    time.sleep(1.5)
    clis = [subprocess.Popen(f'ip netns exec {ns} ib_write_bw -d {dev} -x 1 -p {port} {args} 198.18.3.1',
                             shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for (ns, dev, port) in (('ic-a1', 'ic-d1', 18601), ('ic-a2', 'ic-d2', 18602))]
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            b = backlog_bytes()
            if b is not None:
                samples.append(b)
            time.sleep(0.1)

    t = threading.Thread(target=sample)
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    series = []
    for c in clis:
        c.terminate()
        try:
            out, _ = c.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            c.kill()
            out, _ = c.communicate()
        rows = []
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 5 and f[0] == '65536':
                try:
                    rows.append(float(f[3]))
                except ValueError:
                    pass
        series.append(rows)
    for s in srvs:
        s.terminate()
        s.wait()
    stats = red_stats()
    cnt = {dev: counters(dev) for (_, dev) in devs.values()}
    for ns, (_, dev) in devs.items():
        sh(f'ip netns exec {ns} rdma link delete {dev}', check=False)
    topo_down()
    sh(f'modprobe -r {module}', check=False)
    return {'provider': provider, 'gbps_per_second': series, 'backlog_samples': samples, 'red': stats,
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=int, default=20)
    ap.add_argument('--rate', type=int, default=200, help='bottleneck rate, Mbit/s')
    ap.add_argument('--providers', default='rroce,rdma_rxe')
    ap.add_argument('--json', default='/tmp/incast.json')
    a = ap.parse_args()
    results = []
    for p in a.providers.split(','):
        try:
            r = run(p, a.seconds, a.rate)
        except RuntimeError as e:
            topo_down()
            print(f'# {p}: {e}')
            continue
        r['summary'] = summarize(r, a.rate)
        results.append(r)
    print(f'incast: 2 senders -> 1 receiver through {a.rate} Mbit/s with RED ECN marking, {a.seconds} s each; '
          'medians of the second half')
    print(f'{"provider":10} {"flow1":>7} {"flow2":>7} {"goodput":>8} {"Jain":>5} {"fair@s":>6} '
          f'{"q med":>8} {"q max":>8} {"drops":>6} {"marks":>6}  counters')
    for r in results:
        s, red = r['summary'], r['red']
        c = r['counters']
        cnp = sum(v.get('np_cnp_sent', 0) for v in c.values())
        handled = sum(v.get('rp_cnp_handled', 0) for v in c.values())
        fmt = lambda v, w, p=3: f'{v:>{w}.{p}f}' if isinstance(v, float) else f'{str(v):>{w}}'
        print(f'{r["provider"]:10} {fmt(s["flow1_gbps"], 7)} {fmt(s["flow2_gbps"], 7)} {fmt(s["goodput_gbps"], 8)} '
              f'{fmt(s["jain"], 5, 2)} {str(s["first_second_within_80pct"]):>6} {str(s["backlog_median_bytes"]):>8} '
              f'{str(s["backlog_max_bytes"]):>8} {str(red["dropped"]):>6} {str(red["marked"]):>6}  '
              f'cnp_sent {cnp} cnp_handled {handled}')
        print(f'  per second: flow1 {r["gbps_per_second"][0]}')
        print(f'              flow2 {r["gbps_per_second"][1]}')
    with open(a.json, 'w') as f:
        json.dump(results, f)


if __name__ == '__main__':
    main()
