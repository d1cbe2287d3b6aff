#!/usr/bin/env python3
"""Placement allocation writes on a 3-node MariaDB Galera cluster, beside
the same writers on the single-node MariaDB: throughput, latency, and the
invariants that certification conflicts must not break.

The Galera cluster runs on this machine and is started by this script:
three mariadbd (Debian's galera-4 provider) on loopback ports of their
own, datadirs in a temporary directory; node 1 bootstraps the cluster
(--wsrep-new-cluster), nodes 2 and 3 join it by rsync SST. The script
waits until every node is Synced in a cluster of 3, and always stops the
nodes and removes the directory on exit.

On one fresh database of the cluster, `keelson db sync`, then three
`keelson all-in-one`, each with its [placement_database] connection on a
different node. Through the first, a fleet of --providers providers of
--vcpus VCPU (allocation ratio 1). Then, for each --writers level, that
many threads write for --seconds, each through one of the three gateways
in turn: PUT /allocations/{new consumer} (1 to 4 VCPU on a random
provider, microversion 1.39, consumer_generation null) and, about one time
in five, DELETE /allocations/{consumer} of one of the thread's own live
consumers. 204 and 409 (capacity or generation conflict) are expected;
any other status is an error.

Asserted after every level, on each of the three gateways (so each node):
  - every provider's VCPU usage is at most its capacity;
  - the consumers of every provider are exactly those whose PUT was
    answered 204 and not later deleted with a 204 (no lost write, no
    resurrected delete), and its usage is the sum of their VCPU;
  - the three nodes answer the same.
The single-node run (one all-in-one, a fresh database on
KEELSON_TEST_MYSQL, default 127.0.0.1:3306) is checked the same way.
Also asserted: every table `keelson db sync` creates has a primary key
(Galera replicates rows by key).

With --stacks, the stack engine too: three `keelson engine` processes
(and one gateway, as tests/bench/heat.py runs them), each on a different
node, create and delete one stack of each --shapes (tests/bench/heat.py's
templates, --stack-size resources); a fan-in's sink waits on a sync point
that the engines of all its inputs merge into, writes that collide when
they come through different nodes. Every stack must reach CREATE_COMPLETE
and be deleted. The same three engines on the single node beside it.

A benchmark that asserts; not in CI. usage:
  tests/bench/galera.py [--writers 16,64] [--seconds 20] [--providers 10]
                        [--vcpus 62] [--no-single] [--stacks]
                        [--shapes fanin,fanout,chain] [--stack-size 100]
                        [--forensics] [--json out.json]
Needs galera-4, mariadb-server and rsync (Debian packages), the test
virtualenv and a release build of keelson (KEELSON_BIN).
"""
import argparse
from http import client as httpclient
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import conftest  # noqa: E402  (shared helpers: processes, databases, ports)
from conftest import AllInOne, Proc, create_database, free_port, http, keelson_bin, write_conf  # noqa: E402
from heat import Mesh  # noqa: E402  (tests/integration/heat.py: engines and a gateway)

PROVIDER = '/usr/lib/galera/libgalera_smm.so'
MARIADBD = '/usr/sbin/mariadbd'
USER = 'mysql'
VERSION = '1.39'


class Galera:
    """A 3-node Galera cluster on loopback, in a temporary directory."""

    def __init__(self, size=3, sync_wait=0, binlog=False):
        self.sync_wait = sync_wait
        self.binlog = binlog
        self.dir = tempfile.mkdtemp(prefix='kb-galera-')
        self.nodes = []
        for i in range(size):
            self.nodes.append({'name': 'node%d' % (i + 1), 'port': free_port(), 'gcomm': free_port(),
                               'ist': free_port(), 'sst': free_port(),
                               'datadir': os.path.join(self.dir, 'node%d' % (i + 1), 'data'),
                               'socket': os.path.join(self.dir, 'node%d' % (i + 1), 'mysqld.sock')})
        self.procs = []

    def _conf(self, n):
        members = ','.join('127.0.0.1:%d' % m['gcomm'] for m in self.nodes)
        home = os.path.dirname(n['datadir'])
        os.makedirs(n['datadir'], exist_ok=True)
        return write_conf(os.path.join(home, 'my.cnf'), {'mysqld': {
            'datadir': n['datadir'], 'socket': n['socket'], 'port': n['port'], 'bind-address': '127.0.0.1',
            'pid-file': os.path.join(home, 'mysqld.pid'), 'log-error': os.path.join(home, 'error.log'),
            'tmpdir': home,
            'skip-name-resolve': 'ON', 'max_connections': 1000,
            'binlog_format': 'ROW', 'default_storage_engine': 'InnoDB', 'innodb_autoinc_lock_mode': 2,
            'innodb_buffer_pool_size': '128M', 'innodb_flush_log_at_trx_commit': 2,
            'wsrep_on': 'ON', 'wsrep_provider': PROVIDER, 'wsrep_cluster_name': 'keelson-bench',
            'wsrep_cluster_address': 'gcomm://' + members, 'wsrep_node_name': n['name'],
            'wsrep_node_address': '127.0.0.1:%d' % n['gcomm'],
            'wsrep_provider_options': '"gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;'
                                      'gcache.size=128M"' % (n['gcomm'], n['ist']),
            'wsrep_sst_method': 'rsync', 'wsrep_sst_receive_address': '127.0.0.1:%d' % n['sst'],
            'wsrep_slave_threads': 2, 'wsrep_sync_wait': self.sync_wait,
            'server_id': self.nodes.index(n) + 1,
            # --forensics: every node's binary log holds every transaction it
            # committed, its own and those it applied, in commit order.
            **({'log_bin': os.path.join(home, 'binlog'), 'log_slave_updates': 'ON'} if self.binlog else {}),
        }})

    def binlog_transactions(self, n, needles):
        """The transactions of node n's binary log whose decoded rows
        mention any of `needles`: (server id of the origin, text)."""
        home = os.path.dirname(n['datadir'])
        logs = sorted(f for f in os.listdir(home) if re.fullmatch(r'binlog\.\d+', f))
        out = subprocess.run(['mariadb-binlog', '-v', '--base64-output=DECODE-ROWS']
                             + [os.path.join(home, f) for f in logs], capture_output=True, text=True).stdout
        found = []
        for trx in re.split(r'\n(?=#\d{6} +\d+:\d\d:\d\d server id \d+ .*GTID)', out):
            if any(x in trx for x in needles):
                head = trx.split('\n', 1)[0]
                rows = [line for line in trx.split('\n') if line.startswith('###')]
                found.append(head + '\n' + '\n'.join(rows))
        return found

    def start(self):
        first = self.nodes[0]
        conf = self._conf(first)
        for n in self.nodes[1:]:
            self._conf(n)
        # The nodes run as the mysql user, as Debian runs mariadbd: the
        # rsync daemon a joiner starts for SST switches to user nobody
        # when run by root, and could then not write the datadir.
        shutil.chown(self.dir, USER, USER)
        for root, dirs, _ in os.walk(self.dir):
            for d in dirs:
                shutil.chown(os.path.join(root, d), USER, USER)
        out = subprocess.run(['mariadb-install-db', '--defaults-file=' + conf, '--user=' + USER,
                              '--auth-root-authentication-method=normal', '--skip-test-db'],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError('mariadb-install-db failed:\n' + out.stdout + out.stderr)
        self._run(first, ['--wsrep-new-cluster'])
        self.wait(first, size=1)
        # TCP clients from 127.0.0.1 (skip-name-resolve: no 'localhost'
        # match); the grant replicates to the joiners.
        self._sql(first, "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'",
                  "GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
        for n in self.nodes[1:]:
            self._run(n, [])
            self.wait(n, size=None)
        for n in self.nodes:
            self.wait(n, size=len(self.nodes))

    def _run(self, n, extra):
        conf = os.path.join(os.path.dirname(n['datadir']), 'my.cnf')
        self.procs.append(Proc([MARIADBD, '--defaults-file=' + conf, '--user=' + USER] + extra))

    def _sql(self, n, *statements):
        import pymysql
        conn = pymysql.connect(unix_socket=n['socket'], user='root')
        try:
            with conn.cursor() as cur:
                for s in statements:
                    cur.execute(s)
        finally:
            conn.close()

    def status(self, n):
        import pymysql
        conn = pymysql.connect(unix_socket=n['socket'], user='root', connect_timeout=2)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW GLOBAL STATUS LIKE 'wsrep_%'")
                return dict(cur.fetchall())
        finally:
            conn.close()

    def conflicts(self):
        """(certification failures, brute-force aborts) summed over the
        nodes: the transactions Galera rolled back for a conflicting write
        of another node."""
        totals = [0, 0]
        for n in self.nodes:
            st = self.status(n)
            totals[0] += int(st.get('wsrep_local_cert_failures', 0))
            totals[1] += int(st.get('wsrep_local_bf_aborts', 0))
        return tuple(totals)

    def wait(self, n, size, timeout=240):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.p.poll() is not None:
                    raise RuntimeError('mariadbd exited early:\n' + self.log(n))
            try:
                last = self.status(n)
                if last.get('wsrep_local_state_comment') == 'Synced' and (
                        size is None or int(last.get('wsrep_cluster_size', 0)) == size):
                    return last
            except Exception as e:  # not listening yet (SST in progress)
                last = repr(e)
            time.sleep(0.5)
        raise RuntimeError('%s not Synced (cluster of %s) after %ss: %s\n%s'
                           % (n['name'], size, timeout, last, self.log(n)))

    def log(self, n):
        try:
            with open(os.path.join(os.path.dirname(n['datadir']), 'error.log')) as f:
                return f.read()[-4000:]
        except OSError:
            return ''

    def url(self, i):
        return 'mysql+pymysql://root@127.0.0.1:%d' % self.nodes[i]['port']

    def stop(self):
        for p in reversed(self.procs):
            p.stop(sig=signal.SIGKILL, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def db_sync(url, workdir):
    conf = write_conf(os.path.join(workdir, 'sync.conf'), {'placement_database': {'connection': url}})
    out = subprocess.run([keelson_bin(), '--config-file', conf, 'db', 'sync'], capture_output=True, text=True,
                         cwd=workdir)
    if out.returncode != 0:
        sys.exit('keelson db sync failed:\n' + out.stdout + out.stderr)


def tables_without_primary_key(url):
    db = url.split('?')[0].rsplit('/', 1)[1]
    return [r[0] for r in conftest.query(url, (
        "SELECT t.table_name FROM information_schema.tables t WHERE t.table_schema = '%s' "
        "AND t.table_type = 'BASE TABLE' AND NOT EXISTS (SELECT 1 FROM information_schema.table_constraints c "
        "WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name "
        "AND c.constraint_type = 'PRIMARY KEY')") % db)]


def create_fleet(base, providers, vcpus):
    rps = []
    for i in range(providers):
        status, _, rp = http('POST', base + '/resource_providers', {'name': 'galera-cn-%02d' % i})
        assert status == 200, (status, rp)
        status, _, inv = http('PUT', base + '/resource_providers/%s/inventories' % rp['uuid'], {
            'resource_provider_generation': rp['generation'],
            'inventories': {'VCPU': {'total': vcpus, 'max_unit': vcpus, 'allocation_ratio': 1.0}}})
        assert status == 200, (status, inv)
        rps.append(rp['uuid'])
    return rps


class Ledger:
    """What the writers believe: consumer -> (provider, VCPU) for every
    204'ed PUT not yet deleted with a 204; consumers whose outcome is
    unknown (error status or no answer) are kept apart."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live = {}
        self.unknown = {}
        self.latencies = []
        self.statuses = {}
        self.errors = []
        # consumer -> [(start s, ms, method, gateway index, status)]
        self.history = {}


def writer(bases, rps, deadline, ledger, index):
    rnd = random.Random(index * 7919 + int(time.time()))
    conns = {}
    mine = []
    turn = index
    headers = {'x-auth-token': 'admin', 'openstack-api-version': 'placement ' + VERSION,
               'content-type': 'application/json', 'accept': 'application/json'}
    while time.monotonic() < deadline:
        base = bases[turn % len(bases)]
        turn += 1
        if mine and rnd.random() < 0.2:
            consumer, rp, vcpu = mine.pop(rnd.randrange(len(mine)))
            method, body = 'DELETE', None
        else:
            consumer, rp, vcpu = str(uuid.uuid4()), rnd.choice(rps), rnd.randint(1, 4)
            method = 'PUT'
            body = json.dumps({'allocations': {rp: {'resources': {'VCPU': vcpu}}}, 'project_id': 'galera-project',
                               'user_id': 'galera-user', 'consumer_generation': None,
                               'consumer_type': 'INSTANCE'})
        t = time.monotonic()
        try:
            conn = conns.get(base)
            if conn is None:
                conn = conns[base] = httpclient.HTTPConnection(base.split('//', 1)[1], timeout=60)
            conn.request(method, '/allocations/' + consumer, body=body, headers=headers)
            resp = conn.getresponse()
            text = resp.read()
            status = resp.status
        except (OSError, httpclient.HTTPException) as e:
            conns.pop(base, None)
            status, text = 'exception', repr(e).encode()
        elapsed = time.monotonic() - t
        with ledger.lock:
            ledger.latencies.append(elapsed)
            ledger.history.setdefault(consumer, []).append(
                (round(t % 1000, 3), round(elapsed * 1000, 1), method, bases.index(base), status))
            key = '%s %s' % (method, status)
            ledger.statuses[key] = ledger.statuses.get(key, 0) + 1
            if status == 204:
                if method == 'PUT':
                    ledger.live[consumer] = (rp, vcpu)
                    mine.append((consumer, rp, vcpu))
                else:
                    del ledger.live[consumer]
            elif status == 409 and method == 'PUT':
                pass
            elif status == 404 and method == 'DELETE':
                # Through a node that has not applied the PUT yet (Galera
                # applies on the other nodes after the commit returned,
                # unless wsrep_sync_wait): that DELETE wrote nothing, the
                # consumer stays, to be deleted again later.
                mine.append((consumer, rp, vcpu))
            else:
                # A DELETE of a live consumer that was not answered 204,
                # or a PUT answered neither 204 nor 409: either outcome.
                ledger.errors.append('%s %s: %s' % (method, status, text[:300].decode('utf-8', 'replace')))
                ledger.unknown[consumer] = (rp, vcpu)
                ledger.live.pop(consumer, None)
    for c in conns.values():
        c.close()


def run_level(bases, rps, writers, seconds):
    ledger = Ledger()
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=writer, args=(bases, rps, deadline, ledger, i)) for i in range(writers)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    lat = sorted(ledger.latencies)

    def pct(p):
        return lat[min(len(lat) - 1, int(len(lat) * p / 100))] * 1000 if lat else float('nan')

    count = lambda pred: sum(n for k, n in ledger.statuses.items() if pred(k))  # noqa: E731
    return ledger, {
        'writers': writers, 'seconds': round(wall, 1), 'requests': len(lat),
        'writes_per_s': round(len(lat) / wall, 1), 'ok_per_s': round(count(lambda k: k.endswith(' 204')) / wall, 1),
        'p50_ms': round(pct(50), 1), 'p99_ms': round(pct(99), 1),
        'conflicts_409': count(lambda k: k.endswith(' 409')), 'stale_404': count(lambda k: k == 'DELETE 404'),
        'errors': count(lambda k: not (k.endswith(' 204') or k in ('PUT 409', 'DELETE 404'))),
        'statuses': dict(sorted(ledger.statuses.items())), 'loadavg': ' '.join('%.2f' % x for x in os.getloadavg())}


def observed(base, rp):
    status, _, usage = http('GET', base + '/resource_providers/%s/usages' % rp, version=VERSION)
    assert status == 200, (status, usage)
    status, _, allocs = http('GET', base + '/resource_providers/%s/allocations' % rp, version=VERSION)
    assert status == 200, (status, allocs)
    return usage['usages'].get('VCPU', 0), {c: a['resources'].get('VCPU', 0) for c, a in allocs['allocations'].items()}


def check(bases, rps, vcpus, ledger, settle=30):
    """The invariants on every gateway; retried for `settle` seconds while
    only a node's lag can explain a difference (Galera applies on the
    other nodes after the commit returned)."""
    deadline = time.monotonic() + settle
    while True:
        problems = []
        for rp in rps:
            expected = {c: v for c, (p, v) in ledger.live.items() if p == rp}
            unknown = {c: v for c, (p, v) in ledger.unknown.items() if p == rp}
            seen = []
            for i, base in enumerate(bases):
                usage, consumers = observed(base, rp)
                seen.append((usage, consumers))
                if usage > vcpus:
                    problems.append('OVER-ALLOCATION: node %d provider %s usage %d > %d' % (i + 1, rp, usage, vcpus))
                if usage != sum(consumers.values()):
                    problems.append('node %d provider %s: usage %d != sum of its allocations %d'
                                    % (i + 1, rp, usage, sum(consumers.values())))
                lost = set(expected) - set(consumers)
                extra = set(consumers) - set(expected) - set(unknown)
                if lost:
                    problems.append('LOST WRITES: node %d provider %s misses %d consumers answered 204: %s'
                                    % (i + 1, rp, len(lost), sorted(lost)[:3]))
                if extra:
                    problems.append('node %d provider %s holds %d consumers deleted or refused: %s'
                                    % (i + 1, rp, len(extra), sorted(extra)[:3]))
                for c in set(expected) & set(consumers):
                    if consumers[c] != expected[c]:
                        problems.append('node %d consumer %s holds %d VCPU, written %d'
                                        % (i + 1, c, consumers[c], expected[c]))
            if any(s != seen[0] for s in seen[1:]):
                problems.append('nodes disagree on provider %s: %s' % (rp, [s[0] for s in seen]))
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(1)


def reset(base, ledger):
    """Deletes what a level left, so every level starts from an empty
    fleet."""
    for c in list(ledger.live) + list(ledger.unknown):
        status = http('DELETE', base + '/allocations/' + c, version=VERSION)[0]
        assert status in (204, 404), status


ORPHANS = ("SELECT a.id, a.consumer_id, a.used, c.uuid, c.project_id, p.id, c.user_id, u.id FROM allocations a "
           "LEFT JOIN consumers c ON c.uuid = a.consumer_id LEFT JOIN projects p ON p.id = c.project_id "
           "LEFT JOIN users u ON u.id = c.user_id WHERE c.uuid IS NULL OR p.id IS NULL OR u.id IS NULL")


DUPLICATES = ("SELECT consumer_id, resource_provider_id, resource_class_id, COUNT(*), GROUP_CONCAT(id), "
              "GROUP_CONCAT(used) FROM allocations GROUP BY consumer_id, resource_provider_id, resource_class_id "
              "HAVING COUNT(*) > 1")


def bench(label, bases, args, rps, db_url, cluster=None):
    rows, failures = [], []
    for w in args.writers:
        ledger, row = run_level(bases, rps, w, args.seconds)
        problems = check(bases, rps, args.vcpus, ledger)
        row.update({'setup': label, 'gateways': len(bases), 'live_after': len(ledger.live),
                    'unknown': len(ledger.unknown), 'invariants': 'ok' if not problems else 'FAILED'})
        print('  %-11s %3d writers: %6.1f writes/s (%5.1f 204/s)  p50 %7.1f  p99 %7.1f ms  409s %5d  stale 404s %d  '
              'errors %d  live %d  invariants %s  load %s  %s' % (
                  label, w, row['writes_per_s'], row['ok_per_s'], row['p50_ms'], row['p99_ms'],
                  row['conflicts_409'], row['stale_404'], row['errors'], row['live_after'], row['invariants'], row['loadavg'],
                  row['statuses']), flush=True)
        for p in problems[:20]:
            print('    ' + p)
        for e in sorted(set(ledger.errors))[:10]:
            print('    error: ' + e)
        if problems:
            # Allocations the listing's inner joins hide: no consumer, or a
            # consumer whose project or user row is missing.
            orphans = conftest.query(db_url, ORPHANS)
            for r in orphans[:10]:
                print('    orphan allocation (id, consumer, used, consumer row, project, project row, user, user row): '
                      '%s' % (r,))
                print('      requests of its consumer (start, ms, method, gateway, status): %s'
                      % ledger.history.get(r[1]))
            if cluster is not None and cluster.binlog and orphans:
                for trx in cluster.binlog_transactions(cluster.nodes[0], [r[1] for r in orphans[:10]]):
                    print('      ' + trx.replace('\n', '\n      '))
            for r in conftest.query(db_url, DUPLICATES)[:10]:
                print('    allocation rows of one consumer, provider and class: %s' % (r,))
            print('    projects: %s' % conftest.query(db_url, 'SELECT id, external_id FROM projects'))
            print('    users: %s' % conftest.query(db_url, 'SELECT id, external_id FROM users'))
        failures += problems
        if not row['requests']:
            failures.append('%s %d writers: no request made' % (label, w))
        if ledger.errors:
            failures.append('%s %d writers: %d requests answered neither 204 nor 409' % (label, w, len(ledger.errors)))
        rows.append(row)
        reset(bases[0], ledger)
    return rows, failures


class NodeMesh(Mesh):
    """tests/integration/heat.py's Mesh with engine i on urls[i]."""

    def __init__(self, procs, urls):
        self.urls = urls
        super().__init__(procs, urls[0], engines=len(urls))

    def engine_conf(self, i):
        self.db_url = self.urls[i]
        return super().engine_conf(i)


def stacks(label, procs, urls, args):
    """The stack shapes of tests/bench/heat.py on engines spread over
    `urls`: a fan-in's sink waits on a sync point that every middle
    resource's engine merges into, the writes that collide on Galera."""
    spec = importlib.util.spec_from_file_location('heat_bench', os.path.join(HERE, 'heat.py'))
    heat_bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(heat_bench)
    mesh = NodeMesh(procs, urls)
    rows, failures = [], []
    for shape in args.shapes:
        try:
            r = heat_bench.run_one(mesh.heat, shape, args.stack_size, timeout=600)
            r['invariants'] = 'ok'
        except AssertionError as e:
            r = {'invariants': 'FAILED'}
            failures.append('%s %s-%d: %s' % (label, shape, args.stack_size, e))
        r.update({'setup': label, 'stack': '%s-%d' % (shape, args.stack_size), 'engines': len(urls),
                  'loadavg': ' '.join('%.2f' % x for x in os.getloadavg())})
        print('  %-11s %s: %s' % (label, r['stack'], r), flush=True)
        rows.append(r)
    return rows, failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--writers', default='16,64')
    ap.add_argument('--seconds', type=int, default=20)
    ap.add_argument('--providers', type=int, default=10)
    ap.add_argument('--vcpus', type=int, default=62)
    ap.add_argument('--sync-wait', type=int, default=0,
                    help="the nodes' wsrep_sync_wait (0, Galera's default: a read through one node may not yet "
                         "see a write committed through another; 1: reads wait for the node to catch up)")
    ap.add_argument('--no-single', action='store_true', help='skip the single-node MariaDB run')
    ap.add_argument('--stacks', action='store_true',
                    help='also the stack engine: 3 engines, one per node (and 3 on the single node)')
    ap.add_argument('--shapes', default='fanin,fanout,chain')
    ap.add_argument('--stack-size', type=int, default=100)
    ap.add_argument('--forensics', action='store_true',
                    help="binary logs on the Galera nodes; a failed invariant prints every request and every "
                         "committed transaction that touched an orphaned allocation's consumer")
    ap.add_argument('--json')
    args = ap.parse_args()
    args.writers = [int(w) for w in args.writers.split(',')]
    args.shapes = args.shapes.split(',')
    for path in (PROVIDER, MARIADBD):
        if not os.path.exists(path):
            sys.exit('%s is missing: apt-get install -y galera-4 mariadb-server rsync' % path)

    procs, rows, stack_rows, failures = [], [], [], []
    workdir = tempfile.mkdtemp(prefix='kb-galera-run-')
    cluster = Galera(sync_wait=args.sync_wait, binlog=args.forensics)
    env = {'RUST_LOG': os.environ.get('RUST_LOG', 'warn')}
    try:
        if not args.no_single:
            url = create_database('mysql', 'galera_single')
            db_sync(url, workdir)
            base = AllInOne(procs, url, env=env).url
            rps = create_fleet(base, args.providers, args.vcpus)
            print('single node: %d providers of %d VCPU; 1 all-in-one on %s' % (args.providers, args.vcpus,
                                                                                 conftest.MYSQL), flush=True)
            r, f = bench('single node', [base], args, rps, url)
            rows += r
            failures += f
            if args.stacks:
                url = create_database('mysql', 'galera_single_heat')
                r, f = stacks('single node', procs, [url] * 3, args)
                stack_rows += r
                failures += f
            for p in procs:
                p.stop()
            procs.clear()

        t = time.monotonic()
        cluster.start()
        st = cluster.status(cluster.nodes[0])
        print('galera: 3 nodes Synced, cluster size %s, provider %s (%.0fs to start)'
              % (st['wsrep_cluster_size'], st.get('wsrep_provider_version'), time.monotonic() - t), flush=True)
        saved = conftest.MYSQL
        conftest.MYSQL = cluster.url(0)
        try:
            url0 = create_database('mysql', 'galera')
        finally:
            conftest.MYSQL = saved
        db_sync(url0, workdir)
        no_pk = tables_without_primary_key(url0)
        if no_pk:
            failures.append('tables without a primary key: %s' % no_pk)
        print('db sync: %d tables, all with a primary key: %s' % (
            len(conftest.query(url0, 'SHOW TABLES')), 'yes' if not no_pk else 'NO %s' % no_pk), flush=True)
        bases = []
        for i in range(len(cluster.nodes)):
            bases.append(AllInOne(procs, url0.replace(cluster.url(0), cluster.url(i)), env=env).url)
        rps = create_fleet(bases[0], args.providers, args.vcpus)
        print('galera: %d providers of %d VCPU; 3 all-in-one, one per node' % (args.providers, args.vcpus), flush=True)
        r, f = bench('galera', bases, args, rps, url0, cluster)
        rows += r
        failures += f
        after_writers = cluster.conflicts()
        print('galera, all nodes, during the writers: %d certification failures, %d brute-force aborts'
              % after_writers, flush=True)
        if args.stacks:
            saved = conftest.MYSQL
            conftest.MYSQL = cluster.url(0)
            try:
                url0 = create_database('mysql', 'galera_heat')
            finally:
                conftest.MYSQL = saved
            r, f = stacks('galera', procs, [url0.replace(cluster.url(0), cluster.url(i))
                                            for i in range(len(cluster.nodes))], args)
            stack_rows += r
            failures += f
            print('galera, all nodes, during the stacks: %d certification failures, %d brute-force aborts'
                  % tuple(b - a for a, b in zip(after_writers, cluster.conflicts())), flush=True)

        print('\n| database | writers | writes/s (204/s) | p50 | p99 | 409s | stale 404s | errors | invariants |')
        print('|---|---:|---:|---:|---:|---:|---:|---:|---|')
        for r in rows:
            print('| %s | %d | %.0f (%.0f) | %.0f ms | %.0f ms | %d | %d | %d | %s |' % (
                'MariaDB single node, 1 keelson' if r['setup'] == 'single node'
                else 'Galera 3 nodes, 3 keelson', r['writers'], r['writes_per_s'], r['ok_per_s'], r['p50_ms'],
                r['p99_ms'], r['conflicts_409'], r['stale_404'], r['errors'], r['invariants']))
        if stack_rows:
            print('\n| database | stack (3 engines) | create | delete | invariants |')
            print('|---|---|---:|---:|---|')
            for r in stack_rows:
                print('| %s | %s | %s s | %s s | %s |' % (
                    'MariaDB single node' if r['setup'] == 'single node' else 'Galera, one engine per node',
                    r['stack'], r.get('create_s', '-'), r.get('delete_s', '-'), r['invariants']))
        print('load average after: %s' % ' '.join('%.2f' % x for x in os.getloadavg()))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump({'meta': {'providers': args.providers, 'vcpus': args.vcpus, 'seconds': args.seconds,
                                    'cpus': os.cpu_count()}, 'results': rows, 'stacks': stack_rows,
                           'failures': failures}, f, indent=2)
    finally:
        for p in procs:
            p.stop()
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(HERE, '..', 'lib', 'drop_dbs.py'),
                        'kt_%s_galera' % conftest.RUN_ID, conftest.MYSQL])
    if failures:
        print('\nFAILED:')
        for f in failures:
            print('  ' + f)
        sys.exit(1)
    print('\nall invariants held')


if __name__ == '__main__':
    main()
