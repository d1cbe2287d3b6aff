"""The controller's singleton duties on a single-node `keelson controller`:
two `keelson engine` processes register with it (service "stack-engine")
and leave the watchdog to it; a `kill -9` of an engine during a
50-resource create is healed by the primary's duty (the dead engine's
locks reclaimed once its registration expired, the traversal
re-triggered); and the standard traits and resource classes are synced by
the primary into a Placement database whose schema was created without
them (an inventory service configured with a controller does not seed)."""
import os
import re
import signal
import sqlite3
import time
import uuid

from conftest import BACKENDS, Proc, create_database, free_port, keelson_bin, wait_port, write_conf
from heat import Mesh


def name(prefix):
    return '%s-%s' % (prefix, uuid.uuid4().hex[:6])


def tr(value, **props):
    props['value'] = value
    return {'type': 'OS::Heat::TestResource', 'properties': props}


def wait_for(what, probe, timeout, interval=0.1, logs=None):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError('%s: not within %ss (last: %r)\n%s' % (what, timeout, last, logs() if logs else ''))


def test_killed_engine_locks_reclaimed_by_the_primary_duty(procs):
    backend = 'mysql' if 'mysql' in BACKENDS else 'sqlite'
    url = create_database(backend, 'heat_duty_%s' % uuid.uuid4().hex[:8])
    mesh = Mesh(procs, url, engines=2, controller=True)
    logs = lambda: '\n'.join('--- %s ---\n%s' % (n, p.output()[-3000:]) for n, p in
                             [('controller', mesh.controller)] + [('engine%d' % i, e) for i, e in enumerate(mesh.engines)])
    for e in mesh.engines:
        wait_for('engine registered', lambda: 'registered with the controller' in e.output(), 20, logs=logs)
    heat = mesh.heat
    resources = {'r0': tr('0', wait_secs=0.3)}
    for i in range(1, 50):
        resources['r%d' % i] = tr({'get_attr': ['r%d' % ((i - 1) // 3), 'output']}, wait_secs=0.3)
    n = name('duty')
    sid = heat.create(n, {'heat_template_version': '2018-08-31', 'resources': resources})
    wait_for('10 resources created',
             lambda: sum(1 for e in heat.events(n, sid) if e['resource_status'] == 'CREATE_COMPLETE') >= 10, 60, logs=logs)
    victim, survivor = mesh.engines
    os.killpg(victim.p.pid, signal.SIGKILL)
    victim.p.wait(10)
    st = heat.wait(sid, 'CREATE_COMPLETE', timeout=180)
    assert st['stack_status_reason'] == 'Stack CREATE completed successfully'
    res = heat.resources(n, sid)
    assert len(res) == 50
    assert all(r['resource_status'] == 'CREATE_COMPLETE' for r in res.values()), \
        {k: r['resource_status'] for k, r in res.items() if r['resource_status'] != 'CREATE_COMPLETE'}
    # The primary's duty, run on the surviving engine, recovered the stack:
    # it reclaimed the dead engine's locks ("Worker went down during
    # resource CREATE") when the victim held some at the kill, and
    # re-triggered the traversal whose messages the victim took with it.
    duties = [(int(m.group(1)), int(m.group(2))) for m in re.finditer(
        r'watchdog duty: engine \S+: (\d+) locks reclaimed, (\d+) traversals re-triggered', mesh.controller.output())]
    assert sum(locks + stacks for locks, stacks in duties) > 0, logs()
    reasons = [e['resource_status_reason'] for e in heat.events(n, sid)]
    if any(locks for locks, _ in duties):
        assert 'Worker went down during resource CREATE' in reasons, logs()
    assert 'asked by the controller' in survivor.output(), logs()


def test_standard_traits_synced_by_the_primary(procs):
    d = create_database('sqlite', 'placement_%s' % uuid.uuid4().hex[:8])
    path = d[len('sqlite:///'):]
    ctl_port = free_port()
    inv_port = free_port()
    tmp = os.path.dirname(path)
    common = {'placement_database': {'connection': d}}
    # An inventory service configured with a controller creates the schema
    # but leaves the standard traits and classes to the primary.
    inv_conf = write_conf(os.path.join(tmp, 'inventory.conf'), {
        'placement_database': {'connection': d, 'sync_on_startup': 'true'},
        'controller': {'peers': 'c1=127.0.0.1:%d' % ctl_port},
        'keelson': {'inventory_listen': '127.0.0.1:%d' % inv_port},
    })
    inv = Proc([keelson_bin(), '--config-file', inv_conf, 'inventory'], cwd=tmp)
    procs.append(inv)
    wait_port(inv_port, proc=inv)

    def count(table):
        c = sqlite3.connect(path)
        try:
            return c.execute('SELECT COUNT(*) FROM %s' % table).fetchone()[0]
        finally:
            c.close()

    assert count('traits') == 0 and count('resource_classes') == 0

    conf = write_conf(os.path.join(tmp, 'controller.conf'), dict(common, **{
        'controller': {'name': 'c1', 'listen': '127.0.0.1:%d' % ctl_port},
        'keelson': {'data_dir': os.path.join(tmp, 'c1')},
    }))
    c = Proc([keelson_bin(), '--config-file', conf, 'controller'], cwd=tmp)
    procs.append(c)
    wait_port(ctl_port, proc=c)
    wait_for('standard traits', lambda: count('traits') > 100 and count('resource_classes') > 10, 20, logs=c.output)
    assert 'standard traits and classes sync (term 1)' in c.output(), c.output()
    c_out = c.output()
    assert c_out.count('standard traits and classes sync') == 1, c_out
