#!/usr/bin/env python3
"""Records what the real Heat 27.0.1 answers to GET /resource_types/<type>
for its OS::Keystone::* types (with_description=true), as the stack engine's schema tests expect it
(services/stack-engine/src/resources/keystone/testdata/schemas.json).

Runs Heat's own EngineService.resource_schema in-process with an admin
context; the only thing stubbed is the service-catalog check (no Keystone
is asked: the schema does not depend on it).

    python3 -m venv /tmp/heat && /tmp/heat/bin/pip install openstack-heat==27.0.1
    /tmp/heat/bin/python tests/reference/heat/record_keystone_schemas.py > \
        services/stack-engine/src/resources/keystone/testdata/schemas.json
"""

import json
import sys

from oslo_config import cfg

from heat.common import context
from heat.engine import resource, resources, service

TYPES = [
    "OS::Keystone::Project",
    "OS::Keystone::Role",
    "OS::Keystone::Domain",
    "OS::Keystone::User",
    "OS::Keystone::Group",
    "OS::Keystone::UserRoleAssignment",
    "OS::Keystone::GroupRoleAssignment",
    "OS::Keystone::Service",
    "OS::Keystone::Endpoint",
]


def main():
    cfg.CONF([], project="heat", default_config_files=[])
    resources.initialise()
    # The catalog check would ask Keystone; every type here is keystone's.
    resource.Resource.is_service_available = classmethod(lambda cls, ctx: (True, None))
    engine = service.EngineService("recorder", "engine")
    # Heat's policy keeps OS::Keystone::* to the admin role.
    ctx = context.RequestContext(roles=["admin"], is_admin=True, project_id="admin", user_id="admin")
    out = {t: engine.resource_schema(ctx, t, with_description=True) for t in TYPES}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
