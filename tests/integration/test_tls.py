"""Mutual TLS inside the mesh: every service as its own process with
certificates generated here by openssl (one CA for the mesh, a second,
rogue CA for an intruder). Requests through the gateway cross
gateway -> inventory, gateway -> candidates and gateway -> engine gRPC hops
over TLS, the engine registers with the controller over TLS-wrapped
Cap'n Proto, and `keelson ctl` reaches the controller with the mesh's
certificate. Clients without a certificate, with one of the rogue CA, or
speaking plaintext are refused on every internal port."""
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time

import pytest

from conftest import Proc, free_port, http, keelson_bin, wait_http, wait_port, write_conf
from heat import Heat


def openssl(*args, cwd):
    subprocess.run(['openssl', *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
            '-subj', '/CN=%s' % name, '-keyout', '%s-ca.key' % name, '-out', '%s-ca.pem' % name, cwd=d)


def make_cert(d, ca, name):
    """A certificate for `name` signed by `ca`, valid for localhost and
    127.0.0.1, usable as server and client."""
    ext = os.path.join(d, '%s.ext' % name)
    with open(ext, 'w') as f:
        f.write('subjectAltName = DNS:localhost, IP:127.0.0.1\n'
                'extendedKeyUsage = serverAuth, clientAuth\n'
                'basicConstraints = CA:FALSE\n')
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=%s' % name,
            '-keyout', '%s.key' % name, '-out', '%s.csr' % name, cwd=d)
    openssl('x509', '-req', '-in', '%s.csr' % name, '-CA', '%s-ca.pem' % ca, '-CAkey', '%s-ca.key' % ca,
            '-CAcreateserial', '-days', '2', '-extfile', ext, '-out', '%s.pem' % name, cwd=d)
    return {'tls_cert_file': os.path.join(d, '%s.pem' % name), 'tls_key_file': os.path.join(d, '%s.key' % name),
            'tls_ca_file': os.path.join(d, '%s-ca.pem' % ca)}


@pytest.fixture(scope='module')
def pki():
    if not shutil.which('openssl'):
        pytest.skip('openssl is not installed')
    d = tempfile.mkdtemp(prefix='kt-pki-')
    make_ca(d, 'mesh')
    make_ca(d, 'rogue')
    return {'dir': d, 'mesh': make_cert(d, 'mesh', 'keelson-mesh'), 'rogue': make_cert(d, 'rogue', 'intruder')}


def grpcurl():
    path = shutil.which('grpcurl') or os.path.join(os.path.dirname(os.sys.executable), 'grpcurl')
    return path if os.path.exists(path) else None


class TlsMesh:
    """controller, inventory, candidates, engine and gateway, each its own
    process, all with the mesh certificate."""

    def __init__(self, procs, pki):
        self.dir = tempfile.mkdtemp(prefix='kt-tls-')
        self.pki = pki
        tls = dict(pki['mesh'])
        placement_db = 'sqlite:///%s/placement.db' % self.dir
        self.ports = {k: free_port() for k in ('controller', 'inventory', 'candidates', 'engine', 'placement',
                                                'orchestration')}
        self.controller = '127.0.0.1:%d' % self.ports['controller']
        self.common = {
            'keelson': dict(tls,
                            inventory_listen='127.0.0.1:%d' % self.ports['inventory'],
                            candidates_listen='127.0.0.1:%d' % self.ports['candidates'],
                            engine_listen='127.0.0.1:%d' % self.ports['engine'],
                            placement_listen='127.0.0.1:%d' % self.ports['placement'],
                            orchestration_listen='127.0.0.1:%d' % self.ports['orchestration'],
                            inventory_endpoint='http://127.0.0.1:%d' % self.ports['inventory'],
                            candidates_endpoint='http://127.0.0.1:%d' % self.ports['candidates'],
                            engine_endpoints='http://127.0.0.1:%d' % self.ports['engine'],
                            data_dir=os.path.join(self.dir, 'data')),
            'placement_database': {'connection': placement_db, 'sync_on_startup': 'true'},
            'database': {'connection': 'sqlite:///%s/orchestration.db' % self.dir},
            'controller': {'name': 'c1', 'listen': self.controller, 'peers': 'c1=%s' % self.controller},
            'orchestration': {'periodic_interval': '1', 'auth_strategy': 'noauth'},
            'api': {'auth_strategy': 'noauth2'},
        }
        self.conf = write_conf(os.path.join(self.dir, 'mesh.conf'), self.common)
        self.procs = procs
        self.proc = {}
        for command in ('controller', 'inventory', 'candidates', 'engine'):
            self.proc[command] = self.start(command, self.ports[command])
        self.gateway = self.start('gateway', self.ports['placement'])
        self.placement = 'http://127.0.0.1:%d' % self.ports['placement']
        self.orchestration = 'http://127.0.0.1:%d' % self.ports['orchestration']
        wait_http(self.placement + '/', proc=self.gateway)

    def start(self, command, port):
        p = Proc([keelson_bin(), '--config-file', self.conf, command], cwd=self.dir, env={'RUST_LOG': 'keelson=info'})
        self.procs.append(p)
        wait_port(port, proc=p)
        return p

    def conf_with(self, name, keelson):
        """A configuration file for a client: the mesh's, with `keelson`
        options replaced (None removes one)."""
        sections = json.loads(json.dumps(self.common))
        for k, v in keelson.items():
            if v is None:
                sections['keelson'].pop(k, None)
            else:
                sections['keelson'][k] = v
        return write_conf(os.path.join(self.dir, name), sections)

    def ctl(self, conf, *args):
        return subprocess.run([keelson_bin(), '--config-file', conf, 'ctl', *args], capture_output=True, text=True,
                              timeout=60)


def tls_refused(port, cert=None, key=None, ca=None):
    """Whether a TLS client presenting `cert` (or none) gets refused by the
    server at `port`: the handshake fails, or (TLS 1.3, where the server
    checks the client's certificate after the client finished) the first
    read ends in an alert or a closed connection."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(['h2'])
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname='localhost') as s:
                s.sendall(b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + b'\x00\x00\x00\x04\x00\x00\x00\x00\x00')
                data = s.recv(64)
                return data == b''
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True


def plaintext_refused(port):
    """An h2c (plaintext gRPC) client gets no HTTP/2 answer from a TLS port."""
    with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
        s.sendall(b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + b'\x00\x00\x00\x04\x00\x00\x00\x00\x00')
        try:
            data = s.recv(64)
        except ConnectionResetError:
            return True
        # A TLS server answers garbage with an alert record (0x15) or closes.
        return data == b'' or data[:1] == b'\x15'


def test_mesh_runs_over_mutual_tls_and_refuses_clients_without_a_valid_certificate(procs, pki):
    mesh = TlsMesh(procs, pki)

    # Placement through the gateway: gateway -> inventory over mTLS. The
    # controller primary's duty syncs the standard classes (over its own
    # database connection) shortly after it starts.
    deadline = time.time() + 30
    while http('GET', mesh.placement + '/resource_classes/VCPU')[0] != 200 and time.time() < deadline:
        time.sleep(0.2)
    status, _, _ = http('POST', mesh.placement + '/resource_providers',
                        {'name': 'tls-node-1', 'uuid': '6f1d8b2c-9e0a-4c37-8a55-0d4f2f8f1a01'})
    assert status == 200, mesh.gateway.output()[-3000:]
    status, _, body = http('PUT', mesh.placement + '/resource_providers/6f1d8b2c-9e0a-4c37-8a55-0d4f2f8f1a01/inventories',
                        {'resource_provider_generation': 0, 'inventories': {'VCPU': {'total': 8}}})
    assert status == 200, body
    # gateway -> candidates over mTLS.
    status, _, body = http('GET', mesh.placement + '/allocation_candidates?resources=VCPU:2')
    assert status == 200 and len(body['allocation_requests']) == 1

    # Orchestration through the gateway: gateway -> engine over mTLS.
    heat = Heat(mesh.orchestration)
    ident = heat.create('tls-stack', {'heat_template_version': '2018-08-31',
                                      'resources': {'r': {'type': 'OS::Heat::RandomString'}}})
    stack = heat.wait(ident, {'CREATE_COMPLETE', 'CREATE_FAILED'})
    assert stack['stack_status'] == 'CREATE_COMPLETE', stack

    # The engine registered with the controller over TLS-wrapped Cap'n Proto.
    deadline = time.time() + 30
    engine = mesh.proc['engine']
    while 'registered with the controller' not in engine.output() and time.time() < deadline:
        time.sleep(0.2)
    assert 'registered with the controller' in engine.output(), engine.output()[-3000:]

    # keelson ctl with the mesh certificate.
    out = mesh.ctl(mesh.conf, 'ctrlstatus', '--json')
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)['responderRole'].lower() == 'primary'

    # ... and without one, or with the rogue CA's: refused.
    plain = mesh.conf_with('plain.conf', {'tls_cert_file': None, 'tls_key_file': None, 'tls_ca_file': None})
    assert mesh.ctl(plain, 'ctrlstatus').returncode != 0
    rogue = mesh.conf_with('rogue.conf', pki['rogue'])
    out = mesh.ctl(rogue, 'ctrlstatus')
    assert out.returncode != 0
    assert 'TLS handshake' in mesh.proc['controller'].output()
    # A client trusting the rogue CA only does not accept the mesh's server.
    distrust = mesh.conf_with('distrust.conf', dict(pki['mesh'], tls_ca_file=pki['rogue']['tls_ca_file']))
    assert mesh.ctl(distrust, 'ctrlstatus').returncode != 0

    # Every gRPC port: no certificate, a rogue certificate, plaintext.
    ca = pki['mesh']['tls_ca_file']
    for name in ('inventory', 'candidates', 'engine', 'controller'):
        port = mesh.ports[name]
        assert tls_refused(port, ca=ca), name
        assert tls_refused(port, pki['rogue']['tls_cert_file'], pki['rogue']['tls_key_file'], ca=ca), name
        if name != 'controller':
            assert plaintext_refused(port), name
    # The mesh's own certificate is accepted (the refusals above are about
    # the certificate, not the probe).
    assert not tls_refused(mesh.ports['inventory'], pki['mesh']['tls_cert_file'], pki['mesh']['tls_key_file'], ca=ca)

    tool = grpcurl()
    if tool:
        base = [tool, '-cacert', ca, '-servername', 'localhost']
        target = '127.0.0.1:%d' % mesh.ports['inventory']
        ok = subprocess.run(base + ['-cert', pki['mesh']['tls_cert_file'], '-key', pki['mesh']['tls_key_file'],
                                    target, 'grpc.health.v1.Health/Check'], capture_output=True, text=True, timeout=30)
        assert '"SERVING"' in ok.stdout, ok.stderr
        refused = subprocess.run(base + [target, 'grpc.health.v1.Health/Check'], capture_output=True, text=True,
                                 timeout=30)
        assert refused.returncode != 0

    # A gateway with the rogue certificate cannot reach the inventory: 503,
    # never a plaintext fallback.
    rogue_gw_port = free_port()
    rogue_conf = mesh.conf_with('rogue-gw.conf', dict(pki['rogue'], placement_listen='127.0.0.1:%d' % rogue_gw_port,
                                                     orchestration_listen='127.0.0.1:%d' % free_port()))
    gw = Proc([keelson_bin(), '--config-file', rogue_conf, 'gateway'], cwd=mesh.dir)
    procs.append(gw)
    wait_http('http://127.0.0.1:%d/' % rogue_gw_port, proc=gw)
    status, _, body = http('GET', 'http://127.0.0.1:%d/resource_providers' % rogue_gw_port)
    assert status == 503, (status, body)


def test_half_a_tls_configuration_is_refused_at_start(procs, pki):
    d = tempfile.mkdtemp(prefix='kt-tls-half-')
    conf = write_conf(os.path.join(d, 'k.conf'), {
        'keelson': {'tls_cert_file': pki['mesh']['tls_cert_file'], 'inventory_listen': '127.0.0.1:%d' % free_port()},
        'placement_database': {'connection': 'sqlite:///%s/p.db' % d, 'sync_on_startup': 'true'},
    })
    out = subprocess.run([keelson_bin(), '--config-file', conf, 'inventory'], capture_output=True, text=True,
                         timeout=60, cwd=d)
    assert out.returncode != 0
    assert 'tls_key_file, tls_ca_file' in out.stderr
