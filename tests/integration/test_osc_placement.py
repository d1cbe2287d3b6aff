"""The real `openstack` CLI with osc-placement (PyPI) drives keelson."""
import json
import os
import subprocess
import sys
import tempfile

import pytest

from conftest import AllInOne, new_uuid

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')


def osc(url, *args):
    cmd = [OPENSTACK, '--os-auth-type', 'admin_token', '--os-endpoint', url, '--os-token', 'admin',
           '--os-placement-api-version', '1.39', *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, '%s\n%s%s' % (' '.join(args), r.stdout, r.stderr)
    return json.loads(r.stdout) if '-f' in args and 'json' in args else r.stdout


@pytest.mark.skipif(not os.path.exists(OPENSTACK), reason='python-openstackclient is not installed')
def test_openstack_cli_drives_keelson(procs):
    d = tempfile.mkdtemp(prefix='kt-osc-')
    url = AllInOne(procs, 'sqlite:///%s/p.db' % d).url
    rp = osc(url, 'resource', 'provider', 'create', 'cli-node', '-f', 'json')
    uuid = rp['uuid']
    osc(url, 'resource', 'provider', 'inventory', 'set', uuid, '--resource', 'VCPU=8', '--resource', 'MEMORY_MB=2048',
        '-f', 'json')
    inv = osc(url, 'resource', 'provider', 'inventory', 'list', uuid, '-f', 'json')
    assert {i['resource_class']: i['total'] for i in inv} == {'VCPU': 8, 'MEMORY_MB': 2048}
    osc(url, 'trait', 'create', 'CUSTOM_CLI')
    osc(url, 'resource', 'provider', 'trait', 'set', uuid, '--trait', 'CUSTOM_CLI', '--trait', 'HW_CPU_X86_AVX2', '-f', 'json')
    traits = osc(url, 'resource', 'provider', 'trait', 'list', uuid, '-f', 'json')
    assert sorted(t['name'] for t in traits) == ['CUSTOM_CLI', 'HW_CPU_X86_AVX2']
    agg = new_uuid()
    gen = osc(url, 'resource', 'provider', 'show', uuid, '-f', 'json')['generation']
    osc(url, 'resource', 'provider', 'aggregate', 'set', uuid, '--aggregate', agg, '--generation', str(gen), '-f', 'json')
    aggs = osc(url, 'resource', 'provider', 'aggregate', 'list', uuid, '-f', 'json')
    assert [a['uuid'] for a in aggs] == [agg]
    consumer = new_uuid()
    osc(url, 'resource', 'provider', 'allocation', 'set', consumer, '--allocation', 'rp=%s,VCPU=2,MEMORY_MB=512' % uuid,
        '--project-id', 'proj', '--user-id', 'user', '--consumer-type', 'INSTANCE', '-f', 'json')
    usage = osc(url, 'resource', 'provider', 'usage', 'show', uuid, '-f', 'json')
    assert {u['resource_class']: u['usage'] for u in usage} == {'VCPU': 2, 'MEMORY_MB': 512}
    total = osc(url, 'resource', 'usage', 'show', 'proj', '-f', 'json')
    # From 1.38 usages are grouped by consumer type.
    assert {u['resource_class']: u['usage'] for u in total} == {
        'INSTANCE': {'VCPU': 2, 'MEMORY_MB': 512, 'consumer_count': 1}}
    osc(url, 'resource', 'provider', 'allocation', 'delete', consumer)
    osc(url, 'resource', 'provider', 'delete', uuid)
    listed = osc(url, 'resource', 'provider', 'list', '-f', 'json')
    assert listed == []
