#!/usr/bin/env python3
"""Records what Heat 27.0.1 answers to GET /resource_types/<type> for the
OS::Nova::* types keelson implements, by running Heat's own schema code
(the body of EngineService.resource_schema with `with_description`,
less its policy and service-catalog checks) on the plugin classes.

Run with the Python of a virtualenv holding openstack-heat==27.0.1:

    python3 -m venv /tmp/heat27 && /tmp/heat27/bin/pip install openstack-heat==27.0.1
    /tmp/heat27/bin/python tests/reference/heat/record_nova_schemas.py \
        > services/stack-engine/src/resources/nova/testdata/nova_schemas.json
"""

import itertools
import json
import sys

from oslo_config import cfg

from heat.engine import attributes, properties, support
from heat.engine.resources.openstack.nova import flavor, keypair, quota, server_group

TYPES = {
    "OS::Nova::Flavor": flavor.NovaFlavor,
    "OS::Nova::KeyPair": keypair.KeyPair,
    "OS::Nova::Quota": quota.NovaQuota,
    "OS::Nova::ServerGroup": server_group.ServerGroup,
}


def schema_view(type_name, cls):
    props = {}
    for name, schema_dict in cls.properties_schema.items():
        schema = properties.Schema.from_legacy(schema_dict)
        if schema.implemented and schema.support_status.status != support.HIDDEN:
            props[name] = dict(schema)
    attrs = {}
    for name, data in itertools.chain(cls.attributes_schema.items(), cls.base_attributes_schema.items()):
        schema = attributes.Schema.from_attribute(data)
        if schema.support_status.status != support.HIDDEN:
            attrs[name] = dict(schema)
    return {
        "resource_type": type_name,
        "properties": props,
        "attributes": attrs,
        "support_status": cls.support_status.to_dict(),
        # Only with `with_description=true`.
        "description": cls.getdoc(),
    }


def main():
    cfg.CONF([], project="heat")
    out = {name: schema_view(name, cls) for name, cls in TYPES.items()}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
