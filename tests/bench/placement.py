#!/usr/bin/env python3
"""Side-by-side benchmark of Placement's whole route table: keelson against
the real Python Placement (openstack-placement 16.0.0 under cheroot,
tests/reference/placement) serving the same database in one run.

It loads a fleet through keelson's REST API, then walks the route table:
for each route the same wrk load (loopback, --connections, --seconds) runs
against keelson and then against the reference, and it prints requests per
second, p50 and p99 latency and the ratio of each route.

The fleet (defaults):
  --providers 200 computes with VCPU, MEMORY_MB and DISK_GB, each with
      100 traits (90 standard ones every compute has, 10 of 40 custom ones)
      and 50 aggregates (drawn from 100); the first 20 computes have two
      PF children with bandwidth inventories (trees for `in_tree`);
  one project (`bench-project`, 10 users) of --consumers 10,000 consumers
      and 9 other projects of as many again, each consumer holding VCPU 1,
      MEMORY_MB 64 and DISK_GB 1 of one compute, written by POST
      /allocations in batches (the benchmark's own bulk path, still through
      keelson's API).

Routes (reads first, on the fleet; then writes, each client its own
objects; then deletes, of objects made for them beforehand):
  GET /, GET /resource_providers (all; by name, uuid, member_of, required,
  resources, in_tree), GET /resource_providers/{uuid} and its inventories,
  one inventory, usages, aggregates, traits and allocations,
  GET /resource_classes (and one), GET /traits (all, startswith:, one),
  GET /allocations/{consumer}, GET /usages (the project; project and
  user), GET /allocation_candidates (Nova's default shape);
  PUT /allocations/{new consumer}, POST /allocations (two new consumers),
  POST /resource_providers, PUT /resource_providers/{uuid} (rename),
  PUT .../traits, .../aggregates, .../inventories, .../inventories/VCPU
  (each at the generation the previous answer gave), PUT /traits/{new},
  PUT /resource_classes/{new};
  DELETE /allocations/{consumer}, /resource_providers/{uuid},
  /traits/{name}, /resource_classes/{name}.
Not walked: POST /reshaper, POST .../inventories, the per-provider DELETEs
of inventories and traits (what they run is what the PUTs run).

usage: tests/bench/placement.py [--backend mysql|postgresql|sqlite]
          [--providers 200] [--consumers 10000] [--connections 16]
          [--seconds 5] [--routes REGEX] [--json out.json]
          [--keep-database]

Needs wrk (Debian package `wrk`), the test virtualenv (tests/run sets it
up) and a release build of keelson (KEELSON_BIN, else
$CARGO_TARGET_DIR/release/keelson). A benchmark, not a test: nothing is
asserted, and CI does not run it.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import conftest  # noqa: E402  (shared helpers: processes, databases, ports)
from conftest import AllInOne, create_database, http  # noqa: E402

PROJECT = 'bench-project'
SETTLE_SECONDS = 2
# What a thread of wrk knows of itself: setup() runs in wrk's main state
# once per thread and numbers them.
THREAD_IDS = '''
local counter = 0
function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end
'''
UUID_LUA = '''
local function uuid4()
  local t = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"
  return (string.gsub(t, "[xy]", function (c)
    local v = (c == "x") and math.random(0, 15) or math.random(8, 11)
    return string.format("%x", v)
  end))
end
'''


def lua_str(s):
    # JSON's string escapes are Lua's for ASCII text.
    return json.dumps(s)


def lua_list(items):
    return '{' + ', '.join(lua_str(i) for i in items) + '}'


def random_get_script(paths):
    """GET of one of `paths`, chosen at random for each request."""
    return 'local paths = %s\nrequest = function()\n  return wrk.format("GET", paths[math.random(1, #paths)])\nend\n' % (
        lua_list(paths))


def chain_script(providers_and_generations, suffix, bodies):
    """PUT, each thread to its own provider's `suffix`, of the bodies in
    turn, at the generation the previous answer gave (@GEN@ in a body).
    A refusal (a write of the case before that was still in flight when
    the generation was read) makes the thread read its provider's
    generation again: those GETs are counted in the rate and the refusals
    among the non-2xx answers."""
    targets = '{' + ', '.join('{uuid = %s, gen = %d}' % (lua_str(u), g) for u, g in providers_and_generations) + '}'
    return THREAD_IDS + '''
local targets = %s
local bodies = %s
local n = 0
local provider, gen
local stale = false
function init(args)
  provider = "/resource_providers/" .. targets[id + 1].uuid
  gen = targets[id + 1].gen
end
function request()
  if stale then
    return wrk.format("GET", provider)
  end
  n = n + 1
  local body = (string.gsub(bodies[(n %% #bodies) + 1], "@GEN@", tostring(gen)))
  return wrk.format("PUT", provider .. %s, nil, body)
end
function response(status, headers, body)
  local g = string.match(body, '"resource_provider_generation": *(%%d+)') or string.match(body, '"generation": *(%%d+)')
  if g then gen = tonumber(g) end
  stale = status == 409
end
''' % (targets, lua_list(bodies), lua_str(suffix))


def pool_script(method, pool_file, threads):
    """`method` on the paths of a file, each thread its own share, each path
    once (a thread past its share repeats its last path)."""
    return THREAD_IDS + '''
local paths = {}
local i = 0
function init(args)
  local k = 0
  for line in io.lines(%s) do
    if k %% %d == id then paths[#paths + 1] = line end
    k = k + 1
  end
end
function request()
  i = i + 1
  return wrk.format(%s, paths[math.min(i, #paths)])
end
''' % (lua_str(pool_file), threads, lua_str(method))


def new_script(make):
    """Requests `make` builds from the thread's id, a per-thread count and
    a fresh uuid (uuid4()): every request makes a new object."""
    return THREAD_IDS + UUID_LUA + '''
local n = 0
function init(args)
  math.randomseed(os.time() + id * 7919)
end
function request()
  n = n + 1
  %s
end
''' % make


def wrk(url, path, seconds, connections, script=None, threads=1):
    args = ['wrk', '-t%d' % threads, '-c%d' % connections, '-d%ds' % seconds, '--latency', '--timeout', '10s',
            '-H', 'x-auth-token: admin', '-H', 'openstack-api-version: placement 1.39',
            '-H', 'content-type: application/json', '-H', 'accept: application/json']
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


def ok(status, what, body=None):
    if status >= 300:
        raise RuntimeError('%s: %d %s' % (what, status, body if body is not None else ''))


class Fleet:
    """What the benchmark made, as the routes need it."""

    def __init__(self, base, providers, consumers, seed=1):
        rnd = random.Random(seed)
        status, _, body = http('GET', base + '/traits?name=startswith:HW_CPU_X86_')
        ok(status, 'GET /traits')
        standard = sorted(body['traits'])
        status, _, body = http('GET', base + '/traits?name=startswith:COMPUTE_')
        standard = (standard + sorted(body['traits']))[:90]
        self.custom_traits = ['CUSTOM_BENCH_%02d' % i for i in range(40)]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for status, _, _ in pool.map(lambda t: http('PUT', base + '/traits/' + t), self.custom_traits):
                ok(status, 'PUT /traits')
        self.aggregates = [str(uuid.UUID(int=rnd.getrandbits(128), version=4)) for _ in range(100)]
        self.standard_traits = standard

        def compute(i):
            rp_uuid = str(uuid.UUID(int=random.Random(seed * 1000003 + i).getrandbits(128), version=4))
            status, _, rp = http('POST', base + '/resource_providers', {'name': 'compute-%05d' % i, 'uuid': rp_uuid})
            ok(status, 'POST /resource_providers')
            status, _, inv = http('PUT', base + '/resource_providers/%s/inventories' % rp_uuid, {
                'resource_provider_generation': rp['generation'],
                'inventories': {'VCPU': {'total': 1000000}, 'MEMORY_MB': {'total': 100000000},
                                'DISK_GB': {'total': 1000000}}})
            ok(status, 'PUT inventories')
            r = random.Random(seed * 7 + i)
            traits = standard + r.sample(self.custom_traits, 10)
            status, _, t = http('PUT', base + '/resource_providers/%s/traits' % rp_uuid, {
                'resource_provider_generation': inv['resource_provider_generation'], 'traits': traits})
            ok(status, 'PUT traits')
            status, _, _ = http('PUT', base + '/resource_providers/%s/aggregates' % rp_uuid, {
                'resource_provider_generation': t['resource_provider_generation'],
                'aggregates': r.sample(self.aggregates, 50)})
            ok(status, 'PUT aggregates')
            children = []
            if i < 20:
                for pf in range(2):
                    status, _, child = http('POST', base + '/resource_providers', {
                        'name': 'compute-%05d-pf%d' % (i, pf), 'parent_provider_uuid': rp_uuid})
                    ok(status, 'POST child')
                    status, _, _ = http('PUT', base + '/resource_providers/%s/inventories' % child['uuid'], {
                        'resource_provider_generation': child['generation'],
                        'inventories': {'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 10000000}}})
                    ok(status, 'PUT child inventories')
                    children.append(child['uuid'])
            return rp_uuid, children

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            made = list(pool.map(compute, range(providers)))
        self.computes = [u for u, _ in made]
        self.names = ['compute-%05d' % i for i in range(providers)]
        self.children = [c for _, cs in made for c in cs]
        self.consumers = {}

        # The project's consumers, then as many again in 9 other projects.
        def batch(args):
            project, start, count = args
            body = {}
            for k in range(start, start + count):
                c = str(uuid.UUID(int=random.Random('%s-%d' % (project, k)).getrandbits(128), version=4))
                rp_uuid = self.computes[k % len(self.computes)]
                body[c] = {'allocations': {rp_uuid: {'resources': {'VCPU': 1, 'MEMORY_MB': 64, 'DISK_GB': 1}}},
                           'project_id': project, 'user_id': 'bench-user-%d' % (k % 10),
                           'consumer_generation': None, 'consumer_type': 'INSTANCE'}
            # Every batch writes to every compute: concurrent batches can
            # lose the providers' generations, and are sent again, as
            # Placement's clients do with a concurrent-update 409.
            for _ in range(10):
                status, _, answer = http('POST', base + '/allocations', body, timeout=120)
                if status != 409:
                    break
            ok(status, 'POST /allocations', answer)
            return list(body)

        jobs = [(PROJECT, s, min(200, consumers - s)) for s in range(0, consumers, 200)]
        per_other = consumers // 9
        for p in range(9):
            jobs += [('other-project-%d' % p, s, min(200, per_other - s)) for s in range(0, per_other, 200)]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            for (project, _, _), made in zip(jobs, pool.map(batch, jobs)):
                self.consumers.setdefault(project, []).extend(made)


def make_pools(base, computes, seconds, rates):
    """Objects for the DELETE routes, each side its own: a pool per route
    sized for its expected rate."""
    pools = {}

    def named(kind, side, i):
        return 'CUSTOM_DOOMED_%s_%s_%d' % (kind, side.upper(), i)

    for side, scale in (('keelson', 1.0), ('python', 0.25)):
        n = {k: max(200, int(r * scale * seconds)) if r else 0 for k, r in rates.items()}
        sp = {}
        consumers = [str(uuid.uuid4()) for _ in range(n['allocations'])]

        def post(chunk):
            body = {c: {'allocations': {computes[k % len(computes)]: {'resources': {'VCPU': 1}}},
                        'project_id': 'bench-doomed', 'user_id': 'bench-user',
                        'consumer_generation': None, 'consumer_type': 'INSTANCE'} for k, c in enumerate(chunk)}
            for _ in range(10):
                status, _, answer = http('POST', base + '/allocations', body, timeout=120)
                if status != 409:
                    break
            ok(status, 'POST /allocations (pool)', answer)

        chunks = [consumers[i:i + 200] for i in range(0, len(consumers), 200)]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(post, chunks))
        sp['allocations'] = ['/allocations/' + c for c in consumers]
        providers = [str(uuid.uuid4()) for _ in range(n['providers'])]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for status, _, _ in pool.map(lambda u: http('POST', base + '/resource_providers',
                                                        {'name': 'doomed-' + u, 'uuid': u}), providers):
                ok(status, 'POST /resource_providers (pool)')
        sp['providers'] = ['/resource_providers/' + u for u in providers]
        for kind, route in (('traits', '/traits/'), ('classes', '/resource_classes/')):
            names = [named(kind.upper(), side, i) for i in range(n[kind])]
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                for status, _, _ in pool.map(lambda name: http('PUT', base + route + name), names):
                    ok(status, 'PUT %s (pool)' % route)
            sp[kind] = [route + name for name in names]
        pools[side] = sp
    return pools


def generation(base, rp_uuid):
    status, _, rp = http('GET', base + '/resource_providers/' + rp_uuid)
    ok(status, 'GET provider')
    return rp['generation']


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--backend', default='mysql')
    ap.add_argument('--providers', type=int, default=200)
    ap.add_argument('--consumers', type=int, default=10000)
    ap.add_argument('--connections', type=int, default=16)
    ap.add_argument('--seconds', type=int, default=5)
    ap.add_argument('--routes', help='only the routes whose name matches this regular expression')
    ap.add_argument('--json')
    ap.add_argument('--keep-database', action='store_true',
                    help='leave the fleet\'s database behind (to read query plans on it)')
    args = ap.parse_args()
    if not shutil.which('wrk'):
        sys.exit('wrk is not installed (apt-get install wrk)')
    if args.providers < 2 * args.connections:
        sys.exit('--providers must be at least twice --connections (each writer has a provider of its own)')
    only = re.compile(args.routes) if args.routes else None
    conns = args.connections
    workdir = tempfile.mkdtemp(prefix='kt-bench-routes-')

    procs = []
    try:
        url = create_database(args.backend, 'bench_routes')
        ks = AllInOne(procs, url, env={'RUST_LOG': 'warn'}).url
        py = conftest.ref_placement(procs, url, server='cheroot', threads=conns)[0]
        started = time.time()
        fleet = Fleet(ks, args.providers, args.consumers)
        print('fleet loaded in %.0f s: %d computes, %d PF children, %d consumers' % (
            time.time() - started, len(fleet.computes), len(fleet.children),
            sum(len(c) for c in fleet.consumers.values())), flush=True)
        rp_paths = ['/resource_providers/' + u for u in fleet.computes]
        some_consumers = fleet.consumers[PROJECT][:1000]
        rnd = random.Random(2)

        # (name, path, kind, spec): kind None is a plain GET of `path`;
        # 'random' a GET of one of spec's paths; 'script' a ready-made
        # script factory (side -> lua source), run with one wrk thread per
        # connection so that each connection owns its objects.
        cases = [
            ('GET /', '/', None, None),
            ('GET /resource_providers', '/resource_providers', None, None),
            ('GET /resource_providers?name', None, 'random',
             ['/resource_providers?name=' + n for n in fleet.names]),
            ('GET /resource_providers?uuid', None, 'random',
             ['/resource_providers?uuid=' + u for u in fleet.computes]),
            ('GET /resource_providers?member_of', None, 'random',
             ['/resource_providers?member_of=in:%s,%s' % tuple(rnd.sample(fleet.aggregates, 2)) for _ in range(50)]),
            ('GET /resource_providers?required', None, 'random',
             ['/resource_providers?required=%s,!%s' % (fleet.standard_traits[0], t) for t in fleet.custom_traits]),
            ('GET /resource_providers?resources', '/resource_providers?resources=VCPU:1,MEMORY_MB:64', None, None),
            ('GET /resource_providers?in_tree', None, 'random',
             ['/resource_providers?in_tree=' + u for u in fleet.computes[:20]]),
            ('GET /resource_providers/{uuid}', None, 'random', rp_paths),
            ('GET /resource_providers/{uuid}/inventories', None, 'random', [p + '/inventories' for p in rp_paths]),
            ('GET /resource_providers/{uuid}/inventories/VCPU', None, 'random',
             [p + '/inventories/VCPU' for p in rp_paths]),
            ('GET /resource_providers/{uuid}/usages', None, 'random', [p + '/usages' for p in rp_paths]),
            ('GET /resource_providers/{uuid}/aggregates', None, 'random', [p + '/aggregates' for p in rp_paths]),
            ('GET /resource_providers/{uuid}/traits', None, 'random', [p + '/traits' for p in rp_paths]),
            ('GET /resource_providers/{uuid}/allocations', None, 'random', [p + '/allocations' for p in rp_paths]),
            ('GET /resource_classes', '/resource_classes', None, None),
            ('GET /resource_classes/{name}', '/resource_classes/VCPU', None, None),
            ('GET /traits', '/traits', None, None),
            ('GET /traits?name=startswith:CUSTOM_', '/traits?name=startswith:CUSTOM_', None, None),
            ('GET /traits/{name}', None, 'random', ['/traits/' + t for t in fleet.custom_traits]),
            ('GET /allocations/{consumer}', None, 'random', ['/allocations/' + c for c in some_consumers]),
            ('GET /usages?project_id', '/usages?project_id=' + PROJECT, None, None),
            ('GET /usages?project_id&user_id', None, 'random',
             ['/usages?project_id=%s&user_id=bench-user-%d' % (PROJECT, u) for u in range(10)]),
            ('GET /allocation_candidates (Nova default)',
             '/allocation_candidates?limit=1000&resources=DISK_GB%3A20%2CMEMORY_MB%3A2048%2CVCPU%3A2'
             '&root_required=%21COMPUTE_STATUS_DISABLED', None, None),
        ]

        def own_providers(side):
            # Each side's writers their own computes, the fleet's last ones.
            start = len(fleet.computes) - (2 if side == 'python' else 1) * conns
            return fleet.computes[start:start + conns]

        def chained(suffix, bodies):
            def make(side, base):
                return chain_script([(u, generation(base, u)) for u in own_providers(side)], suffix, bodies)
            return make

        traits_a = fleet.standard_traits + fleet.custom_traits[:10]
        traits_b = fleet.standard_traits + fleet.custom_traits[10:20]
        put_alloc = '''
  local rp = computes[math.random(1, #computes)]
  local body = '{"allocations": {"' .. rp .. '": {"resources": {"VCPU": 1, "MEMORY_MB": 64}}}, ' ..
    '"project_id": "bench-writes", "user_id": "bench-user", "consumer_generation": null, "consumer_type": "INSTANCE"}'
  return wrk.format("PUT", "/allocations/" .. uuid4(), nil, body)'''
        post_alloc = '''
  local function one(rp)
    return '"' .. uuid4() .. '": {"allocations": {"' .. rp .. '": {"resources": {"VCPU": 1, "MEMORY_MB": 64}}}, ' ..
      '"project_id": "bench-writes", "user_id": "bench-user", "consumer_generation": null, "consumer_type": "INSTANCE"}'
  end
  local body = '{' .. one(computes[math.random(1, #computes)]) .. ', ' .. one(computes[math.random(1, #computes)]) .. '}'
  return wrk.format("POST", "/allocations", nil, body)'''
        computes_lua = 'local computes = %s\n' % lua_list(fleet.computes)

        def new(make):
            return lambda side, base: computes_lua + new_script(make.replace('SIDE', side.upper()))

        def rename(side, base):
            paths = lua_list('/resource_providers/' + u for u in own_providers(side))
            return THREAD_IDS + '''
local paths = %s
local n = 0
function request()
  n = n + 1
  return wrk.format("PUT", paths[id + 1], nil, '{"name": "renamed-SIDE-' .. id .. '-' .. (n %% 2) .. '"}')
end
'''.replace('SIDE', side) % paths

        cases += [
            ('PUT /allocations/{consumer}', '/', 'script', new(put_alloc)),
            ('POST /allocations', '/', 'script', new(post_alloc)),
            ('POST /resource_providers', '/', 'script', new(
                'return wrk.format("POST", "/resource_providers", nil, '
                '\'{"name": "new-SIDE-\' .. id .. \'-\' .. n .. \'"}\')')),
            ('PUT /resource_providers/{uuid}', '/', 'script', rename),
            ('PUT /resource_providers/{uuid}/traits', '/', 'script', chained('/traits', [
                json.dumps({'resource_provider_generation': '@GEN@', 'traits': t}).replace('"@GEN@"', '@GEN@')
                for t in (traits_a, traits_b)])),
            ('PUT /resource_providers/{uuid}/aggregates', '/', 'script', chained('/aggregates', [
                json.dumps({'resource_provider_generation': '@GEN@', 'aggregates': a}).replace('"@GEN@"', '@GEN@')
                for a in (fleet.aggregates[:50], fleet.aggregates[50:])])),
            ('PUT /resource_providers/{uuid}/inventories', '/', 'script', chained('/inventories', [
                json.dumps({'resource_provider_generation': '@GEN@', 'inventories': {
                    'VCPU': {'total': total}, 'MEMORY_MB': {'total': 100000000}, 'DISK_GB': {'total': 1000000}}})
                .replace('"@GEN@"', '@GEN@') for total in (1000000, 1000001)])),
            ('PUT /resource_providers/{uuid}/inventories/VCPU', '/', 'script', chained('/inventories/VCPU', [
                json.dumps({'resource_provider_generation': '@GEN@', 'total': total}).replace('"@GEN@"', '@GEN@')
                for total in (1000000, 1000001)])),
            ('PUT /traits/{name}', '/', 'script', new(
                'return wrk.format("PUT", "/traits/CUSTOM_NEW_SIDE_" .. id .. "_" .. n)')),
            ('PUT /resource_classes/{name}', '/', 'script', new(
                'return wrk.format("PUT", "/resource_classes/CUSTOM_NEW_SIDE_" .. id .. "_" .. n)')),
        ]
        deletes = [('DELETE /allocations/{consumer}', 'allocations', 3000),
                   ('DELETE /resource_providers/{uuid}', 'providers', 3000),
                   ('DELETE /traits/{name}', 'traits', 3000),
                   ('DELETE /resource_classes/{name}', 'classes', 3000)]
        cases = [c for c in cases if not only or only.search(c[0])]
        deletes = [d for d in deletes if not only or only.search(d[0])]
        # The objects to delete are made when the first delete case
        # starts, after the reads and writes, which they would change.
        pools = {}
        rates = {kind: 0 for kind in ('allocations', 'providers', 'traits', 'classes')}
        rates.update({kind: rate for _, kind, rate in deletes})
        for name, kind, _ in deletes:
            def make(side, base, kind=kind):
                if not pools:
                    started = time.time()
                    pools.update(make_pools(ks, fleet.computes, args.seconds, rates))
                    print('objects to delete made in %.0f s' % (time.time() - started), flush=True)
                f = os.path.join(workdir, '%s-%s.txt' % (kind, side))
                with open(f, 'w') as out:
                    out.write('\n'.join(pools[side][kind]) + '\n')
                return pool_script('DELETE', f, conns)
            cases.append((name, '/', 'script', make))

        results = {}
        lua = os.path.join(workdir, 'script.lua')
        for name, path, kind, spec in cases:
            results[name] = {}
            for label, base in (('keelson', ks), ('python', py)):
                script, threads = None, 1
                if kind == 'random':
                    source = random_get_script(spec)
                elif kind == 'script':
                    source, threads = spec(label, base), conns
                if kind is not None:
                    with open(lua, 'w') as f:
                        f.write(source)
                    script = lua
                results[name][label] = wrk(base, path or '/', args.seconds, conns, script, threads)
                # wrk leaves requests in flight at its deadline: let the
                # server finish them before the next run.
                time.sleep(SETTLE_SECONDS)
            k, p = results[name]['keelson'], results[name]['python']
            results[name]['ratio_rps'] = k['rps'] / p['rps'] if p['rps'] else float('inf')
            print('%-50s %9.0f %9.0f %8.2f %8.2f %6.1fx' % (
                name, k['rps'], p['rps'], k['p50_ms'], p['p50_ms'], results[name]['ratio_rps']), flush=True)

        print('\n| route | keelson req/s | Python req/s | keelson p50 / p99 | Python p50 / p99 | ratio |')
        print('|---|---:|---:|---:|---:|---:|')
        for name, r in results.items():
            k, p = r['keelson'], r['python']
            print('| `%s` | %s | %s | %s / %s ms | %s / %s ms | %.1f× |' % (
                name, fmt(k['rps']), fmt(p['rps']), fmt_ms(k['p50_ms']), fmt_ms(k['p99_ms']),
                fmt_ms(p['p50_ms']), fmt_ms(p['p99_ms']), r['ratio_rps']))
        for name, r in results.items():
            for label in ('keelson', 'python'):
                if r[label]['non_2xx']:
                    print('warning: %s answered %d non-2xx responses to %s' % (label, r[label]['non_2xx'], name))
        meta = {'backend': args.backend, 'providers': args.providers, 'consumers': args.consumers,
                'connections': conns, 'seconds': args.seconds, 'cpus': os.cpu_count(),
                'load_average': os.getloadavg()}
        print('\n' + json.dumps(meta))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump({'meta': meta, 'results': results}, f, indent=2)
    finally:
        for p in procs:
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        if args.keep_database:
            print('database kept: kt_%s_bench_routes' % conftest.RUN_ID)
        elif args.backend in ('mysql', 'postgresql'):
            server = conftest.MYSQL if args.backend == 'mysql' else conftest.POSTGRES
            subprocess.run([sys.executable, os.path.join(HERE, '..', 'lib', 'drop_dbs.py'),
                            'kt_%s_bench_routes' % conftest.RUN_ID, server])


def fmt(v):
    return '{:,.0f}'.format(v)


def fmt_ms(v):
    return ('%.1f' % v) if v < 100 else ('%.0f' % v)


if __name__ == '__main__':
    main()
