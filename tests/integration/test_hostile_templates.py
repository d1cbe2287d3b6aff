"""Hostile templates against `keelson all-in-one`'s Orchestration API
(issue 15, defect 1): template functions that would build huge values
(repeat cross products, nested repeats, joins, str_replace and map_replace
amplification, digests of huge strings, get_attr chains) are refused with
Heat's RequestLimitExceeded, at validation when the values are known
there, else by failing the resource, and the process stays healthy with a
bounded peak RSS. And the crash-loop guard: an operation whose engine dies
every time it runs is re-triggered by the watchdog twice, then the stack is
marked FAILED with its reason, and the engine stays up."""
import os
import signal
import time
import uuid

import pytest

from conftest import BACKENDS, AllInOne, create_database, http
from heat import Heat

# The whole process (both APIs, every service) may peak at this while
# every bomb below is refused; the reported 3,000 x 3,000 repeat alone took
# it past 1.7 GB before it died.
PEAK_RSS_LIMIT_KIB = 300 * 1024

BODY_LIMIT = 1048576
ITEMS_LIMIT = 262144
HOT = '2018-08-31'


def name(prefix):
    return '%s-%s' % (prefix, uuid.uuid4().hex[:6])


def numbers(n):
    return ['v%d' % i for i in range(n)]


def value_stack(value, parameters=None):
    t = {'heat_template_version': HOT, 'resources': {'v': {'type': 'OS::Heat::Value', 'properties': {'value': value}}}}
    if parameters:
        t['parameters'] = parameters
    return t


def limit_message(function, reached, unit='items'):
    limit = ITEMS_LIMIT if unit == 'items' else BODY_LIMIT
    return ('Request limit exceeded: %s: the values produced would reach %d %s, which exceeds the limit of %d %s '
            'per evaluation' % (function, reached, unit, limit, unit))


def vm_hwm_kib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1])
    raise AssertionError('no VmHWM for %d' % pid)


@pytest.fixture(scope='module')
def aio():
    started = []
    server = AllInOne(started, create_database(BACKENDS[0], 'hostile_%s' % uuid.uuid4().hex[:8]))
    yield server
    for p in started:
        p.stop()


@pytest.fixture(scope='module')
def heat(aio):
    return Heat(aio.orchestration_url(), project='admin')


def stack_names(heat):
    status, _, doc = heat.call('GET', '/stacks')
    assert status == 200, (status, doc)
    return sorted(s['stack_name'] for s in doc['stacks'])


def assert_healthy(aio, heat):
    """Both APIs answer and a small real stack still creates."""
    assert aio.proc.p.poll() is None, aio.proc.output()[-4000:]
    status, _, _ = http('GET', aio.url + '/')
    assert status == 200
    n = name('small')
    sid = heat.create(n, value_stack({'list_join': [',', ['a', 'b']]}))
    st = heat.wait(sid, 'CREATE_COMPLETE', timeout=60)
    assert st['stack_status_reason'] == 'Stack CREATE completed successfully'
    assert heat.resources(n, sid)['v']['resource_status'] == 'CREATE_COMPLETE'
    heat.delete(n, sid)
    heat.wait(sid, 'GONE', timeout=60)


def refused_at_create(heat, template, parameters=None):
    """POST /stacks of `template`: answers the fault; no stack was made."""
    before = stack_names(heat)
    n = name('bomb')
    status, _, doc = heat.call('POST', '/stacks', {'stack_name': n, 'template': template,
                                                   'parameters': parameters or {}, 'disable_rollback': True})
    assert status == 400, (status, doc)
    assert doc['code'] == 400 and doc['title'] == 'Bad Request', doc
    assert doc['error']['type'] == 'RequestLimitExceeded', doc
    assert stack_names(heat) == before, 'a refused stack left data behind'
    return doc['error']['message']


# Each bomb: (template, parameters, the exact refusal). Each is refused at
# validation, where its values are already known.
BIG = 'x' * 300000
BOMBS = {
    # The reproducer: two lists of 3,000 crossed (9e6 results).
    'repeat_cross_product': (
        value_stack({'repeat': {'template': '<%a%-%b%>', 'for_each': {'%a%': numbers(3000), '%b%': numbers(3000)}}}),
        None,
        limit_message('repeat', 9000000)),
    # 10^6 results, where the engine used to hold 1.7 GB.
    'repeat_million': (
        value_stack({'repeat': {'template': 'x', 'for_each': {'%a%': numbers(1000), '%b%': numbers(1000)}}}),
        None,
        limit_message('repeat', 1000000)),
    'nested_repeat': (
        value_stack({'repeat': {'template': [{'repeat': {'template': '%b%', 'for_each': {'%b%': numbers(300)}}}],
                                'for_each': {'%a%': numbers(300), '%c%': numbers(30)}}}),
        None,
        # 9,000 copies of a 300-item list, plus the inner list held meanwhile.
        limit_message('repeat', 300 * 30 * 302 + 300)),
    'list_join_of_huge_repeat': (
        value_stack({'list_join': ['', {'repeat': {'template': 'y' * 200, 'for_each': {'%a%': numbers(6000)}}}]}),
        None,
        limit_message('repeat', 1048582, 'bytes')),
    'str_replace_amplification': (
        value_stack({'str_replace': {'template': '$' * 5000, 'params': {'$': 'z' * 1000}}}),
        None,
        limit_message('str_replace', 5000002, 'bytes')),
    'str_replace_strict_amplification': (
        value_stack({'str_replace_strict': {'template': '$' * 5000, 'params': {'$': 'z' * 1000}}}),
        None,
        limit_message('str_replace_strict', 5000002, 'bytes')),
    'map_replace_amplification': (
        value_stack({'map_replace': [{'k%d' % i: 's' for i in range(2000)}, {'values': {'s': {'get_param': 'big'}}}]},
                    {'big': {'type': 'string'}}),
        {'big': BIG},
        None),
    'map_merge_of_parameter_copies': (
        value_stack({'map_merge': [{'get_param': 'm'}] * 3},
                    {'m': {'type': 'json'}}),
        {'m': {'k%d' % i: 'v' * 200 for i in range(1000)}},
        None),
    'digest_of_a_huge_string': (
        value_stack({'digest': ['sha512', {'list_join': ['', {'repeat': {'template': 'q' * 1000,
                                                                          'for_each': {'%a%': numbers(2000)}}}]}]}),
        None,
        None),
    'str_split_into_too_many_parts': (
        value_stack({'str_split': [',', {'get_param': 'commas'}]}, {'commas': {'type': 'string'}}),
        {'commas': ',' * 300000},
        limit_message('str_split', 300001)),
    'parameter_copies': (
        value_stack([{'get_param': 'big'}] * 4, {'big': {'type': 'string'}}),
        {'big': BIG},
        None),
}


@pytest.mark.parametrize('bomb', sorted(BOMBS))
def test_bomb_is_refused_at_validation(aio, heat, bomb):
    template, parameters, expected = BOMBS[bomb]
    message = refused_at_create(heat, template, parameters)
    if expected is not None:
        assert message == expected
    else:
        function = {'map_replace_amplification': 'map_replace', 'map_merge_of_parameter_copies': 'map_merge',
                    'digest_of_a_huge_string': 'repeat', 'parameter_copies': 'get_param'}[bomb]
        assert message.startswith('Request limit exceeded: %s: the values produced would reach ' % function), message
        assert message.endswith('which exceeds the limit of %d bytes per evaluation' % BODY_LIMIT), message
    # Stack validation answers the same.
    status, _, doc = heat.call('POST', '/validate', {'template': template, 'parameters': parameters or {}})
    assert (status, doc['error']['type'], doc['error']['message']) == (400, 'RequestLimitExceeded', message), doc
    assert_healthy(aio, heat)


def test_get_attr_chain_fails_the_resource(aio, heat):
    """Values that only exist once resources do (get_attr) are bounded
    where the resource's properties are resolved: each Value doubles the
    previous one, the third would hold 1.2 MB and fails."""
    resources = {'v0': {'type': 'OS::Heat::Value', 'properties': {'value': {'get_param': 'big'}}}}
    for i in range(1, 4):
        prev = {'get_attr': ['v%d' % (i - 1), 'value']}
        resources['v%d' % i] = {'type': 'OS::Heat::Value', 'properties': {'value': [prev, prev]}}
    template = {'heat_template_version': HOT, 'parameters': {'big': {'type': 'string'}}, 'resources': resources,
                'outputs': {'all': {'value': [{'get_attr': ['v1', 'value']}] * 3}}}
    n = name('chain')
    sid = heat.create(n, template, parameters={'big': BIG})
    st = heat.wait(sid, 'CREATE_FAILED', timeout=120)
    res = heat.resources(n, sid)
    assert res['v1']['resource_status'] == 'CREATE_COMPLETE'
    assert res['v2']['resource_status'] == 'CREATE_FAILED'
    reason = res['v2']['resource_status_reason']
    assert reason.startswith('RequestLimitExceeded: resources.v2: Request limit exceeded: get_attr: '
                             'the values produced would reach '), reason
    assert reason.endswith('which exceeds the limit of %d bytes per evaluation' % BODY_LIMIT), reason
    assert st['stack_status_reason'] == 'Resource CREATE failed: ' + reason, st['stack_status_reason']
    # An output over the budget answers its error, the stack stays readable.
    status, _, doc = heat.call('GET', '/stacks/%s/%s/outputs/all' % (n, sid))
    assert status == 200, (status, doc)
    assert doc['output']['output_error'].startswith('Request limit exceeded: get_attr: '), doc
    heat.delete(n, sid)
    heat.wait(sid, 'GONE', timeout=60)
    assert_healthy(aio, heat)


def test_peak_rss_stays_bounded(aio, heat):
    """Runs last in this module (pytest keeps definition order): every bomb
    above has been refused by now, twice each (create and validate)."""
    for bomb in ('repeat_cross_product', 'repeat_million', 'list_join_of_huge_repeat'):
        template, parameters, _ = BOMBS[bomb]
        refused_at_create(heat, template, parameters)
    assert_healthy(aio, heat)
    peak = vm_hwm_kib(aio.proc.p.pid)
    print('peak RSS of all-in-one: %d KiB' % peak)
    assert peak < PEAK_RSS_LIMIT_KIB, 'peak RSS %d KiB' % peak


# The crash-loop guard. A SIGKILL during the check of a resource that
# waits stands for the engine killed by what it checks.
CRASH_BACKENDS = [b for b in BACKENDS if b in ('sqlite', 'mysql')]
SLOW = {'heat_template_version': HOT, 'resources': {
    'slow': {'type': 'OS::Heat::TestResource', 'properties': {'value': 'x', 'action_wait_secs': {'create': 600}}}}}
# The watchdog's pass runs every second here, so the test does not wait
# for the default five.
FAST_WATCHDOG = {'orchestration': {'periodic_interval': '1'}}


def count_events(heat, n, sid, status, reason=None):
    return sum(1 for e in heat.events(n, sid) if e['resource_name'] == 'slow' and e['resource_status'] == status
               and (reason is None or e['resource_status_reason'] == reason))


def wait_for(what, predicate, timeout=120):
    # Generous: the watchdog needs the dead engine's heartbeat to age
    # past engine_life_check_timeout, then a pass.
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError('%s: not within %ss' % (what, timeout))


def kill(aio):
    os.killpg(aio.proc.p.pid, signal.SIGKILL)
    aio.proc.p.wait(10)


@pytest.mark.parametrize('backend', CRASH_BACKENDS)
def test_crash_loop_ends_with_the_stack_failed(procs, backend):
    db = create_database(backend, 'crash_%s' % uuid.uuid4().hex[:8])
    # The restarted process must find the stack: the orchestration
    # database is named, not left in the process's own data directory.
    extra = dict(FAST_WATCHDOG, database={'connection': create_database(backend, 'crash_o_%s' % uuid.uuid4().hex[:8])})
    aio = AllInOne(procs, db, extra=extra)
    heat = Heat(aio.orchestration_url(), project='admin')
    n = name('poison')
    sid = heat.create(n, SLOW)
    wait_for('first check running', lambda: count_events(heat, n, sid, 'CREATE_IN_PROGRESS') == 1)
    for restart in (1, 2):
        kill(aio)
        aio = AllInOne(procs, db, extra=extra)
        heat = Heat(aio.orchestration_url(), project='admin')
        # The watchdog reclaims the dead engine's lock and runs the check
        # again, which "kills" this engine too.
        wait_for('re-trigger %d' % restart,
                 lambda: count_events(heat, n, sid, 'CREATE_IN_PROGRESS') == restart + 1)
        assert count_events(heat, n, sid, 'CREATE_FAILED', 'Worker went down during resource CREATE') == restart
        assert heat.stack(sid)['stack_status'] == 'CREATE_IN_PROGRESS'
    kill(aio)
    aio = AllInOne(procs, db, extra=extra)
    heat = Heat(aio.orchestration_url(), project='admin')
    st = heat.wait(sid, 'CREATE_FAILED', timeout=120)
    assert st['stack_status_reason'] == ('Engine went down during stack CREATE 3 times '
                                         '(re-triggered 2 times by the watchdog); not re-triggered again')
    # Not run again: several watchdog passes later the check has not
    # started a fourth time, and the engine is up and working.
    time.sleep(5)
    assert count_events(heat, n, sid, 'CREATE_IN_PROGRESS') == 3
    assert heat.stack(sid)['stack_status'] == 'CREATE_FAILED'
    assert_healthy(aio, heat)
