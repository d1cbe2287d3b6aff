"""Neutron 29.0.0 for the live cloud (cloud.py): the real neutron-server
with ML2 and the real Open vSwitch agent on Open vSwitch's userspace
datapath, with keelson (or Python Placement) as the Placement service that
Neutron reports its bandwidth providers to.

What runs (every process a child of the cloud, logs beside the others):
- ovsdb-server and ovs-vswitchd (Debian's openvswitch-switch) on a
  database and sockets of the run's own, `datapath_type = netdev`: this
  machine's kernel has no openvswitch module, the userspace datapath needs
  none. Its bridges are tap devices of the machine, so their names carry
  the run id (`ki<run>` the integration bridge, `kp<run>` the physical
  bridge of `physnet1`) and stop() deletes them;
- the Neutron API (`neutron.wsgi.api`, under cheroot like nova-api), the
  RPC server (`neutron-rpc-server`) and the periodic workers
  (`neutron-periodic-workers`, which notice dead agents), on MariaDB
  (`kc_<run>_neutron`) and the run's RabbitMQ vhost. ML2 with the flat and
  VLAN type drivers and the openvswitch mechanism driver; service plugins
  router, qos (minimum-bandwidth rules) and placement (Neutron's report
  of the agents' bandwidth to Placement); Nova is notified of port status
  changes (network-vif-plugged) as in production;
- one neutron-openvswitch-agent, host `cmp<last>`, the single-node compute
  (cloud.py's nodes_of): bridge mapping physnet1 -> kp<run>, 1 Gbit/s
  each way as `resource_provider_bandwidths`, the bridge's provider under
  that compute's one node (`resource_provider_hypervisors`), the
  openvswitch firewall and the qos extension. Ports bind on that host
  only: the other computes have no agent, and a port Nova binds there
  fails binding (flows.py's ports phase boots on the agent's host).

Nothing here is faked. What the fake hypervisor does not do, compute.py
does as libvirt would: it creates each port's tap device and plugs it into
the integration bridge through os-vif, and waits for Neutron's
network-vif-plugged event before the server counts as spawned
(vif_plugging_is_fatal).
"""
import fcntl
import os
import shutil
import subprocess
import time

from cloud import wait_http, wait_until  # noqa: E402
from launch import write_conf  # noqa: E402

OVS_SCHEMA = '/usr/share/openvswitch/vswitch.ovsschema'
# The userspace datapath is one tap device of the machine, `ovs-netdev`,
# whatever the switch: two switches on one machine fail to open it. Each
# cloud's switch holds this lock while it runs; a second cloud waits.
MACHINE_LOCK = '/run/lock/keelson-cloud-ovs.lock'
LOCK_WAIT = 3600
PHYSNET = 'physnet1'
# kbit/s each way of the physical bridge, as Neutron reports it to Placement.
BANDWIDTH_KBPS = 1000000


class Neutron:
    """Neutron of one cloud; start() after Keystone, Placement and the
    compute nodes exist (the agent's bandwidth provider is a child of its
    compute node's provider)."""

    def __init__(self, cloud):
        self.cloud = cloud
        self.dir = os.path.join(cloud.dir, 'neutron')
        self.ovs_dir = os.path.join(cloud.dir, 'ovs')
        self.int_bridge = 'ki%s' % cloud.run_id
        self.phys_bridge = 'kp%s' % cloud.run_id
        self.ovsdb = 'unix:%s/db.sock' % self.ovs_dir
        self.agent_host = 'cmp%d' % cloud.computes
        # Its one node is named after it (compute.py).
        self.agent_node = self.agent_host

    # -- Open vSwitch -------------------------------------------------------------------------------------------
    def ovs_env(self):
        """The ovs-* tools (and the agent, which runs some) find the run's
        own switch through these."""
        d = self.ovs_dir
        return {'OVS_RUNDIR': d, 'OVS_DBDIR': d, 'OVS_LOGDIR': d, 'OVS_SYSCONFDIR': d}

    def vsctl(self, *args):
        subprocess.run(['ovs-vsctl', '--db=' + self.ovsdb, '--timeout=30', *args], check=True, capture_output=True,
                       timeout=60, env=dict(os.environ, **self.ovs_env()))

    def lock_machine(self):
        """Taken first thing (cloud.py), so that a waiting cloud runs nothing."""
        os.makedirs(os.path.dirname(MACHINE_LOCK), exist_ok=True)
        self.lock = open(MACHINE_LOCK, 'w')
        deadline, told = time.monotonic() + LOCK_WAIT, False
        while True:
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError('another cloud held %s for %d s' % (MACHINE_LOCK, LOCK_WAIT))
                if not told:
                    self.cloud.log('cloud: waiting for another cloud\'s Open vSwitch to stop (%s)' % MACHINE_LOCK)
                    told = True
                time.sleep(2)

    def unlock_machine(self):
        lock, self.lock = getattr(self, 'lock', None), None
        if lock:
            subprocess.run(['ip', 'link', 'del', 'ovs-netdev'], capture_output=True, timeout=30)
            lock.close()

    def start_ovs(self):
        d = self.ovs_dir
        os.makedirs(d)
        subprocess.run(['ovsdb-tool', 'create', os.path.join(d, 'conf.db'), OVS_SCHEMA], check=True,
                       capture_output=True, timeout=60)
        c = self.cloud
        c.spawn('ovsdb-server', ['ovsdb-server', os.path.join(d, 'conf.db'), '--remote=punix:%s/db.sock' % d,
                                 '--unixctl=%s/ovsdb-server.ctl' % d, '--pidfile=%s/ovsdb-server.pid' % d],
                env=self.ovs_env())
        wait_until(lambda: os.path.exists(os.path.join(d, 'db.sock')), 30, 'ovsdb-server', interval=0.2)
        self.vsctl('--no-wait', 'init')
        c.spawn('ovs-vswitchd', ['ovs-vswitchd', self.ovsdb, '--unixctl=%s/ovs-vswitchd.ctl' % d,
                                 '--pidfile=%s/ovs-vswitchd.pid' % d], env=self.ovs_env())
        # The physical network's bridge exists before the agent (it refuses
        # to start without it); the agent makes the integration bridge.
        self.vsctl('add-br', self.phys_bridge, '--', 'set', 'bridge', self.phys_bridge, 'datapath_type=netdev')

    # -- configuration ------------------------------------------------------------------------------------------
    def server_sections(self):
        c = self.cloud
        return {
            'DEFAULT': {
                'use_stderr': 'true', 'debug': 'false', 'state_path': os.path.join(self.dir, 'state'),
                'core_plugin': 'ml2', 'service_plugins': 'router,qos,placement',
                'auth_strategy': 'keystone', 'transport_url': c.transport_url(),
                'notify_nova_on_port_status_changes': 'true', 'notify_nova_on_port_data_changes': 'true',
                # One RPC worker, which handles the agents' state reports too.
                'rpc_workers': '1', 'rpc_state_report_workers': '0',
                'api_paste_config': os.path.join(self.dir, 'api-paste.ini'),
            },
            'database': {'connection': self.db},
            'keystone_authtoken': c.authtoken('neutron'),
            'nova': dict(c.service_client('nova'), endpoint_type='public'),
            'placement': c.service_client('neutron'),
            'oslo_concurrency': {'lock_path': os.path.join(self.dir, 'locks')},
            'oslo_messaging_notifications': {'driver': 'noop'},
            'quotas': {'quota_network': '-1', 'quota_subnet': '-1', 'quota_port': '-1', 'quota_router': '-1',
                       'quota_floatingip': '-1', 'quota_security_group': '-1', 'quota_security_group_rule': '-1'},
            'agent': {'root_helper': 'env'},
        }

    def ml2_sections(self):
        return {
            'ml2': {'type_drivers': 'flat,vlan', 'tenant_network_types': 'vlan',
                    'mechanism_drivers': 'openvswitch', 'extension_drivers': 'port_security,qos'},
            'ml2_type_flat': {'flat_networks': PHYSNET},
            'ml2_type_vlan': {'network_vlan_ranges': '%s:100:999' % PHYSNET},
            'securitygroup': {'enable_security_group': 'true', 'firewall_driver': 'openvswitch'},
        }

    def agent_sections(self):
        c = self.cloud
        return {
            'DEFAULT': {'use_stderr': 'true', 'debug': 'false', 'host': self.agent_host,
                        'state_path': os.path.join(self.dir, 'agent-state'), 'transport_url': c.transport_url()},
            # Root already: `env` runs the commands as they are (and
            # privsep's helper), where a deployment has sudo and rootwrap.
            'agent': {'root_helper': 'env', 'tunnel_types': '', 'extensions': 'qos', 'report_interval': '10'},
            'ovs': {
                'integration_bridge': self.int_bridge,
                'bridge_mappings': '%s:%s' % (PHYSNET, self.phys_bridge),
                'datapath_type': 'netdev',
                'ovsdb_connection': self.ovsdb,
                'of_listen_port': str(c.ports['openflow']),
                'resource_provider_bandwidths': '%s:%d:%d' % (self.phys_bridge, BANDWIDTH_KBPS, BANDWIDTH_KBPS),
                'resource_provider_hypervisors': '%s:%s' % (self.phys_bridge, self.agent_node),
                # The agent's own provider (packet rates) goes there too,
                # not under this machine's hostname.
                'resource_provider_default_hypervisor': self.agent_node,
            },
            'securitygroup': {'firewall_driver': 'openvswitch'},
            'oslo_concurrency': {'lock_path': os.path.join(self.dir, 'agent-locks')},
        }

    def nova_sections(self):
        """What Nova's configuration gains: its Neutron client, and os-vif
        plugging into this switch."""
        return {
            'neutron': dict(self.cloud.service_client('neutron'), ovs_bridge=self.int_bridge),
            'os_vif_ovs': {'ovsdb_connection': self.ovsdb},
        }

    # -- processes ----------------------------------------------------------------------------------------------
    def start_server(self):
        """The API, the RPC server and the periodic workers; answers once the
        API serves."""
        c = self.cloud
        for sub in ('state', 'locks', 'agent-state', 'agent-locks'):
            os.makedirs(os.path.join(self.dir, sub), exist_ok=True)
        shutil.copy(os.path.join(c.venv, 'etc', 'neutron', 'api-paste.ini'), self.dir)
        self.db = c.database('neutron')
        conf = write_conf(os.path.join(self.dir, 'neutron.conf'), self.server_sections())
        ml2 = write_conf(os.path.join(self.dir, 'ml2_conf.ini'), self.ml2_sections())
        self.confs = ['--config-file', conf, '--config-file', ml2]
        c.run('neutron-db-manage', [os.path.join(c.bin, 'neutron-db-manage')] + self.confs + ['upgrade', 'heads'])
        api = c.spawn('neutron-api', [c.python, os.path.join(c.here, 'wsgi_serve.py'), 'neutron',
                                      str(c.ports['neutron']), conf, ml2])
        c.spawn('neutron-rpc-server', [os.path.join(c.bin, 'neutron-rpc-server')] + self.confs)
        c.spawn('neutron-periodic-workers', [os.path.join(c.bin, 'neutron-periodic-workers')] + self.confs)
        wait_http(c.url['neutron'] + '/', api)

    def start_agent(self):
        """Open vSwitch and the agent; waits until Neutron lists the agent
        alive."""
        c = self.cloud
        self.start_ovs()
        conf = write_conf(os.path.join(self.dir, 'openvswitch_agent.ini'), self.agent_sections())
        c.spawn('neutron-openvswitch-agent', [os.path.join(c.bin, 'neutron-openvswitch-agent'),
                                              '--config-file', conf],
                # privsep-helper, run by `env`
                env=dict(self.ovs_env(), PATH=c.bin + os.pathsep + os.environ.get('PATH', '')))

        agent = c.procs['neutron-openvswitch-agent']

        def alive():
            if agent.p.poll() is not None:
                raise RuntimeError('neutron-openvswitch-agent exited:\n%s' % agent.tail())
            agents = c.neutron('GET', '/v2.0/agents?binary=neutron-openvswitch-agent')['agents']
            return [a for a in agents if a['host'] == self.agent_host and a['alive']]
        wait_until(alive, 300, 'the Open vSwitch agent of %s alive in Neutron' % self.agent_host, interval=2)

    def ports(self):
        """The integration bridge's ports."""
        listed = subprocess.run(['ovs-vsctl', '--db=' + self.ovsdb, '--timeout=30', 'list-ports', self.int_bridge],
                                capture_output=True, text=True, timeout=60, check=True)
        return listed.stdout.split()

    def remove_devices(self):
        """The switch's tap devices (its bridges', and the ports' that
        compute.py made) outlive it: deletes them, while the switch still
        says which they are and again once it is gone."""
        devices = {self.int_bridge, self.phys_bridge}
        for bridge in (self.int_bridge, self.phys_bridge):
            try:
                listed = subprocess.run(['ovs-vsctl', '--db=' + self.ovsdb, '--timeout=5', 'list-ports', bridge],
                                        capture_output=True, text=True, timeout=30)
                devices.update(listed.stdout.split())
            except (OSError, subprocess.SubprocessError):
                pass
        self.devices = getattr(self, 'devices', set()) | devices
        for dev in sorted(self.devices):
            if not dev.startswith(('int-', 'phy-')):  # patch ports have no device
                subprocess.run(['ip', 'link', 'del', dev], capture_output=True, timeout=30)


def bandwidth_provider_name(neutron):
    """The name Neutron gives the bridge's resource provider."""
    return '%s:Open vSwitch agent:%s' % (neutron.agent_node, neutron.phys_bridge)
