"""The foundation: the binary starts on embedded defaults, serves the
version document and gRPC reflection, propagates the request context over
the gateway -> inventory hop, manages the schema, and validates its
configuration."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import (AllInOne, BACKENDS, Proc, create_database, free_port, http, keelson_bin, new_uuid,
                      wait_http, wait_port, write_conf)


def test_all_in_one_defaults_from_a_fresh_directory(procs):
    """No configuration at all: SQLite under ./keelson-data, noauth2,
    Placement on 127.0.0.1:8778 (here moved by PLACEMENT_PORT so tests can
    run side by side)."""
    d = tempfile.mkdtemp(prefix='kt-fresh-')
    port = free_port()
    p = Proc([keelson_bin(), 'all-in-one'], env={'PLACEMENT_PORT': str(port), 'PLACEMENT_CONFIG_FILE': ''}, cwd=d)
    procs.append(p)
    wait_http('http://127.0.0.1:%d/' % port, proc=p)
    status, headers, body = http('GET', 'http://127.0.0.1:%d/' % port, token=None, version='1.0')
    assert status == 200
    assert body['versions'][0]['min_version'] == '1.0'
    assert body['versions'][0]['max_version'] == '1.39'
    assert headers['openstack-api-version'] == 'placement 1.0'
    assert headers['x-openstack-request-id'].startswith('req-')
    assert os.path.exists(os.path.join(d, 'keelson-data', 'placement.db'))
    out = p.output()
    for what in ('inventory gRPC on', 'candidates gRPC on', 'Placement API on', 'Orchestration API on'):
        assert what in out
    # SIGTERM stops every listener cleanly.
    assert p.stop() == 0
    assert 'stopped' in p.output()


def test_grpc_services_are_listed_by_reflection(procs):
    grpcurl = shutil.which('grpcurl') or os.path.join(os.path.dirname(os.sys.executable), 'grpcurl')
    if not os.path.exists(grpcurl):
        pytest.skip('grpcurl is not installed (tests/requirements.txt provides it)')
    inv_port = free_port()
    d = tempfile.mkdtemp(prefix='kt-grpc-')
    aio = AllInOne(procs, 'sqlite:///%s/p.db' % d, extra={'keelson': {'inventory_listen': '127.0.0.1:%d' % inv_port}})
    out = subprocess.run([grpcurl, '-plaintext', '127.0.0.1:%d' % inv_port, 'list'], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    services = out.stdout.split()
    for s in ('keelson.placement.v1.ResourceClasses', 'keelson.placement.v1.ResourceProviders',
              'grpc.health.v1.Health'):
        assert s in services
    assert any(s.startswith('grpc.reflection.') for s in services)
    health = subprocess.run([grpcurl, '-plaintext', '127.0.0.1:%d' % inv_port, 'grpc.health.v1.Health/Check'],
                            capture_output=True, text=True, timeout=30)
    assert '"SERVING"' in health.stdout


def test_request_id_and_trace_context_cross_the_grpc_hop(procs):
    """Gateway and inventory as separate processes: the caller's request id
    and trace id reach the inventory service's log."""
    d = tempfile.mkdtemp(prefix='kt-hop-')
    inv_port, p_port, o_port = free_port(), free_port(), free_port()
    conf = write_conf(os.path.join(d, 'k.conf'), {
        'placement_database': {'connection': 'sqlite:///%s/p.db' % d, 'sync_on_startup': 'true'},
        'api': {'auth_strategy': 'noauth2'},
        'keelson': {'inventory_listen': '127.0.0.1:%d' % inv_port,
                    'inventory_endpoint': 'http://127.0.0.1:%d' % inv_port,
                    'placement_listen': '127.0.0.1:%d' % p_port,
                    'orchestration_listen': '127.0.0.1:%d' % o_port}})
    env = {'RUST_LOG': 'info,keelson::rpc=debug'}
    inv = Proc([keelson_bin(), '--config-file', conf, 'inventory'], env=env)
    procs.append(inv)
    wait_port(inv_port, proc=inv)
    gw = Proc([keelson_bin(), '--config-file', conf, 'gateway'], env=env)
    procs.append(gw)
    wait_http('http://127.0.0.1:%d/' % p_port, proc=gw)
    request_id = 'req-' + new_uuid()
    trace_id = new_uuid().replace('-', '')
    status, headers, _ = http('GET', 'http://127.0.0.1:%d/resource_classes' % p_port, headers={
        'x-openstack-request-id': request_id, 'traceparent': '00-%s-00f067aa0ba902b7-01' % trace_id})
    assert status == 200
    assert headers['x-openstack-request-id'] == request_id
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and request_id not in inv.output():
        time.sleep(0.1)
    line = [l for l in inv.output().splitlines() if request_id in l]
    assert line, inv.output()
    assert trace_id in line[0], line[0]
    # The gateway's access log carries the same ids.
    assert any(request_id in l and trace_id in l for l in gw.output().splitlines())


@pytest.mark.parametrize('backend', BACKENDS)
def test_db_sync_version_stamp(backend):
    url = create_database(backend, 'dbcmd')
    d = tempfile.mkdtemp(prefix='kt-db-')
    conf = write_conf(os.path.join(d, 'k.conf'), {'placement_database': {'connection': url}})
    run = lambda *a: subprocess.run([keelson_bin(), '--config-file', conf, *a], capture_output=True, text=True, timeout=120)
    assert run('db', 'version').stdout.strip() == 'None'
    r = run('db', 'sync')
    assert r.returncode == 0, r.stderr
    assert 'created schema' in r.stdout
    assert run('db', 'version').stdout.strip() == 'a082b8bb98d0'
    r = run('db', 'sync')
    assert 'already at revision' in r.stdout
    assert run('status', 'upgrade', 'check').returncode == 0
    assert run('db', 'stamp', 'head').returncode == 0


def test_unknown_option_warns_and_invalid_value_refuses(tmp_path):
    conf = write_conf(str(tmp_path / 'k.conf'), {
        'placement_database': {'connection': 'sqlite:///%s/p.db' % tmp_path},
        'api': {'no_such_thing': '1'}})
    r = subprocess.run([keelson_bin(), '--config-file', conf, 'db', 'sync'], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    assert 'no_such_thing' in r.stdout + r.stderr
    bad = write_conf(str(tmp_path / 'bad.conf'), {'placement': {'allocation_conflict_retry_count': 'lots'}})
    r = subprocess.run([keelson_bin(), '--config-file', bad, 'db', 'version'], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert 'allocation_conflict_retry_count' in r.stderr and 'bad.conf' in r.stderr


def test_layer_order_is_observable(procs):
    """Authentication runs before microversion negotiation (upstream's
    order): no token and a bad version is 401, not 406."""
    d = tempfile.mkdtemp(prefix='kt-order-')
    aio = AllInOne(procs, 'sqlite:///%s/p.db' % d)
    status, _, _ = http('GET', aio.url + '/resource_providers', token=None, version='9.99')
    assert status == 401
    status, _, body = http('GET', aio.url + '/resource_providers', version='9.99')
    assert status == 406
    assert body['errors'][0]['max_version'] == '1.39'


def test_prometheus_metrics(procs):
    d = tempfile.mkdtemp(prefix='kt-metrics-')
    aio = AllInOne(procs, 'sqlite:///%s/p.db' % d)
    for _ in range(3):
        http('GET', aio.url + '/resource_classes')
    http('GET', aio.url + '/resource_classes/CUSTOM_NOPE')
    import urllib.request
    text = urllib.request.urlopen(aio.url + '/metrics', timeout=10).read().decode()
    assert 'keelson_http_requests_total{api="placement",method="GET",route="/resource_classes",status="200"} 3' in text
    assert 'route="/resource_classes/{name}",status="404"} 1' in text
    assert 'keelson_http_request_duration_seconds_bucket{' in text
