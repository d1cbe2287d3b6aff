"""Placement from Heat: a fleet of 100 resource providers described in a
HOT template (OS::Placement::ResourceProvider), created, listed by the
real `openstack resource provider list` through keelson's gateway,
updated in place (every inventory changes, every uuid stays), an
OS::Placement::Allocation against one provider making Placement refuse
that provider's delete (its error in the resource's status reason), then
the allocation removed and the fleet deleted. On every configured
backend (the Placement and orchestration databases both on it)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from conftest import AllInOne, BACKENDS, create_database, http
from heat import Heat, Mesh

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')
pytestmark = pytest.mark.skipif(not os.path.exists(OPENSTACK), reason='python-openstackclient is not installed')

ROOTS = 80
CHILDREN = 20          # one child (a NUMA-like node) under each of the first 20 roots
AGGREGATE = str(uuid.uuid4())
PROJECT = 'admin'      # noauth's project without X-Auth-Project, as the CLI calls


def fleet_template(vcpus, memory_mb, fpgas):
    """The HOT template of the fleet, written out resource by resource
    (no ResourceGroup yet): `ROOTS` compute-like roots and `CHILDREN`
    children under the first roots."""
    resources = {}
    for i in range(ROOTS):
        resources['cn%03d' % i] = {
            'type': 'OS::Placement::ResourceProvider',
            'properties': {
                'name': 'fleet-cn%03d' % i,
                'inventories': {
                    'VCPU': {'total': vcpus, 'allocation_ratio': 4.0},
                    'MEMORY_MB': {'total': memory_mb, 'reserved': 512, 'step_size': 256},
                    'DISK_GB': {'total': {'get_param': 'disk_gb'}},
                },
                'traits': ['HW_CPU_X86_AVX2', 'CUSTOM_KEELSON_FLEET'],
                'aggregates': [AGGREGATE],
            },
        }
    for i in range(CHILDREN):
        resources['numa%03d' % i] = {
            'type': 'OS::Placement::ResourceProvider',
            'properties': {
                'name': 'fleet-cn%03d-numa0' % i,
                'parent_provider': {'get_resource': 'cn%03d' % i},
                'inventories': {'CUSTOM_KEELSON_FPGA': {'total': fpgas}},
            },
        }
    return {
        'heat_template_version': '2018-08-31',
        'parameters': {'disk_gb': {'type': 'number', 'default': 1000}},
        'resources': resources,
        'outputs': {
            'first_uuid': {'value': {'get_attr': ['cn000', 'uuid']}},
            'first_generation': {'value': {'get_attr': ['cn000', 'generation']}},
        },
    }


CONSUMER_TEMPLATE = {
    'heat_template_version': '2018-08-31',
    'parameters': {'provider': {'type': 'string'}},
    'resources': {
        'vm': {
            'type': 'OS::Placement::Allocation',
            'properties': {
                'project_id': 'tenant-a',
                'user_id': 'user-a',
                'consumer_type': 'INSTANCE',
                'allocations': [{'resource_provider': {'get_param': 'provider'},
                                 'resources': {'VCPU': 4, 'MEMORY_MB': 1024}}],
            },
        },
    },
    'outputs': {'consumer': {'value': {'get_attr': ['vm', 'consumer']}}},
}


class Cli:
    """The `openstack` CLI against keelson: heatclient (noauth) on the
    Orchestration API, osc-placement (admin token) on the Placement API."""

    def __init__(self, orchestration_url, placement_url):
        self.dir = tempfile.mkdtemp(prefix='kt-hpl-')
        self.heat_env = dict(os.environ, OS_AUTH_TYPE='none', OS_ENDPOINT='%s/v1/%s' % (orchestration_url, PROJECT),
                             OS_ORCHESTRATION_API_VERSION='1')
        self.placement_url = placement_url

    def _run(self, cmd, env=None):
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, '%s\nstdout: %s\nstderr: %s' % (' '.join(cmd), p.stdout[-4000:], p.stderr[-4000:])
        # --wait prints the event stream before the JSON document.
        lines = p.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith('{') or line.startswith('['))
        return json.loads('\n'.join(lines[start:]))

    def heat(self, *args):
        return self._run([OPENSTACK] + list(args) + ['-f', 'json'], env=self.heat_env)

    def placement(self, *args):
        return self._run([OPENSTACK, '--os-auth-type', 'admin_token', '--os-endpoint', self.placement_url,
                          '--os-token', 'admin', '--os-placement-api-version', '1.39'] + list(args) + ['-f', 'json'])

    def template(self, doc):
        path = os.path.join(self.dir, 'tpl-%s.yaml' % uuid.uuid4().hex[:8])
        with open(path, 'w') as f:
            json.dump(doc, f)      # JSON is YAML
        return path


@pytest.fixture(params=BACKENDS)
def mesh(request, procs):
    tag = uuid.uuid4().hex[:8]
    placement_db = create_database(request.param, 'hpl_%s' % tag)
    orchestration_db = create_database(request.param, 'hpo_%s' % tag)
    aio = AllInOne(procs, placement_db, extra={'database': {'connection': orchestration_db}})
    url = aio.orchestration_url()
    return aio, Heat(url, project=PROJECT), Cli(url, aio.url)


def inventories(placement, uuid_):
    status, _, doc = http('GET', '%s/resource_providers/%s/inventories' % (placement, uuid_))
    assert status == 200, doc
    return doc


def test_fleet_from_heat(mesh):
    aio, heat, cli = mesh
    status, _, types = heat.call('GET', '/resource_types')
    assert status == 200
    assert {'OS::Placement::ResourceProvider', 'OS::Placement::Allocation'} <= set(types['resource_types'])

    # ---- create: 100 providers -------------------------------------------------
    started = time.monotonic()
    created = cli.heat('stack', 'create', '-t', cli.template(fleet_template(16, 65536, 2)), '--wait', 'fleet')
    create_secs = time.monotonic() - started
    assert created['stack_status'] == 'CREATE_COMPLETE', created
    fleet_id = created['id']
    resources = heat.resources('fleet', fleet_id)
    assert len(resources) == ROOTS + CHILDREN
    assert all(r['resource_status'] == 'CREATE_COMPLETE' for r in resources.values())
    physical = {name: r['physical_resource_id'] for name, r in resources.items()}

    listed = cli.placement('resource', 'provider', 'list')
    assert len(listed) == ROOTS + CHILDREN
    by_name = {p['name']: p for p in listed}
    for i in range(ROOTS):
        assert by_name['fleet-cn%03d' % i]['uuid'] == physical['cn%03d' % i]
        assert by_name['fleet-cn%03d' % i]['parent_provider_uuid'] is None
    for i in range(CHILDREN):
        child = by_name['fleet-cn%03d-numa0' % i]
        assert child['uuid'] == physical['numa%03d' % i]
        assert child['parent_provider_uuid'] == physical['cn%03d' % i]
        assert child['root_provider_uuid'] == physical['cn%03d' % i]
    inv = cli.placement('resource', 'provider', 'inventory', 'list', physical['cn000'])
    assert {i['resource_class']: i['total'] for i in inv} == {'VCPU': 16, 'MEMORY_MB': 65536, 'DISK_GB': 1000}
    traits = cli.placement('resource', 'provider', 'trait', 'list', physical['cn000'])
    assert sorted(t['name'] for t in traits) == ['CUSTOM_KEELSON_FLEET', 'HW_CPU_X86_AVX2']
    aggs = cli.placement('resource', 'provider', 'aggregate', 'list', physical['cn000'])
    assert [a['uuid'] for a in aggs] == [AGGREGATE]
    before = {}
    for name, rp in physical.items():
        doc = inventories(aio.url, rp)
        before[name] = doc['resource_provider_generation']
        if name.startswith('cn'):
            assert doc['inventories']['VCPU']['total'] == 16
            assert doc['inventories']['VCPU']['allocation_ratio'] == 4.0
            assert doc['inventories']['MEMORY_MB']['reserved'] == 512
            assert doc['inventories']['MEMORY_MB']['step_size'] == 256
        else:
            assert doc['inventories'] == {'CUSTOM_KEELSON_FPGA': {
                'total': 2, 'reserved': 0, 'min_unit': 1, 'max_unit': 2147483647, 'step_size': 1,
                'allocation_ratio': 1.0}}
    assert heat.output('fleet', fleet_id, 'first_uuid') == physical['cn000']
    assert heat.output('fleet', fleet_id, 'first_generation') == before['cn000']

    # ---- update: every inventory changes, in place -------------------------------
    started = time.monotonic()
    updated = cli.heat('stack', 'update', '-t', cli.template(fleet_template(32, 131072, 4)),
                       '--parameter', 'disk_gb=2000', '--wait', 'fleet')
    update_secs = time.monotonic() - started
    assert updated['stack_status'] == 'UPDATE_COMPLETE', updated
    resources = heat.resources('fleet', fleet_id)
    assert {name: r['physical_resource_id'] for name, r in resources.items()} == physical
    assert all(r['resource_status'] == 'UPDATE_COMPLETE' for r in resources.values())
    events = heat.events('fleet', fleet_id)
    assert not [e for e in events if e['resource_name'] != 'fleet' and e['resource_status'].startswith('UPDATE')
                and 'replacement' in (e['resource_status_reason'] or '')]
    assert len([p for p in cli.placement('resource', 'provider', 'list')]) == ROOTS + CHILDREN
    for name, rp in physical.items():
        doc = inventories(aio.url, rp)
        # Only the inventories changed: one write, one generation.
        assert doc['resource_provider_generation'] == before[name] + 1, name
        if name.startswith('cn'):
            assert {c: i['total'] for c, i in doc['inventories'].items()} == {
                'VCPU': 32, 'MEMORY_MB': 131072, 'DISK_GB': 2000}
        else:
            assert doc['inventories']['CUSTOM_KEELSON_FPGA']['total'] == 4
    assert heat.output('fleet', fleet_id, 'first_generation') == before['cn000'] + 1

    # ---- an allocation makes Placement refuse a provider's delete ----------------------
    target = physical['cn050']
    consumer_stack = cli.heat('stack', 'create', '-t', cli.template(CONSUMER_TEMPLATE),
                              '--parameter', 'provider=%s' % target, '--wait', 'consumers')
    assert consumer_stack['stack_status'] == 'CREATE_COMPLETE', consumer_stack
    consumer = heat.output('consumers', consumer_stack['id'], 'consumer')
    status, _, allocs = http('GET', '%s/allocations/%s' % (aio.url, consumer))
    assert status == 200
    assert allocs['allocations'] == {target: {'generation': before['cn050'] + 2,
                                              'resources': {'VCPU': 4, 'MEMORY_MB': 1024}}}
    assert (allocs['project_id'], allocs['user_id'], allocs['consumer_type']) == ('tenant-a', 'user-a', 'INSTANCE')

    heat.delete('fleet', fleet_id)
    failed = heat.wait(fleet_id, 'DELETE_FAILED', timeout=300)
    expected = ('placement.resource_provider.inuse: resources.cn050: Unable to delete resource provider %s: '
                'Resource provider has allocations.' % target)
    assert failed['stack_status_reason'] == 'Resource DELETE failed: ' + expected
    rsrc = heat.resources('fleet', fleet_id)['cn050']
    assert (rsrc['resource_status'], rsrc['resource_status_reason']) == ('DELETE_FAILED', expected)
    # The refused provider is intact. Others may remain too: as in Heat,
    # once a resource fails the traversal starts nothing new, and the
    # deletes still queued at that moment wait for the next delete.
    left = {p['uuid'] for p in cli.placement('resource', 'provider', 'list')}
    assert target in left and left <= set(physical.values())
    assert {i['resource_class']: i['total']
            for i in cli.placement('resource', 'provider', 'inventory', 'list', target)}['VCPU'] == 32

    # ---- the allocation goes, then the fleet -----------------------------------
    heat.delete('consumers', consumer_stack['id'])
    heat.wait(consumer_stack['id'], 'GONE', timeout=120)
    status, _, allocs = http('GET', '%s/allocations/%s' % (aio.url, consumer))
    assert status == 200 and allocs['allocations'] == {}
    heat.delete('fleet', fleet_id)
    heat.wait(fleet_id, 'GONE', timeout=300)
    assert cli.placement('resource', 'provider', 'list') == []
    print('heat-placement: 100 providers created in %.1f s, updated in %.1f s' % (create_secs, update_secs))


def test_placement_properties_are_validated(mesh):
    _, heat, _ = mesh
    template = {'heat_template_version': '2018-08-31', 'resources': {'rp': {
        'type': 'OS::Placement::ResourceProvider',
        'properties': {'inventories': {'VCPU': {'total': 'many'}}}}}}
    status, _, doc = heat.call('POST', '/validate', {'template': template})
    assert status == 400, doc
    assert doc['error']['type'] == 'StackValidationFailed'
    assert doc['error']['message'] == ('Property error: resources.rp.properties.inventories.VCPU.total: '
                                       "Value 'many' is not an integer")
    status, _, doc = heat.call('GET', '/resource_types/OS::Placement::ResourceProvider')
    assert status == 200, doc
    assert doc['properties']['inventories']['update_allowed'] is True
    assert doc['properties']['uuid']['update_allowed'] is False
    assert set(doc['attributes']) == {'uuid', 'generation', 'show'}


def test_separate_engines_offer_placement_types_only_with_an_inventory_endpoint(procs):
    """`keelson engine` processes: without `[keelson] inventory_endpoint`
    no OS::Placement::* types; with it, a provider made through them."""
    aio = AllInOne(procs, create_database('sqlite', 'hpl_sep'))
    inventory = aio.logged_address('inventory gRPC on ')
    plain = Mesh(procs, create_database('sqlite', 'hpo_plain'), engines=1)
    status, _, types = plain.heat.call('GET', '/resource_types')
    assert status == 200 and not [t for t in types['resource_types'] if t.startswith('OS::Placement::')]
    mesh = Mesh(procs, create_database('sqlite', 'hpo_inv'), engines=1,
                extra={'keelson': {'inventory_endpoint': 'http://%s' % inventory}})
    heat = mesh.heat
    status, _, types = heat.call('GET', '/resource_types')
    assert status == 200 and 'OS::Placement::ResourceProvider' in types['resource_types']
    template = {'heat_template_version': '2018-08-31', 'resources': {'rp': {
        'type': 'OS::Placement::ResourceProvider',
        'properties': {'inventories': {'VCPU': {'total': 8}}, 'traits': ['CUSTOM_SEPARATE']}}}}
    ident = heat.create('separate', template)
    heat.wait(ident, 'CREATE_COMPLETE')
    rp = heat.resources('separate', ident)['rp']['physical_resource_id']
    status, _, doc = http('GET', '%s/resource_providers/%s' % (aio.url, rp))
    assert status == 200 and doc['name'].startswith('separate-rp-')
    assert inventories(aio.url, rp)['inventories']['VCPU']['total'] == 8
    heat.delete('separate', ident)
    heat.wait(ident, 'GONE')
    status, _, _ = http('GET', '%s/resource_providers/%s' % (aio.url, rp))
    assert status == 404
