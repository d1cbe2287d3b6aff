"""The real `openstack stack …` CLI (python-openstackclient +
python-heatclient from PyPI) driving keelson's Orchestration API, with no
Keystone (OS_AUTH_TYPE=none, as against the reference Heat)."""
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from conftest import AllInOne, create_database

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')
pytestmark = pytest.mark.skipif(not os.path.exists(OPENSTACK), reason='python-openstackclient is not installed')

TEMPLATE = """
heat_template_version: 2018-08-31
parameters:
  greeting:
    type: string
    default: hello
  count:
    type: number
    constraints:
      - range: {min: 1, max: 5}
resources:
  a:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: greeting}
      update_replace: %(replace)s
  b:
    type: OS::Heat::Value
    properties:
      value: {str_replace: {template: GREETING-COUNT, params: {GREETING: {get_attr: [a, output]}, COUNT: {get_param: count}}}}
  secret:
    type: OS::Heat::RandomString
    properties:
      length: 12
outputs:
  joined:
    value: {get_attr: [b, value]}
"""


class Cli:
    def __init__(self, url):
        self.env = dict(os.environ, OS_AUTH_TYPE='none', OS_ENDPOINT='%s/v1/admin' % url,
                        OS_ORCHESTRATION_API_VERSION='1')
        self.dir = tempfile.mkdtemp(prefix='kt-cli-')

    def template(self, replace=False):
        path = os.path.join(self.dir, 'stack-%s.yaml' % uuid.uuid4().hex[:6])
        with open(path, 'w') as f:
            f.write(TEMPLATE % {'replace': 'true' if replace else 'false'})
        return path

    def run(self, *args, json_out=True):
        cmd = [OPENSTACK] + list(args) + (['-f', 'json'] if json_out else [])
        p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, '%s\nstdout: %s\nstderr: %s' % (' '.join(cmd), p.stdout, p.stderr)
        if not (json_out and p.stdout.strip()):
            return p.stdout
        # --wait prints the event stream before the JSON document.
        lines = p.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith('{') or line.startswith('['))
        return json.loads('\n'.join(lines[start:]))


@pytest.fixture
def cli(procs):
    aio = AllInOne(procs, create_database('sqlite', 'cli'))
    return Cli(aio.orchestration_url())


def test_openstack_stack_lifecycle(cli):
    name = 'cli-%s' % uuid.uuid4().hex[:6]
    created = cli.run('stack', 'create', '-t', cli.template(), '--parameter', 'count=3', '--wait', name)
    assert created['stack_status'] == 'CREATE_COMPLETE'

    listed = cli.run('stack', 'list')
    assert any(s['Stack Name'] == name and s['Stack Status'] == 'CREATE_COMPLETE' for s in listed)

    shown = cli.run('stack', 'show', name)
    assert shown['stack_name'] == name
    assert shown['parameters']['count'] == '3'

    resources = {r['resource_name']: r for r in cli.run('stack', 'resource', 'list', name)}
    assert set(resources) == {'a', 'b', 'secret'}
    assert all(r['resource_status'] == 'CREATE_COMPLETE' for r in resources.values())
    a_before = cli.run('stack', 'resource', 'show', name, 'a')['physical_resource_id']

    events = cli.run('stack', 'event', 'list', name)
    assert any(e['resource_name'] == name and e['resource_status'] == 'CREATE_COMPLETE' for e in events)

    out = cli.run('stack', 'output', 'show', name, 'joined')
    assert out['output_value'] == 'hello-3'
    outputs = cli.run('stack', 'output', 'list', name)
    assert [o['output_key'] for o in outputs] == ['joined']

    # In place: a new greeting keeps a's physical resource.
    updated = cli.run('stack', 'update', '-t', cli.template(), '--parameter', 'count=3',
                      '--parameter', 'greeting=hi', '--wait', name)
    assert updated['stack_status'] == 'UPDATE_COMPLETE'
    assert cli.run('stack', 'output', 'show', name, 'joined')['output_value'] == 'hi-3'
    assert cli.run('stack', 'resource', 'show', name, 'a')['physical_resource_id'] == a_before

    # Replacement: update_replace makes the value change replace a.
    cli.run('stack', 'update', '-t', cli.template(replace=True), '--parameter', 'count=4',
            '--parameter', 'greeting=bye', '--wait', name)
    assert cli.run('stack', 'output', 'show', name, 'joined')['output_value'] == 'bye-4'
    assert cli.run('stack', 'resource', 'show', name, 'a')['physical_resource_id'] != a_before

    template = cli.run('stack', 'template', 'show', name)
    assert 'resources' in template

    cli.run('stack', 'delete', '--yes', '--wait', name, json_out=False)
    listed = cli.run('stack', 'list')
    assert not any(s['Stack Name'] == name for s in listed)


def test_openstack_validate_and_types(cli):
    tmpl = cli.template()
    v = cli.run('orchestration', 'template', 'validate', '-t', tmpl, '--parameter', 'count=2')
    assert 'count' in v['Parameters']
    types = cli.run('orchestration', 'resource', 'type', 'list')
    names = {t['Resource Type'] for t in types}
    assert {'OS::Heat::None', 'OS::Heat::TestResource', 'OS::Heat::RandomString', 'OS::Heat::Value'} <= names
    p = subprocess.run([OPENSTACK, 'stack', 'create', '-t', tmpl, '--parameter', 'count=9', 'bad-%s' % uuid.uuid4().hex[:4]],
                       env=cli.env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "Parameter 'count' is invalid: 9 is out of range (min: 1, max: 5)" in p.stderr, p.stderr


def wait_for_stack_status(cli, name, status, timeout=60):
    deadline = time.time() + timeout
    while True:
        shown = cli.run('stack', 'show', name)
        if shown['stack_status'] == status:
            return shown
        assert not shown['stack_status'].endswith('_FAILED'), shown['stack_status_reason']
        assert time.time() < deadline, 'waiting for %s, stack is %s' % (status, shown['stack_status'])
        time.sleep(0.3)


def test_openstack_stack_snapshot_restore(cli):
    name = 'snap-%s' % uuid.uuid4().hex[:6]
    cli.run('stack', 'create', '-t', cli.template(), '--parameter', 'count=2', '--wait', name)
    secret = cli.run('stack', 'resource', 'show', name, 'secret')['physical_resource_id']

    created = cli.run('stack', 'snapshot', 'create', '--name', 'first', name)
    assert set(created) == {'ID', 'name', 'action', 'status', 'status_reason', 'data', 'creation_time'}
    assert (created['name'], created['action'], created['status']) == ('first', 'CREATE', 'IN_PROGRESS')
    snapshot_id = created['ID']
    wait_for_stack_status(cli, name, 'SNAPSHOT_COMPLETE')

    listed = cli.run('stack', 'snapshot', 'list', name)
    assert [(s['id'], s['name'], s['status']) for s in listed] == [(snapshot_id, 'first', 'COMPLETE')]
    assert set(listed[0]) == {'id', 'name', 'action', 'status', 'status_reason', 'creation_time'}
    shown = cli.run('stack', 'snapshot', 'show', name, snapshot_id)['snapshot']
    assert shown['status_reason'] == 'Stack SNAPSHOT completed successfully'
    assert set(shown['data']['resources']) == {'a', 'b', 'secret'}
    assert shown['data']['resources']['a']['resource_data']['value'] == 'hello'

    # An update changes the output; the restore brings the snapshot's back.
    cli.run('stack', 'update', '-t', cli.template(), '--parameter', 'count=4',
            '--parameter', 'greeting=bye', '--wait', name)
    assert cli.run('stack', 'output', 'show', name, 'joined')['output_value'] == 'bye-4'
    cli.run('stack', 'snapshot', 'restore', name, snapshot_id, json_out=False)
    restored = wait_for_stack_status(cli, name, 'RESTORE_COMPLETE')
    assert restored['stack_status_reason'] == 'Stack RESTORE completed successfully'
    assert restored['parameters']['count'] == '2'
    assert cli.run('stack', 'output', 'show', name, 'joined')['output_value'] == 'hello-2'
    assert cli.run('stack', 'resource', 'show', name, 'secret')['physical_resource_id'] == secret

    cli.run('stack', 'snapshot', 'delete', '--yes', name, snapshot_id, json_out=False)
    assert cli.run('stack', 'snapshot', 'list', name) == []
    p = subprocess.run([OPENSTACK, 'stack', 'snapshot', 'show', name, snapshot_id],
                       env=cli.env, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert 'Snapshot ID <%s> not found for stack <%s>' % (snapshot_id, name) in p.stderr, p.stderr
    cli.run('stack', 'delete', '--yes', '--wait', name, json_out=False)
