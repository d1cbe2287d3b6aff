"""`keelson placement audit [--fix]` on databases broken on purpose.

A small fleet is written through the REST API (two compute trees, three
consumers); then direct SQL puts the database into states the API never
writes: an inventory shrunk below its allocations, an allocation of a class
the provider has no inventory of, one on a provider that does not exist,
one of zero, a consumer record without allocations, allocations without a
consumer record, a wrong root provider id, a provider without generation,
a parent cycle. The audit must name each one, and `--fix` must repair the
safe ones (and only those: no allocation is changed) with the exit statuses
of `nova-manage placement audit` (0 clean, 3 found, 4 found and repaired).
On every configured backend."""
import json
import subprocess

import pytest

from conftest import BACKENDS, AllInOne, create_database, execute, http, keelson_bin, new_uuid, query

ALL_BACKENDS = sorted(set(BACKENDS) | {'sqlite'})
INCOMPLETE_ID = '00000000-0000-0000-0000-000000000000'
REPAIRABLE = {'consumer-without-allocations', 'incomplete-consumer', 'wrong-root', 'missing-generation'}


def audit(conf, *args):
    return subprocess.run([keelson_bin(), '--config-file', conf, 'placement', 'audit', *args], capture_output=True,
                          text=True, timeout=120)


def audit_json(conf, *args):
    r = audit(conf, '--json', *args)
    assert r.returncode in (0, 3, 4), r.stdout + r.stderr
    return r.returncode, json.loads(r.stdout)


def kinds(doc):
    return sorted(f['kind'] for f in doc['findings'])


class Fleet:
    """cn1 (VCPU 8, MEMORY_MB 4096) with child cn1-numa0 (VCPU 4); cn2
    (VCPU 8). Consumers: a (2 VCPU + 512 MB on cn1), b (2 VCPU on numa0),
    c (4 VCPU on cn2)."""

    def __init__(self, procs, backend):
        self.url = create_database(backend, 'audit_%s' % new_uuid()[:8])
        self.aio = AllInOne(procs, self.url)
        self.conf = self.aio.conf
        self.project, self.user = new_uuid(), new_uuid()
        self.rp = {}
        for name, parent in (('cn1', None), ('cn1-numa0', 'cn1'), ('cn2', None)):
            body = {'name': name, 'uuid': new_uuid()}
            if parent:
                body['parent_provider_uuid'] = self.rp[parent]
            status, _, _ = self.call('POST', '/resource_providers', body)
            assert status == 200, (status, name)
            self.rp[name] = body['uuid']
        for name, inv in (('cn1', {'VCPU': 8, 'MEMORY_MB': 4096}), ('cn1-numa0', {'VCPU': 4}), ('cn2', {'VCPU': 8})):
            body = {'resource_provider_generation': 0,
                    'inventories': {rc: {'total': total} for rc, total in inv.items()}}
            status, _, answer = self.call('PUT', '/resource_providers/%s/inventories' % self.rp[name], body)
            assert status == 200, answer
        self.consumer = {}
        for name, allocs in (('a', {'cn1': {'VCPU': 2, 'MEMORY_MB': 512}}), ('b', {'cn1-numa0': {'VCPU': 2}}),
                             ('c', {'cn2': {'VCPU': 4}})):
            self.consumer[name] = new_uuid()
            body = {'allocations': {self.rp[rp]: {'resources': res} for rp, res in allocs.items()},
                    'project_id': self.project, 'user_id': self.user, 'consumer_generation': None}
            status, _, answer = self.call('PUT', '/allocations/%s' % self.consumer[name], body, version='1.28')
            assert status == 204, answer

    def call(self, method, path, body=None, version='1.39'):
        return http(method, self.aio.url + path, body, version=version)

    def id_of(self, provider):
        return query(self.url, "SELECT id FROM resource_providers WHERE uuid = '%s'" % self.rp[provider])[0][0]

    def class_id(self, name):
        return query(self.url, "SELECT id FROM resource_classes WHERE name = '%s'" % name)[0][0]

    def allocate(self, provider_id, consumer, resource_class, used):
        execute(self.url, ('INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) '
                           'VALUES (?, ?, ?, ?)', (provider_id, consumer, self.class_id(resource_class), used)))

    def allocations_snapshot(self):
        return sorted(query(self.url, 'SELECT resource_provider_id, consumer_id, resource_class_id, used '
                                      'FROM allocations'))


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_every_broken_state_is_found_and_only_the_safe_ones_repaired(procs, backend):
    fleet = Fleet(procs, backend)
    r = audit(fleet.conf)
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'Checked 3 resource providers, 4 allocations, 3 consumers: 0 problems found' in r.stdout

    cn1, numa0, cn2 = fleet.id_of('cn1'), fleet.id_of('cn1-numa0'), fleet.id_of('cn2')
    leftover, recordless = new_uuid(), new_uuid()
    owner = query(fleet.url, 'SELECT project_id, user_id FROM consumers')[0]
    execute(fleet.url,
            ('UPDATE inventories SET total = 2 WHERE resource_provider_id = ?', (cn2,)),
            ('UPDATE resource_providers SET root_provider_id = ? WHERE id = ?', (numa0, numa0)),
            ('UPDATE resource_providers SET generation = NULL WHERE id = ?', (cn1,)),
            ('INSERT INTO consumers (uuid, project_id, user_id, generation) VALUES (?, ?, ?, 0)',
             (leftover, owner[0], owner[1])))
    fleet.allocate(cn1, fleet.consumer['a'], 'DISK_GB', 10)
    fleet.allocate(cn1, recordless, 'MEMORY_MB', 256)
    fleet.allocate(numa0, fleet.consumer['b'], 'MEMORY_MB', 0)
    # Allocations have no foreign keys upstream either, so this one can be
    # written on every backend.
    fleet.allocate(987654, fleet.consumer['c'], 'VCPU', 1)
    before = fleet.allocations_snapshot()

    code, doc = audit_json(fleet.conf)
    assert code == 3
    assert kinds(doc) == sorted([
        'over-capacity', 'allocation-without-inventory', 'allocation-without-inventory', 'non-positive-allocation',
        'allocation-on-missing-provider', 'consumer-without-allocations', 'incomplete-consumer', 'wrong-root',
        'missing-generation'])
    by_kind = {f['kind']: f for f in doc['findings']}
    assert by_kind['over-capacity']['provider']['uuid'] == fleet.rp['cn2']
    assert (by_kind['over-capacity']['used'], by_kind['over-capacity']['capacity']) == (4, 2.0)
    assert by_kind['wrong-root']['expected'] == cn1 and by_kind['wrong-root']['recorded'] == numa0
    assert by_kind['incomplete-consumer']['consumer'] == recordless
    assert by_kind['consumer-without-allocations']['consumer'] == leftover
    assert {f['kind'] for f in doc['findings'] if f['repairable']} == REPAIRABLE
    without_inventory = sorted((f['consumer'], f['resource_class']) for f in doc['findings']
                               if f['kind'] == 'allocation-without-inventory')
    # The zero MEMORY_MB on numa0 is both of nothing and of a class numa0
    # has no inventory of.
    assert without_inventory == sorted([(fleet.consumer['a'], 'DISK_GB'), (fleet.consumer['b'], 'MEMORY_MB')])

    text = audit(fleet.conf)
    assert text.returncode == 3
    assert 'is over capacity for VCPU: 4 allocated, capacity 2' in text.stdout
    assert '[repairable with --fix]' in text.stdout
    assert ': 9 problems found' in text.stdout

    code, doc = audit_json(fleet.conf, '--fix')
    assert code == 3, 'unrepairable findings remain'
    repairs = {(f['kind'], f['repair']) for f in doc['findings']}
    assert {k for k, r in repairs if r == 'repaired'} == REPAIRABLE
    assert {k for k, r in repairs if r != 'repaired'} == {
        'over-capacity', 'allocation-without-inventory', 'non-positive-allocation', 'allocation-on-missing-provider'}
    assert fleet.allocations_snapshot() == before, 'a repair changed an allocation'

    # The repaired rows, as the API shows them.
    status, _, rp = fleet.call('GET', '/resource_providers/%s' % fleet.rp['cn1-numa0'])
    assert status == 200 and rp['root_provider_uuid'] == fleet.rp['cn1']
    status, _, rp = fleet.call('GET', '/resource_providers/%s' % fleet.rp['cn1'])
    assert status == 200 and rp['generation'] == 0
    status, _, allocs = fleet.call('GET', '/allocations/%s' % recordless)
    assert status == 200 and allocs['project_id'] == INCOMPLETE_ID
    assert query(fleet.url, "SELECT COUNT(*) FROM consumers WHERE uuid = '%s'" % leftover)[0][0] == 0

    code, doc = audit_json(fleet.conf)
    assert code == 3
    assert set(kinds(doc)) == {'over-capacity', 'allocation-without-inventory', 'non-positive-allocation',
                               'allocation-on-missing-provider'}

    # What an operator decides: the inventory back, the stray rows gone.
    execute(fleet.url,
            ('UPDATE inventories SET total = 8 WHERE resource_provider_id = ?', (cn2,)),
            ('DELETE FROM allocations WHERE resource_provider_id = ? OR used < 1 OR resource_class_id = ?',
             (987654, fleet.class_id('DISK_GB'))))
    r = audit(fleet.conf)
    assert r.returncode == 0, r.stdout


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_all_repaired_exits_4_then_clean(procs, backend):
    fleet = Fleet(procs, backend)
    execute(fleet.url, ('DELETE FROM consumers WHERE uuid = ?', (fleet.consumer['c'],)),
            ('UPDATE resource_providers SET root_provider_id = NULL WHERE uuid = ?', (fleet.rp['cn2'],)))
    code, doc = audit_json(fleet.conf, '--fix')
    assert code == 4, doc
    assert kinds(doc) == ['incomplete-consumer', 'wrong-root']
    assert all(f['repair'] == 'repaired' for f in doc['findings'])
    code, doc = audit_json(fleet.conf)
    assert (code, doc['findings']) == (0, [])


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_a_parent_cycle_is_reported_and_left_alone(procs, backend):
    fleet = Fleet(procs, backend)
    cn1, numa0 = fleet.id_of('cn1'), fleet.id_of('cn1-numa0')
    execute(fleet.url, ('UPDATE resource_providers SET parent_provider_id = ? WHERE id = ?', (numa0, cn1)))
    code, doc = audit_json(fleet.conf, '--fix')
    assert code == 3
    assert kinds(doc) == ['parent-cycle', 'parent-cycle']
    assert all(f['repair'] == 'left' for f in doc['findings'])
    assert query(fleet.url, 'SELECT parent_provider_id FROM resource_providers WHERE id = %d' % cn1)[0][0] == numa0


def test_an_unreachable_database_is_an_error_not_a_finding(tmp_path):
    conf = tmp_path / 'keelson.conf'
    conf.write_text('[placement_database]\nconnection = mysql+pymysql://root@127.0.0.1:1/nothing\n')
    r = audit(str(conf))
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout == ''
