"""The stack engine as operators run it: two `keelson engine` processes on
one real database (SQLite file, MariaDB) behind a `keelson gateway`,
driven through the Orchestration REST API.

Seed scenarios 1-4 (diamond create, update during update, failure with and
without rollback, delete during create) and the engine-death case: a
`kill -9` of an engine in the middle of a 50-resource create."""
import os
import signal
import time
import uuid

import pytest

from conftest import BACKENDS, create_database
from heat import Mesh

HEAT_BACKENDS = [b for b in BACKENDS if b in ('sqlite', 'mysql')]


@pytest.fixture(params=HEAT_BACKENDS)
def mesh(request, procs):
    url = create_database(request.param, 'heat_%s' % uuid.uuid4().hex[:8])
    return Mesh(procs, url, engines=2)


def name(prefix):
    return '%s-%s' % (prefix, uuid.uuid4().hex[:6])


def tr(value, **props):
    props['value'] = value
    return {'type': 'OS::Heat::TestResource', 'properties': props}


DIAMOND = {
    'heat_template_version': '2018-08-31',
    'resources': {
        'a': tr('a', wait_secs=0.2),
        'b': tr({'get_attr': ['a', 'output']}, wait_secs=0.2),
        'c': tr({'get_attr': ['a', 'output']}, wait_secs=0.2),
        'd': tr({'list_join': ['+', [{'get_attr': ['b', 'output']}, {'get_attr': ['c', 'output']}]]}),
    },
    'outputs': {'d': {'value': {'get_attr': ['d', 'output']}}},
}


def resource_events(events):
    """[(resource, ACTION_STATUS, reason)] of the events of resources a-d."""
    return [(e['resource_name'], e['resource_status'], e['resource_status_reason'])
            for e in events if e['resource_name'] in ('a', 'b', 'c', 'd')]


def first(events, res, status):
    return next(i for i, e in enumerate(events) if e[0] == res and e[1] == status)


def test_diamond_create(mesh):
    """Scenario 1: b and c wait for a, d waits for both; every resource is
    created once, the stack completes once, the outputs see the data."""
    heat = mesh.heat
    n = name('diamond')
    sid = heat.create(n, DIAMOND)
    st = heat.wait(sid, 'CREATE_COMPLETE')
    assert st['stack_status_reason'] == 'Stack CREATE completed successfully'
    assert heat.output(n, sid, 'd') == 'a+a'
    ev = resource_events(heat.events(n, sid))
    for r in 'abcd':
        assert [s for (x, s, _) in ev if x == r] == ['CREATE_IN_PROGRESS', 'CREATE_COMPLETE'], (r, ev)
    assert first(ev, 'a', 'CREATE_COMPLETE') < first(ev, 'b', 'CREATE_IN_PROGRESS')
    assert first(ev, 'a', 'CREATE_COMPLETE') < first(ev, 'c', 'CREATE_IN_PROGRESS')
    assert first(ev, 'b', 'CREATE_COMPLETE') < first(ev, 'd', 'CREATE_IN_PROGRESS')
    assert first(ev, 'c', 'CREATE_COMPLETE') < first(ev, 'd', 'CREATE_IN_PROGRESS')
    stack_events = [e['resource_status_reason'] for e in heat.events(n, sid) if e['resource_name'] == n]
    assert stack_events == ['Stack CREATE started', 'Stack CREATE completed successfully']
    heat.delete(n, sid)
    heat.wait(sid, 'GONE')


def chain_template(value, update_wait):
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'a': tr(value, action_wait_secs={'update': update_wait}),
            'b': tr({'get_attr': ['a', 'output']}),
        },
        'outputs': {'b': {'value': {'get_attr': ['b', 'output']}}},
    }


def test_update_during_update(mesh):
    """Scenario 2: a second update while the first is in progress wins;
    the first traversal never completes, b is updated with the final
    value, and the stack completes once."""
    heat = mesh.heat
    n = name('uu')
    sid = heat.create(n, chain_template('v0', 0))
    heat.wait(sid, 'CREATE_COMPLETE')
    heat.update(n, sid, chain_template('v1', 3))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(e[:2] == ('a', 'UPDATE_IN_PROGRESS') for e in resource_events(heat.events(n, sid))):
            break
        time.sleep(0.1)
    heat.update(n, sid, chain_template('v2', 0))
    st = heat.wait(sid, 'UPDATE_COMPLETE', timeout=60)
    assert heat.output(n, sid, 'b') == 'v2'
    events = heat.events(n, sid)
    stack_reasons = [e['resource_status_reason'] for e in events if e['resource_name'] == n]
    assert stack_reasons.count('Stack UPDATE started') == 2, stack_reasons
    assert stack_reasons.count('Stack UPDATE completed successfully') == 1, stack_reasons
    b_updates = [e for e in resource_events(events) if e[0] == 'b' and e[1] == 'UPDATE_COMPLETE']
    assert len(b_updates) == 1, b_updates
    assert st['stack_status_reason'] == 'Stack UPDATE completed successfully'


FAILING = {
    'heat_template_version': '2018-08-31',
    'resources': {
        'a': tr('ok'),
        'bad': {'type': 'OS::Heat::TestResource', 'properties': {'fail': True}, 'depends_on': 'a'},
    },
}


def test_failure_without_rollback(mesh):
    """Scenario 3, disable_rollback true (the default): the stack fails
    with the failing resource's cause; the created resource stays."""
    heat = mesh.heat
    n = name('fail')
    sid = heat.create(n, FAILING)
    st = heat.wait(sid, 'CREATE_FAILED')
    assert st['stack_status_reason'] == 'Resource CREATE failed: ValueError: resources.bad: Test Resource failed bad'
    res = heat.resources(n, sid)
    assert res['a']['resource_status'] == 'CREATE_COMPLETE'
    assert res['bad']['resource_status'] == 'CREATE_FAILED'
    bad = [e for e in heat.events(n, sid) if e['resource_name'] == 'bad' and e['resource_status'] == 'CREATE_FAILED']
    assert bad and bad[0]['resource_status_reason'] == 'ValueError: resources.bad: Test Resource failed bad'


def test_failure_with_rollback(mesh):
    """Scenario 3, disable_rollback false: the stack rolls back to nothing;
    the cause survives in the failing resource's event."""
    heat = mesh.heat
    n = name('rollback')
    sid = heat.create(n, FAILING, disable_rollback=False)
    st = heat.wait(sid, 'ROLLBACK_COMPLETE')
    assert st['stack_status_reason'] == 'Stack ROLLBACK completed successfully'
    assert heat.resources(n, sid) == {}
    events = heat.events(n, sid)
    bad = [e for e in events if e['resource_name'] == 'bad' and e['resource_status'] == 'CREATE_FAILED']
    assert bad and 'Test Resource failed bad' in bad[0]['resource_status_reason']
    a_deleted = [e for e in events if e['resource_name'] == 'a' and e['resource_status'] == 'DELETE_COMPLETE']
    assert a_deleted
    stack = [e['resource_status'] for e in events if e['resource_name'] == n]
    assert stack == ['CREATE_IN_PROGRESS', 'CREATE_FAILED', 'ROLLBACK_IN_PROGRESS', 'ROLLBACK_COMPLETE'], stack


def test_delete_during_create(mesh):
    """Scenario 4: DELETE while resources are being created answers 204 at
    once; the in-flight resources are cancelled ("CREATE aborted") and
    everything is deleted, long before their waits could have ended."""
    heat = mesh.heat
    n = name('dc')
    tmpl = {
        'heat_template_version': '2018-08-31',
        'resources': {
            'fast': tr('f'),
            'slow1': {'type': 'OS::Heat::TestResource', 'properties': {'wait_secs': 600}, 'depends_on': 'fast'},
            'slow2': {'type': 'OS::Heat::TestResource', 'properties': {'wait_secs': 600}, 'depends_on': 'fast'},
            'never': {'type': 'OS::Heat::TestResource', 'depends_on': ['slow1', 'slow2']},
        },
    }
    sid = heat.create(n, tmpl)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ev = heat.events(n, sid)
        if sum(1 for e in ev if e['resource_name'] in ('slow1', 'slow2') and e['resource_status'] == 'CREATE_IN_PROGRESS') == 2:
            break
        time.sleep(0.1)
    heat.delete(n, sid)
    heat.wait(sid, 'GONE', timeout=60)
    # The stack row is soft-deleted: its events stay readable by id.
    status, _, doc = heat.call('GET', '/stacks/%s/%s/events?sort_dir=asc' % (n, sid))
    assert status == 200, (status, doc)
    reasons = [(e['resource_name'], e['resource_status'], e['resource_status_reason']) for e in doc['events']]
    assert (n, 'CREATE_FAILED', 'Stack CREATE cancelled') in reasons, reasons
    assert ('slow1', 'CREATE_FAILED', 'CREATE aborted (user triggered cancel)') in reasons, reasons
    assert ('slow2', 'CREATE_FAILED', 'CREATE aborted (user triggered cancel)') in reasons, reasons
    assert (n, 'DELETE_COMPLETE', 'Stack DELETE completed successfully') in reasons, reasons
    assert not any(r == 'never' for (r, _, _) in reasons)


def test_engine_killed_mid_create(procs, request):
    """kill -9 of an engine while a 50-resource stack is being created: the
    locks it held are stolen ("Worker went down during resource CREATE")
    and the stack still reaches CREATE_COMPLETE with no user action."""
    backend = 'mysql' if 'mysql' in HEAT_BACKENDS else 'sqlite'
    url = create_database(backend, 'heat_kill_%s' % uuid.uuid4().hex[:8])
    mesh = Mesh(procs, url, engines=2)
    heat = mesh.heat
    resources = {'r0': tr('0', wait_secs=0.3)}
    for i in range(1, 50):
        resources['r%d' % i] = tr({'get_attr': ['r%d' % ((i - 1) // 3), 'output']}, wait_secs=0.3)
    n = name('kill')
    sid = heat.create(n, {'heat_template_version': '2018-08-31', 'resources': resources})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = sum(1 for e in heat.events(n, sid) if e['resource_status'] == 'CREATE_COMPLETE')
        if done >= 10:
            break
        time.sleep(0.1)
    victim = mesh.engines[0]
    os.killpg(victim.p.pid, signal.SIGKILL)
    victim.p.wait(10)
    st = heat.wait(sid, 'CREATE_COMPLETE', timeout=180)
    res = heat.resources(n, sid)
    assert len(res) == 50
    assert all(r['resource_status'] == 'CREATE_COMPLETE' for r in res.values()), \
        {k: r['resource_status'] for k, r in res.items() if r['resource_status'] != 'CREATE_COMPLETE'}
    assert st['stack_status_reason'] == 'Stack CREATE completed successfully'
