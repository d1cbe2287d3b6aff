"""Nova's functional tests against keelson: the substitute for the
in-process Python Placement.

Nova's functional tests reach Placement through
``nova.tests.functional.fixtures.PlacementFixture``, a subclass of
openstack-placement's ``placement.tests.functional.fixtures.placement.
PlacementFixture``. Upstream's ``setUp`` builds the Placement WSGI app on
an in-memory database and installs a wsgi-intercept for a made-up
``http://<uuid>/placement`` endpoint; Nova's subclass then patches
``SchedulerReportClient.get/post/put/delete`` to send every request
through a keystoneauth adapter without auth to ``self.endpoint`` with
``x-auth-token: <token>`` (upstream's noauth2 middleware wants one).

``install()`` replaces the base class's ``setUp`` so that, instead, each
fixture gets a keelson all-in-one of its own on a free loopback port with
a fresh SQLite database (``[api] auth_strategy = noauth2`` and
``[oslo_policy] enforce_new_defaults = false``, as upstream's fixture
configures its app) and ``self.endpoint`` is that server's URL.
Everything Nova's subclass adds runs unchanged on top. The server stops at
the fixture's cleanup.

Startup: the next server of this process is started as soon as one is
taken (never used before, its own database), so a test waits only for
what is left of that start.

``db=False`` with a given ``conf_fixture`` (a test that keeps Placement's
database across two fixtures, test_bug_1679750) reuses that conf
fixture's database: the second server opens the first one's SQLite file.
"""

import atexit
import http.client
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_TIMEOUT = float(os.environ.get('KEELSON_NOVA_START_TIMEOUT', '60'))

# Per-process scratch directory: one subdirectory per server.
_scratch = None
_spare = None
# Startup figures of this process, written at exit when asked
# (KEELSON_NOVA_STATS_DIR): seconds a setUp waited for its server.
_waits = []


def keelson_bin():
    env = os.environ.get('KEELSON_BIN')
    if env:
        return env
    target = os.environ.get('CARGO_TARGET_DIR', os.path.join(ROOT, 'target'))
    for candidate in (os.path.join(target, 'release', 'keelson'), os.path.join(ROOT, 'target', 'release', 'keelson')):
        if os.path.exists(candidate):
            return candidate
    raise RuntimeError('no keelson binary: build it (cargo build --release) or set KEELSON_BIN')


def _scratch_dir():
    global _scratch
    if _scratch is None:
        # Not tempfile's default: Nova's tests point it at a per-test
        # directory (NestedTempfile) that goes away with the test.
        _scratch = tempfile.mkdtemp(prefix='kt-nova-', dir=os.environ.get('TMPDIR') or '/tmp')
        atexit.register(_at_exit)
    return _scratch


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class KeelsonServer:
    """One keelson all-in-one serving Placement on 127.0.0.1:<free port>
    with its database at <dir>/placement.db. Started on construction;
    ``wait()`` blocks until it answers."""

    def __init__(self, directory=None):
        self.owns_dir = directory is None
        self.dir = directory or tempfile.mkdtemp(prefix='s-', dir=_scratch_dir())
        self.started = time.monotonic()
        self.port = _free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self.log_path = os.path.join(self.dir, 'keelson-%d.log' % self.port)
        conf = os.path.join(self.dir, 'keelson.conf')
        with open(conf, 'w') as f:
            f.write('[placement_database]\nconnection = sqlite:///%s/placement.db\n' % self.dir)
            f.write('[database]\nconnection = sqlite:///%s/orchestration.db\n' % self.dir)
            f.write('[api]\nauth_strategy = noauth2\n')
            # What upstream's fixture sets (Nova's tests default it to true).
            f.write('[oslo_policy]\nenforce_new_defaults = false\n')
            f.write('[telemetry]\nlog_filter = warn\n')
        env = dict(os.environ)
        env.update({'PLACEMENT_BIND': '127.0.0.1', 'PLACEMENT_PORT': str(self.port)})
        env.pop('RUST_LOG', None)
        self._log = open(self.log_path, 'wb')
        self.proc = subprocess.Popen([keelson_bin(), '--config-file', conf, 'all-in-one'], cwd=self.dir, env=env,
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self.ready = False

    def log_tail(self, n=40):
        try:
            with open(self.log_path, errors='replace') as f:
                return ''.join(f.readlines()[-n:])
        except OSError:
            return ''

    def wait(self):
        """Block until the server answers a TCP connect and GET / (the
        version document); raise with its log if it exits or times out."""
        if self.ready:
            return
        deadline = self.started + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('keelson exited (%s) before answering on %s:\n%s'
                                   % (self.proc.returncode, self.url, self.log_tail()))
            try:
                conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=5)
                try:
                    conn.request('GET', '/', headers={'Connection': 'close'})
                    conn.getresponse().read()
                finally:
                    conn.close()
                self.ready = True
                return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError('keelson did not answer on %s in %ss:\n%s' % (self.url, START_TIMEOUT, self.log_tail()))

    def stop(self, remove=True):
        """Stop and reap at once: a stopped child left unreaped is a zombie
        in the test process, which tests that list its children trip over
        (test_bug_1568208's Guru Meditation report). A server whose
        database is thrown away gets SIGKILL (milliseconds; graceful
        shutdown is 0.5 s, and 5-20 s when the SIGTERM comes within
        milliseconds of the start); one whose database a later fixture
        reuses gets SIGTERM."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if self.owns_dir else signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if remove and self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def acquire(directory=None):
    """A started, answering server. With `directory` (a database to
    reuse) a new server on it; otherwise the spare one, and the next spare
    is started at once."""
    global _spare
    t0 = time.monotonic()
    if directory is not None:
        server = KeelsonServer(directory)
    else:
        server = _spare if _spare is not None and _spare.proc.poll() is None else KeelsonServer()
        _spare = KeelsonServer() if os.environ.get('KEELSON_NOVA_PRESTART', '1') == '1' else None
    server.wait()
    _waits.append(time.monotonic() - t0)
    return server


def _at_exit():
    global _spare
    if _spare is not None:
        _spare.stop()
        _spare = None
    stats = os.environ.get('KEELSON_NOVA_STATS_DIR')
    if stats and _waits:
        with open(os.path.join(stats, 'waits-%d.txt' % os.getpid()), 'w') as f:
            f.write(''.join('%.4f\n' % w for w in _waits))
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)


def _keelson_setUp(self):
    """upstream PlacementFixture.setUp with the in-process app and its
    database replaced by a keelson server (see the module docstring)."""
    import fixtures
    from oslo_config import cfg
    from oslo_config import fixture as config_fixture
    from oslo_policy import opts as policy_opts
    from placement import conf

    fixtures.Fixture.setUp(self)
    shared_conf = self.conf_fixture is not None
    if not self.conf_fixture:
        self.conf_fixture = self.useFixture(config_fixture.Config(cfg.ConfigOpts()))
    if self.register_opts:
        conf.register_opts(self.conf_fixture.conf)
    self._configure_placement(self.conf_fixture)
    # Kept although keelson reads its own file: oslo.policy's set_defaults
    # changes the option's default process-wide, so with upstream's fixture
    # Nova's own policy also runs without the new defaults, and Nova's
    # tests rely on it (test_servers' test_resize_server_overquota_*: the
    # second user may create servers only then).
    policy_opts.set_defaults(self.conf_fixture.conf, enforce_new_defaults=False)
    self.conf_fixture.config(group='api', auth_strategy='noauth2')

    if not self.db and shared_conf:
        # The test manages Placement's database itself across fixtures:
        # one keelson database per conf fixture, kept for its lifetime.
        directory = getattr(self.conf_fixture, '_keelson_nova_dir', None)
        if directory is None:
            directory = tempfile.mkdtemp(prefix='shared-', dir=_scratch_dir())
            self.conf_fixture._keelson_nova_dir = directory
        server = acquire(directory)
    else:
        server = acquire()
    self.keelson_server = server
    self.addCleanup(server.stop)
    self.endpoint = server.url


def install():
    """Patch upstream's PlacementFixture (before any test module imports
    it, so Nova's subclass inherits the patched setUp)."""
    from placement.tests.functional.fixtures import placement as upstream
    upstream.PlacementFixture.setUp = _keelson_setUp
    upstream.PlacementFixture._keelson = True
