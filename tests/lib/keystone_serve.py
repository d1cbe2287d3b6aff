#!/usr/bin/env python3
"""Set up and serve a real Keystone, for tests/integration/test_keystone.py.

Run it with the keystone virtualenv's python (tests/lib/keystone_venv.sh).
Everything happens in this one process: importing keystone costs several
seconds, so running `keystone-manage` four times would cost a minute.

  keystone_serve.py CONFIG_FILE PORT ADMIN_PASSWORD [CERT_FILE KEY_FILE]

1. `keystone-manage db_sync`, `fernet_setup`, `credential_setup` and
   `bootstrap` (admin user, project and role, RegionOne, the identity
   service and its endpoints at http://127.0.0.1:PORT/v3, or https:// with
   a certificate), in-process;
2. the public WSGI application (keystone.server.wsgi) served by cheroot on
   127.0.0.1:PORT until SIGTERM/SIGINT; over TLS with CERT_FILE and
   KEY_FILE (PEM; cheroot's builtin adapter on Python's ssl module).
"""
import os
import signal
import sys
import warnings

warnings.simplefilter('ignore')


def manage(config_file, *args):
    """One keystone-manage command, as `keystone-manage --config-file
    CONFIG_FILE ARGS...` would run it."""
    from keystone.cmd import cli
    import keystone.conf
    conf = keystone.conf.CONF
    argv = ['--config-file', config_file] + list(args)
    if not hasattr(manage, 'configured'):
        # cli.main registers the sub-command option, the options and the
        # SQL layer once; later commands only re-parse the arguments.
        manage.configured = True
        cli.main(['keystone-manage'] + argv)
        return
    conf(args=argv, project='keystone')
    conf.command.cmd_class.main()


def main():
    config_file, port, password = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tls = sys.argv[4:6]
    url = '%s://127.0.0.1:%d/v3' % ('https' if tls else 'http', port)
    user = ['--keystone-user', str(os.getuid()), '--keystone-group', str(os.getgid())]
    manage(config_file, 'db_sync')
    manage(config_file, 'fernet_setup', *user)
    manage(config_file, 'credential_setup', *user)
    manage(config_file, 'bootstrap', '--bootstrap-password', password, '--bootstrap-admin-url', url,
           '--bootstrap-public-url', url, '--bootstrap-internal-url', url, '--bootstrap-region-id', 'RegionOne')

    from cheroot import wsgi as cheroot_wsgi
    from keystone.cmd import cli
    import keystone.conf
    from keystone.server import wsgi as keystone_wsgi
    # The server configures CONF itself, without keystone-manage's
    # sub-command option.
    keystone.conf.CONF.clear()
    keystone.conf.CONF.unregister_opt(cli.command_opt)
    # bootstrap loaded (and locked) the backends; the server loads its own.
    from keystone.common import provider_api
    provider_api.ProviderAPIs._clear_registry_instances()
    os.environ['OS_KEYSTONE_CONFIG_FILES'] = config_file
    # ... and parses sys.argv, which holds only this script's arguments.
    del sys.argv[1:]
    app = keystone_wsgi.initialize_public_application()
    server = cheroot_wsgi.Server(('127.0.0.1', port), app, numthreads=4, server_name='keystone')
    if tls:
        from cheroot.ssl.builtin import BuiltinSSLAdapter
        server.ssl_adapter = BuiltinSSLAdapter(*tls)

    def _stop(signum, frame):
        # Not server.stop(): called from the serving thread it waits for
        # that very thread. Nothing is left to flush (SQLite commits).
        os._exit(0)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print('keystone listening on %s' % url, file=sys.stderr, flush=True)
    server.start()


if __name__ == '__main__':
    main()
