#!/usr/bin/env python3
"""One nova-compute process presenting several fake hypervisor nodes.

Run with the cloud venv's python (cloud.py does):

  compute.py NODES --config-file nova.conf [--config-file ...]

Nova's fake driver (FakeLiveMigrateDriver: it also completes live
migrations) reports one node named after [DEFAULT] host; Nova's own tests
change that through the driver's _set_nodes hook. This wrapper does the
same before the service starts: NODES nodes named <host>-n<i>, each with
the driver's fixed, large inventory (1000 VCPU, 800000 MB RAM,
600000 GB disk), so every node becomes one Placement resource provider.
Two patches let such a compute restart (see StableSentinel and main).
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
        self._set_nodes(['%s-n%02d' % (host, i) for i in range(count)])

    fake.FakeLiveMigrateDriver.init_host = init_host_with_nodes
    sys.exit(compute.main())


if __name__ == '__main__':
    main()
