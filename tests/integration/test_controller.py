"""The HA controller against a real etcd: a 3-member etcd cluster (Debian
etcd-server) on free loopback ports and three `keelson controller`
processes, driven with `keelson ctl` exactly as an operator would.

Every test starts its own etcd cluster and controllers in a temporary
directory, bounds every wait, and stops every process it started."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import uuid

import pytest

from conftest import Proc, free_port, keelson_bin, wait_port, write_conf

ETCD = shutil.which('etcd')
pytestmark = pytest.mark.skipif(ETCD is None, reason='etcd (Debian etcd-server) is not installed')


class EtcdCluster:
    """Three etcd members on loopback."""

    def __init__(self, started, n=3):
        self.dir = tempfile.mkdtemp(prefix='kt-etcd-')
        started.dirs.append(self.dir)
        self.started = started
        self.members = [{'name': 'e%d' % i, 'client': free_port(), 'peer': free_port()} for i in range(1, n + 1)]
        self.proc = {}
        for m in self.members:
            self.start(m['name'], state='new')
        for m in self.members:
            self.wait_healthy(m)

    def member(self, name):
        return next(m for m in self.members if m['name'] == name)

    def start(self, name, state='existing'):
        m = self.member(name)
        cluster = ','.join('%s=http://127.0.0.1:%d' % (x['name'], x['peer']) for x in self.members)
        args = [ETCD, '--name', name, '--data-dir', os.path.join(self.dir, name),
                '--listen-client-urls', 'http://127.0.0.1:%d' % m['client'],
                '--advertise-client-urls', 'http://127.0.0.1:%d' % m['client'],
                '--listen-peer-urls', 'http://127.0.0.1:%d' % m['peer'],
                '--initial-advertise-peer-urls', 'http://127.0.0.1:%d' % m['peer'],
                '--initial-cluster', cluster, '--initial-cluster-token', os.path.basename(self.dir),
                '--initial-cluster-state', state,
                '--heartbeat-interval', '100', '--election-timeout', '1000']
        p = Proc(args)
        self.proc[name] = p
        self.started.append(p)
        return p

    def stop(self, name, sig=signal.SIGKILL):
        self.proc[name].stop(sig, timeout=10)

    def wait_healthy(self, m, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen('http://127.0.0.1:%d/health' % m['client'], timeout=1).read()
                if json.loads(body).get('health') == 'true':
                    return
            except Exception:
                pass
            time.sleep(0.1)
        raise AssertionError('etcd %s not healthy after %ss:\n%s' % (m['name'], timeout, self.proc[m['name']].output()[-3000:]))

    def endpoints(self):
        return ','.join('http://127.0.0.1:%d' % m['client'] for m in self.members)


class Controllers:
    """`keelson controller` processes c1..cN sharing one etcd."""

    def __init__(self, started, etcd, n=3, ttl=2, env=None):
        self.dir = tempfile.mkdtemp(prefix='kt-ctl-')
        started.dirs.append(self.dir)
        self.started = started
        self.etcd = etcd
        self.ttl = ttl
        self.cluster = 'kt%s' % uuid.uuid4().hex[:8]
        self.names = ['c%d' % i for i in range(1, n + 1)]
        self.port = {name: free_port() for name in self.names}
        self.proc = {}
        for name in self.names:
            self.start(name, env=env)

    def conf(self, name):
        peers = ','.join('%s=127.0.0.1:%d' % (n, self.port[n]) for n in self.names)
        return write_conf(os.path.join(self.dir, '%s.conf' % name), {
            'controller': {'name': name, 'listen': '127.0.0.1:%d' % self.port[name], 'peers': peers,
                           'cluster_name': self.cluster, 'lease_ttl': str(self.ttl)},
            'etcd': {'endpoints': self.etcd.endpoints()},
            'keelson': {'data_dir': os.path.join(self.dir, name)},
        })

    def start(self, name, env=None):
        p = Proc([keelson_bin(), '--config-file', self.conf(name), 'controller'],
                 env=dict({'RUST_LOG': 'keelson=info'}, **(env or {})))
        self.proc[name] = p
        self.started.append(p)
        wait_port(self.port[name], timeout=30, proc=p)
        return p

    def kill(self, name, sig=signal.SIGKILL):
        self.proc[name].stop(sig, timeout=10)

    def addr(self, name):
        return '127.0.0.1:%d' % self.port[name]

    def addrs(self, names=None):
        return [self.addr(n) for n in (names or self.names)]

    def logs(self):
        return '\n'.join('--- %s ---\n%s' % (n, p.output()[-4000:]) for n, p in self.proc.items())


class Started(list):
    """Processes in start order, and the directories they used."""

    def __init__(self):
        super().__init__()
        self.dirs = []

    def cleanup(self):
        # Reverse order: controllers before etcd. Each etcd member
        # preallocates 64 MB of WAL: the directories go too.
        for p in reversed(self):
            p.stop(signal.SIGTERM, timeout=10)
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def started():
    procs = Started()
    yield procs
    procs.cleanup()


def ctl(addrs, *args, timeout=60):
    return subprocess.run([keelson_bin(), 'ctl', '--controllers', ','.join(addrs)] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def status(addr):
    r = ctl([addr], 'ctrlstatus', '--json', timeout=20)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def wait_for(what, probe, timeout, interval=0.05, logs=None):
    """Polls `probe` until it returns something truthy; bounded."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (AssertionError, ValueError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError('%s: not within %ss (last: %r)\n%s' % (what, timeout, last, logs() if logs else ''))


def settled(cs, names=None):
    """Every node's status once all agree on one primary and have applied
    everything; None until then."""
    sts = {n: status(cs.addr(n)) for n in (names or cs.names)}
    primaries = {s['primaryName'] for s in sts.values()}
    if len(primaries) != 1 or '' in primaries:
        return None
    if any(s['fenced'] or s['appliedLsn'] != s['committedLsn'] or s['committedLsn'] == 0 for s in sts.values()):
        return None
    if len({s['configChecksum'] for s in sts.values()}) != 1:
        return None
    if any(s['responderRole'] not in ('PRIMARY', 'STANDBY') for s in sts.values()):
        return None
    return sts


def primary_of(sts):
    return next(n for n, s in sts.items() if s['responderRole'] == 'PRIMARY')


def test_healthy_cluster_one_primary_same_term_and_checksum(started):
    etcd = EtcdCluster(started)
    cs = Controllers(started, etcd, ttl=2)
    r = ctl(cs.addrs(), 'wait-primary', '--timeout', '30s', '--interval', '200ms')
    assert r.returncode == 0, r.stderr + cs.logs()
    assert r.stdout.startswith('Primary: c'), r.stdout

    sts = wait_for('cluster settled', lambda: settled(cs), 30, logs=cs.logs)
    roles = sorted(s['responderRole'] for s in sts.values())
    assert roles == ['PRIMARY', 'STANDBY', 'STANDBY'], sts
    primary = primary_of(sts)
    assert len({s['term'] for s in sts.values()}) == 1 and sts[primary]['term'] >= 1, sts
    # The singleton duties run on the primary only.
    duty = 'singleton duties running (primary of term %d)' % sts[primary]['term']
    wait_for('duties on the primary', lambda: duty in cs.proc[primary].output(), 10, logs=cs.logs)
    assert not any('singleton duties running' in cs.proc[n].output() for n in cs.names if n != primary), cs.logs()
    assert len({(s['configVersion'], s['configChecksum']) for s in sts.values()}) == 1, sts
    assert len(sts[primary]['configChecksum']) == 64
    assert int(sts[primary]['configChecksum'][:16], 16) == sts[primary]['configVersion']
    for name, s in sts.items():
        assert s['responderName'] == name
        assert s['clusterName'] == cs.cluster
        assert s['primaryName'] == primary
        assert s['primaryAddress'] == cs.addr(primary)
        assert s['peerCount'] == 3 and [p['name'] for p in s['peers']] == cs.names
        assert s['quorum'] is True and s['fenced'] is False

    # A standby reports the primary, in the human-readable form too.
    standby = next(n for n in cs.names if n != primary)
    r = ctl([cs.addr(standby)], 'ctrlstatus')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == 'Primary: %s' % primary, r.stdout
    assert lines[1] == 'answered by %s (STANDBY)' % standby, r.stdout
    assert 'Config checksum: %s' % sts[standby]['configChecksum'] in lines, r.stdout
    assert 'Config version: 0x%016x' % sts[standby]['configVersion'] in lines, r.stdout

    # A read on a standby is redirected to the primary; a write through a
    # standby lands on the primary and replicates to every node.
    conf = json.loads(ctl([cs.addr(standby)], 'clusterconf').stdout)
    conf['settings'] = {'candidates': {'max_candidates': 7}}
    path = os.path.join(cs.dir, 'new.json')
    with open(path, 'w') as f:
        json.dump(conf, f, indent=3)
    r = ctl([cs.addr(standby)], 'setconf', path)
    assert r.returncode == 0, r.stderr
    assert 'term %d' % sts[primary]['term'] in r.stdout, r.stdout
    after = wait_for('new config everywhere',
                     lambda: (lambda s: s if s and s[primary]['configChecksum'] != sts[primary]['configChecksum'] else None)(settled(cs)),
                     15, logs=cs.logs)
    assert len({s['configChecksum'] for s in after.values()}) == 1
    assert after[primary]['committedLsn'] == sts[primary]['committedLsn'] + 1

    # Invalid documents are refused with a non-zero exit.
    with open(path, 'w') as f:
        f.write('{"clusterName": ""}')
    r = ctl(cs.addrs(), 'setconf', path)
    assert r.returncode != 0 and 'clusterName' in r.stderr, (r.stdout, r.stderr)


def test_kill_primary_elects_a_new_primary_with_a_higher_term(started):
    etcd = EtcdCluster(started)
    cs = Controllers(started, etcd, ttl=2)
    sts = wait_for('cluster settled', lambda: settled(cs), 30, logs=cs.logs)
    old = primary_of(sts)
    term = sts[old]['term']

    killed_at = time.monotonic()
    cs.kill(old, signal.SIGKILL)
    survivors = [n for n in cs.names if n != old]
    r = ctl(cs.addrs(), 'wait-primary', '--timeout', '30s', '--interval', '100ms', '--min-term', str(term + 1))
    failover = time.monotonic() - killed_at
    assert r.returncode == 0, r.stderr + cs.logs()
    new = r.stdout.split()[1]
    assert new in survivors, r.stdout
    assert 'term %d' % (term + 1) in r.stdout or int(r.stdout.split('term ')[1].split(',')[0]) > term, r.stdout
    # TTL + etcd's expiry granularity + a probe; generous for a loaded CI box.
    assert failover < cs.ttl + 5, failover

    after = wait_for('survivors settled', lambda: settled(cs, survivors), 20, logs=cs.logs)
    assert primary_of(after) == new
    assert all(s['term'] > term for s in after.values()), after

    # The killed node comes back as a standby of the new primary; the term
    # it reports never goes back.
    cs.start(old)
    back = wait_for('restarted node settled', lambda: settled(cs), 30, logs=cs.logs)
    assert back[old]['responderRole'] == 'STANDBY'
    assert back[old]['primaryName'] == new
    assert back[old]['term'] == back[new]['term'] > term


def test_quorum_loss_primary_keeps_ctrlstatus_refuses_writes_then_steps_down(started):
    etcd = EtcdCluster(started)
    # A longer lease leaves a comfortable window between "no quorum" and
    # the step-down for the checks below.
    cs = Controllers(started, etcd, ttl=8)
    sts = wait_for('cluster settled', lambda: settled(cs), 40, logs=cs.logs)
    primary = primary_of(sts)
    term = sts[primary]['term']
    conf_path = os.path.join(cs.dir, 'conf.json')
    with open(conf_path, 'w') as f:
        json.dump({'clusterName': cs.cluster, 'settings': {'x': 1}}, f)

    # Two of three members gone: no etcd quorum.
    etcd.stop('e1')
    etcd.stop('e2')
    lost = wait_for('primary reports no quorum',
                    lambda: (lambda s: s if s['responderRole'] == 'PRIMARY' and not s['quorum'] else None)(status(cs.addr(primary))),
                    15, logs=cs.logs)
    noticed = time.monotonic()
    assert lost['primaryName'] == primary

    # Still answers ctrlstatus (and the safe read), refuses the write.
    assert status(cs.addr(primary))['responderName'] == primary
    r = ctl([cs.addr(primary)], 'setconf', conf_path)
    assert r.returncode != 0, r.stdout
    assert 'ERR_NO_QUORUM' in r.stderr, r.stderr
    r = ctl([cs.addr(primary)], 'clusterconf')
    assert r.returncode == 0, r.stderr

    # Steps down once its lease can no longer be valid.
    down = wait_for('primary steps down',
                    lambda: (lambda s: s if s['responderRole'] != 'PRIMARY' else None)(status(cs.addr(primary))),
                    cs.ttl + 5, logs=cs.logs)
    assert time.monotonic() - noticed <= cs.ttl + 1.5
    assert down['primaryName'] == ''
    assert down['term'] == term, 'the term never goes back'
    r = ctl([cs.addr(primary)], 'ctrlstatus')
    assert r.returncode == 0 and r.stdout.startswith('Primary: unknown\n'), r.stdout

    # etcd back: a primary again, of a higher term.
    etcd.start('e1')
    etcd.start('e2')
    r = ctl(cs.addrs(), 'wait-primary', '--timeout', '60s', '--interval', '200ms', '--min-term', str(term + 1))
    assert r.returncode == 0, r.stderr + cs.logs()


def test_restarted_node_is_fenced_until_it_has_caught_up(started):
    etcd = EtcdCluster(started)
    cs = Controllers(started, etcd, ttl=2)
    sts = wait_for('cluster settled', lambda: settled(cs), 30, logs=cs.logs)
    primary = primary_of(sts)
    lagging = next(n for n in cs.names if n != primary)
    cs.kill(lagging, signal.SIGKILL)

    # Entries committed while it is down.
    path = os.path.join(cs.dir, 'conf.json')
    for i in range(12):
        with open(path, 'w') as f:
            json.dump({'clusterName': cs.cluster, 'settings': {'generation': i}}, f)
        r = ctl([cs.addr(primary)], 'setconf', path)
        assert r.returncode == 0, r.stderr
    target = status(cs.addr(primary))
    assert target['committedLsn'] >= sts[primary]['committedLsn'] + 12

    # Restart it with a per-entry apply delay (test-only fault injection)
    # so that catching up takes a few seconds and can be watched.
    cs.start(lagging, env={'KEELSON_CONTROLLER_APPLY_DELAY_MS': '200'})
    samples = []
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        s = status(cs.addr(lagging))
        samples.append(s)
        if not s['fenced'] and s['appliedLsn'] == target['committedLsn']:
            break
        time.sleep(0.05)
    assert samples, 'no status sample'
    last = samples[-1]
    assert not last['fenced'] and last['appliedLsn'] == last['committedLsn'] == target['committedLsn'], samples[-3:]
    assert last['configChecksum'] == target['configChecksum']
    # It was seen catching up, fenced, applied < committed ...
    behind = [s for s in samples if s['fenced'] and s['appliedLsn'] < s['committedLsn']]
    assert behind, 'never observed catching up: %r' % samples[:3]
    # ... and never reported unfenced while behind.
    for s in samples:
        if not s['fenced']:
            assert s['appliedLsn'] == s['committedLsn'], s
    # Applied positions only move forward.
    applied = [s['appliedLsn'] for s in samples]
    assert applied == sorted(applied)
    # A fenced standby still answers ctrlstatus and knows the primary.
    assert all(s['primaryName'] in ('', primary) for s in samples)


def test_no_write_is_committed_under_an_old_term(started):
    """The primary is frozen (SIGSTOP) past its lease; a new primary takes
    over; the old one is thawed and immediately asked to write. Whatever
    the race between its step-down and the request, the write is either
    refused or committed through the new primary under the new term."""
    etcd = EtcdCluster(started)
    cs = Controllers(started, etcd, ttl=2)
    sts = wait_for('cluster settled', lambda: settled(cs), 30, logs=cs.logs)
    old = primary_of(sts)
    term = sts[old]['term']
    others = [n for n in cs.names if n != old]

    os.killpg(cs.proc[old].p.pid, signal.SIGSTOP)
    try:
        r = ctl(cs.addrs(others), 'wait-primary', '--timeout', '30s', '--interval', '100ms', '--min-term', str(term + 1))
        assert r.returncode == 0, r.stderr + cs.logs()
        new = r.stdout.split()[1]
    finally:
        os.killpg(cs.proc[old].p.pid, signal.SIGCONT)
    path = os.path.join(cs.dir, 'stale.json')
    with open(path, 'w') as f:
        json.dump({'clusterName': cs.cluster, 'settings': {'written_via': old}}, f)
    r = ctl([cs.addr(old)], 'setconf', path)
    if r.returncode == 0:
        committed_term = int(r.stdout.rsplit('term ', 1)[1])
        assert committed_term > term, r.stdout
    # The old primary has stepped down and follows the new one.
    after = wait_for('settled after thaw', lambda: settled(cs), 30, logs=cs.logs)
    assert primary_of(after) == new
    assert after[old]['responderRole'] == 'STANDBY'
    assert after[old]['term'] > term
