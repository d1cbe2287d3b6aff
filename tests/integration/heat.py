"""A small Orchestration API client and the mesh the stack-engine tests
run: N `keelson engine` processes on one database and a `keelson gateway`
in front of them, each its own process, as the Helm chart runs them; and
the reference Python Heat (tests/reference/heat) for side-by-side runs."""
import json
import os
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from conftest import REFERENCE, Proc, free_port, keelson_bin, wait_http, wait_port, write_conf

PROJECT = 'demo'


class Heat:
    """REST calls against one Orchestration endpoint (noauth: the project
    and user come from X-Auth-Project / X-Auth-User)."""

    def __init__(self, base, project=PROJECT):
        self.base = base.rstrip('/')
        self.project = project

    def url(self, path):
        return '%s/v1/%s%s' % (self.base, self.project, path)

    def call(self, method, path, body=None, follow=True):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url(path) if path.startswith('/') else path, data=data, method=method,
                                     headers={'X-Auth-Project': self.project, 'X-Auth-User': 'tester',
                                              'Content-Type': 'application/json', 'Accept': 'application/json'})
        opener = urllib.request.build_opener() if follow else urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(req, timeout=60) as r:
                raw = r.read().decode()
                return r.status, dict(r.headers), (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read().decode()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = raw
            return e.code, dict(e.headers), parsed

    def create(self, name, template, parameters=None, disable_rollback=True, **extra):
        body = {'stack_name': name, 'template': template, 'parameters': parameters or {},
                'disable_rollback': disable_rollback}
        body.update(extra)
        status, headers, doc = self.call('POST', '/stacks', body)
        assert status == 201, (status, doc)
        return doc['stack']['id']

    def stack(self, ident):
        status, _, doc = self.call('GET', '/stacks/%s' % ident)
        assert status == 200, (status, doc)
        return doc['stack']

    def update(self, name, ident, template, parameters=None, patch=False, **extra):
        body = {'template': template, 'parameters': parameters or {}}
        body.update(extra)
        status, _, doc = self.call('PATCH' if patch else 'PUT', '/stacks/%s/%s' % (name, ident), body)
        assert status == 202, (status, doc)

    def delete(self, name, ident):
        status, _, doc = self.call('DELETE', '/stacks/%s/%s' % (name, ident))
        assert status == 204, (status, doc)

    def wait(self, ident, statuses, timeout=120, interval=0.2):
        """Polls until the stack reaches one of `statuses` (or is gone, for
        'GONE'); any other terminal status fails at once."""
        statuses = set([statuses] if isinstance(statuses, str) else statuses)
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            status, _, doc = self.call('GET', '/stacks/%s' % ident)
            if status == 404:
                if 'GONE' in statuses:
                    return None
                raise AssertionError('stack %s disappeared' % ident)
            assert status == 200, (status, doc)
            st = doc['stack']
            last = st['stack_status']
            if last in statuses:
                return st
            if 'GONE' in statuses and last == 'DELETE_COMPLETE':
                return st
            # A stack that rolls back is CREATE/UPDATE_FAILED for a moment
            # before its ROLLBACK traversal starts (as upstream's).
            rolling_back = any(s.startswith('ROLLBACK_') for s in statuses) and last in ('CREATE_FAILED', 'UPDATE_FAILED')
            if not last.endswith('IN_PROGRESS') and last not in statuses and not rolling_back:
                raise AssertionError('stack %s ended %s: %s' % (ident, last, st.get('stack_status_reason')))
            time.sleep(interval)
        raise AssertionError('stack %s still %s after %ss' % (ident, last, timeout))

    def events(self, name, ident, resource=None):
        path = '/stacks/%s/%s%s/events?sort_dir=asc&limit=10000' % (
            name, ident, '' if resource is None else '/resources/%s' % resource)
        status, _, doc = self.call('GET', path)
        assert status == 200, (status, doc)
        return doc['events']

    def resources(self, name, ident):
        status, _, doc = self.call('GET', '/stacks/%s/%s/resources' % (name, ident))
        assert status == 200, (status, doc)
        return {r['resource_name']: r for r in doc['resources']}

    def output(self, name, ident, key):
        status, _, doc = self.call('GET', '/stacks/%s/%s/outputs/%s' % (name, ident, key))
        assert status == 200, (status, doc)
        return doc['output']['output_value']


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Mesh:
    """`engines` engine processes sharing `db_url`, and one gateway; with
    `controller`, first a single-node `keelson controller` (its own
    `controller_extra` options) that the engines register with."""

    def __init__(self, procs, db_url, engines=2, extra=None, controller=False, controller_extra=None):
        self.procs = procs
        self.dir = tempfile.mkdtemp(prefix='kt-heat-')
        self.db_url = db_url
        self.extra = extra or {}
        self.controller = None
        if controller:
            self.start_controller(controller_extra or {})
        self.engine_ports = [free_port() for _ in range(engines)]
        self.engines = [self.start_engine(i) for i in range(engines)]
        port = free_port()
        conf = {
            'keelson': {'orchestration_listen': '127.0.0.1:%d' % port,
                        'placement_listen': '127.0.0.1:%d' % free_port(),
                        'engine_endpoints': ','.join('http://127.0.0.1:%d' % p for p in self.engine_ports)},
            'orchestration': {'auth_strategy': 'noauth'},
            'api': {'auth_strategy': 'noauth2'},
        }
        path = write_conf(os.path.join(self.dir, 'gateway.conf'), conf)
        self.gateway = Proc([keelson_bin(), '--config-file', path, 'gateway'], cwd=self.dir)
        procs.append(self.gateway)
        self.url = 'http://127.0.0.1:%d' % port
        wait_http(self.url + '/', proc=self.gateway)
        self.heat = Heat(self.url)

    def engine_conf(self, i):
        conf = {
            'database': {'connection': self.db_url},
            'keelson': {'engine_listen': '127.0.0.1:%d' % self.engine_ports[i]},
            'orchestration': {'periodic_interval': '1', 'stall_timeout': '5'},
        }
        if self.controller is not None:
            conf['controller'] = {'peers': 'c1=%s' % self.controller_addr}
        for g, o in self.extra.items():
            conf.setdefault(g, {}).update(o)
        return write_conf(os.path.join(self.dir, 'engine%d.conf' % i), conf)

    def start_controller(self, extra):
        port = free_port()
        self.controller_addr = '127.0.0.1:%d' % port
        conf = {
            'controller': {'name': 'c1', 'listen': self.controller_addr},
            'orchestration': {'periodic_interval': '1'},
            'keelson': {'data_dir': os.path.join(self.dir, 'c1')},
        }
        for g, o in extra.items():
            conf.setdefault(g, {}).update(o)
        path = write_conf(os.path.join(self.dir, 'controller.conf'), conf)
        self.controller = Proc([keelson_bin(), '--config-file', path, 'controller'], cwd=self.dir,
                               env={'RUST_LOG': 'keelson=info'})
        self.procs.append(self.controller)
        wait_port(port, proc=self.controller)

    def start_engine(self, i):
        p = Proc([keelson_bin(), '--config-file', self.engine_conf(i), 'engine'], cwd=self.dir)
        self.procs.append(p)
        wait_port(self.engine_ports[i], proc=p)
        return p


class ReferenceHeat:
    """The reference Python Heat (openstack-heat 27.0.1 from PyPI, installed
    on first use by tests/reference/heat/setup) on a free loopback port:
    heat-api and `engines` heat-engine processes on a MariaDB database and
    a RabbitMQ virtual host of their own, created and dropped by the
    launcher (tests/reference/heat/serve.py); noauth, project `project`."""

    READY = 'reference-heat-ready '

    def __init__(self, procs, engines=1, workers=1, project='admin', timeout=300):
        here = os.path.join(REFERENCE, 'heat')
        venv = subprocess.run([os.path.join(here, 'setup')], check=True, stdout=subprocess.PIPE,
                              text=True).stdout.strip().splitlines()[-1]
        self.proc = Proc([os.path.join(venv, 'bin', 'python'), os.path.join(here, 'serve.py'), '--port',
                          str(free_port()), '--engines', str(engines), '--workers', str(workers), '--project', project])
        procs.append(self.proc)
        info = self._wait_ready(timeout)
        self.url = info['url']
        self.engine_pids = info['engine_pids']
        self.heat = Heat(self.url, project=project)

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.proc.output().splitlines():
                if line.startswith(self.READY):
                    return json.loads(line[len(self.READY):])
            if self.proc.p.poll() is not None:
                raise RuntimeError('reference heat exited early:\n' + self.proc.output())
            time.sleep(0.5)
        raise RuntimeError('reference heat not ready in %ss:\n%s' % (timeout, self.proc.output()))

    def engine_process_ids(self):
        """The heat-engine processes and the workers they fork (where the
        stacks are worked on)."""
        children = {}
        for entry in os.listdir('/proc'):
            if not entry.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % entry) as f:
                    # pid (comm) state ppid ...: comm may hold spaces.
                    ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        out, todo = [], list(self.engine_pids)
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def stop(self):
        """Waits for the launcher's clean-up (engines, database, virtual
        host), which takes longer than Proc.stop's default."""
        return self.proc.stop(timeout=60)
