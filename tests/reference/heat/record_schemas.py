#!/usr/bin/env python3
"""Records what the real Heat answers to GET /resource_types/<type>?with_description=true
for a family of the service-backed types keelson implements, as the stack
engine's schema tests expect it:

    python tests/reference/heat/record_schemas.py keystone > \
        services/stack-engine/src/resources/keystone/testdata/schemas.json
    python tests/reference/heat/record_schemas.py nova > \
        services/stack-engine/src/resources/nova/testdata/nova_schemas.json
    python tests/reference/heat/record_schemas.py neutron > \
        services/stack-engine/src/resources/neutron/testdata/neutron_schemas.json
    python tests/reference/heat/record_schemas.py swift > \
        services/stack-engine/src/resources/swift/testdata/swift_schemas.json

with the Python of the reference Heat's virtualenv (tests/reference/heat/setup
prints its path). Runs Heat's own EngineService.resource_schema in-process
with an admin context; the only thing replaced is the service-catalog check
(the schema does not depend on the catalog, and no Keystone is asked).
"""

import json
import sys

from oslo_config import cfg

from heat.common import context
from heat.engine import resource, resources, service

FAMILIES = {
    "keystone": [
        "OS::Keystone::Project",
        "OS::Keystone::Role",
        "OS::Keystone::Domain",
        "OS::Keystone::User",
        "OS::Keystone::Group",
        "OS::Keystone::UserRoleAssignment",
        "OS::Keystone::GroupRoleAssignment",
        "OS::Keystone::Service",
        "OS::Keystone::Endpoint",
    ],
    "nova": [
        "OS::Nova::Flavor",
        "OS::Nova::KeyPair",
        "OS::Nova::Quota",
        "OS::Nova::ServerGroup",
        "OS::Nova::Server",
    ],
    "neutron": [
        "OS::Neutron::Net",
        "OS::Neutron::Subnet",
        "OS::Neutron::Router",
        "OS::Neutron::RouterInterface",
        "OS::Neutron::SecurityGroup",
        "OS::Neutron::SecurityGroupRule",
        "OS::Neutron::Port",
        "OS::Neutron::QoSPolicy",
        "OS::Neutron::QoSMinimumBandwidthRule",
        "OS::Neutron::QoSBandwidthLimitRule",
        "OS::Neutron::QoSDscpMarkingRule",
        "OS::Neutron::QoSMinimumPacketRateRule",
        "OS::Neutron::FloatingIP",
        "OS::Neutron::FloatingIPAssociation",
    ],
    "glance": ["OS::Glance::WebImage"],
    "cinder": ["OS::Cinder::VolumeType", "OS::Cinder::Volume", "OS::Cinder::VolumeAttachment"],
    "swift": ["OS::Swift::Container", "OS::Heat::SwiftSignalHandle", "OS::Heat::SwiftSignal"],
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in FAMILIES:
        sys.exit("usage: record_schemas.py %s" % "|".join(FAMILIES))
    types = FAMILIES[sys.argv[1]]
    cfg.CONF([], project="heat", default_config_files=[])
    resources.initialise()
    resource.Resource.is_service_available = classmethod(lambda cls, ctx: (True, None))
    engine = service.EngineService("recorder", "engine")
    # Heat's policy keeps OS::Keystone::*, Flavor and Quota to the admin role.
    ctx = context.RequestContext(roles=["admin"], is_admin=True, project_id="admin", user_id="admin")
    out = {t: engine.resource_schema(ctx, t, with_description=True) for t in types}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
