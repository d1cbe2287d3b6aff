"""keelson against a real Keystone served over https (tests/integration/
keystone.py with a certificate of a CA made here by openssl, as
test_tls.py makes them; the system's CAs do not know it).

- The gateway validates tokens there as keystonemiddleware's auth_token
  does with `[keystone_authtoken] cafile`: a member's token is accepted,
  a bad one gets auth_token's 401. Without `cafile` the handshake fails
  and the answer is auth_token's when Keystone cannot be reached (503,
  "The Keystone service is temporarily unavailable."), at once; with
  `insecure = true` instead, tokens are validated again.
- The stack engine reaches Keystone with Heat's `[clients_keystone]
  ca_file` (or `[clients] ca_file`): a stack create makes its trust and an
  OS::Keystone::Role there. Without a CA the trust cannot be made and the
  create is Heat's 500 (the engine logs keystoneauth's SSLError text, "SSL
  exception connecting to ..."), at once, leaving no stack.

With KEELSON_KEYSTONE_REFERENCE=1 the gateway's tests run against upstream
Placement with keystonemiddleware instead (as test_keystone.py's do), and
pass there too. The module skips only when keystone or openssl are not
available here."""
import shutil
import tempfile
import time
import uuid

import pytest

import test_keystone as plain
from conftest import BACKENDS
from keystone import ADMIN_PASSWORD, start_keystone
from test_heat_identity import Cloud
from test_tls import make_ca, make_cert

# keystonemiddleware's HTTPServiceUnavailable('The Keystone service is
# temporarily unavailable.'), as webob renders it for Accept: application/json.
KSM_503 = {'message': 'The server is currently unavailable. Please try again at a later time.<br /><br />\n'
                      'The Keystone service is temporarily unavailable.\n\n',
           'code': '503 Service Unavailable', 'title': 'Service Unavailable'}


@pytest.fixture(scope='module')
def pki():
    if not shutil.which('openssl'):
        pytest.skip('openssl is not installed')
    d = tempfile.mkdtemp(prefix='kt-kspki-')
    make_ca(d, 'keystone')
    files = make_cert(d, 'keystone', 'keystone-server')
    return {'cert': files['tls_cert_file'], 'key': files['tls_key_file'], 'ca': files['tls_ca_file']}


@pytest.fixture(scope='module')
def keystone(module_procs, pki):
    ks = start_keystone(module_procs, tls=pki)
    assert ks.url.startswith('https://')
    return ks


def usages(aio, keystone, token):
    return plain.get(aio, '/usages?project_id=%s' % keystone.projects['demo'], token)


def test_gateway_trusts_keystone_through_cafile(module_procs, keystone, pki):
    aio = plain.placement(module_procs, keystone, cafile=pki['ca'])
    status, _, body = usages(aio, keystone, keystone.token('member', project='demo'))
    assert (status, body) == (200, {'usages': {}})
    plain.assert_401(aio, keystone, usages(aio, keystone, 'garbage'))
    plain.assert_401(aio, keystone, usages(aio, keystone, None))


def test_gateway_without_the_ca_is_503_and_insecure_works(module_procs, keystone):
    member = keystone.token('member', project='demo')
    aio = plain.placement(module_procs, keystone)
    before = time.monotonic()
    status, headers, body = usages(aio, keystone, member)
    assert (status, body) == (503, KSM_503)
    assert headers['content-type'] == 'application/json'
    # A failed handshake is not retried as a refused connection is.
    assert time.monotonic() - before < 10
    # A request without a token needs no Keystone: still 401.
    plain.assert_401(aio, keystone, usages(aio, keystone, None))

    aio = plain.placement(module_procs, keystone, insecure='true')
    status, _, body = usages(aio, keystone, member)
    assert (status, body) == (200, {'usages': {}})
    plain.assert_401(aio, keystone, usages(aio, keystone, 'garbage'))


def tls_cloud(module_procs, keystone, pki, **clients):
    """keelson in Keystone mode whose gateway trusts the CA (cafile) and
    whose engine has the `clients` sections given."""
    extra = {'keystone_authtoken': {'cafile': pki['ca']}}
    extra.update(clients)
    return Cloud(module_procs, BACKENDS[0], keystone=keystone, extra=extra)


def role_stack(cloud):
    """An admin's stack with one OS::Keystone::Role: (token, project, name,
    stack id, role name, create answer)."""
    ks = cloud.keystone
    project = ks.projects['admin']
    token = ks.fresh('admin', ADMIN_PASSWORD, project='admin')
    suffix = uuid.uuid4().hex[:8]
    role = 'kt-tls-role-%s' % suffix
    name = 'kstls-%s' % suffix
    template = {'heat_template_version': '2018-08-31',
                'resources': {'role': {'type': 'OS::Keystone::Role', 'properties': {'name': role}}}}
    answer = cloud.call('POST', '/stacks', token, {'stack_name': name, 'template': template}, project=project)
    return token, project, name, role, answer


@pytest.mark.parametrize('group', ['clients_keystone', 'clients'])
def test_engine_reaches_keystone_through_ca_file(module_procs, keystone, pki, group):
    cloud = tls_cloud(module_procs, keystone, pki, **{group: {'ca_file': pki['ca']}})
    ks = cloud.keystone
    token, project, name, role, (status, doc) = role_stack(cloud)
    assert status == 201, (status, doc, cloud.aio.proc.output()[-3000:])
    sid = doc['stack']['id']
    st = cloud.wait(token, project, name, sid, ['CREATE_COMPLETE', 'CREATE_FAILED'])
    assert st['stack_status'] == 'CREATE_COMPLETE', (st['stack_status_reason'], cloud.aio.proc.output()[-3000:])
    # The trust, made at create time, and the role are in Keystone.
    status, _, trusts = ks.request('GET', '/v3/OS-TRUST/trusts?trustor_user_id=%s' % ks.users['admin'], token=token)
    assert status == 200, trusts
    assert [t['project_id'] for t in trusts['trusts']] == [project], trusts
    status, _, roles = ks.request('GET', '/v3/roles?name=%s' % role, token=ks.admin_token)
    (made,) = roles['roles']
    assert cloud.resource(token, project, name, sid, 'role')['physical_resource_id'] == made['id']

    status, doc = cloud.call('DELETE', '/stacks/%s/%s' % (name, sid), token, project=project)
    assert status == 204, doc
    cloud.wait(token, project, name, sid, ['GONE'])
    assert ks.request('GET', '/v3/roles/%s' % made['id'], token=ks.admin_token)[0] == 404
    status, _, trusts = ks.request('GET', '/v3/OS-TRUST/trusts?trustor_user_id=%s' % ks.users['admin'], token=token)
    assert trusts['trusts'] == [], trusts


def test_engine_without_the_ca_fails_with_the_ssl_error(module_procs, keystone, pki):
    """The trust is made inside the create call, as Heat's Stack.store()
    makes it inside the create_stack RPC call: its failure is the create's
    500, whose message Heat's faultwrap does not show (Heat names the
    type RemoteError, oslo.messaging's wrapper of a non-Heat exception;
    keelson InternalError). The engine logs keystoneauth's SSLError text;
    no stack is left behind."""
    cloud = tls_cloud(module_procs, keystone, pki)
    before = time.monotonic()
    token, project, name, role, answer = role_stack(cloud)
    assert time.monotonic() - before < 10, 'a failed handshake is not retried'
    assert answer == (500, {'code': 500, 'title': 'Internal Server Error',
                            'explanation': 'The server has either erred or is incapable of performing the requested '
                                           'operation.',
                            'error': {'type': 'InternalError', 'traceback': None}}), answer
    ssl_error = 'SSL exception connecting to %s/v3/auth/tokens: invalid peer certificate: UnknownIssuer' % keystone.url
    assert 'trustee authentication: service unavailable: %s' % ssl_error in cloud.aio.proc.output()
    status, doc = cloud.call('GET', '/stacks?stack_name=%s' % name, token, project=project)
    assert (status, doc) == (200, {'stacks': []})
    assert keystone.request('GET', '/v3/roles?name=%s' % role, token=keystone.admin_token)[2]['roles'] == []
