#!/usr/bin/env python3
"""Side-by-side benchmark of GET /allocation_candidates (microversion 1.39):
keelson against the real Python Placement (openstack-placement 16.0.0,
tests/reference/placement) serving the same database in one run.

Scenarios (each on its own database, both servers started on it):

  flat     2,000 flat compute nodes (VCPU, MEMORY_MB) and 10 sharing storage
           providers (DISK_GB, MISC_SHARES_VIA_AGGREGATE), each sharing
           with 200 computes through an aggregate; half the computes hold
           an instance.  Request: VCPU:1, MEMORY_MB:1024, DISK_GB:100
           (2,000 candidates, each with a shared disk).
  numa     1,000 NUMA trees: a compute root (DISK_GB) with 2 NUMA nodes
           (VCPU, MEMORY_MB) with 2 PFs each (SRIOV_NET_VF,
           NET_BW_EGR_KILOBIT_PER_SEC, NET_BW_IGR_KILOBIT_PER_SEC; physnet
           traits); one instance per tree.  Request: 3 granular groups,
           group_policy=isolate (a compute group and two NIC groups on
           different physnets: 8 candidates per tree, 8,000 in all).
  wide     one root (VCPU, MEMORY_MB, DISK_GB) with 64 children of 8
           SRIOV_NET_VF each.  Request: the unsuffixed group and 4 granular
           groups of one VF, group_policy=isolate: 64x63x62x61 candidates,
           so both servers run with [placement] max_allocation_candidates
           (--wide-cap, default 1000), as operators do for such trees
           (upstream bug 2126751).

Fleets are written straight into Placement's schema (the schema the
reference creates, with its column rules: explicit ids, root and parent
ids, timestamps; custom traits through the API), which takes seconds where
the REST API would take minutes.

Requests are sent one at a time (latency, not throughput), interleaved:
rounds of --keelson-per-round requests to keelson and one to the reference,
until the reference has answered --requests times or --seconds are up (at
least 3 rounds), so that both see the same machine.  The output gives, per scenario, the candidate count (checked equal on
both servers), median and p99 latency, the ratio python/keelson of the
medians, and keelson's peak RSS (VmHWM of its process).

usage: tests/bench/candidates.py [--backend mysql|postgresql|sqlite]
          [--keelson-bin PATH] [--scenarios flat,numa,wide] [--requests 30]
          [--seconds 40] [--keelson-per-round 5] [--wide-cap 1000]
          [--json out.json]

--keelson-bin defaults to $KEELSON_BIN (a release build for real numbers).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time
import urllib.parse
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import conftest  # noqa: E402  (shared helpers: processes, databases, ports)
from conftest import AllInOne, create_database, http  # noqa: E402

VERSION = '1.39'
SHARING = 'MISC_SHARES_VIA_AGGREGATE'


# ---- writing fleets straight into Placement's schema -------------------------

class Writer:
    """Bulk inserts into one Placement database through a DB-API driver."""

    def __init__(self, url):
        scheme, rest = url.split('://', 1)
        self.kind = scheme.split('+')[0]
        if self.kind == 'sqlite':
            import sqlite3
            self.conn = sqlite3.connect(rest[1:])
            self.conn.execute('PRAGMA foreign_keys = ON')
            self.mark = '?'
        else:
            p = urllib.parse.urlparse('x://' + rest)
            db = p.path.lstrip('/')
            if self.kind == 'mysql':
                import pymysql
                self.conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root',
                                            password=p.password or '', database=db, charset='utf8mb4')
            elif self.kind == 'postgresql':
                import psycopg2
                self.conn = psycopg2.connect(host=p.hostname, port=p.port or 5432, user=p.username or 'postgres',
                                             password=p.password or None, dbname=db)
            else:
                raise ValueError(url)
            self.mark = '%s'
        self.now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S')
        self.next_id = {}

    def one(self, sql, params=()):
        cur = self.conn.cursor()
        cur.execute(sql.replace('?', self.mark), params)
        row = cur.fetchone()
        cur.close()
        return row

    def ids(self, table, names):
        """name -> id for resource_classes / traits."""
        cur = self.conn.cursor()
        cur.execute('SELECT id, name FROM %s' % table)
        found = {name: i for i, name in cur.fetchall()}
        cur.close()
        missing = [n for n in names if n not in found]
        if missing:
            raise RuntimeError('%s missing from %s' % (missing, table))
        return {n: found[n] for n in names}

    def new_ids(self, table, count):
        """`count` fresh ids for `table` (explicit ids let one pass write
        parents, roots and children)."""
        if table not in self.next_id:
            self.next_id[table] = (self.one('SELECT MAX(id) FROM %s' % table)[0] or 0) + 1
        start = self.next_id[table]
        self.next_id[table] += count
        return range(start, start + count)

    def insert(self, table, columns, rows, chunk=2000):
        if not rows:
            return
        sql = 'INSERT INTO %s (%s, created_at) VALUES (%s)' % (
            table, ', '.join(columns), ', '.join([self.mark] * (len(columns) + 1)))
        cur = self.conn.cursor()
        for i in range(0, len(rows), chunk):
            cur.executemany(sql, [tuple(r) + (self.now,) for r in rows[i:i + chunk]])
        cur.close()

    def commit(self):
        if self.kind == 'postgresql':
            # Explicit ids do not advance the sequences; later API writes
            # must not collide with them.
            cur = self.conn.cursor()
            for table in self.next_id:
                cur.execute("SELECT setval(pg_get_serial_sequence('%s', 'id'), (SELECT MAX(id) FROM %s))" % (table, table))
            cur.close()
        self.conn.commit()

    def close(self):
        self.conn.close()


class Fleet:
    """Providers and their records, written in one go by `write`."""

    def __init__(self, w, classes, traits):
        self.w = w
        self.class_ids = w.ids('resource_classes', classes)
        self.trait_ids = w.ids('traits', traits)
        self.providers, self.inventories, self.traits, self.aggregates, self.members = [], [], [], [], []
        self.allocations, self.consumers = [], []
        self.project = self.user = None

    def provider(self, name, parent=None, root=None):
        (pid,) = self.w.new_ids('resource_providers', 1)
        self.providers.append((pid, str(uuid.uuid4()), name, 1, root if root is not None else pid, parent))
        return pid

    def inventory(self, pid, rc, total, reserved=0, max_unit=None, ratio=1.0):
        self.inventories.append((pid, self.class_ids[rc], total, reserved, 1, max_unit or total, 1, ratio))

    def trait(self, pid, name):
        self.traits.append((self.trait_ids[name], pid))

    def aggregate(self):
        (aid,) = self.w.new_ids('placement_aggregates', 1)
        self.aggregates.append((aid, str(uuid.uuid4())))
        return aid

    def member(self, pid, aid):
        self.members.append((pid, aid))

    def instance(self, parts):
        """One consumer using {provider id: {class: amount}}."""
        if self.project is None:
            (self.project,) = self.w.new_ids('projects', 1)
            (self.user,) = self.w.new_ids('users', 1)
        consumer = str(uuid.uuid4())
        (cid,) = self.w.new_ids('consumers', 1)
        self.consumers.append((cid, consumer, self.project, self.user, 1))
        for pid, resources in parts.items():
            for rc, used in resources.items():
                self.allocations.append((pid, consumer, self.class_ids[rc], used))

    def write(self):
        w = self.w
        # Parents before children: providers are listed in creation order.
        w.insert('resource_providers', ['id', 'uuid', 'name', 'generation', 'root_provider_id', 'parent_provider_id'],
                 self.providers)
        w.insert('inventories', ['resource_provider_id', 'resource_class_id', 'total', 'reserved', 'min_unit', 'max_unit',
                                 'step_size', 'allocation_ratio'], self.inventories)
        w.insert('resource_provider_traits', ['trait_id', 'resource_provider_id'], self.traits)
        w.insert('placement_aggregates', ['id', 'uuid'], self.aggregates)
        w.insert('resource_provider_aggregates', ['resource_provider_id', 'aggregate_id'], self.members)
        if self.consumers:
            w.insert('projects', ['id', 'external_id'], [(self.project, 'bench-project')])
            w.insert('users', ['id', 'external_id'], [(self.user, 'bench-user')])
            w.insert('consumers', ['id', 'uuid', 'project_id', 'user_id', 'generation'], self.consumers)
            w.insert('allocations', ['resource_provider_id', 'consumer_id', 'resource_class_id', 'used'], self.allocations)
        w.commit()
        return len(self.providers)


def load_flat(w):
    f = Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB'], [SHARING, 'STORAGE_DISK_SSD', 'HW_CPU_X86_AVX2'])
    aggs = [f.aggregate() for _ in range(10)]
    for i, agg in enumerate(aggs):
        ss = f.provider('bench-ss%d' % i)
        f.inventory(ss, 'DISK_GB', 100000, reserved=100)
        f.trait(ss, SHARING)
        f.trait(ss, 'STORAGE_DISK_SSD')
        f.member(ss, agg)
    for i in range(2000):
        cn = f.provider('bench-cn%d' % i)
        f.inventory(cn, 'VCPU', 64, ratio=4.0)
        f.inventory(cn, 'MEMORY_MB', 262144, reserved=512, ratio=1.5)
        f.trait(cn, 'HW_CPU_X86_AVX2')
        f.member(cn, aggs[i % 10])
        if i % 2:
            f.instance({cn: {'VCPU': 4, 'MEMORY_MB': 8192}})
    return f.write(), 'resources=VCPU:1,MEMORY_MB:1024,DISK_GB:100', 2000


def load_numa(w):
    bw = ['NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC']
    f = Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB', 'SRIOV_NET_VF'] + bw,
              ['HW_NUMA_ROOT', 'CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B', 'HW_NIC_SRIOV'])
    for i in range(1000):
        root = f.provider('bench-cn%d' % i)
        f.inventory(root, 'DISK_GB', 2000)
        numas = []
        for n in range(2):
            numa = f.provider('bench-cn%d-numa%d' % (i, n), parent=root, root=root)
            numas.append(numa)
            f.inventory(numa, 'VCPU', 32, ratio=2.0)
            f.inventory(numa, 'MEMORY_MB', 131072)
            f.trait(numa, 'HW_NUMA_ROOT')
            for k, physnet in enumerate(('CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B')):
                pf = f.provider('bench-cn%d-numa%d-pf%d' % (i, n, k), parent=numa, root=root)
                f.inventory(pf, 'SRIOV_NET_VF', 16)
                for rc in bw:
                    f.inventory(pf, rc, 10000000)
                f.trait(pf, physnet)
                f.trait(pf, 'HW_NIC_SRIOV')
        f.instance({numas[0]: {'VCPU': 4, 'MEMORY_MB': 8192}, root: {'DISK_GB': 40}})
    query = ('resources_COMPUTE=VCPU:2,MEMORY_MB:2048'
             '&resources_NET1=SRIOV_NET_VF:1,NET_BW_EGR_KILOBIT_PER_SEC:1000&required_NET1=CUSTOM_PHYSNET_A'
             '&resources_NET2=SRIOV_NET_VF:1,NET_BW_EGR_KILOBIT_PER_SEC:1000&required_NET2=CUSTOM_PHYSNET_B'
             '&group_policy=isolate')
    return f.write(), query, 8000


def load_wide(w, cap):
    f = Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB', 'SRIOV_NET_VF'], [])
    root = f.provider('bench-wide')
    f.inventory(root, 'VCPU', 128)
    f.inventory(root, 'MEMORY_MB', 524288)
    f.inventory(root, 'DISK_GB', 4000)
    for j in range(64):
        f.inventory(f.provider('bench-wide-pf%d' % j, parent=root, root=root), 'SRIOV_NET_VF', 8)
    query = 'resources=VCPU:2,MEMORY_MB:2048,DISK_GB:20&' + '&'.join(
        'resources%d=SRIOV_NET_VF:1' % g for g in range(1, 5)) + '&group_policy=isolate'
    return f.write(), query, cap


SCENARIOS = {
    'flat': ('(a) 2,000 flat computes + 10 sharing storage', load_flat),
    'numa': ('(b) 1,000 NUMA trees, 3 groups, isolate', load_numa),
    'wide': ('(c) wide tree, 64 children, 4 groups', load_wide),
}


# ---- servers and measurements ------------------------------------------------

def python_placement(procs, url, extra):
    """The reference served by cheroot (a production-grade threaded WSGI
    server) on the same database; it creates the schema."""
    sections = {'placement_database': {'connection': url}, 'api': {'auth_strategy': 'noauth2'}}
    for g, o in extra.items():
        sections.setdefault(g, {}).update(o)
    return conftest.ref_placement(procs, conf=sections, server='cheroot', threads=4, timeout=180)


def get(base, query):
    """(seconds, candidate count, provider summaries count) of one request."""
    req = urllib.request.Request(base + '/allocation_candidates?' + query, headers={
        'accept': 'application/json', 'openstack-api-version': 'placement ' + VERSION, 'x-auth-token': 'admin'})
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read()
    took = time.perf_counter() - started
    body = json.loads(raw)
    return took, len(body['allocation_requests']), len(body['provider_summaries'])


def summary(times, counts):
    times = sorted(times)
    p99 = times[min(len(times) - 1, max(0, int(round(0.99 * len(times))) - 1))]
    return {'n': len(times), 'median_ms': statistics.median(times) * 1000, 'p99_ms': p99 * 1000,
            'answers': sorted(counts)}


def measure_side_by_side(keelson, python, query, max_requests, seconds, min_requests, per_round):
    """Rounds of `per_round` requests to keelson and one to the reference,
    until the reference has answered `max_requests` times or the time is up
    (at least `min_requests`). Interleaving puts both servers under the
    same conditions (the database's background work after the load, the
    rest of the machine); measured one after the other, keelson's short
    burst ran right after the load while the reference had the quieter
    machine."""
    get(keelson, query)  # warm-up (connections, caches of the process)
    get(python, query)
    runs = {keelson: ([], set()), python: ([], set())}

    def one(base):
        took, n, summaries = get(base, query)
        runs[base][0].append(took)
        runs[base][1].add((n, summaries))

    deadline = time.monotonic() + seconds
    while len(runs[python][0]) < max_requests and (len(runs[python][0]) < min_requests or time.monotonic() < deadline):
        for _ in range(per_round):
            one(keelson)
        one(python)
    return summary(*runs[keelson]), summary(*runs[python])


def peak_rss_mib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) / 1024.0
    return float('nan')


def drop_database(url):
    """Drops a MariaDB or PostgreSQL benchmark database (SQLite files live
    in a temporary directory)."""
    scheme, rest = url.split('://', 1)
    kind = scheme.split('+')[0]
    p = urllib.parse.urlparse('x://' + rest)
    name = p.path.lstrip('/')
    if kind == 'mysql':
        import pymysql
        conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root', password=p.password or '')
        with conn.cursor() as cur:
            cur.execute('DROP DATABASE IF EXISTS `%s`' % name)
        conn.close()
    elif kind == 'postgresql':
        import psycopg2
        conn = psycopg2.connect(host=p.hostname, port=p.port or 5432, user=p.username or 'postgres',
                                password=p.password or None, dbname='postgres')
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        conn.close()


def run_scenario(key, args):
    title, loader = SCENARIOS[key]
    procs = []
    url = None
    try:
        url = create_database(args.backend, 'bench_cand_%s' % key)
        extra = {'placement': {'max_allocation_candidates': args.wide_cap}} if key == 'wide' else {}
        py, py_proc = python_placement(procs, url, extra)
        ks_server = AllInOne(procs, url, extra=extra, env={'RUST_LOG': 'warn'})
        ks = ks_server.url
        # Custom traits through the API (the reference's trait cache reads
        # them back on a miss); everything else straight into the tables.
        for t in ('CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B'):
            assert http('PUT', ks + '/traits/' + t, version='1.6')[0] in (201, 204)
        started = time.monotonic()
        w = Writer(url)
        providers, query, expected = loader(w, args.wide_cap) if key == 'wide' else loader(w)
        w.close()
        loaded = time.monotonic() - started
        print('%s: %d providers written in %.1fs; GET /allocation_candidates?%s' % (title, providers, loaded, query),
              flush=True)
        k, p = measure_side_by_side(ks, py, query, args.requests, args.seconds, 3, args.keelson_per_round)
        rss = peak_rss_mib(ks_server.proc.p.pid)
        py_rss = peak_rss_mib(py_proc.p.pid)
        result = {'title': title, 'providers': providers, 'query': query, 'keelson': k, 'python': p,
                  'ratio_median': p['median_ms'] / k['median_ms'], 'ratio_p99': p['p99_ms'] / k['p99_ms'],
                  'keelson_peak_rss_mib': rss, 'python_peak_rss_mib': py_rss}
        if k['answers'] != p['answers'] or k['answers'][0][0] != expected:
            result['warning'] = 'answers differ: keelson %s, python %s, expected %d candidates' % (
                k['answers'], p['answers'], expected)
        print('  keelson: %d requests, median %.1f ms, p99 %.1f ms, %s candidates/summaries; python: %d requests, '
              'median %.1f ms, p99 %.1f ms, %s' % (k['n'], k['median_ms'], k['p99_ms'], k['answers'], p['n'],
                                                   p['median_ms'], p['p99_ms'], p['answers']), flush=True)
        return result
    finally:
        for proc in procs:
            proc.stop()
        if url is not None:
            drop_database(url)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--backend', default='mysql', choices=['mysql', 'postgresql', 'sqlite'])
    ap.add_argument('--keelson-bin', default=os.environ.get('KEELSON_BIN'))
    ap.add_argument('--scenarios', default='flat,numa,wide')
    ap.add_argument('--requests', type=int, default=30, help='most requests per server and scenario')
    ap.add_argument('--seconds', type=float, default=40, help='time budget per scenario')
    ap.add_argument('--keelson-per-round', type=int, default=5,
                    help='keelson requests per reference request (the two are interleaved)')
    ap.add_argument('--wide-cap', type=int, default=1000, help='max_allocation_candidates for the wide tree')
    ap.add_argument('--json')
    args = ap.parse_args()
    if not args.keelson_bin:
        sys.exit('--keelson-bin or $KEELSON_BIN is required')
    os.environ['KEELSON_BIN'] = os.path.abspath(args.keelson_bin)
    started = time.monotonic()
    results = {}
    for key in args.scenarios.split(','):
        results[key] = run_scenario(key, args)
    print('\nGET /allocation_candidates at %s on %s, keelson %s, %d CPUs (%.0fs in all)' % (
        VERSION, args.backend, args.keelson_bin, os.cpu_count(), time.monotonic() - started))
    print('%-44s %12s %12s %12s %12s %8s %8s %10s' % ('scenario', 'k p50 ms', 'py p50 ms', 'k p99 ms', 'py p99 ms',
                                                     'p50 x', 'p99 x', 'k RSS MiB'))
    for r in results.values():
        print('%-44s %12.1f %12.1f %12.1f %12.1f %7.1fx %7.1fx %10.1f' % (
            r['title'], r['keelson']['median_ms'], r['python']['median_ms'], r['keelson']['p99_ms'],
            r['python']['p99_ms'], r['ratio_median'], r['ratio_p99'], r['keelson_peak_rss_mib']))
        if 'warning' in r:
            print('  warning: ' + r['warning'])
    print('(x: python latency / keelson latency; k RSS: keelson peak resident memory, VmHWM)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'meta': {'backend': args.backend, 'keelson_bin': args.keelson_bin, 'cpus': os.cpu_count(),
                                'version': VERSION}, 'results': results}, f, indent=2)


if __name__ == '__main__':
    main()
