#!/usr/bin/env python3
"""Stack engine benchmark: keelson and the real Heat side by side, in one run.

Creates and deletes generated stacks of OS::Heat::TestResource (no waits)
on each server and reports wall time from the POST/DELETE to the terminal
status (polled every 5 % of the time elapsed, 10 to 100 ms apart), the
engines' peak resident memory (VmHWM of every engine process) and the
ratio Heat/keelson.

Shapes: chain (r_i depends on r_{i-1}), fanout (r0, then N-1 resources
depending on r0) and fanin (r0 -> N-2 middles -> one sink: a wide
fan-out/fan-in), and group: one OS::Heat::ResourceGroup of N TestResources
(a nested stack) created, scaled down to N/2 with a stack update, then
deleted (the `scale_s` column).

keelson: two `keelson engine` processes and a `keelson gateway` on a fresh
MariaDB database. Heat: openstack-heat 27.0.1 from PyPI, installed and
started by tests/reference/heat (--engines heat-engine processes and
heat-api, on a MariaDB database and a RabbitMQ virtual host of the run's
own; the MariaDB and RabbitMQ servers must be running on loopback).

usage: tests/bench/heat.py [--sizes 200,1000] [--shapes chain,fanout,fanin]
                           [--reference-sizes 200] [--no-reference]
                           [--json out.json]
Uses the keelson binary the tests use (KEELSON_BIN, else the release build).
"""
import argparse
import json
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

from conftest import create_database  # noqa: E402
from heat import Mesh, ReferenceHeat  # noqa: E402


def template(shape, n):
    if shape == 'group':
        return {'heat_template_version': '2021-04-16', 'resources': {'group': {
            'type': 'OS::Heat::ResourceGroup',
            'properties': {'count': n, 'resource_def': {
                'type': 'OS::Heat::TestResource', 'properties': {'value': 'v%index%'}}}}}}
    res = {}
    for i in range(n):
        r = {'type': 'OS::Heat::TestResource', 'properties': {'value': 'v%d' % i}}
        if shape == 'chain' and i > 0:
            r['depends_on'] = ['r%d' % (i - 1)]
        elif shape == 'fanout' and i > 0:
            r['depends_on'] = ['r0']
        elif shape == 'fanin' and 0 < i < n - 1:
            r['depends_on'] = ['r0']
        elif shape == 'fanin' and i == n - 1:
            r['depends_on'] = ['r%d' % j for j in range(1, n - 1)]
        res['r%d' % i] = r
    return {'heat_template_version': '2021-04-16', 'resources': res}


def peak_rss_mib(pids):
    total = 0
    for pid in pids:
        try:
            with open('/proc/%d/status' % pid) as f:
                for line in f:
                    if line.startswith('VmHWM:'):
                        total += int(line.split()[1])
        except OSError:
            pass
    return round(total / 1024, 1)


def poll_interval(elapsed):
    """5 % of the time elapsed, between 10 and 100 ms: the measuring error
    stays a small fraction of the figure on both sides (a fixed 100 ms poll
    adds up to 100 ms to a 0.4 s stack, nothing that matters to a 30 s one)
    and neither API is polled harder than 10 times a second after the
    first 2 s."""
    return min(0.1, max(0.01, elapsed * 0.05))


def wait(heat, sid, statuses, t0, timeout):
    """Polls GET /stacks/{id} until one of `statuses` ('GONE': a 404 or
    DELETE_COMPLETE); any other terminal status fails."""
    while True:
        elapsed = time.monotonic() - t0
        if elapsed > timeout:
            raise AssertionError('stack %s not %s after %ss' % (sid, statuses, timeout))
        status, _, doc = heat.call('GET', '/stacks/%s' % sid)
        if status == 404 and 'GONE' in statuses:
            return None
        assert status == 200, (status, doc)
        st = doc['stack']['stack_status']
        if st in statuses or ('GONE' in statuses and st == 'DELETE_COMPLETE'):
            return doc['stack']
        if not st.endswith('IN_PROGRESS'):
            raise AssertionError('stack %s ended %s: %s' % (sid, st, doc['stack'].get('stack_status_reason')))
        time.sleep(poll_interval(time.monotonic() - t0))


def run_one(heat, shape, n, timeout):
    name = 'bench-%s-%d-%s' % (shape, n, uuid.uuid4().hex[:6])
    t0 = time.monotonic()
    sid = heat.create(name, template(shape, n))
    accepted = time.monotonic() - t0
    st = wait(heat, sid, ('CREATE_COMPLETE',), t0, timeout)
    create = time.monotonic() - t0
    assert st['stack_status'] == 'CREATE_COMPLETE'
    scale = None
    if shape == 'group':
        t0 = time.monotonic()
        heat.update(name, sid, template(shape, n // 2))
        wait(heat, sid, ('UPDATE_COMPLETE',), t0, timeout)
        scale = time.monotonic() - t0
    t0 = time.monotonic()
    heat.delete(name, sid)
    wait(heat, sid, ('GONE',), t0, timeout)
    delete = time.monotonic() - t0
    out = {'create_s': round(create, 2), 'create_accepted_s': round(accepted, 2), 'delete_s': round(delete, 2)}
    if scale is not None:
        out['scale_s'] = round(scale, 2)
    return out


class Started(list):
    pass


def keelson_runs(sizes, shapes, timeout):
    procs = Started()
    try:
        mesh = Mesh(procs, create_database('mysql', 'bench_heat_%s' % uuid.uuid4().hex[:6]), engines=2)
        out = {}
        for n in sizes:
            for shape in shapes:
                r = run_one(mesh.heat, shape, n, timeout)
                r['engines_peak_rss_mib'] = peak_rss_mib([e.p.pid for e in mesh.engines])
                out['%s-%d' % (shape, n)] = r
                print('keelson %-7s %5d: %s' % (shape, n, r), flush=True)
        return out
    finally:
        for p in procs:
            p.stop()


def reference_runs(sizes, shapes, timeout, engines):
    procs = Started()
    ref = None
    try:
        ref = ReferenceHeat(procs, engines=engines)
        out = {}
        for n in sizes:
            for shape in shapes:
                r = run_one(ref.heat, shape, n, timeout)
                r['engines_peak_rss_mib'] = peak_rss_mib(ref.engine_process_ids())
                out['%s-%d' % (shape, n)] = r
                print('heat    %-7s %5d: %s' % (shape, n, r), flush=True)
        return out
    finally:
        if ref is not None:
            ref.stop()
        for p in procs:
            p.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--sizes', default='200,1000')
    ap.add_argument('--shapes', default='chain,fanout,fanin')
    ap.add_argument('--reference-sizes', default='200')
    ap.add_argument('--no-reference', action='store_true')
    ap.add_argument('--engines', type=int, default=2)
    ap.add_argument('--timeout', type=int, default=3600)
    ap.add_argument('--json')
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(',')]
    shapes = a.shapes.split(',')
    result = {'keelson': keelson_runs(sizes, shapes, a.timeout)}
    if not a.no_reference:
        result['heat'] = reference_runs([int(x) for x in a.reference_sizes.split(',')], shapes, a.timeout, a.engines)
        ratios = {}
        for k, ref in result['heat'].items():
            mine = result['keelson'].get(k)
            if mine:
                ratios[k] = {'create_x': round(ref['create_s'] / mine['create_s'], 1),
                             'delete_x': round(ref['delete_s'] / mine['delete_s'], 1)}
                if 'scale_s' in ref and 'scale_s' in mine:
                    ratios[k]['scale_x'] = round(ref['scale_s'] / mine['scale_s'], 1)
        result['ratio'] = ratios
        for k, r in ratios.items():
            print('ratio   %-13s create %5.1fx  delete %5.1fx%s' % (
                k, r['create_x'], r['delete_x'], '  scale %5.1fx' % r['scale_x'] if 'scale_x' in r else ''))
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
