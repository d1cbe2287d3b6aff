"""Shared fixtures: the keelson binary, free ports, databases per test on
each configured backend, and processes that are always cleaned up."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'tests', 'lib'))
from launch import free_port, write_conf  # noqa: E402,F401  (re-exported to the test modules)
# The project's launchers of the reference Python services (tests/reference).
REFERENCE = os.path.join(ROOT, 'tests', 'reference')
RUN_ID = os.environ.get('KEELSON_RUN_ID', str(os.getpid()))
BACKENDS = os.environ.get('KEELSON_BACKENDS', 'sqlite').split()
MYSQL = os.environ.get('KEELSON_TEST_MYSQL', 'mysql+pymysql://root@127.0.0.1:3306')
POSTGRES = os.environ.get('KEELSON_TEST_POSTGRES', 'postgresql+psycopg2://postgres@127.0.0.1:5432')


def keelson_bin():
    env = os.environ.get('KEELSON_BIN')
    if env:
        return env
    target = os.environ.get('CARGO_TARGET_DIR', os.path.join(ROOT, 'target'))
    for candidate in (os.path.join(target, 'release', 'keelson'), os.path.join(ROOT, 'target', 'release', 'keelson'),
                      os.path.join(ROOT, 'target', 'debug', 'keelson')):
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError('no keelson binary: build it first (cargo build --release)')


def _server(url):
    scheme, rest = url.split('://', 1)
    return scheme.split('+')[0], urllib.parse.urlparse('x://' + rest)


def create_database(backend, name):
    """An empty database for one test; answers its SQLAlchemy URL."""
    if backend == 'sqlite':
        d = tempfile.mkdtemp(prefix='kt-')
        return 'sqlite:///%s/%s.db' % (d, name)
    dbname = 'kt_%s_%s' % (RUN_ID, name)
    if backend == 'mysql':
        import pymysql
        _, p = _server(MYSQL)
        conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root', password=p.password or '')
        with conn.cursor() as cur:
            cur.execute('DROP DATABASE IF EXISTS `%s`' % dbname)
            cur.execute('CREATE DATABASE `%s`' % dbname)
        conn.close()
        return '%s/%s?charset=utf8mb4' % (MYSQL.rstrip('/'), dbname)
    if backend == 'postgresql':
        import psycopg2
        _, p = _server(POSTGRES)
        conn = psycopg2.connect(host=p.hostname, port=p.port or 5432, user=p.username or 'postgres', dbname='postgres')
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % dbname)
            cur.execute('CREATE DATABASE "%s"' % dbname)
        conn.close()
        return '%s/%s' % (POSTGRES.rstrip('/'), dbname)
    raise ValueError(backend)


# -- direct SQL, for tests that put a database into a state the API never writes

def connect(url):
    if url.startswith('sqlite'):
        import sqlite3
        return sqlite3.connect(url.split(':///', 1)[1]), '?'
    scheme, rest = url.split('://', 1)
    p = urllib.parse.urlparse('x://' + rest)
    if scheme.startswith('mysql'):
        import pymysql
        return pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root',
                               password=p.password or '', database=p.path.lstrip('/')), '%s'
    import psycopg2
    return psycopg2.connect(host=p.hostname, port=p.port or 5432, user=p.username or 'postgres',
                            dbname=p.path.lstrip('/')), '%s'


def execute(url, *statements):
    """Runs (sql, params) pairs in one transaction; `?` placeholders."""
    conn, mark = connect(url)
    try:
        cur = conn.cursor()
        for sql, params in statements:
            cur.execute(sql.replace('?', mark), params)
        conn.commit()
    finally:
        conn.close()


def query(url, sql):
    conn, _ = connect(url)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()


class Proc:
    """A keelson (or other) process with its log file."""

    def __init__(self, args, env=None, cwd=None):
        self.log_path = tempfile.mktemp(prefix='kt-log-')
        self.log = open(self.log_path, 'wb')
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.p = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd,
                                  start_new_session=True)

    def output(self):
        self.log.flush()
        with open(self.log_path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(5)
        return self.p.returncode


# Generous: creating the schema on MariaDB takes seconds per statement on
# a loaded two-core machine. A process that dies is reported at once.
def wait_http(url, timeout=90, proc=None, context=None):
    """Until `url` answers (`context`: the ssl.SSLContext of an https URL)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.p.poll() is not None:
            raise RuntimeError('process exited early:\n' + proc.output())
        try:
            urllib.request.urlopen(url, timeout=2, context=context).read()
            return
        except urllib.error.HTTPError:
            return
        except Exception:
            time.sleep(0.1)
    raise RuntimeError('%s did not answer in %ss\n%s' % (url, timeout, proc.output() if proc else ''))


def wait_port(port, timeout=30, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.p.poll() is not None:
            raise RuntimeError('process exited early:\n' + proc.output())
        with socket.socket() as s:
            if s.connect_ex(('127.0.0.1', port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError('port %s not open after %ss' % (port, timeout))


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.stop()


@pytest.fixture(scope='module')
def module_procs():
    """Processes shared by the tests of one module, stopped in reverse
    order of start after its last test."""
    started = []
    yield started
    for p in reversed(started):
        p.stop()


class AllInOne:
    """keelson all-in-one on free ports with a given database URL."""

    def __init__(self, procs, db_url, extra=None, env=None):
        self.dir = tempfile.mkdtemp(prefix='kt-aio-')
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        conf = {'placement_database': {'connection': db_url}, 'api': {'auth_strategy': 'noauth2'}}
        for g, o in (extra or {}).items():
            conf.setdefault(g, {}).update(o)
        self.conf = write_conf(os.path.join(self.dir, 'keelson.conf'), conf)
        e = {'PLACEMENT_CONFIG_FILE': self.conf, 'PLACEMENT_BIND': '127.0.0.1', 'PLACEMENT_PORT': str(self.port)}
        e.update(env or {})
        self.proc = Proc([keelson_bin(), 'all-in-one'], env=e, cwd=self.dir)
        procs.append(self.proc)
        wait_http(self.url + '/', proc=self.proc)

    def logged_address(self, prefix):
        """The address the log line starting with `prefix` names: in
        harness mode all-in-one takes free ports for its other listeners
        and logs them."""
        for _ in range(100):
            for line in self.proc.output().splitlines():
                if prefix in line:
                    return line.split(prefix)[1].split()[0]
            time.sleep(0.1)
        raise AssertionError(self.proc.output())

    def orchestration_url(self):
        return self.logged_address('Orchestration API on ')


def http(method, url, body=None, headers=None, version='1.39', token='admin', timeout=30):
    """(status, headers, parsed JSON or text) of one request."""
    import json
    h = {'accept': 'application/json', 'openstack-api-version': 'placement %s' % version}
    if token is not None:
        h['x-auth-token'] = token
    h.update(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h['content-type'] = 'application/json'
    req = urllib.request.Request(url, data=data, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read().decode()
            return r.status, dict(r.headers), (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read().decode()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return e.code, dict(e.headers), parsed


def new_uuid():
    return str(uuid.uuid4())


def ref_placement_venv():
    """The reference Python Placement's virtualenv, installed on first use
    by tests/reference/placement/setup."""
    out = subprocess.run([os.path.join(REFERENCE, 'placement', 'setup')], check=True, stdout=subprocess.PIPE, text=True)
    return out.stdout.strip().splitlines()[-1]


def ref_placement(procs, db_url=None, conf=None, server='wsgiref', threads=4, fix_upstream_defects=False, env=None,
                  timeout=120, wait=True):
    """The reference Python Placement (tests/reference/placement/serve.py)
    on a free loopback port, serving `db_url` without authentication or
    with the oslo.config sections `conf`; answers (url, Proc). The
    launcher keeps its configuration in a temporary directory of its own.
    With wait=False the caller waits (wait_http) when it needs it."""
    venv = ref_placement_venv()
    port = free_port()
    args = [os.path.join(venv, 'bin', 'python'), os.path.join(REFERENCE, 'placement', 'serve.py'),
            '--port', str(port), '--server', server, '--threads', str(threads)]
    if conf is not None:
        d = tempfile.mkdtemp(prefix='kt-ref-')
        args += ['--config-file', write_conf(os.path.join(d, 'placement.conf'), conf)]
    else:
        args += ['--db', db_url]
    if fix_upstream_defects:
        args.append('--fix-upstream-defects')
    p = Proc(args, env=env)
    procs.append(p)
    url = 'http://127.0.0.1:%d' % port
    if wait:
        wait_http(url + '/', timeout=timeout, proc=p)
    return url, p
