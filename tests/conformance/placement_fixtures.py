"""The fixture classes upstream Placement's gabbi files name, as data.

Upstream builds these fixtures in-process (placement/tests/functional/
fixtures/gabbits.py, openstack-placement 16.0.0) by writing to the database
directly. Here each one is the same set of facts, replayed over the REST API
of whatever server is under test:

* ``variables``: (name, kind, value, exported). kind ``uuid`` is a fresh
  uuid4 per run (upstream's uuidutils and uuidsentinel values are random per
  process too), ``literal`` the given string, ``alias`` the value of another
  variable. Exported variables become environment variables the YAML files
  read as ``$ENVIRON['NAME']``.
* ``config``: oslo.config overrides, {group: {option: value}}.
* ``policy``: policy rule overrides (written to the policy file).
* ``steps``: the objects to build, in upstream's order; ``requests()``
  expands them into REST requests.

Users, projects and consumers have no API of their own: they come into being
with the first allocation PUT naming them, below microversion 1.38 so the
consumer type reads "unknown" as for upstream's directly created consumers.
"""

import re

_REFERENCE = re.compile(r'\$\{([^}]+)\}')

API_VARIABLES = [
    ('RP_UUID', 'uuid'),
    ('RP_NAME', 'uuid'),
    ('RP_UUID1', 'uuid'),
    ('RP_NAME1', 'uuid'),
    ('RP_UUID2', 'uuid'),
    ('RP_NAME2', 'uuid'),
    ('CUSTOM_RES_CLASS', 'literal', 'CUSTOM_IRON_NFV'),
    ('CUSTOM_RES_CLASS1', 'literal', 'CUSTOM_IRON_NFV1'),
    ('CUSTOM_RES_CLASS2', 'literal', 'CUSTOM_IRON_NFV2'),
    ('PROJECT_ID', 'uuid'),
    ('ADMIN_PROJECT_ID', 'uuid'),
    ('SERVICE_PROJECT_ID', 'uuid'),
    ('USER_ID', 'uuid'),
    ('PROJECT_ID_ALT', 'uuid'),
    ('USER_ID_ALT', 'uuid'),
    ('INSTANCE_UUID', 'uuid'),
    ('MIGRATION_UUID', 'uuid'),
    ('CONSUMER_UUID', 'uuid'),
    ('PARENT_PROVIDER_UUID', 'uuid'),
    ('ALT_PARENT_PROVIDER_UUID', 'uuid'),
]

# Placement 16.0.0's registered policy rules (placement.policies). The open
# policy sets every one of them but admin_api to "@" (anyone).
POLICY_RULES = [
    'admin_api',
    'service_api',
    'admin_or_service_api',
    'project_reader_api',
    'admin_or_project_reader_or_service_api',
] + ['placement:' + name for name in (
    'resource_providers:list',
    'resource_providers:create',
    'resource_providers:show',
    'resource_providers:update',
    'resource_providers:delete',
    'resource_classes:list',
    'resource_classes:create',
    'resource_classes:show',
    'resource_classes:update',
    'resource_classes:delete',
    'resource_providers:inventories:list',
    'resource_providers:inventories:create',
    'resource_providers:inventories:show',
    'resource_providers:inventories:update',
    'resource_providers:inventories:delete',
    'resource_providers:aggregates:list',
    'resource_providers:aggregates:update',
    'resource_providers:usages',
    'usages',
    'traits:list',
    'traits:show',
    'traits:update',
    'traits:delete',
    'resource_providers:traits:list',
    'resource_providers:traits:update',
    'resource_providers:traits:delete',
    'allocations:manage',
    'allocations:list',
    'allocations:update',
    'allocations:delete',
    'resource_providers:allocations:list',
    'allocation_candidates:list',
    'reshaper:reshape',
)]


def _uuids(*names):
    return [(name, 'uuid') for name in names]


def _hidden(*names):
    """Provider/consumer ids upstream never exports."""
    return [(name, 'uuid', None, False) for name in names]


# Step forms:
#   ('provider', UUID_VAR, name, {'parent': VAR, 'aggregates': [VAR, ...]})
#   ('inventory', UUID_VAR, resource_class, total, {field: value})
#   ('traits', UUID_VAR, [trait, ...])          replaces the provider's traits
#   ('aggregates', UUID_VAR, [VAR, ...])
#   ('resource_class', name)
#   ('allocate', CONSUMER_VAR, {UUID_VAR: {rc: used}}, project, user)
# project and user are a ${VAR} reference or a literal external id.


def _allocation_steps():
    return [
        ('provider', 'RP_UUID', '${RP_NAME}', {}),
        ('inventory', 'RP_UUID', 'DISK_GB', 2048, {'step_size': 10, 'min_unit': 10, 'max_unit': 1000}),
        ('inventory', 'RP_UUID', 'VCPU', 10, {'max_unit': 10}),
        ('allocate', 'CONSUMER_0', {'RP_UUID': {'DISK_GB': 1000}}, '${PROJECT_ID}', '${USER_ID}'),
        ('allocate', 'CONSUMER_ID', {'RP_UUID': {'VCPU': 6}}, '${PROJECT_ID}', '${USER_ID}'),
        ('allocate', 'ALT_CONSUMER_ID', {'RP_UUID': {'DISK_GB': 20, 'VCPU': 1}}, '${PROJECT_ID}', '${ALT_USER_ID}'),
    ]


def _shared_storage_steps():
    steps = [
        ('provider', 'CN1_UUID', 'cn1', {'aggregates': ['AGG_UUID']}),
        ('provider', 'CN2_UUID', 'cn2', {'aggregates': ['AGG_UUID']}),
        ('provider', 'SS_UUID', 'ss', {'aggregates': ['AGG_UUID']}),
        ('provider', 'SS2_UUID', 'ss2', {'aggregates': ['AGG_UUID']}),
        ('provider', 'NUMA1_1_UUID', 'numa1_1', {'parent': 'CN1_UUID'}),
        ('provider', 'NUMA1_2_UUID', 'numa1_2', {'parent': 'CN1_UUID'}),
        ('provider', 'NUMA2_1_UUID', 'numa2_1', {'parent': 'CN2_UUID'}),
        ('provider', 'NUMA2_2_UUID', 'numa2_2', {'parent': 'CN2_UUID'}),
        ('provider', 'PF1_1_UUID', 'pf1_1', {'parent': 'NUMA1_1_UUID'}),
        ('provider', 'PF1_2_UUID', 'pf1_2', {'parent': 'NUMA1_2_UUID'}),
        ('provider', 'PF2_1_UUID', 'pf2_1', {'parent': 'NUMA2_1_UUID'}),
        ('provider', 'PF2_2_UUID', 'pf2_2', {'parent': 'NUMA2_2_UUID'}),
    ]
    for cn in ('CN1_UUID', 'CN2_UUID'):
        steps.append(('inventory', cn, 'VCPU', 24, {'allocation_ratio': 16.0}))
        steps.append(('inventory', cn, 'MEMORY_MB', 128 * 1024, {'allocation_ratio': 1.5}))
    steps.append(('traits', 'CN1_UUID', ['HW_CPU_X86_SSE', 'HW_CPU_X86_SSE2']))
    steps.append(('inventory', 'CN2_UUID', 'DISK_GB', 2000, {'reserved': 100, 'allocation_ratio': 1.0}))
    for ss in ('SS_UUID', 'SS2_UUID'):
        steps.append(('inventory', ss, 'DISK_GB', 2000, {'reserved': 100, 'allocation_ratio': 1.0}))
        steps.append(('traits', ss, ['MISC_SHARES_VIA_AGGREGATE']))
    for pf in ('PF1_1_UUID', 'PF1_2_UUID', 'PF2_1_UUID', 'PF2_2_UUID'):
        steps.append(('inventory', pf, 'SRIOV_NET_VF', 8, {'allocation_ratio': 1.0}))
    return steps


def _numa_aggregate_steps():
    steps = [
        ('provider', 'CN1_UUID', 'cn1', {'aggregates': ['AGGA_UUID']}),
        ('provider', 'CN2_UUID', 'cn2', {'aggregates': ['AGGA_UUID', 'AGGB_UUID']}),
        ('provider', 'SS1_UUID', 'ss1', {'aggregates': ['AGGA_UUID']}),
        ('provider', 'SS2_UUID', 'ss2', {'aggregates': ['AGGC_UUID']}),
        ('provider', 'NUMA1_1_UUID', 'numa1_1', {'parent': 'CN1_UUID', 'aggregates': ['AGGC_UUID']}),
        ('provider', 'NUMA1_2_UUID', 'numa1_2', {'parent': 'CN1_UUID'}),
        ('provider', 'NUMA2_1_UUID', 'numa2_1', {'parent': 'CN2_UUID'}),
        ('provider', 'NUMA2_2_UUID', 'numa2_2', {'parent': 'CN2_UUID'}),
    ]
    for numa in ('NUMA1_1_UUID', 'NUMA1_2_UUID', 'NUMA2_1_UUID', 'NUMA2_2_UUID'):
        steps.append(('inventory', numa, 'VCPU', 24, {'allocation_ratio': 16.0}))
    for ss in ('SS1_UUID', 'SS2_UUID'):
        steps.append(('inventory', ss, 'DISK_GB', 2000, {'reserved': 100, 'allocation_ratio': 1.0}))
        steps.append(('traits', ss, ['MISC_SHARES_VIA_AGGREGATE']))
    return steps


NUMA_NETWORK_VARIABLES = (
    _uuids('AGGA_UUID', 'SS1_UUID', 'CN1_UUID', 'NUMA0_UUID', 'NUMA1_UUID', 'FPGA0_UUID', 'PGPU0_UUID',
           'FPGA1_0_UUID', 'FPGA1_1_UUID', 'SRIOV_AGENT_UUID', 'ESN1_UUID', 'ESN2_UUID', 'OVS_AGENT_UUID',
           'BR_INT_UUID', 'CN2_UUID', 'NIC1_UUID', 'NIC2_UUID', 'NIC3_UUID', 'PF1_1_UUID', 'PF1_2_UUID',
           'PF2_1_UUID', 'PF2_2_UUID', 'PF2_3_UUID', 'PF2_4_UUID', 'PF3_1_UUID')
    + _hidden('_NUMA_CONSUMER_1', '_NUMA_CONSUMER_2'))


def _numa_network_steps(cn_created):
    """cn_created: cn1 and cn2 already exist (the deep variant makes them)."""
    steps = [
        ('provider', 'SS1_UUID', 'ss1', {'aggregates': ['AGGA_UUID']}),
        ('traits', 'SS1_UUID', ['MISC_SHARES_VIA_AGGREGATE']),
        ('inventory', 'SS1_UUID', 'DISK_GB', 2000, {}),
    ]
    if not cn_created:
        steps.append(('provider', 'CN1_UUID', 'cn1', {'aggregates': ['AGGA_UUID']}))
    steps += [
        ('aggregates', 'CN1_UUID', ['AGGA_UUID']),
        ('traits', 'CN1_UUID', ['COMPUTE_VOLUME_MULTI_ATTACH']),
        ('provider', 'NUMA0_UUID', 'numa0', {'parent': 'CN1_UUID'}),
        ('traits', 'NUMA0_UUID', ['HW_NUMA_ROOT']),
        ('inventory', 'NUMA0_UUID', 'VCPU', 4, {}),
        ('provider', 'NUMA1_UUID', 'numa1', {'parent': 'CN1_UUID'}),
        ('traits', 'NUMA1_UUID', ['HW_NUMA_ROOT', 'CUSTOM_FOO']),
        ('inventory', 'NUMA1_UUID', 'VCPU', 4, {}),
        ('inventory', 'NUMA0_UUID', 'MEMORY_MB', 2048, {'min_unit': 512, 'step_size': 256}),
        ('inventory', 'NUMA1_UUID', 'MEMORY_MB', 2048, {'min_unit': 256, 'max_unit': 1024}),
        ('allocate', '_NUMA_CONSUMER_1', {'NUMA0_UUID': {'VCPU': 2}}, 'numafx-project', 'numafx-user'),
        ('provider', 'FPGA0_UUID', 'fpga0', {'parent': 'NUMA0_UUID'}),
        ('inventory', 'FPGA0_UUID', 'FPGA', 1, {}),
        ('provider', 'PGPU0_UUID', 'pgpu0', {'parent': 'NUMA0_UUID'}),
        ('inventory', 'PGPU0_UUID', 'VGPU', 8, {}),
        ('provider', 'FPGA1_0_UUID', 'fpga1_0', {'parent': 'NUMA1_UUID'}),
        ('inventory', 'FPGA1_0_UUID', 'FPGA', 1, {}),
        ('provider', 'FPGA1_1_UUID', 'fpga1_1', {'parent': 'NUMA1_UUID'}),
        ('inventory', 'FPGA1_1_UUID', 'FPGA', 1, {}),
        ('provider', 'SRIOV_AGENT_UUID', 'sriov_agent', {'parent': 'CN1_UUID'}),
        ('traits', 'SRIOV_AGENT_UUID', ['CUSTOM_VNIC_TYPE_DIRECT']),
    ]
    for i in (1, 2):
        esn = 'ESN%d_UUID' % i
        steps += [
            ('provider', esn, 'esn%d' % i, {'parent': 'SRIOV_AGENT_UUID'}),
            ('traits', esn, ['CUSTOM_PHYSNET%d' % i]),
            ('inventory', esn, 'NET_BW_EGR_KILOBIT_PER_SEC', 10000 * i, {}),
        ]
    steps += [
        ('provider', 'OVS_AGENT_UUID', 'ovs_agent', {'parent': 'CN1_UUID'}),
        ('traits', 'OVS_AGENT_UUID', ['CUSTOM_VNIC_TYPE_NORMAL']),
        ('provider', 'BR_INT_UUID', 'br_int', {'parent': 'OVS_AGENT_UUID'}),
        ('traits', 'BR_INT_UUID', ['CUSTOM_PHYSNET0']),
        ('inventory', 'BR_INT_UUID', 'NET_BW_EGR_KILOBIT_PER_SEC', 1000, {}),
    ]
    if not cn_created:
        steps.append(('provider', 'CN2_UUID', 'cn2', {}))
    steps += [
        ('aggregates', 'CN2_UUID', ['AGGA_UUID']),
        ('inventory', 'CN2_UUID', 'VCPU', 8, {}),
        ('allocate', '_NUMA_CONSUMER_2', {'CN2_UUID': {'VCPU': 3}}, 'numafx-project', 'numafx-user'),
        ('inventory', 'CN2_UUID', 'MEMORY_MB', 2048, {'min_unit': 1024, 'step_size': 128}),
        ('inventory', 'CN2_UUID', 'DISK_GB', 1000, {}),
        ('traits', 'CN2_UUID', ['CUSTOM_FOO']),
    ]
    for i in (1, 2, 3):
        steps += [
            ('provider', 'NIC%d_UUID' % i, 'nic%d' % i, {'parent': 'CN2_UUID'}),
            ('traits', 'NIC%d_UUID' % i, ['CUSTOM_HW_NIC_ROOT']),
        ]
    # (nic, pf suffix, physnet, VFs) in upstream's order
    pfs = [('NIC1_UUID', '1_1', 1, 4), ('NIC1_UUID', '1_2', 2, 4),
           ('NIC2_UUID', '2_1', 1, 2), ('NIC2_UUID', '2_2', 2, 2), ('NIC2_UUID', '2_3', 1, 2),
           ('NIC2_UUID', '2_4', 2, 2), ('NIC3_UUID', '3_1', 1, 8)]
    for nic, suffix, physnet, vfs in pfs:
        pf = 'PF%s_UUID' % suffix
        steps += [
            ('provider', pf, 'pf' + suffix, {'parent': nic}),
            ('traits', pf, ['CUSTOM_PHYSNET%d' % physnet]),
            ('inventory', pf, 'CUSTOM_VF', vfs, {}),
        ]
    return steps


def _deep_numa_network_steps():
    return [
        ('provider', '_GP1', 'gp1', {}),
        ('provider', '_P1', 'p1', {'parent': '_GP1'}),
        ('provider', '_P2', 'p2', {'parent': '_GP1'}),
        ('provider', 'CN1_UUID', 'cn1', {'parent': '_P1'}),
        ('provider', 'CN2_UUID', 'cn2', {'parent': '_P2'}),
    ] + _numa_network_steps(cn_created=True)


def _non_shared_storage_steps():
    steps = [('provider', 'CN%d_UUID' % i, 'cn%d' % i, {}) for i in (1, 2, 3)]
    for i in (1, 2, 3):
        cn = 'CN%d_UUID' % i
        steps += [
            ('inventory', cn, 'VCPU', 24, {}),
            ('inventory', cn, 'MEMORY_MB', 128 * 1024, {}),
            ('inventory', cn, 'DISK_GB', 2000, {}),
        ]
    return steps


def _granular_steps():
    return [
        ('resource_class', 'CUSTOM_NET_MBPS'),
        ('provider', 'CN_LEFT', 'cn_left', {'aggregates': ['AGGA']}),
        ('inventory', 'CN_LEFT', 'VCPU', 8, {}),
        ('inventory', 'CN_LEFT', 'MEMORY_MB', 4096, {}),
        ('inventory', 'CN_LEFT', 'DISK_GB', 500, {}),
        ('inventory', 'CN_LEFT', 'VGPU', 8, {}),
        ('inventory', 'CN_LEFT', 'SRIOV_NET_VF', 8, {}),
        ('inventory', 'CN_LEFT', 'CUSTOM_NET_MBPS', 4000, {}),
        ('traits', 'CN_LEFT',
         ['HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_GPU_API_DXVA', 'HW_NIC_DCB_PFC', 'CUSTOM_FOO']),
        ('provider', 'CN_MIDDLE', 'cn_middle', {'aggregates': ['AGGA', 'AGGB']}),
        ('inventory', 'CN_MIDDLE', 'VCPU', 8, {}),
        ('inventory', 'CN_MIDDLE', 'MEMORY_MB', 4096, {}),
        ('inventory', 'CN_MIDDLE', 'SRIOV_NET_VF', 8, {}),
        ('inventory', 'CN_MIDDLE', 'CUSTOM_NET_MBPS', 4000, {}),
        ('traits', 'CN_MIDDLE', ['HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE', 'HW_NIC_ACCEL_TLS']),
        ('provider', 'CN_RIGHT', 'cn_right', {'aggregates': ['AGGB', 'AGGC']}),
        ('inventory', 'CN_RIGHT', 'VCPU', 8, {}),
        ('inventory', 'CN_RIGHT', 'MEMORY_MB', 4096, {}),
        ('inventory', 'CN_RIGHT', 'DISK_GB', 500, {}),
        ('inventory', 'CN_RIGHT', 'VGPU', 8, {'max_unit': 2}),
        ('traits', 'CN_RIGHT', ['HW_CPU_X86_MMX', 'HW_GPU_API_DXVA', 'CUSTOM_DISK_SSD']),
        ('provider', 'SHR_DISK_1', 'shr_disk_1', {'aggregates': ['AGGA']}),
        ('inventory', 'SHR_DISK_1', 'DISK_GB', 1000, {}),
        ('traits', 'SHR_DISK_1', ['MISC_SHARES_VIA_AGGREGATE', 'CUSTOM_DISK_SSD']),
        ('provider', 'SHR_DISK_2', 'shr_disk_2', {'aggregates': ['AGGA', 'AGGB']}),
        ('inventory', 'SHR_DISK_2', 'DISK_GB', 1000, {}),
        ('traits', 'SHR_DISK_2', ['MISC_SHARES_VIA_AGGREGATE']),
        ('provider', 'SHR_NET', 'shr_net', {'aggregates': ['AGGC']}),
        ('inventory', 'SHR_NET', 'SRIOV_NET_VF', 16, {}),
        ('inventory', 'SHR_NET', 'CUSTOM_NET_MBPS', 40000, {}),
        ('traits', 'SHR_NET', ['MISC_SHARES_VIA_AGGREGATE']),
    ]


# compute N of the multi-segment network: its physnets and link speeds.
# (name, br-ex physnets, pf physnets, bandwidth of br-ex, bandwidth of pfs)
_QOS_COMPUTES = [
    ('compute0', ['CUSTOM_PHYSNET_OTHER'], ['CUSTOM_PHYSNET_OTHER'], 5000, 10000),
    ('compute1', ['CUSTOM_PHYSNET_MSN_S1'], ['CUSTOM_PHYSNET_MSN_S1'], 5000, 10000),
    ('compute2', ['CUSTOM_PHYSNET_MSN_S2'], ['CUSTOM_PHYSNET_MSN_S2'], 5000, 10000),
    ('compute3', ['CUSTOM_PHYSNET_MSN_S1', 'CUSTOM_PHYSNET_MSN_S2'],
     ['CUSTOM_PHYSNET_MSN_S1', 'CUSTOM_PHYSNET_MSN_S2'], 1000, 1000),
]
_VNIC_DIRECT = ['CUSTOM_VNIC_TYPE_DIRECT', 'CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL', 'CUSTOM_VNIC_TYPE_MACVTAP']


def _qos_variables():
    variables = []
    for name, bridges, pfs, _, _ in _QOS_COMPUTES:
        variables += _uuids(name, name + ':ovs_agent')
        variables += _uuids(*['%s:br_ex%s' % (name, '' if i == 0 else i + 1) for i in range(len(bridges))])
        if name == 'compute3':
            # Upstream exports compute2's agent under compute3's name.
            variables.append(('compute3:sriov_agent', 'alias', 'compute2:sriov_agent'))
            variables += _hidden('_compute3:sriov_agent')
        else:
            variables += _uuids(name + ':sriov_agent')
        variables += _uuids(*['%s:pf%d' % (name, i) for i in range(len(pfs))])
    return variables


def _qos_steps():
    steps = []
    for name, bridges, pfs, bridge_bw, pf_bw in _QOS_COMPUTES:
        ovs = name + ':ovs_agent'
        sriov = '_compute3:sriov_agent' if name == 'compute3' else name + ':sriov_agent'
        steps += [
            ('provider', name, name, {}),
            ('inventory', name, 'VCPU', 8, {}),
            ('inventory', name, 'MEMORY_MB', 4096, {}),
            ('inventory', name, 'DISK_GB', 500, {}),
            ('provider', ovs, name + ':Open vSwitch agent', {'parent': name}),
            ('inventory', ovs, 'NET_PACKET_RATE_KILOPACKET_PER_SEC', 1000, {}),
            ('traits', ovs, ['CUSTOM_VNIC_TYPE_NORMAL']),
        ]
        for i, physnet in enumerate(bridges):
            suffix = '' if i == 0 else str(i + 1)
            bridge = '%s:br_ex%s' % (name, suffix)
            steps += [
                ('provider', bridge, '%s:Open vSwitch agent:br-ex%s' % (name, suffix), {'parent': ovs}),
                ('inventory', bridge, 'NET_BW_EGR_KILOBIT_PER_SEC', bridge_bw, {}),
                ('inventory', bridge, 'NET_BW_IGR_KILOBIT_PER_SEC', bridge_bw, {}),
                ('traits', bridge, ['CUSTOM_VNIC_TYPE_NORMAL', physnet]),
            ]
        steps += [
            ('provider', sriov, name + ':NIC Switch agent', {'parent': name}),
            ('traits', sriov, list(_VNIC_DIRECT)),
        ]
        for i, physnet in enumerate(pfs):
            pf = '%s:pf%d' % (name, i)
            steps += [
                ('provider', pf, '%s:NIC Switch agent:enp129s0f%d' % (name, i), {'parent': sriov}),
                ('inventory', pf, 'NET_BW_EGR_KILOBIT_PER_SEC', pf_bw, {}),
                ('inventory', pf, 'NET_BW_IGR_KILOBIT_PER_SEC', pf_bw, {}),
                ('traits', pf, _VNIC_DIRECT + [physnet]),
            ]
    return steps


def _api(secure_rbac=False):
    return {
        'variables': list(API_VARIABLES),
        'config': {'api': {'auth_strategy': 'noauth2'},
                   'oslo_policy': {'enforce_new_defaults': secure_rbac}},
        'policy': {},
        'steps': [],
    }


def _extend(base, variables=(), steps=(), config=None, policy=None):
    fixture = {key: (list(value) if isinstance(value, list) else dict(value)) for key, value in base.items()}
    fixture['variables'] += list(variables)
    fixture['steps'] += list(steps)
    for group, options in (config or {}).items():
        fixture['config'][group] = dict(fixture['config'].get(group, {}), **options)
    fixture['policy'].update(policy or {})
    return fixture


FIXTURES = {
    'APIFixture': _api(),
    'LegacyRBACPolicyFixture': _api(secure_rbac=False),
    'SecureRBACPolicyFixture': _api(secure_rbac=True),
    'OpenPolicyFixture': _extend(_api(), policy={rule: '@' for rule in POLICY_RULES if rule != 'admin_api'}),
    'CORSFixture': _extend(_api(), config={'cors': {'allowed_origin': ['http://valid.example.com'],
                                                    'allow_headers': ['openstack-api-version']}}),
    'AllocationFixture': _extend(
        _api(),
        variables=_uuids('ALT_USER_ID', 'CONSUMER_0', 'CONSUMER_ID', 'ALT_CONSUMER_ID', 'ALT_RP_UUID', 'ALT_RP_NAME'),
        steps=_allocation_steps()),
    'SharedStorageFixture': _extend(
        _api(),
        variables=_uuids('AGG_UUID', 'CN1_UUID', 'CN2_UUID', 'SS_UUID', 'SS2_UUID', 'NUMA1_1_UUID', 'NUMA1_2_UUID',
                         'NUMA2_1_UUID', 'NUMA2_2_UUID', 'PF1_1_UUID', 'PF1_2_UUID', 'PF2_1_UUID', 'PF2_2_UUID'),
        steps=_shared_storage_steps()),
    'NUMAAggregateFixture': _extend(
        _api(),
        variables=_uuids('AGGA_UUID', 'AGGB_UUID', 'AGGC_UUID', 'CN1_UUID', 'CN2_UUID', 'SS1_UUID', 'SS2_UUID',
                         'NUMA1_1_UUID', 'NUMA1_2_UUID', 'NUMA2_1_UUID', 'NUMA2_2_UUID'),
        steps=_numa_aggregate_steps()),
    'NUMANetworkFixture': _extend(_api(), variables=NUMA_NETWORK_VARIABLES,
                                  steps=_numa_network_steps(cn_created=False)),
    'DeepNUMANetworkFixture': _extend(_api(), variables=NUMA_NETWORK_VARIABLES + _hidden('_GP1', '_P1', '_P2'),
                                      steps=_deep_numa_network_steps()),
    'NonSharedStorageFixture': _extend(
        _api(),
        variables=_uuids('AGGA_UUID', 'AGGB_UUID', 'AGGC_UUID', 'CN1_UUID', 'CN2_UUID', 'CN3_UUID'),
        steps=_non_shared_storage_steps()),
    'GranularFixture': _extend(
        _api(),
        variables=_uuids('AGGA', 'AGGB', 'AGGC', 'CN_LEFT', 'CN_MIDDLE', 'CN_RIGHT', 'SHR_DISK_1', 'SHR_DISK_2',
                         'SHR_NET'),
        steps=_granular_steps()),
    'NeutronQoSMultiSegmentFixture': _extend(_api(), variables=_qos_variables(), steps=_qos_steps()),
}


def values(fixture, new_uuid):
    """All of a fixture's variables, name -> value, and the exported names."""
    result, exported = {}, []
    for entry in fixture['variables']:
        name, kind = entry[0], entry[1]
        value = entry[2] if len(entry) > 2 else None
        if kind == 'uuid':
            result[name] = new_uuid()
        elif kind == 'literal':
            result[name] = value
        elif kind == 'alias':
            result[name] = result[value]
        else:
            raise ValueError('variable %s: unknown kind %s' % (name, kind))
        if len(entry) < 4 or entry[3]:
            exported.append(name)
    return result, exported


def _ref(name):
    return '${%s}' % name


def requests(fixture):
    """The REST requests that build a fixture's steps, in order.

    Each is {method, path, microversion, body, expect}; ${NAME} in path and
    body strings stands for a variable. Provider generations are counted
    here: a new provider is at 0 and every inventory POST, traits PUT and
    allocation touching it adds 1; aggregate PUTs at 1.1 add nothing.
    """
    out = []
    generation = {}
    known_custom = set()  # custom traits and resource classes created so far

    def ensure_custom(kind, name):
        if not name.startswith('CUSTOM_') or (kind, name) in known_custom:
            return
        known_custom.add((kind, name))
        if kind == 'trait':
            out.append(dict(method='PUT', path='/traits/' + name, microversion='1.6', body=None, expect=[201, 204]))
        else:
            out.append(dict(method='PUT', path='/resource_classes/' + name, microversion='1.7', body=None,
                            expect=[201, 204]))

    def set_aggregates(var, aggregates):
        out.append(dict(method='PUT', path='/resource_providers/%s/aggregates' % _ref(var), microversion='1.1',
                        body=[_ref(agg) for agg in aggregates], expect=[200]))

    for step in fixture['steps']:
        kind = step[0]
        if kind == 'provider':
            _, var, name, options = step
            body = {'name': name, 'uuid': _ref(var)}
            if options.get('parent'):
                body['parent_provider_uuid'] = _ref(options['parent'])
            out.append(dict(method='POST', path='/resource_providers', microversion='1.14', body=body, expect=[201]))
            generation[var] = 0
            if options.get('aggregates'):
                set_aggregates(var, options['aggregates'])
        elif kind == 'inventory':
            _, var, rc, total, fields = step
            ensure_custom('resource_class', rc)
            body = {'resource_class': rc, 'total': total, 'reserved': 0, 'min_unit': 1, 'max_unit': total,
                    'step_size': 1, 'allocation_ratio': 1.0}
            body.update(fields)
            body['resource_provider_generation'] = generation[var]
            out.append(dict(method='POST', path='/resource_providers/%s/inventories' % _ref(var), microversion='1.0',
                            body=body, expect=[201]))
            generation[var] += 1
        elif kind == 'traits':
            _, var, traits = step
            for trait in traits:
                ensure_custom('trait', trait)
            out.append(dict(method='PUT', path='/resource_providers/%s/traits' % _ref(var), microversion='1.6',
                            body={'traits': list(traits), 'resource_provider_generation': generation[var]},
                            expect=[200]))
            generation[var] += 1
        elif kind == 'aggregates':
            set_aggregates(step[1], step[2])
        elif kind == 'resource_class':
            ensure_custom('resource_class', step[1])
        elif kind == 'allocate':
            _, consumer, allocations, project, user = step
            body = {
                'allocations': {_ref(rp): {'resources': dict(resources)} for rp, resources in allocations.items()},
                'project_id': project,
                'user_id': user,
                'consumer_generation': None,
            }
            out.append(dict(method='PUT', path='/allocations/' + _ref(consumer), microversion='1.28', body=body,
                            expect=[204]))
            for rp in allocations:
                generation[rp] += 1
        else:
            raise ValueError('unknown fixture step %r' % (step,))
    return out


def substitute(value, variables):
    """Replace ${NAME} in every string of a request path or body."""
    if isinstance(value, str):
        return _REFERENCE.sub(lambda match: variables[match.group(1)], value)
    if isinstance(value, list):
        return [substitute(item, variables) for item in value]
    if isinstance(value, dict):
        return {substitute(key, variables): substitute(item, variables) for key, item in value.items()}
    return value
