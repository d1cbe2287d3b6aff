"""The mesh end to end, under faults: every service as its own process, as
the Helm chart runs them, on one MariaDB database:

    etcd x3, controller x3, inventory x2, candidates x1, engine x2, gateway x2

A Nova-like workload (allocation candidates, claims, moves through
POST /allocations with a migration consumer, confirms, deletes) runs from
several client threads through both gateways alternately, next to a few
small Heat stacks created and deleted through the Orchestration API. While
it runs, one process of each kind is killed with SIGKILL and restarted
(gateway, inventory, candidates, stack engine, the controller primary, the
etcd leader), each back and healthy before the next kill.

Every write is tracked client-side: accepted (2xx), refused (409 with a
Placement or Heat code) or unknown (a connection error or a 5xx: the client
cannot tell whether it landed). At the end, with every process back:

  (a) every consumer's allocations are one of the states the client's
      observations allow (an accepted write is present with its amounts; a
      refused one is absent; an unknown one is either): lost == 0; the
      database holds exactly what the API returns, and each provider's
      usages are the sum of its consumers' allocations;
  (b) no provider is over capacity ((total - reserved) * allocation_ratio);
  (c) no stack is left IN_PROGRESS (after a bounded wait for the engines'
      watchdog, driven by the controller primary's duty) and none FAILED;
      an accepted create is there with its outputs, an accepted delete
      is gone;
  (d) ctrlstatus on all three controllers reports the same single primary.

One line starting with `mesh-faults:` summarises the run.

Bounded by counts (kills, operations per client, stacks per client) and by
timeouts on every wait; no duration is asserted."""
import collections
import http.client
import json
import os
import random
import re
import signal
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import BACKENDS, MYSQL, Proc, _server, create_database, free_port, keelson_bin, wait_http, wait_port, write_conf
from test_controller import ETCD, Controllers, EtcdCluster, Started, ctl, primary_of, settled, status

pytestmark = [
    pytest.mark.skipif('mysql' not in BACKENDS, reason='MariaDB is not configured (KEELSON_BACKENDS)'),
    pytest.mark.skipif(ETCD is None, reason='etcd (Debian etcd-server) is not installed'),
]

VERSION = '1.39'
CLIENTS = 8
PROVIDERS = 20
MAX_OPS_PER_CLIENT = 1500     # hard cap; the kill sequence normally ends well before
TAIL_OPS = 8                  # operations each client makes after the last restart
OPS_BETWEEN_KILLS = 150       # workload operations before each kill
OPS_WHILE_DOWN = 120          # ... and while the killed process is down
HEAT_CLIENTS = 2
MAX_STACKS_PER_HEAT_CLIENT = 14
PROJECT = 'mesh'
HEAT_PROJECT = 'mesh'

# Small hosts so that the fleet fills up and claims race for the last room.
INVENTORY = {
    'VCPU': {'total': 8, 'reserved': 0, 'allocation_ratio': 2.0, 'max_unit': 8},
    'MEMORY_MB': {'total': 16384, 'reserved': 512, 'allocation_ratio': 1.0, 'max_unit': 16384},
    'DISK_GB': {'total': 200, 'reserved': 10, 'allocation_ratio': 1.0, 'max_unit': 200},
}
FLAVORS = [
    {'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 10},
    {'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 20},
    {'VCPU': 4, 'MEMORY_MB': 4096, 'DISK_GB': 40},
    {'VCPU': 4, 'MEMORY_MB': 8192, 'DISK_GB': 40},
]
TRAITS = ['HW_CPU_X86_AVX2', 'CUSTOM_MESH_SSD']


# ---- HTTP -------------------------------------------------------------------

def call(method, url, body=None, heat=False, timeout=30):
    """(status, parsed body) of one request; status None when no answer
    came back (connection refused or reset, timeout)."""
    if heat:
        h = {'X-Auth-Project': HEAT_PROJECT, 'X-Auth-User': 'mesh-tester', 'Accept': 'application/json'}
    else:
        h = {'accept': 'application/json', 'openstack-api-version': 'placement %s' % VERSION, 'x-auth-token': 'admin'}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h['content-type'] = 'application/json'
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read().decode()
            return r.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        try:
            raw = e.read().decode()
        except (OSError, http.client.HTTPException):
            return None, 'connection lost reading the %d body' % e.code
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        return None, '%s: %s' % (type(e).__name__, e)


def ok(method, url, body=None, heat=False, expect=(200,), tries=60):
    """A set-up or verification request: retried while the mesh answers
    with a connection error or a 5xx (bounded), then must succeed."""
    last = None
    for _ in range(tries):
        st, doc = call(method, url, body, heat=heat)
        if st in expect:
            return doc
        last = (st, doc)
        if st is not None and st < 500:
            break
        time.sleep(0.5)
    raise AssertionError('%s %s: %r' % (method, url, last))


def normalize(allocations):
    """{rp: {class: amount}} of an allocations document (GET /allocations
    or an allocation request)."""
    return {rp: {rc: int(n) for rc, n in a['resources'].items()} for rp, a in (allocations or {}).items()}


def wait_until(probe, timeout, interval=0.2):
    """Polls `probe` until truthy; answers its last value (bounded)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (AssertionError, ValueError, OSError):
            last = None
        if last:
            return last
        time.sleep(interval)
    return last


# ---- the mesh ---------------------------------------------------------------

def write_sections(path, sections):
    with open(path, 'a') as f:
        for group, opts in sections.items():
            f.write('[%s]\n' % group)
            for k, v in opts.items():
                f.write('%s = %s\n' % (k, v))


class MeshControllers(Controllers):
    """test_controller's controllers, with the mesh's shared options (the
    Placement database for the standard traits sync, the watchdog duty's
    period)."""

    def __init__(self, started, etcd, extra, **kw):
        self.extra = extra
        super().__init__(started, etcd, **kw)

    def conf(self, name):
        path = super().conf(name)
        write_sections(path, self.extra)
        return path


class Service:
    """One keelson service process, restartable on the same ports."""

    def __init__(self, mesh, label, command, conf, port):
        self.mesh, self.label, self.command, self.conf, self.port = mesh, label, command, conf, port
        self.proc = None

    def start(self):
        self.proc = Proc([keelson_bin(), '--config-file', self.conf, self.command], cwd=self.mesh.dir)
        self.mesh.started.append(self.proc)
        self.mesh.history.append((self.label, self.proc))
        wait_port(self.port, timeout=60, proc=self.proc)
        return self

    def kill(self):
        self.proc.stop(signal.SIGKILL, timeout=10)


class Mesh:
    def __init__(self, started, db_url):
        self.started = started
        self.db_url = db_url
        self.dir = tempfile.mkdtemp(prefix='kt-mesh-')
        started.dirs.append(self.dir)
        self.history = []  # (label, Proc) of every process ever started
        self.etcd = EtcdCluster(started)
        for name, p in self.etcd.proc.items():
            self.history.append(('etcd-' + name, p))
        # The Helm chart's db-sync hook: schema and standard classes/traits.
        db_conf = write_conf(os.path.join(self.dir, 'db.conf'), {'placement_database': {'connection': db_url}})
        sync = Proc([keelson_bin(), '--config-file', db_conf, 'db', 'sync'], cwd=self.dir)
        assert sync.p.wait(120) == 0, sync.output()
        shared = {
            'placement_database': {'connection': db_url, 'max_pool_size': '8'},
            'orchestration': {'periodic_interval': '1', 'stall_timeout': '5'},
        }
        self.ctls = MeshControllers(started, self.etcd, shared, ttl=2)
        for name, p in self.ctls.proc.items():
            self.history.append(('controller-' + name, p))
        assert wait_until(lambda: settled(self.ctls), 60), 'controllers never settled\n' + self.ctls.logs()
        peers = ','.join('%s=%s' % (n, self.ctls.addr(n)) for n in self.ctls.names)
        # Every service gets the chart's one configuration, plus its own
        # listen address.
        self.common = {
            'placement_database': {'connection': db_url, 'max_pool_size': '8'},
            'database': {'connection': db_url},
            'api': {'auth_strategy': 'noauth2'},
            'orchestration': {'auth_strategy': 'noauth', 'periodic_interval': '1', 'stall_timeout': '5',
                              'max_concurrent_checks': '8'},
            'controller': {'peers': peers},
        }
        self.inventory = [self.service('inventory%d' % i, 'inventory', 'inventory_listen') for i in (1, 2)]
        self.candidates = self.service('candidates', 'candidates', 'candidates_listen')
        self.engines = [self.service('engine%d' % i, 'engine', 'engine_listen') for i in (1, 2)]
        for s in self.inventory + [self.candidates] + self.engines:
            s.start()
        for e in self.engines:
            self.wait_registered(e)
        self.gateways = []
        for i in (1, 2):
            p_port, o_port = free_port(), free_port()
            conf = self.conf('gateway%d' % i, {
                'placement_listen': '127.0.0.1:%d' % p_port,
                'orchestration_listen': '127.0.0.1:%d' % o_port,
                'inventory_endpoint': 'http://127.0.0.1:%d' % self.inventory[i - 1].port,
                'candidates_endpoint': 'http://127.0.0.1:%d' % self.candidates.port,
                'engine_endpoints': ','.join('http://127.0.0.1:%d' % e.port for e in self.engines),
            })
            g = Service(self, 'gateway%d' % i, 'gateway', conf, p_port)
            g.url = 'http://127.0.0.1:%d' % p_port
            g.heat = 'http://127.0.0.1:%d/v1/%s' % (o_port, HEAT_PROJECT)
            g.o_port = o_port
            g.start()
            wait_port(o_port, proc=g.proc)
            self.gateways.append(g)

    def conf(self, label, keelson):
        sections = json.loads(json.dumps(self.common))
        sections['keelson'] = keelson
        return write_conf(os.path.join(self.dir, '%s.conf' % label), sections)

    def service(self, label, command, listen_option):
        port = free_port()
        return Service(self, label, command, self.conf(label, {listen_option: '127.0.0.1:%d' % port}), port)

    def wait_registered(self, engine):
        assert wait_until(lambda: 'registered with the controller' in engine.proc.output(), 30), \
            engine.proc.output()[-3000:]

    def problems(self):
        """ERROR lines and panics of every process, by process."""
        out = []
        for label, p in self.history:
            for line in p.output().splitlines():
                if ' ERROR ' in line or 'panicked' in line:
                    out.append('%s: %s' % (label, line[:400]))
        return out

    def logs(self, labels=None, tail=3000):
        return '\n'.join('--- %s (%s) ---\n%s' % (label, p.log_path, p.output()[-tail:])
                         for label, p in self.history if labels is None or label in labels)


def etcd_leader(etcd):
    """The name of the etcd member that leads, or None."""
    for m in etcd.members:
        try:
            req = urllib.request.Request('http://127.0.0.1:%d/v3/maintenance/status' % m['client'], data=b'{}', method='POST')
            doc = json.loads(urllib.request.urlopen(req, timeout=2).read())
        except Exception:
            continue
        if doc.get('leader') and doc.get('header', {}).get('member_id') == doc['leader']:
            return m['name']
    return None


# ---- the workload's ledger --------------------------------------------------

class Faults:
    """Whether a process is down (or just back), for telling expected 5xx
    from unexpected ones."""

    def __init__(self):
        self.current = None
        self.lock = threading.Lock()

    def begin(self, label):
        with self.lock:
            self.current = label

    def end(self):
        with self.lock:
            self.current = None


class Ledger:
    def __init__(self, faults):
        self.faults = faults
        self.lock = threading.Lock()
        self.writes = collections.Counter()       # accepted / refused / unknown
        self.by_kind = collections.Counter()      # (kind, outcome)
        self.refusals = collections.Counter()     # error code
        self.unknown_causes = collections.Counter()
        self.unexpected = []                      # 5xx outside a fault window, odd 4xx
        self.reads = collections.Counter()
        self.heat_ops = 0
        # consumer -> list of the allocation states the client's
        # observations allow, with why.
        self.possible = {}
        self.ops = 0

    def outcome(self, kind, st, doc, allow_404=False):
        """Classifies one write's answer; records it."""
        if st is not None and 200 <= st < 300:
            result = 'accepted'
        elif st == 409 or (allow_404 and st == 404):
            result = 'refused'
            code = '-'
            if isinstance(doc, dict) and doc.get('errors'):
                code = doc['errors'][0].get('code', '-')
                detail = doc['errors'][0].get('detail', '')
                if st == 409 and not (code == 'placement.concurrent_update' or 'exceed the capacity' in detail):
                    self.note('%s: refused with an unexpected reason: %r' % (kind, doc))
            elif isinstance(doc, dict) and isinstance(doc.get('error'), dict):
                code = doc['error'].get('type', '-')
            with self.lock:
                self.refusals['%s %s' % (st, code)] += 1
            if st == 404:
                self.note('%s answered 404 for a consumer the client knows: %r' % (kind, doc))
        elif st is None or st >= 500:
            result = 'unknown'
            fault = self.faults.current
            with self.lock:
                self.unknown_causes['%s during %s' % (st or 'no answer', fault or 'no fault')] += 1
            if st is not None and fault is None:
                self.note('%s: %s outside a fault window: %r' % (kind, st, doc))
        else:
            result = 'refused'
            self.note('%s: unexpected %s: %r' % (kind, st, doc))
        with self.lock:
            self.writes[result] += 1
            self.by_kind[(kind, result)] += 1
        return result

    def note(self, text):
        with self.lock:
            self.unexpected.append(text)
        print('mesh-faults note: ' + text[:600])

    def read(self, what):
        with self.lock:
            self.reads[what] += 1

    def set(self, consumer, states):
        with self.lock:
            self.possible[consumer] = states

    def tick(self):
        with self.lock:
            self.ops += 1


def placement_client(n, mesh, ledger, stop, rnd):
    """A Nova-like scheduler/conductor: claims, moves with a migration
    consumer, confirms, resizes onto another host, deletes. Each consumer
    belongs to this client only; a consumer whose last write's outcome is
    unknown is never written again (its final state must be one of the
    two it may have)."""
    live = {}        # instance -> (allocation, flavor, trait)
    migrations = {}  # migration consumer -> allocation it holds
    user = 'user-%d' % n
    gw = n % 2
    tail = TAIL_OPS

    def base():
        nonlocal gw
        gw ^= 1
        return mesh.gateways[gw].url

    def candidates(url, flavor, trait, avoid=()):
        q = 'resources=' + ','.join('%s:%d' % kv for kv in sorted(flavor.items()))
        if trait:
            q += '&required=' + trait
        st, doc = call('GET', url + '/allocation_candidates?' + q)
        if st != 200:
            ledger.read('candidates %s' % st)
            if st is not None and st < 500:
                ledger.note('GET /allocation_candidates answered %s: %r' % (st, doc))
            return None
        ledger.read('candidates 200')
        for req in doc['allocation_requests']:
            alloc = normalize(req['allocations'])
            if not set(alloc) & set(avoid):
                return alloc
        ledger.read('candidates none')
        return None

    def body(alloc, gen, ctype):
        return {'allocations': {rp: {'resources': res} for rp, res in alloc.items()}, 'project_id': PROJECT,
                'user_id': user, 'consumer_generation': gen, 'consumer_type': ctype}

    def current(url, consumer, expected):
        """The consumer's generation, checking its allocations on the way."""
        st, doc = call('GET', url + '/allocations/' + consumer)
        if st != 200:
            ledger.read('allocations %s' % st)
            return None
        ledger.read('allocations 200')
        if normalize(doc['allocations']) != expected:
            ledger.note('consumer %s has %r, the client expects %r (seen during the run)'
                        % (consumer, normalize(doc['allocations']), expected))
        return doc['consumer_generation']

    def create(url):
        flavor = rnd.choice(FLAVORS)
        trait = rnd.choice(TRAITS) if rnd.random() < 0.3 else None
        alloc = candidates(url, flavor, trait)
        if alloc is None:
            return
        c = str(uuid.uuid4())
        st, doc = call('PUT', url + '/allocations/' + c, body(alloc, None, 'INSTANCE'))
        r = ledger.outcome('claim', st, doc)
        if r == 'accepted':
            ledger.set(c, [alloc])
            live[c] = (alloc, flavor, trait)
        elif r == 'refused':
            ledger.set(c, [{}])
        else:
            ledger.set(c, [{}, alloc])

    def move(url):
        """Nova's cold migration: the instance's allocation goes to the
        destination, the source's is held by a migration consumer, in one
        POST /allocations."""
        c = rnd.choice(sorted(live))
        alloc, flavor, trait = live[c]
        gen = current(url, c, alloc)
        if gen is None:
            return
        dest = candidates(url, flavor, trait, avoid=alloc)
        if dest is None:
            return
        m = str(uuid.uuid4())
        st, doc = call('POST', url + '/allocations', {c: body(dest, gen, 'INSTANCE'), m: body(alloc, None, 'MIGRATION')})
        r = ledger.outcome('move', st, doc)
        if r == 'accepted':
            ledger.set(c, [dest])
            ledger.set(m, [alloc])
            live[c] = (dest, flavor, trait)
            migrations[m] = alloc
        elif r == 'refused':
            ledger.set(m, [{}])
        else:
            ledger.set(c, [alloc, dest])
            ledger.set(m, [{}, alloc])
            del live[c]

    def resize(url):
        """The instance's allocation replaced by one on another host (PUT
        with its consumer generation)."""
        c = rnd.choice(sorted(live))
        alloc, _, trait = live[c]
        flavor = rnd.choice(FLAVORS)
        gen = current(url, c, alloc)
        if gen is None:
            return
        dest = candidates(url, flavor, trait, avoid=alloc)
        if dest is None:
            return
        st, doc = call('PUT', url + '/allocations/' + c, body(dest, gen, 'INSTANCE'))
        r = ledger.outcome('resize', st, doc)
        if r == 'accepted':
            ledger.set(c, [dest])
            live[c] = (dest, flavor, trait)
        elif r == 'unknown':
            ledger.set(c, [alloc, dest])
            del live[c]

    def delete(url, consumer, alloc, kind):
        st, doc = call('DELETE', url + '/allocations/' + consumer)
        r = ledger.outcome(kind, st, doc, allow_404=True)
        if r == 'accepted':
            ledger.set(consumer, [{}])
        elif r == 'unknown':
            ledger.set(consumer, [alloc, {}])
        return r

    for _ in range(MAX_OPS_PER_CLIENT):
        if stop.is_set():
            if tail == 0:
                break
            tail -= 1
        url = base()
        x = rnd.random()
        if not live or x < 0.45:
            create(url)
        elif x < 0.60 and migrations:
            m = rnd.choice(sorted(migrations))
            r = delete(url, m, migrations[m], 'confirm')
            if r != 'refused':
                del migrations[m]
        elif x < 0.72:
            move(url)
        elif x < 0.80:
            resize(url)
        else:
            c = rnd.choice(sorted(live))
            r = delete(url, c, live[c][0], 'delete')
            if r != 'refused':
                del live[c]
        ledger.tick()
        time.sleep(0.02)


def stack_template(wait):
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'rnd': {'type': 'OS::Heat::RandomString', 'properties': {'length': 12}},
            'none': {'type': 'OS::Heat::None'},
            'a': {'type': 'OS::Heat::TestResource', 'properties': {'value': {'get_attr': ['rnd', 'value']}, 'wait_secs': wait}},
            'b': {'type': 'OS::Heat::TestResource', 'depends_on': 'none',
                  'properties': {'value': {'get_attr': ['a', 'output']}, 'wait_secs': wait / 2}},
        },
        'outputs': {'b': {'value': {'get_attr': ['b', 'output']}}, 'rnd': {'value': {'get_attr': ['rnd', 'value']}}},
    }


def heat_client(n, mesh, ledger, stacks, stop, rnd):
    """Creates small stacks and deletes some of them (some while they are
    still being created)."""
    mine = []
    for i in range(MAX_STACKS_PER_HEAT_CLIENT):
        if stop.is_set():
            break
        g = mesh.gateways[(n + i) % 2]
        name = 'mf%d-%d-%s' % (n, i, uuid.uuid4().hex[:6])
        st, doc = call('POST', g.heat + '/stacks', {'stack_name': name, 'template': stack_template(rnd.choice([1.0, 2.0, 3.0])),
                                                    'parameters': {}, 'disable_rollback': True}, heat=True)
        if st == 409 and isinstance(doc, dict) and doc.get('error', {}).get('type') == 'StackExists':
            # The gateway retried the create on another engine after the
            # first one died holding it: the first attempt landed.
            ledger.note('stack %s: 409 StackExists for a fresh name (create retried by the gateway)' % name)
            st = 502
        r = ledger.outcome('stack create', st, doc)
        with ledger.lock:
            if r == 'accepted':
                stacks[name] = {'id': doc['stack']['id'], 'create': 'accepted', 'delete': None}
                mine.append(name)
            elif r == 'unknown':
                stacks[name] = {'id': None, 'create': 'unknown', 'delete': None}
            ledger.heat_ops += 1
        time.sleep(rnd.uniform(0.3, 1.2))
        if mine and rnd.random() < 0.4:
            victim = mine.pop(rnd.randrange(len(mine)))
            g = mesh.gateways[rnd.randrange(2)]
            st, doc = call('DELETE', g.heat + '/stacks/%s/%s' % (victim, stacks[victim]['id']), heat=True)
            r = ledger.outcome('stack delete', st, doc)
            with ledger.lock:
                stacks[victim]['delete'] = r
        time.sleep(rnd.uniform(0.3, 1.2))


# ---- the test -----------------------------------------------------------------

@pytest.fixture
def started():
    procs = Started()
    yield procs
    procs.cleanup()


def drop_database(url):
    import pymysql
    _, p = _server(MYSQL)
    name = url.rsplit('/', 1)[1].split('?')[0]
    conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root', password=p.password or '')
    with conn.cursor() as cur:
        cur.execute('DROP DATABASE IF EXISTS `%s`' % name)
    conn.close()


def db_allocations(url):
    """{consumer: {rp: {class: used}}} straight from the database."""
    import pymysql
    _, p = _server(MYSQL)
    name = url.rsplit('/', 1)[1].split('?')[0]
    conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root', password=p.password or '',
                           database=name)
    out = collections.defaultdict(lambda: collections.defaultdict(dict))
    with conn.cursor() as cur:
        cur.execute('SELECT a.consumer_id, rp.uuid, rc.name, a.used FROM allocations a '
                    'JOIN resource_providers rp ON rp.id = a.resource_provider_id '
                    'JOIN resource_classes rc ON rc.id = a.resource_class_id')
        for consumer, rp, rc, used in cur.fetchall():
            out[consumer][rp][rc] = int(used)
    conn.close()
    return {c: dict(v) for c, v in out.items()}


def test_mesh_survives_a_kill_of_each_process(started):
    t0 = time.monotonic()
    url = create_database('mysql', 'mesh_%s' % uuid.uuid4().hex[:8])
    mesh = Mesh(started, url)
    g1, g2 = mesh.gateways
    startup = time.monotonic() - t0

    # ---- the fleet (through gateway 1, before any fault) ----
    ok('PUT', g1.url + '/traits/CUSTOM_MESH_SSD', expect=(201, 204))
    providers = []
    for i in range(PROVIDERS):
        rp = ok('POST', g1.url + '/resource_providers', {'name': 'mesh-cn-%02d' % i})
        inv = ok('PUT', g1.url + '/resource_providers/%s/inventories' % rp['uuid'],
                 {'resource_provider_generation': rp['generation'], 'inventories': INVENTORY})
        traits = ['COMPUTE_VOLUME_EXTEND'] + [t for j, t in enumerate(TRAITS) if i % (j + 2) == 0]
        ok('PUT', g2.url + '/resource_providers/%s/traits' % rp['uuid'],
           {'resource_provider_generation': inv['resource_provider_generation'], 'traits': traits})
        providers.append(rp['uuid'])

    faults = Faults()
    ledger = Ledger(faults)
    stacks = {}
    stop = threading.Event()
    seed = int(os.environ.get('KEELSON_MESH_SEED', random.randrange(1 << 30)))
    print('\nmesh-faults seed %d (KEELSON_MESH_SEED replays the clients\' choices)' % seed)
    threads = [threading.Thread(target=placement_client, args=(n, mesh, ledger, stop, random.Random(seed + n)), daemon=True)
               for n in range(CLIENTS)]
    threads += [threading.Thread(target=heat_client, args=(n, mesh, ledger, stacks, stop, random.Random(seed + 100 + n)),
                                 daemon=True) for n in range(HEAT_CLIENTS)]
    for t in threads:
        t.start()

    def progress(n, timeout=60):
        """Waits (bounded) for the workload to make n more operations."""
        target = ledger.ops + n
        wait_until(lambda: ledger.ops >= target or not any(t.is_alive() for t in threads[:CLIENTS]), timeout, 0.05)

    def healthy_placement(g, path='/resource_providers?name=mesh-cn-00'):
        assert wait_until(lambda: call('GET', g.url + path)[0] == 200, 60), \
            '%s %s not answering\n%s' % (g.label, path, mesh.logs([g.label]))

    def healthy_heat(g):
        assert wait_until(lambda: call('GET', g.heat + '/stacks', heat=True)[0] == 200, 60), \
            '%s stacks not answering\n%s' % (g.label, mesh.logs([g.label]))

    kills = []

    def heat_progress(n, timeout=30):
        target = ledger.heat_ops + n
        wait_until(lambda: ledger.heat_ops >= target or not any(t.is_alive() for t in threads[CLIENTS:]), timeout, 0.1)

    def fault(label, kill, restart, healthy, down=lambda: None):
        progress(OPS_BETWEEN_KILLS)
        faults.begin(label)
        print('mesh-faults: kill -9 %s (after %d operations, %d stack writes)' % (label, ledger.ops, ledger.heat_ops))
        kill()
        progress(OPS_WHILE_DOWN, timeout=30)
        down()
        restart()
        healthy()
        progress(4, timeout=20)
        faults.end()
        kills.append(label)

    # 1. a gateway
    fault('gateway1', g1.kill, lambda: (g1.start(), wait_port(g1.o_port, proc=g1.proc)),
          lambda: (healthy_placement(g1), healthy_heat(g1)))
    # 2. an inventory (gateway 2's)
    inv = mesh.inventory[1]
    fault('inventory2', inv.kill, inv.start, lambda: healthy_placement(g2))
    # 3. the candidates service
    cand = mesh.candidates
    fault('candidates', cand.kill, cand.start,
          lambda: healthy_placement(g1, '/allocation_candidates?resources=VCPU:1&limit=1'))
    # 4. a stack engine, with stacks in progress
    wait_until(lambda: any(x['stack_status'].endswith('IN_PROGRESS')
                           for x in (call('GET', g2.heat + '/stacks', heat=True)[1] or {}).get('stacks', [])), 20)
    eng = mesh.engines[0]
    at_engine_kill = []

    def kill_engine():
        st, doc = call('GET', g2.heat + '/stacks', heat=True)
        if st == 200:
            at_engine_kill.extend(x['stack_name'] for x in doc['stacks'] if x['stack_status'].endswith('IN_PROGRESS'))
        eng.kill()
    # Down while a few stack writes go through the surviving engine (its
    # check_resource messages and locks on the in-progress stacks are left
    # to the controller primary's watchdog duty).
    fault('engine1', kill_engine, eng.start, lambda: (mesh.wait_registered(eng), healthy_heat(g1), healthy_heat(g2)),
          down=lambda: heat_progress(3))
    # 5. the controller primary
    sts = wait_until(lambda: settled(mesh.ctls), 30)
    assert sts, 'controllers not settled before the kill\n' + mesh.ctls.logs()
    old = primary_of(sts)
    term = sts[old]['term']

    def controller_back():
        r = ctl(mesh.ctls.addrs(), 'wait-primary', '--timeout', '30s', '--interval', '200ms', '--min-term', str(term + 1))
        assert r.returncode == 0, r.stderr + mesh.ctls.logs()
        mesh.ctls.start(old)
        mesh.history.append(('controller-' + old, mesh.ctls.proc[old]))
        assert wait_until(lambda: settled(mesh.ctls), 40), 'controllers not settled after the restart\n' + mesh.ctls.logs()

    fault('controller primary ' + old, lambda: mesh.ctls.kill(old), controller_back, lambda: None)
    # 6. the etcd leader
    victim = etcd_leader(mesh.etcd) or 'e1'

    def etcd_back():
        p = mesh.etcd.start(victim)
        mesh.history.append(('etcd-' + victim, p))
        mesh.etcd.wait_healthy(mesh.etcd.member(victim))

    fault('etcd leader ' + victim, lambda: mesh.etcd.stop(victim), etcd_back,
          lambda: wait_until(lambda: settled(mesh.ctls), 40))

    stop.set()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), 'a client thread did not finish'
    workload = time.monotonic() - t0 - startup

    # ---- (d) one primary, on every controller's word ----
    sts = wait_until(lambda: settled(mesh.ctls), 40)
    assert sts, 'controllers not settled at the end\n' + mesh.ctls.logs()
    sts = {n: status(mesh.ctls.addr(n)) for n in mesh.ctls.names}
    primaries = [n for n, s in sts.items() if s['responderRole'] == 'PRIMARY']
    named = {s['primaryName'] for s in sts.values()}

    # ---- (a) every consumer in a state the client's observations allow ----
    lost = []
    actual = {}
    for consumer, states in sorted(ledger.possible.items()):
        doc = ok('GET', g2.url + '/allocations/' + consumer)
        actual[consumer] = normalize(doc['allocations'])
        if actual[consumer] not in states:
            lost.append((consumer, actual[consumer], states))
    in_db = db_allocations(url)
    db_mismatch = [(c, in_db.get(c, {}), a) for c, a in actual.items() if in_db.get(c, {}) != a]
    db_mismatch += [(c, in_db[c], None) for c in in_db if c not in actual]
    expected_usage = collections.defaultdict(collections.Counter)
    for a in actual.values():
        for rp, res in a.items():
            expected_usage[rp].update(res)

    # ---- (b) capacity, and usages consistent with the allocations ----
    over = []
    usage_mismatch = []
    for rp in providers:
        invs = ok('GET', g1.url + '/resource_providers/%s/inventories' % rp)['inventories']
        usages = ok('GET', g2.url + '/resource_providers/%s/usages' % rp)['usages']
        for rc, i in invs.items():
            capacity = int((i['total'] - i['reserved']) * i['allocation_ratio'])
            if usages.get(rc, 0) > capacity:
                over.append((rp, rc, usages.get(rc, 0), capacity))
        if {k: v for k, v in usages.items() if v} != dict(expected_usage[rp]):
            usage_mismatch.append((rp, usages, dict(expected_usage[rp])))

    # ---- (c) no stack left in progress (bounded wait for the watchdog) ----
    def in_progress():
        st, doc = call('GET', g1.heat + '/stacks', heat=True)
        if st != 200:
            return None
        return [s for s in doc['stacks'] if s['stack_status'].endswith('IN_PROGRESS')]

    settle_start = time.monotonic()
    wait_until(lambda: in_progress() == [], 150, 1.0)
    stack_settle = time.monotonic() - settle_start
    final = {s['stack_name']: s for s in ok('GET', g1.heat + '/stacks', heat=True)['stacks']}
    stuck = [(n, s['stack_status'], s['stack_status_reason']) for n, s in final.items() if s['stack_status'].endswith('IN_PROGRESS')]
    failed = [(n, s['stack_status'], s['stack_status_reason']) for n, s in final.items() if s['stack_status'].endswith('FAILED')]
    stacks_lost = []
    for n, s in sorted(stacks.items()):
        if s['create'] == 'accepted' and s['delete'] in (None, 'refused'):
            if n not in final:
                stacks_lost.append((n, 'created, never deleted, missing'))
            elif final[n]['stack_status'] == 'CREATE_COMPLETE':
                doc = ok('GET', g2.heat + '/stacks/%s/%s/outputs/b' % (n, s['id']), heat=True)
                if not isinstance(doc['output'].get('output_value'), str) or len(doc['output']['output_value']) != 12:
                    stacks_lost.append((n, 'output b is %r' % doc['output']))
        if s['delete'] == 'accepted' and n in final and not final[n]['stack_status'].startswith('DELETE'):
            stacks_lost.append((n, 'deleted (204) but %s' % final[n]['stack_status']))
    stacks_created = sum(1 for s in stacks.values() if s['create'] == 'accepted')
    stacks_deleted = sum(1 for s in stacks.values() if s['delete'] == 'accepted')

    total = time.monotonic() - t0
    problems = mesh.problems()
    duties = [(int(m.group(1)), int(m.group(2))) for label, p in mesh.history if label.startswith('controller-')
              for m in re.finditer(r'watchdog duty: engine \S+: (\d+) locks reclaimed, (\d+) traversals re-triggered', p.output())]
    w = ledger.writes
    summary = ('mesh-faults: writes accepted=%d refused=%d unknown=%d lost=%d | over-capacity providers=%d | '
               'stacks created=%d deleted=%d stuck=%d failed=%d lost=%d (in progress at the engine kill %d; watchdog: '
               '%d locks reclaimed, %d traversals re-triggered) | kills=%d (%s) | primaries=%d | '
               'consumers=%d ops=%d | db-mismatch=%d usage-mismatch=%d | unexpected=%d | %.0fs (start %.0fs, '
               'workload %.0fs, stack settle %.0fs)'
               % (w['accepted'], w['refused'], w['unknown'], len(lost), len({o[0] for o in over}),
                  stacks_created, stacks_deleted, len(stuck), len(failed), len(stacks_lost), len(at_engine_kill),
                  sum(d[0] for d in duties), sum(d[1] for d in duties), len(kills), ', '.join(kills),
                  len(primaries), len(ledger.possible), ledger.ops, len(db_mismatch), len(usage_mismatch),
                  len(ledger.unexpected), total, startup, workload, stack_settle))
    print('mesh-faults detail: by kind %s' % dict(sorted(('%s %s' % k, v) for k, v in ledger.by_kind.items())))
    print('mesh-faults detail: refusals %s' % dict(ledger.refusals))
    print('mesh-faults detail: unknown %s' % dict(ledger.unknown_causes))
    print('mesh-faults detail: reads %s' % dict(ledger.reads))
    print('mesh-faults detail: %d ERROR/panic log lines %s'
          % (len(problems), dict(collections.Counter(line.split(':', 1)[0] for line in problems))))
    for line in problems[:12]:
        print('  ' + line)
    for n, st, reason in stuck + failed:
        print('mesh-faults stack %s: %s %s' % (n, st, reason))
    print(summary)

    context = '\n'.join(problems[:60])
    assert not lost, 'lost writes: %r\n%s' % (lost[:10], context)
    assert not db_mismatch, 'the API and the database disagree: %r' % db_mismatch[:10]
    assert not usage_mismatch, 'usages are not the sum of the allocations: %r' % usage_mismatch[:10]
    assert not over, 'providers over capacity: %r' % over
    assert not stuck, 'stacks stuck in progress: %r\n%s' % (stuck, mesh.logs([e.label for e in mesh.engines] + ['controller-c1', 'controller-c2', 'controller-c3']))
    assert not stacks_lost, 'stack writes lost: %r' % stacks_lost
    # The engines recover a stack whose engine died (README): none fails.
    assert not failed, 'stacks failed: %r\n%s' % (failed, mesh.logs([e.label for e in mesh.engines]))
    assert len(primaries) == 1 and len(named) == 1 and named == {primaries[0]}, sts
    assert len(kills) == 6
    assert w['accepted'] > 0
    drop_database(url)
