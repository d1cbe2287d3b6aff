"""Differential test of GET /allocation_candidates: keelson against the real
Python Placement (openstack-placement 16.0.0), both serving ONE database.

Randomly generated fleets (flat computes, nested NUMA trees with PFs and
devices, sharing storage providers in aggregates with
MISC_SHARES_VIA_AGGREGATE, traits, custom resource classes, existing
allocations) are created through keelson's REST API; randomly generated
requests (granular groups, group_policy, same_subtree with resourceless
groups, root_required, member_of with in: and !, in_tree, forbidden and
any-of traits, limit) at microversions 1.28, 1.36 and 1.39 go to both
servers, and the answers are compared:

* both answer the same status; a 400 carries the same error code and text;
* every keelson candidate is valid: amounts add up to the request, capacity
  and max_unit hold, and (from 1.34, by its mappings) each group's traits,
  aggregates, isolate and same_subtree are respected;
* allocation requests are equal as multisets (below 1.34 the reference can
  return one allocation request twice, from group orders that differ only
  in mappings), provider summaries are equal (traits as sets);
* where `limit` truncates, the orders differ (the reference truncates a
  hash-ordered list), so both must answer min(limit, all) candidates,
  keelson's drawn from its unlimited answer, with summaries for exactly the
  trees they use; the unlimited answers are compared as above;
* keelson's explanation of every case (`/keelson/v1/placement/explain`)
  names the same providers and count as keelson's answer;
* the reference's defects (`Case.reference_defects`): when a class is
  requested by two or more groups and group_policy is isolate or absent,
  its consolidation adds amounts into objects shared between candidates (its
  answer depends on the hash seed, holds inflated amounts and loses valid
  candidates); and an allocation request of the unsuffixed group made only
  of sharing providers survives under one anchor only (AllocationRequest
  equality ignores the anchor), so combinations with other groups under the
  other anchors are lost.  For those shapes keelson's candidates are checked
  for validity, every candidate of the reference whose amounts add up must
  be in keelson's answer, and keelson's answer must equal, as a multiset
  (so in count too), that of the same reference with its defects fixed
  (a third server: tests/reference/placement/serve.py
  --fix-upstream-defects, fixes in upstream_fixes.py beside it).  A third defect shows on PostgreSQL
  only: the tree search gets forbidden trait names where ids belong, and
  PostgreSQL fails such requests with a 500; those cases are compared with
  the fixed reference too ('forbidden-names').  The references run with a
  fixed PYTHONHASHSEED so that their answers replay.

Environment:

  KEELSON_DIFF_CASES     requests per backend (default 500; e.g. 10000)
  KEELSON_DIFF_SEED      base seed S (default random); every case prints its
                         id S-F-R (fleet F, request R); KEELSON_DIFF_SEED=S-F-R
                         replays that one case, S-F one fleet's cases
  KEELSON_DIFF_HASHSEED  the reference's PYTHONHASHSEED (default 0)

Runs on SQLite, and on MariaDB and PostgreSQL too when KEELSON_BACKENDS names
mysql and postgresql.
"""
import collections
import concurrent.futures
import os
import random
import time
import urllib.parse
import uuid

import pytest

from conftest import AllInOne, BACKENDS, create_database, http, ref_placement, wait_http

DIFF_BACKENDS = ['sqlite'] + [b for b in ('mysql', 'postgresql') if b in BACKENDS]
CASES = int(os.environ.get('KEELSON_DIFF_CASES', '500'))
HASHSEED = os.environ.get('KEELSON_DIFF_HASHSEED', '0')
VERSIONS = ('1.28', '1.36', '1.39')
SHARING = 'MISC_SHARES_VIA_AGGREGATE'

CUSTOM_CLASSES = ['CUSTOM_FPGA', 'CUSTOM_MAGIC']
CUSTOM_TRAITS = ['CUSTOM_GOLD', 'CUSTOM_SILVER', 'CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B', 'CUSTOM_FAST']
COMPUTE_TRAITS = ['HW_CPU_X86_AVX2', 'HW_CPU_X86_SSE42', 'COMPUTE_VOLUME_MULTI_ATTACH', 'CUSTOM_GOLD', 'CUSTOM_SILVER']
NUMA_TRAITS = ['HW_NUMA_ROOT', 'CUSTOM_FAST', 'HW_CPU_X86_AVX2']
NIC_TRAITS = ['CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B', 'HW_NIC_SRIOV', 'HW_NIC_OFFLOAD_TSO']
STORAGE_TRAITS = ['STORAGE_DISK_SSD', 'STORAGE_DISK_HDD']
ALL_TRAITS = sorted(set(COMPUTE_TRAITS + NUMA_TRAITS + NIC_TRAITS + STORAGE_TRAITS + CUSTOM_TRAITS + [SHARING]))

# (low, high) totals, and amounts requests ask for.
TOTALS = {'VCPU': (4, 16), 'PCPU': (1, 6), 'MEMORY_MB': (2048, 16384), 'DISK_GB': (100, 2000), 'SRIOV_NET_VF': (1, 8),
          'NET_BW_EGR_KILOBIT_PER_SEC': (2000, 20000), 'NET_BW_IGR_KILOBIT_PER_SEC': (2000, 20000),
          'IPV4_ADDRESS': (1, 6), 'CUSTOM_FPGA': (1, 4), 'CUSTOM_MAGIC': (1, 6)}
AMOUNTS = {'VCPU': [1, 1, 2, 4, 8], 'PCPU': [1, 2], 'MEMORY_MB': [256, 512, 1024, 2048, 4096],
           'DISK_GB': [10, 20, 100, 400], 'SRIOV_NET_VF': [1, 1, 2], 'NET_BW_EGR_KILOBIT_PER_SEC': [1000, 2000, 5000],
           'NET_BW_IGR_KILOBIT_PER_SEC': [1000, 4000], 'IPV4_ADDRESS': [1, 2], 'CUSTOM_FPGA': [1, 1, 2],
           'CUSTOM_MAGIC': [1, 2, 3]}
GROUP_SHAPES = [['VCPU', 'MEMORY_MB'], ['VCPU'], ['MEMORY_MB'], ['VCPU', 'MEMORY_MB', 'DISK_GB'], ['DISK_GB'],
                ['SRIOV_NET_VF'], ['SRIOV_NET_VF', 'NET_BW_EGR_KILOBIT_PER_SEC'],
                ['NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC'], ['IPV4_ADDRESS'], ['CUSTOM_FPGA'],
                ['PCPU', 'MEMORY_MB'], ['CUSTOM_MAGIC'], ['VCPU', 'IPV4_ADDRESS'], ['DISK_GB', 'IPV4_ADDRESS']]
SUFFIXES_1_33 = ['1', '2', '3', '_NET', 'COMPUTE', 'acc-1', 'x_Y', '42']


def rng_uuid(rng):
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


# ---- the fleet model --------------------------------------------------------

class Inventory:
    def __init__(self, total, reserved=0, min_unit=1, max_unit=None, step_size=1, allocation_ratio=1.0):
        self.total, self.reserved, self.min_unit = total, reserved, min_unit
        self.max_unit = total if max_unit is None else max_unit
        self.step_size, self.allocation_ratio = step_size, allocation_ratio

    @property
    def capacity(self):
        return int((self.total - self.reserved) * self.allocation_ratio)

    def body(self):
        return {'total': self.total, 'reserved': self.reserved, 'min_unit': self.min_unit, 'max_unit': self.max_unit,
                'step_size': self.step_size, 'allocation_ratio': self.allocation_ratio}


class Provider:
    def __init__(self, name, uid, parent=None):
        self.name, self.uuid, self.parent = name, uid, parent
        self.root = parent.root if parent else self
        self.inventories = {}
        self.traits = set()
        self.aggregates = set()
        self.used = collections.Counter()

    def ancestors(self):
        p, out = self, []
        while p is not None:
            out.append(p)
            p = p.parent
        return out


class Fleet:
    def __init__(self, tag):
        self.tag = tag
        self.providers = []
        self.by_uuid = {}
        self.aggregates = []
        self.consumers = {}

    def add(self, rng, name, parent=None):
        p = Provider('%s-%s' % (self.tag, name), rng_uuid(rng), parent)
        self.providers.append(p)
        self.by_uuid[p.uuid] = p
        return p

    def classes(self):
        return sorted({rc for p in self.providers for rc in p.inventories})

    def sharing_anchor_roots(self, p):
        """The roots of every tree sharing an aggregate with sharing provider p."""
        return {q.root.uuid for q in self.providers if q.aggregates & p.aggregates} | {p.root.uuid}


def random_inventory(rng, rc):
    lo, hi = TOTALS[rc]
    total = rng.randint(lo, hi)
    inv = Inventory(total)
    if total > 2 and rng.random() < 0.2:
        inv.reserved = rng.randint(1, max(1, total // 4))
    if rc in ('VCPU', 'MEMORY_MB', 'DISK_GB') and rng.random() < 0.4:
        inv.allocation_ratio = rng.choice([1.5, 2.0, 4.0, 16.0])
    if rng.random() < 0.2:
        inv.max_unit = rng.randint(max(1, total // 3), total)
    if rng.random() < 0.1 and inv.max_unit >= 2:
        inv.min_unit = 2
    if rng.random() < 0.1:
        inv.step_size = 2
    return inv


def generate_fleet(rng, tag):
    """A random fleet (model only); `create_fleet` writes it."""
    f = Fleet(tag)
    f.aggregates = [rng_uuid(rng) for _ in range(3)]

    def some(pool, p=0.35, k=2):
        return set(rng.sample(pool, rng.randint(1, k))) if rng.random() < p else set()

    n_flat = rng.randint(0, 3)
    n_trees = rng.randint(0 if n_flat else 1, 3)
    n_sharing = rng.choice([0, 1, 1, 2, 2])
    for i in range(n_flat):
        cn = f.add(rng, 'cn%d' % i)
        for rc in ['VCPU', 'MEMORY_MB'] + [rc for rc, p in (('DISK_GB', 0.5), ('CUSTOM_MAGIC', 0.25), ('IPV4_ADDRESS', 0.1))
                                           if rng.random() < p]:
            cn.inventories[rc] = random_inventory(rng, rc)
        cn.traits = some(COMPUTE_TRAITS, 0.6, 3)
        cn.aggregates = some(f.aggregates, 0.6)
    for i in range(n_trees):
        root = f.add(rng, 'nt%d' % i)
        if rng.random() < 0.5:
            root.inventories['DISK_GB'] = random_inventory(rng, 'DISK_GB')
        if rng.random() < 0.15:
            root.inventories['VCPU'] = random_inventory(rng, 'VCPU')
        root.traits = some(COMPUTE_TRAITS, 0.6, 3)
        root.aggregates = some(f.aggregates, 0.6)
        for n in range(rng.choice([1, 2, 2])):
            numa = f.add(rng, 'nt%d-numa%d' % (i, n), root)
            for rc in ['VCPU', 'MEMORY_MB'] + (['PCPU'] if rng.random() < 0.3 else []):
                numa.inventories[rc] = random_inventory(rng, rc)
            numa.traits = some(NUMA_TRAITS, 0.5)
            if rng.random() < 0.1:
                numa.aggregates = some(f.aggregates, 1.0, 1)
            for k in range(rng.choice([0, 1, 2, 2])):
                pf = f.add(rng, 'nt%d-numa%d-pf%d' % (i, n, k), numa)
                pf.inventories['SRIOV_NET_VF'] = random_inventory(rng, 'SRIOV_NET_VF')
                for rc in ('NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC'):
                    if rng.random() < 0.7:
                        pf.inventories[rc] = random_inventory(rng, rc)
                pf.traits = some(NIC_TRAITS, 0.7)
        if rng.random() < 0.3:
            pf = f.add(rng, 'nt%d-pf' % i, root)
            pf.inventories['SRIOV_NET_VF'] = random_inventory(rng, 'SRIOV_NET_VF')
            pf.traits = some(NIC_TRAITS, 0.7)
        if rng.random() < 0.3:
            dev = f.add(rng, 'nt%d-fpga' % i, root)
            dev.inventories['CUSTOM_FPGA'] = random_inventory(rng, 'CUSTOM_FPGA')
            dev.traits = some(['CUSTOM_FAST', 'CUSTOM_GOLD'], 0.5)
        if rng.random() < 0.1:
            f.add(rng, 'nt%d-empty' % i, root).traits = some(NUMA_TRAITS, 0.5)
    for i in range(n_sharing):
        ss = f.add(rng, 'ss%d' % i)
        kinds = [rc for rc, p in (('DISK_GB', 0.8), ('IPV4_ADDRESS', 0.4), ('CUSTOM_MAGIC', 0.1)) if rng.random() < p]
        for rc in kinds or ['DISK_GB']:
            ss.inventories[rc] = random_inventory(rng, rc)
        ss.traits = ({SHARING} if rng.random() < 0.9 else set()) | some(STORAGE_TRAITS, 0.5, 1)
        ss.aggregates = set(rng.sample(f.aggregates, rng.choice([0, 1, 1, 2])))
    # Existing allocations, each fitting every inventory rule.
    for _ in range(rng.randint(0, 5)):
        parts = {}
        for p in rng.sample(f.providers, min(2, len(f.providers))):
            if not p.inventories:
                continue
            rc = rng.choice(sorted(p.inventories))
            inv = p.inventories[rc]
            room = min(inv.max_unit, inv.capacity - p.used[rc])
            amounts = [a for a in range(inv.min_unit, min(room, inv.min_unit + 16) + 1) if a % inv.step_size == 0]
            if amounts:
                a = rng.choice(amounts[:8])
                p.used[rc] += a
                parts.setdefault(p.uuid, {})[rc] = a
        if parts:
            f.consumers[rng_uuid(rng)] = parts
    return f


def must(result, what):
    status, _, body = result
    assert status < 300, '%s: %s %s' % (what, status, body)
    return body


def prepare_catalog(ks):
    """Custom classes and traits, once per database."""
    for rc in CUSTOM_CLASSES:
        assert http('PUT', ks + '/resource_classes/' + rc, version='1.7')[0] in (201, 204)
    for t in CUSTOM_TRAITS:
        assert http('PUT', ks + '/traits/' + t, version='1.6')[0] in (201, 204)


def create_fleet(ks, f):
    """Writes the fleet through keelson's REST API."""
    for p in f.providers:
        body = {'name': p.name, 'uuid': p.uuid}
        if p.parent:
            body['parent_provider_uuid'] = p.parent.uuid
        rp = must(http('POST', ks + '/resource_providers', body, version='1.20'), 'create ' + p.name)
        gen = rp['generation']
        if p.inventories:
            got = must(http('PUT', ks + '/resource_providers/%s/inventories' % p.uuid, {
                'resource_provider_generation': gen,
                'inventories': {rc: inv.body() for rc, inv in p.inventories.items()}}), 'inventories ' + p.name)
            gen = got['resource_provider_generation']
        if p.traits:
            got = must(http('PUT', ks + '/resource_providers/%s/traits' % p.uuid, {
                'resource_provider_generation': gen, 'traits': sorted(p.traits)}), 'traits ' + p.name)
            gen = got['resource_provider_generation']
        if p.aggregates:
            must(http('PUT', ks + '/resource_providers/%s/aggregates' % p.uuid, {
                'resource_provider_generation': gen, 'aggregates': sorted(p.aggregates)}), 'aggregates ' + p.name)
    for consumer, parts in f.consumers.items():
        must(http('PUT', ks + '/allocations/' + consumer, {
            'allocations': {u: {'resources': r} for u, r in parts.items()}, 'project_id': 'diff', 'user_id': 'diff',
            'consumer_generation': None}, version='1.28'), 'allocate')


def delete_fleet(ks, f):
    for consumer in f.consumers:
        must(http('DELETE', ks + '/allocations/' + consumer), 'deallocate')
    depth = {p.uuid: len(p.ancestors()) for p in f.providers}
    for p in sorted(f.providers, key=lambda p: -depth[p.uuid]):
        must(http('DELETE', ks + '/resource_providers/' + p.uuid), 'delete ' + p.name)


# ---- random requests --------------------------------------------------------

class Group:
    def __init__(self, suffix):
        self.suffix = suffix
        self.resources = {}
        self.required = []        # list of any-of sets
        self.forbidden = set()
        self.member_of = []       # list of any-of sets
        self.forbidden_aggs = set()
        self.in_tree = None


class Case:
    def __init__(self, case_id, version):
        self.id, self.version = case_id, version
        self.groups = []
        self.params = []
        self.policy = None
        self.same_subtrees = []
        self.root_required, self.root_forbidden = set(), set()
        self.limit = None
        self.defects = []

    def at_least(self, minor):
        return int(self.version.split('.')[1]) >= minor

    def query(self, limit=True):
        return urllib.parse.urlencode([(k, v) for k, v in self.params if limit or k != 'limit'])

    def multi_group_classes(self):
        seen = collections.Counter(rc for g in self.groups for rc in g.resources)
        return {rc for rc, n in seen.items() if n > 1}

    def reference_defects(self, f):
        """The reference's defects this request may meet (the answer is then
        compared with the fixed reference, see reference_placement):
        - 'consolidation': a class asked by several groups with isolate or
          no policy: consolidation adds amounts into objects shared between
          candidates, inflating them and losing others, by hash order;
        - 'anchors': the unsuffixed group can be served by sharing providers
          alone and other groups exist: such an allocation request of the
          unsuffixed group survives under one anchor only."""
        out = []
        if self.multi_group_classes() and self.policy != 'none':
            out.append('consolidation')
        unsuffixed = [g for g in self.groups if not g.suffix and g.resources]
        shared = {rc for p in f.providers if SHARING in p.traits and p.aggregates for rc in p.inventories}
        if unsuffixed and len(self.groups) > 1 and set(unsuffixed[0].resources) <= shared:
            out.append('anchors')
        return out

    def totals(self):
        out = collections.Counter()
        for g in self.groups:
            out.update(g.resources)
        return out


def traits_value(rng, case, have, pool):
    """One `required` value, mostly true of a provider having the traits
    `have`: plain (maybe with forbidden traits) or, from 1.39, in:."""
    if rng.random() < 0.2 or not have:
        have = set(rng.sample(pool, 2))
    others = sorted(set(pool) - have)
    if case.at_least(39) and rng.random() < 0.35:
        return 'in:' + ','.join(rng.sample(sorted(have), 1) + rng.sample(others, rng.randint(1, 2)))
    names = rng.sample(sorted(have), min(len(have), rng.choice([1, 1, 2])))
    if rng.random() < 0.3:
        names.append('!' + rng.choice(others))
    rng.shuffle(names)
    return ','.join(names)


def parse_traits(value, group):
    if value.startswith('in:'):
        group.required.append(set(value[3:].split(',')))
        return
    for n in value.split(','):
        if n.startswith('!'):
            group.forbidden.add(n[1:])
        else:
            group.required.append({n})


def member_of_value(rng, case, have, aggs):
    """One `member_of` value, mostly true of a provider in the aggregates
    `have`; from 1.32 maybe forbidden."""
    others = sorted(set(aggs) - have)
    kind = rng.random()
    if case.at_least(32) and kind < 0.3 and others:
        return '!' + rng.choice(others) if rng.random() < 0.6 else '!in:' + ','.join(others[:2])
    if have and rng.random() < 0.8:
        pick = rng.choice(sorted(have))
    else:
        pick = rng.choice(aggs)
    if kind < 0.6:
        return 'in:' + ','.join([pick] + rng.sample(others, min(len(others), 1)))
    return pick


def amount(rng, rc, givers):
    """An amount of rc to ask: mostly one that some provider of `givers`
    can give (min_unit, max_unit, step_size and free capacity)."""
    fitting = []
    for p in givers:
        inv = p.inventories.get(rc)
        if inv is not None:
            room = min(inv.max_unit, inv.capacity - p.used[rc])
            fitting += [a for a in AMOUNTS.get(rc, [1]) + [inv.min_unit, inv.step_size]
                        if inv.min_unit <= a <= room and a % inv.step_size == 0]
    if fitting and rng.random() < 0.8:
        return rng.choice(sorted(set(fitting))[:4])
    return rng.choice(AMOUNTS.get(rc, [1])[:3] if rng.random() < 0.7 else AMOUNTS.get(rc, [1]))


def generate_case(rng, case_id, version, f):
    """A random request, mostly aimed at one tree so that several groups can
    meet: each group's classes, traits and aggregates are those of one
    provider of the tree (or of the tree and its sharing providers for the
    unsuffixed group), with random deviations."""
    case = Case(case_id, version)
    fleet_classes = f.classes()
    numeric = not case.at_least(33)
    n_granular = rng.choice([0, 0, 1, 1, 2, 2, 3]) if case.at_least(25) else 0
    suffixes = (rng.sample(['1', '2', '3', '4', '7', '12'], n_granular) if numeric else rng.sample(SUFFIXES_1_33, n_granular))
    unsuffixed = n_granular == 0 or rng.random() < 0.6
    names = ([''] if unsuffixed else []) + suffixes
    rng.shuffle(names)
    # group_policy: required with two or more granular groups.
    if case.at_least(25) and (n_granular > 1 and rng.random() < 0.98 or rng.random() < 0.3):
        case.policy = rng.choice(['none', 'isolate'])
    subtree = case.at_least(36) and n_granular and rng.random() < 0.35
    roots = [p for p in f.providers if p.parent is None]
    # Several granular groups mostly aim at a tree with several providers.
    wide = [r for r in roots if sum(1 for p in f.providers if p.root is r and p.inventories) > 1]
    target = rng.choice(wide if n_granular > 1 and wide and rng.random() < 0.8 else roots)
    in_target = [p for p in f.providers if p.root is target and p.inventories]
    sharing = [p for p in f.providers if SHARING in p.traits and target.uuid in f.sharing_anchor_roots(p)]
    # Granular groups aim at providers of the target tree (or sharing
    # ones), distinct ones under isolate, below one provider when a
    # same_subtree will name them.
    aims = in_target + sharing if rng.random() < 0.85 else [p for p in f.providers if p.inventories]
    if subtree and in_target:
        top = rng.choice([p for p in f.providers if p.root is target])
        aims = [p for p in in_target if top in p.ancestors()] or aims
    rng.shuffle(aims)
    targets = {}
    for s in names:
        g = Group(s)
        r = rng.random()
        pool, givers = [], []
        if r < 0.9:
            if s and aims:
                # Classes one provider has.
                targets[s] = aims.pop() if case.policy == 'isolate' and len(aims) > 1 else rng.choice(aims)
                givers = [targets[s]]
            elif not s:
                # Classes of the target tree and of the sharing providers.
                targets[s] = target
                givers = in_target + sharing
            pool = sorted({rc for q in givers for rc in q.inventories})
        if pool:
            shape = rng.sample(pool, min(len(pool), rng.choice([1, 1, 2, 2, 3])))
        elif r < 0.95:
            shape = rng.choice(GROUP_SHAPES)
        else:
            shape = rng.sample(fleet_classes or ['VCPU'], min(len(fleet_classes) or 1, rng.randint(1, 3)))
        if rng.random() < 0.015:
            shape = shape + [rng.choice(['VGPU', 'CUSTOM_NOPE'])]
        g.resources = {rc: amount(rng, rc, givers) for rc in shape}
        case.groups.append(g)
    # Resourceless groups (1.36+), always named in a same_subtree below:
    # mostly an ancestor of a granular group's provider.
    resourceless = []
    if subtree and rng.random() < 0.6:
        g = Group(rng.choice([s for s in ['NUMA', 'PARENT', '9'] if s not in names]))
        below = [targets[s] for s in suffixes if s in targets]
        if below:
            targets[g.suffix] = rng.choice(rng.choice(below).ancestors())
        case.groups.append(g)
        resourceless.append(g.suffix)
    for g in case.groups:
        aim = targets.get(g.suffix)
        # traits
        if rng.random() < (0.8 if not g.resources else 0.2):
            have = set(aim.traits) if aim is not None and g.suffix else \
                set().union(*(p.traits for p in in_target + [target]))
            values = [traits_value(rng, case, have, ALL_TRAITS)]
            if case.at_least(39) and rng.random() < 0.3:
                values.append(traits_value(rng, case, have, ALL_TRAITS))
            if rng.random() < 0.02:
                values[-1] = 'CUSTOM_NO_SUCH_TRAIT'
            for v in values:
                case.params.append(('required' + g.suffix, v))
            for v in (values if case.at_least(39) else values[-1:]):
                parse_traits(v, g)
        # aggregates
        if rng.random() < 0.15:
            have = (aim.aggregates | aim.root.aggregates) if aim is not None else set()
            aggs = f.aggregates + [rng_uuid(rng)]
            values = [member_of_value(rng, case, have, aggs) for _ in range(rng.choice([1, 1, 2]))]
            if not case.at_least(24):
                values = values[:1]
            for v in values:
                case.params.append(('member_of' + g.suffix, v))
                if v.startswith('!'):
                    g.forbidden_aggs |= set(v[4:].split(',') if v.startswith('!in:') else [v[1:]])
                else:
                    g.member_of.append(set(v[3:].split(',') if v.startswith('in:') else [v]))
        # in_tree (1.31+): mostly a provider of the target tree.
        if case.at_least(31) and g.resources and rng.random() < 0.12:
            r = rng.random()
            tree = [p for p in f.providers if p.root is target]
            g.in_tree = (rng.choice(tree) if r < 0.7 else rng.choice(f.providers)).uuid if r < 0.95 else rng_uuid(rng)
            case.params.append(('in_tree' + g.suffix, g.in_tree))
    for g in case.groups:
        if g.resources:
            case.params.append(('resources' + g.suffix, ','.join('%s:%d' % kv for kv in g.resources.items())))
    rng.shuffle(case.params)
    if case.policy:
        case.params.append(('group_policy', case.policy))
    # same_subtree (1.36+)
    granular = [g.suffix for g in case.groups if g.suffix]
    if subtree and (resourceless or len(granular) > 1):
        members = set(resourceless)
        others = [s for s in granular if s not in members]
        members |= set(rng.sample(others, min(len(others), rng.randint(1, 2))))
        if len(members) < 2 and others:
            members |= set(others)
        value = sorted(members)
        rng.shuffle(value)
        case.same_subtrees.append(value)
        case.params.append(('same_subtree', ','.join(value)))
    # root_required (1.35+): mostly true of the target tree's root.
    if case.at_least(35) and rng.random() < 0.15:
        value = []
        for _ in range(rng.randint(1, 2)):
            if rng.random() < 0.6 and target.traits:
                n = rng.choice(sorted(target.traits))
                forbidden = rng.random() < 0.15
            else:
                n = rng.choice(COMPUTE_TRAITS + [SHARING])
                forbidden = rng.random() < 0.5
            if n in case.root_required | case.root_forbidden:
                continue
            (case.root_forbidden if forbidden else case.root_required).add(n)
            value.append(('!' if forbidden else '') + n)
        case.params.append(('root_required', ','.join(value)))
    if rng.random() < 0.15:
        case.limit = rng.randint(1, 6)
        case.params.append(('limit', str(case.limit)))
    case.defects = case.reference_defects(f)
    return case


# ---- comparing answers ------------------------------------------------------

def allocation_key(areq, with_mappings):
    allocs = areq['allocations']
    parts = tuple(sorted((u, rc, n) for u, r in allocs.items() for rc, n in r['resources'].items()))
    if not with_mappings:
        return parts
    return parts, tuple(sorted((s, tuple(sorted(us))) for s, us in areq.get('mappings', {}).items()))


def summaries_key(body):
    out = {}
    for u, s in body['provider_summaries'].items():
        out[u] = (tuple(sorted((rc, r['capacity'], r['used']) for rc, r in s['resources'].items())),
                  tuple(sorted(s.get('traits', []))), s.get('parent_provider_uuid'), s.get('root_provider_uuid'))
    return out


def candidate_problems(case, f, areq):
    """Why one allocation request is not a valid answer to the case (empty
    when it is valid)."""
    problems = []
    amounts = collections.Counter()
    used_by = collections.defaultdict(dict)
    for u, r in areq['allocations'].items():
        p = f.by_uuid.get(u)
        if p is None:
            return ['unknown provider %s' % u]
        for rc, n in r['resources'].items():
            amounts[rc] += n
            used_by[u][rc] = n
            inv = p.inventories.get(rc)
            if inv is None:
                problems.append('%s has no %s' % (p.name, rc))
            elif n > inv.max_unit or p.used[rc] + n > inv.capacity:
                problems.append('%s %s=%d exceeds max_unit %d or capacity %d-%d' % (
                    p.name, rc, n, inv.max_unit, inv.capacity, p.used[rc]))
    if amounts != case.totals():
        problems.append('amounts %s, request %s' % (dict(amounts), dict(case.totals())))
    providers = [f.by_uuid[u] for u in areq['allocations'] if u in f.by_uuid]
    roots = {p.root.uuid for p in providers if SHARING not in p.traits}
    if len(roots) > 1:
        problems.append('providers of several trees: %s' % sorted(p.name for p in providers))
    if not case.at_least(29):
        if len({p.root.uuid for p in providers}) != len(providers):
            problems.append('two providers of one tree before 1.29')
    if roots:
        anchor = roots.pop()
        for p in providers:
            if SHARING in p.traits and anchor not in f.sharing_anchor_roots(p):
                problems.append('sharing provider %s does not serve tree %s' % (p.name, f.by_uuid[anchor].name))
    mappings = areq.get('mappings')
    if mappings is None:
        return problems
    if set(mappings) != {g.suffix for g in case.groups}:
        problems.append('mappings for %s' % sorted(mappings))
        return problems
    granular_providers = []
    for g in case.groups:
        ps = [f.by_uuid[u] for u in mappings[g.suffix] if u in f.by_uuid]
        if g.suffix:
            if len(ps) != 1:
                problems.append('group %r mapped to %d providers' % (g.suffix, len(ps)))
                continue
            granular_providers.append(ps[0].uuid)
            if any(rc not in used_by[ps[0].uuid] for rc in g.resources):
                problems.append('group %r: %s does not give its classes' % (g.suffix, ps[0].name))
        traits = set().union(*(p.traits for p in ps)) if ps else set()
        if any(not (s & traits) for s in g.required) or any(g.forbidden & p.traits for p in ps):
            problems.append('group %r: traits of %s' % (g.suffix, [p.name for p in ps]))
        anchor_aggs = set().union(*(p.root.aggregates for p in providers if SHARING not in p.traits))
        for p in ps:
            # Lenient: an aggregate on the anchor root covers its tree for
            # the unsuffixed group; a granular group's provider itself must
            # avoid forbidden ones.
            aggs = p.aggregates | p.root.aggregates | anchor_aggs
            bad = p.aggregates if g.suffix else p.aggregates | anchor_aggs
            if any(not (s & aggs) for s in g.member_of) or g.forbidden_aggs & bad:
                problems.append('group %r: aggregates of %s' % (g.suffix, p.name))
    if case.policy == 'isolate' and len(set(granular_providers)) != len(granular_providers):
        problems.append('isolate broken: %s' % granular_providers)
    for subtree in case.same_subtrees:
        ps = {u for s in subtree for u in mappings.get(s, [])}
        ok = len(ps) <= 1 or any(all(top in {a.uuid for a in f.by_uuid[u].ancestors()} for u in ps) for top in ps)
        if not ok:
            problems.append('same_subtree %s broken' % subtree)
    return problems


def sums_up(case, areq):
    """Whether a candidate's amounts add up to the request (the reference's
    defect only ever inflates amounts, so one that adds up is untouched)."""
    got = collections.Counter()
    for r in areq['allocations'].values():
        got.update(r['resources'])
    return got == case.totals()


def error_of(body):
    """(code, detail) of an error answer, or the whole body if it is not
    Placement's error shape."""
    try:
        e = body['errors'][0]
        return e.get('code'), e['detail']
    except (KeyError, IndexError, TypeError):
        return body


def compare(case, f, answers, full=None):
    """Differences between the answers to one case (empty: agreed).
    `answers`: server name -> (status, body) from 'keelson', 'reference' and,
    for the defect's shapes, 'fixed'; `full`: the same without `limit`
    when it truncates."""
    (ks_status, ks_body), (_, ref_body) = answers['keelson'], answers['reference']
    for name, (status, body) in answers.items():
        if status != ks_status:
            return ['status: keelson %s, %s %s (%s / %s)' % (ks_status, name, status, str(ks_body)[:300],
                                                              str(body)[:300])]
    if ks_status != 200:
        ke, re_ = error_of(ks_body), error_of(ref_body)
        return [] if ke == re_ else ['error: keelson %r, reference %r' % (ke, re_)]
    diffs = []
    for a in ks_body['allocation_requests']:
        problems = candidate_problems(case, f, a)
        if problems:
            diffs.append('invalid keelson candidate %s: %s' % (describe(f, a), '; '.join(problems)))
            break
    if full is None:
        return diffs + compare_whole(case, f, {k: body for k, (_, body) in answers.items()})
    # `limit` truncated: the orders differ (the reference truncates a
    # hash-ordered list), so both must answer min(limit, all) candidates,
    # keelson's drawn from its full answer, with the summaries of exactly
    # the trees they use; the full answers are compared as usual.
    with_mappings = case.at_least(34)
    ks_full = full['keelson']
    ks_n, ref_n = len(ks_body['allocation_requests']), len(ref_body['allocation_requests'])
    ks_all, ref_all = len(ks_full['allocation_requests']), len(full['reference']['allocation_requests'])
    if ks_n != min(case.limit, ks_all) or ref_n != min(case.limit, ref_all):
        diffs.append('limit %d: keelson %d of %d, reference %d of %d' % (case.limit, ks_n, ks_all, ref_n, ref_all))
    limited = collections.Counter(allocation_key(a, with_mappings) for a in ks_body['allocation_requests'])
    whole = collections.Counter(allocation_key(a, with_mappings) for a in ks_full['allocation_requests'])
    if limited - whole:
        diffs.append('limited answer not within the full answer: %s' % [named(f, k) for k in list(limited - whole)[:2]])
    roots = {f.by_uuid[u].root.uuid for a in ks_body['allocation_requests'] for u in a['allocations']}
    want = {u: s for u, s in summaries_key(ks_full).items() if f.by_uuid[u].root.uuid in roots}
    got = summaries_key(ks_body)
    if got != want:
        diffs.append('limited summaries: %s, want %s' % (sorted(f.by_uuid[u].name for u in got),
                                                         sorted(f.by_uuid[u].name for u in want)))
    return diffs + compare_whole(case, f, full)


def compare_whole(case, f, bodies):
    """Complete (untruncated) answers: keelson's must equal the reference's,
    or for the defect's shapes the fixed reference's, as multisets, with
    equal summaries; for those shapes every candidate of the real reference
    that adds up must be in keelson's answer too."""
    with_mappings = case.at_least(34)
    ks_body = bodies['keelson']
    ks_c = collections.Counter(allocation_key(a, with_mappings) for a in ks_body['allocation_requests'])
    diffs = []
    if case.defects:
        real = [a for a in bodies['reference']['allocation_requests'] if sums_up(case, a)]
        missing = {allocation_key(a, with_mappings) for a in real} - set(ks_c)
        if missing:
            diffs.append('%s: %d of the reference\'s %d valid candidates not in keelson\'s %d: %s' % (
                '+'.join(case.defects), len(missing), len(real), len(ks_body['allocation_requests']),
                [named(f, k) for k in list(missing)[:2]]))
        other, label = bodies['fixed'], 'fixed reference'
    else:
        other, label = bodies['reference'], 'reference'
    other_c = collections.Counter(allocation_key(a, with_mappings) for a in other['allocation_requests'])
    if ks_c != other_c:
        only_k, only_r = ks_c - other_c, other_c - ks_c
        diffs.append('allocation requests differ: keelson %d, %s %d; only keelson (%d): %s; only %s (%d): %s' % (
            sum(ks_c.values()), label, sum(other_c.values()), sum(only_k.values()),
            [named(f, k) for k in list(only_k)[:3]], label, sum(only_r.values()), [named(f, k) for k in list(only_r)[:3]]))
    ks_s, other_s = summaries_key(ks_body), summaries_key(other)
    if ks_s != other_s:
        keys = sorted(set(ks_s) | set(other_s), key=lambda u: f.by_uuid[u].name if u in f.by_uuid else u)
        diff = [(f.by_uuid[u].name if u in f.by_uuid else u, ks_s.get(u), other_s.get(u)) for u in keys
                if ks_s.get(u) != other_s.get(u)]
        diffs.append('provider summaries differ (name, keelson, %s): %s' % (label, diff[:3]))
    return diffs


def named(f, key):
    """An allocation key with provider names, for messages."""
    def name(u):
        return f.by_uuid[u].name if u in f.by_uuid else u
    with_mappings = len(key) == 2 and all(isinstance(x, tuple) for x in key) and (not key[0] or isinstance(key[0][0], tuple))
    parts, maps = key if with_mappings else (key, ())
    return [(name(u), rc, n) for u, rc, n in parts], [(s, [name(u) for u in us]) for s, us in maps]


def describe(f, areq):
    return {f.by_uuid[u].name if u in f.by_uuid else u: r['resources'] for u, r in areq['allocations'].items()}


# ---- running ----------------------------------------------------------------

def reference_placement(procs, url, fixed=False):
    """The reference on `url` (started without waiting: see the test), with
    a fixed hash seed; `fixed`: with its three defects fixed (the project's
    tests/reference/placement/upstream_fixes.py, see its docstring), the
    oracle for the shapes they affect (`Case.reference_defects`)."""
    return ref_placement(procs, url, fix_upstream_defects=fixed, env={'PYTHONHASHSEED': HASHSEED}, wait=False)


def ask(base, case, limit=True):
    status, _, body = http('GET', base + '/allocation_candidates?' + case.query(limit), version=case.version)
    return status, body


def plan():
    """(base seed, [(fleet index, [request indices] or None for all)],
    requests per fleet) from the environment."""
    raw = os.environ.get('KEELSON_DIFF_SEED')
    n_fleets = max(5, -(-CASES // 100))
    per_fleet = -(-CASES // n_fleets)
    if not raw:
        return random.SystemRandom().randrange(1, 10 ** 9), [(i, None) for i in range(n_fleets)], per_fleet
    parts = raw.split('-')
    base = int(parts[0])
    if len(parts) == 1:
        return base, [(i, None) for i in range(n_fleets)], per_fleet
    return base, [(int(parts[1]), [int(parts[2])] if len(parts) > 2 else None)], per_fleet


def explain_problems(base, case, answer):
    """keelson's explanation of the case must name the providers and count
    of keelson's own answer (or give the same error)."""
    status, _, body = http('GET', base + '/keelson/v1/placement/explain?' + case.query(), version=case.version)
    real_status, real = answer
    if status != real_status:
        return ['explain answered %s, candidates %s' % (status, real_status)]
    if status != 200:
        return []
    used = set()
    for areq in real['allocation_requests']:
        used.update(areq['allocations'])
        for providers in areq.get('mappings', {}).values():
            used.update(providers)
    problems = []
    if set(body['providers_in_answer']) != used:
        problems.append('explain names providers %s, the answer %s' % (sorted(body['providers_in_answer']), sorted(used)))
    if body['allocation_requests'] != len(real['allocation_requests']):
        problems.append('explain counts %d candidates, the answer has %d' % (
            body['allocation_requests'], len(real['allocation_requests'])))
    return problems


def run_case(servers, case, f):
    names = ['keelson', 'reference'] + (['fixed'] if case.defects else [])
    answers = {n: ask(servers[n], case) for n in names}
    status, body = answers['reference']
    if status == 500 and 'InvalidTextRepresentation' in str(body):
        # The reference's third defect (see upstream_fixes.py), seen on
        # PostgreSQL only: the fixed reference is the oracle.
        case.defects = case.defects + ['forbidden-names']
        servers = dict(servers, reference=servers['fixed'])
        names = ['keelson', 'reference', 'fixed']
        answers = {n: ask(servers[n], case) for n in names}
    full = None
    if case.limit is not None and all(status == 200 for status, _ in answers.values()):
        whole = {n: ask(servers[n], case, limit=False) for n in names}
        if all(status == 200 for status, _ in whole.values()) and \
                max(len(body['allocation_requests']) for _, body in whole.values()) > case.limit:
            full = {n: body for n, (_, body) in whole.items()}
    diffs = compare(case, f, answers, full) + explain_problems(servers['keelson'], case, answers['keelson'])
    return diffs, answers['keelson']


@pytest.mark.parametrize('backend', DIFF_BACKENDS)
def test_candidates_match_the_reference(backend, procs, capsys):
    started = time.monotonic()
    base, fleets, per_fleet = plan()
    print('KEELSON_DIFF_SEED=%d (%d fleets x %d requests, reference PYTHONHASHSEED=%s) on %s' % (
        base, len(fleets), per_fleet, HASHSEED, backend))
    url = create_database(backend, 'cdiff')
    # The reference creates the schema; keelson and the fixed reference
    # start once it is there.
    ref, ref_proc = reference_placement(procs, url)
    wait_http(ref + '/', timeout=120, proc=ref_proc)
    fixed, fixed_proc = reference_placement(procs, url, fixed=True)
    ks = AllInOne(procs, url, env={'RUST_LOG': 'warn'}).url
    wait_http(fixed + '/', timeout=120, proc=fixed_proc)
    servers = {'keelson': ks, 'reference': ref, 'fixed': fixed}
    prepare_catalog(ks)
    failures, ran, nonempty, shapes = [], 0, 0, collections.Counter()
    # A few requests in flight, so that the servers overlap.
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        for fi, only in fleets:
            f = generate_fleet(random.Random('%d-%d' % (base, fi)), 'f%d' % fi)
            create_fleet(ks, f)
            cases = []
            for ri in (only if only is not None else range(per_fleet)):
                rng = random.Random('%d-%d-%d' % (base, fi, ri))
                cases.append(generate_case(rng, '%d-%d-%d' % (base, fi, ri), rng.choice(VERSIONS), f))
            for case, (diffs, (status, body)) in zip(cases, pool.map(lambda c: run_case(servers, c, f), cases)):
                ran += 1
                n = len(body['allocation_requests']) if status == 200 else -1
                nonempty += n > 0
                shapes['error' if status != 200 else 'empty' if not n else
                       '+'.join(case.defects) if case.defects else 'limit' if case.limit else 'plain'] += 1
                query = urllib.parse.unquote(case.query())
                print('case %s %s -> %s %s %s' % (case.id, case.version, status, n, query))
                if diffs:
                    failures.append('case %s (replay: KEELSON_DIFF_SEED=%s): GET /allocation_candidates?%s at %s'
                                    '\n    %s' % (case.id, case.id, query, case.version, '\n    '.join(diffs)))
            delete_fleet(ks, f)
    summary = '%d cases on %s in %.1fs (%s); seed %d' % (ran, backend, time.monotonic() - started, dict(shapes), base)
    print(summary)
    with capsys.disabled():
        print('\n' + summary)
    assert not failures, '%d of %d cases differ:\n%s' % (len(failures), ran, '\n'.join(failures[:15]))
    if '-' not in os.environ.get('KEELSON_DIFF_SEED', ''):
        assert nonempty > ran // 4, 'too few non-empty answers to mean much: %s' % summary
