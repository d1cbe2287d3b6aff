#!/usr/bin/env python3
"""Write Heat's registered policy defaults as data for keelson-policy.

Run with a Python that can import openstack-heat 27.0.1's `heat.policies`
and oslo.policy 6.0.1 (the wheels are enough; nothing else of Heat runs):

    python3 tools/gen_heat_policies.py > data/heat-policies.json

The shape is the one of placement-policies.json: one entry per rule with
its check string, scope types and deprecated default.
"""

import json
import sys
from importlib import metadata

from heat import policies


def entry(rule):
    deprecated = rule.deprecated_rule
    return {
        'name': rule.name,
        'check_str': rule.check_str,
        'description': rule.description,
        'scope_types': rule.scope_types,
        'operations': getattr(rule, 'operations', None),
        'deprecated_rule': None if deprecated is None else {
            'name': deprecated.name,
            'check_str': deprecated.check_str,
        },
    }


def main():
    doc = {
        'generated_from': 'heat.policies.list_rules()',
        'versions': {
            name: metadata.version(name)
            for name in ('openstack-heat', 'oslo.policy')
        },
        'rules': [entry(r) for r in policies.list_rules()],
    }
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
