"""Orchestration for the live cloud (cloud.py --orchestration heat|keelson):
the real Heat 27.0.1 (the openstack-heat package that
tests/reference/heat/setup installs, in its own virtualenv) or keelson's
stack engine behind its gateway, with Keystone auth, in the catalog as
`orchestration` (and Heat's CloudFormation API as `cloudformation`).

What Keystone gets (both kinds, so that one configuration of the tests
fits both): the service user `heat` (admin and service in project
`service`), the roles `heat_stack_owner` and `heat_stack_user`, the stack
user domain `heat` and its admin `heat_domain_admin` (admin on the
domain), and the tests' users: `heat-tester` (member and
heat_stack_owner in project `demo`) beside the cloud's admin.

heat: heat-api (`heat-wsgi-api`) and heat-api-cfn (`heat-wsgi-api-cfn`),
each the package's WSGI script on a loopback port, and two heat-engine
processes (one engine worker each), on MariaDB (`kc_<run>_heat`) and the
run's RabbitMQ vhost; the convergence engine, `deferred_auth_method =
trusts` (the `heat` user is the trustee), the stack user domain, the
metadata and wait-condition URLs on heat-api-cfn. The services it
calls (Swift too, when the cloud runs it: object_store.py) come from
the catalog, public endpoints of the cloud's region ([clients]
endpoint_type, region_name_for_services); [clients_swift] needs nothing.

keelson: `keelson engine` (one stack engine, MariaDB `kc_<run>_orchestration`)
behind the gateway the cloud already runs for Placement, whose
Orchestration API ([keelson] orchestration_listen) checks Keystone tokens
as heat-api does.
"""
import os
import secrets
import socket
import subprocess

from cloud import SERVICE_PASSWORD, REGION, ROOT, wait_http, wait_until  # noqa: E402
from launch import write_conf  # noqa: E402

DOMAIN_ADMIN_PASSWORD = 'cloud-heat-domain-secret'
TESTER_PASSWORD = 'cloud-heat-tester-secret'
ENGINES = 2


def heat_venv():
    """The reference Heat's virtualenv (installed on first use)."""
    out = subprocess.run([os.path.join(ROOT, 'tests', 'reference', 'heat', 'setup')], check=True,
                         capture_output=True, text=True, timeout=1800)
    return out.stdout.strip().splitlines()[-1]


class Orchestration:
    def __init__(self, cloud, kind):
        assert kind in ('heat', 'keelson')
        self.cloud, self.kind = cloud, kind
        self.dir = os.path.join(cloud.dir, 'heat')
        p = cloud.ports
        self.url = 'http://127.0.0.1:%d' % (p['heat-api'] if kind == 'heat' else p['orchestration'])
        self.cfn_url = 'http://127.0.0.1:%d' % p['heat-api-cfn']

    # -- Keystone -----------------------------------------------------------------------------------------------
    def prepare_keystone(self):
        """Users, roles, the stack user domain and the catalog entries."""
        c = self.cloud
        roles = {r['name']: r['id'] for r in c.keystone('GET', '/v3/roles')['roles']}
        for name in ('heat_stack_owner', 'heat_stack_user', 'member'):
            if name not in roles:
                roles[name] = c.keystone('POST', '/v3/roles', {'role': {'name': name}})['role']['id']
        heat = c.keystone('POST', '/v3/users', {'user': {
            'name': 'heat', 'password': SERVICE_PASSWORD, 'domain_id': 'default',
            'default_project_id': c.projects['service']}})['user']['id']
        for role in ('admin', 'service'):
            c.keystone('PUT', '/v3/projects/%s/users/%s/roles/%s' % (c.projects['service'], heat, roles[role]))
        domain = c.keystone('POST', '/v3/domains', {'domain': {
            'name': 'heat', 'description': 'Heat stack projects and users'}})['domain']['id']
        domain_admin = c.keystone('POST', '/v3/users', {'user': {
            'name': 'heat_domain_admin', 'password': DOMAIN_ADMIN_PASSWORD, 'domain_id': domain}})['user']['id']
        c.keystone('PUT', '/v3/domains/%s/users/%s/roles/%s' % (domain, domain_admin, roles['admin']))
        tester = c.keystone('POST', '/v3/users', {'user': {
            'name': 'heat-tester', 'password': TESTER_PASSWORD, 'domain_id': 'default',
            'default_project_id': c.projects['demo']}})['user']['id']
        for role in ('member', 'heat_stack_owner'):
            c.keystone('PUT', '/v3/projects/%s/users/%s/roles/%s' % (c.projects['demo'], tester, roles[role]))
        entries = [('orchestration', 'heat', self.url + '/v1/$(project_id)s')]
        if self.kind == 'heat':
            entries.append(('cloudformation', 'heat-cfn', self.cfn_url + '/v1'))
        for kind, name, url in entries:
            sid = c.keystone('POST', '/v3/services', {'service': {'type': kind, 'name': name}})['service']['id']
            for interface in ('public', 'internal', 'admin'):
                c.keystone('POST', '/v3/endpoints', {'endpoint': {
                    'service_id': sid, 'interface': interface, 'url': url, 'region_id': REGION}})

    # -- the real Heat --------------------------------------------------------------------------------------------
    def heat_sections(self, venv):
        c = self.cloud
        keystone = c.url['keystone']
        return {
            'DEFAULT': {
                'debug': 'false', 'use_stderr': 'true', 'transport_url': c.transport_url(),
                'convergence_engine': 'true', 'num_engine_workers': '1',
                'deferred_auth_method': 'trusts',
                'stack_user_domain_name': 'heat', 'stack_domain_admin': 'heat_domain_admin',
                'stack_domain_admin_password': DOMAIN_ADMIN_PASSWORD,
                'heat_metadata_server_url': self.cfn_url,
                'heat_waitcondition_server_url': self.cfn_url + '/v1/waitcondition',
                'region_name_for_services': REGION,
                'auth_encryption_key': secrets.token_hex(16),
                'hidden_stack_tags': 'hidden',
                'enable_stack_abandon': 'true', 'enable_stack_adopt': 'true',
                # SIGTERM must not keep an engine for oslo.service's minute.
                'graceful_shutdown_timeout': '5',
            },
            'database': {'connection': self.db},
            'keystone_authtoken': c.authtoken('heat'),
            'trustee': {'auth_type': 'password', 'auth_url': keystone + '/v3', 'username': 'heat',
                        'password': SERVICE_PASSWORD, 'user_domain_name': 'Default'},
            'clients_keystone': {'auth_uri': keystone},
            'ec2authtoken': {'auth_uri': keystone + '/v3'},
            'clients': {'endpoint_type': 'publicURL'},
            'paste_deploy': {'api_paste_config': os.path.join(venv, 'etc', 'heat', 'api-paste.ini')},
            'cache': {'enabled': 'true', 'backend': 'dogpile.cache.memory'},
            'oslo_messaging_notifications': {'driver': 'noop'},
            'oslo_concurrency': {'lock_path': os.path.join(self.dir, 'locks')},
        }

    def start_heat(self):
        c = self.cloud
        venv = heat_venv()
        vbin = os.path.join(venv, 'bin')
        os.makedirs(os.path.join(self.dir, 'locks'))
        self.db = c.database('heat')
        conf = write_conf(os.path.join(self.dir, 'heat.conf'), self.heat_sections(venv))
        self.manage = [os.path.join(vbin, 'heat-manage'), '--config-file', conf]
        c.run('heat-manage', self.manage + ['db_sync'])
        for i in range(ENGINES):
            c.spawn('heat-engine-%d' % i, [os.path.join(vbin, 'heat-engine'), '--config-file', conf])
        api = c.spawn('heat-api', [os.path.join(vbin, 'heat-wsgi-api'), '--host', '127.0.0.1', '--port',
                                   str(c.ports['heat-api']), '--', '--config-file', conf])
        cfn = c.spawn('heat-api-cfn', [os.path.join(vbin, 'heat-wsgi-api-cfn'), '--host', '127.0.0.1', '--port',
                                       str(c.ports['heat-api-cfn']), '--', '--config-file', conf])
        wait_http(self.url + '/', api)
        wait_http(self.cfn_url + '/', cfn)
        # A call sent before the engines consume their topics is lost (the
        # new vhost has no queue for it) and heat-api waits a minute for
        # the reply: wait until both engines consume both topics.
        wait_until(lambda: all(n >= ENGINES for n in self.engine_consumers()), 180,
                   '%d heat-engines consuming their topics' % ENGINES, interval=1)

    def engine_consumers(self):
        """Consumers of the engines' RPC topics in the run's vhost."""
        listed = subprocess.run(['rabbitmqctl', '-q', 'list_queues', '-p', self.cloud.vhost, 'name', 'consumers'],
                                capture_output=True, text=True, timeout=60)
        found = dict(line.split('\t', 1) for line in listed.stdout.splitlines() if line.count('\t') == 1)
        return [int(found.get(topic, '0') or 0) for topic in ('engine', 'engine_worker')]

    # -- keelson --------------------------------------------------------------------------------------------------
    def keelson_sections(self):
        """What keelson's configuration gains (cloud.py writes it before
        the gateway starts)."""
        c = self.cloud
        keystone = c.url['keystone']
        return {
            'database': {'connection': c.database('orchestration')},
            'keelson': {'engine_listen': '127.0.0.1:%d' % c.ports['engine'],
                        'cfn_listen': '127.0.0.1:%d' % c.ports['heat-api-cfn']},
            'orchestration': {'auth_strategy': 'keystone', 'hidden_stack_tags': 'hidden',
                              'enable_stack_abandon': 'true', 'enable_stack_adopt': 'true'},
            # Heat's identity model, configured as heat_sections does for
            # the real Heat: stacks' trusts to `heat`, the stack user
            # domain; it also turns on the types that call the services.
            'clients_keystone': {'auth_uri': keystone},
            'trustee': {'auth_type': 'password', 'auth_url': keystone + '/v3', 'username': 'heat',
                        'password': SERVICE_PASSWORD, 'user_domain_name': 'Default'},
            'DEFAULT': {'deferred_auth_method': 'trusts', 'stack_user_domain_name': 'heat',
                        'stack_domain_admin': 'heat_domain_admin',
                        'stack_domain_admin_password': DOMAIN_ADMIN_PASSWORD,
                        'auth_encryption_key': secrets.token_hex(16)},
        }

    def start_keelson_engine(self):
        """The engine (it creates its tables); the gateway already serves
        the Orchestration API."""
        c = self.cloud
        engine = c.spawn('keelson-engine', [c.keelson_bin, '--config-file', c.keelson_conf, 'engine'],
                         env={'RUST_LOG': 'info'})
        port = c.ports['engine']
        wait_until(lambda: engine.p.poll() is not None or socket.socket().connect_ex(('127.0.0.1', port)) == 0,
                   60, 'keelson engine on port %d' % port, interval=0.2)
        if engine.p.poll() is not None:
            raise RuntimeError('keelson engine exited:\n%s' % engine.tail())

    def manage_argv(self):
        """The operator's database tool on the engine's configuration, as
        `heat-manage` is called (PurgeTest runs `heat-manage purge_deleted
        AGE`): Heat's own, or keelson's `stack-db` (which takes
        `purge_deleted` as heat-manage spells it)."""
        if self.kind == 'heat':
            return self.manage
        return [self.cloud.keelson_bin, '--config-file', self.cloud.keelson_conf, 'stack-db']

    def start(self):
        self.prepare_keystone()
        if self.kind == 'heat':
            self.start_heat()
        else:
            self.start_keelson_engine()
