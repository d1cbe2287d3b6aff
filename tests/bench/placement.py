#!/usr/bin/env python3
"""Side-by-side benchmark: keelson against the real Python Placement
(openstack-placement 16.0.0, tests/reference/placement) serving the same
database in one run.

For each of GET /resource_providers, PUT /allocations/{consumer} and
GET /usages it runs the same wrk load (loopback only, bounded in time)
against both servers and reports requests per second, p50 and p99 latency
and the keelson/Python ratios.

usage: tests/bench/placement.py [--backend mysql|postgresql|sqlite]
          [--providers 200] [--connections 16] [--seconds 10] [--json out.json]

Needs wrk (Debian package `wrk`), the test virtualenv (tests/run sets it
up) and a release build of keelson.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import conftest  # noqa: E402  (shared helpers: processes, databases, ports)
from conftest import AllInOne, create_database, http  # noqa: E402

PUT_LUA = r'''
math.randomseed(os.time() + %(seed)d)
local providers = {%(providers)s}
local function uuid()
  local t = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"
  return (string.gsub(t, "[xy]", function (c)
    local v = (c == "x") and math.random(0, 15) or math.random(8, 11)
    return string.format("%%x", v)
  end))
end
request = function()
  local rp = providers[math.random(1, #providers)]
  local body = '{"allocations": {"' .. rp .. '": {"resources": {"VCPU": 1, "MEMORY_MB": 64}}}, ' ..
    '"project_id": "bench-project", "user_id": "bench-user", "consumer_generation": null, "consumer_type": "INSTANCE"}'
  return wrk.format("PUT", "/allocations/" .. uuid(), nil, body)
end
'''


def wrk(url, path, seconds, connections, script=None, headers=None):
    args = ['wrk', '-t1', '-c%d' % connections, '-d%ds' % seconds, '--latency', '--timeout', '10s',
            '-H', 'x-auth-token: admin', '-H', 'openstack-api-version: placement 1.39',
            '-H', 'content-type: application/json']
    if script:
        args += ['-s', script]
    out = subprocess.run(args + [url + path], capture_output=True, text=True, timeout=seconds + 60).stdout
    rps = float(re.search(r'Requests/sec:\s+([\d.]+)', out).group(1))

    def pct(p):
        m = re.search(r'\s%s%%\s+([\d.]+)(us|ms|s)' % p, out)
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == 'us' else value * 1000 if unit == 's' else value

    non2xx = re.search(r'Non-2xx or 3xx responses: (\d+)', out)
    return {'rps': rps, 'p50_ms': pct(50), 'p99_ms': pct(99), 'non_2xx': int(non2xx.group(1)) if non2xx else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--backend', default='mysql')
    ap.add_argument('--providers', type=int, default=200)
    ap.add_argument('--connections', type=int, default=16)
    ap.add_argument('--seconds', type=int, default=10)
    ap.add_argument('--json')
    args = ap.parse_args()
    if not shutil.which('wrk'):
        sys.exit('wrk is not installed (apt-get install wrk)')

    procs = []
    try:
        url = create_database(args.backend, 'bench')
        ks = AllInOne(procs, url, env={'RUST_LOG': 'warn'}).url
        py = conftest_python_placement(procs, url)
        rps = []
        for i in range(args.providers):
            status, _, rp = http('POST', ks + '/resource_providers', {'name': 'bench-%d' % i})
            http('PUT', ks + '/resource_providers/%s/inventories' % rp['uuid'], {
                'resource_provider_generation': rp['generation'],
                'inventories': {'VCPU': {'total': 1000000}, 'MEMORY_MB': {'total': 100000000}}})
            rps.append(rp['uuid'])
        lua = tempfile.mktemp(suffix='.lua')
        results = {}
        cases = [('GET /resource_providers', '/resource_providers', None),
                 ('PUT /allocations/{consumer}', '/', 'put'),
                 ('GET /usages', '/usages?project_id=bench-project', None)]
        for name, path, kind in cases:
            results[name] = {}
            for label, base in (('keelson', ks), ('python', py)):
                script = None
                if kind == 'put':
                    with open(lua, 'w') as f:
                        f.write(PUT_LUA % {'seed': len(results) * 7 + (1 if label == 'python' else 0),
                                           'providers': ', '.join('"%s"' % u for u in rps)})
                    script = lua
                results[name][label] = wrk(base, path, args.seconds, args.connections, script)
        print('\n%-30s %10s %10s %9s %9s %9s %9s %8s' % ('operation', 'keelson/s', 'python/s', 'k p50ms', 'py p50ms',
                                                        'k p99ms', 'py p99ms', 'ratio'))
        for name, r in results.items():
            k, p = r['keelson'], r['python']
            ratio = k['rps'] / p['rps'] if p['rps'] else float('inf')
            r['ratio_rps'] = ratio
            print('%-30s %10.0f %10.0f %9.2f %9.2f %9.2f %9.2f %7.1fx' % (
                name, k['rps'], p['rps'], k['p50_ms'], p['p50_ms'], k['p99_ms'], p['p99_ms'], ratio))
            for label in ('keelson', 'python'):
                if r[label]['non_2xx']:
                    print('  warning: %s answered %d non-2xx responses' % (label, r[label]['non_2xx']))
        meta = {'backend': args.backend, 'providers': args.providers, 'connections': args.connections,
                'seconds': args.seconds, 'cpus': os.cpu_count()}
        if args.json:
            with open(args.json, 'w') as f:
                json.dump({'meta': meta, 'results': results}, f, indent=2)
    finally:
        for p in procs:
            p.stop()


def conftest_python_placement(procs, url):
    """The reference served by cheroot (a production-grade threaded WSGI
    server) on the same database."""
    return conftest.ref_placement(procs, url, server='cheroot', threads=16)[0]


if __name__ == '__main__':
    main()
