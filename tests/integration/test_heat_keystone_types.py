"""Heat's OS::Keystone::* resource types on keelson, against a real
Keystone (tests/integration/keystone.py), set up as test_heat_identity.py
sets it up (the trustee, the stack-user domain, the orchestration
endpoint): an admin's stack makes a project, a role, a user whose default
project is that project, and the user's role on the project; Keystone has
them as the template says. A stack update renames the role, changes the
project's description in place and moves the grant to a second role.
Deleting the stack removes them all from Keystone. Names are fresh per
run.

The resources of each template depend on one another in a line: the test
Keystone runs on SQLite, which answers concurrent writes (a parallel
delete of a user and a role) with "database is locked" (500)."""
import uuid

import pytest

import test_heat_identity as identity
from conftest import BACKENDS
from keystone import ADMIN_PASSWORD


@pytest.fixture(scope='module', params=BACKENDS)
def cloud(request, module_procs):
    return identity.Cloud(module_procs, request.param)


def admin_get(ks, path):
    status, _, doc = ks.request('GET', path, token=ks.admin_token)
    return status, doc


def assert_unavailable_and_not_stored(cloud, token, project, name, template, message):
    """Creating stack `name` from `template` is Heat's 400
    ResourceTypeUnavailable with `message`, and no stack is stored."""
    status, doc = cloud.call('POST', '/stacks', token, {'stack_name': name, 'template': template}, project=project)
    assert status == 400, (status, doc)
    assert doc['error']['type'] == 'ResourceTypeUnavailable', doc
    assert doc['error']['message'] == message, doc
    status, doc = cloud.call('GET', '/stacks/%s' % name, token, project=project)
    assert status == 404, (status, doc)


def test_project_user_role_and_assignment_live_and_die_with_the_stack(cloud):
    ks = cloud.keystone
    project = ks.projects['admin']
    token = ks.fresh('admin', ADMIN_PASSWORD, project='admin')
    suffix = uuid.uuid4().hex[:8]
    names = {kind: 'kt-%s-%s' % (kind, suffix) for kind in ('project', 'role', 'user')}
    template = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'project': {'type': 'OS::Keystone::Project',
                        'properties': {'name': names['project'], 'description': 'made by a stack', 'tags': ['kt']}},
            'role': {'type': 'OS::Keystone::Role', 'properties': {'name': names['role']}, 'depends_on': 'project'},
            'role2': {'type': 'OS::Keystone::Role', 'properties': {'name': names['role'] + '-2'}, 'depends_on': 'role'},
            'user': {'type': 'OS::Keystone::User', 'depends_on': 'role2',
                     'properties': {'name': names['user'], 'password': 'pw-%s' % suffix,
                                    'default_project': {'get_resource': 'project'}}},
            'grant': {'type': 'OS::Keystone::UserRoleAssignment',
                      'properties': {'user': {'get_resource': 'user'},
                                     'roles': [{'role': {'get_resource': 'role'},
                                                'project': {'get_resource': 'project'}}]}},
        },
        'outputs': {
            'project_domain': {'value': {'get_attr': ['project', 'domain_id']}},
            'user_project': {'value': {'get_attr': ['user', 'default_project_id']}},
        },
    }
    name = 'keystone-types-%s' % suffix
    status, doc = cloud.call('POST', '/stacks', token, {'stack_name': name, 'template': template}, project=project)
    assert status == 201, (status, doc, cloud.aio.proc.output()[-3000:])
    sid = doc['stack']['id']
    st = cloud.wait(token, project, name, sid, ['CREATE_COMPLETE', 'CREATE_FAILED'])
    assert st['stack_status'] == 'CREATE_COMPLETE', (st['stack_status_reason'], cloud.aio.proc.output()[-3000:])

    status, doc = admin_get(ks, '/v3/projects?name=%s' % names['project'])
    assert status == 200, doc
    (made_project,) = doc['projects']
    assert made_project['domain_id'] == 'default' and made_project['description'] == 'made by a stack'
    assert made_project['tags'] == ['kt'] and made_project['enabled'] is True
    status, doc = admin_get(ks, '/v3/roles?name=%s' % names['role'])
    (made_role,) = doc['roles']
    status, doc = admin_get(ks, '/v3/users?name=%s' % names['user'])
    (made_user,) = doc['users']
    assert made_user['default_project_id'] == made_project['id']
    status, doc = admin_get(ks, '/v3/role_assignments?user.id=%s&scope.project.id=%s'
                            % (made_user['id'], made_project['id']))
    assert [a['role']['id'] for a in doc['role_assignments']] == [made_role['id']], doc
    # The physical ids are Keystone's; the attributes are Keystone's view.
    project_res = cloud.resource(token, project, name, sid, 'project')
    assert project_res['physical_resource_id'] == made_project['id']
    outputs = {o['output_key']: o['output_value'] for o in st['outputs']}
    assert outputs == {'project_domain': 'default', 'user_project': made_project['id']}, st['outputs']

    # In place: the same project and role, the grant moved to role2.
    template['resources']['project']['properties']['description'] = 'changed by an update'
    template['resources']['role']['properties']['name'] = names['role'] + '-renamed'
    template['resources']['grant']['properties']['roles'][0]['role'] = {'get_resource': 'role2'}
    status, doc = cloud.call('PUT', '/stacks/%s/%s' % (name, sid), token, {'template': template}, project=project)
    assert status == 202, doc
    st = cloud.wait(token, project, name, sid, ['UPDATE_COMPLETE', 'UPDATE_FAILED'])
    assert st['stack_status'] == 'UPDATE_COMPLETE', (st['stack_status_reason'], cloud.aio.proc.output()[-3000:])
    status, doc = admin_get(ks, '/v3/projects/%s' % made_project['id'])
    assert doc['project']['description'] == 'changed by an update' and doc['project']['tags'] == ['kt']
    status, doc = admin_get(ks, '/v3/roles/%s' % made_role['id'])
    assert doc['role']['name'] == names['role'] + '-renamed'
    status, doc = admin_get(ks, '/v3/roles?name=%s-2' % names['role'])
    (role2,) = doc['roles']
    status, doc = admin_get(ks, '/v3/role_assignments?user.id=%s&scope.project.id=%s'
                            % (made_user['id'], made_project['id']))
    assert [a['role']['id'] for a in doc['role_assignments']] == [role2['id']], doc

    status, doc = cloud.call('DELETE', '/stacks/%s/%s' % (name, sid), token, project=project)
    assert status == 204, doc
    cloud.wait(token, project, name, sid, ['GONE'])
    for kind, entity in (('projects', made_project), ('roles', made_role), ('roles', role2), ('users', made_user)):
        status, doc = admin_get(ks, '/v3/%s/%s' % (kind, entity['id']))
        assert status == 404, (kind, status, doc)


def test_group_membership_domain_service_and_endpoint(cloud):
    """A group holding a domain grant, a user in it, a (disabled: Keystone
    deletes no enabled domain) domain, a catalog service and its endpoint;
    all gone with the stack."""
    ks = cloud.keystone
    project = ks.projects['admin']
    token = ks.fresh('admin', ADMIN_PASSWORD, project='admin')
    suffix = uuid.uuid4().hex[:8]
    template = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'group': {'type': 'OS::Keystone::Group',
                      'properties': {'name': 'kt-group-%s' % suffix,
                                     'roles': [{'role': 'reader', 'domain': 'default'}]}},
            'user': {'type': 'OS::Keystone::User',
                     'properties': {'name': 'kt-member-%s' % suffix, 'groups': [{'get_resource': 'group'}]}},
            'domain': {'type': 'OS::Keystone::Domain', 'depends_on': 'user',
                       'properties': {'name': 'kt-domain-%s' % suffix, 'enabled': False}},
            'service': {'type': 'OS::Keystone::Service', 'depends_on': 'domain',
                        'properties': {'name': 'kt-service-%s' % suffix, 'type': 'kt-%s' % suffix}},
            'endpoint': {'type': 'OS::Keystone::Endpoint',
                         'properties': {'service': {'get_resource': 'service'}, 'interface': 'internal',
                                        'region': 'RegionOne', 'url': 'http://127.0.0.1:9/%s' % suffix}},
        },
    }
    name = 'keystone-more-%s' % suffix
    status, doc = cloud.call('POST', '/stacks', token, {'stack_name': name, 'template': template}, project=project)
    assert status == 201, (status, doc)
    sid = doc['stack']['id']
    st = cloud.wait(token, project, name, sid, ['CREATE_COMPLETE', 'CREATE_FAILED'])
    assert st['stack_status'] == 'CREATE_COMPLETE', (st['stack_status_reason'], cloud.aio.proc.output()[-3000:])
    ids = {r: cloud.resource(token, project, name, sid, r)['physical_resource_id']
           for r in ('group', 'user', 'domain', 'service', 'endpoint')}
    status, doc = admin_get(ks, '/v3/users/%s/groups' % ids['user'])
    assert [g['id'] for g in doc['groups']] == [ids['group']], doc
    status, doc = admin_get(ks, '/v3/role_assignments?group.id=%s' % ids['group'])
    assert [(a['role']['id'], a['scope']) for a in doc['role_assignments']] == \
        [(ks.roles['reader'], {'domain': {'id': 'default'}})], doc
    status, doc = admin_get(ks, '/v3/domains/%s' % ids['domain'])
    assert doc['domain']['enabled'] is False
    status, doc = admin_get(ks, '/v3/endpoints/%s' % ids['endpoint'])
    endpoint = doc['endpoint']
    assert (endpoint['service_id'], endpoint['interface'], endpoint['region_id']) == \
        (ids['service'], 'internal', 'RegionOne'), endpoint

    status, doc = cloud.call('DELETE', '/stacks/%s/%s' % (name, sid), token, project=project)
    assert status == 204, doc
    cloud.wait(token, project, name, sid, ['GONE'])
    for kind in ('group', 'user', 'domain', 'service', 'endpoint'):
        status, doc = admin_get(ks, '/v3/%ss/%s' % (kind, ids[kind]))
        assert status == 404, (kind, status, doc)


def test_an_unknown_domain_refuses_the_stack_with_heats_error(cloud):
    """The `keystone.domain` custom constraint is checked when the stack is
    created, as Heat checks it: 400 with Heat's text, and nothing stored."""
    ks = cloud.keystone
    project = ks.projects['admin']
    token = ks.fresh('admin', ADMIN_PASSWORD, project='admin')
    suffix = uuid.uuid4().hex[:8]
    template = {'heat_template_version': '2018-08-31', 'resources': {
        'project': {'type': 'OS::Keystone::Project', 'properties': {'domain': 'no-such-domain-%s' % suffix}}}}
    name = 'keystone-bad-%s' % suffix
    status, doc = cloud.call('POST', '/stacks', token, {'stack_name': name, 'template': template}, project=project)
    assert status == 400, (status, doc)
    assert doc['error']['type'] == 'StackValidationFailed', doc
    assert doc['error']['message'] == (
        "Property error: resources.project.properties.domain: Error validating value 'no-such-domain-%s': "
        "The KeystoneDomain (no-such-domain-%s) could not be found." % (suffix, suffix)), doc
    status, doc = cloud.call('GET', '/stacks/%s' % name, token, project=project)
    assert status == 404, (status, doc)


def test_a_type_whose_service_is_not_in_the_catalog_refuses_the_stack(cloud):
    """Heat's `is_service_available`: this Keystone's catalog has no network
    service, so a stack with a Neutron type is refused at create with Heat's
    400 ResourceTypeUnavailable, and nothing is stored."""
    ks = cloud.keystone
    project = ks.projects['admin']
    token = ks.fresh('admin', ADMIN_PASSWORD, project='admin')
    name = 'no-neutron-%s' % uuid.uuid4().hex[:8]
    template = {'heat_template_version': '2018-08-31', 'resources': {'net': {'type': 'OS::Neutron::Net'}}}
    assert_unavailable_and_not_stored(cloud, token, project, name, template, (
        'HEAT-E99001 Service neutron is not available for resource type OS::Neutron::Net, '
        'reason: neutron network endpoint is not in service catalog.'))


def test_a_heat_type_keelson_lacks_is_unavailable_without_its_service(cloud):
    """Heat's ServiceBasedExposureTest: on a cloud without Manila, a stack
    with OS::Manila::Share (a type keelson has no plugin for) is refused as
    Heat refuses it, 400 ResourceTypeUnavailable naming the type, and
    nothing is stored; its schema is refused the same way and it is not
    listed."""
    ks = cloud.keystone
    project = ks.projects['admin']
    token = ks.fresh('admin', ADMIN_PASSWORD, project='admin')
    name = 'no-manila-%s' % uuid.uuid4().hex[:8]
    template = {'heat_template_version': '2015-10-15', 'resources': {'not_available': {
        'type': 'OS::Manila::Share', 'properties': {'name': 'not_available', 'share_protocol': 'NFS', 'size': 1}}}}
    assert_unavailable_and_not_stored(cloud, token, project, name, template, (
        'HEAT-E99001 Service manila is not available for resource type OS::Manila::Share, '
        'reason: manila sharev2 endpoint is not in service catalog.'))
    status, doc = cloud.call('GET', '/resource_types/OS::Manila::Share', token, project=project)
    assert status == 400 and doc['error']['type'] == 'ResourceTypeUnavailable', (status, doc)
    status, doc = cloud.call('GET', '/resource_types', token, project=project)
    assert status == 200 and not [t for t in doc['resource_types'] if 'Manila' in t], (status, doc)


def test_the_types_whose_service_is_not_in_the_catalog_are_not_listed(cloud):
    """Heat's `GET /resource_types` leaves out a type whose service the
    caller's catalog lacks (this Keystone has no compute, network, image or
    volume service), and `GET /resource_types/{type}` refuses it with
    ResourceTypeUnavailable and the fixed reason Heat's resource_schema
    gives; the type's template is still generated, as upstream's
    generate_template does not ask."""
    ks = cloud.keystone
    project = ks.projects['admin']
    token = ks.fresh('admin', ADMIN_PASSWORD, project='admin')
    status, doc = cloud.call('GET', '/resource_types', token, project=project)
    assert status == 200, (status, doc)
    listed = doc['resource_types']
    assert 'OS::Keystone::Project' in listed and 'OS::Heat::RandomString' in listed, listed
    assert not [t for t in listed if t.split('::')[1] in ('Nova', 'Neutron', 'Cinder', 'Glance')], listed
    status, doc = cloud.call('GET', '/resource_types/OS::Nova::Server', token, project=project)
    assert status == 400, (status, doc)
    assert doc['error']['type'] == 'ResourceTypeUnavailable', doc
    assert doc['error']['message'] == (
        'HEAT-E99001 Service nova is not available for resource type OS::Nova::Server, '
        'reason: Service endpoint not in service catalog.'), doc
    status, doc = cloud.call('GET', '/resource_types/OS::Keystone::Project', token, project=project)
    assert status == 200 and doc['resource_type'] == 'OS::Keystone::Project', (status, doc)
    status, doc = cloud.call('GET', '/resource_types/OS::Nova::Server/template', token, project=project)
    assert status == 200 and 'Resources' in doc, (status, doc)


def test_the_types_are_the_admins(cloud):
    """Heat's policy: `resource_types:OS::Keystone::*` is admin only."""
    ks = cloud.keystone
    project = ks.projects['demo']
    token = ks.fresh('member', project='demo')
    template = {'heat_template_version': '2018-08-31', 'resources': {
        'project': {'type': 'OS::Keystone::Project'}}}
    status, doc = cloud.call('POST', '/stacks', token,
                             {'stack_name': 'keystone-member-%s' % uuid.uuid4().hex[:8], 'template': template},
                             project=project)
    assert status == 403 and doc['error']['type'] == 'Forbidden', (status, doc)
    assert doc['error']['message'] == 'You are not authorized to use OS::Keystone::Project.', doc
    status, doc = cloud.call('GET', '/resource_types', token, project=project)
    assert status == 200 and not [t for t in doc['resource_types'] if t.startswith('OS::Keystone::')], doc
