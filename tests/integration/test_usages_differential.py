"""GET /usages differential: keelson and the real Python Placement
(openstack-placement 16.0.0) read the same database, holding consumers of
two projects, two users, two consumer types and none, some with several
classes over several providers; every version and filter answers alike."""
import pytest

from conftest import AllInOne, BACKENDS, create_database, http, new_uuid, ref_placement


def _fleet(ks):
    providers = []
    for i in range(3):
        status, _, rp = http('POST', ks + '/resource_providers', {'name': 'rp%d' % i})
        assert status == 200, rp
        status, _, inv = http('PUT', ks + '/resource_providers/%s/inventories' % rp['uuid'], {
            'resource_provider_generation': rp['generation'],
            'inventories': {'VCPU': {'total': 1000}, 'MEMORY_MB': {'total': 100000}, 'DISK_GB': {'total': 10000}}})
        assert status == 200, inv
        providers.append(rp['uuid'])
    n = 0
    for project in ('p1', 'p2'):
        for user in ('u1', 'u2'):
            for consumer_type in ('INSTANCE', 'MIGRATION', None):
                for k in range(3):
                    n += 1
                    # One class; two classes and a second provider; another class.
                    resources = [{'VCPU': 1}, {'VCPU': 2, 'MEMORY_MB': 128}, {'DISK_GB': 5}][k]
                    allocations = {providers[n % 3]: {'resources': resources}}
                    if k == 1:
                        allocations[providers[(n + 1) % 3]] = {'resources': {'DISK_GB': 3}}
                    body = {'allocations': allocations, 'project_id': project, 'user_id': user,
                            'consumer_generation': None}
                    version = '1.28'  # before consumer types: the consumer has none
                    if consumer_type:
                        body['consumer_type'], version = consumer_type, '1.38'
                    status, _, got = http('PUT', ks + '/allocations/' + new_uuid(), body, version=version)
                    assert status == 204, got


def _answer(response):
    status, _, body = response
    if isinstance(body, dict) and 'errors' in body:
        return status, body['errors'][0]['detail']
    return status, body


@pytest.mark.parametrize('backend', BACKENDS)
def test_usages_answer_as_python_placement(backend, procs):
    url = create_database(backend, 'usagesdiff')
    ks = AllInOne(procs, url).url
    py = ref_placement(procs, url)[0]
    _fleet(ks)
    compared = 0
    for version in ('1.9', '1.37', '1.38', '1.39'):
        for query in ('project_id=p1', 'project_id=p2&user_id=u2', 'project_id=nope', 'project_id=p1&user_id=nope'):
            for consumer_type in ('', 'all', 'unknown', 'INSTANCE', 'NOPE'):
                if consumer_type and version < '1.38':
                    continue
                path = '/usages?' + query + ('&consumer_type=' + consumer_type if consumer_type else '')
                want = _answer(http('GET', py + path, version=version))
                got = _answer(http('GET', ks + path, version=version))
                if want[0] == 500:
                    # On PostgreSQL upstream's by-type query (1.38 without
                    # all/unknown) selects a column it does not group by.
                    assert backend == 'postgresql' and got[0] == 200, (version, path, got)
                    continue
                assert got == want, (version, path)
                compared += 1
    assert compared >= 18
