#!/usr/bin/env python3
"""A live Nova cloud on this machine, with keelson (or Python Placement) as
its Placement service. Run it with the cloud venv's python (./setup makes
it; ./run uses this module for the flows).

  cloud.py [--placement keelson|python] [--computes 5] [--nodes 10]
           [--neutron real|stub] [--cinder] [--swift]
           [--orchestration heat|keelson]

starts the cloud, prints its endpoints and admin credentials, and serves
until Ctrl-C; then stops everything and drops what it made.

What runs (every process on a free loopback port, logs in one temporary
directory):
- Keystone 30.0.0 (tests/lib/keystone_serve.py: MariaDB, fernet), with the
  service users nova, glance, neutron and placement (roles admin and
  service in project `service`) and the catalog of the four services
  (orchestration.py adds Heat's);
- Glance 33.0.0 (glance-api under cheroot, file store);
- Nova 34.0.0: nova-api (the osapi_compute WSGI app under cheroot),
  nova-conductor and nova-scheduler (one worker each; scheduler.py times
  each select_destinations), and COMPUTES nova-compute processes with the
  fake driver, NODES nodes each (compute.py), plus one with a single node
  (the live migrations' destination: see nodes_of), in cell1 (plus cell0);
- Placement: keelson as three processes, `gateway`, `inventory` and
  `candidates` (Keystone auth), or Python Placement 16.0.0 under cheroot
  (tests/reference/placement/serve), both on MariaDB;
- Neutron 29.0.0 (network.py: neutron-server with ML2/Open vSwitch and
  the Open vSwitch agent of the single-node compute on Open vSwitch's
  userspace datapath; Nova's computes plug ports as libvirt would,
  compute.py); with --neutron stub, neutron_stub.py instead (for a machine
  without Open vSwitch; what it fakes: its docstring);
- with --cinder, Cinder 29.0.0 on its NFS driver (volumes.py);
- with --swift, Swift (a proxy and one account, container and object
  server, Keystone auth and temporary URLs: object_store.py), in the
  catalog as object-store;
- with --orchestration, the real Heat 27.0.1 or keelson's stack engine
  (orchestration.py), in the catalog as orchestration.

Shared services of the machine: MariaDB 127.0.0.1:3306 (databases
kc_<run>_keystone, _nova_api, _nova, _nova_cell0, _glance, _placement,
_neutron, _cinder, _heat or _orchestration) and RabbitMQ
127.0.0.1:5672 (vhost kc_<run>). Cloud.stop() kills every process and
drops the databases, the vhost, the Open vSwitch devices and the
temporary directory, whatever happened before.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
from launch import free_port, write_conf  # noqa: E402
VENV = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
BIN = os.path.join(VENV, 'bin')
MYSQL_HOST, MYSQL_PORT = '127.0.0.1', 3306
RABBIT = '127.0.0.1:5672'
ADMIN_PASSWORD = 'cloud-admin-secret'
SERVICE_PASSWORD = 'cloud-service-secret'
REGION = 'RegionOne'


def http(method, url, body=None, headers=None, timeout=60):
    """One HTTP call: (status, headers, decoded JSON or text or None)."""
    h = {'Accept': 'application/json'}
    h.update(headers or {})
    data = None
    if body is not None:
        if isinstance(body, bytes):
            data = body
        else:
            data = json.dumps(body).encode()
            h.setdefault('Content-Type', 'application/json')
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, rh, raw = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, rh, raw = e.code, e.headers, e.read()
    try:
        answer = json.loads(raw) if raw else None
    except ValueError:
        answer = raw.decode('utf-8', 'replace')
    return status, rh, answer


def wait_http(url, proc, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.p.poll() is not None:
            raise RuntimeError('%s exited early:\n%s' % (proc.name, proc.tail()))
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except urllib.error.HTTPError:
            return
        except Exception:
            time.sleep(0.3)
    raise RuntimeError('%s did not answer on %s in %ss:\n%s' % (proc.name, url, timeout, proc.tail()))


def wait_until(probe, timeout, what, interval=1.0):
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError('timed out (%ss) waiting for %s' % (timeout, what))
        time.sleep(interval)


class Proc:
    """One process of the cloud (its own process group), logging to a file."""

    def __init__(self, name, args, log_dir, env=None, cwd=None):
        self.name, self.args, self.env, self.cwd = name, args, env, cwd
        self.log_path = os.path.join(log_dir, name + '.log')
        self.p = None
        self.start()

    def start(self):
        full_env = dict(os.environ)
        full_env.update(self.env or {})
        log = open(self.log_path, 'ab')
        self.p = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=self.cwd,
                                  start_new_session=True)
        log.close()

    def kill(self, sig=signal.SIGKILL, grace=3):
        """Signals the whole process group (oslo.service forks workers),
        then SIGKILLs whatever is left of it after `grace` seconds."""
        for s in (sig, signal.SIGKILL):
            try:
                os.killpg(self.p.pid, s)
            except ProcessLookupError:
                break
            try:
                self.p.wait(grace)
            except subprocess.TimeoutExpired:
                pass

    def stop(self):
        if self.p is not None:
            self.kill(signal.SIGTERM)

    def rss_kib(self):
        """Resident memory of the process group, KiB."""
        total = 0
        for pid in os.listdir('/proc'):
            if not pid.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % pid) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
                if int(fields[2]) != self.p.pid:
                    continue
                with open('/proc/%s/status' % pid) as f:
                    for line in f:
                        if line.startswith('VmRSS:'):
                            total += int(line.split()[1])
            except (OSError, IndexError, ValueError):
                continue
        return total

    def tail(self, n=4000):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read()[-n:].decode('utf-8', 'replace')
        except OSError:
            return ''


def mysql(*statements):
    import pymysql
    conn = pymysql.connect(host=MYSQL_HOST, port=MYSQL_PORT, user='root', password='')
    try:
        with conn.cursor() as cur:
            for s in statements:
                cur.execute(s)
    finally:
        conn.close()


# A cloud's services pool their connections (Nova's API, conductor,
# scheduler and computes, Neutron's workers, the orchestration engines):
# together they pass MariaDB's default limit of 151 under a burst of boots,
# and a service then fails with "Too many connections" (1040). Production
# clouds run MariaDB with thousands; the cloud raises the machine's limit
# to this when it is lower (the setting lasts until MariaDB restarts).
MYSQL_MIN_CONNECTIONS = 1000


def ensure_mysql_connections():
    import pymysql
    conn = pymysql.connect(host=MYSQL_HOST, port=MYSQL_PORT, user='root', password='')
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.max_connections")
            (limit,) = cur.fetchone()
            if int(limit) < MYSQL_MIN_CONNECTIONS:
                cur.execute('SET GLOBAL max_connections = %d' % MYSQL_MIN_CONNECTIONS)
    finally:
        conn.close()


def rabbitmqctl(*args):
    subprocess.run(['rabbitmqctl', *args], check=True, capture_output=True, timeout=120)


class Cloud:
    """The whole cloud; start() brings it up, stop() always cleans up."""
    venv, bin, python, here = VENV, BIN, sys.executable, HERE

    def __init__(self, placement='keelson', computes=5, nodes=10, keelson_bin=None, log=print, neutron='real',
                 orchestration=None, cinder=False, swift=False):
        assert placement in ('keelson', 'python') and neutron in ('real', 'stub')
        assert orchestration in (None, 'heat', 'keelson')
        assert orchestration != 'keelson' or placement == 'keelson', "keelson's orchestration runs in its gateway"
        self.placement_kind, self.computes, self.nodes = placement, computes, nodes
        self.neutron_kind = neutron
        self.keelson_bin = keelson_bin or os.environ.get('KEELSON_BIN') or os.path.join(ROOT, 'target', 'release',
                                                                                        'keelson')
        self.log = log
        self.run_id = '%06x' % random.randrange(16 ** 6)
        self.dir = tempfile.mkdtemp(prefix='kc-%s-' % self.run_id)
        self.vhost = 'kc_%s' % self.run_id
        self.databases = []
        self.procs = {}
        self.vhost_made = False
        self.ports = {name: free_port() for name in (
            'keystone', 'glance', 'nova', 'neutron', 'placement', 'inventory', 'candidates', 'orchestration',
            'engine', 'openflow', 'heat-api', 'heat-api-cfn', 'cinder', 'swift', 'swift-account',
            'swift-container', 'swift-object')}
        self.url = {
            'keystone': 'http://127.0.0.1:%d' % self.ports['keystone'],
            'glance': 'http://127.0.0.1:%d' % self.ports['glance'],
            'nova': 'http://127.0.0.1:%d/v2.1' % self.ports['nova'],
            'neutron': 'http://127.0.0.1:%d' % self.ports['neutron'],
            'placement': 'http://127.0.0.1:%d' % self.ports['placement'],
        }
        self.tokens = {}
        self.projects = {}
        # Extra sections of glance-api.conf (heat_types.py: web-download from loopback).
        self.glance_options = {}
        # Extra options of nova.conf by section (a cloud of one compute
        # resizes on its own host).
        self.nova_options = {}
        self.network = None
        if neutron == 'real':
            from network import Neutron
            self.network = Neutron(self)
        self.volumes = None
        if cinder:
            from volumes import Cinder
            self.volumes = Cinder(self)
        self.object_store = None
        if swift:
            from object_store import ObjectStore
            self.object_store = ObjectStore(self)
        self.orchestration = None
        if orchestration:
            from orchestration import Orchestration
            self.orchestration = Orchestration(self, orchestration)

    # -- plumbing -----------------------------------------------------------------------------------------------
    def database(self, name):
        db = 'kc_%s_%s' % (self.run_id, name)
        mysql('DROP DATABASE IF EXISTS `%s`' % db, 'CREATE DATABASE `%s` CHARACTER SET utf8mb4' % db)
        self.databases.append(db)
        return 'mysql+pymysql://root@%s:%d/%s?charset=utf8mb4' % (MYSQL_HOST, MYSQL_PORT, db)

    def transport_url(self):
        return 'rabbit://guest:guest@%s/%s' % (RABBIT, self.vhost)

    def spawn(self, name, args, **kw):
        self.procs[name] = Proc(name, args, self.dir, **kw)
        return self.procs[name]

    def run(self, name, args, timeout=600, ok=(0,)):
        """A one-shot command (nova-manage ...); its output goes to the log."""
        with open(os.path.join(self.dir, name + '.log'), 'ab') as log:
            rc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, cwd=self.dir).returncode
        if rc not in ok:
            with open(os.path.join(self.dir, name + '.log'), 'rb') as f:
                raise RuntimeError('%s exited %d:\n%s' % (' '.join(args), rc, f.read()[-4000:].decode('utf-8', 'replace')))
        return rc

    def authtoken(self, user):
        return {'www_authenticate_uri': self.url['keystone'] + '/v3', 'auth_url': self.url['keystone'] + '/v3',
                'auth_type': 'password', 'username': user, 'password': SERVICE_PASSWORD, 'project_name': 'service',
                'user_domain_name': 'Default', 'project_domain_name': 'Default', 'region_name': REGION}

    def service_client(self, user):
        """Options of a keystoneauth client section ([placement], [glance]...)."""
        opts = self.authtoken(user)
        del opts['www_authenticate_uri']
        opts['valid_interfaces'] = 'public'
        return opts

    # -- Keystone -----------------------------------------------------------------------------------------------
    def token(self, project='admin', user='admin', password=ADMIN_PASSWORD):
        key = (user, project)
        if key not in self.tokens:
            status, headers, answer = http('POST', self.url['keystone'] + '/v3/auth/tokens?nocatalog', {'auth': {
                'identity': {'methods': ['password'], 'password': {'user': {
                    'name': user, 'domain': {'id': 'default'}, 'password': password}}},
                'scope': {'project': {'name': project, 'domain': {'id': 'default'}}}}})
            if status != 201:
                raise RuntimeError('keystone token: %s %s' % (status, answer))
            self.tokens[key] = headers['X-Subject-Token']
        return self.tokens[key]

    def keystone(self, method, path, body=None):
        status, _, answer = http(method, self.url['keystone'] + path, body, {'X-Auth-Token': self.token()})
        if status >= 300:
            raise RuntimeError('keystone %s %s: %s %s' % (method, path, status, answer))
        return answer

    def start_keystone(self):
        d = os.path.join(self.dir, 'keystone')
        os.makedirs(d)
        conf = write_conf(os.path.join(d, 'keystone.conf'), {
            'DEFAULT': {'use_stderr': 'true'},
            # MariaDB: on SQLite, concurrent logins of the services at
            # start-up failed with `database is locked` (HTTP 500) on a
            # loaded machine, and a nova-conductor that gets one exits.
            'database': {'connection': self.database('keystone')},
            'token': {'provider': 'fernet', 'expiration': '14400'},
            'fernet_tokens': {'key_repository': os.path.join(d, 'fernet-keys')},
            'fernet_receipts': {'key_repository': os.path.join(d, 'fernet-keys')},
            'credential': {'key_repository': os.path.join(d, 'credential-keys')},
            'identity': {'password_hash_rounds': '4'},
            'cache': {'enabled': 'true', 'backend': 'dogpile.cache.memory'},
        })
        proc = self.spawn('keystone', [sys.executable, os.path.join(ROOT, 'tests', 'lib', 'keystone_serve.py'), conf,
                                       str(self.ports['keystone']), ADMIN_PASSWORD], cwd=d)
        wait_http(self.url['keystone'] + '/v3', proc)
        roles = {r['name']: r['id'] for r in self.keystone('GET', '/v3/roles')['roles']}
        for name in ('admin', 'service', 'demo', 'tenant-a', 'tenant-b'):
            found = self.keystone('GET', '/v3/projects?name=%s' % name)['projects']
            self.projects[name] = found[0]['id'] if found else self.keystone(
                'POST', '/v3/projects', {'project': {'name': name, 'domain_id': 'default'}})['project']['id']
        admin = self.keystone('GET', '/v3/users?name=admin')['users'][0]['id']
        for project in ('demo', 'tenant-a', 'tenant-b'):
            self.keystone('PUT', '/v3/projects/%s/users/%s/roles/%s' % (self.projects[project], admin, roles['admin']))
        for user in ('nova', 'glance', 'neutron', 'placement'):
            uid = self.keystone('POST', '/v3/users', {'user': {
                'name': user, 'password': SERVICE_PASSWORD, 'domain_id': 'default',
                'default_project_id': self.projects['service']}})['user']['id']
            for role in ('admin', 'service'):
                self.keystone('PUT', '/v3/projects/%s/users/%s/roles/%s' % (self.projects['service'], uid, roles[role]))
        for kind, name, url in (('compute', 'nova', self.url['nova']), ('image', 'glance', self.url['glance']),
                                ('network', 'neutron', self.url['neutron']),
                                ('placement', 'placement', self.url['placement'])):
            sid = self.keystone('POST', '/v3/services', {'service': {'type': kind, 'name': name}})['service']['id']
            for interface in ('public', 'internal', 'admin'):
                self.keystone('POST', '/v3/endpoints', {'endpoint': {
                    'service_id': sid, 'interface': interface, 'url': url, 'region_id': REGION}})

    # -- Placement ----------------------------------------------------------------------------------------------
    def placement_conf(self):
        return {
            'DEFAULT': {'debug': 'false'},
            'placement_database': {'connection': self.placement_db},
            'api': {'auth_strategy': 'keystone'},
            'keystone_authtoken': self.authtoken('placement'),
        }

    def start_placement(self):
        self.placement_db = self.database('placement')
        if self.placement_kind == 'python':
            conf = write_conf(os.path.join(self.dir, 'placement.conf'), self.placement_conf())
            proc = self.spawn('placement', [os.path.join(ROOT, 'tests', 'reference', 'placement', 'serve'),
                                            '--config-file', conf, '--port', str(self.ports['placement']),
                                            '--server', 'cheroot', '--threads', '8'])
            wait_http(self.url['placement'] + '/', proc, timeout=600)
            return
        sections = self.placement_conf()
        p = self.ports
        sections['keelson'] = {
            'inventory_listen': '127.0.0.1:%d' % p['inventory'],
            'candidates_listen': '127.0.0.1:%d' % p['candidates'],
            'inventory_endpoint': 'http://127.0.0.1:%d' % p['inventory'],
            'candidates_endpoint': 'http://127.0.0.1:%d' % p['candidates'],
            # No stack engine runs: the gateway's channel to it is lazy.
            'engine_endpoints': 'http://127.0.0.1:%d' % p['engine'],
            'placement_listen': '127.0.0.1:%d' % p['placement'],
            'orchestration_listen': '127.0.0.1:%d' % p['orchestration'],
        }
        if self.orchestration and self.orchestration.kind == 'keelson':
            for name, options in self.orchestration.keelson_sections().items():
                sections.setdefault(name, {}).update(options)
        conf = write_conf(os.path.join(self.dir, 'keelson.conf'), sections)
        self.keelson_conf = conf
        self.run('keelson-db-sync', [self.keelson_bin, '--config-file', conf, 'db', 'sync'])
        for name in ('inventory', 'candidates', 'gateway'):
            self.start_keelson(name)

    def start_keelson(self, name):
        """Starts (or restarts) one keelson process and waits until it serves."""
        proc = self.procs.get('keelson-' + name)
        if proc is None:
            proc = self.spawn('keelson-' + name, [self.keelson_bin, '--config-file', self.keelson_conf, name],
                              env={'RUST_LOG': 'info'})
        else:
            proc.start()
        if name == 'gateway':
            wait_http(self.url['placement'] + '/', proc)
        else:
            port = self.ports[name]
            wait_until(lambda: proc.p.poll() is not None or socket.socket().connect_ex(('127.0.0.1', port)) == 0,
                       60, 'keelson %s on port %d' % (name, port), interval=0.2)
            if proc.p.poll() is not None:
                raise RuntimeError('keelson %s exited:\n%s' % (name, proc.tail()))

    # -- Glance -------------------------------------------------------------------------------------------------
    def start_glance(self):
        d = os.path.join(self.dir, 'glance')
        for sub in ('images', 'staging', 'tasks', 'locks'):
            os.makedirs(os.path.join(d, sub))
        conf = write_conf(os.path.join(d, 'glance-api.conf'), {
            'DEFAULT': {'use_stderr': 'true', 'enabled_backends': 'fs:file', 'workers': '1',
                        'worker_self_reference_url': self.url['glance']},
            'database': {'connection': self.database('glance')},
            'glance_store': {'default_backend': 'fs'},
            'fs': {'filesystem_store_datadir': os.path.join(d, 'images')},
            'os_glance_staging_store': {'filesystem_store_datadir': os.path.join(d, 'staging')},
            'os_glance_tasks_store': {'filesystem_store_datadir': os.path.join(d, 'tasks')},
            'keystone_authtoken': self.authtoken('glance'),
            'paste_deploy': {'flavor': 'keystone',
                             'config_file': os.path.join(VENV, 'etc', 'glance', 'glance-api-paste.ini')},
            'oslo_concurrency': {'lock_path': os.path.join(d, 'locks')},
            **self.glance_options,
        })
        self.run('glance-manage', [os.path.join(BIN, 'glance-manage'), '--config-file', conf, 'db_sync'])
        proc = self.spawn('glance-api', [sys.executable, os.path.join(HERE, 'wsgi_serve.py'), 'glance',
                                         str(self.ports['glance']), conf], cwd=d)
        wait_http(self.url['glance'] + '/', proc)

    def upload_image(self):
        headers = {'X-Auth-Token': self.token()}
        status, _, image = http('POST', self.url['glance'] + '/v2/images', {
            'name': 'cloud-test', 'disk_format': 'raw', 'container_format': 'bare', 'visibility': 'public'}, headers)
        if status != 201:
            raise RuntimeError('glance image create: %s %s' % (status, image))
        status, _, answer = http('PUT', self.url['glance'] + '/v2/images/%s/file' % image['id'], b'\0' * 4096,
                                 dict(headers, **{'Content-Type': 'application/octet-stream'}))
        if status != 204:
            raise RuntimeError('glance image upload: %s %s' % (status, answer))
        self.image = image['id']

    # -- Nova ---------------------------------------------------------------------------------------------------
    def nova_sections(self):
        d = os.path.join(self.dir, 'nova')
        return {
            'DEFAULT': {
                'use_stderr': 'true', 'debug': 'false', 'state_path': d,
                'transport_url': self.transport_url(),
                'compute_driver': 'fake.FakeLiveMigrateDriver',
                # No ports, so no network info cache to heal.
                'heal_instance_info_cache_interval': '-1',
                'instance_usage_audit': 'false',
                # scheduler_instance_sync_interval is not set: Nova reads it
                # when its compute manager is imported, before the
                # configuration, so the syncs come every 120 s whatever it
                # says (flows.py wait_scheduler_current waits for one).
            },
            'api': {'auth_strategy': 'keystone'},
            'wsgi': {'api_paste_config': os.path.join(d, 'api-paste.ini')},
            'api_database': {'connection': self.nova_api_db},
            'database': {'connection': self.nova_cell1_db},
            'keystone_authtoken': self.authtoken('nova'),
            'placement': self.service_client('placement'),
            'glance': self.service_client('glance'),
            'neutron': self.service_client('neutron'),
            # As a production compute: a server's ports are plugged and Nova
            # waits for Neutron's network-vif-plugged before the server is
            # ACTIVE (compute.py plugs them, the fake driver does not).
            'os_vif_ovs': {},
            'vif_plug_ovs_privileged': {'helper_command': os.path.join(BIN, 'privsep-helper')},
            'service_user': dict(self.service_client('nova'), send_service_user_token='true'),
            # Tenant isolation through Placement aggregates; Nova 34's
            # availability-zone pre-filter needs no option.
            'scheduler': {'workers': '1', 'discover_hosts_in_cells_interval': '-1',
                          'limit_tenants_to_placement_aggregate': 'true'},
            'filter_scheduler': {'host_subset_size': '1'},
            'conductor': {'workers': '1'},
            'quota': {'instances': '-1', 'cores': '-1', 'ram': '-1', 'server_groups': '-1',
                      'server_group_members': '-1'},
            # Shelving offloads at once.
            'compute': {'shelved_offload_time': '0'},
            'oslo_concurrency': {'lock_path': os.path.join(d, 'locks')},
            'oslo_messaging_notifications': {'driver': 'noop'},
            'oslo_policy': {'enforce_new_defaults': 'true', 'enforce_scope': 'true'},
        }

    def nova_conf_sections(self):
        sections = self.nova_sections()
        sections['DEFAULT'].update({'vif_plugging_is_fatal': 'true', 'vif_plugging_timeout': '120'})
        for service in (self.network, self.volumes):
            for name, options in (service.nova_sections() if service else {}).items():
                sections.setdefault(name, {}).update(options)
        for name, options in self.nova_options.items():
            sections.setdefault(name, {}).update(options)
        return sections

    def start_nova(self):
        os.makedirs(os.path.join(self.dir, 'nova', 'locks'))
        shutil.copy(os.path.join(VENV, 'etc', 'nova', 'api-paste.ini'), os.path.join(self.dir, 'nova'))
        self.nova_api_db = self.database('nova_api')
        self.nova_cell1_db = self.database('nova')
        cell0 = self.database('nova_cell0')
        self.nova_conf = write_conf(os.path.join(self.dir, 'nova', 'nova.conf'), self.nova_conf_sections())
        manage = [os.path.join(BIN, 'nova-manage'), '--config-file', self.nova_conf]
        self.nova_manage = manage
        self.run('nova-manage', manage + ['api_db', 'sync'])
        self.run('nova-manage', manage + ['cell_v2', 'map_cell0', '--database_connection', cell0])
        self.run('nova-manage', manage + ['cell_v2', 'create_cell', '--name', 'cell1', '--verbose'])
        self.run('nova-manage', manage + ['db', 'sync'])
        api = self.spawn('nova-api', [sys.executable, os.path.join(HERE, 'wsgi_serve.py'), 'nova',
                                      str(self.ports['nova']), self.nova_conf])
        self.spawn('nova-conductor', [os.path.join(BIN, 'nova-conductor'), '--config-file', self.nova_conf])
        self.spawn('nova-scheduler', [sys.executable, os.path.join(HERE, 'scheduler.py'), '--config-file',
                                      self.nova_conf])
        for i in range(self.computes + 1):
            self.start_compute(i)
        wait_http(self.url['nova'] + '/', api)

    def compute_conf(self, i):
        host = 'cmp%d' % i
        state = os.path.join(self.dir, 'nova', host)
        sections = self.nova_conf_sections()
        # A compute reaches the databases only through the conductor.
        del sections['api_database'], sections['database']
        sections['DEFAULT'].update({'host': host, 'state_path': state, 'instances_path': os.path.join(state, 'i')})
        sections['oslo_concurrency']['lock_path'] = os.path.join(state, 'locks')
        return write_conf(os.path.join(self.dir, 'nova', host + '.conf'), sections)

    def start_compute(self, i):
        name = 'nova-compute-%d' % i
        if name in self.procs:
            self.procs[name].start()
            return
        os.makedirs(os.path.join(self.dir, 'nova', 'cmp%d' % i, 'locks'), exist_ok=True)
        self.spawn(name, [sys.executable, os.path.join(HERE, 'compute.py'), str(self.nodes_of(i)), '--config-file',
                          self.compute_conf(i)])

    def nodes_of(self, i):
        """Nodes of compute i: the last one has a single node, as a live
        migration's destination must (Nova's live migration takes a host's
        first node as the instance's node; multi-node hosts are Ironic's,
        which does not live-migrate)."""
        return 1 if i == self.computes else self.nodes

    def nova(self, method, path, body=None, project='admin', ok=(200, 201, 202, 204), microversion='2.90'):
        status, headers, answer = http(method, self.url['nova'] + path, body, {
            'X-Auth-Token': self.token(project), 'OpenStack-API-Version': 'compute %s' % microversion})
        if ok and status not in ok:
            raise RuntimeError('nova %s %s: %s %s' % (method, path, status, answer))
        return answer if ok else (status, answer)

    def neutron(self, method, path, body=None, project='admin', ok=(200, 201, 204)):
        status, _, answer = http(method, self.url['neutron'] + path, body, {'X-Auth-Token': self.token(project)})
        if ok and status not in ok:
            raise RuntimeError('neutron %s %s: %s %s' % (method, path, status, answer))
        return answer if ok else (status, answer)

    def placement(self, method, path, body=None, microversion='1.39'):
        status, _, answer = http(method, self.url['placement'] + path, body, {
            'X-Auth-Token': self.token(), 'OpenStack-API-Version': 'placement %s' % microversion})
        if status >= 300:
            raise RuntimeError('placement %s %s: %s %s' % (method, path, status, answer))
        return answer

    def discover(self):
        """Maps every compute host into cell1 and waits for all nodes."""
        total = self.computes * self.nodes + 1

        def all_nodes():
            self.run('nova-manage', self.nova_manage + ['cell_v2', 'discover_hosts'])
            hypervisors = self.nova('GET', '/os-hypervisors')['hypervisors']
            up = [h for h in hypervisors if h.get('state') == 'up']
            return len(up) >= total and len(self.placement('GET', '/resource_providers')['resource_providers']) >= total
        wait_until(all_nodes, 600, '%d nodes in Nova and Placement' % total, interval=5)

    # -- whole cloud --------------------------------------------------------------------------------------------
    def start(self):
        if self.network:
            self.network.lock_machine()
        t = time.monotonic()
        ensure_mysql_connections()
        rabbitmqctl('add_vhost', self.vhost)
        self.vhost_made = True
        rabbitmqctl('set_permissions', '-p', self.vhost, 'guest', '.*', '.*', '.*')
        if not self.network:
            self.neutron_log = os.path.join(self.dir, 'neutron-requests.log')
            stub = self.spawn('neutron-stub', [sys.executable, os.path.join(HERE, 'neutron_stub.py'),
                                               str(self.ports['neutron']), self.neutron_log])
        self.start_keystone()
        self.start_placement()
        if self.network:
            self.network.start_server()
        else:
            wait_http(self.url['neutron'] + '/', stub)
        self.start_glance()
        self.upload_image()
        if self.volumes:
            self.volumes.start()
        if self.object_store:
            self.object_store.start()
        self.start_nova()
        self.discover()
        if self.network:
            self.network.start_agent()
        if self.orchestration:
            self.orchestration.start()
        self.log('cloud: up in %.0f s (%s placement, %s neutron, %s orchestration, %d computes x %d nodes + 1 x 1), '
                 'logs in %s' % (time.monotonic() - t, self.placement_kind, self.neutron_kind,
                                 self.orchestration.kind if self.orchestration else 'no', self.computes, self.nodes,
                                 self.dir))

    def rss_mib(self):
        return {name: proc.rss_kib() / 1024 for name, proc in self.procs.items()}

    def stop(self, keep_logs=None):
        if self.network:
            self.network.remove_devices()
        for proc in reversed(list(self.procs.values())):
            try:
                proc.stop()
            except Exception as e:  # keep cleaning up
                self.log('cloud: stopping %s: %s' % (proc.name, e))
        if self.network:
            self.network.remove_devices()
        if self.volumes:
            self.volumes.unmount()
        if self.network:
            self.network.unlock_machine()
        for db in self.databases:
            try:
                mysql('DROP DATABASE IF EXISTS `%s`' % db)
            except Exception as e:
                self.log('cloud: dropping %s: %s' % (db, e))
        if self.vhost_made:
            try:
                rabbitmqctl('delete_vhost', self.vhost)
            except Exception as e:
                self.log('cloud: deleting vhost %s: %s' % (self.vhost, e))
        if keep_logs:
            os.makedirs(keep_logs, exist_ok=True)
            for name in os.listdir(self.dir):
                if name.endswith('.log'):
                    shutil.copy(os.path.join(self.dir, name), keep_logs)
        shutil.rmtree(self.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--placement', choices=('keelson', 'python'), default='keelson')
    ap.add_argument('--computes', type=int, default=5)
    ap.add_argument('--nodes', type=int, default=10)
    ap.add_argument('--neutron', choices=('real', 'stub'), default='real')
    ap.add_argument('--cinder', action='store_true', help='Cinder with the NFS driver (volumes.py)')
    ap.add_argument('--swift', action='store_true', help='Swift as object-store (object_store.py)')
    ap.add_argument('--orchestration', choices=('heat', 'keelson'),
                    help="the real Heat 27.0.1, or keelson's engine behind its gateway (orchestration.py)")
    args = ap.parse_args()
    # SIGTERM as Ctrl-C: an exception, so that the clean-up runs.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    cloud = Cloud(args.placement, args.computes, args.nodes, neutron=args.neutron, orchestration=args.orchestration,
                  cinder=args.cinder, swift=args.swift)
    try:
        cloud.start()
        print('nova %s  keystone %s/v3  placement %s  admin/%s' % (
            cloud.url['nova'], cloud.url['keystone'], cloud.url['placement'], ADMIN_PASSWORD), flush=True)
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cloud.stop()


if __name__ == '__main__':
    main()
