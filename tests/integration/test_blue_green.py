"""Blue/green: the real Python Placement (openstack-placement 16.0.0) and
keelson serve the same database at the same time; what one writes, the
other reads correctly."""
import pytest

from conftest import AllInOne, BACKENDS, create_database, http, new_uuid, ref_placement

BG_BACKENDS = [b for b in BACKENDS if b == 'mysql'] or [b for b in BACKENDS if b == 'postgresql'] or ['sqlite']


def python_placement(procs, url):
    return ref_placement(procs, url)[0]


@pytest.mark.parametrize('backend', BG_BACKENDS)
def test_python_and_keelson_share_one_database(backend, procs):
    url = create_database(backend, 'bluegreen')
    py = python_placement(procs, url)
    ks = AllInOne(procs, url).url

    # Python creates a tree with inventory, traits and aggregates.
    status, _, root = http('POST', py + '/resource_providers', {'name': 'cn1'})
    assert status == 200, root
    status, _, child = http('POST', py + '/resource_providers', {'name': 'cn1-numa0', 'parent_provider_uuid': root['uuid']})
    assert status == 200, child
    status, _, inv = http('PUT', py + '/resource_providers/%s/inventories' % root['uuid'], {
        'resource_provider_generation': 0, 'inventories': {'VCPU': {'total': 16}, 'MEMORY_MB': {'total': 4096}}})
    assert status == 200, inv
    assert http('PUT', py + '/traits/CUSTOM_BLUE', version='1.6')[0] == 201
    status, _, traits = http('PUT', py + '/resource_providers/%s/traits' % root['uuid'], {
        'resource_provider_generation': 1, 'traits': ['CUSTOM_BLUE', 'HW_CPU_X86_AVX2']})
    assert status == 200, traits
    agg = new_uuid()
    status, _, aggs = http('PUT', py + '/resource_providers/%s/aggregates' % root['uuid'], {
        'resource_provider_generation': 2, 'aggregates': [agg]})
    assert status == 200, aggs

    # keelson reads it all.
    status, _, got = http('GET', ks + '/resource_providers/%s' % child['uuid'])
    assert status == 200 and got['parent_provider_uuid'] == root['uuid'] and got['root_provider_uuid'] == root['uuid']
    status, _, got = http('GET', ks + '/resource_providers/%s/inventories' % root['uuid'])
    assert got['inventories']['VCPU']['total'] == 16 and got['resource_provider_generation'] == 3
    status, _, got = http('GET', ks + '/resource_providers/%s/traits' % root['uuid'])
    assert sorted(got['traits']) == ['CUSTOM_BLUE', 'HW_CPU_X86_AVX2']
    status, _, got = http('GET', ks + '/resource_providers/%s/aggregates' % root['uuid'])
    assert got['aggregates'] == [agg]

    # keelson allocates; Python sees the allocation, usages and generations.
    consumer = new_uuid()
    status, _, body = http('PUT', ks + '/allocations/' + consumer, {
        'allocations': {root['uuid']: {'resources': {'VCPU': 4, 'MEMORY_MB': 1024}}},
        'project_id': 'proj', 'user_id': 'user', 'consumer_generation': None, 'consumer_type': 'INSTANCE'})
    assert status == 204, body
    status, _, got = http('GET', py + '/allocations/' + consumer)
    assert got['allocations'][root['uuid']]['resources'] == {'VCPU': 4, 'MEMORY_MB': 1024}
    assert got['consumer_generation'] == 1 and got['project_id'] == 'proj'
    status, _, got = http('GET', py + '/usages?project_id=proj', version='1.9')
    assert got['usages'] == {'VCPU': 4, 'MEMORY_MB': 1024}

    # Python moves the allocation with the consumer generation keelson set.
    status, _, body = http('PUT', py + '/allocations/' + consumer, {
        'allocations': {root['uuid']: {'resources': {'VCPU': 2}}},
        'project_id': 'proj', 'user_id': 'user', 'consumer_generation': 1, 'consumer_type': 'INSTANCE'})
    assert status == 204, body
    status, _, got = http('GET', ks + '/resource_providers/%s/usages' % root['uuid'])
    assert got['usages'] == {'VCPU': 2, 'MEMORY_MB': 0}
    # A stale generation is refused by keelson with Placement's code.
    status, _, body = http('PUT', ks + '/allocations/' + consumer, {
        'allocations': {root['uuid']: {'resources': {'VCPU': 1}}},
        'project_id': 'proj', 'user_id': 'user', 'consumer_generation': 1, 'consumer_type': 'INSTANCE'})
    assert status == 409 and body['errors'][0]['code'] == 'placement.concurrent_update'
    # keelson creates a custom class; Python uses it.
    assert http('PUT', ks + '/resource_classes/CUSTOM_GREEN', version='1.7')[0] == 201
    status, _, body = http('POST', py + '/resource_providers/%s/inventories' % child['uuid'], {
        'resource_provider_generation': 0, 'resource_class': 'CUSTOM_GREEN', 'total': 5})
    assert status == 201, body
    status, _, got = http('GET', ks + '/resource_providers/%s/inventories/CUSTOM_GREEN' % child['uuid'])
    assert status == 200 and got['total'] == 5
    # Deleting through Python, keelson no longer finds it.
    assert http('DELETE', py + '/allocations/' + consumer)[0] == 204
    status, _, got = http('GET', ks + '/allocations/' + consumer)
    assert got['allocations'] == {}
