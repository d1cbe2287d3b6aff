"""A real Keystone for the integration tests: PyPI's `keystone` (installed
on first use into its own virtualenv by tests/lib/keystone_venv.sh), on
SQLite with fernet tokens, served by cheroot (tests/lib/keystone_serve.py),
with the projects, users and roles the tests use; over https when given a
certificate (tests/integration/test_keystone_tls.py)."""
import json
import os
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.request

import pytest

from conftest import ROOT, Proc, free_port, wait_http, write_conf

KEYSTONE_VENV = os.environ.get('KEELSON_KEYSTONE_VENV', os.path.join(
    os.environ.get('XDG_CACHE_HOME', os.path.expanduser('~/.cache')), 'keelson-keystone-venv'))
ADMIN_PASSWORD = 'keystone-admin-secret'
PASSWORD = 'user-secret'


class Keystone:
    """One Keystone on a free loopback port, with the users the tests use.
    `tls` ({'cert', 'key', 'ca'}: PEM files, the certificate valid for
    127.0.0.1) serves it over https; the test's own calls trust `ca`."""

    def __init__(self, procs, tls=None):
        self.dir = tempfile.mkdtemp(prefix='kt-keystone-')
        self.port = free_port()
        self.url = '%s://127.0.0.1:%d' % ('https' if tls else 'http', self.port)
        self.ssl = ssl.create_default_context(cafile=tls['ca']) if tls else None
        self.tokens = {}
        conf = write_conf(os.path.join(self.dir, 'keystone.conf'), {
            'DEFAULT': {'use_stderr': 'true'},
            'database': {'connection': 'sqlite:///%s/keystone.db' % self.dir},
            'token': {'provider': 'fernet'},
            'fernet_tokens': {'key_repository': os.path.join(self.dir, 'fernet-keys')},
            'fernet_receipts': {'key_repository': os.path.join(self.dir, 'fernet-keys')},
            'credential': {'key_repository': os.path.join(self.dir, 'credential-keys')},
            # bcrypt's cheapest cost: the tests create users, not secrets.
            'identity': {'password_hash_rounds': '4'},
            # An in-process cache: without one every authenticated call
            # costs Keystone some 200 SQL queries. It drops cached token
            # validations when a token is revoked.
            'cache': {'enabled': 'true', 'backend': 'dogpile.cache.memory'},
        })
        self.proc = Proc([os.path.join(KEYSTONE_VENV, 'bin', 'python'), os.path.join(ROOT, 'tests', 'lib', 'keystone_serve.py'),
                          conf, str(self.port), ADMIN_PASSWORD] + ([tls['cert'], tls['key']] if tls else []),
                         cwd=self.dir)
        procs.append(self.proc)
        # db_sync, key setup, bootstrap and the application's start.
        wait_http(self.url + '/v3', timeout=240, proc=self.proc, context=self.ssl)
        self.admin_token = self.fresh('admin', ADMIN_PASSWORD, project='admin')
        self.roles = {r['name']: r['id'] for r in self.call('GET', '/v3/roles')['roles']}
        for name in ('service', 'member', 'reader', 'admin'):
            assert name in self.roles, 'keystone-manage bootstrap creates the %s role' % name
        self.projects = {'admin': self.lookup('projects', 'admin')}
        for name in ('service', 'demo', 'other'):
            self.projects[name] = self.call('POST', '/v3/projects', {'project': {'name': name, 'domain_id': 'default'}})['project']['id']
        self.users = {'admin': self.lookup('users', 'admin')}
        # The placement service user: the service role in the service
        # project, as a deployment gives it (Keystone lets that role
        # validate tokens).
        self.add_user('placement', project='service', roles=['service'])
        self.add_user('member', project='demo', roles=['member'])
        self.add_user('reader', project='demo', roles=['reader'])
        self.call('PUT', '/v3/system/users/%s/roles/%s' % (self.users['reader'], self.roles['reader']))
        self.call('PUT', '/v3/domains/default/users/%s/roles/%s' % (self.users['admin'], self.roles['admin']))
        # Placement in the catalog, where access rules look for it.
        service = self.call('POST', '/v3/services', {'service': {'type': 'placement', 'name': 'placement'}})['service']['id']
        self.call('POST', '/v3/endpoints', {'endpoint': {
            'service_id': service, 'interface': 'public', 'url': 'http://127.0.0.1:8778', 'region_id': 'RegionOne'}})

    def request(self, method, path, body=None, token=None, headers=None):
        h = {'accept': 'application/json'}
        if token:
            h['x-auth-token'] = token
        h.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h['content-type'] = 'application/json'
        req = urllib.request.Request(self.url + path, data=data, headers=h, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30, context=self.ssl) as r:
                raw = r.read()
                return r.status, r.headers, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    def call(self, method, path, body=None):
        """An admin call that must succeed."""
        status, _, answer = self.request(method, path, body, token=self.admin_token)
        assert status < 300, (method, path, status, answer)
        return answer

    def lookup(self, kind, name):
        return self.call('GET', '/v3/%s?name=%s' % (kind, name))[kind][0]['id']

    def add_user(self, name, project, roles):
        self.users[name] = self.call('POST', '/v3/users', {'user': {
            'name': name, 'password': PASSWORD, 'domain_id': 'default', 'default_project_id': self.projects[project]}})['user']['id']
        for role in roles:
            self.call('PUT', '/v3/projects/%s/users/%s/roles/%s' % (self.projects[project], self.users[name], self.roles[role]))

    def token(self, user, password=PASSWORD, project=None, system=False, domain=None, body=False):
        """A token of `user` (the same one for the same arguments: issuing
        costs Keystone a password check; tests that revoke use fresh())."""
        key = (user, project, system, domain, body)
        if key not in self.tokens:
            self.tokens[key] = self.fresh(user, password, project, system, domain, body)
        return self.tokens[key]

    def fresh(self, user, password=PASSWORD, project=None, system=False, domain=None, body=False):
        auth = {'identity': {'methods': ['password'], 'password': {'user': {
            'name': user, 'domain': {'id': 'default'}, 'password': password}}}}
        if project:
            auth['scope'] = {'project': {'name': project, 'domain': {'id': 'default'}}}
        elif system:
            auth['scope'] = {'system': {'all': True}}
        elif domain:
            auth['scope'] = {'domain': {'id': domain}}
        return self.issue(auth, body)

    def issue(self, auth, body=False):
        status, headers, answer = self.request('POST', '/v3/auth/tokens?nocatalog', {'auth': auth})
        assert status == 201, answer
        return (headers['X-Subject-Token'], answer['token']) if body else headers['X-Subject-Token']

    def revoke(self, token):
        status, _, answer = self.request('DELETE', '/v3/auth/tokens', token=self.admin_token, headers={'x-subject-token': token})
        assert status == 204, answer


def start_keystone(procs, tls=None):
    """A Keystone whose process `procs` stops (over https with `tls`, as
    Keystone() says); skips the calling module only when the keystone
    package cannot be installed on this machine at all."""
    setup = subprocess.run([os.path.join(ROOT, 'tests', 'lib', 'keystone_venv.sh')], capture_output=True, text=True,
                           env=dict(os.environ, KEELSON_KEYSTONE_VENV=KEYSTONE_VENV))
    if setup.returncode != 0:
        pytest.skip('PyPI keystone cannot be installed here:\n' + setup.stderr[-2000:])
    return Keystone(procs, tls)
