#!/usr/bin/env python3
"""One nova-compute process presenting several fake hypervisor nodes.

Run with the cloud venv's python (cloud.py does):

  compute.py NODES --config-file nova.conf [--config-file ...]

Nova's fake driver (FakeLiveMigrateDriver: it also completes live
migrations) reports one node named after [DEFAULT] host; Nova's own tests
change that through the driver's _set_nodes hook. This wrapper does the
same before the service starts: NODES nodes named <host>-n<i> (a single
node is named <host>, as a libvirt compute's node is), each with
the driver's fixed, large inventory (1000 VCPU, 800000 MB RAM,
600000 GB disk), so every node becomes one Placement resource provider.
Two patches let such a compute restart (see StableSentinel and main).

Ports, as libvirt handles them (plug_vifs_like_libvirt): the fake driver
plugs nothing, so a server's ports would stay DOWN in Neutron and Nova
would never wait for them. Here spawn creates each port's tap device and
plugs it into Open vSwitch's integration bridge with os-vif (the VIF as
Nova hands it to os-vif, with os-vif's create_port and create_tap, which
is what libvirt does when it starts a guest), inside Nova's wait for
Neutron's network-vif-plugged events: the server becomes ACTIVE only once
the Open vSwitch agent has wired the port and Neutron has told Nova, and
with vif_plugging_is_fatal a missing event fails the build as on a real
compute. destroy unplugs (os-vif deletes the port and its tap device).
"""
import sys
import uuid

# First, as in nova-compute: it chooses native threading and forbids
# eventlet, which later imports (the fake driver's) must not load first.
from nova.cmd import compute
from nova.compute import manager  # noqa: E402
from nova.virt import fake  # noqa: E402


class StableSentinel:
    """The fake driver names its nodes' UUIDs after oslo's uuidsentinel,
    which draws new random UUIDs in every process: a restarted compute
    would present new nodes and Nova refuses it ("possible rename"). These
    are derived from the name instead, the same in every process."""

    def __getattr__(self, name):
        return str(uuid.uuid5(uuid.NAMESPACE_URL, 'keelson-cloud-fake/' + name))


def plug_vifs_like_libvirt(driver):
    """Makes `driver` (a fake driver class) plug and unplug its servers'
    ports with os-vif and wait for Neutron's events as the libvirt driver
    does (its _create_guest_with_network and _neutron_failed_callback)."""
    import os_vif
    from nova import conf, exception
    from nova.network import model as network_model
    from nova.network import os_vif_util

    CONF = conf.CONF
    LOG = fake.LOG
    spawn, destroy = driver.spawn, driver.destroy

    def each_vif(instance, network_info):
        os_vif.initialize()
        info = os_vif_util.nova_to_osvif_instance(instance)
        for vif in network_info or []:
            converted = os_vif_util.nova_to_osvif_vif(vif)
            if converted is None:
                continue
            if 'port_profile' in converted and hasattr(converted.port_profile, 'create_tap'):
                converted.port_profile.create_port = True
                converted.port_profile.create_tap = True
            yield converted, info

    def neutron_failed(event_name, instance):
        LOG.error('Neutron reported failure on event %s for instance %s', event_name, instance.uuid,
                  instance=instance)
        if CONF.vif_plugging_is_fatal:
            raise exception.VirtualInterfaceCreateException()

    def plugging_spawn(self, context, instance, image_meta, injected_files, admin_password, allocations,
                       network_info=None, block_device_info=None, power_on=True, accel_info=None):
        timeout = CONF.vif_plugging_timeout
        events = [('network-vif-plugged', vif['id']) for vif in network_info or []
                  if vif.get('active', True) is False and vif['vnic_type'] != network_model.VNIC_TYPE_REMOTE_MANAGED
                  ] if power_on and timeout else []
        try:
            with self.virtapi.wait_for_instance_event(instance, events, timeout=timeout,
                                                      error_callback=neutron_failed):
                for vif, info in each_vif(instance, network_info):
                    os_vif.plug(vif, info)
                spawn(self, context, instance, image_meta, injected_files, admin_password, allocations,
                      network_info=network_info, block_device_info=block_device_info, power_on=power_on,
                      accel_info=accel_info)
        except exception.InstanceEventTimeout:
            if CONF.vif_plugging_is_fatal:
                plugging_destroy(self, context, instance, network_info)
                raise exception.VirtualInterfaceCreateException()
            LOG.warning('Timeout waiting for %s for instance with vm_state %s and task_state %s.', events,
                        instance.vm_state, instance.task_state, instance=instance)

    def plugging_destroy(self, context, instance, network_info, block_device_info=None, destroy_disks=True,
                         destroy_secrets=True):
        destroy(self, context, instance, network_info, block_device_info=block_device_info,
                destroy_disks=destroy_disks, destroy_secrets=destroy_secrets)
        for vif, info in each_vif(instance, network_info):
            try:
                os_vif.unplug(vif, info)
            except Exception as e:  # as libvirt: a failed unplug does not fail the delete
                LOG.warning('Failed to unplug vif %s: %s', vif.id, e, instance=instance)

    driver.spawn, driver.destroy = plugging_spawn, plugging_destroy


def main():
    count = int(sys.argv.pop(1))
    fake.uuids = StableSentinel()
    # Nova keeps one node identity file (state_path/compute_id) per host,
    # for single-node drivers only, and refuses to restart without it; a
    # multi-node host has none, as with Ironic, which Nova exempts.
    manager.ComputeManager._ensure_existing_node_identity = lambda self, service_ref: None
    init_host = fake.FakeLiveMigrateDriver.init_host

    def init_host_with_nodes(self, host):
        init_host(self, host)
        # Neutron derives its bandwidth providers' UUIDs from the node's
        # name where it creates them and from the agent's host where it
        # binds a port allocated on them: a single node keeps its host's
        # name so that both agree (network.py).
        self._set_nodes([host] if count == 1 else ['%s-n%02d' % (host, i) for i in range(count)])

    fake.FakeLiveMigrateDriver.init_host = init_host_with_nodes
    plug_vifs_like_libvirt(fake.FakeLiveMigrateDriver)
    sys.exit(compute.main())


if __name__ == '__main__':
    main()
