"""A mesh service that restarts costs Nova nothing.

Nova does not retry a Placement call that fails, so a claim that meets a
503 while the inventory process restarts ends the build in ERROR (seen in
tests/cloud's faults phase). Python Placement, one WSGI process, has no
such gap. keelson's gateway holds a call whose connection the service's
port refuses and dials again for up to `[keelson] redial_timeout`
seconds: the request never reached a server, so sending it again cannot
apply it twice (gateway/src/redial.rs).

Each test runs the gateway and the inventory service as separate
processes on one database, stops inventory, sends requests while its port
is closed, starts it again, and checks every request was answered as if
nothing had happened: a claim made during the outage is there exactly
once. With `redial_timeout = 0` the same outage answers 503 at once,
which shows the test outage is real. No duration is asserted."""
import os
import tempfile
import threading

import pytest

from conftest import BACKENDS, Proc, create_database, free_port, http, keelson_bin, new_uuid, wait_http, wait_port, \
    write_conf


class Mesh:
    """The gateway and inventory as two processes on one database."""

    def __init__(self, procs, db_url, redial_timeout):
        self.procs = procs
        self.dir = tempfile.mkdtemp(prefix='kt-redial-')
        self.inv_port, p_port, o_port = free_port(), free_port(), free_port()
        self.url = 'http://127.0.0.1:%d' % p_port
        self.conf = write_conf(os.path.join(self.dir, 'keelson.conf'), {
            'placement_database': {'connection': db_url, 'sync_on_startup': 'true'},
            'api': {'auth_strategy': 'noauth2'},
            'keelson': {'inventory_listen': '127.0.0.1:%d' % self.inv_port,
                        'inventory_endpoint': 'http://127.0.0.1:%d' % self.inv_port,
                        'placement_listen': '127.0.0.1:%d' % p_port,
                        'orchestration_listen': '127.0.0.1:%d' % o_port,
                        'redial_timeout': str(redial_timeout)}})
        self.start_inventory()
        gw = Proc([keelson_bin(), '--config-file', self.conf, 'gateway'], cwd=self.dir)
        procs.append(gw)
        wait_http(self.url + '/', proc=gw)

    def start_inventory(self):
        self.inventory = Proc([keelson_bin(), '--config-file', self.conf, 'inventory'], cwd=self.dir)
        self.procs.append(self.inventory)
        wait_port(self.inv_port, proc=self.inventory)

    def call(self, method, path, body=None):
        return http(method, self.url + path, body)


def database(backend):
    return create_database(backend, 'redial')


def provider_with_room(mesh):
    rp = new_uuid()
    assert mesh.call('POST', '/resource_providers', {'name': 'host-' + rp, 'uuid': rp})[0] == 200
    inventories = {'VCPU': {'total': 16}, 'MEMORY_MB': {'total': 32768}}
    status, _, body = mesh.call('PUT', '/resource_providers/%s/inventories' % rp,
                                {'resource_provider_generation': 0, 'inventories': inventories})
    assert status == 200, body
    return rp


@pytest.mark.parametrize('backend', BACKENDS)
def test_requests_during_a_restart_of_inventory_are_answered_once_it_is_back(procs, backend):
    mesh = Mesh(procs, database(backend), redial_timeout=60)
    rp = provider_with_room(mesh)
    # The port is closed from here until start_inventory below.
    mesh.inventory.stop()
    consumer = new_uuid()
    claim = {'allocations': {rp: {'resources': {'VCPU': 2, 'MEMORY_MB': 2048}}},
             'project_id': new_uuid(), 'user_id': new_uuid(), 'consumer_generation': None,
             'consumer_type': 'INSTANCE'}
    answers = {}
    requests = {
        'claim': ('PUT', '/allocations/' + consumer, claim),
        'providers': ('GET', '/resource_providers?resources=VCPU:1', None),
        'usages': ('GET', '/resource_providers/%s/usages' % rp, None),
    }

    def send(name):
        method, path, body = requests[name]
        answers[name] = mesh.call(method, path, body)
    threads = [threading.Thread(target=send, args=(name,)) for name in requests]
    for t in threads:
        t.start()
    # Every request is held by the gateway (none has an answer) until
    # inventory is back: the join with a timeout returns while they wait.
    for t in threads:
        t.join(timeout=1)
    assert answers == {}, answers
    mesh.start_inventory()
    for t in threads:
        t.join(timeout=60)
    assert {name: a[0] for name, a in answers.items()} == {'claim': 204, 'providers': 200, 'usages': 200}, answers
    assert [p['uuid'] for p in answers['providers'][2]['resource_providers']] == [rp]
    status, _, body = mesh.call('GET', '/allocations/' + consumer)
    assert status == 200 and body['allocations'][rp]['resources'] == {'VCPU': 2, 'MEMORY_MB': 2048}, body
    # The claim landed once: the provider's usage is the one claim.
    status, _, body = mesh.call('GET', '/resource_providers/%s/usages' % rp)
    assert body['usages'] == {'VCPU': 2, 'MEMORY_MB': 2048}, body


def test_without_a_redial_window_the_outage_answers_503(procs):
    mesh = Mesh(procs, database('sqlite'), redial_timeout=0)
    provider_with_room(mesh)
    mesh.inventory.stop()
    status, _, body = mesh.call('GET', '/resource_providers')
    assert status == 503, body
    mesh.start_inventory()
    assert mesh.call('GET', '/resource_providers')[0] == 200
