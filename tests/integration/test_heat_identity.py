"""Heat's identity model on keelson, against a real Keystone (PyPI's
`keystone`, tests/integration/keystone.py) set up as Heat's install guide
says: the `heat` service user (the `[trustee]`), the `heat` stack-user
domain with its admin `heat_domain_admin`, the `heat_stack_user` role, and
the orchestration and cloudformation endpoints in the catalog. keelson
all-in-one serves the Orchestration API and heat-api-cfn in Keystone mode.

- The trust: a stack is created with a user's token, which is then
  revoked; its wait condition is signalled by the handle's stack user
  (HEAT_SIGNAL credentials, Keystone password authentication), after which
  a nested stack is created through the stack's trust; the stack
  completes. The stack user may signal and read its own resource's
  metadata, nothing more (Heat's policy and `_authorize_stack_user`).
  Deleting the stack deletes the trust, the stack user and the stack-user
  project.
- Seed scenario 5 with the stock `cfn-signal` (heat-cfntools from PyPI):
  it PUTs to the AWS::CloudFormation::WaitConditionHandle's pre-signed
  URL at heat-api-cfn, whose EC2 signature Keystone checks; a changed URL
  gets 403 SignatureDoesNotMatch, an unknown or deleted credential 403
  InvalidClientTokenId.
- Seed scenario 6 with the stock agents: os-collect-config's heat
  collector polls the OS::Heat::DeployedServer's metadata with the
  server's stack-user credentials, heat-agents' 55-heat-config runs the
  script hook, and heat-config-notify signals the deployment's outputs
  with the deployment's stack user (HEAT_SIGNAL); the outputs are in the
  stack.

The agents come from PyPI into a virtualenv of their own
(tests/lib/heat_agents_venv.sh); this machine is "the instance". The
module skips only when keystone or the agents cannot be installed here."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from conftest import BACKENDS, ROOT, AllInOne, Proc, create_database, free_port
from keystone import PASSWORD, start_keystone

AGENTS_VENV = os.environ.get('KEELSON_AGENTS_VENV', os.path.join(
    os.environ.get('XDG_CACHE_HOME', os.path.expanduser('~/.cache')), 'keelson-heat-agents-venv'))
DOMAIN_ADMIN_PASSWORD = 'heat-domain-admin-secret'
CURL = shutil.which('curl')


def agents():
    """The agents' virtualenv, installed on first use."""
    setup = subprocess.run([os.path.join(ROOT, 'tests', 'lib', 'heat_agents_venv.sh')], capture_output=True,
                           text=True, env=dict(os.environ, KEELSON_AGENTS_VENV=AGENTS_VENV), timeout=900)
    if setup.returncode != 0:
        pytest.skip('the Heat agents cannot be installed here:\n' + setup.stderr[-2000:])
    return AGENTS_VENV


def setup_heat_identity(ks, orchestration_url, cfn_url):
    """What Heat's install guide creates in Keystone."""
    ks.add_user('heat', project='service', roles=['admin'])
    domain = ks.call('POST', '/v3/domains', {'domain': {'name': 'heat',
                                                        'description': 'Stack projects and users'}})['domain']['id']
    admin = ks.call('POST', '/v3/users', {'user': {'name': 'heat_domain_admin', 'password': DOMAIN_ADMIN_PASSWORD,
                                                   'domain_id': domain}})['user']['id']
    ks.call('PUT', '/v3/domains/%s/users/%s/roles/%s' % (domain, admin, ks.roles['admin']))
    ks.roles['heat_stack_user'] = ks.call('POST', '/v3/roles', {'role': {'name': 'heat_stack_user'}})['role']['id']
    for kind, url in (('orchestration', orchestration_url + '/v1/%(tenant_id)s'), ('cloudformation', cfn_url + '/v1')):
        service = ks.call('POST', '/v3/services', {'service': {'type': kind, 'name': kind}})['service']['id']
        ks.call('POST', '/v3/endpoints', {'endpoint': {'service_id': service, 'interface': 'public', 'url': url,
                                                       'region_id': 'RegionOne'}})
    return domain


class Cloud:
    """Keystone and keelson all-in-one in Keystone mode. A given `keystone`
    is set up for Heat by its first Cloud (the catalog then names that
    Cloud's endpoints); `extra` sections add to keelson's configuration."""

    def __init__(self, procs, backend, keystone=None, extra=None):
        self.keystone = keystone or start_keystone(procs)
        o_port, c_port = free_port(), free_port()
        self.orchestration = 'http://127.0.0.1:%d' % o_port
        self.cfn = 'http://127.0.0.1:%d' % c_port
        if not hasattr(self.keystone, 'heat_domain'):
            self.keystone.heat_domain = setup_heat_identity(self.keystone, self.orchestration, self.cfn)
        self.domain = self.keystone.heat_domain
        ks = self.keystone.url
        authtoken = {'auth_url': ks, 'www_authenticate_uri': ks + '/v3', 'auth_type': 'password',
                     'username': 'placement', 'password': PASSWORD, 'project_name': 'service',
                     'user_domain_name': 'Default', 'project_domain_name': 'Default',
                     # Every token checked with Keystone: a revoked one is refused at once.
                     'token_cache_time': '-1'}
        conf = {
            'api': {'auth_strategy': 'keystone'},
            'orchestration': {'auth_strategy': 'keystone'},
            'keystone_authtoken': authtoken,
            'keelson': {'orchestration_listen': '127.0.0.1:%d' % o_port, 'cfn_listen': '127.0.0.1:%d' % c_port},
            'clients_keystone': {'auth_uri': ks},
            'trustee': {'auth_type': 'password', 'auth_url': ks, 'username': 'heat', 'password': PASSWORD,
                        'user_domain_name': 'Default'},
            'DEFAULT': {'stack_user_domain_name': 'heat', 'stack_domain_admin': 'heat_domain_admin',
                        'stack_domain_admin_password': DOMAIN_ADMIN_PASSWORD,
                        'auth_encryption_key': 'a key only this test knows, 32+'},
        }
        for group, options in (extra or {}).items():
            conf.setdefault(group, {}).update(options)
        self.aio = AllInOne(procs, create_database(backend, 'ident_%s' % uuid.uuid4().hex[:8]), extra=conf,
                            env={'RUST_LOG': 'info,keelson::identity=debug,keelson::cfn=debug'})

    def call(self, method, path, token, body=None, project=None):
        """One Orchestration API call with a Keystone token."""
        url = path if path.startswith('http') else '%s/v1/%s%s' % (self.orchestration, project, path)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method, headers={
            'X-Auth-Token': token, 'Content-Type': 'application/json', 'Accept': 'application/json'})
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

    def wait(self, token, project, name, sid, statuses, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, doc = self.call('GET', '/stacks/%s/%s' % (name, sid), token, project=project)
            if status == 404 and 'GONE' in statuses:
                return None
            assert status == 200, (status, doc)
            st = doc['stack']
            if st['stack_status'] in statuses or ('GONE' in statuses and st['stack_status'] == 'DELETE_COMPLETE'):
                return st
            assert st['stack_status'].endswith('IN_PROGRESS'), (st['stack_status'], st['stack_status_reason'],
                                                                 self.aio.proc.output()[-3000:])
            time.sleep(0.3)
        raise AssertionError('%s not %s in %ss' % (name, statuses, timeout))

    def resource(self, token, project, name, sid, res, state='CREATE_COMPLETE', timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, doc = self.call('GET', '/stacks/%s/%s/resources/%s' % (name, sid, res), token, project=project)
            if status == 200 and doc['resource']['resource_status'] == state:
                return doc['resource']
            time.sleep(0.2)
        raise AssertionError('%s never %s: %s' % (res, state, self.aio.proc.output()[-3000:]))


@pytest.fixture(scope='module', params=BACKENDS)
def cloud(request, module_procs):
    return Cloud(module_procs, request.param)


def admin_get(ks, path):
    return ks.request('GET', path, token=ks.admin_token)


def user_token(ks, user_id, password, project_id):
    return ks.issue({'identity': {'methods': ['password'], 'password': {'user': {'id': user_id, 'password': password}}},
                     'scope': {'project': {'id': project_id}}})


def test_trust_outlives_the_users_token(cloud):
    ks = cloud.keystone
    project = ks.projects['demo']
    creator = ks.fresh('member', project='demo')
    # The same user's other token, to watch the stack.
    watcher = ks.fresh('member', project='demo')
    name = 'trust-%s' % uuid.uuid4().hex[:6]
    template = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'handle': {'type': 'OS::Heat::WaitConditionHandle', 'properties': {'signal_transport': 'HEAT_SIGNAL'}},
            'wait': {'type': 'OS::Heat::WaitCondition',
                     'properties': {'handle': {'get_resource': 'handle'}, 'timeout': 300}},
            # Created after the signal, as the user, through the trust.
            'later': {'type': 'OS::Heat::ResourceGroup', 'depends_on': 'wait',
                      'properties': {'count': 2, 'resource_def': {'type': 'OS::Heat::RandomString'}}},
        },
        'outputs': {'data': {'value': {'get_attr': ['wait', 'data']}}},
    }
    status, doc = cloud.call('POST', '/stacks', creator, {'stack_name': name, 'template': template}, project=project)
    assert status == 201, (status, doc, cloud.aio.proc.output()[-3000:])
    sid = doc['stack']['id']
    member_id = ks.users['member']
    # The trustor may list its own trusts.
    status, _, trusts = ks.request('GET', '/v3/OS-TRUST/trusts?trustor_user_id=%s' % member_id, token=watcher)
    assert status == 200, trusts
    (trust,) = trusts['trusts']
    assert trust['trustee_user_id'] == ks.users['heat'] and trust['impersonation'] is True
    assert trust['project_id'] == project
    status, _, roles = ks.request('GET', '/v3/OS-TRUST/trusts/%s/roles' % trust['id'], token=watcher)
    assert status == 200, roles
    assert 'member' in [r['name'] for r in roles['roles']]
    status, doc = cloud.call('GET', '/stacks/%s/%s' % (name, sid), watcher, project=project)
    sup = doc['stack']['stack_user_project_id']
    status, _, sup_doc = admin_get(ks, '/v3/projects/%s' % sup)
    assert status == 200 and sup_doc['project']['domain_id'] == cloud.domain
    assert sup_doc['project']['name'] == ('%s-%s' % (project, sid))[:64]

    handle = cloud.resource(watcher, project, name, sid, 'handle')
    signal = json.loads(handle['attributes']['signal'])
    assert signal['project_id'] == sup and signal['auth_url'] == ks.url + '/v3'
    assert signal['alarm_url'] == '%s/v1/%s/stacks/%s/%s/resources/handle/signal' % (cloud.orchestration, sup, name, sid)
    assert handle['physical_resource_id'] == signal['user_id']
    status, _, user = admin_get(ks, '/v3/users/%s' % signal['user_id'])
    assert user['user']['domain_id'] == cloud.domain and user['user']['default_project_id'] == sup

    # The creator's token goes; the stack goes on through its trust.
    ks.revoke(creator)
    assert cloud.call('GET', '/stacks', creator, project=project)[0] == 401

    stack_user = user_token(ks, signal['user_id'], signal['password'], sup)
    # A stack user may signal, and read its own resource's metadata ...
    status, doc = cloud.call('POST', signal['alarm_url'], stack_user, {'status': 'SUCCESS', 'data': 'hi'})
    assert status == 200, doc
    # ... and nothing else.
    status, doc = cloud.call('GET', '/stacks', stack_user, project=sup)
    assert status == 403 and doc['error']['type'] == 'Forbidden', doc
    status, doc = cloud.call('GET', '/stacks/%s/%s' % (name, sid), stack_user, project=sup)
    assert status == 403, doc
    status, doc = cloud.call('GET', '/stacks/%s/%s/resources/handle/metadata' % (name, sid), stack_user, project=sup)
    assert status == 200 and doc['metadata']['1']['data'] == 'hi', doc
    status, doc = cloud.call('GET', '/stacks/%s/%s/resources/wait/metadata' % (name, sid), stack_user, project=sup)
    assert status == 403 and doc['error']['type'] == 'Forbidden', doc
    status, doc = cloud.call('POST', '/stacks', stack_user, {'stack_name': 'x', 'template': template}, project=sup)
    assert status == 403, doc

    st = cloud.wait(watcher, project, name, sid, ('CREATE_COMPLETE', 'CREATE_FAILED'))
    assert st['stack_status'] == 'CREATE_COMPLETE', (st, cloud.aio.proc.output()[-4000:])
    status, doc = cloud.call('GET', '/stacks/%s/%s/outputs/data' % (name, sid), watcher, project=project)
    assert json.loads(doc['output']['output_value']) == {'1': 'hi'}

    status, _ = cloud.call('DELETE', '/stacks/%s/%s' % (name, sid), watcher, project=project)
    assert status == 204
    cloud.wait(watcher, project, name, sid, ('GONE',))
    assert ks.request('GET', '/v3/OS-TRUST/trusts/%s' % trust['id'], token=watcher)[0] == 404
    assert admin_get(ks, '/v3/users/%s' % signal['user_id'])[0] == 404
    assert admin_get(ks, '/v3/projects/%s' % sup)[0] == 404


def curl(method, url, body=None):
    out = subprocess.run(['curl', '-s', '-i', '-X', method, '-H', 'Content-Type: application/json',
                          '--data-binary', json.dumps(body) if body is not None else '', url],
                         capture_output=True, text=True, timeout=60).stdout
    head, _, payload = out.replace('\r\n', '\n').partition('\n\n')
    return int(head.split('\n', 1)[0].split()[1]), payload


@pytest.mark.skipif(CURL is None, reason='cfn-signal runs curl')
def test_cfn_signal_through_heat_api_cfn(cloud):
    """Seed scenario 5 with the stock cfn-signal."""
    venv = agents()
    ks = cloud.keystone
    project = ks.projects['demo']
    token = ks.token('member', project='demo')
    name = 'cfn-%s' % uuid.uuid4().hex[:6]
    template = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'handle': {'type': 'AWS::CloudFormation::WaitConditionHandle'},
            'wait': {'type': 'AWS::CloudFormation::WaitCondition',
                     'properties': {'Handle': {'get_resource': 'handle'}, 'Timeout': 300}},
        },
        'outputs': {'url': {'value': {'get_resource': 'handle'}}, 'data': {'value': {'get_attr': ['wait', 'Data']}}},
    }
    status, doc = cloud.call('POST', '/stacks', token, {'stack_name': name, 'template': template}, project=project)
    assert status == 201, doc
    sid = doc['stack']['id']
    cloud.resource(token, project, name, sid, 'handle')
    status, doc = cloud.call('GET', '/stacks/%s/%s/outputs/url' % (name, sid), token, project=project)
    url = doc['output']['output_value']
    parts = urllib.parse.urlsplit(url)
    assert parts.netloc == urllib.parse.urlsplit(cloud.cfn).netloc and parts.path.startswith('/v1/waitcondition/arn%3A')
    query = dict(urllib.parse.parse_qsl(parts.query))
    assert set(query) == {'AWSAccessKeyId', 'Signature', 'SignatureMethod', 'SignatureVersion', 'Timestamp'}

    def with_query(**changes):
        q = dict(query, **changes)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, urllib.parse.urlencode(q), ''))

    body = {'Status': 'SUCCESS', 'Reason': 'r', 'UniqueId': '9', 'Data': 'x'}
    status, payload = curl('PUT', with_query(Signature='A' * 44), body)
    assert status == 403 and '<Code>SignatureDoesNotMatch</Code>' in payload, payload
    status, payload = curl('PUT', with_query(AWSAccessKeyId='0' * 32), body)
    assert status == 403 and '<Code>InvalidClientTokenId</Code>' in payload, payload
    status, payload = curl('PUT', with_query(Signature=None).replace('&Signature=None', ''), body)
    assert status == 400 and '<Code>IncompleteSignature</Code>' in payload, payload
    status, doc = cloud.call('GET', '/stacks/%s/%s/resources/wait' % (name, sid), token, project=project)
    assert doc['resource']['resource_status'] == 'CREATE_IN_PROGRESS'

    signal = subprocess.run([os.path.join(venv, 'bin', 'cfn-signal'), '-e', '0', '-r', 'booted', '-d', 'hello',
                             '-i', '1', url], capture_output=True, text=True, timeout=120)
    assert signal.returncode == 0, (signal.stdout, signal.stderr, cloud.aio.proc.output()[-3000:])
    st = cloud.wait(token, project, name, sid, ('CREATE_COMPLETE', 'CREATE_FAILED'))
    assert st['stack_status'] == 'CREATE_COMPLETE', st
    status, doc = cloud.call('GET', '/stacks/%s/%s/outputs/data' % (name, sid), token, project=project)
    assert json.loads(doc['output']['output_value']) == {'1': 'hello'}
    status, doc = cloud.call('GET', '/stacks/%s/%s/resources/handle/metadata' % (name, sid), token, project=project)
    assert doc['metadata'] == {'1': {'Data': 'hello', 'Reason': 'booted', 'Status': 'SUCCESS'}}

    status, _ = cloud.call('DELETE', '/stacks/%s/%s' % (name, sid), token, project=project)
    assert status == 204
    cloud.wait(token, project, name, sid, ('GONE',))
    # The handle's user and its EC2 credential went with the stack.
    status, payload = curl('PUT', url, body)
    assert status == 403 and '<Code>InvalidClientTokenId</Code>' in payload, payload


COLLECT_GLUE = r'''#!/bin/sh
# What os-refresh-config's 20-os-apply-config does to heat-config's
# template ({{deployments}} into HEAT_SHELL_CONFIG), then 55-heat-config.
set -e
"$AGENTS_PYTHON" - <<'PY'
import json, os
md = {}
for f in os.environ.get('OS_CONFIG_FILES', '').split(':'):
    if f and os.path.exists(f):
        md.update(json.load(open(f)))
with open(os.environ['HEAT_SHELL_CONFIG'], 'w') as out:
    json.dump(md.get('deployments', []), out)
PY
exec "$AGENTS_PYTHON" "$AGENTS/55-heat-config"
'''

SCRIPT = '''#!/bin/sh
echo "hello $greeting from $deploy_server_id"
echo "to stderr" >&2
echo -n "an output value" > $heat_outputs_path.result
'''


def test_software_deployment_with_stock_agents(cloud, module_procs):
    """Seed scenario 6 with os-collect-config and heat-agents."""
    venv = agents()
    ks = cloud.keystone
    project = ks.projects['demo']
    token = ks.token('member', project='demo')
    name = 'sd-%s' % uuid.uuid4().hex[:6]
    template = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'server': {'type': 'OS::Heat::DeployedServer',
                       'properties': {'software_config_transport': 'POLL_SERVER_HEAT'}},
            'config': {'type': 'OS::Heat::SoftwareConfig',
                       'properties': {'group': 'script', 'config': SCRIPT,
                                      'inputs': [{'name': 'greeting'}], 'outputs': [{'name': 'result'}]}},
            'deploy': {'type': 'OS::Heat::SoftwareDeployment',
                       'properties': {'config': {'get_resource': 'config'}, 'server': {'get_resource': 'server'},
                                      'input_values': {'greeting': 'world'}, 'signal_transport': 'HEAT_SIGNAL'}},
        },
        'outputs': {'stdout': {'value': {'get_attr': ['deploy', 'deploy_stdout']}},
                    'result': {'value': {'get_attr': ['deploy', 'result']}},
                    'code': {'value': {'get_attr': ['deploy', 'deploy_status_code']}}},
    }
    status, doc = cloud.call('POST', '/stacks', token, {'stack_name': name, 'template': template}, project=project)
    assert status == 201, doc
    sid = doc['stack']['id']
    server = cloud.resource(token, project, name, sid, 'server')
    occ = server['attributes']['os_collect_config']
    heat = occ['heat']
    assert occ['collectors'] == ['heat', 'local'] and heat['auth_url'] == ks.url + '/v3', occ
    assert heat['stack_id'] == '%s/%s' % (name, sid) and heat['resource_name'] == 'server'

    work = tempfile.mkdtemp(prefix='kt-instance-')
    hooks = os.path.join(work, 'hooks')
    os.makedirs(hooks)
    hook = os.path.join(hooks, 'script')
    with open(hook, 'w') as f:
        f.write('#!%s\n' % os.path.join(venv, 'bin', 'python'))
        f.write(open(os.path.join(venv, 'heat-agents', 'hook-script.py')).read())
    notify = os.path.join(work, 'heat-config-notify')
    with open(notify, 'w') as f:
        f.write('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (os.path.join(venv, 'bin', 'python'),
                                                      os.path.join(venv, 'heat-agents', 'heat-config-notify')))
    glue = os.path.join(work, 'refresh')
    with open(glue, 'w') as f:
        f.write(COLLECT_GLUE)
    for p in (hook, notify, glue):
        os.chmod(p, 0o755)
    conf = os.path.join(work, 'os-collect-config.conf')
    with open(conf, 'w') as f:
        f.write('[DEFAULT]\ncommand = %s\ncollectors = heat\ncachedir = %s\nbackup_cachedir = %s\n'
                'polling_interval = 1\nmin_polling_interval = 1\n' % (glue, os.path.join(work, 'cache'),
                                                                      os.path.join(work, 'cache-backup')))
        f.write('[heat]\n' + ''.join('%s = %s\n' % (k, v) for k, v in heat.items()))
        f.write('[keystone]\ncache_dir = %s\n' % os.path.join(work, 'ks-cache'))
    env = dict(os.environ, AGENTS=os.path.join(venv, 'heat-agents'), AGENTS_PYTHON=os.path.join(venv, 'bin', 'python'),
               HEAT_CONFIG_HOOKS=hooks, HEAT_SHELL_CONFIG=os.path.join(work, 'heat-config'),
               HEAT_CONFIG_DEPLOYED=os.path.join(work, 'deployed'), HEAT_CONFIG_NOTIFY=notify,
               HEAT_SCRIPT_WORKING=os.path.join(work, 'script-working'),
               HEAT_SCRIPT_OUTPUTS=os.path.join(work, 'script-outputs'))
    agent = Proc([os.path.join(venv, 'bin', 'os-collect-config'), '--config-file', conf], env=env, cwd=work)
    module_procs.append(agent)
    st = cloud.wait(token, project, name, sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=180)
    assert st['stack_status'] == 'CREATE_COMPLETE', (st, agent.output()[-4000:])
    out = {}
    for key in ('stdout', 'result', 'code'):
        status, doc = cloud.call('GET', '/stacks/%s/%s/outputs/%s' % (name, sid, key), token, project=project)
        out[key] = doc['output']['output_value']
    assert out == {'stdout': 'hello world from %s\n' % server['physical_resource_id'], 'result': 'an output value',
                   'code': 0}, out
    # The config's own output, as the agent signalled it.
    dep = cloud.resource(token, project, name, sid, 'deploy')['physical_resource_id']
    status, doc = cloud.call('GET', '/software_deployments/%s' % dep, token, project=project)
    values = doc['software_deployment']['output_values']
    assert (values['result'], values['deploy_stderr']) == ('an output value', 'to stderr\n'), values
    agent.stop()
    status, _ = cloud.call('DELETE', '/stacks/%s/%s' % (name, sid), token, project=project)
    assert status == 204
    cloud.wait(token, project, name, sid, ('GONE',))
    assert admin_get(ks, '/v3/users/%s' % heat['user_id'])[0] == 404
