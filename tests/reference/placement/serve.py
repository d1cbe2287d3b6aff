"""Serves the reference Python Placement (the openstack-placement package
that ./setup installs) on a loopback port, for the tests and benchmarks
that run it beside keelson. Run it with the reference virtualenv's python
(./serve does).

  serve.py (--config-file FILE | --db URL) --port N [--bind 127.0.0.1]
           [--server wsgiref|cheroot] [--threads N] [--fix-upstream-defects]

Every option can come from the environment instead: PLACEMENT_CONFIG_FILE,
PLACEMENT_DATABASE_URL, PLACEMENT_PORT, PLACEMENT_BIND,
PLACEMENT_WSGI_SERVER, PLACEMENT_THREADS.

--config-file is an oslo.config INI file; --db alone stands for one with
that [placement_database] connection and [api] auth_strategy = noauth2.
Either way the launcher writes the file it serves with into a temporary
directory of its own (removed on exit) with [placement_database]
sync_on_startup = True added, so that the reference creates or upgrades the
schema and the standard traits and classes, and loads the package's own
WSGI application from there (OS_PLACEMENT_CONFIG_DIR).

Servers: `wsgiref` (the default) is the standard library's, one thread per
connection; it hands a malformed Content-Length to the application as
placement's own tests expect. `cheroot` (--threads workers) is a
production-grade threaded server, for the benchmarks.

--fix-upstream-defects applies upstream_fixes.py first: the oracle of
tests/integration/test_candidates_differential.py.

Stops on SIGTERM or SIGINT.
"""
import argparse
import configparser
import os
import shutil
import signal
import socketserver
import sys
import tempfile
from wsgiref import simple_server

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv):
    env = os.environ.get
    ap = argparse.ArgumentParser(description='Serve the reference Python Placement on loopback.')
    ap.add_argument('--config-file', default=env('PLACEMENT_CONFIG_FILE'))
    ap.add_argument('--db', default=env('PLACEMENT_DATABASE_URL'), help='database URL, when there is no --config-file')
    ap.add_argument('--port', type=int, default=env('PLACEMENT_PORT'))
    ap.add_argument('--bind', default=env('PLACEMENT_BIND', '127.0.0.1'))
    ap.add_argument('--server', choices=('wsgiref', 'cheroot'), default=env('PLACEMENT_WSGI_SERVER', 'wsgiref'))
    ap.add_argument('--threads', type=int, default=int(env('PLACEMENT_THREADS', '4')))
    ap.add_argument('--fix-upstream-defects', action='store_true')
    args = ap.parse_args(argv)
    if args.port is None:
        ap.error('--port (or PLACEMENT_PORT) is required')
    if not args.config_file and not args.db:
        ap.error('--config-file or --db (or PLACEMENT_CONFIG_FILE / PLACEMENT_DATABASE_URL) is required')
    return args


def write_config(args, config_dir):
    """placement.conf in `config_dir`: the caller's file (or one made from
    --db) with the schema synced on startup."""
    # Raw, case-preserving: values pass through as written.
    conf = configparser.RawConfigParser(interpolation=None, strict=False)
    conf.optionxform = str
    if args.config_file:
        with open(args.config_file) as f:
            conf.read_file(f, source=args.config_file)
    else:
        conf['placement_database'] = {'connection': args.db}
        conf['api'] = {'auth_strategy': 'noauth2'}
    if not conf.has_section('placement_database'):
        conf.add_section('placement_database')
    conf.set('placement_database', 'sync_on_startup', 'True')
    with open(os.path.join(config_dir, 'placement.conf'), 'w') as f:
        conf.write(f)


def load_application(config_dir, fix_defects):
    os.environ['OS_PLACEMENT_CONFIG_DIR'] = config_dir
    # The package's WSGI entry point builds its options from the process's
    # command line as well as the file: it must not see ours.
    sys.argv = sys.argv[:1]
    if fix_defects:
        sys.path.insert(0, HERE)
        import upstream_fixes
        upstream_fixes.apply()
    from placement.wsgi import api
    return api.application


class ThreadingServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class Handler(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):
        pass  # placement logs every request itself

    def get_environ(self):
        environ = super().get_environ()
        # wsgiref sets CONTENT_TYPE to text/plain when the request has none;
        # placement must see it absent (its 415 checks depend on it).
        if self.headers.get('content-type') is None:
            environ.pop('CONTENT_TYPE', None)
        return environ


def make_server(args, app):
    """The chosen server's serve-forever function, its socket bound."""
    if args.server == 'cheroot':
        from cheroot import wsgi
        server = wsgi.Server((args.bind, args.port), app, numthreads=args.threads, server_name='keelson-ref-placement')
        server.prepare()
        return server.serve
    server = simple_server.make_server(args.bind, args.port, app, server_class=ThreadingServer, handler_class=Handler)
    return server.serve_forever


def main():
    args = parse_args(sys.argv[1:])
    config_dir = tempfile.mkdtemp(prefix='keelson-ref-placement-')
    try:
        write_config(args, config_dir)
        app = load_application(config_dir, args.fix_upstream_defects)
        serve = make_server(args, app)
    except BaseException:
        shutil.rmtree(config_dir, ignore_errors=True)
        raise

    def on_signal(signum, frame):
        # No orderly shutdown: the servers' stop waits for the serving loop
        # this handler interrupts (cheroot's never returns), and nothing a
        # request in flight holds needs saving.
        shutil.rmtree(config_dir, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print('reference placement (%s) on http://%s:%d/' % (args.server, args.bind, args.port), file=sys.stderr, flush=True)
    serve()


if __name__ == '__main__':
    main()
