#!/usr/bin/env python3
"""Serves one OpenStack WSGI API (nova-api, glance-api or the Neutron API)
with cheroot on a loopback port, as a web server would host the package's
WSGI entry point.

  wsgi_serve.py nova|glance|neutron PORT CONFIG_FILE [CONFIG_FILE...]

The packages' WSGI modules read the process's argv as their own options,
so argv is cleared before the application loads; the configuration comes
from the environment variables the entry points read (OS_NOVA_CONFIG_DIR
and OS_NOVA_CONFIG_FILES; OS_GLANCE_CONFIG_DIR, whose glance-api.conf
is read; OS_NEUTRON_CONFIG_DIR and OS_NEUTRON_CONFIG_FILES, every file
given, in one directory).
Stops on SIGTERM/SIGINT.
"""
import os
import signal
import sys


def load(kind, config_file, more_files):
    config_dir, name = os.path.split(os.path.abspath(config_file))
    if kind == 'nova':
        # Nova loads the first file as the paste pipeline: api-paste.ini
        # must lie beside the configuration file.
        os.environ['OS_NOVA_CONFIG_DIR'] = config_dir
        os.environ['OS_NOVA_CONFIG_FILES'] = 'api-paste.ini;' + name
        from nova.wsgi import osapi_compute
        return osapi_compute.application
    if kind == 'glance':
        # The directory must hold the file as glance-api.conf.
        os.environ['OS_GLANCE_CONFIG_DIR'] = config_dir
        from glance.common import wsgi_app
        return wsgi_app.init_app()
    if kind == 'neutron':
        os.environ['OS_NEUTRON_CONFIG_DIR'] = config_dir
        os.environ['OS_NEUTRON_CONFIG_FILES'] = ';'.join([name] + [os.path.basename(f) for f in more_files])
        from neutron.wsgi import api
        return api.application
    raise SystemExit('unknown api %r' % kind)


def main():
    kind, port, config_file, more_files = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    del sys.argv[1:]
    app = load(kind, config_file, more_files)
    from cheroot import wsgi
    server = wsgi.Server(('127.0.0.1', port), app, numthreads=8, server_name=kind)

    def stop(signum, frame):
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print('%s API on http://127.0.0.1:%d' % (kind, port), file=sys.stderr, flush=True)
    server.start()


if __name__ == '__main__':
    main()
