"""Cinder 29.0.0 for the live cloud (cloud.py --cinder): cinder-api,
cinder-scheduler and cinder-volume on MariaDB (`kc_<run>_cinder`) and the
run's RabbitMQ vhost, in the catalog as block-storage and volumev3, and
Nova's [cinder] client.

The backend is Cinder's NFS driver (cinder.volume.drivers.nfs.NfsDriver),
unchanged: volumes are sparse raw files on its share, images are written
into them with qemu-img, snapshots are qcow2 overlays. Why NFS and what
is not real: this machine's kernel has no device-mapper (LVM cannot
activate a logical volume), no LIO target and no iSCSI, NFS or RBD
client, so neither the LVM driver nor any network block target can run.
The NFS driver needs only a mounted share; the kernel has no NFS client,
so the share (`127.0.0.1:/kc-<run>`) is a directory of the run
bind-mounted where the driver mounts its share (os-brick finds it
mounted and does not mount it again). The NFS protocol is the one thing
not exercised; everything the driver does is. Nova's fake driver
attaches nothing (it records the connection info Cinder gives it).

Cinder runs its root commands as `sudo cinder-rootwrap CONF ...`
(hard-wired in Cinder), rootwrap filtering them as in production. The
cloud runs as root already, and sudo's secure path would not find the
virtualenv's cinder-rootwrap: Cinder's processes get a `sudo` of the
run's own first on their PATH that runs the command as it is (the one
stand-in here, for a privilege change that is not needed). The Debian
packages nfs-common (mount.nfs, whose presence the driver checks) and
qemu-utils are installed by ./setup.
"""
import hashlib
import os
import subprocess

from cloud import SERVICE_PASSWORD, REGION, wait_http  # noqa: E402
from launch import write_conf  # noqa: E402


class Cinder:
    def __init__(self, cloud):
        self.cloud = cloud
        self.dir = os.path.join(cloud.dir, 'cinder')
        self.url = 'http://127.0.0.1:%d' % cloud.ports['cinder']
        self.share = '127.0.0.1:/kc-%s' % cloud.run_id
        self.mount_base = os.path.join(self.dir, 'mnt')
        self.export = os.path.join(self.dir, 'export')
        self.mounted = None

    def prepare_keystone(self):
        c = self.cloud
        roles = {r['name']: r['id'] for r in c.keystone('GET', '/v3/roles')['roles']}
        uid = c.keystone('POST', '/v3/users', {'user': {
            'name': 'cinder', 'password': SERVICE_PASSWORD, 'domain_id': 'default',
            'default_project_id': c.projects['service']}})['user']['id']
        for role in ('admin', 'service'):
            c.keystone('PUT', '/v3/projects/%s/users/%s/roles/%s' % (c.projects['service'], uid, roles[role]))
        for kind in ('block-storage', 'volumev3'):
            sid = c.keystone('POST', '/v3/services', {'service': {'type': kind, 'name': 'cinder'}})['service']['id']
            for interface in ('public', 'internal', 'admin'):
                c.keystone('POST', '/v3/endpoints', {'endpoint': {
                    'service_id': sid, 'interface': interface, 'url': self.url + '/v3/$(project_id)s',
                    'region_id': REGION}})

    def nova_sections(self):
        return {'cinder': dict(self.cloud.service_client('cinder'), os_region_name=REGION)}

    def sections(self):
        c = self.cloud
        return {
            'DEFAULT': {
                'use_stderr': 'true', 'debug': 'false', 'transport_url': c.transport_url(),
                'auth_strategy': 'keystone', 'state_path': os.path.join(self.dir, 'state'),
                'osapi_volume_listen': '127.0.0.1', 'osapi_volume_listen_port': str(c.ports['cinder']),
                'osapi_volume_workers': '1',
                'enabled_backends': 'nfs', 'default_volume_type': '__DEFAULT__',
                'rootwrap_config': os.path.join(self.dir, 'rootwrap.conf'),
                'api_paste_config': os.path.join(c.venv, 'etc', 'cinder', 'api-paste.ini'),
                'glance_api_servers': c.url['glance'],
                'host': 'kc-cinder',
            },
            'database': {'connection': self.db},
            'keystone_authtoken': c.authtoken('cinder'),
            'nova': c.service_client('nova'),
            'oslo_concurrency': {'lock_path': os.path.join(self.dir, 'locks')},
            'oslo_messaging_notifications': {'driver': 'noop'},
            'nfs': {
                'volume_driver': 'cinder.volume.drivers.nfs.NfsDriver', 'volume_backend_name': 'nfs',
                'nfs_shares_config': os.path.join(self.dir, 'nfs_shares'),
                'nfs_mount_point_base': self.mount_base,
                'nfs_sparsed_volumes': 'true', 'nfs_snapshot_support': 'true',
                'nas_secure_file_operations': 'false', 'nas_secure_file_permissions': 'false',
            },
        }

    def rootwrap_conf(self):
        venv = self.cloud.venv
        return write_conf(os.path.join(self.dir, 'rootwrap.conf'), {'DEFAULT': {
            'filters_path': os.path.join(venv, 'etc', 'cinder', 'rootwrap.d'),
            'exec_dirs': ','.join([os.path.join(venv, 'bin'), '/sbin', '/usr/sbin', '/bin', '/usr/bin']),
            'use_syslog': 'false'}})

    def mount_share(self):
        """The share's directory, bind-mounted where os-brick would mount
        the share (its mount point is the MD5 of the share's name)."""
        for d in (self.export, self.mount_base):
            os.makedirs(d, exist_ok=True)
        point = os.path.join(self.mount_base, hashlib.md5(self.share.encode()).hexdigest())
        os.makedirs(point)
        subprocess.run(['mount', '--bind', self.export, point], check=True, capture_output=True, timeout=60)
        self.mounted = point

    def start(self):
        c = self.cloud
        for sub in ('state', 'locks'):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        self.prepare_keystone()
        self.db = c.database('cinder')
        self.rootwrap_conf()
        with open(os.path.join(self.dir, 'nfs_shares'), 'w') as f:
            f.write(self.share + '\n')
        self.mount_share()
        conf = write_conf(os.path.join(self.dir, 'cinder.conf'), self.sections())
        bin_ = c.bin
        c.run('cinder-manage', [os.path.join(bin_, 'cinder-manage'), '--config-file', conf, 'db', 'sync'])
        shim = os.path.join(self.dir, 'bin')
        os.makedirs(shim)
        with open(os.path.join(shim, 'sudo'), 'w') as f:
            f.write('#!/bin/sh\n# Root already (volumes.py): run the command as it is.\nexec "$@"\n')
        os.chmod(os.path.join(shim, 'sudo'), 0o755)
        env = {'PATH': os.pathsep.join([shim, bin_, os.environ.get('PATH', '')])}
        api = c.spawn('cinder-api', [os.path.join(bin_, 'cinder-api'), '--config-file', conf], env=env)
        c.spawn('cinder-scheduler', [os.path.join(bin_, 'cinder-scheduler'), '--config-file', conf], env=env)
        c.spawn('cinder-volume', [os.path.join(bin_, 'cinder-volume'), '--config-file', conf], env=env)
        wait_http(self.url + '/', api)

    def unmount(self):
        if self.mounted:
            subprocess.run(['umount', '-l', self.mounted], capture_output=True, timeout=60)
            self.mounted = None
