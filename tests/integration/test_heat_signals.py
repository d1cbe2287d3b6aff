"""Signals and software deployments through `keelson all-in-one`'s
Orchestration API (noauth), on each configured backend.

Seed scenario 5: a wait condition signalled from "an instance": a real
`curl` run by a shell from the handle's `curl_cli` (TOKEN_SIGNAL), and the
pre-signed URL of CFN_SIGNAL with no token at all; a modified or expired
URL is refused with 403; timeout and FAILURE fail the wait condition.

Seed scenario 6: a software deployment to an OS::Heat::DeployedServer,
completed by the test agent (tests/lib/heat_agent.py: os-collect-config +
heat-config) over POLL_SERVER_HEAT and HEAT_SIGNAL, and one failed by the
script's non-zero exit status."""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import uuid

import pytest

from conftest import BACKENDS, ROOT, AllInOne, create_database
from heat import Heat

CURL = shutil.which('curl')
pytestmark = pytest.mark.skipif(CURL is None, reason='curl is not installed')
AGENT = os.path.join(ROOT, 'tests', 'lib', 'heat_agent.py')


def start(procs, backend, extra=None):
    aio = AllInOne(procs, create_database(backend, 'sig_%s' % uuid.uuid4().hex[:8]), extra=extra)
    url = aio.orchestration_url()
    # noauth: the curl_cli carries only a token, so the caller is the
    # default project (admin); the stacks live there too.
    return Heat(url, project='admin')


@pytest.fixture(params=BACKENDS)
def heat(request, procs):
    return start(procs, request.param)


def name(prefix):
    return '%s-%s' % (prefix, uuid.uuid4().hex[:6])


def wait_template(transport='TOKEN_SIGNAL', timeout=60, count=1, handle_type='OS::Heat::WaitConditionHandle'):
    handle = {'type': handle_type}
    if handle_type == 'OS::Heat::WaitConditionHandle':
        handle['properties'] = {'signal_transport': transport}
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'handle': handle,
            'wait': {'type': 'OS::Heat::WaitCondition',
                     'properties': {'handle': {'get_resource': 'handle'}, 'timeout': timeout, 'count': count}},
        },
        'outputs': {'data': {'value': {'get_attr': ['wait', 'data']}}},
    }


def resource(heat, stack, sid, res):
    status, _, doc = heat.call('GET', '/stacks/%s/%s/resources/%s' % (stack, sid, res))
    assert status == 200, (status, doc)
    return doc['resource']


def wait_resource(heat, stack, sid, res, state='CREATE_COMPLETE', timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status, _, doc = heat.call('GET', '/stacks/%s/%s/resources/%s' % (stack, sid, res))
        if status == 200 and doc['resource']['resource_status'] == state:
            return doc['resource']
        time.sleep(0.1)
    raise AssertionError('%s never reached %s' % (res, state))


def reason_of(heat, stack, sid, res):
    return resource(heat, stack, sid, res)['resource_status_reason']


def shell(cmd, **env):
    p = subprocess.run(['bash', '-c', cmd], capture_output=True, text=True, timeout=60, env=dict(os.environ, **env))
    assert p.returncode == 0, (cmd, p.stdout, p.stderr)
    return p.stdout


def http_status(text):
    """The status code of `curl -i` output."""
    return int(text.split('\n', 1)[0].split()[1])


def test_wait_condition_signalled_with_curl_cli(heat):
    """TOKEN_SIGNAL: the handle's curl_cli, pasted into a shell, signals
    it; the wait condition completes with the signal's data."""
    n = name('wc-curl')
    sid = heat.create(n, wait_template())
    handle = wait_resource(heat, n, sid, 'handle')
    attrs = handle['attributes']
    assert attrs['token'] and attrs['endpoint'].endswith('/resources/handle/signal')
    assert attrs['curl_cli'] == ("curl -i -X POST -H 'X-Auth-Token: %s' -H 'Content-Type: application/json' "
                                 "-H 'Accept: application/json' %s" % (attrs['token'], attrs['endpoint']))
    assert json.loads(attrs['signal']) == {'token': attrs['token'], 'endpoint': attrs['endpoint']}
    assert resource(heat, n, sid, 'wait')['resource_status'] == 'CREATE_IN_PROGRESS'
    out = shell('eval "$CURL_CLI --data-binary \'{\\"status\\": \\"SUCCESS\\", \\"reason\\": \\"booted\\", '
                '\\"data\\": \\"hello\\"}\'"', CURL_CLI=attrs['curl_cli'])
    assert http_status(out) == 200, out
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=60)
    assert st['stack_status'] == 'CREATE_COMPLETE', st
    assert json.loads(heat.output(n, sid, 'data')) == {'1': 'hello'}
    status, _, md = heat.call('GET', '/stacks/%s/%s/resources/handle/metadata' % (n, sid))
    assert md == {'metadata': {'1': {'data': 'hello', 'reason': 'booted', 'status': 'SUCCESS'}}}
    events = [(e['resource_status'], e['resource_status_reason']) for e in heat.events(n, sid, 'handle')]
    assert ('SIGNAL_COMPLETE', 'Signal: status:SUCCESS reason:booted') in events, events
    # A second signal without details gets the defaults.
    out = shell('eval "$CURL_CLI"', CURL_CLI=attrs['curl_cli'])
    assert http_status(out) == 200
    deadline = time.time() + 20
    while time.time() < deadline:
        _, _, md = heat.call('GET', '/stacks/%s/%s/resources/handle/metadata' % (n, sid))
        if '2' in md['metadata']:
            break
        time.sleep(0.1)
    assert md['metadata']['2'] == {'data': None, 'reason': 'Signal 2 received', 'status': 'SUCCESS'}
    heat.delete(n, sid)
    heat.wait(sid, 'GONE')


def test_wait_condition_count_and_failure(heat):
    """Two signals are needed; a FAILURE fails the wait condition with the
    signal's reason."""
    n = name('wc-fail')
    sid = heat.create(n, wait_template(count=2))
    endpoint = wait_resource(heat, n, sid, 'handle')['attributes']['endpoint']
    status, _, doc = heat.call('POST', endpoint, {'status': 'SUCCESS', 'id': 'a'})
    assert (status, doc) == (200, None)
    status, _, doc = heat.call('POST', endpoint, {'status': 'FAILURE', 'reason': 'disk full'})
    assert status == 200
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=60)
    assert st['stack_status'] == 'CREATE_FAILED'
    assert reason_of(heat, n, sid, 'wait') == 'WaitConditionFailure: resources.wait: disk full'


def test_wait_condition_timeout(heat):
    n = name('wc-timeout')
    sid = heat.create(n, wait_template(timeout=2, count=2))
    endpoint = wait_resource(heat, n, sid, 'handle')['attributes']['endpoint']
    heat.call('POST', endpoint, {'reason': 'one'})
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=60)
    assert st['stack_status'] == 'CREATE_FAILED'
    assert reason_of(heat, n, sid, 'wait') == 'WaitConditionTimeout: resources.wait: 1 of 2 received - one'


def test_signal_errors(heat):
    """400 for a type without a handler, 404 for an unknown resource, and
    a malformed signal leaves the handle's metadata alone."""
    n = name('wc-err')
    tmpl = wait_template(timeout=30)
    tmpl['resources']['other'] = {'type': 'OS::Heat::None'}
    sid = heat.create(n, tmpl)
    endpoint = wait_resource(heat, n, sid, 'handle')['attributes']['endpoint']
    wait_resource(heat, n, sid, 'other')
    status, _, doc = heat.call('POST', '/stacks/%s/%s/resources/other/signal' % (n, sid), {})
    assert status == 400 and doc['error']['type'] == 'ResourceActionNotSupported', doc
    status, _, doc = heat.call('POST', '/stacks/%s/%s/resources/nope/signal' % (n, sid), {})
    assert status == 404 and doc['error']['type'] == 'ResourceNotFound', doc
    status, _, _ = heat.call('POST', endpoint, {'status': 'MAYBE'})
    assert status == 200  # handled asynchronously: refused by the handler
    time.sleep(1)
    _, _, md = heat.call('GET', '/stacks/%s/%s/resources/handle/metadata' % (n, sid))
    assert md == {'metadata': None} or md == {'metadata': {}}, md
    heat.delete(n, sid)
    heat.wait(sid, 'GONE')


def tamper(url, **changes):
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    path = parts.path
    for k, v in changes.items():
        if k == 'path':
            path = v(path)
        else:
            query[k] = v
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, urllib.parse.urlencode(query), ''))


def curl_put(url, body, method='PUT'):
    out = shell('curl -s -i -X %s -H "Content-Type: application/json" --data-binary "$BODY" "$URL"' % method,
                BODY=json.dumps(body), URL=url)
    head, _, payload = out.replace('\r\n', '\n').partition('\n\n')
    return http_status(head), (json.loads(payload) if payload.strip() else None)


def test_wait_condition_signalled_through_presigned_url(heat):
    """CFN_SIGNAL: a pre-signed URL that needs no token; any change to its
    path, query or method is refused with 403."""
    n = name('wc-cfn')
    sid = heat.create(n, wait_template(transport='CFN_SIGNAL'))
    attrs = wait_resource(heat, n, sid, 'handle')['attributes']
    assert attrs['token'] is None and attrs['curl_cli'] is None
    url = json.loads(attrs['signal'])['alarm_url']
    assert '/v1/waitcondition/arn%3Aopenstack%3Aheat%3A%3Aadmin%3Astacks%2F' in url and 'Signature=' in url
    body = {'status': 'SUCCESS', 'reason': 'cfn', 'data': 'via url'}
    for bad in (tamper(url, path=lambda p: p.replace('handle', 'wait')),
                tamper(url, Signature='0' * 64),
                tamper(url, Expires='9999999999'),
                tamper(url, extra='1')):
        status, doc = curl_put(bad, body)
        assert status == 403 and doc['error']['type'] == 'SignatureDoesNotMatch', (bad, doc)
    status, doc = curl_put(url, body, method='POST')
    assert status == 403, doc
    assert resource(heat, n, sid, 'wait')['resource_status'] == 'CREATE_IN_PROGRESS'
    status, doc = curl_put(url, body)
    assert status == 200, doc
    assert doc == {'resource': 'handle', 'metadata': {'1': {'data': 'via url', 'reason': 'cfn', 'status': 'SUCCESS'}}}
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=60)
    assert st['stack_status'] == 'CREATE_COMPLETE', st
    assert json.loads(heat.output(n, sid, 'data')) == {'1': 'via url'}
    # A malformed signal through the URL is answered at once.
    status, doc = curl_put(url, {'status': 'MAYBE'})
    assert status == 400 and doc['error']['type'] == 'ValueError', doc


def test_update_wait_condition_handle_url_and_expiry(procs):
    """UpdateWaitConditionHandle: `get_resource` is its pre-signed URL
    (CloudFormation signal format); an expired URL is refused."""
    heat = start(procs, BACKENDS[0], extra={'orchestration': {'signal_url_lifetime': '3'}})
    n = name('wc-upd')
    tmpl = wait_template(handle_type='OS::Heat::UpdateWaitConditionHandle')
    tmpl['outputs']['url'] = {'value': {'get_resource': 'handle'}}
    sid = heat.create(n, tmpl)
    wait_resource(heat, n, sid, 'handle')
    status, _, doc = heat.call('GET', '/stacks/%s/%s/outputs/url' % (n, sid))
    url = doc['output']['output_value']
    assert '/v1/waitcondition/' in url and 'Expires=' in url, url
    status, doc = curl_put(url, {'Status': 'SUCCESS', 'Reason': 'r', 'Data': 'd', 'UniqueId': '5'})
    assert status == 200, doc
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=60)
    assert st['stack_status'] == 'CREATE_COMPLETE', st
    assert json.loads(heat.output(n, sid, 'data')) == {'5': 'd'}
    time.sleep(4)
    status, doc = curl_put(url, {'Status': 'SUCCESS', 'Reason': 'r', 'Data': 'd', 'UniqueId': '6'})
    assert status == 403 and doc['error']['type'] == 'RequestExpired', doc


def group_size(heat, stack, sid):
    """(members, scaling_in_progress) of the scaling group `g`."""
    child = resource(heat, stack, sid, 'g')['physical_resource_id']
    status, _, doc = heat.call('GET', '/stacks/%s/resources' % child)
    assert status == 200, doc
    _, _, md = heat.call('GET', '/stacks/%s/%s/resources/g/metadata' % (stack, sid))
    return len(doc['resources']), md['metadata'].get('scaling_in_progress')


def test_scaling_policy_alarm_url(procs):
    """An alarm posts to a ScalingPolicy's pre-signed alarm_url with no
    token: the group grows by one member per signal up to max_size; a
    signal with nothing to do leaves no event; the URL does not expire
    (upstream's never_expire), a tampered one is refused."""
    heat = start(procs, BACKENDS[0], extra={'orchestration': {'signal_url_lifetime': '3'}})
    n = name('asg')
    tmpl = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'g': {'type': 'OS::Heat::AutoScalingGroup',
                  'properties': {'min_size': 1, 'max_size': 2, 'resource': {'type': 'OS::Heat::None'}}},
            'up': {'type': 'OS::Heat::ScalingPolicy',
                   'properties': {'auto_scaling_group_id': {'get_resource': 'g'},
                                  'adjustment_type': 'change_in_capacity', 'scaling_adjustment': 1}},
        },
        'outputs': {'alarm': {'value': {'get_attr': ['up', 'alarm_url']}},
                    'size': {'value': {'get_attr': ['g', 'current_size']}}},
    }
    sid = heat.create(n, tmpl)
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=60)
    assert st['stack_status'] == 'CREATE_COMPLETE', st
    url = heat.output(n, sid, 'alarm')
    assert '/v1/signal/arn%3Aopenstack%3Aheat%3A%3Aadmin%3Astacks%2F' in url and 'Expires=' not in url, url
    assert group_size(heat, n, sid) == (1, False)
    status, doc = curl_put(tamper(url, path=lambda p: p.replace('up', 'g')), {}, method='POST')
    assert status == 403, doc
    time.sleep(4)  # longer than signal_url_lifetime
    status, doc = curl_put(url, {'previous': 'ok', 'current': 'alarm', 'reason': 'cpu'}, method='POST')
    assert status == 200, doc
    assert group_size(heat, n, sid) == (2, False)
    assert heat.output(n, sid, 'size') == 2
    status, doc = curl_put(url, {}, method='POST')
    assert status == 200, doc
    assert group_size(heat, n, sid) == (2, False)
    signals = [e['resource_status_reason'] for e in heat.events(n, sid, 'up') if e['resource_status'].startswith('SIGNAL')]
    assert signals == ['alarm state changed from ok to alarm (cpu)'], signals
    heat.delete(n, sid)
    heat.wait(sid, 'GONE')


SCRIPT_OK = '''#!/bin/sh
echo "hello $greeting from $deploy_server_id ($deploy_action)"
'''

SCRIPT_FAIL = '''#!/bin/sh
echo "about to fail"
echo "no space left on $greeting" >&2
exit 3
'''


def deployment_template(script, transport='HEAT_SIGNAL'):
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'server': {'type': 'OS::Heat::DeployedServer',
                       'properties': {'software_config_transport': 'POLL_SERVER_HEAT'}},
            'config': {'type': 'OS::Heat::SoftwareConfig',
                       'properties': {'group': 'script', 'config': script,
                                      'inputs': [{'name': 'greeting', 'default': 'nobody'}]}},
            'deploy': {'type': 'OS::Heat::SoftwareDeployment',
                       'properties': {'config': {'get_resource': 'config'}, 'server': {'get_resource': 'server'},
                                      'input_values': {'greeting': 'world'}, 'signal_transport': transport}},
        },
        'outputs': {
            'stdout': {'value': {'get_attr': ['deploy', 'deploy_stdout']}},
            'code': {'value': {'get_attr': ['deploy', 'deploy_status_code']}},
        },
    }


def start_agent(procs, heat, stack, sid):
    """The test agent on the server's os-collect-config metadata URL."""
    from conftest import Proc
    server = wait_resource(heat, stack, sid, 'server')
    collect = server['attributes']['os_collect_config']
    assert collect['collectors'] == ['heat'], collect
    url = collect['heat']['metadata_url']
    assert url.endswith('/resources/server/metadata'), url
    agent = Proc([sys.executable, AGENT, url, '--interval', '0.2'])
    procs.append(agent)
    return agent, server


@pytest.mark.parametrize('transport', ['HEAT_SIGNAL', 'CFN_SIGNAL'])
def test_software_deployment_completed_by_agent(heat, procs, transport):
    """Scenario 6: the deployment is published in the server's metadata;
    the agent runs the script and signals its outputs; the deployment
    completes with them."""
    n = name('sd-ok')
    sid = heat.create(n, deployment_template(SCRIPT_OK, transport))
    agent, server = start_agent(procs, heat, n, sid)
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=90)
    assert st['stack_status'] == 'CREATE_COMPLETE', (st, agent.output())
    server_id = server['physical_resource_id']
    assert heat.output(n, sid, 'stdout') == 'hello world from %s (CREATE)\n' % server_id
    assert heat.output(n, sid, 'code') == 0
    _, _, md = heat.call('GET', '/stacks/%s/%s/resources/server/metadata' % (n, sid))
    (derived,) = md['metadata']['deployments']
    inputs = {i['name']: i['value'] for i in derived['inputs']}
    assert inputs['greeting'] == 'world' and inputs['deploy_action'] == 'CREATE'
    assert inputs['deploy_resource_name'] == 'deploy' and inputs['deploy_stack_id'] == '%s/%s' % (n, sid)
    assert inputs['deploy_signal_transport'] == transport
    events = [(e['resource_status'], e['resource_status_reason']) for e in heat.events(n, sid, 'deploy')]
    dep_id = resource(heat, n, sid, 'deploy')['physical_resource_id']
    assert ('SIGNAL_IN_PROGRESS', 'Signal: deployment %s succeeded' % dep_id) in events, events
    heat.delete(n, sid)
    heat.wait(sid, 'GONE')


def test_software_deployment_failed_by_exit_status(heat, procs):
    """A non-zero deploy_status_code fails the resource; the agent's
    stderr is in deploy_stderr."""
    n = name('sd-fail')
    sid = heat.create(n, deployment_template(SCRIPT_FAIL))
    agent, _ = start_agent(procs, heat, n, sid)
    st = heat.wait(sid, ('CREATE_COMPLETE', 'CREATE_FAILED'), timeout=90)
    assert st['stack_status'] == 'CREATE_FAILED', (st, agent.output())
    dep = resource(heat, n, sid, 'deploy')
    assert dep['resource_status_reason'] == ('Error: resources.deploy: Deployment to server failed: '
                                             'deploy_status_code : Deployment exited with non-zero status code: 3')
    assert dep['attributes']['deploy_stderr'] == 'no space left on world\n'
    assert dep['attributes']['deploy_stdout'] == 'about to fail\n'
    assert dep['attributes']['deploy_status_code'] == 3


def test_software_configs_and_deployments_api(heat):
    """The software_configs / software_deployments REST resources, and a
    server's derived configs at metadata/{server_id}."""
    status, _, doc = heat.call('POST', '/software_configs', {
        'name': 'cfg-b', 'group': 'script', 'config': 'echo hi',
        'inputs': [{'name': 'x'}], 'outputs': [{'name': 'y', 'error_output': True}], 'options': {'o': 1}})
    assert status == 200, doc
    cfg = doc['software_config']
    assert (cfg['name'], cfg['group'], cfg['config'], cfg['options']) == ('cfg-b', 'script', 'echo hi', {'o': 1})
    assert cfg['inputs'] == [{'name': 'x'}] and cfg['creation_time']
    status, _, doc = heat.call('POST', '/software_configs', {'name': 'cfg-a', 'config': 'true'})
    cfg_a = doc['software_config']
    assert cfg_a['group'] == 'Heat::Ungrouped'
    status, _, doc = heat.call('GET', '/software_configs/%s' % cfg['id'])
    assert status == 200 and doc['software_config'] == cfg
    status, _, doc = heat.call('GET', '/software_configs')
    listed = [c for c in doc['software_configs'] if c['id'] in (cfg['id'], cfg_a['id'])]
    assert listed and set(listed[0]) == {'id', 'name', 'group', 'creation_time'}
    status, _, doc = heat.call('GET', '/software_configs/nope')
    assert status == 404 and doc['error']['type'] == 'NotFound', doc
    status, _, doc = heat.call('POST', '/software_configs', {'inputs': 'x'})
    assert status == 400, doc

    server = str(uuid.uuid4())
    ids = []
    for c in (cfg, cfg_a):
        status, _, doc = heat.call('POST', '/software_deployments', {
            'config_id': c['id'], 'server_id': server, 'input_values': {'x': 1},
            'action': 'CREATE', 'status': 'IN_PROGRESS', 'status_reason': 'Deploy data available'})
        assert status == 200, doc
        ids.append(doc['software_deployment']['id'])
        assert doc['software_deployment']['status'] == 'IN_PROGRESS'
    status, _, doc = heat.call('GET', '/software_deployments?server_id=%s' % server)
    assert sorted(d['id'] for d in doc['software_deployments']) == sorted(ids)
    status, _, doc = heat.call('GET', '/software_deployments/metadata/%s' % server)
    assert [m['name'] for m in doc['metadata']] == ['cfg-a', 'cfg-b']
    status, _, doc = heat.call('PUT', '/software_deployments/%s' % ids[0],
                               {'status': 'COMPLETE', 'output_values': {'y': None}})
    assert status == 200 and doc['software_deployment']['status'] == 'COMPLETE', doc
    assert doc['software_deployment']['action'] == 'CREATE'
    status, _, doc = heat.call('POST', '/software_deployments', {'config_id': 'nope', 'server_id': server})
    assert status == 404, doc
    for i in ids:
        status, _, _ = heat.call('DELETE', '/software_deployments/%s' % i)
        assert status == 204
    status, _, doc = heat.call('GET', '/software_deployments/%s' % ids[0])
    assert status == 404, doc
    status, _, _ = heat.call('DELETE', '/software_configs/%s' % cfg['id'])
    assert status == 204
    status, _, _ = heat.call('DELETE', '/software_configs/%s' % cfg['id'])
    assert status == 404
