"""Runs the reference Python Heat (the openstack-heat package that ./setup
installs) on loopback for one run: heat-wsgi-api and N heat-engine
processes, with a RabbitMQ virtual host and a MariaDB database of their own
that this launcher creates at start and deletes when it stops. Run it with
the reference virtualenv's python (./serve does).

  serve.py --port N [--engines 1] [--workers 1] [--project admin]
           [--mysql URL] [--rabbit URL] [--run-id ID] [--debug] [--keep]

Environment instead of options: REF_HEAT_PORT, REF_HEAT_ENGINES,
REF_HEAT_WORKERS, REF_HEAT_PROJECT, KEELSON_TEST_MYSQL (the MariaDB server,
default mysql+pymysql://root@127.0.0.1:3306), KEELSON_TEST_RABBIT (the
broker, default amqp://guest:guest@127.0.0.1:5672; its virtual hosts are
managed with rabbitmqctl, so the broker must be on this machine),
KEELSON_RUN_ID.

No Keystone: heat-api runs the `noauth` paste flavor (the project is the
X-Auth-Project header, which must match the project in the URL; every
caller is admin), the engines use Heat's bundled fake Keystone client, and
the token the noauth middleware hands on is written here, with a catalog
holding one orchestration endpoint (without it, the types whose client
plugin is Heat's own, such as OS::Heat::SoftwareConfig or OS::Heat::Stack,
are reported unavailable). The convergence engine is on, the resource
limit per stack off, stack adopt and abandon on.

Names are kt_<run id>_refheat_<random> for both the database and the
virtual host, so runs side by side never meet. Configuration and logs live
in a temporary directory, removed on exit (kept with --keep; its path is
logged).

When heat-api answers, one line goes to stdout:
  reference-heat-ready {"url": ..., "api_pid": ..., "engine_pids": [...], "state": ...}
Stops on SIGTERM or SIGINT: children first (each given 10 s), then the
database and the virtual host.
"""
import argparse
import datetime
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pymysql

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'lib'))
from launch import write_conf  # noqa: E402

BIN = os.path.dirname(os.path.abspath(sys.executable))
# The RPC topics every heat-engine process consumes.
ENGINE_TOPICS = ('engine', 'engine_worker')


class LaunchError(Exception):
    pass


def parse_args(argv):
    env = os.environ.get
    ap = argparse.ArgumentParser(description='Run the reference Python Heat on loopback for one run.')
    ap.add_argument('--port', type=int, default=env('REF_HEAT_PORT'))
    ap.add_argument('--engines', type=int, default=int(env('REF_HEAT_ENGINES', '1')))
    ap.add_argument('--workers', type=int, default=int(env('REF_HEAT_WORKERS', '1')),
                    help='num_engine_workers of each engine process')
    ap.add_argument('--project', default=env('REF_HEAT_PROJECT', 'admin'))
    ap.add_argument('--mysql', default=env('KEELSON_TEST_MYSQL', 'mysql+pymysql://root@127.0.0.1:3306'))
    ap.add_argument('--rabbit', default=env('KEELSON_TEST_RABBIT', 'amqp://guest:guest@127.0.0.1:5672'))
    ap.add_argument('--run-id', default=env('KEELSON_RUN_ID', str(os.getpid())))
    ap.add_argument('--debug', action='store_true')
    ap.add_argument('--keep', action='store_true', help='keep the configuration and logs')
    ap.add_argument('--timeout', type=int, default=180, help='seconds heat-api may take to answer')
    args = ap.parse_args(argv)
    if args.port is None:
        ap.error('--port (or REF_HEAT_PORT) is required')
    return args


def server_of(url):
    """urlparse of a SQLAlchemy-style or AMQP URL, scheme dropped."""
    return urllib.parse.urlparse('x://' + url.split('://', 1)[1])


class Database:
    def __init__(self, server_url, name):
        self.server = server_of(server_url)
        self.name = name

    def _connect(self):
        s = self.server
        return pymysql.connect(host=s.hostname, port=s.port or 3306, user=urllib.parse.unquote(s.username or 'root'),
                               password=urllib.parse.unquote(s.password or ''))

    def create(self):
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute('CREATE DATABASE `%s` CHARACTER SET utf8mb4' % self.name)
        finally:
            conn.close()

    def drop(self):
        conn = self._connect()
        try:
            with conn.cursor() as cur:
                cur.execute('DROP DATABASE IF EXISTS `%s`' % self.name)
        finally:
            conn.close()

    def url(self):
        s = self.server
        auth = s.username or 'root'
        if s.password:
            auth += ':' + s.password
        return 'mysql+pymysql://%s@%s:%d/%s?charset=utf8' % (auth, s.hostname, s.port or 3306, self.name)


class VirtualHost:
    def __init__(self, broker_url, name):
        self.server = server_of(broker_url)
        self.name = name

    def _ctl(self, *args):
        r = subprocess.run(['rabbitmqctl', '-q', *args], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise LaunchError('rabbitmqctl %s: %s' % (' '.join(args), (r.stderr or r.stdout).strip()))

    def create(self):
        self._ctl('add_vhost', self.name)
        self._ctl('set_permissions', '-p', self.name, urllib.parse.unquote(self.server.username or 'guest'),
                  '.*', '.*', '.*')

    def delete(self):
        self._ctl('delete_vhost', self.name)

    def consumers(self):
        """queue name -> consumer count."""
        r = subprocess.run(['rabbitmqctl', '-q', 'list_queues', '-p', self.name, 'name', 'consumers'],
                           capture_output=True, text=True, timeout=60)
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split('\t')
            if len(parts) == 2 and parts[1].isdigit():
                out[parts[0]] = int(parts[1])
        return out

    def transport_url(self):
        s = self.server
        return 'rabbit://%s:%s@%s:%d/%s' % (s.username or 'guest', s.password or 'guest', s.hostname, s.port or 5672,
                                            urllib.parse.quote(self.name, safe=''))


def token_body(orchestration_url, project):
    """A Keystone v3 token for the noauth middleware: only what Heat reads."""
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp = '%Y-%m-%dT%H:%M:%S.000000Z'
    domain = {'id': 'default', 'name': 'Default'}
    endpoints = [{'id': 'orchestration-' + interface, 'interface': interface, 'region': 'RegionOne',
                  'region_id': 'RegionOne', 'url': orchestration_url} for interface in ('public', 'internal', 'admin')]
    return {'token': {
        'methods': ['password'], 'is_domain': False, 'audit_ids': ['keelson-reference'],
        'issued_at': now.strftime(stamp),
        'expires_at': (now + datetime.timedelta(days=3650)).strftime(stamp),
        'user': {'id': 'admin', 'name': 'admin', 'domain': domain, 'password_expires_at': None},
        'project': {'id': project, 'name': project, 'domain': domain},
        'roles': [{'id': 'admin', 'name': 'admin'}],
        'catalog': [{'id': 'orchestration', 'name': 'heat', 'type': 'orchestration', 'endpoints': endpoints}],
    }}


def paste_config():
    """The api-paste.ini the package installs beside its scripts."""
    path = os.path.join(os.path.dirname(BIN), 'etc', 'heat', 'api-paste.ini')
    if not os.path.exists(path):
        raise LaunchError('no %s: is openstack-heat installed in this virtualenv?' % path)
    return path


def write_config(args, state, db_url, transport_url):
    api = 'http://127.0.0.1:%d' % args.port
    token = os.path.join(state, 'token.json')
    with open(token, 'w') as f:
        json.dump(token_body('%s/v1/%s' % (api, args.project), args.project), f)
    sections = {
        'DEFAULT': {
            'debug': str(args.debug).lower(),
            'log_dir': os.path.join(state, 'log'),
            'transport_url': transport_url,
            'host': 'keelson-reference-heat',
            'deferred_auth_method': 'password',
            'keystone_backend': 'heat.engine.clients.os.keystone.fake_keystoneclient.FakeKeystoneClient',
            'convergence_engine': 'true',
            'num_engine_workers': str(args.workers),
            'max_resources_per_stack': '-1',
            'max_json_body_size': '8388608',
            'heat_metadata_server_url': api + '/',
            'heat_waitcondition_server_url': api + '/v1/waitcondition',
            'default_deployment_signal_transport': 'HEAT_SIGNAL',
            'default_software_config_transport': 'POLL_SERVER_HEAT',
            'enable_stack_adopt': 'true',
            'enable_stack_abandon': 'true',
            'hidden_stack_tags': 'hidden',
            'auth_encryption_key': secrets.token_hex(16),
            # SIGTERM must not keep an engine for oslo.service's default minute.
            'graceful_shutdown_timeout': '5',
        },
        'cache': {'enabled': 'true', 'backend': 'dogpile.cache.memory'},
        'paste_deploy': {'flavor': 'noauth', 'api_paste_config': paste_config()},
        'database': {'connection': db_url},
        'noauth': {'token_response': token},
        'oslo_messaging_rabbit': {'heartbeat_timeout_threshold': '0'},
        'oslo_policy': {'enforce_scope': 'false', 'enforce_new_defaults': 'false'},
    }
    return write_conf(os.path.join(state, 'heat.conf'), sections)


class Launch:
    """Everything one run made, undone in reverse by `stop`."""

    def __init__(self, args):
        self.args = args
        self.state = tempfile.mkdtemp(prefix='keelson-ref-heat-')
        os.makedirs(os.path.join(self.state, 'log'))
        name = 'kt_%s_refheat_%s' % (args.run_id, secrets.token_hex(3))
        self.db = Database(args.mysql, name)
        self.vhost = VirtualHost(args.rabbit, name)
        self.children = []
        self.made = []

    def log(self, msg):
        print('reference heat: %s' % msg, file=sys.stderr, flush=True)

    def spawn(self, name, argv):
        out = open(os.path.join(self.state, 'log', name + '.out'), 'wb')
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self.children.append((name, p))
        return p

    def start(self):
        a = self.args
        self.log('state in %s, database and virtual host %s' % (self.state, self.db.name))
        self.db.create()
        self.made.append(self.db.drop)
        self.vhost.create()
        self.made.append(self.vhost.delete)
        conf = write_config(a, self.state, self.db.url(), self.vhost.transport_url())
        sync = subprocess.run([os.path.join(BIN, 'heat-manage'), '--config-file', conf, 'db_sync'],
                              capture_output=True, text=True, timeout=600)
        if sync.returncode != 0:
            raise LaunchError('heat-manage db_sync failed:\n%s' % (sync.stdout + sync.stderr)[-4000:])
        engines = [self.spawn('engine-%d' % i, [os.path.join(BIN, 'heat-engine'), '--config-file', conf,
                                                '--log-file', os.path.join(self.state, 'log', 'engine-%d.log' % i)])
                   for i in range(1, a.engines + 1)]
        api = self.spawn('api', [os.path.join(BIN, 'heat-wsgi-api'), '--host', '127.0.0.1', '--port', str(a.port),
                                 '--', '--config-file', conf,
                                 '--log-file', os.path.join(self.state, 'log', 'api.log')])
        self.wait_ready(a.timeout)
        info = {'url': 'http://127.0.0.1:%d' % a.port, 'project': a.project, 'api_pid': api.pid,
                'engine_pids': [p.pid for p in engines], 'state': self.state}
        print('reference-heat-ready ' + json.dumps(info), flush=True)

    def wait_ready(self, timeout):
        """Until heat-api answers and every engine consumes its RPC topics:
        in a new virtual host, a call sent before the engines' queues exist
        is dropped by the broker and the API waits a minute for its reply."""
        deadline = time.monotonic() + timeout
        api_up = engines_up = False
        while time.monotonic() < deadline:
            for name, p in self.children:
                if p.poll() is not None:
                    raise LaunchError('%s exited with %s:\n%s' % (name, p.returncode, self.tail(name)))
            if not engines_up:
                consumers = self.vhost.consumers()
                engines_up = all(consumers.get(topic, 0) >= self.args.engines for topic in ENGINE_TOPICS)
            if not api_up:
                try:
                    with urllib.request.urlopen('http://127.0.0.1:%d/' % self.args.port, timeout=2):
                        api_up = True
                except urllib.error.HTTPError:
                    api_up = True
                except OSError:
                    pass
            if api_up and engines_up:
                return
            time.sleep(0.5)
        raise LaunchError('heat-api (%s) or the engines (%s) not ready in %ss:\n%s' % (
            'up' if api_up else 'down', 'consuming' if engines_up else 'not consuming', timeout, self.tail('api')))

    def tail(self, name):
        text = ''
        for suffix in ('.out', '.log'):
            try:
                with open(os.path.join(self.state, 'log', name + suffix), errors='replace') as f:
                    text += f.read()[-3000:]
            except OSError:
                pass
        return text

    def supervise(self):
        """Until a signal: a child that dies is reported, not restarted."""
        reported = set()
        while True:
            for name, p in self.children:
                if p.poll() is not None and name not in reported:
                    reported.add(name)
                    self.log('%s exited with %s:\n%s' % (name, p.returncode, self.tail(name)))
            time.sleep(1)

    def stop(self):
        for _, p in self.children:
            if p.poll() is None:
                p.terminate()
        for _, p in self.children:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        for undo in reversed(self.made):
            try:
                undo()
            except Exception as e:  # the rest must still be undone
                self.log('clean-up: %s' % e)
        self.made = []
        if self.args.keep:
            self.log('kept %s' % self.state)
        else:
            shutil.rmtree(self.state, ignore_errors=True)


def main():
    args = parse_args(sys.argv[1:])
    launch = Launch(args)

    def on_signal(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        launch.start()
        launch.supervise()
    except LaunchError as e:
        launch.log(str(e))
        sys.exit(1)
    finally:
        # SystemExit from the handler lands here too, as may a second
        # signal during clean-up: ignore those from now on.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        launch.stop()


if __name__ == '__main__':
    main()
