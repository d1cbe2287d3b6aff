#!/usr/bin/env python3
"""Controller benchmark, on loopback against a real 3-member etcd
(Debian etcd-server) and three `keelson controller` processes:

1. ctrlstatus round trips per second and p50/p99 latency through the Rust
   client library (`keelson ctl bench-status`), sequential and concurrent,
   answered by the primary and by a standby;
2. failover time: kill -9 the primary, measure until a node reports a new
   primary of a higher term (`keelson ctl wait-primary --min-term`,
   polling every 50 ms), restart the killed node, repeat; at lease TTL 2 s
   and 5 s. The goal is TTL + 1 s every time.

usage: tests/bench/controller.py [--kills 20] [--ttls 2,5] [--requests 20000]
                                 [--json out.json]

Uses the keelson binary the tests use (KEELSON_BIN, else the release or
debug build); numbers from a debug build are not representative.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

from conftest import keelson_bin  # noqa: E402
from test_controller import Controllers, EtcdCluster, Started, ctl, primary_of, settled, wait_for  # noqa: E402


def bench_status(addr, requests, concurrency):
    r = ctl([addr], 'bench-status', '--requests', str(requests), '--concurrency', str(concurrency), timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    return json.loads(r.stdout)


def failover_run(ttl, kills, started):
    etcd = EtcdCluster(started)
    cs = Controllers(started, etcd, ttl=ttl)
    times = []
    for i in range(kills):
        sts = wait_for('settled', lambda: settled(cs), 60, logs=cs.logs)
        old = primary_of(sts)
        term = sts[old]['term']
        t0 = time.monotonic()
        cs.kill(old, signal.SIGKILL)
        r = ctl(cs.addrs(), 'wait-primary', '--timeout', '%ds' % (ttl * 4 + 10), '--interval', '50ms', '--min-term', str(term + 1))
        dt = time.monotonic() - t0
        if r.returncode != 0:
            raise RuntimeError('no new primary after kill %d: %s\n%s' % (i + 1, r.stderr, cs.logs()))
        times.append(dt)
        print('  TTL %ds kill %2d/%d: %s (term %d) -> %s in %.2fs' % (ttl, i + 1, kills, old, term, r.stdout.split()[1], dt), flush=True)
        cs.start(old)
    return times


def summarize(times, ttl):
    s = sorted(times)
    pick = lambda p: s[min(len(s) - 1, int(round((len(s) - 1) * p)))]  # noqa: E731
    return {
        'ttl': ttl, 'kills': len(s), 'min': s[0], 'p50': pick(0.5), 'p90': pick(0.9), 'max': s[-1],
        'mean': statistics.mean(s), 'within_ttl_plus_1s': sum(1 for t in s if t <= ttl + 1.0),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--kills', type=int, default=20, help='primary kills per TTL (default 20)')
    ap.add_argument('--ttls', default='2,5', help='lease TTLs in seconds (default 2,5)')
    ap.add_argument('--requests', type=int, default=20000, help='ctrlstatus calls per latency run')
    ap.add_argument('--json', help='also write the results here')
    args = ap.parse_args()
    print('keelson binary: %s' % keelson_bin())
    results = {'status': [], 'failover': []}

    started = Started()
    try:
        etcd = EtcdCluster(started)
        cs = Controllers(started, etcd, ttl=5)
        sts = wait_for('settled', lambda: settled(cs), 60, logs=cs.logs)
        primary = primary_of(sts)
        standby = next(n for n in cs.names if n != primary)
        print('\nctrlstatus round trips (loopback, %d calls each)' % args.requests)
        print('  %-8s %-11s %12s %10s %10s' % ('node', 'concurrency', 'calls/s', 'p50 us', 'p99 us'))
        for node, role in ((primary, 'primary'), (standby, 'standby')):
            for conc in (1, 16):
                r = bench_status(cs.addr(node), args.requests, conc)
                r['node'] = role
                results['status'].append(r)
                print('  %-8s %-11d %12.0f %10.0f %10.0f' % (role, conc, r['rps'], r['p50_us'], r['p99_us']), flush=True)
    finally:
        started.cleanup()

    for ttl in [int(t) for t in args.ttls.split(',') if t]:
        print('\nfailover, lease TTL %ds, %d kills' % (ttl, args.kills))
        started = Started()
        try:
            times = failover_run(ttl, args.kills, started)
        finally:
            started.cleanup()
        s = summarize(times, ttl)
        results['failover'].append(dict(s, times=times))
        print('  TTL %ds: min %.2fs  p50 %.2fs  p90 %.2fs  max %.2fs  mean %.2fs; within TTL+1s: %d/%d'
              % (ttl, s['min'], s['p50'], s['p90'], s['max'], s['mean'], s['within_ttl_plus_1s'], s['kills']), flush=True)

    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=2)


if __name__ == '__main__':
    main()
