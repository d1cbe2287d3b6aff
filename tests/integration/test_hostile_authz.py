"""Hostile callers under Keystone: who may do what to whom (issue 15,
defect 2). A real Keystone (tests/integration/keystone.py) and keelson
all-in-one validating its tokens; the callers are

* admin_a: the admin role on project A (`demo`),
* member: a member of A, reader: a reader of A,
* member_b: a member of project B (`other`),
* stack_user: Heat's `heat_stack_user` role on A.

Placement answers with openstack-placement 16.0.0's default policies and
the Orchestration API with openstack-heat 27.0.1's (plus keelson's
`resource_types:OS::Placement::*`, admin only). OS::Placement::Allocation
never takes over a consumer it did not create, even for an admin.

Every refusal is checked for its exact status and body, for leaving the
data as it was, and for leaving the process able to serve."""
import json
import os
import tempfile
import time
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import AllInOne, create_database, http
from keystone import PASSWORD, start_keystone

A, B = 'demo', 'other'
NONE_TEMPLATE = {'heat_template_version': '2018-08-31', 'resources': {'r': {'type': 'OS::Heat::None'}}}
# Heat's fault body for webob's HTTPForbidden (a path naming another project).
PATH_FORBIDDEN = {'code': 403, 'title': 'Forbidden', 'explanation': 'Access was denied to this resource.',
                  'error': {'type': 'HTTPForbidden', 'traceback': None, 'message': 'Access was denied to this resource.'}}


def heat_forbidden(action):
    """Heat's fault body for `heat.common.exception.Forbidden(action)`."""
    return {'code': 403, 'title': 'Forbidden', 'explanation': 'Access was denied to this resource.',
            'error': {'type': 'Forbidden', 'traceback': None, 'message': 'You are not authorized to use %s.' % action}}


def placement_forbidden(rule):
    """Placement's 403 body (without its request id)."""
    return {'status': 403, 'title': 'Forbidden', 'code': 'placement.undefined_code',
            'detail': 'Access was denied to this resource.\n\n Policy does not allow %s to be performed.  ' % rule}


@pytest.fixture(scope='module')
def keystone(module_procs):
    ks = start_keystone(module_procs)
    ks.roles['heat_stack_user'] = ks.call('POST', '/v3/roles', {'role': {'name': 'heat_stack_user'}})['role']['id']
    ks.add_user('admin_a', project=A, roles=['admin'])
    ks.add_user('member_b', project=B, roles=['member'])
    ks.add_user('stack_user', project=A, roles=['heat_stack_user'])
    return ks


def all_in_one(procs, keystone, policy=None):
    """keelson all-in-one on Keystone (both APIs), optionally with a policy file."""
    extra = {'api': {'auth_strategy': 'keystone'}, 'orchestration': {'auth_strategy': 'keystone'}, 'keystone_authtoken': {
        'auth_url': keystone.url, 'www_authenticate_uri': keystone.url + '/v3', 'auth_type': 'password',
        'username': 'placement', 'password': PASSWORD, 'project_name': 'service',
        'user_domain_name': 'Default', 'project_domain_name': 'Default'}}
    if policy is not None:
        path = os.path.join(tempfile.mkdtemp(prefix='kt-policy-'), 'policy.yaml')
        with open(path, 'w') as f:
            json.dump(policy, f)
        extra['oslo_policy'] = {'policy_file': path}
    aio = AllInOne(procs, create_database('sqlite', 'authz'), extra=extra)
    aio.heat_url = aio.orchestration_url()
    return aio


@pytest.fixture(scope='module')
def aio(module_procs, keystone):
    return all_in_one(module_procs, keystone)


class Caller:
    """One Keystone user's calls to both APIs of an all-in-one."""

    def __init__(self, aio, keystone, user, project):
        self.aio, self.keystone = aio, keystone
        self.project = keystone.projects[project]
        self.token = keystone.token(user, project=project)

    def placement(self, method, path, body=None):
        return http(method, self.aio.url + path, body=body, token=self.token)

    def heat(self, method, path, body=None, project=None):
        url = '%s/v1/%s%s' % (self.aio.heat_url, project or self.project, path)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method, headers={
            'X-Auth-Token': self.token, 'Content-Type': 'application/json', 'Accept': 'application/json'})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                raw = r.read().decode()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read().decode()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw

    def create(self, name, template, status=201, **extra):
        code, body = self.heat('POST', '/stacks', dict({'stack_name': name, 'template': template}, **extra))
        assert code == status, body
        return body

    def wait(self, stack, statuses, timeout=120):
        """Polls `stack` (a name, or name/id for one that may be deleted)."""
        deadline = time.monotonic() + timeout
        while True:
            code, body = self.heat('GET', '/stacks/%s' % stack)
            assert code in (200, 302), body
            doc = body['stack']
            if doc['stack_status'] in statuses:
                return doc
            assert doc['stack_status'].endswith('IN_PROGRESS'), doc
            assert time.monotonic() < deadline, doc
            time.sleep(0.2)

    def stack_names(self):
        code, body = self.heat('GET', '/stacks')
        assert code == 200, body
        return sorted(s['stack_name'] for s in body['stacks'])


@pytest.fixture(scope='module')
def users(aio, keystone):
    return {name: Caller(aio, keystone, name, project) for name, project in [
        ('admin_a', A), ('member', A), ('reader', A), ('member_b', B), ('stack_user', A)]}


def assert_healthy(aio, users):
    """Both APIs still answer and still do a small real operation."""
    assert http('GET', aio.url + '/', token=None)[0] == 200
    assert users['admin_a'].placement('GET', '/resource_providers')[0] == 200
    name = 'health-%s' % uuid.uuid4().hex[:8]
    users['member'].create(name, NONE_TEMPLATE)
    users['member'].wait(name, ['CREATE_COMPLETE'])
    code, stack = users['member'].heat('GET', '/stacks/%s' % name)
    assert code == 200, stack
    path = '%s/%s' % (name, stack['stack']['id'])
    assert users['member'].heat('DELETE', '/stacks/' + path)[0] == 204
    # Deleting is asynchronous: wait until the stack is gone from the
    # listings, so that the next test's "nothing changed" sees no stray one.
    users['member'].wait(path, ['DELETE_COMPLETE'])


def without_request_id(body):
    return [{k: v for k, v in e.items() if k != 'request_id'} for e in body['errors']]


def provider(users, name=None):
    """A provider with 16 VCPU, made through Placement by admin_a."""
    uuid_ = str(uuid.uuid4())
    admin = users['admin_a']
    code, _, body = admin.placement('POST', '/resource_providers', {'name': name or 'rp-' + uuid_[:8], 'uuid': uuid_})
    assert code == 200, body
    code, _, body = admin.placement('PUT', '/resource_providers/%s/inventories' % uuid_, {
        'resource_provider_generation': body['generation'], 'inventories': {'VCPU': {'total': 16}}})
    assert code == 200, body
    return uuid_


def consumer_of(users, consumer):
    code, _, body = users['admin_a'].placement('GET', '/allocations/%s' % consumer)
    assert code == 200, body
    return body


# ---- Placement: openstack-placement 16.0.0's defaults ----------------------

def test_placement_matrix(aio, users, keystone):
    rp = provider(users)
    consumer = str(uuid.uuid4())
    admin = users['admin_a']
    code, _, body = admin.placement('PUT', '/allocations/%s' % consumer, {
        'allocations': {rp: {'resources': {'VCPU': 4}}}, 'project_id': keystone.projects[A],
        'user_id': keystone.users['member'], 'consumer_type': 'INSTANCE', 'consumer_generation': None})
    assert code == 204, body
    before_rps = admin.placement('GET', '/resource_providers')[2]
    before_consumer = consumer_of(users, consumer)
    cases = [
        ('GET', '/resource_providers', None, 'placement:resource_providers:list'),
        ('POST', '/resource_providers', {'name': 'hostile'}, 'placement:resource_providers:create'),
        ('DELETE', '/resource_providers/%s' % rp, None, 'placement:resource_providers:delete'),
        ('PUT', '/resource_providers/%s/inventories' % rp,
         {'resource_provider_generation': 1, 'inventories': {'VCPU': {'total': 1}}}, 'placement:resource_providers:inventories:update'),
        ('GET', '/allocations/%s' % consumer, None, 'placement:allocations:list'),
        ('PUT', '/allocations/%s' % consumer, {'allocations': {rp: {'resources': {'VCPU': 1}}},
                                              'project_id': keystone.projects[B], 'user_id': keystone.users['member_b'],
                                              'consumer_generation': 1}, 'placement:allocations:update'),
        ('DELETE', '/allocations/%s' % consumer, None, 'placement:allocations:delete'),
        ('POST', '/allocations', {consumer: {'allocations': {}, 'project_id': keystone.projects[B],
                                             'user_id': keystone.users['member_b'], 'consumer_generation': 1}},
         'placement:allocations:manage'),
        ('GET', '/usages?project_id=%s' % keystone.projects[B], None, 'placement:usages'),
        ('POST', '/reshaper', {}, 'placement:reshaper:reshape'),
    ]
    for who in ('member', 'reader', 'member_b', 'stack_user'):
        for method, path, body, rule in cases:
            if who == 'member_b' and path.startswith('/usages'):
                continue  # B's own usages: a reader of B (member implies reader) may
            code, _, answer = users[who].placement(method, path, body)
            assert code == 403, (who, method, path, answer)
            assert without_request_id(answer) == [placement_forbidden(rule)], (who, method, path)
    # A project reader sees its own project's usages, not another's.
    code, _, answer = users['reader'].placement('GET', '/usages?project_id=%s' % keystone.projects[A])
    assert code == 200 and answer['usages'] == {'INSTANCE': {'VCPU': 4, 'consumer_count': 1}}, answer
    code, _, answer = users['reader'].placement('GET', '/usages?project_id=%s' % keystone.projects[B])
    assert code == 403 and without_request_id(answer) == [placement_forbidden('placement:usages')]
    # The admin may.
    assert admin.placement('GET', '/allocations/%s' % consumer)[0] == 200
    # Nothing changed.
    assert admin.placement('GET', '/resource_providers')[2] == before_rps
    assert consumer_of(users, consumer) == before_consumer
    assert_healthy(aio, users)


# ---- Orchestration: openstack-heat 27.0.1's defaults ------------------------

def test_other_projects_stacks(aio, users):
    member, other = users['member'], users['member_b']
    member.create('mine', NONE_TEMPLATE)
    stack = member.wait('mine', ['CREATE_COMPLETE'])
    ident = '/stacks/mine/%s' % stack['id']
    # A's project in the path: refused before anything is looked up.
    for method, path, body in [('GET', '/stacks', None), ('GET', ident, None), ('POST', '/stacks', {
            'stack_name': 'intruder', 'template': NONE_TEMPLATE}), ('PUT', ident, {'template': NONE_TEMPLATE}),
            ('PATCH', ident, {'parameters': {}}), ('DELETE', ident, None), ('GET', ident + '/resources', None),
            ('GET', ident + '/events', None), ('POST', ident + '/actions', {'suspend': None}),
            ('GET', '/software_configs', None)]:
        code, answer = other.heat(method, path, body, project=member.project)
        assert (code, answer) == (403, PATH_FORBIDDEN), (method, path, answer)
    # B's own project in the path, A's stack id: not found there.
    for method, path, body in [('GET', ident, None), ('PUT', ident, {'template': NONE_TEMPLATE}), ('DELETE', ident, None)]:
        code, answer = other.heat(method, path, body)
        assert code == 404, answer
        assert answer['error']['type'] == 'EntityNotFound', answer
        assert answer['error']['message'] == 'The Stack (mine) could not be found.'
    assert other.stack_names() == []
    # Untouched.
    assert member.wait('mine', ['CREATE_COMPLETE'])['updated_time'] == stack['updated_time']
    assert 'mine' in member.stack_names()
    assert_healthy(aio, users)


def test_roles_and_global_index(aio, users):
    admin, member, reader, stack_user = users['admin_a'], users['member'], users['reader'], users['stack_user']
    before = member.stack_names()
    # global_index is deny_everybody, even for an admin.
    for who in (admin, member):
        code, answer = who.heat('GET', '/stacks?global_tenant=True')
        assert (code, answer) == (403, heat_forbidden('stacks:global_index')), answer
    code, answer = member.heat('GET', '/software_configs?global_tenant=true')
    assert (code, answer) == (403, heat_forbidden('software_configs:global_index')), answer
    # A reader reads, does not write.
    assert reader.heat('GET', '/stacks')[0] == 200
    code, answer = reader.heat('POST', '/stacks', {'stack_name': 'by-reader', 'template': NONE_TEMPLATE})
    assert (code, answer) == (403, heat_forbidden('stacks:create')), answer
    code, answer = reader.heat('POST', '/software_configs', {'name': 'c', 'config': 'x'})
    assert (code, answer) == (403, heat_forbidden('software_configs:create')), answer
    # The stack user (heat_stack_user) is denied the API.
    for method, path, rule in [('GET', '/stacks', 'stacks:index'), ('GET', '/software_configs', 'software_configs:index'),
                               ('GET', '/resource_types', 'stacks:list_resource_types')]:
        code, answer = stack_user.heat(method, path)
        assert (code, answer) == (403, heat_forbidden(rule)), (path, answer)
    code, answer = stack_user.heat('POST', '/stacks', {'stack_name': 'by-stack-user', 'template': NONE_TEMPLATE})
    assert (code, answer) == (403, heat_forbidden('stacks:create')), answer
    # service:index is the project admin's.
    code, answer = member.heat('GET', '/services')
    assert (code, answer) == (403, heat_forbidden('service:index')), answer
    assert admin.heat('GET', '/services')[0] == 200
    assert member.stack_names() == before
    assert_healthy(aio, users)


def test_software_configs_of_another_project(aio, users):
    member, other = users['member'], users['member_b']
    code, made = member.heat('POST', '/software_configs', {'name': 'secret', 'config': 'password=hunter2', 'group': 'script'})
    assert code == 200, made
    config = made['software_config']['id']
    code, answer = other.heat('GET', '/software_configs/%s' % config)
    assert code == 404, answer
    assert answer['error']['type'] == 'NotFound', answer
    code, answer = other.heat('DELETE', '/software_configs/%s' % config)
    assert code == 404, answer
    code, listed = other.heat('GET', '/software_configs')
    assert code == 200 and listed == {'software_configs': []}, listed
    code, still = member.heat('GET', '/software_configs/%s' % config)
    assert code == 200 and still['software_config']['config'] == 'password=hunter2', still
    assert_healthy(aio, users)


PLACEMENT_TYPES = ['OS::Placement::Allocation', 'OS::Placement::ResourceProvider']


def allocation_template(rp, consumer=None, vcpu=1, project=None):
    props = {'allocations': [{'resource_provider': rp, 'resources': {'VCPU': vcpu}}]}
    if consumer:
        props['consumer'] = consumer
    if project:
        props.update(project_id=project, user_id='u-' + project[:6])
    return {'heat_template_version': '2018-08-31', 'resources': {'vm': {'type': 'OS::Placement::Allocation', 'properties': props}},
            'outputs': {'consumer': {'value': {'get_resource': 'vm'}}}}


def test_placement_types_are_admin_only(aio, users):
    admin, member = users['admin_a'], users['member']
    listed = member.heat('GET', '/resource_types')
    assert listed[0] == 200 and not set(PLACEMENT_TYPES) & set(listed[1]['resource_types']), listed
    code, listed = admin.heat('GET', '/resource_types')
    assert code == 200 and set(PLACEMENT_TYPES) <= set(listed['resource_types']), listed
    for t in PLACEMENT_TYPES:
        for suffix in ('', '/template'):
            code, answer = member.heat('GET', '/resource_types/%s%s' % (t, suffix))
            assert (code, answer) == (403, heat_forbidden('resource_types:' + t)), answer
    rp = provider(users)
    consumer = str(uuid.uuid4())
    direct = allocation_template(rp, consumer)
    provider_tpl = {'heat_template_version': '2018-08-31', 'resources': {'rp': {
        'type': 'OS::Placement::ResourceProvider', 'properties': {'name': 'by-member'}}}}
    # Hidden in a group's member definition, or behind an environment alias.
    grouped = {'heat_template_version': '2018-08-31', 'resources': {'g': {'type': 'OS::Heat::ResourceGroup', 'properties': {
        'count': 1, 'resource_def': {'type': 'OS::Placement::Allocation', 'properties': direct['resources']['vm']['properties']}}}}}
    aliased = {'heat_template_version': '2018-08-31', 'resources': {'vm': {
        'type': 'My::Harmless', 'properties': direct['resources']['vm']['properties']}}}
    alias_env = {'resource_registry': {'My::Harmless': 'OS::Placement::Allocation'}}
    before = member.stack_names()
    for name, template, extra, t in [('a1', direct, {}, 'OS::Placement::Allocation'),
                                     ('a2', provider_tpl, {}, 'OS::Placement::ResourceProvider'),
                                     ('a3', grouped, {}, 'OS::Placement::Allocation'),
                                     ('a4', aliased, {'environment': alias_env}, 'OS::Placement::Allocation')]:
        for method, path in [('POST', '/stacks'), ('POST', '/stacks/preview')]:
            code, answer = member.heat(method, path, dict({'stack_name': name, 'template': template}, **extra))
            assert (code, answer) == (403, heat_forbidden('resource_types:' + t)), (name, path, answer)
    # Update of an existing stack to such a template.
    member.create('plain', NONE_TEMPLATE)
    plain = member.wait('plain', ['CREATE_COMPLETE'])
    code, answer = member.heat('PUT', '/stacks/plain/%s' % plain['id'], {'template': direct})
    assert (code, answer) == (403, heat_forbidden('resource_types:OS::Placement::Allocation')), answer
    assert member.wait('plain', ['CREATE_COMPLETE'])['stack_status'] == 'CREATE_COMPLETE'
    assert member.stack_names() == sorted(before + ['plain'])
    code, _, answer = admin.placement('GET', '/allocations/%s' % consumer)
    assert answer['allocations'] == {}, answer
    # The admin may: a new consumer, created and removed by the stack.
    admin.create('admin-alloc', direct)
    made = admin.wait('admin-alloc', ['CREATE_COMPLETE'])
    assert consumer_of(users, consumer)['allocations'][rp]['resources'] == {'VCPU': 1}
    code, answer = member.heat('DELETE', '/stacks/admin-alloc/%s' % made['id'])
    assert (code, answer) == (403, heat_forbidden('resource_types:OS::Placement::Allocation')), answer
    assert consumer_of(users, consumer)['allocations'][rp]['resources'] == {'VCPU': 1}
    assert admin.heat('DELETE', '/stacks/admin-alloc/%s' % made['id'])[0] == 204
    admin.wait('admin-alloc/%s' % made['id'], ['DELETE_COMPLETE'])
    assert consumer_of(users, consumer)['allocations'] == {}
    assert_healthy(aio, users)


def test_allocation_never_takes_over_a_consumer(aio, users, keystone):
    """The issue's reproducer: a consumer of project A holding 4 VCPU; an
    admin's stack naming it for project B with 1 VCPU must neither rewrite
    it nor, when deleted, wipe it."""
    admin = users['admin_a']
    rp = provider(users)
    victim = str(uuid.uuid4())
    code, _, body = admin.placement('PUT', '/allocations/%s' % victim, {
        'allocations': {rp: {'resources': {'VCPU': 4}}}, 'project_id': keystone.projects[A],
        'user_id': keystone.users['member'], 'consumer_type': 'INSTANCE', 'consumer_generation': None})
    assert code == 204, body
    before = consumer_of(users, victim)
    admin.create('takeover', allocation_template(rp, victim, vcpu=1, project=keystone.projects[B]))
    failed = admin.wait('takeover', ['CREATE_FAILED'])
    assert failed['stack_status_reason'] == (
        'Resource CREATE failed: placement.concurrent_update: resources.vm: '
        'consumer generation conflict - expected 1 but got None'), failed
    assert consumer_of(users, victim) == before
    assert admin.heat('DELETE', '/stacks/takeover/%s' % failed['id'])[0] == 204
    admin.wait('takeover/%s' % failed['id'], ['DELETE_COMPLETE'])
    assert consumer_of(users, victim) == before

    # A consumer the stack made, then changed by someone else: the stack's
    # update does not overwrite it, its delete does not wipe it.
    admin.create('owned', allocation_template(rp, vcpu=1))
    owned = admin.wait('owned', ['CREATE_COMPLETE'])
    consumer = owned['outputs'][0]['output_value']
    mine = consumer_of(users, consumer)
    assert mine['allocations'][rp]['resources'] == {'VCPU': 1}
    code, _, body = admin.placement('PUT', '/allocations/%s' % consumer, {
        'allocations': {rp: {'resources': {'VCPU': 2}}}, 'project_id': keystone.projects[A],
        'user_id': keystone.users['member'], 'consumer_type': 'INSTANCE', 'consumer_generation': mine['consumer_generation']})
    assert code == 204, body
    changed = consumer_of(users, consumer)
    code, answer = admin.heat('PUT', '/stacks/owned/%s' % owned['id'], {'template': allocation_template(rp, vcpu=3)})
    assert code == 202, answer
    updated = admin.wait('owned', ['UPDATE_FAILED'])
    assert updated['stack_status_reason'] == (
        'Resource UPDATE failed: placement.concurrent_update: resources.vm: '
        'consumer generation conflict - expected 2 but got 1'), updated
    assert consumer_of(users, consumer) == changed
    assert admin.heat('DELETE', '/stacks/owned/%s' % owned['id'])[0] == 204
    deleted = admin.wait('owned/%s' % owned['id'], ['DELETE_FAILED'])
    assert 'placement.concurrent_update' in deleted['stack_status_reason'], deleted
    assert consumer_of(users, consumer) == changed
    assert_healthy(aio, users)


def test_provider_is_never_adopted(aio, users):
    admin = users['admin_a']
    existing = provider(users, name='taken-%s' % uuid.uuid4().hex[:6])
    code, _, before = admin.placement('GET', '/resource_providers/%s' % existing)
    assert code == 200
    for name, props, reason in [
            ('same-uuid', {'uuid': existing, 'name': 'another'},
             'Conflicting resource provider uuid: %s already exists.' % existing),
            ('same-name', {'name': before['name']}, 'Conflicting resource provider name: %s already exists.' % before['name'])]:
        admin.create(name, {'heat_template_version': '2018-08-31', 'resources': {'rp': {
            'type': 'OS::Placement::ResourceProvider', 'properties': dict(props, inventories={'VCPU': {'total': 1}})}}})
        failed = admin.wait(name, ['CREATE_FAILED'])
        assert failed['stack_status_reason'] == 'Resource CREATE failed: placement.duplicate_name: resources.rp: ' + reason, failed
        assert admin.heat('DELETE', '/stacks/%s/%s' % (name, failed['id']))[0] == 204
        admin.wait('%s/%s' % (name, failed['id']), ['DELETE_COMPLETE'])
        assert admin.placement('GET', '/resource_providers/%s' % existing)[2] == before
        code, _, inv = admin.placement('GET', '/resource_providers/%s/inventories' % existing)
        assert inv['inventories']['VCPU']['total'] == 16, inv
    assert_healthy(aio, users)


def test_policy_file_overrides(module_procs, keystone):
    """[oslo_policy] policy_file opens global_index to admins, closes stack
    creation to everybody and opens the Placement types to members."""
    aio = all_in_one(module_procs, keystone, policy={
        'stacks:global_index': 'rule:project_admin',
        'stacks:create': 'rule:deny_everybody',
        'resource_types:OS::Placement::ResourceProvider': 'role:member',
    })
    admin = Caller(aio, keystone, 'admin_a', A)
    member = Caller(aio, keystone, 'member', A)
    code, answer = admin.heat('GET', '/stacks?global_tenant=true')
    assert code == 200 and answer == {'stacks': []}, answer
    for who in (admin, member):
        code, answer = who.heat('POST', '/stacks', {'stack_name': 'closed', 'template': NONE_TEMPLATE})
        assert (code, answer) == (403, heat_forbidden('stacks:create')), answer
    code, listed = member.heat('GET', '/resource_types')
    assert code == 200, listed
    assert 'OS::Placement::ResourceProvider' in listed['resource_types']
    assert 'OS::Placement::Allocation' not in listed['resource_types']
    assert member.stack_names() == [] and admin.stack_names() == []
    # Still serving: the rest of the API is Heat's defaults.
    assert member.heat('GET', '/stacks')[0] == 200
    assert http('GET', aio.url + '/', token=None)[0] == 200
