"""`keelson placement explain` and `GET /keelson/v1/placement/explain`.

A small fleet written through the REST API: four computes (VCPU 8,
MEMORY_MB 4096), c1 disabled (COMPUTE_STATUS_DISABLED), c2, c3 and c4 with
2, 4 and 5 VCPU free; and cn5, a tree whose one child pf has SRIOV_NET_VF.
For a request that fits nowhere and ones that fit some providers, the REST
answer names the rule that excluded each provider, the CLI prints it, and
explain's surviving providers are exactly those of GET
/allocation_candidates for the same query. On every configured backend."""
import json
import subprocess
import urllib.parse

import pytest

from conftest import BACKENDS, AllInOne, create_database, http, keelson_bin, new_uuid

EXPLAIN = '/keelson/v1/placement/explain'
DISABLED = 'COMPUTE_STATUS_DISABLED'


class Fleet:
    def __init__(self, procs, backend):
        self.aio = AllInOne(procs, create_database(backend, 'explain_%s' % new_uuid()[:8]))
        self.rp = {}
        for name, parent in (('c1', None), ('c2', None), ('c3', None), ('c4', None), ('cn5', None), ('pf', 'cn5')):
            body = {'name': name, 'uuid': new_uuid()}
            if parent:
                body['parent_provider_uuid'] = self.rp[parent]
            status, _, answer = self.call('POST', '/resource_providers', body)
            assert status == 200, answer
            self.rp[name] = body['uuid']
        self.name = {u: n for n, u in self.rp.items()}
        for name in ('c1', 'c2', 'c3', 'c4'):
            self.inventory(name, {'VCPU': 8, 'MEMORY_MB': 4096})
        self.inventory('pf', {'SRIOV_NET_VF': 8})
        status, _, answer = self.call('PUT', '/resource_providers/%s/traits' % self.rp['c1'],
                                      {'resource_provider_generation': 1, 'traits': [DISABLED]})
        assert status == 200, answer
        for name, used in (('c2', 6), ('c3', 4), ('c4', 3)):
            body = {'allocations': {self.rp[name]: {'resources': {'VCPU': used}}},
                    'project_id': new_uuid(), 'user_id': new_uuid(), 'consumer_generation': None}
            status, _, answer = self.call('PUT', '/allocations/%s' % new_uuid(), body, version='1.28')
            assert status == 204, answer

    def call(self, method, path, body=None, version='1.39', token='admin'):
        return http(method, self.aio.url + path, body, version=version, token=token)

    def inventory(self, name, inventories):
        body = {'resource_provider_generation': 0, 'inventories': {rc: {'total': t} for rc, t in inventories.items()}}
        status, _, answer = self.call('PUT', '/resource_providers/%s/inventories' % self.rp[name], body)
        assert status == 200, answer

    def explain(self, query, version='1.39'):
        status, _, answer = self.call('GET', EXPLAIN + '?' + query, version=version)
        assert status == 200, answer
        return answer

    def candidates(self, query, version='1.39'):
        status, _, answer = self.call('GET', '/allocation_candidates?' + query, version=version)
        assert status == 200, answer
        return answer

    def excluded(self, answer, group=0):
        """{provider name: (rule, extra)} of one group."""
        out = {}
        for x in answer['groups'][group]['excluded']:
            extra = {k: v for k, v in x.items() if k not in ('provider', 'rule')}
            out[self.name[x['provider']]] = (x['rule'], extra)
        return out

    def cli(self, query, *args):
        return subprocess.run([keelson_bin(), '--config-file', self.aio.conf, 'placement', 'explain', '--url',
                               self.aio.url, *args, query], capture_output=True, text=True, timeout=120)


def providers_in(candidates):
    used = set()
    for a in candidates['allocation_requests']:
        allocations = a['allocations']
        # A list of {resource_provider: {uuid}, resources} before 1.12.
        if isinstance(allocations, list):
            used.update(x['resource_provider']['uuid'] for x in allocations)
        else:
            used.update(allocations)
        for providers in a.get('mappings', {}).values():
            used.update(providers)
    return used


def same_as_candidates(fleet, query, version='1.39'):
    """Explain's surviving providers and count are the real answer's (or
    both are the same error)."""
    real_status, _, real = fleet.call('GET', '/allocation_candidates?' + query, version=version)
    status, _, answer = fleet.call('GET', EXPLAIN + '?' + query, version=version)
    if real_status != 200:
        def errors(body):
            return [{k: v for k, v in e.items() if k != 'request_id'} for e in body['errors']]
        assert (status, errors(answer)) == (real_status, errors(real)), (query, version)
        return None
    assert status == 200, answer
    assert set(answer['providers_in_answer']) == providers_in(real), (query, answer)
    assert answer['allocation_requests'] == len(real['allocation_requests']), query
    return answer


@pytest.fixture(scope='module', params=sorted(set(BACKENDS) | {'sqlite'}))
def fleet(module_procs, request):
    return Fleet(module_procs, request.param)


def test_a_request_that_fits_nowhere(fleet):
    query = 'resources=VCPU:6&required=!%s' % DISABLED
    answer = same_as_candidates(fleet, query)
    assert answer['allocation_requests'] == 0
    group = answer['groups'][0]
    assert group['searched'] and group['survivors'] == []
    assert fleet.excluded(answer) == {
        'c1': ('forbidden_trait', {'traits': [DISABLED]}),
        'c2': ('capacity', {'resource_class': 'VCPU', 'amount': 6, 'free': 2}),
        'c3': ('capacity', {'resource_class': 'VCPU', 'amount': 6, 'free': 4}),
        'c4': ('capacity', {'resource_class': 'VCPU', 'amount': 6, 'free': 5}),
    }
    assert group['tallies'] == [
        {'rule': 'capacity', 'resource_class': 'VCPU', 'amount': 6, 'providers': 3, 'largest_free': 5},
        {'rule': 'forbidden_trait', 'traits': [DISABLED], 'providers': 1},
    ]

    text = fleet.cli(query)
    assert text.returncode == 0, text.stdout + text.stderr
    assert text.stdout.splitlines() == [
        'the unsuffixed group: 4 providers, 0 fit',
        '  3 lack VCPU:6 (largest free 5)',
        '  1 have COMPUTE_STATUS_DISABLED',
        'allocation requests: 0',
    ]
    as_json = fleet.cli(query, '--json')
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == answer


def test_requests_that_fit_some(fleet):
    answer = same_as_candidates(fleet, 'resources=VCPU:4&required=!%s' % DISABLED)
    assert sorted(fleet.name[u] for u in answer['groups'][0]['survivors']) == ['c3', 'c4']
    assert sorted(fleet.name[t['root']] for t in answer['trees'] if t['in_answer']) == ['c3', 'c4']
    assert fleet.excluded(answer) == {
        'c1': ('forbidden_trait', {'traits': [DISABLED]}),
        'c2': ('capacity', {'resource_class': 'VCPU', 'amount': 4, 'free': 2}),
    }
    text = fleet.cli('resources=VCPU:4&required=!%s' % DISABLED)
    assert text.returncode == 0, text.stderr
    assert 'the unsuffixed group: 4 providers, 2 fit' in text.stdout
    assert 'trees: 2 considered, 2 in the answer' in text.stdout
    assert text.stdout.endswith('allocation requests: 2\n')

    # limit drops the second tree after generation.
    answer = same_as_candidates(fleet, 'resources=VCPU:4&required=!%s&limit=1' % DISABLED)
    assert [t.get('dropped', {}).get('rule') for t in answer['trees']] == [None, 'limit']

    # Two granular groups on the one pf of cn5: isolate drops the tree.
    vf = 'resources1=SRIOV_NET_VF:1&resources2=SRIOV_NET_VF:1&group_policy='
    answer = same_as_candidates(fleet, vf + 'isolate')
    assert answer['trees'] == [{'root': fleet.rp['cn5'], 'in_answer': False,
                                'dropped': {'rule': 'group_policy_isolate', 'group': '2'}}]
    assert 'group_policy=isolate: group \'2\' would share a provider' in fleet.cli(vf + 'isolate').stdout
    answer = same_as_candidates(fleet, vf + 'none')
    assert answer['trees'] == [{'root': fleet.rp['cn5'], 'in_answer': True}]

    # A later group after an empty one is not searched, as in the real search.
    answer = same_as_candidates(fleet, 'resources1=VCPU:9&resources2=VCPU:1&group_policy=none')
    assert [g['searched'] for g in answer['groups']] == [True, False]
    assert {r for r, _ in fleet.excluded(answer).values()} == {'capacity'}


@pytest.mark.parametrize('query', [
    'resources=VCPU:1',
    'resources=VCPU:1,MEMORY_MB:512',
    'resources=VCPU:3&limit=2',
    'resources=VCPU:1&required=%s' % DISABLED,
    'resources=VCPU:2&root_required=!%s' % DISABLED,
    'resources=VCPU:1&resources1=SRIOV_NET_VF:2&group_policy=isolate',
    'resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate',
    'resources=VCPU:1,SRIOV_NET_VF:1',
])
def test_explain_agrees_with_the_answer(fleet, query):
    for version in ('1.39', '1.28', '1.10'):
        answer = same_as_candidates(fleet, query, version)
        for group in (answer or {'groups': []})['groups']:
            if group['searched']:
                assert len(group['survivors']) + len(group['excluded']) == group['providers'], (query, group)


def test_errors_and_policy(fleet):
    # Parsed as /allocation_candidates parses it: the same 400s.
    for query in ('resources=VCPU:x', 'resources=CUSTOM_NOPE:1'):
        assert fleet.call('GET', '/allocation_candidates?' + query)[0] == 400
        assert same_as_candidates(fleet, query) is None
    # Admin only.
    status, _, answer = fleet.call('GET', EXPLAIN + '?resources=VCPU:1', token='someone:%s' % new_uuid())
    assert status == 403, answer
    assert fleet.call('GET', '/allocation_candidates?resources=VCPU:1', version='1.0')[0] == 404
    assert fleet.call('GET', EXPLAIN + '?resources=VCPU:1', version='1.0')[0] == 404
    failed = fleet.cli('resources=VCPU:x')
    assert failed.returncode == 1 and '400' in failed.stderr, failed.stderr
    quoted = urllib.parse.quote('resources=VCPU:1', safe='=:')
    assert fleet.cli(quoted).returncode == 0
