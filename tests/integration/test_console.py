"""The operator console in a real browser: Debian's headless Chromium and
its chromedriver, driven by selenium.

keelson all-in-one serves the page at /keelson/console/; a fleet, a stack
and requests are made through the REST APIs, and the page must show them:
the fleet's bars are the REST API's usages and capacities (on every
configured backend: the fleet is one read of the database), filters and
search select trees, the explain form shows the counts `keelson placement
explain --json` gives, a stack's graph turns CREATE_COMPLETE green, the
controller view names the primary and its term, and a request-rate chart
appears. No page may log a SEVERE browser console entry. Under Keystone the
page logs in with a password, and a non-admin gets 403 from every data
endpoint. Screenshots go to $KEELSON_ARTIFACTS (default
~/.cache/keelson-artifacts/<run id>/console/)."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from conftest import BACKENDS, RUN_ID, AllInOne, create_database, http, keelson_bin, new_uuid

CHROMIUM = shutil.which('chromium') or '/usr/bin/chromium'
CHROMEDRIVER = shutil.which('chromedriver') or '/usr/bin/chromedriver'
DATA = '/keelson/v1/console'
DISABLED = 'COMPUTE_STATUS_DISABLED'
AGGREGATE = 'a2c6c0c4-6f39-4d1a-9b53-5a8f1b3e7d10'


def artifacts():
    d = os.environ.get('KEELSON_ARTIFACTS') or os.path.join(
        os.path.expanduser('~/.cache/keelson-artifacts'), RUN_ID)
    d = os.path.join(d, 'console')
    os.makedirs(d, exist_ok=True)
    return d


class Browser:
    """One headless Chromium; every page's console log is checked."""

    def __init__(self):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
        if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
            pytest.fail('Debian chromium and chromium-driver are needed (tests/run installs them)')
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        self.profile = tempfile.mkdtemp(prefix='kt-chromium-')
        for arg in ('--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
                    '--window-size=1440,1000', '--user-data-dir=' + self.profile, '--no-first-run',
                    '--disable-background-networking', '--disable-component-update', '--disable-sync'):
            opts.add_argument(arg)
        opts.set_capability('goog:loggingPrefs', {'browser': 'ALL'})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        self.driver.set_page_load_timeout(30)
        self.dir = artifacts()
        print('console screenshots in', self.dir)

    def quit(self):
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)

    def open(self, url):
        self.driver.get(url)

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def wait(self, script, timeout=30, what=None, *args):
        """Polls a JavaScript expression until it is truthy; answers it."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.js('return (' + script + ');', *args)
            if value:
                return value
            if time.monotonic() > deadline:
                self.shot('timeout')
                raise AssertionError('%s: %s still false after %ss; error line: %r' % (
                    what or 'wait', script, timeout, self.js("return document.getElementById('error').textContent")))
            time.sleep(0.1)

    def severe(self):
        """The SEVERE console entries since the last call."""
        return [e for e in self.driver.get_log('browser') if e['level'] == 'SEVERE']

    def shot(self, name):
        path = os.path.join(self.dir, name + '.png')
        self.driver.save_screenshot(path)
        return path

    def select(self, form, name, value):
        self.js("const s = document.getElementById(arguments[0]).elements[arguments[1]];"
                "s.value = arguments[2]; s.form.requestSubmit();", form, name, value)


@pytest.fixture(scope='module')
def browser():
    b = Browser()
    yield b
    b.quit()


def console_url(aio, view):
    return aio.url + '/keelson/console/#' + view


class Fleet:
    """Trees made through the REST API: cn1 and cn2 (VCPU 16 ratio 2,
    MEMORY_MB) with use, cn3 disabled, and cn4 with a child pf (SRIOV_NET_VF,
    HW_NIC_SRIOV) in an aggregate."""

    def __init__(self, aio):
        self.aio = aio
        self.rp = {}
        for name, parent in (('cn1', None), ('cn2', None), ('cn3', None), ('cn4', None), ('cn4-pf', 'cn4')):
            body = {'name': name, 'uuid': new_uuid()}
            if parent:
                body['parent_provider_uuid'] = self.rp[parent]
            self.ok('POST', '/resource_providers', body)
            self.rp[name] = body['uuid']
        for name in ('cn1', 'cn2', 'cn3'):
            self.ok('PUT', '/resource_providers/%s/inventories' % self.rp[name], {
                'resource_provider_generation': 0, 'inventories': {
                    'VCPU': {'total': 16, 'allocation_ratio': 2.0, 'reserved': 1},
                    'MEMORY_MB': {'total': 8192}}})
        self.ok('PUT', '/resource_providers/%s/inventories' % self.rp['cn4-pf'], {
            'resource_provider_generation': 0, 'inventories': {'SRIOV_NET_VF': {'total': 8}}})
        self.ok('PUT', '/resource_providers/%s/traits' % self.rp['cn3'],
                {'resource_provider_generation': 1, 'traits': [DISABLED]})
        self.ok('PUT', '/resource_providers/%s/traits' % self.rp['cn4-pf'],
                {'resource_provider_generation': 1, 'traits': ['HW_NIC_SRIOV']})
        self.ok('PUT', '/resource_providers/%s/aggregates' % self.rp['cn4-pf'],
                {'resource_provider_generation': 2, 'aggregates': [AGGREGATE]})
        for name, vcpu, mem in (('cn1', 6, 2048), ('cn2', 29, 512), ('cn3', 2, 0)):
            resources = {'VCPU': vcpu}
            if mem:
                resources['MEMORY_MB'] = mem
            self.ok('PUT', '/allocations/%s' % new_uuid(), {
                'allocations': {self.rp[name]: {'resources': resources}}, 'project_id': new_uuid(),
                'user_id': new_uuid(), 'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        self.ok('PUT', '/allocations/%s' % new_uuid(), {
            'allocations': {self.rp['cn4-pf']: {'resources': {'SRIOV_NET_VF': 3}}}, 'project_id': new_uuid(),
            'user_id': new_uuid(), 'consumer_generation': None, 'consumer_type': 'INSTANCE'})

    def ok(self, method, path, body=None):
        status, _, answer = http(method, self.aio.url + path, body)
        assert status in (200, 204), (method, path, status, answer)
        return answer

    def expected_bars(self):
        """{provider name: {class: (used, capacity)}} from the REST API."""
        out = {}
        for name, uuid in self.rp.items():
            inventories = self.ok('GET', '/resource_providers/%s/inventories' % uuid)['inventories']
            usages = self.ok('GET', '/resource_providers/%s/usages' % uuid)['usages']
            out[name] = {rc: (usages.get(rc, 0), int((inv['total'] - inv['reserved']) * inv['allocation_ratio']))
                         for rc, inv in inventories.items()}
        return out


def shown_bars(browser):
    return browser.js("""
        const out = {};
        for (const row of document.querySelectorAll('#fleet-trees .provider')) {
          const bars = {};
          for (const b of row.querySelectorAll('.bar')) bars[b.dataset.class] = [+b.dataset.used, +b.dataset.capacity];
          out[row.dataset.name] = bars;
        }
        return out;""")


def shown(browser):
    """(name, matched) of the fleet rows, in order."""
    return [tuple(x) for x in browser.js(
        "return [...document.querySelectorAll('#fleet-trees .provider')]"
        ".map(r => [r.dataset.name, r.dataset.matched === 'true']);")]


def wait_fleet(browser):
    browser.wait("document.getElementById('fleet').dataset.state === 'ready'", what='fleet')


@pytest.fixture(scope='module', params=sorted(set(BACKENDS) | {'sqlite'}))
def fleet(module_procs, request):
    aio = AllInOne(module_procs, create_database(request.param, 'console_%s' % new_uuid()[:8]))
    aio.backend = request.param
    return Fleet(aio)


@pytest.fixture(scope='module')
def sqlite_fleet(module_procs):
    """The fleet for the views that do not depend on the backend."""
    aio = AllInOne(module_procs, create_database('sqlite', 'console_views_%s' % new_uuid()[:8]))
    aio.backend = 'sqlite'
    return Fleet(aio)


def test_fleet_view(browser, fleet):
    browser.open(console_url(fleet.aio, 'fleet'))
    wait_fleet(browser)
    assert shown(browser) == [(n, True) for n in ('cn1', 'cn2', 'cn3', 'cn4', 'cn4-pf')]
    assert shown_bars(browser) == {n: {rc: list(v) for rc, v in bars.items()}
                                   for n, bars in fleet.expected_bars().items()}
    assert browser.js("return document.querySelector('.provider[data-name=cn2] .bar[data-class=VCPU]')"
                      ".classList.contains('high')")
    browser.shot('fleet-%s' % fleet.aio.backend)
    # The tree of the provider with the trait, whole, the trait's provider
    # matched.
    browser.select('fleet-filters', 'trait', 'HW_NIC_SRIOV')
    browser.wait("document.getElementById('fleet-summary').dataset.matched === '1'", what='trait filter')
    assert shown(browser) == [('cn4', False), ('cn4-pf', True)]
    browser.select('fleet-filters', 'trait', '')
    browser.select('fleet-filters', 'member_of', AGGREGATE)
    browser.wait("document.getElementById('fleet-summary').dataset.total === '2'", what='aggregate filter')
    assert shown(browser) == [('cn4', False), ('cn4-pf', True)]
    browser.select('fleet-filters', 'member_of', '')
    browser.select('fleet-filters', 'resource_class', 'MEMORY_MB')
    browser.wait("document.getElementById('fleet-summary').dataset.total === '3'", what='class filter')
    assert shown(browser) == [('cn1', True), ('cn2', True), ('cn3', True)]
    browser.select('fleet-filters', 'resource_class', '')
    browser.js("document.querySelector('#fleet-filters [name=search]').value = arguments[0];"
               "document.getElementById('fleet-filters').requestSubmit();", fleet.rp['cn2'][:8].upper())
    browser.wait("document.getElementById('fleet-summary').dataset.total === '1'", what='search by uuid')
    assert shown(browser) == [('cn2', True)]
    browser.js("document.querySelector('#fleet-filters [name=search]').value = 'N4-P';"
               "document.getElementById('fleet-filters').requestSubmit();")
    browser.wait("document.getElementById('fleet-summary').dataset.total === '2'", what='search by name')
    assert shown(browser) == [('cn4', False), ('cn4-pf', True)]
    assert browser.severe() == []


def test_fleet_endpoint_pages_and_refuses(fleet):
    url = fleet.aio.url + DATA + '/fleet'
    seen, marker = [], None
    while True:
        status, _, page = http('GET', url + '?limit=2' + ('&marker=' + marker if marker else ''))
        assert status == 200, page
        seen += [p['name'] for p in page['providers']]
        marker = page['next_marker']
        if marker is None:
            break
    assert seen == ['cn1', 'cn2', 'cn3', 'cn4', 'cn4-pf']
    for query, text in (('limit=0', 'limit must be an integer from 1 to 5000'),
                        ('limit=5001', 'limit must be an integer from 1 to 5000'),
                        ('colour=red', 'unknown parameter colour'),
                        ('search=' + 'x' * 256, 'search is longer than 255 characters'),
                        ('marker=' + new_uuid(), 'found for the marker')):
        status, _, answer = http('GET', url + '?' + query)
        assert status == 400, (query, answer)
        assert text in answer['errors'][0]['detail'], (query, answer)


def test_page_headers_and_authorization(fleet):
    base = fleet.aio.url
    req = urllib.request.Request(base + '/keelson/console/', headers={})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200
        assert r.headers['content-type'].startswith('text/html')
        assert "default-src 'self'" in r.headers['content-security-policy']
        assert r.headers['x-frame-options'] == 'DENY'
        assert r.headers['x-content-type-options'] == 'nosniff'
        etag = r.headers['etag']
    req = urllib.request.Request(base + '/keelson/console/', headers={'if-none-match': etag})
    try:
        urllib.request.urlopen(req, timeout=30)
        raise AssertionError('no 304')
    except urllib.error.HTTPError as e:
        assert e.code == 304
    status, headers, _ = http('GET', base + '/keelson/console/nothing.js', token=None)
    assert status == 404 and {k.lower(): v for k, v in headers.items()}['x-frame-options'] == 'DENY'
    status, _, answer = http('GET', base + DATA + '/session', token=None)
    assert (status, answer) == (200, {'auth_strategy': 'noauth2'})
    for path in ('/fleet', '/stacks', '/controller', '/metrics'):
        status, _, _ = http('GET', base + DATA + path, token=None)
        assert status == 401, path
        status, _, answer = http('GET', base + DATA + path, token='bob:proj')
        assert status == 403, (path, answer)
        assert 'Policy does not allow keelson:console:' in answer['errors'][0]['detail']


def explain_cli(aio, query):
    out = subprocess.run([keelson_bin(), '--config-file', aio.conf, 'placement', 'explain', '--url', aio.url,
                          '--json', query], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def test_explain_form_shows_the_clis_counts(browser, sqlite_fleet):
    fleet = sqlite_fleet
    query = 'resources=VCPU:12&required=!%s&resources1=SRIOV_NET_VF:1' % DISABLED
    cli = explain_cli(fleet.aio, query)
    browser.open(console_url(fleet.aio, 'explain'))
    browser.wait("!document.getElementById('explain').hidden", what='explain view')
    browser.js("const f = document.getElementById('explain-form'); f.elements.query.value = arguments[0];"
               "f.requestSubmit();", query)
    browser.wait("document.getElementById('explain-answer').dataset.state === 'ready'", what='explain answer')
    groups = browser.js("""return [...document.querySelectorAll('#explain-answer .group[data-suffix]')].map(g => ({
        suffix: g.dataset.suffix, searched: g.dataset.searched === 'true', providers: +g.dataset.providers,
        fit: +g.dataset.fit,
        rules: [...g.querySelectorAll('.rule')].filter(r => r.dataset.rule !== 'fit')
                 .map(r => [r.dataset.rule, +r.dataset.count])}));""")
    assert groups == [{'suffix': g['suffix'], 'searched': g['searched'], 'providers': g['providers'],
                       'fit': len(g['survivors']),
                       'rules': [[t['rule'], t['providers']] for t in g['tallies']] if g['searched'] else []}
                      for g in cli['groups']]
    # The request excludes something in the unsuffixed group.
    assert groups[0]['rules'], groups
    assert browser.js("return +document.querySelector('[data-allocation-requests]').dataset.allocationRequests") == \
        cli['allocation_requests']
    browser.shot('explain')
    assert browser.severe() == []


def heat(aio, method, path, body=None):
    url = aio.orchestration_url() + '/v1/admin' + path
    h = {'x-auth-user': 'admin', 'x-auth-project': 'admin', 'accept': 'application/json'}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h['content-type'] = 'application/json'
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read()
        return json.loads(raw) if raw else None


CHAIN = {
    'heat_template_version': '2018-08-31',
    'resources': {
        'first': {'type': 'OS::Heat::TestResource', 'properties': {'value': 'a', 'wait_secs': 3}},
        'second': {'type': 'OS::Heat::TestResource', 'depends_on': ['first'],
                   'properties': {'value': 'b', 'wait_secs': 1}},
        'third': {'type': 'OS::Heat::TestResource', 'depends_on': ['second'], 'properties': {'value': 'c'}},
        'side': {'type': 'OS::Heat::TestResource', 'depends_on': ['first'], 'properties': {'value': 'd'}},
    },
}


def test_stack_graph_turns_green(browser, sqlite_fleet):
    fleet = sqlite_fleet
    name = 'console-' + new_uuid()[:8]
    heat(fleet.aio, 'POST', '/stacks', {'stack_name': name, 'template': CHAIN})
    browser.open(console_url(fleet.aio, 'stacks'))
    row = browser.wait("document.querySelector('#stack-list tr[data-name=\"%s\"]')" % name, what='stack listed')
    row.click()
    browser.wait("document.querySelectorAll('#stack-graph g.node').length === 4", what='graph drawn')
    seen_progress = browser.js("return document.querySelectorAll('#stack-graph g.status-progress, "
                               "#stack-graph g.status-init').length > 0")
    browser.shot('stack-in-progress')
    browser.wait("[...document.querySelectorAll('#stack-graph g.node')].every(g => "
                 "g.dataset.status === 'CREATE_COMPLETE' && g.classList.contains('status-complete'))",
                 timeout=60, what='graph green')
    browser.wait("document.getElementById('stack-detail').dataset.status === 'CREATE_COMPLETE'", what='stack done')
    assert seen_progress, 'the graph was drawn only after the stack completed'
    assert browser.js("return document.querySelectorAll('#stack-graph path.edge').length") == 3
    # The fill the stylesheet gives a complete node is green.
    assert browser.js("return getComputedStyle(document.querySelector('#stack-graph g.node rect')).fill") == \
        'rgb(47, 158, 68)'
    browser.wait("[...document.querySelectorAll('#stack-events li')].filter(li => "
                 "li.textContent.includes('CREATE_COMPLETE')).length >= 4", what='events')
    browser.shot('stack-complete')
    assert browser.severe() == []


def test_controller_view(browser, sqlite_fleet):
    fleet = sqlite_fleet
    browser.open(console_url(fleet.aio, 'controller'))
    browser.wait("document.getElementById('controller-summary').dataset.primary", what='primary shown')
    summary = browser.js("const s = document.getElementById('controller-summary').dataset;"
                         "return [s.primary, +s.term];")
    status, _, doc = http('GET', fleet.aio.url + DATA + '/controller')
    assert status == 200 and doc['configured'], doc
    primary = [n['status'] for n in doc['nodes'] if n['status']['responderRole'] == 'PRIMARY']
    assert summary == [primary[0]['responderName'], primary[0]['term']] and summary[1] >= 1
    assert browser.js("return document.querySelector('#controller-nodes tr[data-role=PRIMARY]') !== null")
    # The timeline draws the samples the gateway took.
    browser.wait("document.querySelectorAll('#controller-timeline rect.band').length > 0", what='timeline')
    browser.shot('controller')
    assert browser.severe() == []


def test_metrics_chart(browser, sqlite_fleet):
    fleet = sqlite_fleet
    browser.open(console_url(fleet.aio, 'metrics'))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for _ in range(20):
            http('GET', fleet.aio.url + '/resource_providers')
        if browser.js("return +(document.getElementById('metrics-rate').dataset.points || 0) > 0 && "
                      "document.querySelectorAll('#metrics-rate path.series').length > 0"):
            break
        time.sleep(0.5)
    else:
        raise AssertionError('no rate chart: %s' % browser.shot('metrics-timeout'))
    series = browser.js("return [...document.querySelectorAll('#metrics-rate path.series')].map(p => p.dataset.series)")
    assert 'placement /resource_providers' in series, series
    assert browser.js("return +document.querySelector('#metrics-table tr[data-route=\"/resource_providers\"]')"
                      ".dataset.count") >= 20
    browser.shot('metrics')
    assert browser.severe() == []


# ---- Keystone --------------------------------------------------------------

@pytest.fixture(scope='module')
def keystone_aio(module_procs):
    from keystone import ADMIN_PASSWORD, PASSWORD, start_keystone
    ks = start_keystone(module_procs)
    extra = {'api': {'auth_strategy': 'keystone'}, 'orchestration': {'auth_strategy': 'keystone'}, 'keystone_authtoken': {
        'auth_url': ks.url, 'www_authenticate_uri': ks.url + '/v3', 'auth_type': 'password',
        'username': 'placement', 'password': PASSWORD, 'project_name': 'service',
        'user_domain_name': 'Default', 'project_domain_name': 'Default'}}
    aio = AllInOne(module_procs, create_database('sqlite', 'console_ks'), extra=extra)
    return aio, ks, ADMIN_PASSWORD, PASSWORD


def test_keystone_login_and_non_admin(browser, keystone_aio):
    aio, ks, admin_password, password = keystone_aio
    base = aio.url + DATA
    status, _, answer = http('GET', base + '/session', token=None)
    assert (status, answer) == (200, {'auth_strategy': 'keystone'})
    # A non-admin: a token by the console's login, refused every data
    # endpoint.
    status, _, answer = http('POST', base + '/login', {'username': 'member', 'password': password, 'project': 'demo'},
                             token=None)
    assert status == 200, answer
    member = answer['token']
    for path in ('/fleet', '/stacks', '/controller', '/metrics'):
        status, _, answer = http('GET', base + path, token=member)
        assert status == 403, (path, answer)
    status, _, answer = http('GET', aio.url + '/keelson/v1/placement/explain?resources=VCPU:1', token=member)
    assert status == 403, answer
    status, _, answer = http('POST', base + '/login', {'username': 'member', 'password': 'wrong', 'project': 'demo'},
                             token=None)
    assert status == 401, answer
    # The admin logs in on the page itself.
    browser.open(aio.url + '/keelson/console/#fleet')
    browser.wait("!document.getElementById('login').hidden", what='login form')
    browser.js("const f = document.getElementById('login-password');"
               "f.elements.username.value = 'admin'; f.elements.password.value = arguments[0];"
               "f.elements.project.value = 'admin'; f.requestSubmit();", admin_password)
    wait_fleet(browser)
    assert browser.js("return sessionStorage.length") == 1
    assert browser.js("return localStorage.length") == 0
    assert browser.severe() == []
