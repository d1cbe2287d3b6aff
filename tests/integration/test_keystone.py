"""keelson against a real Keystone: PyPI's `keystone` (installed on first
use into its own virtualenv by tests/lib/keystone_venv.sh), on SQLite with
fernet tokens, served by cheroot (tests/lib/keystone_serve.py). keelson
all-in-one runs with `[api] auth_strategy = keystone` and validates every
token there, as keystonemiddleware's auth_token does for upstream Placement.

The module skips only when the keystone package cannot be installed on this
machine at all; anything that goes wrong after that fails."""
import datetime
import json
import os
import time

import pytest

from conftest import AllInOne, create_database, free_port, http, ref_placement
from keystone import ADMIN_PASSWORD, PASSWORD, start_keystone

# The 401 keystonemiddleware's auth_token answers for a missing or bad token.
KSM_401 = {'error': {'code': 401, 'title': 'Unauthorized',
                     'message': 'The request you have made requires authentication.'}}
CACHE_TIME = 2
# Run the tests against upstream Placement with keystonemiddleware instead
# (see placement()).
REFERENCE = os.environ.get('KEELSON_KEYSTONE_REFERENCE') == '1'


@pytest.fixture(scope='module')
def keystone(module_procs):
    return start_keystone(module_procs)


class Reference:
    """Upstream Placement with keystonemiddleware, in AllInOne's place."""

    def __init__(self, procs, conf):
        self.url, self.proc = ref_placement(procs, conf=conf)


def placement(procs, keystone, **authtoken):
    """keelson all-in-one validating tokens against `keystone` (or, with
    KEELSON_KEYSTONE_REFERENCE=1, upstream Placement with keystonemiddleware:
    the tests' expectations are upstream's)."""
    opts = {'auth_url': keystone.url, 'www_authenticate_uri': keystone.url + '/v3',
            'auth_type': 'password', 'username': 'placement', 'password': PASSWORD,
            'project_name': 'service', 'user_domain_name': 'Default', 'project_domain_name': 'Default'}
    opts.update({k: str(v) for k, v in authtoken.items()})
    db = create_database('sqlite', 'keystone')
    if REFERENCE:
        return Reference(procs, {'placement_database': {'connection': db}, 'api': {'auth_strategy': 'keystone'},
                                 'keystone_authtoken': opts})
    return AllInOne(procs, db, extra={'api': {'auth_strategy': 'keystone'}, 'keystone_authtoken': opts},
                    env={'RUST_LOG': 'info,keelson::auth=debug'})


@pytest.fixture(scope='module')
def lenient(module_procs, keystone):
    """A short token cache; a service token without the service role is
    let through (service_token_roles_required = false)."""
    return placement(module_procs, keystone, token_cache_time=CACHE_TIME, service_token_roles_required='false')


@pytest.fixture(scope='module')
def strict(module_procs, keystone):
    """keystonemiddleware's defaults: a 300 s cache, service tokens must hold
    a service role; auth_url written with its /v3, as many deployments do;
    service_type set, so application credentials' access rules apply."""
    return placement(module_procs, keystone, auth_url=keystone.url + '/v3', service_type='placement')


def get(aio, path, token, **kw):
    return call('GET', aio, path, token, **kw)


def call(method, aio, path, token, **kw):
    """conftest.http with header names in lower case."""
    status, headers, body = http(method, aio.url + path, token=token, **kw)
    return status, {k.lower(): v for k, v in headers.items()}, body


def assert_401(aio, keystone, answer):
    status, headers, body = answer
    assert status == 401, answer
    assert headers['www-authenticate'] == 'Keystone uri="%s/v3"' % keystone.url
    assert headers['content-type'] == 'application/json'
    assert body == KSM_401


def test_root_needs_no_token(lenient, keystone):
    assert get(lenient, '/', None)[0] == 200
    # Nor is a token there looked at.
    assert get(lenient, '/', 'not-a-token')[0] == 200


def test_valid_token_accepted(lenient, strict, keystone):
    token = keystone.token('admin', ADMIN_PASSWORD, project='admin')
    for aio in (lenient, strict):
        status, _, body = get(aio, '/resource_providers', token)
        assert status == 200, body
        assert body == {'resource_providers': []}


def test_missing_and_garbage_tokens_are_401(lenient, strict, keystone):
    for aio in (lenient, strict):
        assert_401(aio, keystone, get(aio, '/resource_providers', None))
        assert_401(aio, keystone, get(aio, '/resource_providers', 'garbage'))
        assert_401(aio, keystone, get(aio, '/traits', 'gAAAAAB' + 'x' * 180))


def test_revoked_token_honours_the_cache(lenient, keystone):
    """keelson asks Keystone again only when token_cache_time has passed: a
    revoked token works until then, and is refused after."""
    for _ in range(3):
        token = keystone.fresh('admin', ADMIN_PASSWORD, project='admin')
        before = time.monotonic()
        assert get(lenient, '/resource_providers', token)[0] == 200  # now cached
        keystone.revoke(token)
        cached = get(lenient, '/resource_providers', token)
        if time.monotonic() - before < CACHE_TIME:
            break
        # A loaded machine took the whole cache time: once more.
    else:
        pytest.fail('could not revoke a token within %ss of its validation' % CACHE_TIME)
    assert cached[0] == 200, 'within token_cache_time the cached validation stands'
    status, _, _ = keystone.request('GET', '/v3/auth/tokens', token=keystone.admin_token, headers={'x-subject-token': token})
    assert status == 404, 'keystone itself refuses the revoked token'
    deadline = time.monotonic() + CACHE_TIME + 5
    while True:
        answer = get(lenient, '/resource_providers', token)
        if answer[0] != 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert_401(lenient, keystone, answer)
    # keystonemiddleware's in-process cache counts whole seconds: its
    # entries may go up to a second early.
    assert time.monotonic() - before >= CACHE_TIME - (1 if REFERENCE else 0)


def test_expired_token_is_refused_despite_the_cache(strict, keystone):
    """An application credential caps its tokens' life at its own expiry:
    a token that expires in a few seconds. keelson's 300 s cache never
    outlives it."""
    life = 4
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=life)
    token, body = app_cred_token(keystone, 'short', expires_at=expires.strftime('%Y-%m-%dT%H:%M:%S.%f'))
    assert body['expires_at'].startswith(expires.strftime('%Y-%m-%dT%H:%M:%S'))
    # Keystone keeps the credential's expiry to the second.
    expires = datetime.datetime.strptime(body['expires_at'], '%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=datetime.timezone.utc)
    first = get(strict, '/resource_providers', token)  # validated and cached
    if datetime.datetime.now(datetime.timezone.utc) < expires - datetime.timedelta(seconds=0.5):
        assert first[0] == 200, first
    deadline = time.monotonic() + life + 5
    while True:
        answer = get(strict, '/resource_providers', token)
        if answer[0] != 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert_401(strict, keystone, answer)
    assert datetime.datetime.now(datetime.timezone.utc) >= expires
    # With a valid service token holding the service role, an expired user
    # token is still accepted (keystonemiddleware's allow_expired, for long
    # operations that started with a then valid token) ...
    service = keystone.token('placement', project='service')
    status, _, body = get(strict, '/resource_providers', token, headers={'x-service-token': service})
    assert status == 200, body
    # ... not with a service token lacking the role.
    member = keystone.token('member', project='demo')
    assert_401(strict, keystone, get(strict, '/resource_providers', token, headers={'x-service-token': member}))


def test_roles_and_scope_map_into_policy(lenient, keystone):
    member = keystone.token('member', project='demo')
    status, _, body = get(lenient, '/resource_providers', member)
    assert status == 403, body
    assert 'placement:resource_providers:list' in json.dumps(body)
    # Identity comes from the token alone: headers a client adds (as
    # keystonemiddleware strips them) change nothing.
    faked = {'x-roles': 'admin', 'x-project-id': keystone.projects['admin'], 'openstack-system-scope': 'all',
             'x-service-roles': 'service', 'x-identity-status': 'Confirmed'}
    assert get(lenient, '/resource_providers', member, headers=faked)[0] == 403

    # A project reader reads its own project's usages (project_reader_api)
    # and no other's.
    reader = keystone.token('reader', project='demo')
    status, _, body = get(lenient, '/usages?project_id=%s' % keystone.projects['demo'], reader)
    assert status == 200, body
    assert get(lenient, '/usages?project_id=%s' % keystone.projects['other'], reader)[0] == 403
    assert get(lenient, '/resource_providers', reader)[0] == 403

    # Placement's rules are project scoped and oslo.policy enforces scope:
    # system and domain tokens are refused, even an admin's.
    system_reader = keystone.token('reader', system=True)
    status, _, body = get(lenient, '/resource_providers', system_reader)
    assert status == 403, body
    assert get(lenient, '/usages?project_id=%s' % keystone.projects['demo'], system_reader)[0] == 403
    assert get(lenient, '/resource_providers', keystone.token('admin', ADMIN_PASSWORD, system=True))[0] == 403
    assert get(lenient, '/resource_providers', keystone.token('admin', ADMIN_PASSWORD, domain='default'))[0] == 403

    # The service role passes admin_or_service_api and service_api.
    service = keystone.token('placement', project='service')
    assert get(lenient, '/resource_providers', service)[0] == 200
    status, _, body = call('POST', lenient, '/reshaper', service, body={})
    assert status == 400, body  # past policy, refused by the schema
    for token in (member, keystone.token('admin', ADMIN_PASSWORD, project='admin')):
        status, _, body = call('POST', lenient, '/reshaper', token, body={})
        assert status == 403, body  # service_api: the service role alone


def test_service_token(lenient, strict, keystone):
    admin = keystone.token('admin', ADMIN_PASSWORD, project='admin')
    service = keystone.token('placement', project='service')
    member_as_service = keystone.token('member', project='demo')
    for aio in (lenient, strict):
        status, _, body = get(aio, '/resource_providers', admin, headers={'x-service-token': service})
        assert status == 200, body
        # An invalid service token spoils the request.
        assert_401(aio, keystone, get(aio, '/resource_providers', admin, headers={'x-service-token': 'garbage'}))
        # The service token adds no rights to the user's.
        member = keystone.token('member', project='demo')
        assert get(aio, '/resource_providers', member, headers={'x-service-token': service})[0] == 403
    # A valid service token without a service role: let through only when
    # service_token_roles_required is false.
    assert get(lenient, '/resource_providers', admin, headers={'x-service-token': member_as_service})[0] == 200
    assert_401(strict, keystone, get(strict, '/resource_providers', admin, headers={'x-service-token': member_as_service}))


def test_keystone_trouble_is_503(module_procs, keystone):
    """As keystonemiddleware: when the service user cannot authenticate (or
    Keystone cannot be reached), tokens cannot be checked: 503, not 401."""
    aio = placement(module_procs, keystone, password='wrong')
    status, headers, body = get(aio, '/resource_providers', keystone.admin_token)
    assert status == 503, body
    assert 'The Keystone service is temporarily unavailable.' in json.dumps(body)
    # A request without a token needs no Keystone: still 401.
    assert_401(aio, keystone, get(aio, '/resource_providers', None))
    # Nothing listening at auth_url (one connection retry, 0.5 s apart).
    gone = 'http://127.0.0.1:%d' % free_port()
    aio = placement(module_procs, keystone, auth_url=gone, www_authenticate_uri=gone, http_request_max_retries=1)
    status, _, body = get(aio, '/resource_providers', keystone.admin_token)
    assert status == 503, body
    assert body['title'] == 'Service Unavailable'


def app_cred_token(keystone, name, **fields):
    """A token of a new application credential of the admin user."""
    cred = keystone.call('POST', '/v3/users/%s/application_credentials' % keystone.users['admin'], {
        'application_credential': dict(name=name, **fields)})['application_credential']
    return keystone.issue({'identity': {'methods': ['application_credential'], 'application_credential': {
        'id': cred['id'], 'secret': cred['secret']}}}, body=True)


def test_application_credential_access_rules(lenient, strict, keystone):
    token, _ = app_cred_token(keystone, 'rp-list-only', access_rules=[
        {'service': 'placement', 'method': 'GET', 'path': '/resource_providers'},
        {'service': 'placement', 'method': 'GET', 'path': '/resource_providers/*/traits'}])
    status, _, body = get(strict, '/resource_providers', token)
    assert status == 200, body
    assert get(strict, '/resource_providers/%s/traits' % keystone.users['admin'], token)[0] == 404  # past auth
    assert_401(strict, keystone, get(strict, '/traits', token))
    assert_401(strict, keystone, get(strict, '/resource_providers/x/inventories', token))
    # In a chain of requests (a service token present) the rules do not apply.
    service = keystone.token('placement', project='service')
    assert get(strict, '/traits', token, headers={'x-service-token': service})[0] == 200
    # Without [keystone_authtoken] service_type no rule can be checked.
    assert_401(lenient, keystone, get(lenient, '/resource_providers', token))
    # An unrestricted application credential is an ordinary token.
    free, _ = app_cred_token(keystone, 'unrestricted')
    assert get(lenient, '/traits', free)[0] == 200


def test_delay_auth_decision(module_procs, keystone):
    """The application answers for a request without a valid user: 401,
    Placement's own body, with WWW-Authenticate added on the way out."""
    aio = placement(module_procs, keystone, delay_auth_decision='true')
    for token in (None, 'garbage'):
        status, headers, body = get(aio, '/resource_providers', token)
        assert status == 401, body
        assert headers['www-authenticate'] == 'Keystone uri="%s/v3"' % keystone.url
        assert body['title'] == 'Unauthorized' and body != KSM_401
    assert get(aio, '/resource_providers', keystone.admin_token)[0] == 200
