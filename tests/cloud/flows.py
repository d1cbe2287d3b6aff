#!/usr/bin/env python3
"""Nova's life-cycle flows on the live cloud of cloud.py, with the
Placement checks after every phase; ./run is the entry point.

  run [--placement keelson|python] [--small] [--servers N] [--wave N]
      [--computes N] [--nodes N] [--no-faults] [--keep-logs DIR] [--go-on]
      [--neutron real|stub] [--cinder]

Default: 5 nova-compute processes x 10 fake nodes and one with a single
node (51 resource providers),
200 servers booted in waves of 50 (multi-create), then the phases:
  faults      (keelson only) three more boot waves; during each one
              keelson process (gateway, inventory, candidates in turn) is
              SIGKILLed and restarted; servers Nova put in ERROR are
              deleted
  resize      resize + confirm, resize + revert
  migrate     cold migration (confirmed), live migration
  evacuate    a compute is killed and forced down, its servers evacuated;
              then it comes back and cleans up after itself
  shelve      shelve (offloaded at once) and unshelve
  groups      an anti-affinity server group, one server per host
  aggregates  an availability zone (zone `east` = cmp0, made before the
              first boot) and a tenant-isolated aggregate, through Nova's
              placement pre-filters
  ports       (real Neutron) a server with a port on a VLAN network, on the
              agent's host; a server with a QoS minimum-bandwidth port,
              claimed on the bandwidth provider Neutron reported under that
              host's node; both deleted, the ports unbound or gone
  volumes     (--cinder) a server booted from a volume of the image, a
              blank volume attached and detached, all deleted
  delete      every server deleted
After every phase (check()): `nova-manage placement audit` finds nothing,
every provider's usage equals the sum of the flavors of the servers Nova
places on it and each server holds exactly one allocation of its flavor,
`nova-manage placement heal_allocations` has nothing to heal, and no
Nova log holds a Placement error.
--small: 20 servers in waves of 10, for CI.

Durations measured on a loaded 2-core machine: --small 341 s in all
(start-up 52 s); the full run's phases add up to ~15 min (start-up
1-2.5 min, each 50-server wave 19-34 s to ACTIVE, each check ~25-50 s).

--go-on: a failed phase is recorded (`phase NAME: FAILED ...`, and in
--figures-json) and the next phase runs on the cloud as that phase left it;
the run still fails. compare uses it so that a phase the reference fails
does not leave the later phases without figures.
Prints one line per phase (`phase NAME: S s ...`) and last
`cloud-result: PASSED` or `cloud-result: FAILED <phase>: <reason>`;
the exit status follows.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
import uuid

from cloud import ADMIN_PASSWORD, Cloud, wait_until, write_conf

FLAVORS = (('c1', 1, 512, 1), ('c2', 2, 1024, 2), ('c4', 4, 2048, 4))
STABLE = ('ACTIVE', 'SHUTOFF', 'ERROR', 'SHELVED_OFFLOADED', 'VERIFY_RESIZE')
# A Placement failure as Nova logs it: its report client's warnings and
# errors (every failed Placement call), any error naming Placement. Not the
# resource tracker's warnings about allocations of servers in the middle of
# a move: those are Nova's own transient bookkeeping.
PLACEMENT_ERROR = re.compile(r'(ERROR|WARNING) nova\.scheduler\.client\.report|ERROR .*[Pp]lacement'
                             r'|Placement API returning an error')


def stuck(s):
    """A server Nova left building for good: its build failed, the
    reschedule failed too (Placement unreachable) and Nova reverted the
    task state, leaving vm_state building with no host and no task. Every
    reschedule passes through the same fields for a moment (the compute
    has cleared the task and not yet claimed), so a caller counts a server
    as stuck only once they have lasted STUCK_AFTER seconds."""
    return (s['status'] == 'BUILD' and s.get('OS-EXT-STS:vm_state') == 'building'
            and not s.get('OS-EXT-STS:task_state') and not s.get('OS-EXT-SRV-ATTR:host'))


# Longer than a compute's wait for its resource lock before the claim.
STUCK_AFTER = 30


class Failed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failed(message)


class Flows:
    def __init__(self, cloud, args, out):
        self.cloud, self.args, self.out = cloud, args, out
        self.flavors = {}
        self.log_marks = {}
        self.counter = 0
        self.figures = {}

    # -- Nova helpers -------------------------------------------------------------------------------------------
    def servers(self, **filters):
        query = '&'.join('%s=%s' % kv for kv in dict(filters, all_tenants='1', limit='1000').items())
        return self.cloud.nova('GET', '/servers/detail?' + query)['servers']

    def server(self, sid):
        return self.cloud.nova('GET', '/servers/%s' % sid)['server']

    def action(self, sid, body, ok=(202,), project='admin'):
        return self.cloud.nova('POST', '/servers/%s/action' % sid, body, project=project, ok=ok)

    def wait_status(self, sid, status, timeout=300, task_done=True):
        def probe():
            s = self.server(sid)
            if s['status'] == 'ERROR' and status != 'ERROR':
                raise Failed('server %s went to ERROR: %s' % (sid, s.get('fault')))
            return s if s['status'] == status and (not task_done or not s.get('OS-EXT-STS:task_state')) else None
        return wait_until(probe, timeout, 'server %s %s' % (sid, status), interval=0.5)

    def host(self, s):
        return s.get('OS-EXT-SRV-ATTR:host')

    def node(self, s):
        return s.get('OS-EXT-SRV-ATTR:hypervisor_hostname')

    def boot(self, prefix, count, flavor='c1', project='admin', extra=None, hints=None):
        """A multi-create of `count` servers; answers the reservation's servers once all are stable."""
        self.counter += 1
        name = '%s-%d' % (prefix, self.counter)
        body = {'server': dict({'name': name, 'imageRef': self.cloud.image, 'flavorRef': self.flavors[flavor],
                                'networks': 'none', 'min_count': count, 'max_count': count}, **(extra or {}))}
        if hints:
            body['os:scheduler_hints'] = hints
        self.cloud.nova('POST', '/servers', body, project=project)
        stuck_since = {}

        def settled(s, now):
            if not stuck(s):
                stuck_since.pop(s['id'], None)
                return s['status'] in STABLE and not s.get('OS-EXT-STS:task_state')
            return now - stuck_since.setdefault(s['id'], now) >= STUCK_AFTER

        def all_stable():
            # Multi-create names the servers NAME-1 ... NAME-count (a
            # single server keeps NAME).
            found = [s for s in self.servers(name='^%s' % name)
                     if s['name'] == name or s['name'].startswith(name + '-')]
            now = time.monotonic()
            done = len(found) == count and all([settled(s, now) for s in found])
            return found if done else None
        return wait_until(all_stable, 120 + 10 * count, '%d servers %s stable' % (count, name), interval=1)

    def delete(self, servers):
        for s in servers:
            self.cloud.nova('DELETE', '/servers/%s' % s['id'], ok=(204, 404))
        ids = {s['id'] for s in servers}
        wait_until(lambda: not ids & {s['id'] for s in self.servers()}, 300, 'servers deleted', interval=1)

    # -- checks -------------------------------------------------------------------------------------------------
    def manage(self, *args):
        r = subprocess.run(self.cloud.nova_manage + list(args), capture_output=True, text=True, timeout=900)
        return r.returncode, r.stdout + r.stderr

    def keelson_audit(self, *args):
        """`keelson placement audit --nova-endpoint` on the cloud's Placement
        database (keelson's or Python Placement's: the schema is one), as
        the cloud's admin: (exit status, its JSON report)."""
        c = self.cloud
        conf = os.path.join(c.dir, 'keelson-audit.conf')
        if not os.path.exists(conf):
            write_conf(conf, {'placement_database': {'connection': c.placement_db}})
        env = dict(os.environ, OS_AUTH_URL=c.url['keystone'] + '/v3', OS_USERNAME='admin', OS_PASSWORD=ADMIN_PASSWORD,
                   OS_PROJECT_NAME='admin', OS_USER_DOMAIN_NAME='Default', OS_PROJECT_DOMAIN_NAME='Default')
        env.pop('OS_TOKEN', None)
        r = subprocess.run([c.keelson_bin, '--config-file', conf, 'placement', 'audit', '--json',
                            '--nova-endpoint', c.url['nova']] + list(args),
                           capture_output=True, text=True, timeout=900, env=env)
        try:
            report = json.loads(r.stdout)
        except ValueError:
            report = {'unreadable': (r.stdout + r.stderr)[-1500:]}
        return r.returncode, report

    def check(self, phase):
        """The four checks of every phase; raises Failed."""
        c = self.cloud
        # Nova settles first: nothing in flight.
        wait_until(lambda: all(s['status'] in STABLE and not s.get('OS-EXT-STS:task_state') for s in self.servers()),
                   300, 'every server stable')
        servers = self.servers()
        expected = {}
        for s in servers:
            if s['status'] in ('ERROR', 'SHELVED_OFFLOADED') and not self.node(s):
                continue
            f = s['flavor']
            usage = expected.setdefault(self.node(s), {'VCPU': 0, 'MEMORY_MB': 0, 'DISK_GB': 0})
            usage['VCPU'] += f['vcpus']
            usage['MEMORY_MB'] += f['ram']
            usage['DISK_GB'] += f['disk']
        problems = []
        providers = c.placement('GET', '/resource_providers')['resource_providers']
        for rp in providers:
            usages = {k: v for k, v in c.placement('GET', '/resource_providers/%s/usages' % rp['uuid'])['usages'].items()
                      if v}
            want = {k: v for k, v in expected.get(rp['name'], {}).items() if v}
            if usages != want:
                problems.append('provider %s uses %s, its servers %s' % (rp['name'], usages, want))
        names = {rp['name'] for rp in providers}
        for node in expected:
            if node not in names:
                problems.append('servers on %s, which has no provider' % node)
        uuids = {rp['uuid']: rp['name'] for rp in providers}
        for s in servers:
            allocs = c.placement('GET', '/allocations/%s' % s['id'])['allocations']
            placed = s['status'] not in ('SHELVED_OFFLOADED',) and self.node(s)
            if not placed:
                if allocs:
                    problems.append('server %s (%s, unplaced) holds allocations %s' % (s['id'], s['status'], allocs))
                continue
            f = s['flavor']
            want = {uuids.get(p, p): r['resources'] for p, r in allocs.items()}
            if want != {self.node(s): {'VCPU': f['vcpus'], 'MEMORY_MB': f['ram'], 'DISK_GB': f['disk']}}:
                problems.append('server %s on %s holds %s' % (s['id'], self.node(s), want))
        rc, out = self.manage('placement', 'audit', '--verbose')
        if rc != 0:
            problems.append('placement audit exited %d: %s' % (rc, out[-1500:]))
        rc, report = self.keelson_audit()
        if rc != 0:
            problems.append('keelson placement audit exited %d: %s' % (rc, json.dumps(report)[-1500:]))
        rc, heal = self.manage('placement', 'heal_allocations', '--verbose')
        if rc != 4:
            problems.append('heal_allocations exited %d (4 is "nothing to do"): %s' % (rc, heal[-1500:]))
        errors = self.placement_errors()
        if errors:
            problems.append('Placement errors in Nova logs:\n  ' + '\n  '.join(errors[:10]))
        expect(not problems, '%s check: %d problems:\n  %s' % (phase, len(problems), '\n  '.join(problems[:20])))
        return len(servers), len(providers)

    def placement_errors(self, accept=False):
        """New Placement error lines in Nova's logs since the last call."""
        found = []
        for name, proc in self.cloud.procs.items():
            if not name.startswith('nova-'):
                continue
            with open(proc.log_path, 'rb') as f:
                f.seek(self.log_marks.get(name, 0))
                text = f.read()
                self.log_marks[name] = f.tell()
            found += ['%s: %s' % (name, line[:400]) for line in text.decode('utf-8', 'replace').splitlines()
                      if PLACEMENT_ERROR.search(line)]
        return [] if accept else found

    def story(self, uuids, limit=60):
        """What Nova logged about these servers (INFO and up), and the
        scheduler's instance syncs: printed with a failure, as the cloud's
        logs are gone once it stops."""
        wanted = re.compile('|'.join(re.escape(u) for u in uuids) + r"|instance sync for host .*: stale|did not match|from an unknown host")
        lines = []
        for name, proc in self.cloud.procs.items():
            if not name.startswith('nova-'):
                continue
            with open(proc.log_path, 'rb') as f:
                text = f.read().decode('utf-8', 'replace')
            lines += ['%s %s: %s' % (line[:23], name, line[24:500]) for line in text.splitlines()
                      if wanted.search(line) and ' DEBUG ' not in line and not re.search(r'ERROR \S+ \[instance', line)]
        lines.sort(key=lambda line: line[:23])
        return '\n  '.join(lines[-limit:])

    # -- phases -------------------------------------------------------------------------------------------------
    def setup(self):
        for name, vcpus, ram, disk in FLAVORS:
            self.flavors[name] = self.cloud.nova('POST', '/flavors', {'flavor': {
                'name': name, 'vcpus': vcpus, 'ram': ram, 'disk': disk}})['flavor']['id']
        # Before any server: Nova refuses to move a host holding servers
        # into an availability zone.
        self.aggregate('east', ['cmp0'], az='east')

    def phase_boot(self):
        waves, sched, total = [], [], 0
        while total < self.args.servers:
            n = min(self.args.wave, self.args.servers - total)
            mark = os.path.getsize(self.cloud.procs['nova-scheduler'].log_path)
            t = time.monotonic()
            servers = self.boot('boot', n, flavor=FLAVORS[len(waves) % len(FLAVORS)][0])
            waves.append(time.monotonic() - t)
            sched.append(self.select_destinations_seconds(mark))
            bad = [s for s in servers if s['status'] != 'ACTIVE']
            expect(not bad, '%d of %d servers not ACTIVE: %s' % (len(bad), n, [(s['status'], s.get('fault')) for s in bad[:3]]))
            total += n
        self.figures['boot_waves_s'] = waves
        self.figures['select_destinations_s'] = [secs for _, _, secs in sched]
        hosts = {self.node(s) for s in self.servers()}
        return '%d servers in %d waves of %d: %s s to ACTIVE; select_destinations %s; on %d nodes' % (
            total, len(waves), self.args.wave, ' '.join('%.1f' % w for w in waves),
            ' '.join('%d calls %.2f s (%.3f s per instance)' % (calls, secs, secs / max(instances, 1))
                     for calls, instances, secs in sched), len(hosts))

    def select_destinations_seconds(self, offset):
        """(calls, instances, seconds) of scheduler.py's timings logged after `offset`."""
        with open(self.cloud.procs['nova-scheduler'].log_path, 'rb') as f:
            f.seek(offset)
            text = f.read().decode('utf-8', 'replace')
        found = [(int(n), float(secs)) for n, secs in
                 re.findall(r'select_destinations: (\d+) instances in ([0-9.]+) s', text)]
        return len(found), sum(n for n, _ in found), sum(secs for _, secs in found)

    def phase_faults(self):
        results = []
        for name in ('gateway', 'inventory', 'candidates'):
            proc = self.cloud.procs['keelson-' + name]
            box = {}

            def wave():
                try:
                    box['servers'] = self.boot('fault-' + name, self.args.wave)
                except Exception as e:
                    box['error'] = e
            t = threading.Thread(target=wave)
            t.start()
            # Kill once the wave is being scheduled and claimed.
            time.sleep(self.args.kill_after)
            proc.kill(signal.SIGKILL)
            down = time.monotonic()
            time.sleep(2)
            self.cloud.start_keelson(name)
            back = time.monotonic() - down
            t.join()
            if 'error' in box:
                raise box['error']
            servers = box['servers']
            errored = [s for s in servers if s['status'] == 'ERROR' or stuck(s)]
            stuck_count = sum(1 for s in servers if stuck(s))
            # A build that fails while Placement is unreachable leaves its
            # claim behind: Nova's cleanup DELETE fails the same way. Such
            # a server holds one flavor's worth at most; deleting it (as an
            # operator does with ERROR servers) frees it.
            leaked = 0
            for s in errored:
                allocs = self.cloud.placement('GET', '/allocations/%s' % s['id'])['allocations']
                f = s['flavor']
                expect(len(allocs) <= 1 and all(a['resources'] == {'VCPU': f['vcpus'], 'MEMORY_MB': f['ram'],
                                                                    'DISK_GB': f['disk']} for a in allocs.values()),
                       'ERROR server %s holds %s' % (s['id'], allocs))
                leaked += bool(allocs)
            self.delete(errored)
            # Nova logs the outage itself as Placement errors.
            self.placement_errors(accept=True)
            self.check('faults/' + name)
            results.append('%s killed, back in %.1f s: %d ACTIVE, %d ERROR, %d stuck in BUILD '
                           '(%d of these holding their claim until deleted)' % (
                               name, back, len(servers) - len(errored), len(errored) - stuck_count, stuck_count,
                               leaked))
            self.figures.setdefault('faults', []).append(results[-1])
        return '; '.join(results)

    def pick(self, n, status='ACTIVE', flavor=None):
        found = [s for s in self.servers() if s['status'] == status and s['name'].startswith('boot-')
                 and (flavor is None or s['flavor']['original_name'] == flavor)]
        expect(len(found) >= n, 'not %d %s servers' % (n, status))
        return found[:n]

    def phase_resize(self):
        a, b = self.pick(2, flavor='c1')
        for s in (a, b):
            self.action(s['id'], {'resize': {'flavorRef': self.flavors['c2']}})
        for s in (a, b):
            self.wait_status(s['id'], 'VERIFY_RESIZE')
        self.action(a['id'], {'confirmResize': None}, ok=(204,))
        self.action(b['id'], {'revertResize': None})
        a2 = self.wait_status(a['id'], 'ACTIVE')
        b2 = self.wait_status(b['id'], 'ACTIVE')
        expect(a2['flavor']['original_name'] == 'c2', 'confirmed resize kept flavor %s' % a2['flavor'])
        expect(b2['flavor']['original_name'] == 'c1', 'reverted resize has flavor %s' % b2['flavor'])
        expect(self.node(b2) == self.node(b), 'reverted server moved from %s to %s' % (self.node(b), self.node(b2)))
        return 'confirmed %s -> %s, reverted on %s' % (self.node(a), self.node(a2), self.node(b2))

    def phase_migrate(self):
        single = 'cmp%d' % self.args.computes
        a, b = [s for s in self.pick(10) if self.host(s) != single][:2]
        self.action(a['id'], {'migrate': None})
        self.wait_status(a['id'], 'VERIFY_RESIZE')
        self.action(a['id'], {'confirmResize': None}, ok=(204,))
        a2 = self.wait_status(a['id'], 'ACTIVE')
        expect(self.host(a2) != self.host(a), 'cold migration stayed on %s' % self.host(a))
        # To the single-node compute (Cloud.nodes_of says why); the
        # scheduler still checks the host and claims its node.
        self.action(b['id'], {'os-migrateLive': {'host': single, 'block_migration': 'auto'}})
        b2 = wait_until(lambda: (lambda s: s if self.host(s) != self.host(b) and not s.get('OS-EXT-STS:task_state')
                                 else None)(self.wait_status(b['id'], 'ACTIVE', task_done=False)),
                        300, 'live migration of %s' % b['id'])
        return 'cold %s -> %s, live %s -> %s' % (self.node(a), self.node(a2), self.node(b), self.node(b2))

    def compute_service(self, host):
        return [s for s in self.cloud.nova('GET', '/os-services?binary=nova-compute')['services']
                if s['host'] == host][0]

    def phase_evacuate(self):
        host = 'cmp%d' % (self.args.computes - 1)
        victims = [s for s in self.servers() if self.host(s) == host and s['status'] == 'ACTIVE']
        expect(victims, 'no server on %s' % host)
        proc = self.cloud.procs['nova-compute-%d' % (self.args.computes - 1)]
        proc.kill(signal.SIGKILL)
        service = self.compute_service(host)
        self.cloud.nova('PUT', '/os-services/%s' % service['id'], {'forced_down': True})
        wait_until(lambda: self.compute_service(host)['state'] == 'down', 120, '%s down' % host)
        for s in victims:
            self.action(s['id'], {'evacuate': {}}, ok=(200, 202))
        moved = []
        for s in victims:
            moved.append(wait_until(lambda: (lambda x: x if self.host(x) != host and x['status'] in ('ACTIVE', 'SHUTOFF')
                                             and not x.get('OS-EXT-STS:task_state') else None)(self.server(s['id'])),
                                    300, 'evacuation of %s' % s['id']))
        # The compute comes back: it deletes the evacuated guests and their
        # allocations against its nodes.
        self.cloud.start_compute(self.args.computes - 1)
        # Nova refuses to force the host up until the restarted compute has
        # completed the evacuation records (409/400 until then).
        wait_until(lambda: self.cloud.nova('PUT', '/os-services/%s' % service['id'], {'forced_down': False},
                                           ok=None)[0] == 200, 300, '%s forced up' % host, interval=3)
        wait_until(lambda: self.compute_service(host)['state'] == 'up', 180, '%s up' % host)
        c = self.cloud
        mine = [rp['uuid'] for rp in c.placement('GET', '/resource_providers')['resource_providers']
                if rp['name'].startswith(host + '-')]
        wait_until(lambda: not any(v for u in mine for v in c.placement('GET', '/resource_providers/%s/usages' % u)
                                   ['usages'].values()), 300, '%s to drop the evacuated allocations' % host, interval=2)
        return '%d servers from %s to %s' % (len(victims), host, sorted({self.host(s) for s in moved}))

    def phase_shelve(self):
        (s,) = self.pick(1)
        self.action(s['id'], {'shelve': None})
        self.wait_status(s['id'], 'SHELVED_OFFLOADED')
        c = self.cloud
        expect(not c.placement('GET', '/allocations/%s' % s['id'])['allocations'],
               'offloaded server %s still holds allocations' % s['id'])
        self.check('shelve/offloaded')
        self.action(s['id'], {'unshelve': None})
        s2 = self.wait_status(s['id'], 'ACTIVE')
        return 'offloaded from %s, unshelved to %s' % (self.node(s), self.node(s2))

    def wait_scheduler_current(self):
        """Until every compute's instance sync has left the scheduler's view
        of it current (scheduler.py logs each sync's outcome)."""
        log = self.cloud.procs['nova-scheduler'].log_path
        mark = os.path.getsize(log)
        hosts = {'cmp%d' % i for i in range(self.args.computes + 1)}

        def all_current():
            with open(log, 'rb') as f:
                f.seek(mark)
                text = f.read().decode('utf-8', 'replace')
            state = dict(re.findall(r"instance sync for host '([^']+)': (current|stale)", text))
            return all(state.get(h) == 'current' for h in hosts)
        # Two sync periods: Nova syncs every 120 s whatever the option says
        # (cloud.py nova_sections).
        wait_until(all_current, 300, 'a current instance list of every host in the scheduler', interval=1)

    def phase_groups(self):
        # Nova's anti-affinity filter sees a multi-create's earlier picks on
        # other nodes of the same host only through the host's instance list
        # that the compute's updates keep current in the scheduler. Until it
        # is (after the scheduler starts, or after a sync that did not
        # match), each node holds its own copy, two servers of the group can
        # go to two nodes of one host, and only the compute's late check
        # catches it, by rescheduling to alternates chosen the same way. It
        # happens with Python Placement too (README, "Nova on keelson"), so
        # the phase starts once every host's list is current.
        waited = time.monotonic()
        self.wait_scheduler_current()
        waited = time.monotonic() - waited
        n = min(self.args.computes, 4)
        group = self.cloud.nova('POST', '/os-server-groups', {'server_group': {
            'name': 'spread', 'policy': 'anti-affinity'}})['server_group']['id']
        servers = self.boot('group', n, hints={'group': group})
        hosts = [self.host(s) for s in servers]
        if not all(s['status'] == 'ACTIVE' for s in servers) or len(set(hosts)) != n:
            raise Failed('group servers %s on %s; Nova logged:\n  %s' % (
                [s['status'] for s in servers], hosts, self.story([s['id'] for s in servers])))
        return '%d servers on %s (the scheduler was current after %.1f s)' % (n, sorted(hosts), waited)

    def aggregate(self, name, hosts, az=None, metadata=None):
        body = {'aggregate': {'name': name}}
        if az:
            body['aggregate']['availability_zone'] = az
        agg = self.cloud.nova('POST', '/os-aggregates', body)['aggregate']
        for h in hosts:
            self.cloud.nova('POST', '/os-aggregates/%s/action' % agg['id'], {'add_host': {'host': h}})
        if metadata:
            self.cloud.nova('POST', '/os-aggregates/%s/action' % agg['id'], {'set_metadata': {'metadata': metadata}})
        return agg

    def phase_aggregates(self):
        c = self.cloud
        tenant = c.projects['tenant-b']
        self.aggregate('tenant-b-only', ['cmp1'], metadata={'filter_tenant_id': tenant})
        # Nova mirrors the host aggregates into Placement aggregates.
        in_az = self.boot('az', 3, extra={'availability_zone': 'east'})
        tenants = self.boot('tenant', 3, project='tenant-b')
        expect(all(self.host(s) == 'cmp0' and s['status'] == 'ACTIVE' for s in in_az),
               'servers of zone east on %s' % [(self.host(s), s['status']) for s in in_az])
        expect(all(self.host(s) == 'cmp1' and s['status'] == 'ACTIVE' for s in tenants),
               'tenant-b servers on %s' % [(self.host(s), s['status']) for s in tenants])
        return 'zone east -> cmp0 (%d), tenant-b -> cmp1 (%d)' % (len(in_az), len(tenants))

    def phase_ports(self):
        """Servers with ports on a real Neutron network: one with a port
        Nova makes, one with a port under a QoS minimum-bandwidth policy,
        whose resource request Nova's scheduler sends to Placement with the
        flavor's, so it is claimed on the bandwidth provider Neutron
        reported under the agent's compute node."""
        from network import BANDWIDTH_KBPS, PHYSNET
        c, n = self.cloud, self.cloud.network
        name = '%s:Open vSwitch agent:%s' % (n.agent_node, n.phys_bridge)
        # Neutron reports the agent's bandwidth on its state reports.
        bw = wait_until(lambda: c.placement('GET', '/resource_providers?name=%s' % urllib.parse.quote(name))[
            'resource_providers'], 120, 'Neutron\'s provider %s in Placement' % name, interval=2)[0]
        node = [rp for rp in c.placement('GET', '/resource_providers')['resource_providers']
                if rp['name'] == n.agent_node][0]
        inventories = c.placement('GET', '/resource_providers/%s/inventories' % bw['uuid'])['inventories']
        traits = set(c.placement('GET', '/resource_providers/%s/traits' % bw['uuid'])['traits'])
        expect(bw['root_provider_uuid'] == node['uuid'], 'bandwidth provider %s not in the tree of %s' % (bw, node))
        expect({k: v['total'] for k, v in inventories.items()} == {
            'NET_BW_EGR_KILOBIT_PER_SEC': BANDWIDTH_KBPS, 'NET_BW_IGR_KILOBIT_PER_SEC': BANDWIDTH_KBPS},
            'bandwidth provider inventories %s' % inventories)
        expect({'CUSTOM_PHYSNET_' + PHYSNET.upper(), 'CUSTOM_VNIC_TYPE_NORMAL'} <= traits, 'traits %s' % traits)

        net = c.neutron('POST', '/v2.0/networks', {'network': {
            'name': 'ports', 'provider:network_type': 'vlan', 'provider:physical_network': PHYSNET}})['network']
        c.neutron('POST', '/v2.0/subnets', {'subnet': {
            'network_id': net['id'], 'ip_version': 4, 'cidr': '10.10.0.0/24', 'name': 'ports'}})
        # A port Nova makes, on the agent's host (the only one that can bind).
        (plain,) = self.boot('port', 1, extra={'networks': [{'uuid': net['id']}], 'host': n.agent_host})
        expect(plain['status'] == 'ACTIVE', 'server with a port: %s %s' % (plain['status'], plain.get('fault')))
        (port,) = c.neutron('GET', '/v2.0/ports?device_id=%s' % plain['id'])['ports']
        expect(port['status'] == 'ACTIVE' and port['binding:host_id'] == n.agent_host
               and port['binding:vif_type'] == 'ovs', 'port %s %s on %r as %s' % (
                   port['id'], port['status'], port['binding:host_id'], port['binding:vif_type']))
        expect('tap' + port['id'][:11] in n.ports(), 'port %s not plugged into %s' % (port['id'], n.int_bridge))
        plugged = self.vif_plugged_events(port['id'])
        expect(plugged, 'Nova got no network-vif-plugged event for port %s' % port['id'])

        policy = c.neutron('POST', '/v2.0/qos/policies', {'policy': {'name': 'min-bw'}})['policy']
        kbps = 100000
        c.neutron('POST', '/v2.0/qos/policies/%s/minimum_bandwidth_rules' % policy['id'], {
            'minimum_bandwidth_rule': {'min_kbps': kbps, 'direction': 'egress'}})
        qos_port = c.neutron('POST', '/v2.0/ports', {'port': {
            'network_id': net['id'], 'name': 'min-bw', 'qos_policy_id': policy['id']}})['port']
        request = qos_port.get('resource_request') or {}
        groups = request.get('request_groups', [request])
        expect(any(g.get('resources') == {'NET_BW_EGR_KILOBIT_PER_SEC': kbps} for g in groups),
               'port resource request %s' % request)
        (qos,) = self.boot('qos', 1, extra={'networks': [{'port': qos_port['id']}]})
        expect(qos['status'] == 'ACTIVE' and self.node(qos) == n.agent_node,
               'server with a min-bw port: %s on %s %s' % (qos['status'], self.node(qos), qos.get('fault')))
        f = qos['flavor']
        allocations = {p: a['resources'] for p, a in c.placement('GET', '/allocations/%s' % qos['id'])[
            'allocations'].items()}
        expect(allocations == {node['uuid']: {'VCPU': f['vcpus'], 'MEMORY_MB': f['ram'], 'DISK_GB': f['disk']},
                               bw['uuid']: {'NET_BW_EGR_KILOBIT_PER_SEC': kbps}},
               'min-bw server allocations %s' % allocations)
        bound = c.neutron('GET', '/v2.0/ports/%s' % qos_port['id'])['port']
        held = bound['binding:profile'].get('allocation')
        expect(held == bw['uuid'] or (isinstance(held, dict) and set(held.values()) == {bw['uuid']}),
               'min-bw port binding profile %s' % bound['binding:profile'])
        expect(bound['status'] == 'ACTIVE', 'min-bw port %s' % bound['status'])

        self.delete([plain, qos])
        usage = c.placement('GET', '/resource_providers/%s/usages' % bw['uuid'])['usages']
        expect(not any(usage.values()), 'bandwidth provider still used: %s' % usage)
        status, _ = c.neutron('GET', '/v2.0/ports/%s' % port['id'], ok=None)
        expect(status == 404, 'port Nova made outlived its server (%s)' % status)
        unbound = c.neutron('GET', '/v2.0/ports/%s' % qos_port['id'])['port']
        expect(not unbound['device_id'] and not unbound['binding:host_id'],
               'min-bw port still bound: %s %s' % (unbound['device_id'], unbound['binding:host_id']))
        wait_until(lambda: 'tap' + port['id'][:11] not in n.ports(), 30, 'port unplugged')
        c.neutron('DELETE', '/v2.0/ports/%s' % qos_port['id'])
        c.neutron('DELETE', '/v2.0/qos/policies/%s' % policy['id'])
        c.neutron('DELETE', '/v2.0/networks/%s' % net['id'])
        return ('port on %s bound by the agent, %d network-vif-plugged; min-bw port: %d kbit/s claimed on %s '
                'with %s' % (port['binding:host_id'], len(plugged), kbps, name, self.node(qos)))

    def cinder(self, method, path, body=None, ok=(200, 202, 204)):
        from cloud import http
        c = self.cloud
        status, _, answer = http(method, '%s/v3/%s%s' % (c.volumes.url, c.projects['admin'], path), body, {
            'X-Auth-Token': c.token(), 'OpenStack-API-Version': 'volume 3.60'})
        if ok and status not in ok:
            raise Failed('cinder %s %s: %s %s' % (method, path, status, answer))
        return answer if ok else (status, answer)

    def volume_status(self, vid, status, timeout=180):
        def probe():
            v = self.cinder('GET', '/volumes/%s' % vid)['volume']
            if v['status'] in ('error', 'error_attaching', 'error_detaching') and status != v['status']:
                raise Failed('volume %s went to %s' % (vid, v['status']))
            return v if v['status'] == status else None
        return wait_until(probe, timeout, 'volume %s %s' % (vid, status), interval=1)

    def phase_volumes(self):
        """Cinder (volumes.py): a server booted from a volume made from the
        image, a blank volume attached to it and detached, everything
        deleted. Nova claims no root disk in Placement for a server booted
        from a volume."""
        c = self.cloud
        image_volume = self.cinder('POST', '/volumes', {'volume': {
            'size': 1, 'name': 'boot', 'imageRef': c.image}})['volume']
        self.volume_status(image_volume['id'], 'available')
        (server,) = self.boot('bfv', 1, extra={'block_device_mapping_v2': [{
            'uuid': image_volume['id'], 'source_type': 'volume', 'destination_type': 'volume', 'boot_index': 0,
            'delete_on_termination': False}], 'imageRef': ''})
        expect(server['status'] == 'ACTIVE', 'server booted from a volume: %s %s' % (
            server['status'], server.get('fault')))
        self.volume_status(image_volume['id'], 'in-use')
        f = server['flavor']
        allocations = {p: a['resources'] for p, a in c.placement('GET', '/allocations/%s' % server['id'])[
            'allocations'].items()}
        expect(list(allocations.values()) == [{'VCPU': f['vcpus'], 'MEMORY_MB': f['ram']}],
               'volume-backed server allocations %s' % allocations)
        blank = self.cinder('POST', '/volumes', {'volume': {'size': 1, 'name': 'data'}})['volume']
        self.volume_status(blank['id'], 'available')
        c.nova('POST', '/servers/%s/os-volume_attachments' % server['id'], {'volumeAttachment': {
            'volumeId': blank['id']}})
        self.volume_status(blank['id'], 'in-use')
        c.nova('DELETE', '/servers/%s/os-volume_attachments/%s' % (server['id'], blank['id']))
        self.volume_status(blank['id'], 'available')
        self.delete([server])
        self.volume_status(image_volume['id'], 'available')
        for v in (image_volume, blank):
            self.cinder('DELETE', '/volumes/%s' % v['id'])
        wait_until(lambda: all(self.cinder('GET', '/volumes/%s' % v['id'], ok=None)[0] == 404
                               for v in (image_volume, blank)), 120, 'volumes deleted')
        return 'booted from a volume of the image on %s (no DISK_GB claimed), a volume attached and detached' % (
            self.node(server))

    def vif_plugged_events(self, port_id):
        """nova-api's log lines of Neutron's network-vif-plugged events for a port."""
        with open(self.cloud.procs['nova-api'].log_path, 'rb') as f:
            text = f.read().decode('utf-8', 'replace')
        return [line for line in text.splitlines() if 'network-vif-plugged:%s' % port_id in line]

    def orphan(self):
        """An allocation made by hand for a consumer Nova does not know, on
        a server's node: nova-manage's audit and keelson's both find it,
        keelson's --fix deletes it (asking Nova again first), and then
        neither finds anything."""
        c = self.cloud
        placed = [s for s in self.servers() if self.node(s) and s['status'] == 'ACTIVE']
        if not placed:
            return 'no placed server for an orphan'
        rp = [p for p in c.placement('GET', '/resource_providers')['resource_providers']
              if p['name'] == self.node(placed[0])][0]
        consumer = str(uuid.uuid4())
        c.placement('PUT', '/allocations/' + consumer, {
            'allocations': {rp['uuid']: {'resources': {'VCPU': 1, 'MEMORY_MB': 64}}},
            'project_id': c.projects['admin'], 'user_id': 'orphan-maker', 'consumer_generation': None,
            'consumer_type': 'INSTANCE'})
        rc, out = self.manage('placement', 'audit', '--verbose')
        expect(rc == 3 and consumer in out, 'nova-manage placement audit on an orphan: %d %s' % (rc, out[-800:]))
        rc, report = self.keelson_audit()
        found = [f for f in report.get('findings', []) if f.get('consumer') == consumer]
        expect(rc == 3 and [f['kind'] for f in found] == ['allocation-unknown-to-nova']
               and len(report['findings']) == 1,
               'keelson placement audit on an orphan: %d %s' % (rc, json.dumps(report)[-1500:]))
        rc, report = self.keelson_audit('--fix')
        expect(rc == 4 and [f.get('repair') for f in report.get('findings', [])] == ['repaired'],
               'keelson placement audit --fix on an orphan: %d %s' % (rc, json.dumps(report)[-1500:]))
        left = c.placement('GET', '/allocations/' + consumer)['allocations']
        expect(not left, 'the orphan still holds %s' % left)
        rc, out = self.manage('placement', 'audit', '--verbose')
        expect(rc == 0, 'nova-manage placement audit after keelson --fix: %d %s' % (rc, out[-800:]))
        return 'an orphan on %s found by both audits and deleted by keelson --fix' % rp['name']

    def phase_delete(self):
        orphan = self.orphan()
        servers = self.servers()
        self.delete(servers)
        c = self.cloud
        used = [rp['name'] for rp in c.placement('GET', '/resource_providers')['resource_providers']
                if any(c.placement('GET', '/resource_providers/%s/usages' % rp['uuid'])['usages'].values())]
        expect(not used, 'providers still used after deleting every server: %s' % used)
        return '%s; %d servers deleted' % (orphan, len(servers))

    def run(self):
        phases = ['boot', 'faults', 'resize', 'migrate', 'evacuate', 'shelve', 'groups', 'aggregates', 'ports',
                  'volumes', 'delete']
        if self.args.no_faults or self.cloud.placement_kind != 'keelson':
            phases.remove('faults')
        if not self.cloud.network:
            phases.remove('ports')
        if not self.cloud.volumes:
            phases.remove('volumes')
        if self.args.phases:
            phases = [p for p in phases if p in self.args.phases.split(',')]
        self.setup()
        self.placement_errors()
        failed = []
        for phase in phases:
            t = time.monotonic()
            checking = None
            try:
                what = getattr(self, 'phase_' + phase)()
                checking = time.monotonic()
                count, providers = self.check(phase)
            except Exception as e:
                if not self.args.go_on:
                    raise Failed('%s: %s' % (phase, e)) from e
                # Kept as a figure of its own: a phase whose work finished
                # but whose checks failed still has a duration; one that
                # stopped half-way has none.
                reason = str(e) if isinstance(e, Failed) else '%s: %s' % (type(e).__name__, e)
                self.figures.setdefault('phases', {})[phase] = {
                    'seconds': checking - t if checking is not None else None, 'check_seconds': None,
                    'failed': 'checks' if checking is not None else 'phase', 'reason': reason[:3000]}
                self.out('phase %s: FAILED (%s): %s' % (phase, 'its checks' if checking is not None else 'the phase',
                                                        reason[:1500]))
                failed.append(phase)
                continue
            done = time.monotonic()
            self.figures.setdefault('phases', {})[phase] = {'seconds': checking - t, 'check_seconds': done - checking}
            self.out('phase %s: %.1f s (+ %.1f s checks): %s; checks clean (%d servers, %d providers)' % (
                phase, checking - t, done - checking, what, count, providers))
        expect(not failed, 'phases failed: %s' % ', '.join(failed))


def main():
    ap = argparse.ArgumentParser(description='Nova flows on a live cloud with keelson (or Python Placement).')
    ap.add_argument('--placement', choices=('keelson', 'python'), default='keelson')
    ap.add_argument('--neutron', choices=('real', 'stub'), default='real',
                    help='the real Neutron (network.py) or the stub (neutron_stub.py; no ports phase)')
    ap.add_argument('--cinder', action='store_true', help='run Cinder (volumes.py) and the volumes phase')
    ap.add_argument('--small', action='store_true', help='20 servers in waves of 10 (CI)')
    ap.add_argument('--servers', type=int, default=200)
    ap.add_argument('--wave', type=int, default=50)
    ap.add_argument('--computes', type=int, default=5)
    ap.add_argument('--nodes', type=int, default=10)
    ap.add_argument('--kill-after', type=float, default=3.0, help='seconds into a fault wave before the kill')
    ap.add_argument('--no-faults', action='store_true')
    ap.add_argument('--phases', help='comma-separated subset of the phases')
    ap.add_argument('--keep-logs', help='copy every log here before cleaning up')
    ap.add_argument('--go-on', action='store_true',
                    help='after a failed phase, record it and run the next (the run still fails)')
    ap.add_argument('--figures-json', help='write the measured figures (per phase, per wave) to this file')
    args = ap.parse_args()
    if args.small:
        args.servers, args.wave = 20, 10

    def out(line):
        print(line, flush=True)

    # SIGTERM as Ctrl-C: an exception, so that the cloud is cleaned up.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    cloud = Cloud(args.placement, args.computes, args.nodes, log=out, neutron=args.neutron, cinder=args.cinder)
    result, started, flows = 'FAILED', time.monotonic(), None
    try:
        cloud.start()
        flows = Flows(cloud, args, out)
        flows.run()
        rss = cloud.rss_mib()
        out('rss: %.0f MiB in all (%s)' % (sum(rss.values()), ', '.join('%s %.0f' % kv for kv in sorted(rss.items()))))
        result = 'PASSED'
    except Exception as e:
        detail = str(e) if isinstance(e, (Failed, RuntimeError)) else traceback.format_exc()
        result = 'FAILED %s' % detail
    finally:
        cloud.stop(keep_logs=args.keep_logs)
    out('total: %.0f s' % (time.monotonic() - started))
    if args.figures_json:
        with open(args.figures_json, 'w') as f:
            json.dump({'placement': args.placement, 'result': result,
                       'figures': flows.figures if flows else {}}, f, indent=1)
    out('cloud-result: %s' % result)
    return 0 if result == 'PASSED' else 1


if __name__ == '__main__':
    sys.exit(main())
