#!/usr/bin/env python3
"""keelson's scale curve: Nova's default GET /allocation_candidates request
(microversion 1.36, as Nova 34's scheduler sends it) against fleets of
growing size, keelson alone.

Fleets (written straight into Placement's schema by the bulk path of
tests/bench/candidates.py, not through the REST API):

  flat   N providers, each a compute as in candidates.py's `nova` fleet
         (VCPU 64 at 4.0, MEMORY_MB 256 GiB, DISK_GB 2,000; the traits of a
         libvirt x86 host and OWNER_NOVA, COMPUTE_STATUS_DISABLED on 1 in
         100; four instances each).
  trees  N providers in trees of 7: a compute root (DISK_GB, the host's
         traits) with two NUMA nodes (VCPU 32 at 4.0, MEMORY_MB 128 GiB)
         with two PFs each (bandwidth inventories, a physnet trait); four
         instances per tree, on its NUMA nodes.

Request: resources=DISK_GB:20,MEMORY_MB:2048,VCPU:2&limit=1000&
root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED (Nova's default).
Per size: the load time, p50 and p99 over --requests requests (one at a
time, after one warm-up), the candidates answered, and keelson's peak RSS
(VmHWM of the all-in-one process: gateway, inventory and candidates).

usage: tests/bench/scale.py [--backend mysql|postgresql|sqlite]
          [--keelson-bin PATH] [--sizes 1000,10000,50000,100000]
          [--fleets flat,trees] [--requests 30] [--phases] [--json out.json]
          [--keep-database]
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import candidates as bench  # noqa: E402  (the fleet writer, Nova's query, the phase log)
from conftest import AllInOne, create_database, http  # noqa: E402

GOAL_P50_MS_AT_100K = 200
BW = ['NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC']


def host_traits(f, pid, i):
    for t in bench.LIBVIRT_TRAITS:
        f.trait(pid, t)
    if i % 100 == 7:
        f.trait(pid, 'COMPUTE_STATUS_DISABLED')


def load(w, fleet, providers):
    """Writes `providers` providers of `fleet`; answers (written, the
    candidates the fleet can answer: its computes not disabled, four per
    tree)."""
    f = bench.Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB'] + BW, bench.LIBVIRT_TRAITS + ['COMPUTE_STATUS_DISABLED'] +
                    bench.NOVA_CUSTOM_TRAITS)
    computes = providers if fleet == 'flat' else providers // 7
    for i in range(computes):
        cn = f.provider('scale-cn%d' % i)
        host_traits(f, cn, i)
        if fleet == 'flat':
            f.inventory(cn, 'VCPU', 64, max_unit=64, ratio=4.0)
            f.inventory(cn, 'MEMORY_MB', 262144, reserved=512)
            f.inventory(cn, 'DISK_GB', 2000)
            for k in range(4):
                f.instance({cn: {'VCPU': 2 + 2 * (k % 2), 'MEMORY_MB': 4096, 'DISK_GB': 40}})
            continue
        f.inventory(cn, 'DISK_GB', 2000)
        numas = []
        for n in range(2):
            numa = f.provider('scale-cn%d:numa%d' % (i, n), parent=cn, root=cn)
            numas.append(numa)
            f.inventory(numa, 'VCPU', 32, max_unit=32, ratio=4.0)
            f.inventory(numa, 'MEMORY_MB', 131072, reserved=256)
            for k, physnet in enumerate(('CUSTOM_PHYSNET_PHYSNET0', 'CUSTOM_PHYSNET_PHYSNET1')):
                pf = f.provider('scale-cn%d:numa%d:pf%d' % (i, n, k), parent=numa, root=cn)
                for rc in BW:
                    f.inventory(pf, rc, 10000000)
                f.trait(pf, physnet)
        for k in range(4):
            f.instance({numas[k % 2]: {'VCPU': 2 + 2 * (k % 2), 'MEMORY_MB': 4096}, cn: {'DISK_GB': 40}})
    written = f.write()
    up = sum(1 for i in range(computes) if i % 100 != 7)
    # A tree answers each way of taking VCPU and MEMORY_MB from its two
    # NUMA nodes: four candidates.
    return written, up if fleet == 'flat' else 4 * up


def run(fleet, size, args):
    procs = []
    url = None
    try:
        url = create_database(args.backend, 'bench_scale_%s_%d' % (fleet, size))
        log = 'warn,keelson_candidates::phases=debug' if args.phases else 'warn'
        server = AllInOne(procs, url, env={'RUST_LOG': log})
        for t in bench.NOVA_CUSTOM_TRAITS:
            assert http('PUT', server.url + '/traits/' + t, version='1.6')[0] in (201, 204)
        started = time.monotonic()
        w = bench.Writer(url)
        written, can_answer = load(w, fleet, size)
        w.close()
        loaded = time.monotonic() - started
        query = bench.nova_query(bench.NOVA_FLAVOR, bench.NOVA_LIMIT, bench.NOVA_ROOT_REQUIRED)
        phase_log = bench.PhaseLog(server.proc) if args.phases else None
        bench.get(server.url, query, bench.NOVA_VERSION)  # warm-up
        if phase_log is not None:
            phase_log.take()
        times, answers, phases = [], set(), {}
        load_before = os.getloadavg()
        for _ in range(args.requests):
            took, n, summaries = bench.get(server.url, query, bench.NOVA_VERSION)
            times.append(took)
            answers.add((n, summaries))
            if phase_log is not None:
                for phase, ms in phase_log.take().items():
                    phases.setdefault(phase, []).append(ms)
        s = bench.summary(times, [a[0] for a in answers])
        result = {'fleet': fleet, 'providers': written, 'load_s': loaded, 'keelson': s,
                  'expected_candidates': min(1000, can_answer), 'answers': sorted(answers),
                  'keelson_peak_rss_mib': bench.peak_rss_mib(server.proc.p.pid),
                  'loadavg_before': load_before, 'loadavg_after': os.getloadavg()}
        if phases:
            result['keelson_phases_median_ms'] = {p: statistics.median(ms) for p, ms in phases.items()}
        if any(a[0] != min(1000, can_answer) for a in answers):
            result['warning'] = 'answers %s, expected %d candidates' % (sorted(answers), min(1000, can_answer))
        print('%-5s %7d providers (loaded in %.0fs): p50 %.1f ms, p99 %.1f ms, peak RSS %.0f MiB, answers %s%s' % (
            fleet, written, loaded, s['median_ms'], s['p99_ms'], result['keelson_peak_rss_mib'], sorted(answers),
            ('; phases ' + ' '.join('%s=%.1f' % kv for kv in result['keelson_phases_median_ms'].items()))
            if phases else ''), flush=True)
        return result
    finally:
        for proc in procs:
            proc.stop()
        if url is not None and args.keep_database:
            print('kept %s' % url, flush=True)
        elif url is not None:
            bench.drop_database(url)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--backend', default='mysql', choices=['mysql', 'postgresql', 'sqlite'])
    ap.add_argument('--keelson-bin', default=os.environ.get('KEELSON_BIN'))
    ap.add_argument('--sizes', default='1000,10000,50000,100000', help='providers per fleet')
    ap.add_argument('--fleets', default='flat,trees')
    ap.add_argument('--requests', type=int, default=30)
    ap.add_argument('--phases', action='store_true', help="print the medians of keelson's per-request phases")
    ap.add_argument('--json')
    ap.add_argument('--keep-database', action='store_true',
                    help="leave each fleet's database behind (to read query plans on it)")
    args = ap.parse_args()
    if not args.keelson_bin:
        sys.exit('--keelson-bin or $KEELSON_BIN is required')
    os.environ['KEELSON_BIN'] = os.path.abspath(args.keelson_bin)
    results = []
    for fleet in args.fleets.split(','):
        for size in [int(x) for x in args.sizes.split(',')]:
            results.append(run(fleet, size, args))
    print('\nNova\'s default GET /allocation_candidates (1.36) on %s, keelson alone, %s, %d CPUs' % (
        args.backend, args.keelson_bin, os.cpu_count()))
    print('%-6s %10s %10s %10s %12s %10s' % ('fleet', 'providers', 'p50 ms', 'p99 ms', 'peak RSS MiB', 'load s'))
    for r in results:
        print('%-6s %10d %10.1f %10.1f %12.0f %10.0f' % (r['fleet'], r['providers'], r['keelson']['median_ms'],
                                                        r['keelson']['p99_ms'], r['keelson_peak_rss_mib'], r['load_s']))
        if 'warning' in r:
            print('  warning: ' + r['warning'])
    largest = [r for r in results if r['providers'] >= 100000]
    for r in largest:
        print('goal p50 < %d ms at %d providers (%s): %s' % (
            GOAL_P50_MS_AT_100K, r['providers'], r['fleet'],
            'met' if r['keelson']['median_ms'] < GOAL_P50_MS_AT_100K else 'not met'))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'meta': {'backend': args.backend, 'keelson_bin': args.keelson_bin, 'cpus': os.cpu_count()},
                       'results': results}, f, indent=2)


if __name__ == '__main__':
    main()
