#!/usr/bin/env python3
"""Side-by-side benchmark of GET /allocation_candidates (microversion 1.39):
keelson against the real Python Placement (openstack-placement 16.0.0,
tests/reference/placement) serving the same database in one run.

Scenarios (each on its own database, both servers started on it):

  flat     2,000 flat compute nodes (VCPU, MEMORY_MB) and 10 sharing storage
           providers (DISK_GB, MISC_SHARES_VIA_AGGREGATE), each sharing
           with 200 computes through an aggregate; half the computes hold
           an instance.  Request: VCPU:1, MEMORY_MB:1024, DISK_GB:100
           (2,000 candidates, each with a shared disk).
  numa     1,000 NUMA trees: a compute root (DISK_GB) with 2 NUMA nodes
           (VCPU, MEMORY_MB) with 2 PFs each (SRIOV_NET_VF,
           NET_BW_EGR_KILOBIT_PER_SEC, NET_BW_IGR_KILOBIT_PER_SEC; physnet
           traits); one instance per tree.  Request: 3 granular groups,
           group_policy=isolate (a compute group and two NIC groups on
           different physnets: 8 candidates per tree, 8,000 in all).
  wide     one root (VCPU, MEMORY_MB, DISK_GB) with 64 children of 8
           SRIOV_NET_VF each.  Request: the unsuffixed group and 4 granular
           groups of one VF, group_policy=isolate: 64x63x62x61 candidates,
           so both servers run with [placement] max_allocation_candidates
           (--wide-cap, default 1000), as operators do for such trees
           (upstream bug 2126751).

Nova's request shapes (--sizes 2000,10000: each fleet at each size, every
shape of a fleet measured in the same interleaved rounds, at microversion
1.36 and with the query strings Nova 34's scheduler builds: its report
client asks at 1.36, ResourceRequest.to_querystring sorts the parameters
and urlencodes them, the compute-status and owner pre-filters are always
on):

  nova     N flat computes (VCPU 64 at 4.0, MEMORY_MB 262,144 with 512
           reserved, DISK_GB 2,000), 4 instances each; every compute has
           the ~60 traits a libvirt x86 host reports and OWNER_NOVA,
           COMPUTE_STATUS_DISABLED on 1 in 100, HW_CPU_X86_AVX512F on a
           fifth, CUSTOM_BENCH_GOLD on a tenth; 5 availability-zone
           aggregates of a fifth each and a tenant aggregate of two fifths
           (two AZs).  Shapes (each also with limit=1000):
             plain     resources=DISK_GB:20,MEMORY_MB:2048,VCPU:2 (not Nova's)
             default   + root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED
             member_of default + member_of=in:<tenant> + member_of=in:<AZ 0>
                       (tenant isolation and the AZ pre-filter: a fifth)
             required  default + required=HW_CPU_X86_AVX512F,!CUSTOM_BENCH_GOLD
                       (flavor/image traits: a fifth)
             in_tree   default + in_tree=<one compute> (a targeted move)
             filtered  the issue's: required=HW_CPU_X86_AVX,!CUSTOM_BENCH_GOLD
                       and member_of=in:<AZ 0>,<AZ 1> (two fifths, less gold)
  qos      the nova fleet where every compute also has a NIC agent child
           with two PF grandchildren (NET_BW_EGR/IGR_KILOBIT_PER_SEC,
           CUSTOM_PHYSNET_PHYSNET0 or PHYSNET1, CUSTOM_VNIC_TYPE_DIRECT),
           as Neutron's SR-IOV agent reports them.  Shapes:
             default   as above (the trees are in the fleet now)
             qos       default + a port's granular group, suffixed by the
                       port's request-group uuid:
                       resources<uuid>=NET_BW_EGR_KILOBIT_PER_SEC:1000,
                       NET_BW_IGR_KILOBIT_PER_SEC:1000&required<uuid>=
                       CUSTOM_PHYSNET_PHYSNET0,CUSTOM_VNIC_TYPE_DIRECT

Fleets are written straight into Placement's schema (the schema the
reference creates, with its column rules: explicit ids, root and parent
ids, timestamps; custom traits through the API), which takes seconds where
the REST API would take minutes.

Requests are sent one at a time (latency, not throughput), interleaved:
rounds of --keelson-per-round requests to keelson and one to the reference,
until the reference has answered --requests times or --seconds are up (at
least 3 rounds), so that both see the same machine.  The output gives, per scenario, the candidate count (checked equal on
both servers), median and p99 latency, the ratio python/keelson of the
medians, and keelson's peak RSS (VmHWM of its process).

usage: tests/bench/candidates.py [--backend mysql|postgresql|sqlite]
          [--keelson-bin PATH] [--scenarios nova,qos,flat,numa,wide]
          [--sizes 2000,10000] [--shapes default,qos,...] [--rounds 15]
          [--requests 30] [--seconds 40] [--keelson-per-round 5]
          [--wide-cap 1000] [--json out.json]

--requests and --seconds bound the single-query scenarios (flat, numa,
wide); --rounds the Nova fleets' rounds (each round: --keelson-per-round
requests to keelson and one to the reference, for every shape in turn).

--keelson-bin defaults to $KEELSON_BIN (a release build for real numbers).
"""
import argparse
import datetime
import json
import os
import re
import statistics
import sys
import time
import urllib.parse
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import conftest  # noqa: E402  (shared helpers: processes, databases, ports)
from conftest import AllInOne, create_database, http  # noqa: E402

VERSION = '1.39'
SHARING = 'MISC_SHARES_VIA_AGGREGATE'


# ---- writing fleets straight into Placement's schema -------------------------

class Writer:
    """Bulk inserts into one Placement database through a DB-API driver."""

    def __init__(self, url):
        scheme, rest = url.split('://', 1)
        self.kind = scheme.split('+')[0]
        if self.kind == 'sqlite':
            import sqlite3
            self.conn = sqlite3.connect(rest[1:])
            self.conn.execute('PRAGMA foreign_keys = ON')
            self.mark = '?'
        else:
            p = urllib.parse.urlparse('x://' + rest)
            db = p.path.lstrip('/')
            if self.kind == 'mysql':
                import pymysql
                self.conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root',
                                            password=p.password or '', database=db, charset='utf8mb4')
            elif self.kind == 'postgresql':
                import psycopg2
                self.conn = psycopg2.connect(host=p.hostname, port=p.port or 5432, user=p.username or 'postgres',
                                             password=p.password or None, dbname=db)
            else:
                raise ValueError(url)
            self.mark = '%s'
        self.now = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S')
        self.next_id = {}

    def one(self, sql, params=()):
        cur = self.conn.cursor()
        cur.execute(sql.replace('?', self.mark), params)
        row = cur.fetchone()
        cur.close()
        return row

    def ids(self, table, names):
        """name -> id for resource_classes / traits."""
        cur = self.conn.cursor()
        cur.execute('SELECT id, name FROM %s' % table)
        found = {name: i for i, name in cur.fetchall()}
        cur.close()
        missing = [n for n in names if n not in found]
        if missing:
            raise RuntimeError('%s missing from %s' % (missing, table))
        return {n: found[n] for n in names}

    def new_ids(self, table, count):
        """`count` fresh ids for `table` (explicit ids let one pass write
        parents, roots and children)."""
        if table not in self.next_id:
            self.next_id[table] = (self.one('SELECT MAX(id) FROM %s' % table)[0] or 0) + 1
        start = self.next_id[table]
        self.next_id[table] += count
        return range(start, start + count)

    def insert(self, table, columns, rows, chunk=2000):
        if not rows:
            return
        sql = 'INSERT INTO %s (%s, created_at) VALUES (%s)' % (
            table, ', '.join(columns), ', '.join([self.mark] * (len(columns) + 1)))
        cur = self.conn.cursor()
        for i in range(0, len(rows), chunk):
            cur.executemany(sql, [tuple(r) + (self.now,) for r in rows[i:i + chunk]])
        cur.close()

    def commit(self):
        if self.kind == 'postgresql':
            # Explicit ids do not advance the sequences; later API writes
            # must not collide with them.
            cur = self.conn.cursor()
            for table in self.next_id:
                cur.execute("SELECT setval(pg_get_serial_sequence('%s', 'id'), (SELECT MAX(id) FROM %s))" % (table, table))
            cur.close()
        self.conn.commit()

    def close(self):
        self.conn.close()


class Fleet:
    """Providers and their records, written in one go by `write`."""

    def __init__(self, w, classes, traits):
        self.w = w
        self.class_ids = w.ids('resource_classes', classes)
        self.trait_ids = w.ids('traits', traits)
        self.providers, self.inventories, self.traits, self.aggregates, self.members = [], [], [], [], []
        self.allocations, self.consumers = [], []
        self.project = self.user = None

    def provider(self, name, parent=None, root=None):
        (pid,) = self.w.new_ids('resource_providers', 1)
        self.providers.append((pid, str(uuid.uuid4()), name, 1, root if root is not None else pid, parent))
        return pid

    def inventory(self, pid, rc, total, reserved=0, max_unit=None, ratio=1.0):
        self.inventories.append((pid, self.class_ids[rc], total, reserved, 1, max_unit or total, 1, ratio))

    def trait(self, pid, name):
        self.traits.append((self.trait_ids[name], pid))

    def aggregate(self):
        (aid,) = self.w.new_ids('placement_aggregates', 1)
        self.aggregates.append((aid, str(uuid.uuid4())))
        return aid

    def aggregate_uuid(self, aid):
        return next(u for a, u in self.aggregates if a == aid)

    def uuid_of(self, pid):
        return next(p[1] for p in self.providers if p[0] == pid)

    def member(self, pid, aid):
        self.members.append((pid, aid))

    def instance(self, parts):
        """One consumer using {provider id: {class: amount}}."""
        if self.project is None:
            (self.project,) = self.w.new_ids('projects', 1)
            (self.user,) = self.w.new_ids('users', 1)
        consumer = str(uuid.uuid4())
        (cid,) = self.w.new_ids('consumers', 1)
        self.consumers.append((cid, consumer, self.project, self.user, 1))
        for pid, resources in parts.items():
            for rc, used in resources.items():
                self.allocations.append((pid, consumer, self.class_ids[rc], used))

    def write(self):
        w = self.w
        # Parents before children: providers are listed in creation order.
        w.insert('resource_providers', ['id', 'uuid', 'name', 'generation', 'root_provider_id', 'parent_provider_id'],
                 self.providers)
        w.insert('inventories', ['resource_provider_id', 'resource_class_id', 'total', 'reserved', 'min_unit', 'max_unit',
                                 'step_size', 'allocation_ratio'], self.inventories)
        w.insert('resource_provider_traits', ['trait_id', 'resource_provider_id'], self.traits)
        w.insert('placement_aggregates', ['id', 'uuid'], self.aggregates)
        w.insert('resource_provider_aggregates', ['resource_provider_id', 'aggregate_id'], self.members)
        if self.consumers:
            w.insert('projects', ['id', 'external_id'], [(self.project, 'bench-project')])
            w.insert('users', ['id', 'external_id'], [(self.user, 'bench-user')])
            w.insert('consumers', ['id', 'uuid', 'project_id', 'user_id', 'generation'], self.consumers)
            w.insert('allocations', ['resource_provider_id', 'consumer_id', 'resource_class_id', 'used'], self.allocations)
        w.commit()
        return len(self.providers)


def load_flat(w):
    f = Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB'], [SHARING, 'STORAGE_DISK_SSD', 'HW_CPU_X86_AVX2'])
    aggs = [f.aggregate() for _ in range(10)]
    for i, agg in enumerate(aggs):
        ss = f.provider('bench-ss%d' % i)
        f.inventory(ss, 'DISK_GB', 100000, reserved=100)
        f.trait(ss, SHARING)
        f.trait(ss, 'STORAGE_DISK_SSD')
        f.member(ss, agg)
    for i in range(2000):
        cn = f.provider('bench-cn%d' % i)
        f.inventory(cn, 'VCPU', 64, ratio=4.0)
        f.inventory(cn, 'MEMORY_MB', 262144, reserved=512, ratio=1.5)
        f.trait(cn, 'HW_CPU_X86_AVX2')
        f.member(cn, aggs[i % 10])
        if i % 2:
            f.instance({cn: {'VCPU': 4, 'MEMORY_MB': 8192}})
    return f.write(), 'resources=VCPU:1,MEMORY_MB:1024,DISK_GB:100', 2000


def load_numa(w):
    bw = ['NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC']
    f = Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB', 'SRIOV_NET_VF'] + bw,
              ['HW_NUMA_ROOT', 'CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B', 'HW_NIC_SRIOV'])
    for i in range(1000):
        root = f.provider('bench-cn%d' % i)
        f.inventory(root, 'DISK_GB', 2000)
        numas = []
        for n in range(2):
            numa = f.provider('bench-cn%d-numa%d' % (i, n), parent=root, root=root)
            numas.append(numa)
            f.inventory(numa, 'VCPU', 32, ratio=2.0)
            f.inventory(numa, 'MEMORY_MB', 131072)
            f.trait(numa, 'HW_NUMA_ROOT')
            for k, physnet in enumerate(('CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B')):
                pf = f.provider('bench-cn%d-numa%d-pf%d' % (i, n, k), parent=numa, root=root)
                f.inventory(pf, 'SRIOV_NET_VF', 16)
                for rc in bw:
                    f.inventory(pf, rc, 10000000)
                f.trait(pf, physnet)
                f.trait(pf, 'HW_NIC_SRIOV')
        f.instance({numas[0]: {'VCPU': 4, 'MEMORY_MB': 8192}, root: {'DISK_GB': 40}})
    query = ('resources_COMPUTE=VCPU:2,MEMORY_MB:2048'
             '&resources_NET1=SRIOV_NET_VF:1,NET_BW_EGR_KILOBIT_PER_SEC:1000&required_NET1=CUSTOM_PHYSNET_A'
             '&resources_NET2=SRIOV_NET_VF:1,NET_BW_EGR_KILOBIT_PER_SEC:1000&required_NET2=CUSTOM_PHYSNET_B'
             '&group_policy=isolate')
    return f.write(), query, 8000


def load_wide(w, cap):
    f = Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB', 'SRIOV_NET_VF'], [])
    root = f.provider('bench-wide')
    f.inventory(root, 'VCPU', 128)
    f.inventory(root, 'MEMORY_MB', 524288)
    f.inventory(root, 'DISK_GB', 4000)
    for j in range(64):
        f.inventory(f.provider('bench-wide-pf%d' % j, parent=root, root=root), 'SRIOV_NET_VF', 8)
    query = 'resources=VCPU:2,MEMORY_MB:2048,DISK_GB:20&' + '&'.join(
        'resources%d=SRIOV_NET_VF:1' % g for g in range(1, 5)) + '&group_policy=isolate'
    return f.write(), query, cap


# What the libvirt driver reports for a typical x86 host (nova-compute's
# capability traits), all standard traits of os-traits.
LIBVIRT_TRAITS = [
    'COMPUTE_NODE', 'COMPUTE_NET_ATTACH_INTERFACE', 'COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG',
    'COMPUTE_VOLUME_ATTACH_WITH_TAG', 'COMPUTE_VOLUME_EXTEND', 'COMPUTE_VOLUME_MULTI_ATTACH', 'COMPUTE_DEVICE_TAGGING',
    'COMPUTE_TRUSTED_CERTS', 'COMPUTE_IMAGE_TYPE_QCOW2', 'COMPUTE_IMAGE_TYPE_RAW', 'COMPUTE_IMAGE_TYPE_ISO',
    'COMPUTE_IMAGE_TYPE_AMI', 'COMPUTE_IMAGE_TYPE_ARI', 'COMPUTE_IMAGE_TYPE_AKI', 'COMPUTE_RESCUE_BFV',
    'COMPUTE_ACCELERATORS', 'COMPUTE_SOCKET_PCI_NUMA_AFFINITY', 'COMPUTE_STORAGE_BUS_VIRTIO',
    'COMPUTE_STORAGE_BUS_SCSI', 'COMPUTE_STORAGE_BUS_SATA', 'COMPUTE_STORAGE_BUS_IDE', 'COMPUTE_STORAGE_BUS_USB',
    'COMPUTE_STORAGE_BUS_FDC', 'COMPUTE_GRAPHICS_MODEL_VIRTIO', 'COMPUTE_GRAPHICS_MODEL_VGA',
    'COMPUTE_GRAPHICS_MODEL_CIRRUS', 'COMPUTE_GRAPHICS_MODEL_BOCHS', 'COMPUTE_GRAPHICS_MODEL_NONE',
    'COMPUTE_NET_VIF_MODEL_VIRTIO', 'COMPUTE_NET_VIF_MODEL_E1000', 'COMPUTE_NET_VIF_MODEL_E1000E',
    'COMPUTE_NET_VIF_MODEL_RTL8139', 'COMPUTE_NET_VIF_MODEL_NE2K_PCI', 'COMPUTE_NET_VIF_MODEL_PCNET',
    'COMPUTE_NET_VIF_MODEL_SPAPR_VLAN', 'COMPUTE_NET_VIF_MODEL_VMXNET3', 'COMPUTE_VIOMMU_MODEL_INTEL',
    'COMPUTE_VIOMMU_MODEL_VIRTIO', 'COMPUTE_VIOMMU_MODEL_AUTO', 'COMPUTE_SECURITY_UEFI_SECURE_BOOT',
    'COMPUTE_SECURITY_TPM_2_0', 'COMPUTE_ADDRESS_SPACE_PASSTHROUGH', 'COMPUTE_ADDRESS_SPACE_EMULATED',
    'COMPUTE_MEM_BACKING_FILE', 'COMPUTE_ARCH_X86_64', 'COMPUTE_NET_VIRTIO_PACKED', 'HW_ARCH_X86_64',
    'HW_CPU_X86_SSE', 'HW_CPU_X86_SSE2', 'HW_CPU_X86_SSE41', 'HW_CPU_X86_SSE42', 'HW_CPU_X86_SSSE3',
    'HW_CPU_X86_AVX', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_AESNI', 'HW_CPU_X86_F16C', 'HW_CPU_X86_FMA3',
    'HW_CPU_X86_BMI', 'HW_CPU_X86_BMI2', 'HW_CPU_X86_CLMUL', 'HW_CPU_X86_MMX', 'HW_CPU_X86_SVM', 'HW_CPU_X86_ABM',
    'OWNER_NOVA',
]
NOVA_CUSTOM_TRAITS = ['CUSTOM_BENCH_GOLD', 'CUSTOM_PHYSNET_PHYSNET0', 'CUSTOM_PHYSNET_PHYSNET1',
                      'CUSTOM_VNIC_TYPE_DIRECT']
NOVA_VERSION = '1.36'
# Nova's compute-status pre-filter (always on) and, once every compute runs
# Nova 34, its owner pre-filter.
NOVA_ROOT_REQUIRED = ('root_required', 'OWNER_NOVA,!COMPUTE_STATUS_DISABLED')
# The flavor: 2 VCPU, 2 GiB, a 20 GB root disk.
NOVA_FLAVOR = ('resources', 'DISK_GB:20,MEMORY_MB:2048,VCPU:2')
NOVA_LIMIT = ('limit', 1000)


def nova_query(*params):
    """As ResourceRequest.to_querystring writes it: sorted, urlencoded."""
    return urllib.parse.urlencode(sorted(params))


def load_nova(w, n, qos):
    """The Nova fleet of `n` computes (module docstring), with the PF trees
    when `qos`: (providers written, [(shape, query, expected candidates)])."""
    bw = ['NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC']
    f = Fleet(w, ['VCPU', 'MEMORY_MB', 'DISK_GB'] + bw,
              LIBVIRT_TRAITS + ['COMPUTE_STATUS_DISABLED', 'HW_CPU_X86_AVX512F'] + NOVA_CUSTOM_TRAITS)
    azs = [f.aggregate() for _ in range(5)]
    tenant = f.aggregate()
    disabled = lambda i: i % 100 == 7  # noqa: E731
    avx512 = lambda i: i % 5 == 1  # noqa: E731
    gold = lambda i: i % 10 == 3  # noqa: E731
    computes = []
    for i in range(n):
        cn = f.provider('bench-cn%d' % i)
        computes.append(cn)
        f.inventory(cn, 'VCPU', 64, max_unit=64, ratio=4.0)
        f.inventory(cn, 'MEMORY_MB', 262144, reserved=512, ratio=1.0)
        f.inventory(cn, 'DISK_GB', 2000)
        for t in LIBVIRT_TRAITS:
            f.trait(cn, t)
        if disabled(i):
            f.trait(cn, 'COMPUTE_STATUS_DISABLED')
        if avx512(i):
            f.trait(cn, 'HW_CPU_X86_AVX512F')
        if gold(i):
            f.trait(cn, 'CUSTOM_BENCH_GOLD')
        f.member(cn, azs[i % 5])
        if i % 5 in (0, 1):
            f.member(cn, tenant)
        for k in range(4):
            f.instance({cn: {'VCPU': 2 + 2 * (k % 2), 'MEMORY_MB': 4096, 'DISK_GB': 40}})
        if qos:
            agent = f.provider('bench-cn%d:NIC Switch agent' % i, parent=cn, root=cn)
            f.trait(agent, 'CUSTOM_VNIC_TYPE_DIRECT')
            for k, physnet in enumerate(('CUSTOM_PHYSNET_PHYSNET0', 'CUSTOM_PHYSNET_PHYSNET1')):
                pf = f.provider('bench-cn%d:NIC Switch agent:ens%d' % (i, k), parent=agent, root=cn)
                for rc in bw:
                    f.inventory(pf, rc, 10000000)
                f.trait(pf, physnet)
                f.trait(pf, 'CUSTOM_VNIC_TYPE_DIRECT')
    providers = f.write()
    up = lambda i: not disabled(i)  # noqa: E731
    count = lambda keep: min(1000, sum(1 for i in range(n) if keep(i)))  # noqa: E731
    default = [NOVA_FLAVOR, NOVA_LIMIT, NOVA_ROOT_REQUIRED]
    if qos:
        port = str(uuid.uuid4())
        return providers, [
            ('default', nova_query(*default), count(up)),
            ('qos', nova_query(*default, ('resources' + port, ','.join('%s:1000' % rc for rc in bw)),
                               ('required' + port, 'CUSTOM_PHYSNET_PHYSNET0,CUSTOM_VNIC_TYPE_DIRECT')), count(up)),
        ]
    az0, az1, tenant_uuid = f.aggregate_uuid(azs[0]), f.aggregate_uuid(azs[1]), f.aggregate_uuid(tenant)
    target = 17
    return providers, [
        ('plain', nova_query(NOVA_FLAVOR, NOVA_LIMIT), count(lambda i: True)),
        ('default', nova_query(*default), count(up)),
        ('member_of', nova_query(*default, ('member_of', 'in:' + tenant_uuid), ('member_of', 'in:' + az0)),
         count(lambda i: up(i) and i % 5 == 0)),
        ('required', nova_query(*default, ('required', 'HW_CPU_X86_AVX512F,!CUSTOM_BENCH_GOLD')),
         count(lambda i: up(i) and avx512(i) and not gold(i))),
        ('in_tree', nova_query(*default, ('in_tree', f.uuid_of(computes[target]))), count(lambda i: i == target)),
        ('filtered', nova_query(NOVA_FLAVOR, NOVA_LIMIT, ('required', 'HW_CPU_X86_AVX,!CUSTOM_BENCH_GOLD'),
                                ('member_of', 'in:' + ','.join(sorted([az0, az1])))),
         count(lambda i: i % 5 in (0, 1) and not gold(i))),
    ]


NOVA_FLEETS = {
    'nova': ('Nova fleet, flat computes', False),
    'qos': ('Nova fleet, computes with PF trees', True),
}


SCENARIOS = {
    'flat': ('(a) 2,000 flat computes + 10 sharing storage', load_flat),
    'numa': ('(b) 1,000 NUMA trees, 3 groups, isolate', load_numa),
    'wide': ('(c) wide tree, 64 children, 4 groups', load_wide),
}


# ---- servers and measurements ------------------------------------------------

def python_placement(procs, url, extra):
    """The reference served by cheroot (a production-grade threaded WSGI
    server) on the same database; it creates the schema."""
    sections = {'placement_database': {'connection': url}, 'api': {'auth_strategy': 'noauth2'}}
    for g, o in extra.items():
        sections.setdefault(g, {}).update(o)
    return conftest.ref_placement(procs, conf=sections, server='cheroot', threads=4, timeout=180)


def get(base, query, version=VERSION):
    """(seconds, candidate count, provider summaries count) of one request."""
    req = urllib.request.Request(base + '/allocation_candidates?' + query, headers={
        'accept': 'application/json', 'openstack-api-version': 'placement ' + version, 'x-auth-token': 'admin'})
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read()
    took = time.perf_counter() - started
    body = json.loads(raw)
    return took, len(body['allocation_requests']), len(body['provider_summaries'])


def summary(times, counts):
    times = sorted(times)
    p99 = times[min(len(times) - 1, max(0, int(round(0.99 * len(times))) - 1))]
    return {'n': len(times), 'median_ms': statistics.median(times) * 1000, 'p99_ms': p99 * 1000,
            'answers': sorted(counts)}


def measure_side_by_side(keelson, python, query, max_requests, seconds, min_requests, per_round):
    """Rounds of `per_round` requests to keelson and one to the reference,
    until the reference has answered `max_requests` times or the time is up
    (at least `min_requests`). Interleaving puts both servers under the
    same conditions (the database's background work after the load, the
    rest of the machine); measured one after the other, keelson's short
    burst ran right after the load while the reference had the quieter
    machine."""
    get(keelson, query)  # warm-up (connections, caches of the process)
    get(python, query)
    runs = {keelson: ([], set()), python: ([], set())}

    def one(base):
        took, n, summaries = get(base, query)
        runs[base][0].append(took)
        runs[base][1].add((n, summaries))

    deadline = time.monotonic() + seconds
    while len(runs[python][0]) < max_requests and (len(runs[python][0]) < min_requests or time.monotonic() < deadline):
        for _ in range(per_round):
            one(keelson)
        one(python)
    return summary(*runs[keelson]), summary(*runs[python])


class PhaseLog:
    """keelson's per-request phase timings (debug lines of the target
    keelson_candidates::phases: `name=1.23ms ...`), read from its log as
    each request is answered."""

    def __init__(self, proc):
        self.path = proc.log_path
        self.proc = proc
        self.offset = os.path.getsize(self.path)

    def take(self):
        """{phase: ms} of the requests answered since the last call (the
        last of them)."""
        self.proc.log.flush()
        with open(self.path, 'rb') as f:
            f.seek(self.offset)
            new = f.read()
        self.offset += len(new)
        found = {}
        for line in new.decode('utf-8', 'replace').splitlines():
            if 'keelson_candidates::phases' in line:
                found = {m.group(1): float(m.group(2)) for m in re.finditer(r'(\w+)=([\d.]+)ms', line)}
        return found


def measure_shapes(keelson, python, shapes, rounds, per_round, phase_log=None):
    """Every shape of one fleet in the same rounds: per round and shape,
    `per_round` requests to keelson then one to the reference, so that all
    shapes and both servers share the machine's state. Answers
    {shape: (keelson summary, reference summary)}."""
    runs = {}
    phases = {}
    for name, query, _ in shapes:
        get(keelson, query, NOVA_VERSION)  # warm-up
        get(python, query, NOVA_VERSION)
        runs[name] = {keelson: ([], set()), python: ([], set())}
        phases[name] = {}
    if phase_log is not None:
        phase_log.take()

    def one(name, query, base):
        took, n, summaries = get(base, query, NOVA_VERSION)
        runs[name][base][0].append(took)
        runs[name][base][1].add((n, summaries))
        if base == keelson and phase_log is not None:
            for phase, ms in phase_log.take().items():
                phases[name].setdefault(phase, []).append(ms)

    for _ in range(rounds):
        for name, query, _ in shapes:
            for _ in range(per_round):
                one(name, query, keelson)
            one(name, query, python)
    return {name: (summary(*r[keelson]), summary(*r[python]),
                   {phase: statistics.median(ms) for phase, ms in phases[name].items()})
            for name, r in runs.items()}


def run_nova(key, size, args):
    """One Nova fleet at one size, every selected shape measured."""
    title, qos = NOVA_FLEETS[key]
    procs = []
    url = None
    try:
        url = create_database(args.backend, 'bench_nova_%s_%d' % (key, size))
        py, py_proc = python_placement(procs, url, {})
        log = 'warn,keelson_candidates::phases=debug' if args.phases else 'warn'
        ks_server = AllInOne(procs, url, env={'RUST_LOG': log})
        ks = ks_server.url
        for t in NOVA_CUSTOM_TRAITS:
            assert http('PUT', ks + '/traits/' + t, version='1.6')[0] in (201, 204)
        started = time.monotonic()
        w = Writer(url)
        providers, shapes = load_nova(w, size, qos)
        w.close()
        if args.shapes:
            wanted = args.shapes.split(',')
            shapes = [s for s in shapes if s[0] in wanted]
        print('%s, %d computes: %d providers written in %.1fs' % (title, size, providers, time.monotonic() - started),
              flush=True)
        for name, query, expected in shapes:
            print('  %-10s GET /allocation_candidates?%s (%d candidates)' % (name, query, expected), flush=True)
        load_before = os.getloadavg()
        measured = measure_shapes(ks, py, shapes, args.rounds, args.keelson_per_round,
                                  PhaseLog(ks_server.proc) if args.phases else None)
        load_after = os.getloadavg()
        results = {}
        for name, query, expected in shapes:
            k, p, phases = measured[name]
            result = {'title': '%s %d: %s' % (key, size, name), 'fleet': key, 'size': size, 'shape': name,
                      'providers': providers, 'query': query, 'keelson': k, 'python': p,
                      'ratio_median': p['median_ms'] / k['median_ms'], 'ratio_p99': p['p99_ms'] / k['p99_ms'],
                      'keelson_peak_rss_mib': peak_rss_mib(ks_server.proc.p.pid),
                      'python_peak_rss_mib': peak_rss_mib(py_proc.p.pid),
                      'loadavg_before': load_before, 'loadavg_after': load_after}
            if phases:
                result['keelson_phases_median_ms'] = phases
            if k['answers'] != p['answers'] or k['answers'][0][0] != expected:
                result['warning'] = 'answers differ: keelson %s, python %s, expected %d candidates' % (
                    k['answers'], p['answers'], expected)
            print('  %-10s keelson median %.1f ms, p99 %.1f ms; python median %.1f ms, p99 %.1f ms; %.1fx; %s' % (
                name, k['median_ms'], k['p99_ms'], p['median_ms'], p['p99_ms'], result['ratio_median'],
                result.get('warning', k['answers'])), flush=True)
            if phases:
                print('  %-10s keelson phases (median ms): %s' % (
                    '', ' '.join('%s=%.2f' % kv for kv in phases.items())), flush=True)
            results['%s-%d-%s' % (key, size, name)] = result
        print('  load average %.2f %.2f %.2f before, %.2f %.2f %.2f after' % (load_before + load_after), flush=True)
        return results
    finally:
        for proc in procs:
            proc.stop()
        if url is not None:
            drop_database(url)


def peak_rss_mib(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) / 1024.0
    return float('nan')


def drop_database(url):
    """Drops a MariaDB or PostgreSQL benchmark database (SQLite files live
    in a temporary directory)."""
    scheme, rest = url.split('://', 1)
    kind = scheme.split('+')[0]
    p = urllib.parse.urlparse('x://' + rest)
    name = p.path.lstrip('/')
    if kind == 'mysql':
        import pymysql
        conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username or 'root', password=p.password or '')
        with conn.cursor() as cur:
            cur.execute('DROP DATABASE IF EXISTS `%s`' % name)
        conn.close()
    elif kind == 'postgresql':
        import psycopg2
        conn = psycopg2.connect(host=p.hostname, port=p.port or 5432, user=p.username or 'postgres',
                                password=p.password or None, dbname='postgres')
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        conn.close()


def run_scenario(key, args):
    title, loader = SCENARIOS[key]
    procs = []
    url = None
    try:
        url = create_database(args.backend, 'bench_cand_%s' % key)
        extra = {'placement': {'max_allocation_candidates': args.wide_cap}} if key == 'wide' else {}
        py, py_proc = python_placement(procs, url, extra)
        ks_server = AllInOne(procs, url, extra=extra, env={'RUST_LOG': 'warn'})
        ks = ks_server.url
        # Custom traits through the API (the reference's trait cache reads
        # them back on a miss); everything else straight into the tables.
        for t in ('CUSTOM_PHYSNET_A', 'CUSTOM_PHYSNET_B'):
            assert http('PUT', ks + '/traits/' + t, version='1.6')[0] in (201, 204)
        started = time.monotonic()
        w = Writer(url)
        providers, query, expected = loader(w, args.wide_cap) if key == 'wide' else loader(w)
        w.close()
        loaded = time.monotonic() - started
        print('%s: %d providers written in %.1fs; GET /allocation_candidates?%s' % (title, providers, loaded, query),
              flush=True)
        k, p = measure_side_by_side(ks, py, query, args.requests, args.seconds, 3, args.keelson_per_round)
        rss = peak_rss_mib(ks_server.proc.p.pid)
        py_rss = peak_rss_mib(py_proc.p.pid)
        result = {'title': title, 'providers': providers, 'query': query, 'keelson': k, 'python': p,
                  'ratio_median': p['median_ms'] / k['median_ms'], 'ratio_p99': p['p99_ms'] / k['p99_ms'],
                  'keelson_peak_rss_mib': rss, 'python_peak_rss_mib': py_rss}
        if k['answers'] != p['answers'] or k['answers'][0][0] != expected:
            result['warning'] = 'answers differ: keelson %s, python %s, expected %d candidates' % (
                k['answers'], p['answers'], expected)
        print('  keelson: %d requests, median %.1f ms, p99 %.1f ms, %s candidates/summaries; python: %d requests, '
              'median %.1f ms, p99 %.1f ms, %s' % (k['n'], k['median_ms'], k['p99_ms'], k['answers'], p['n'],
                                                   p['median_ms'], p['p99_ms'], p['answers']), flush=True)
        return result
    finally:
        for proc in procs:
            proc.stop()
        if url is not None:
            drop_database(url)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--backend', default='mysql', choices=['mysql', 'postgresql', 'sqlite'])
    ap.add_argument('--keelson-bin', default=os.environ.get('KEELSON_BIN'))
    ap.add_argument('--scenarios', default='nova,qos',
                    help='Nova fleets (%s) and single-query scenarios (%s)' % (
                        ','.join(NOVA_FLEETS), ','.join(SCENARIOS)))
    ap.add_argument('--sizes', default='2000,10000', help='compute counts of the Nova fleets')
    ap.add_argument('--shapes', help='only these shapes of the Nova fleets (default: all)')
    ap.add_argument('--phases', action='store_true',
                    help="log keelson's per-request phases (debug) and print their medians per shape")
    ap.add_argument('--rounds', type=int, default=15, help='interleaved rounds per Nova fleet')
    ap.add_argument('--requests', type=int, default=30, help='most requests per server and scenario')
    ap.add_argument('--seconds', type=float, default=40, help='time budget per scenario')
    ap.add_argument('--keelson-per-round', type=int, default=5,
                    help='keelson requests per reference request (the two are interleaved)')
    ap.add_argument('--wide-cap', type=int, default=1000, help='max_allocation_candidates for the wide tree')
    ap.add_argument('--json')
    args = ap.parse_args()
    if not args.keelson_bin:
        sys.exit('--keelson-bin or $KEELSON_BIN is required')
    os.environ['KEELSON_BIN'] = os.path.abspath(args.keelson_bin)
    started = time.monotonic()
    results = {}
    for key in args.scenarios.split(','):
        if key in NOVA_FLEETS:
            for size in [int(x) for x in args.sizes.split(',')]:
                results.update(run_nova(key, size, args))
        else:
            results[key] = run_scenario(key, args)
    print('\nGET /allocation_candidates (%s for the Nova fleets, %s otherwise) on %s, keelson %s, %d CPUs '
          '(%.0fs in all)' % (NOVA_VERSION, VERSION, args.backend, args.keelson_bin, os.cpu_count(),
                              time.monotonic() - started))
    print('%-44s %12s %12s %12s %12s %8s %8s %10s' % ('scenario', 'k p50 ms', 'py p50 ms', 'k p99 ms', 'py p99 ms',
                                                     'p50 x', 'p99 x', 'k RSS MiB'))
    for r in results.values():
        print('%-44s %12.1f %12.1f %12.1f %12.1f %7.1fx %7.1fx %10.1f' % (
            r['title'], r['keelson']['median_ms'], r['python']['median_ms'], r['keelson']['p99_ms'],
            r['python']['p99_ms'], r['ratio_median'], r['ratio_p99'], r['keelson_peak_rss_mib']))
        if 'warning' in r:
            print('  warning: ' + r['warning'])
    print('(x: python latency / keelson latency; k RSS: keelson peak resident memory, VmHWM)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'meta': {'backend': args.backend, 'keelson_bin': args.keelson_bin, 'cpus': os.cpu_count(),
                                'version': VERSION}, 'results': results}, f, indent=2)


if __name__ == '__main__':
    main()
