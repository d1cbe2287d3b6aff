"""Swift for the live cloud (cloud.py --swift): the `swift` package from
PyPI (requirements.txt) as one proxy server and one account, one container
and one object server, each on a loopback port, in the catalog as
object-store (`swift`) at http://127.0.0.1:<port>/v1/AUTH_$(project_id)s.

Storage: one device (`d1`) in the run's directory, one replica, rings of
2^6 partitions built with swift-ring-builder at start; mount_check is off
(the device is a plain directory; the run's file system keeps the
extended attributes Swift stores its metadata in). The servers run in the
foreground (workers = 0) and log to stderr (-v); their configuration
directory (swift_dir) holds swift.conf (the run's hash path prefix and
suffix, the default storage policy) and the rings.

The proxy's pipeline is a production one without a memcached (no cache
filter: account and container information is looked up per request):
tempurl before Keystone's auth_token (delay_auth_decision, so temporary
URLs need no token) and keystoneauth, with operator roles admin and
member and the reseller prefix AUTH_, so that `AUTH_<project id>` is the
account of every project a user holds one of those roles in. Keystone
gets the service user `swift` (admin and service in project `service`).

What Heat and its tests use it for: templates fetched from temporary
URLs (AWS::CloudFormation::Stack's TemplateURL) and the containers and
temporary URLs of OS::Heat::SwiftSignalHandle.
"""
import argparse
import getpass
import os
import secrets
import time

from cloud import SERVICE_PASSWORD, REGION, wait_http  # noqa: E402
from launch import write_conf  # noqa: E402

SERVERS = ('account', 'container', 'object')
PART_POWER = 6
DEVICE = 'd1'


class ObjectStore:
    def __init__(self, cloud):
        self.cloud = cloud
        self.dir = os.path.join(cloud.dir, 'swift')
        self.url = 'http://127.0.0.1:%d' % cloud.ports['swift']
        self.devices = os.path.join(self.dir, 'devices')

    def prepare_keystone(self):
        """The service user `swift` and the object-store catalog entries."""
        c = self.cloud
        roles = {r['name']: r['id'] for r in c.keystone('GET', '/v3/roles')['roles']}
        uid = c.keystone('POST', '/v3/users', {'user': {
            'name': 'swift', 'password': SERVICE_PASSWORD, 'domain_id': 'default',
            'default_project_id': c.projects['service']}})['user']['id']
        for role in ('admin', 'service'):
            c.keystone('PUT', '/v3/projects/%s/users/%s/roles/%s' % (c.projects['service'], uid, roles[role]))
        # keystoneauth's operator role; Keystone 30 bootstraps it, an older
        # one may not.
        if 'member' not in roles:
            c.keystone('POST', '/v3/roles', {'role': {'name': 'member'}})
        service = {'service': {'type': 'object-store', 'name': 'swift'}}
        sid = c.keystone('POST', '/v3/services', service)['service']['id']
        for interface in ('public', 'internal', 'admin'):
            c.keystone('POST', '/v3/endpoints', {'endpoint': {
                'service_id': sid, 'interface': interface, 'url': self.url + '/v1/AUTH_$(project_id)s',
                'region_id': REGION}})

    def common(self, port):
        """[DEFAULT] of every server."""
        return {'bind_ip': '127.0.0.1', 'bind_port': str(port), 'swift_dir': self.dir, 'workers': '0',
                # Swift switches to this user after binding; the cloud's.
                'user': getpass.getuser(), 'log_level': 'INFO'}

    def build_rings(self):
        builder = os.path.join(self.cloud.bin, 'swift-ring-builder')
        for server in SERVERS:
            path = os.path.join(self.dir, server + '.builder')
            port = self.cloud.ports['swift-' + server]
            self.cloud.run('swift-ring-builder', [builder, path, 'create', str(PART_POWER), '1', '1'])
            self.cloud.run('swift-ring-builder', [builder, path, 'add', '--region', '1', '--zone', '1', '--ip',
                                                  '127.0.0.1', '--port', str(port), '--device', DEVICE,
                                                  '--weight', '100'])
            # 1: rebalanced with a warning (one device cannot be spread).
            self.cloud.run('swift-ring-builder', [builder, path, 'rebalance'], ok=(0, 1))

    def proxy_sections(self):
        c = self.cloud
        authtoken = dict(c.authtoken('swift'), delay_auth_decision='true')
        return {
            'DEFAULT': self.common(c.ports['swift']),
            'pipeline:main': {'pipeline': 'catch_errors gatekeeper healthcheck proxy-logging listing_formats bulk '
                                          'tempurl authtoken keystoneauth copy container-quotas account-quotas slo '
                                          'dlo versioned_writes proxy-logging proxy-server'},
            'app:proxy-server': {'use': 'egg:swift#proxy', 'account_autocreate': 'true'},
            'filter:catch_errors': {'use': 'egg:swift#catch_errors'},
            'filter:gatekeeper': {'use': 'egg:swift#gatekeeper'},
            'filter:healthcheck': {'use': 'egg:swift#healthcheck'},
            'filter:proxy-logging': {'use': 'egg:swift#proxy_logging'},
            'filter:listing_formats': {'use': 'egg:swift#listing_formats'},
            'filter:bulk': {'use': 'egg:swift#bulk'},
            'filter:tempurl': {'use': 'egg:swift#tempurl'},
            'filter:authtoken': dict({'paste.filter_factory': 'keystonemiddleware.auth_token:filter_factory'},
                                     **authtoken),
            'filter:keystoneauth': {'use': 'egg:swift#keystoneauth', 'operator_roles': 'admin, member',
                                    'reseller_prefix': 'AUTH_', 'reseller_admin_role': 'ResellerAdmin'},
            'filter:copy': {'use': 'egg:swift#copy'},
            'filter:container-quotas': {'use': 'egg:swift#container_quotas'},
            'filter:account-quotas': {'use': 'egg:swift#account_quotas'},
            'filter:slo': {'use': 'egg:swift#slo'},
            'filter:dlo': {'use': 'egg:swift#dlo'},
            'filter:versioned_writes': {'use': 'egg:swift#versioned_writes'},
        }

    def start(self):
        c = self.cloud
        os.makedirs(os.path.join(self.devices, DEVICE))
        write_conf(os.path.join(self.dir, 'swift.conf'), {
            'swift-hash': {'swift_hash_path_prefix': secrets.token_hex(8),
                           'swift_hash_path_suffix': secrets.token_hex(8)},
            'storage-policy:0': {'name': 'Policy-0', 'default': 'yes'},
        })
        self.build_rings()
        self.prepare_keystone()
        for server in SERVERS:
            conf = write_conf(os.path.join(self.dir, server + '-server.conf'), {
                'DEFAULT': dict(self.common(c.ports['swift-' + server]), devices=self.devices, mount_check='false'),
                'pipeline:main': {'pipeline': server + '-server'},
                'app:%s-server' % server: {'use': 'egg:swift#' + server},
            })
            c.spawn('swift-%s-server' % server, [os.path.join(c.bin, 'swift-%s-server' % server), conf, '-v'],
                    cwd=self.dir)
        conf = write_conf(os.path.join(self.dir, 'proxy-server.conf'), self.proxy_sections())
        proxy = c.spawn('swift-proxy-server', [os.path.join(c.bin, 'swift-proxy-server'), conf, '-v'], cwd=self.dir)
        wait_http(self.url + '/healthcheck', proxy)
        for server in SERVERS:
            proc = c.procs['swift-%s-server' % server]
            wait_http('http://127.0.0.1:%d/healthcheck' % c.ports['swift-' + server], proc)


def check(log=print, keep_logs=None):
    """Keystone and Swift alone, then the calls Heat and its tests make,
    with python-swiftclient as a member of project demo: a container with
    a temporary-URL key, an object read through a GET temporary URL and
    one written through a PUT one (neither with a token), the account's
    key, the listing, the deletions. Raises on the first answer that is not upstream's."""
    import urllib.parse
    from cloud import Cloud, http
    from keystoneauth1 import session
    from keystoneauth1.identity import v3
    from swiftclient import client as swift_client
    from swiftclient import utils as swift_utils
    cloud = Cloud(computes=0, nodes=1, log=log, neutron='stub', swift=True)
    password = 'cloud-swift-check-secret'
    try:
        cloud.start_keystone()
        t = time.monotonic()
        cloud.object_store.start()
        log('swift: up in %.1f s' % (time.monotonic() - t))
        roles = {r['name']: r['id'] for r in cloud.keystone('GET', '/v3/roles')['roles']}
        uid = cloud.keystone('POST', '/v3/users', {'user': {
            'name': 'swift-checker', 'password': password, 'domain_id': 'default',
            'default_project_id': cloud.projects['demo']}})['user']['id']
        cloud.keystone('PUT', '/v3/projects/%s/users/%s/roles/%s' % (cloud.projects['demo'], uid, roles['member']))
        # As Heat's swift client plugin and the tests' object_client build
        # theirs: a Keystone session, the endpoint from the catalog.
        auth = v3.Password(auth_url=cloud.url['keystone'] + '/v3', username='swift-checker', password=password,
                           project_name='demo', user_domain_name='Default', project_domain_name='Default')
        conn = swift_client.Connection(auth_version='3', session=session.Session(auth=auth), os_options={
            'endpoint_type': 'publicURL', 'region_name': REGION, 'service_type': 'object-store'})
        conn.get_auth()
        log('storage URL %s' % conn.url)
        expected = '%s/v1/AUTH_%s' % (cloud.object_store.url, cloud.projects['demo'])
        assert conn.url == expected, (conn.url, expected)
        key = secrets.token_hex(16)
        conn.put_container('heat-check', {'X-Container-Meta-Temp-Url-Key': key})
        conn.put_object('heat-check', 'template.yaml', b'Foo: bar\n')
        base = urllib.parse.urlparse(conn.url)
        origin = '%s://%s' % (base.scheme, base.netloc)
        path = '%s/heat-check/template.yaml' % base.path
        status, _, body = http('GET', origin + swift_utils.generate_temp_url(path, 600, key, 'GET'),
                               headers={'Accept': '*/*'})
        log('GET temp URL: %s %r' % (status, body))
        assert status == 200 and body == 'Foo: bar\n', (status, body)
        status, _, body = http('GET', origin + path)
        log('GET without token or temp URL: %s' % status)
        assert status == 401, (status, body)
        signal = '%s/heat-check/signal' % base.path
        status, _, body = http('PUT', origin + swift_utils.generate_temp_url(signal, 600, key, 'PUT'),
                               b'{"status": "SUCCESS"}', {'Content-Type': 'application/json'})
        log('PUT temp URL: %s' % status)
        assert status == 201, (status, body)
        account_key = secrets.token_hex(16)
        conn.post_account({'X-Account-Meta-Temp-Url-Key': account_key})
        head = conn.head_account()
        assert head.get('x-account-meta-temp-url-key') == account_key, head
        status, _, body = http('GET', origin + swift_utils.generate_temp_url(signal, 600, account_key, 'GET'))
        log('GET temp URL by the account key: %s %r' % (status, body))
        assert status == 200 and body == {'status': 'SUCCESS'}, (status, body)
        _, listing = conn.get_container('heat-check')
        names = sorted(o['name'] for o in listing)
        log('listing: %s' % names)
        assert names == ['signal', 'template.yaml'], names
        for name in names:
            conn.delete_object('heat-check', name)
        conn.delete_container('heat-check')
        _, containers = conn.get_account()
        assert containers == [], containers
        log('swift check: OK')
    finally:
        cloud.stop(keep_logs=keep_logs)


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description='Keystone and Swift alone, checked with python-swiftclient.')
    ap.add_argument('--keep-logs', help='every log to DIR')
    check(keep_logs=ap.parse_args().keep_logs)
