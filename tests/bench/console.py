#!/usr/bin/env python3
"""The console's fleet view on a fleet of --providers providers: how long
headless Chromium takes to show it, against a budget.

It starts `keelson all-in-one` on a fresh database, loads a fleet through
the REST API (trees of a compute node with two NUMA nodes and a PF,
traits, four aggregates, an allocation per tree; eight clients at once),
then:

  endpoint  GET /keelson/v1/console/fleet?limit=<providers> --runs times:
            the time to the whole answer (the inventory service's read and
            the gateway's JSON)
  page      the page /keelson/console/#fleet loaded --runs times in a
            fresh navigation of Debian's headless Chromium (chromedriver,
            selenium): time from the navigation's start to the page's
            marker (document.documentElement.dataset.fleetRendered, set
            when every provider row and bar is in the document)

and prints p50 / p99 of each, and whether the page's p99 is within
--budget seconds (exit status 1 when not). With --screenshot FILE it saves
the view (the README's docs/console.png is taken this way).

usage: tests/bench/console.py [--backend sqlite|mysql|postgresql]
          [--providers 1000] [--runs 20] [--budget 1.0]
          [--screenshot docs/console.png] [--json out.json]

Needs chromium and chromium-driver (Debian), the test virtualenv (tests/run
sets it up, with selenium) and a release build of keelson (KEELSON_BIN,
else $CARGO_TARGET_DIR/release/keelson).
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

from conftest import AllInOne, create_database, http, new_uuid  # noqa: E402
from test_console import Browser  # noqa: E402

AGGREGATES = [new_uuid() for _ in range(4)]


def ok(url, method, path, body=None):
    status, _, answer = http(method, url + path, body)
    assert status in (200, 204), (method, path, status, answer)
    return answer


def tree(url, i):
    """One compute node with two NUMA nodes and a PF, its traits,
    aggregate and an allocation."""
    root = new_uuid()
    ok(url, 'POST', '/resource_providers', {'name': 'compute-%04d' % i, 'uuid': root})
    children = {}
    for child in ('numa0', 'numa1', 'pf0'):
        children[child] = new_uuid()
        ok(url, 'POST', '/resource_providers', {'name': 'compute-%04d-%s' % (i, child), 'uuid': children[child],
                                                'parent_provider_uuid': root})
    ok(url, 'PUT', '/resource_providers/%s/inventories' % root, {
        'resource_provider_generation': 0, 'inventories': {'DISK_GB': {'total': 2000, 'reserved': 20}}})
    for numa in ('numa0', 'numa1'):
        ok(url, 'PUT', '/resource_providers/%s/inventories' % children[numa], {
            'resource_provider_generation': 0, 'inventories': {
                'VCPU': {'total': 32, 'allocation_ratio': 4.0}, 'MEMORY_MB': {'total': 131072, 'reserved': 2048}}})
    ok(url, 'PUT', '/resource_providers/%s/inventories' % children['pf0'], {
        'resource_provider_generation': 0, 'inventories': {'SRIOV_NET_VF': {'total': 64}}})
    traits = ['HW_CPU_X86_AVX2'] + (['COMPUTE_STATUS_DISABLED'] if i % 17 == 0 else [])
    ok(url, 'PUT', '/resource_providers/%s/traits' % root, {'resource_provider_generation': 1, 'traits': traits})
    ok(url, 'PUT', '/resource_providers/%s/traits' % children['pf0'],
       {'resource_provider_generation': 1, 'traits': ['HW_NIC_SRIOV']})
    ok(url, 'PUT', '/resource_providers/%s/aggregates' % root,
       {'resource_provider_generation': 2, 'aggregates': [AGGREGATES[i % len(AGGREGATES)]]})
    allocations = {children['numa0']: {'resources': {'VCPU': 1 + (i * 7) % 32, 'MEMORY_MB': 1024 * (1 + i % 96)}},
                   root: {'resources': {'DISK_GB': 10 + (i * 13) % 1900}}}
    if i % 65:
        allocations[children['pf0']] = {'resources': {'SRIOV_NET_VF': i % 65}}
    ok(url, 'PUT', '/allocations/%s' % new_uuid(), {
        'allocations': allocations, 'project_id': new_uuid(), 'user_id': new_uuid(), 'consumer_generation': None, 'consumer_type': 'INSTANCE'})


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--backend', default='sqlite')
    ap.add_argument('--providers', type=int, default=1000)
    ap.add_argument('--runs', type=int, default=20)
    ap.add_argument('--budget', type=float, default=1.0, help='seconds the page p99 may take')
    ap.add_argument('--screenshot')
    ap.add_argument('--json')
    args = ap.parse_args()
    procs = []
    browser = None
    try:
        aio = AllInOne(procs, create_database(args.backend, 'console_bench_%s' % new_uuid()[:8]))
        trees = max(1, args.providers // 4)
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: tree(aio.url, i), range(trees)))
        load_s = time.monotonic() - started
        providers = trees * 4
        print('fleet: %d providers in %d trees loaded in %.1f s' % (providers, trees, load_s))

        endpoint = []
        for _ in range(args.runs):
            t = time.monotonic()
            req = urllib.request.Request(aio.url + '/keelson/v1/console/fleet?limit=%d' % min(providers, 5000),
                                         headers={'x-auth-token': 'admin', 'accept': 'application/json'})
            with urllib.request.urlopen(req, timeout=60) as r:
                page = json.loads(r.read())
            endpoint.append(time.monotonic() - t)
            assert len(page['providers']) == providers, len(page['providers'])

        browser = Browser()
        rendered = []
        for run in range(args.runs):
            browser.open(aio.url + '/keelson/console/?run=%d#fleet' % run)
            ms = browser.wait('document.documentElement.dataset.fleetRendered', timeout=120, what='fleet rendered')
            rows = browser.js("return document.querySelectorAll('#fleet-trees .provider').length")
            assert rows == providers, rows
            rendered.append(float(ms) / 1000)
        severe = browser.severe()
        assert severe == [], severe
        if args.screenshot:
            browser.driver.set_window_size(1440, 900)
            browser.open(aio.url + '/keelson/console/#fleet')
            browser.wait('document.documentElement.dataset.fleetRendered', timeout=120)
            browser.driver.save_screenshot(args.screenshot)
            print('screenshot:', args.screenshot)

        result = {
            'backend': args.backend, 'providers': providers, 'runs': args.runs, 'load_s': round(load_s, 1),
            'endpoint_p50_ms': round(percentile(endpoint, 50) * 1000, 1),
            'endpoint_p99_ms': round(percentile(endpoint, 99) * 1000, 1),
            'page_p50_ms': round(percentile(rendered, 50) * 1000, 1),
            'page_p99_ms': round(percentile(rendered, 99) * 1000, 1),
            'page_mean_ms': round(statistics.mean(rendered) * 1000, 1),
            'budget_ms': args.budget * 1000,
        }
        print('| measure | p50 | p99 |')
        print('|---|---:|---:|')
        print('| GET /keelson/v1/console/fleet (%d providers) | %.1f ms | %.1f ms |' % (
            providers, result['endpoint_p50_ms'], result['endpoint_p99_ms']))
        print('| fleet page, navigation to rendered (headless Chromium) | %.0f ms | %.0f ms |' % (
            result['page_p50_ms'], result['page_p99_ms']))
        within = result['page_p99_ms'] <= result['budget_ms']
        print('budget %.0f ms: %s' % (result['budget_ms'], 'within' if within else 'OVER'))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(result, f, indent=2)
        return 0 if within else 1
    finally:
        if browser:
            browser.quit()
        for p in reversed(procs):
            p.stop()


if __name__ == '__main__':
    sys.exit(main())
