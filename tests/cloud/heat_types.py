#!/usr/bin/env python3
"""Heat's resource types that act on OpenStack services, on the live cloud:
the same stacks against keelson and against the real Heat 27.0.1, each
object checked in its service. ./heat-types is the entry point.

  heat_types.py [--orchestration keelson|heat ...] [--only FAMILY ...] [--keep-logs DIR]

Each --orchestration starts a cloud of its own (cloud.py: Keystone,
Glance, real Neutron, Nova, Cinder; orchestration.py) and runs, per family
of types, one stack (as the user heat-tester in project demo, or as the
cloud's admin for the admin types):

  create   the stack; every object exists in its service with the
           properties the template gave;
  update   a new template changing only update_allowed properties: the
           same objects (same ids), changed in the service;
  replace  a new template changing a property that is not update_allowed:
           a new object with the new value, the old one gone;
  delete   the stack; every object any step made is gone.

It prints one line per type and step

  <kind> PASS|FAIL <type> <step>[: what differed or the status reason]

then, for each type and step, whether both kinds agree. OS::Glance::
WebImage imports a small file served over HTTP on loopback (Glance's
import filter allows 127.0.0.1 and any port for this run).

The `swift` family (the cloud runs Swift: object_store.py) makes an
OS::Swift::Container (container and account metadata, PurgeOnDelete) and
an OS::Heat::SwiftSignalHandle with an OS::Heat::SwiftSignal the create
waits for: while the stack is in progress the family reads the handle's
`endpoint` from the resource's `attributes` and PUTs a signal to it with
no token; the signal's `data` output must then be {"1": "hello"}. Before
the delete an object goes into the container (the delete must purge it);
after it the container and the handle's (the stack's) container are
gone. `--only swift` at 2026-12-07 (keelson 03:58 UTC, the real Heat
27.0.1 04:16 UTC): all 12 steps passed on both sides (create, the no-op
update, the container's replacement, delete), with the same Swift calls
for the handle's delete and the container's purge.

The `ec2` family (AWS::EC2::Instance on SubnetId) and the `ec2attach`
family (AWS::EC2::Instance on NetworkInterfaces, OS::Cinder::
VolumeAttachment, OS::Neutron::FloatingIPAssociation): see their classes.
`--only ec2 --only ec2attach` at 2026-12-07 14:18-14:30 UTC: keelson all
16 steps; the real Heat 27.0.1 14, failing `ec2`'s replace and delete
(its delete removes the port it made on SubnetId before the server, which
Neutron's default policy refuses a project member while the port is bound:
`Forbidden: rule:delete_port is disallowed by policy`). Both sides gave
the same attributes (PrivateIp = PublicIp = PrivateDnsName = PublicDnsName
= the fixed address, AvailabilityZone `nova`) and Nova named the attached
volume /dev/sdb on both (the template asks /dev/vdb). Since `ec2`'s
update also moves the instance to a second subnet, `--only ec2 --only
port` at 2026-12-07 20:39-20:44 UTC: keelson all 4 `ec2` steps, the real
Heat only the create (its update deletes the old port while it is bound:
the same `Forbidden`); `port`, with Heat's five QoS types, 18 of 24 steps
on both sides (the replace step fails on both: Neutron refuses to take the
fixed IPs off a port while a floating IP is on one).
"""
import argparse
import base64
import email
import http.server as http_server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

from cloud import Cloud, http  # noqa: E402
from orchestration import TESTER_PASSWORD  # noqa: E402

USER = ('demo', 'heat-tester', TESTER_PASSWORD)
IMAGE_BYTES = b'keelson heat types\n' * 64


class Failed(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Failed(what)


# -- a file Glance can fetch -----------------------------------------------------------------------------------
class FileServer:
    def __init__(self):
        class Handler(http_server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header('Content-Type', 'application/octet-stream')
                self.send_header('Content-Length', str(len(IMAGE_BYTES)))
                self.end_headers()
                self.wfile.write(IMAGE_BYTES)

            do_HEAD = do_GET

            def log_message(self, *args):
                pass
        self.server = http_server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d/image.raw' % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


# -- the cloud's APIs, as a given user -------------------------------------------------------------------------
class Apis:
    def __init__(self, cloud, kind):
        self.c, self.kind = cloud, kind
        self.orch = cloud.orchestration.url

    def token(self, who):
        project, user, password = who
        return self.c.token(project, user, password) if user != 'admin' else self.c.token(project)

    def call(self, who, method, url, body=None, headers=None):
        h = {'X-Auth-Token': self.token(who)}
        h.update(headers or {})
        return http(method, url, body, h)

    def project_id(self, who):
        return self.c.projects[who[0]]

    # Orchestration
    def stack(self, who, method, path, body=None):
        url = '%s/v1/%s/stacks%s' % (self.orch, self.project_id(who), path)
        return self.call(who, method, url, body)

    def wait_stack(self, who, name, sid, timeout=600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, _, doc = self.stack(who, 'GET', '/%s/%s' % (name, sid))
            if status == 404:
                return 'GONE', ''
            if status != 200:
                raise Failed('GET stack: %s %s' % (status, doc))
            st = doc['stack']
            if not st['stack_status'].endswith('IN_PROGRESS'):
                return st['stack_status'], st.get('stack_status_reason') or ''
            time.sleep(1)
        raise Failed('stack %s still in progress after %ss' % (name, timeout))

    def resources(self, who, name, sid):
        status, _, doc = self.stack(who, 'GET', '/%s/%s/resources' % (name, sid))
        expect(status == 200, 'GET resources: %s %s' % (status, doc))
        return {r['resource_name']: r for r in doc['resources']}

    def outputs(self, who, name, sid):
        status, _, doc = self.stack(who, 'GET', '/%s/%s' % (name, sid))
        expect(status == 200, 'GET stack: %s %s' % (status, doc))
        return {o['output_key']: o.get('output_value') for o in doc['stack'].get('outputs') or []}

    def resource(self, who, name, sid, res):
        status, _, doc = self.stack(who, 'GET', '/%s/%s/resources/%s' % (name, sid, res))
        return doc.get('resource') if status == 200 and isinstance(doc, dict) else None

    def swift(self, who, method, path, body=None):
        """One call to the account of `who`'s project: (status, headers)."""
        url = '%s/v1/AUTH_%s%s' % (self.c.object_store.url, self.project_id(who), path)
        status, headers, _ = self.call(who, method, url, body)
        return status, headers

    # Services (checks run as the admin: it sees every project's objects)
    ADMIN = ('admin', 'admin', None)

    def get(self, service, path, who=None):
        who = who or self.ADMIN
        base = {
            'keystone': self.c.url['keystone'] + '/v3',
            'nova': self.c.url['nova'],
            'neutron': self.c.url['neutron'] + '/v2.0',
            'glance': self.c.url['glance'] + '/v2',
            'cinder': '%s/v3/%s' % (self.c.volumes.url, self.project_id(who)),
        }[service]
        headers = {'OpenStack-API-Version': 'compute 2.90'} if service == 'nova' else {}
        if service == 'cinder':
            headers = {'OpenStack-API-Version': 'volume 3.60'}
        status, _, doc = self.call(who, 'GET', base + path, headers=headers)
        if status == 404:
            return None
        expect(status == 200, 'GET %s %s: %s %s' % (service, path, status, doc))
        return doc


# -- the stacks ------------------------------------------------------------------------------------------------
def tmpl(resources, outputs=None):
    t = {'heat_template_version': '2021-04-16', 'resources': resources}
    if outputs:
        t['outputs'] = outputs
    return t


class Family:
    """One stack: templates for create/update/replace, and per type the
    checks of its objects in the service."""
    who = USER
    types = {}  # logical resource name -> type

    def __init__(self, api, run):
        self.api, self.run = api, run
        self.name = '%s-%s' % (self.short, run)

    def template(self, step):
        raise NotImplementedError

    def check(self, res, pid, step):
        """Raises Failed unless the object of resource `res` (physical id
        pid) is as `step`'s template says."""
        raise NotImplementedError

    def gone(self, res, pid):
        """True when the service no longer has the object."""
        raise NotImplementedError

    # which resources each step changes in place / replaces
    updated = ()
    replaced = ()
    # resources Heat gives no physical id
    no_physical_id = ()


class Network(Family):
    short = 'net'
    types = {'net': 'OS::Neutron::Net', 'subnet': 'OS::Neutron::Subnet', 'router': 'OS::Neutron::Router',
             'iface': 'OS::Neutron::RouterInterface', 'sg': 'OS::Neutron::SecurityGroup',
             'rule': 'OS::Neutron::SecurityGroupRule'}
    updated = ('net', 'subnet', 'router', 'sg')
    replaced = ('subnet', 'iface', 'rule')

    def values(self, step):
        n = self.name
        return {
            'net': n + ('-net2' if step != 'create' else '-net'),
            'admin_state_up': step == 'create',
            'subnet': n + ('-sub2' if step != 'create' else '-sub'),
            'cidr': '10.77.1.0/24' if step != 'replace' else '10.77.2.0/24',
            'dns': ['10.0.0.53'] if step == 'create' else ['10.0.0.53', '10.0.0.54'],
            'router': n + ('-router2' if step != 'create' else '-router'),
            'sg_desc': 'web servers' if step == 'create' else 'web and ssh',
            'sg_rules': [{'protocol': 'tcp', 'port_range_min': 22, 'port_range_max': 22,
                          'remote_ip_prefix': '10.0.0.0/8'}] + ([] if step == 'create' else [
                              {'protocol': 'icmp', 'remote_ip_prefix': '0.0.0.0/0'}]),
            'rule_port': 80 if step != 'replace' else 8080,
        }

    def template(self, step):
        v = self.values(step)
        return tmpl({
            'net': {'type': 'OS::Neutron::Net', 'properties': {
                'name': v['net'], 'admin_state_up': v['admin_state_up']}},
            'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
                'name': v['subnet'], 'network': {'get_resource': 'net'}, 'cidr': v['cidr'], 'ip_version': 4,
                'dns_nameservers': v['dns'], 'enable_dhcp': False}},
            'router': {'type': 'OS::Neutron::Router', 'properties': {
                'name': v['router'], 'external_gateway_info': {'network': 'public'}}},
            # Neutron refuses two IPv4 router ports on one network: the
            # replaced interface moves to another network's subnet.
            'iface': {'type': 'OS::Neutron::RouterInterface', 'properties': {
                'router': {'get_resource': 'router'},
                'subnet': {'get_resource': 'subnet' if step != 'replace' else 'subnet_b'}}},
            'net_b': {'type': 'OS::Neutron::Net', 'properties': {'name': self.name + '-net-b'}},
            'subnet_b': {'type': 'OS::Neutron::Subnet', 'properties': {
                'network': {'get_resource': 'net_b'}, 'cidr': '10.77.9.0/24', 'enable_dhcp': False}},
            'sg': {'type': 'OS::Neutron::SecurityGroup', 'properties': {
                'name': self.name + '-sg', 'description': v['sg_desc'], 'rules': v['sg_rules']}},
            'rule': {'type': 'OS::Neutron::SecurityGroupRule', 'properties': {
                'security_group': {'get_resource': 'sg'}, 'direction': 'ingress', 'protocol': 'tcp',
                'port_range_min': v['rule_port'], 'port_range_max': v['rule_port'],
                'remote_ip_prefix': '192.168.0.0/16', 'description': 'http'}},
        }, {'net_name': {'value': {'get_attr': ['net', 'name']}},
            'subnet_cidr': {'value': {'get_attr': ['subnet', 'cidr']}},
            'router_gw': {'value': {'get_attr': ['router', 'external_gateway_info', 'network_id']}}})

    def check(self, res, pid, step):
        v, api = self.values(step), self.api
        if res == 'net':
            o = (api.get('neutron', '/networks/' + pid) or {}).get('network')
            expect(o, 'network %s missing' % pid)
            expect(o['name'] == v['net'], 'name %r' % o['name'])
            expect(o['admin_state_up'] == v['admin_state_up'], 'admin_state_up %r' % o['admin_state_up'])
            expect(o['project_id'] == api.project_id(self.who), 'project %s' % o['project_id'])
        elif res == 'subnet':
            o = (api.get('neutron', '/subnets/' + pid) or {}).get('subnet')
            expect(o, 'subnet %s missing' % pid)
            expect(o['name'] == v['subnet'], 'name %r' % o['name'])
            expect(o['cidr'] == v['cidr'], 'cidr %r' % o['cidr'])
            expect(o['dns_nameservers'] == v['dns'], 'dns_nameservers %r' % o['dns_nameservers'])
            expect(o['enable_dhcp'] is False, 'enable_dhcp %r' % o['enable_dhcp'])
        elif res == 'router':
            o = (api.get('neutron', '/routers/' + pid) or {}).get('router')
            expect(o, 'router %s missing' % pid)
            expect(o['name'] == v['router'], 'name %r' % o['name'])
            gw = (o.get('external_gateway_info') or {}).get('network_id')
            expect(gw == self.run_ctx['public'], 'gateway network %r' % gw)
        elif res == 'iface':
            router = pid.partition(':')[0]
            ports = api.get('neutron', '/ports?device_id=%s&device_owner=network:router_interface' % router)['ports']
            subnets = [ip['subnet_id'] for p in ports for ip in p['fixed_ips']]
            sid = self.ids['subnet'] if step != 'replace' else self.extra_ids['subnet_b']
            expect(sid in subnets, 'router %s has no interface on subnet %s (has %s)' % (router, sid, subnets))
        elif res == 'sg':
            o = (api.get('neutron', '/security-groups/' + pid) or {}).get('security_group')
            expect(o, 'security group %s missing' % pid)
            expect(o['name'] == self.name + '-sg', 'name %r' % o['name'])
            expect(o['description'] == v['sg_desc'], 'description %r' % o['description'])
            got = sorted((r['protocol'], r['port_range_min'], r['port_range_max'], r['remote_ip_prefix'])
                         for r in o['security_group_rules'] if r['direction'] == 'ingress' and r['protocol'] in (
                             'tcp', 'icmp') and r['port_range_min'] != 80 and r['port_range_min'] != 8080)
            want = sorted((r['protocol'], r.get('port_range_min'), r.get('port_range_max'), r['remote_ip_prefix'])
                          for r in v['sg_rules'])
            expect(got == want, 'ingress rules %r, want %r' % (got, want))
            egress = [r for r in o['security_group_rules'] if r['direction'] == 'egress']
            # Heat deletes Neutron's default egress rules when rules are given and
            # adds IPv4 and IPv6 egress rules to anywhere.
            self.egress[step] = sorted((r['ethertype'], r['remote_ip_prefix']) for r in egress)
        elif res == 'rule':
            o = (api.get('neutron', '/security-group-rules/' + pid) or {}).get('security_group_rule')
            expect(o, 'rule %s missing' % pid)
            expect(o['security_group_id'] == self.ids['sg'], 'group %s' % o['security_group_id'])
            expect((o['direction'], o['protocol'], o['port_range_min'], o['port_range_max'], o['remote_ip_prefix'],
                    o['description']) == ('ingress', 'tcp', v['rule_port'], v['rule_port'], '192.168.0.0/16', 'http'),
                   'rule %r' % o)

    def gone(self, res, pid):
        path = {'net': '/networks/', 'subnet': '/subnets/', 'router': '/routers/', 'sg': '/security-groups/',
                'rule': '/security-group-rules/'}.get(res)
        if path:
            return self.api.get('neutron', path + pid) is None
        # Heat's id: <router id>:subnet_id=<subnet id>
        router, _, subnet = pid.partition(':')
        subnet = subnet.rpartition('=')[2]
        if self.api.get('neutron', '/routers/' + router) is None:
            return True
        ports = self.api.get('neutron', '/ports?device_id=%s' % router)['ports']
        return not any(ip['subnet_id'] == subnet for p in ports for ip in p['fixed_ips'])


def public_key(cache=[]):
    """An ed25519 public key made for this run."""
    if not cache:
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'heat-types', '-f',
                            os.path.join(d, 'k')], check=True)
            with open(os.path.join(d, 'k.pub')) as f:
                cache.append(f.read().strip())
    return cache[0]


class Compute(Family):
    short = 'nova'
    types = {'key': 'OS::Nova::KeyPair', 'group': 'OS::Nova::ServerGroup'}
    updated = ()
    replaced = ('key', 'group')

    def template(self, step):
        return tmpl({
            # From microversion 2.92 Nova generates no keys: public_key is required.
            'key': {'type': 'OS::Nova::KeyPair', 'properties': {
                'name': self.name + ('-key' if step != 'replace' else '-key2'), 'public_key': public_key()}},
            'group': {'type': 'OS::Nova::ServerGroup', 'properties': {
                'name': self.name + '-group',
                'policies': ['anti-affinity'] if step != 'replace' else ['affinity']}},
        }, {'public_key': {'value': {'get_attr': ['key', 'public_key']}},
            'private_key': {'value': {'get_attr': ['key', 'private_key']}}})

    def check(self, res, pid, step):
        api = self.api
        if res == 'key':
            want = self.name + ('-key' if step != 'replace' else '-key2')
            expect(pid == want, 'physical id %r, want the name %r' % (pid, want))
            o = (api.get('nova', '/os-keypairs/' + pid, who=self.who) or {}).get('keypair')
            expect(o, 'key pair %s missing' % pid)
            expect(o['type'] == 'ssh', 'type %r' % o['type'])
            out = api.outputs(self.who, self.name, self.sid)
            expect(o['public_key'] == public_key(), 'public key %r' % o['public_key'])
            expect(out.get('public_key') == o['public_key'], 'public_key output %r' % out.get('public_key'))
            expect(out.get('private_key') == '', 'private_key output %r' % out.get('private_key'))
        elif res == 'group':
            o = (api.get('nova', '/os-server-groups/' + pid, who=self.who) or {}).get('server_group')
            expect(o, 'server group %s missing' % pid)
            expect(o['name'] == self.name + '-group', 'name %r' % o['name'])
            want = 'anti-affinity' if step != 'replace' else 'affinity'
            expect(o.get('policy') == want, 'policy %r' % o.get('policy'))

    def gone(self, res, pid):
        path = '/os-keypairs/' if res == 'key' else '/os-server-groups/'
        return self.api.get('nova', path + pid, who=self.who) is None


class Volume(Family):
    short = 'vol'
    types = {'volume': 'OS::Cinder::Volume'}
    updated = ('volume',)
    replaced = ('volume',)

    def values(self, step):
        return {'name': self.name + ('-v' if step == 'create' else '-v2'),
                'description': 'data' if step == 'create' else 'more data',
                'metadata': {'purpose': 'test'} if step == 'create' else {'purpose': 'test', 'tier': 'gold'},
                'size': 1 if step == 'create' else 2,
                'az': step == 'replace'}

    def template(self, step):
        v = self.values(step)
        props = {'name': v['name'], 'description': v['description'], 'metadata': v['metadata'], 'size': v['size']}
        if v['az']:
            props['availability_zone'] = 'nova'
        return tmpl({'volume': {'type': 'OS::Cinder::Volume', 'properties': props}},
                    {'size': {'value': {'get_attr': ['volume', 'size']}},
                     'status': {'value': {'get_attr': ['volume', 'status']}}})

    def check(self, res, pid, step):
        v = self.values(step)
        o = (self.api.get('cinder', '/volumes/' + pid, who=self.who) or {}).get('volume')
        expect(o, 'volume %s missing' % pid)
        expect(o['status'] == 'available', 'status %r' % o['status'])
        expect(o['name'] == v['name'], 'name %r' % o['name'])
        expect(o['description'] == v['description'], 'description %r' % o['description'])
        expect(o['metadata'] == v['metadata'], 'metadata %r' % o['metadata'])
        expect(o['size'] == v['size'], 'size %r' % o['size'])
        out = self.api.outputs(self.who, self.name, self.sid)
        expect(str(out.get('size')) == str(v['size']), 'size output %r' % out.get('size'))

    def gone(self, res, pid):
        o = self.api.get('cinder', '/volumes/' + pid, who=self.who)
        return o is None


class Image(Family):
    short = 'img'
    types = {'image': 'OS::Glance::WebImage'}
    updated = ('image',)
    replaced = ('image',)

    def values(self, step):
        return {'name': self.name + ('-image' if step != 'replace' else '-image2'),
                'tags': ['a'] if step == 'create' else ['a', 'b'],
                'os_distro': 'cirros' if step == 'create' else 'debian',
                'extra': {'hw_rng_model': 'virtio'} if step == 'create' else {'hw_rng_model': 'virtio',
                                                                               'note': 'x'}}

    def template(self, step):
        v = self.values(step)
        return tmpl({'image': {'type': 'OS::Glance::WebImage', 'properties': {
            'name': v['name'], 'location': self.run_ctx['image_url'], 'disk_format': 'raw',
            'container_format': 'bare', 'min_ram': 64, 'tags': v['tags'], 'os_distro': v['os_distro'],
            'extra_properties': v['extra']}}},
            {'show': {'value': {'get_attr': ['image', 'show']}}})

    def check(self, res, pid, step):
        v = self.values(step)
        o = self.api.get('glance', '/images/' + pid)
        expect(o, 'image %s missing' % pid)
        expect(o['status'] == 'active', 'status %r' % o['status'])
        expect(o['name'] == v['name'], 'name %r' % o['name'])
        expect(o['size'] == len(IMAGE_BYTES), 'size %r' % o['size'])
        expect((o['disk_format'], o['container_format'], o['min_ram']) == ('raw', 'bare', 64),
               'formats/min_ram %r' % ((o['disk_format'], o['container_format'], o['min_ram']),))
        expect(sorted(o['tags']) == v['tags'], 'tags %r' % o['tags'])
        expect(o.get('os_distro') == v['os_distro'], 'os_distro %r' % o.get('os_distro'))
        for key, value in v['extra'].items():
            expect(o.get(key) == value, '%s %r' % (key, o.get(key)))
        expect(o['owner'] == self.api.project_id(self.who), 'owner %r' % o['owner'])
        show = self.api.outputs(self.who, self.name, self.sid).get('show') or {}
        expect(show.get('id') == pid and show.get('status') == 'active', 'show attribute %r' % show)

    def gone(self, res, pid):
        o = self.api.get('glance', '/images/' + pid)
        return o is None or o.get('status') == 'deleted'


class Admin(Family):
    """Admin-only types: Flavor, Quota, VolumeType."""
    short = 'adm'
    who = ('admin', 'admin', None)
    types = {'flavor': 'OS::Nova::Flavor', 'quota': 'OS::Nova::Quota', 'vtype': 'OS::Cinder::VolumeType'}
    updated = ('flavor', 'quota', 'vtype')
    quota_projects = {}  # physical id -> project
    replaced = ('flavor', 'quota')

    def values(self, step):
        return {'ram': 256 if step != 'replace' else 384,
                'specs': {'hw:cpu_policy': 'shared'} if step == 'create' else {'hw:cpu_policy': 'shared',
                                                                               'quota:disk_read_bytes_sec': '1000'},
                'project': 'tenant-a' if step != 'replace' else 'tenant-b',
                'cores': 7 if step == 'create' else 9, 'instances': 5 if step == 'create' else 6,
                'vtype': self.name + ('-vt' if step == 'create' else '-vt2'),
                'vt_desc': 'fast' if step == 'create' else 'faster',
                'vt_meta': {'volume_backend_name': 'nfs'} if step == 'create' else {'volume_backend_name': 'nfs',
                                                                                     'tier': 'gold'}}

    def template(self, step):
        v = self.values(step)
        return tmpl({
            'flavor': {'type': 'OS::Nova::Flavor', 'properties': {
                'ram': v['ram'], 'vcpus': 2, 'disk': 3, 'ephemeral': 1, 'swap': 16,
                'extra_specs': v['specs'], 'is_public': False, 'tenants': ['demo']}},
            'quota': {'type': 'OS::Nova::Quota', 'properties': {
                'project': v['project'], 'cores': v['cores'], 'instances': v['instances'], 'key_pairs': 11}},
            'vtype': {'type': 'OS::Cinder::VolumeType', 'properties': {
                'name': v['vtype'], 'description': v['vt_desc'], 'metadata': v['vt_meta'], 'is_public': True}},
        })

    def check(self, res, pid, step):
        v, api = self.values(step), self.api
        if res == 'flavor':
            o = (api.get('nova', '/flavors/' + pid) or {}).get('flavor')
            expect(o, 'flavor %s missing' % pid)
            got = (o['ram'], o['vcpus'], o['disk'], o['OS-FLV-EXT-DATA:ephemeral'], o['swap'],
                   o['os-flavor-access:is_public'])
            expect(got == (v['ram'], 2, 3, 1, 16, False), 'flavor %r' % (got,))
            expect(o.get('extra_specs') == v['specs'], 'extra_specs %r' % o.get('extra_specs'))
            access = api.get('nova', '/flavors/%s/os-flavor-access' % pid)['flavor_access']
            expect([a['tenant_id'] for a in access] == [api.c.projects['demo']], 'access %r' % access)
        elif res == 'quota':
            project = api.c.projects[v['project']]
            self.quota_projects[pid] = project
            q = api.get('nova', '/os-quota-sets/' + project)['quota_set']
            expect((q['cores'], q['instances'], q['key_pairs']) == (v['cores'], v['instances'], 11),
                   'quota %r' % ((q['cores'], q['instances'], q['key_pairs']),))
        elif res == 'vtype':
            o = (api.get('cinder', '/types/' + pid) or {}).get('volume_type')
            expect(o, 'volume type %s missing' % pid)
            expect((o['name'], o['description'], o['is_public']) == (v['vtype'], v['vt_desc'], True),
                   'volume type %r' % ((o['name'], o['description'], o['is_public']),))
            expect(o['extra_specs'] == v['vt_meta'], 'extra_specs %r' % o['extra_specs'])

    def gone(self, res, pid):
        if res == 'flavor':
            return self.api.get('nova', '/flavors/' + pid) is None
        if res == 'vtype':
            return self.api.get('cinder', '/types/' + pid) is None
        project = self.quota_projects[pid]
        q = self.api.get('nova', '/os-quota-sets/' + project)['quota_set']
        # Deleting the quota resets the project to the defaults.
        d = self.api.get('nova', '/os-quota-sets/%s/defaults' % project)['quota_set']
        return (q['cores'], q['instances'], q['key_pairs']) == (d['cores'], d['instances'], d['key_pairs'])


class Identity(Family):
    short = 'ks'
    who = ('admin', 'admin', None)
    types = {'domain': 'OS::Keystone::Domain', 'project': 'OS::Keystone::Project', 'role': 'OS::Keystone::Role',
             'group': 'OS::Keystone::Group', 'user': 'OS::Keystone::User',
             'assign': 'OS::Keystone::UserRoleAssignment', 'gassign': 'OS::Keystone::GroupRoleAssignment',
             'service': 'OS::Keystone::Service', 'endpoint': 'OS::Keystone::Endpoint'}
    updated = ('domain', 'project', 'role', 'group', 'user', 'assign', 'gassign', 'service', 'endpoint')
    replaced = ('role', 'project')
    no_physical_id = ('assign', 'gassign')

    def values(self, step):
        n = self.name
        return {'domain': n + ('-dom' if step == 'create' else '-dom2'),
                # Keystone deletes only a disabled domain and Heat 27 does not
                # disable it first: the update disables it.
                'dom_enabled': step == 'create',
                'project': n + {'create': '-proj', 'update': '-proj2', 'replace': '-proj3'}[step],
                'proj_desc': 'p1' if step == 'create' else 'p2',
                # parent is not update_allowed: replacement moves the project under `parent`
                'parent': step == 'replace',
                'role': n + {'create': '-role', 'update': '-role2', 'replace': '-role3'}[step],
                'role_domain': step == 'replace',
                'group_desc': 'g1' if step == 'create' else 'g2',
                'email': 'a@example.org' if step == 'create' else 'b@example.org',
                'svc_desc': 's1' if step == 'create' else 's2',
                'url': 'http://127.0.0.1:9/%s' % ('v1' if step == 'create' else 'v2')}

    def template(self, step):
        v = self.values(step)
        project = {'name': v['project'], 'description': v['proj_desc'], 'domain': 'default', 'tags': ['t1']}
        resources = {
            'domain': {'type': 'OS::Keystone::Domain', 'properties': {
                'name': v['domain'], 'description': 'd', 'enabled': v['dom_enabled']}},
            'project': {'type': 'OS::Keystone::Project', 'properties': project},
            'role': {'type': 'OS::Keystone::Role', 'properties': {'name': v['role']}},
            'group': {'type': 'OS::Keystone::Group', 'properties': {
                'name': self.name + '-group', 'domain': 'default', 'description': v['group_desc']}},
            'user': {'type': 'OS::Keystone::User', 'properties': {
                'name': self.name + '-user', 'domain': 'default', 'password': 'pw-' + self.run,
                'email': v['email'], 'default_project': {'get_resource': 'project'},
                'groups': [{'get_resource': 'group'}]}},
            'assign': {'type': 'OS::Keystone::UserRoleAssignment', 'properties': {
                'user': {'get_resource': 'user'},
                'roles': [{'role': {'get_resource': 'role'}, 'project': {'get_resource': 'project'}}] + (
                    [] if step == 'create' else [{'role': 'member', 'project': {'get_resource': 'project'}}])}},
            'gassign': {'type': 'OS::Keystone::GroupRoleAssignment', 'properties': {
                'group': {'get_resource': 'group'},
                'roles': [{'role': 'member',
                           'domain': 'default' if step == 'create' else {'get_resource': 'domain'}}]}},
            'service': {'type': 'OS::Keystone::Service', 'properties': {
                'name': self.name + '-svc', 'type': 'kt-' + self.run, 'description': v['svc_desc']}},
            'endpoint': {'type': 'OS::Keystone::Endpoint', 'properties': {
                'service': {'get_resource': 'service'}, 'interface': 'internal', 'url': v['url'],
                'region': 'RegionOne', 'name': self.name + '-ep'}},
        }
        if v['parent']:
            project['parent'] = self.run_ctx['parent']
        if v['role_domain']:
            resources['role']['properties']['domain'] = 'default'
            # A domain-specific role is not effective on its own: the
            # assignment takes a global role from here on.
            resources['assign']['properties']['roles'][0]['role'] = 'reader'
        return tmpl(resources)

    def check(self, res, pid, step):
        v, api = self.values(step), self.api
        if res == 'domain':
            o = (api.get('keystone', '/domains/' + pid) or {}).get('domain')
            expect(o, 'domain %s missing' % pid)
            expect((o['name'], o['enabled']) == (v['domain'], v['dom_enabled']), 'domain %r' % o)
        elif res == 'project':
            o = (api.get('keystone', '/projects/' + pid) or {}).get('project')
            expect(o, 'project %s missing' % pid)
            expect((o['name'], o['description'], o['domain_id']) == (v['project'], v['proj_desc'], 'default'),
                   'project %r' % o)
            expect(o.get('tags') == ['t1'], 'tags %r' % o.get('tags'))
            want_parent = self.run_ctx['parent'] if v['parent'] else 'default'
            expect(o['parent_id'] == want_parent, 'parent %r' % o['parent_id'])
        elif res == 'role':
            o = (api.get('keystone', '/roles/' + pid) or {}).get('role')
            expect(o, 'role %s missing' % pid)
            expect(o['name'] == v['role'], 'name %r' % o['name'])
            expect(o.get('domain_id') == ('default' if v['role_domain'] else None), 'domain %r' % o.get('domain_id'))
        elif res == 'group':
            o = (api.get('keystone', '/groups/' + pid) or {}).get('group')
            expect(o, 'group %s missing' % pid)
            expect(o['description'] == v['group_desc'], 'description %r' % o['description'])
        elif res == 'user':
            o = (api.get('keystone', '/users/' + pid) or {}).get('user')
            expect(o, 'user %s missing' % pid)
            expect(o.get('email') == v['email'], 'email %r' % o.get('email'))
            expect(o.get('default_project_id') == self.ids['project'], 'default project %r'
                   % o.get('default_project_id'))
            groups = [g['id'] for g in api.get('keystone', '/users/%s/groups' % pid)['groups']]
            expect(groups == [self.ids['group']], 'groups %r' % groups)
        elif res == 'assign':
            user = self.ids['user']
            got = api.get('keystone', '/role_assignments?user.id=%s&include_names=true' % user)['role_assignments']
            got = sorted((a['role']['name'], a['scope'].get('project', {}).get('id')) for a in got)
            first = 'reader' if v['role_domain'] else v['role']
            want = sorted([(first, self.ids['project'])] + (
                [] if step == 'create' else [('member', self.ids['project'])]))
            expect(got == want, 'assignments %r, want %r' % (got, want))
        elif res == 'gassign':
            got = api.get('keystone', '/role_assignments?group.id=%s&include_names=true'
                          % self.ids['group'])['role_assignments']
            got = [(a['role']['name'], a['scope'].get('domain', {}).get('id')) for a in got]
            want = [('member', 'default' if step == 'create' else self.ids['domain'])]
            expect(got == want, 'group assignments %r, want %r' % (got, want))
        elif res == 'service':
            o = (api.get('keystone', '/services/' + pid) or {}).get('service')
            expect(o, 'service %s missing' % pid)
            expect((o['name'], o['type'], o.get('description')) == (self.name + '-svc', 'kt-' + self.run,
                                                                     v['svc_desc']), 'service %r' % o)
        elif res == 'endpoint':
            o = (api.get('keystone', '/endpoints/' + pid) or {}).get('endpoint')
            expect(o, 'endpoint %s missing' % pid)
            expect((o['url'], o['interface'], o['service_id'], o.get('region_id'), o.get('name')) == (
                v['url'], 'internal', self.ids['service'], 'RegionOne', self.name + '-ep'), 'endpoint %r' % o)

    def gone(self, res, pid):
        api = self.api
        path = {'domain': '/domains/', 'project': '/projects/', 'role': '/roles/', 'group': '/groups/',
                'user': '/users/', 'service': '/services/', 'endpoint': '/endpoints/'}.get(res)
        if path:
            return api.get('keystone', path + pid) is None
        # An assignment goes with its user/group (a stack delete removes both).
        key = 'user.id' if res == 'assign' else 'group.id'
        owner = self.ids['user' if res == 'assign' else 'group']
        return not api.get('keystone', '/role_assignments?%s=%s' % (key, owner))['role_assignments']



class Ports(Family):
    """A port on its own network with a security group and a QoS policy
    (a bandwidth-limit, a DSCP marking and a minimum packet rate rule, each
    changed in place by the update), and a floating IP on it through a
    router."""
    short = 'port'
    # Heat's policy keeps the QoS types to the admin role.
    who = ('admin', 'admin', None)
    types = {'port': 'OS::Neutron::Port', 'fip': 'OS::Neutron::FloatingIP', 'qos': 'OS::Neutron::QoSPolicy',
             'bwlimit': 'OS::Neutron::QoSBandwidthLimitRule', 'dscp': 'OS::Neutron::QoSDscpMarkingRule',
             'pps': 'OS::Neutron::QoSMinimumPacketRateRule'}
    updated = ('port', 'qos', 'bwlimit', 'dscp', 'pps')
    # rule resource -> (its collection under the policy, the fields checked)
    RULES = {'bwlimit': ('bandwidth_limit_rules', ('max_kbps', 'max_burst_kbps')),
             'dscp': ('dscp_marking_rules', ('dscp_mark',)),
             'pps': ('minimum_packet_rate_rules', ('min_kpps', 'direction'))}
    # A port on another network is a new port; its floating IP follows it.
    replaced = ('port',)

    def values(self, step):
        return {
            'port': self.name + ('-port2' if step != 'create' else '-port'),
            'admin_state_up': step == 'create',
            # Neutron refuses to change the fixed IP a floating IP is on.
            'ip': '10.78.1.10',
            'net': 'net_b' if step == 'replace' else 'net',
            'qos_desc': 'capped' if step == 'create' else 'capped harder',
            'max_kbps': 1000 if step == 'create' else 2000,
            'dscp_mark': 16 if step == 'create' else 26,
            'min_kpps': 1000 if step == 'create' else 2000,
        }

    def template(self, step):
        v, n = self.values(step), self.name
        subnet = 'subnet_b' if step == 'replace' else 'subnet'
        fixed = [{'subnet': {'get_resource': subnet}}] if step == 'replace' else [
            {'subnet': {'get_resource': 'subnet'}, 'ip_address': v['ip']}]
        return tmpl({
            'net': {'type': 'OS::Neutron::Net', 'properties': {'name': n + '-net'}},
            'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
                'network': {'get_resource': 'net'}, 'cidr': '10.78.1.0/24', 'enable_dhcp': False}},
            'net_b': {'type': 'OS::Neutron::Net', 'properties': {'name': n + '-net-b'}},
            'subnet_b': {'type': 'OS::Neutron::Subnet', 'properties': {
                'network': {'get_resource': 'net_b'}, 'cidr': '10.78.2.0/24', 'enable_dhcp': False}},
            'router': {'type': 'OS::Neutron::Router', 'properties': {
                'external_gateway_info': {'network': 'public'}}},
            'iface': {'type': 'OS::Neutron::RouterInterface', 'properties': {
                'router': {'get_resource': 'router'}, 'subnet': {'get_resource': subnet}}},
            'sg': {'type': 'OS::Neutron::SecurityGroup', 'properties': {'name': n + '-sg'}},
            'qos': {'type': 'OS::Neutron::QoSPolicy', 'properties': {
                'name': n + '-qos', 'description': v['qos_desc']}},
            'bwlimit': {'type': 'OS::Neutron::QoSBandwidthLimitRule', 'properties': {
                'policy': {'get_resource': 'qos'}, 'max_kbps': v['max_kbps'], 'max_burst_kbps': 100}},
            'dscp': {'type': 'OS::Neutron::QoSDscpMarkingRule', 'properties': {
                'policy': {'get_resource': 'qos'}, 'dscp_mark': v['dscp_mark']}},
            'pps': {'type': 'OS::Neutron::QoSMinimumPacketRateRule', 'properties': {
                'policy': {'get_resource': 'qos'}, 'min_kpps': v['min_kpps']}},
            'port': {'type': 'OS::Neutron::Port', 'properties': {
                'name': v['port'], 'network': {'get_resource': v['net']}, 'fixed_ips': fixed,
                'admin_state_up': v['admin_state_up'], 'security_groups': [{'get_resource': 'sg'}],
                'qos_policy': {'get_resource': 'qos'}}},
            # The implicit dependency on the router interface is stated, so
            # that both engines order it the same way.
            'fip': {'type': 'OS::Neutron::FloatingIP', 'depends_on': ['iface'], 'properties': {
                'floating_network': 'public', 'port_id': {'get_resource': 'port'}}},
        }, {'port_mac': {'value': {'get_attr': ['port', 'mac_address']}},
            'fip_address': {'value': {'get_attr': ['fip', 'floating_ip_address']}}})

    def check(self, res, pid, step):
        v, api = self.values(step), self.api
        if res == 'port':
            o = (api.get('neutron', '/ports/' + pid) or {}).get('port')
            expect(o, 'port %s missing' % pid)
            expect(o['name'] == v['port'], 'name %r' % o['name'])
            expect(o['admin_state_up'] == v['admin_state_up'], 'admin_state_up %r' % o['admin_state_up'])
            net = self.extra_ids[v['net']]
            expect(o['network_id'] == net, 'network %s, want %s' % (o['network_id'], net))
            if step != 'replace':
                ips = [ip['ip_address'] for ip in o['fixed_ips']]
                expect(ips == [v['ip']], 'fixed ips %r' % ips)
            expect(o['security_groups'] == [self.extra_ids['sg']], 'security groups %r' % o['security_groups'])
            expect(o.get('qos_policy_id') == self.ids['qos'], 'qos policy %r' % o.get('qos_policy_id'))
        elif res == 'fip':
            o = (api.get('neutron', '/floatingips/' + pid) or {}).get('floatingip')
            expect(o, 'floating ip %s missing' % pid)
            expect(o['floating_network_id'] == self.run_ctx['public'], 'network %s' % o['floating_network_id'])
            expect(o['port_id'] == self.ids['port'], 'port %s, want %s' % (o['port_id'], self.ids['port']))
        elif res == 'qos':
            o = (api.get('neutron', '/qos/policies/' + pid) or {}).get('policy')
            expect(o, 'qos policy %s missing' % pid)
            expect((o['name'], o['description']) == (self.name + '-qos', v['qos_desc']), 'policy %r' % o)
        elif res in self.RULES:
            collection, fields = self.RULES[res]
            want = {'bwlimit': (v['max_kbps'], 100), 'dscp': (v['dscp_mark'],),
                    'pps': (v['min_kpps'], 'egress')}[res]
            rules = (api.get('neutron', '/qos/policies/%s/%s' % (self.ids['qos'], collection))
                     or {}).get(collection, [])
            got = [(r['id'],) + tuple(r[f] for f in fields) for r in rules]
            expect(got == [(pid,) + want], 'rules %r' % got)

    def gone(self, res, pid):
        if res in self.RULES:
            collection = self.RULES[res][0]
            policy = self.ids.get('qos')
            rules = (self.api.get('neutron', '/qos/policies/%s/%s' % (policy, collection))
                     or {}).get(collection, []) if policy else []
            return not any(r['id'] == pid for r in rules)
        path = {'port': '/ports/', 'fip': '/floatingips/', 'qos': '/qos/policies/'}[res]
        return self.api.get('neutron', path + pid) is None


# The server family's flavors (public, made by the admin): create, then resize.
SERVER_FLAVORS = (('ht.small', 1, 128, 1), ('ht.big', 1, 256, 1))


class Servers(Family):
    """A server on a network of the stack's (the cloud's image, the flavors
    prepare() makes): the update resizes it to the bigger flavor and
    changes its metadata in place (Heat resizes and confirms); the replace
    step changes its user_data, which Heat's default user_data_update_policy
    (REPLACE) answers with a new server."""
    short = 'server'
    types = {'server': 'OS::Nova::Server'}
    updated = ('server',)
    replaced = ('server',)

    def values(self, step):
        return {
            'flavor': SERVER_FLAVORS[0][0] if step == 'create' else SERVER_FLAVORS[1][0],
            'metadata': {'step': 'create'} if step == 'create' else {'step': 'update', 'kept': 'yes'},
            'user_data': 'echo first' if step != 'replace' else 'echo second',
        }

    def template(self, step):
        v, n = self.values(step), self.name
        return tmpl({
            'net': {'type': 'OS::Neutron::Net', 'properties': {'name': n + '-net'}},
            'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
                'network': {'get_resource': 'net'}, 'cidr': '10.79.1.0/24', 'enable_dhcp': False}},
            'server': {'type': 'OS::Nova::Server', 'depends_on': ['subnet'], 'properties': {
                'name': n + '-vm', 'image': 'cloud-test', 'flavor': v['flavor'], 'metadata': v['metadata'],
                'networks': [{'network': {'get_resource': 'net'}}],
                'user_data_format': 'RAW', 'user_data': v['user_data']}},
        }, {'networks': {'value': {'get_attr': ['server', 'networks']}},
            'server_name': {'value': {'get_attr': ['server', 'name']}}})

    def check(self, res, pid, step):
        v, api = self.values(step), self.api
        o = (api.get('nova', '/servers/' + pid, who=self.who) or {}).get('server')
        expect(o, 'server %s missing' % pid)
        expect(o['status'] == 'ACTIVE', 'status %r' % o['status'])
        expect(o['name'] == self.name + '-vm', 'name %r' % o['name'])
        expect(o['flavor'].get('original_name') == v['flavor'], 'flavor %r' % o['flavor'])
        expect(o['metadata'] == v['metadata'], 'metadata %r' % o['metadata'])
        net = self.name + '-net'
        ips = [a['addr'] for a in o['addresses'].get(net, [])]
        expect(len(ips) == 1 and ips[0].startswith('10.79.1.'), 'addresses %r' % o['addresses'])
        out = api.outputs(self.who, self.name, self.sid)
        expect(out.get('server_name') == o['name'], 'name output %r' % out.get('server_name'))
        networks = out.get('networks') or {}
        expect(networks.get(net) == ips, 'networks output %r' % networks)

    def gone(self, res, pid):
        return self.api.get('nova', '/servers/' + pid, who=self.who) is None


class Ec2(Family):
    """AWS::EC2::Instance with SubnetId (Heat makes the port on it), Tags
    (the server's metadata) and UserData, on a network of the stack's: the
    update resizes it (InstanceType: Heat resizes and confirms), changes
    its Tags and moves it to a second subnet of the network (SubnetId:
    the interface detached, the old port deleted, a port made on the new
    subnet and attached), all in place; the replace step changes UserData
    (not update_allowed): a new server. The attributes (PrivateIp, PublicIp,
    PrivateDnsName, PublicDnsName: Heat's first address of the last
    network by name; AvailabilityZone: Nova's zone) are read through
    outputs.

    The real Heat 27.0.1 fails the replace and delete steps: its delete
    removes the port it made before the server, and Neutron's default
    policy (2025.1 on) refuses a project member the delete of a port bound
    to a server (`Forbidden: rule:delete_port is disallowed by policy`),
    so the old server stays and the stack ends UPDATE_FAILED/DELETE_FAILED.
    keelson deletes the server first, then the port (Nova has unbound it).
    Heat's SubnetId update also deletes the old port before it detaches
    it; keelson detaches it and waits until Nova no longer lists it."""
    short = 'ec2'
    types = {'vm': 'AWS::EC2::Instance'}
    updated = ('vm',)
    replaced = ('vm',)
    ATTRS = ('PrivateIp', 'PublicIp', 'PrivateDnsName', 'PublicDnsName', 'AvailabilityZone')
    cidr = '10.80.1.0/24'
    cidr_b = '10.80.2.0/24'

    def values(self, step):
        return {
            'subnet': 'subnet' if step == 'create' else 'subnet_b',
            'flavor': SERVER_FLAVORS[0][0] if step == 'create' else SERVER_FLAVORS[1][0],
            'tags': {'step': 'create'} if step == 'create' else {'step': 'update', 'kept': 'yes'},
            'user_data': 'echo first' if step != 'replace' else 'echo second',
        }

    @staticmethod
    def tags(m):
        return [{'Key': k, 'Value': m[k]} for k in sorted(m)]

    def network(self):
        return {
            'net': {'type': 'OS::Neutron::Net', 'properties': {'name': self.name + '-net'}},
            'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
                'network': {'get_resource': 'net'}, 'cidr': self.cidr, 'enable_dhcp': False}},
        }

    def outputs(self, servers):
        return {'%s_%s' % (res, a): {'value': {'get_attr': [res, a]}} for res in servers for a in self.ATTRS}

    def template(self, step):
        v = self.values(step)
        resources = self.network()
        resources['subnet_b'] = {'type': 'OS::Neutron::Subnet', 'properties': {
            'network': {'get_resource': 'net'}, 'cidr': self.cidr_b, 'enable_dhcp': False}}
        resources['vm'] = {'type': 'AWS::EC2::Instance', 'properties': {
            'ImageId': 'cloud-test', 'InstanceType': v['flavor'], 'SubnetId': {'get_resource': v['subnet']},
            'Tags': self.tags(v['tags']), 'UserData': v['user_data']}}
        return tmpl(resources, self.outputs(['vm']))

    def server(self, pid):
        # As the admin: user_data and the zone are shown to admins.
        o = (self.api.get('nova', '/servers/' + pid) or {}).get('server')
        expect(o, 'server %s missing' % pid)
        return o

    def image_id(self):
        if not hasattr(self, '_image'):
            self._image = self.api.get('glance', '/images?name=cloud-test')['images'][0]['id']
        return self._image

    def check_attributes(self, res, o):
        """The attribute outputs against the server: Heat's first address of
        the last network (by name) that has one, and Nova's zone."""
        out = self.api.outputs(self.who, self.name, self.sid)
        got = {a: out.get('%s_%s' % (res, a)) for a in self.ATTRS}
        self.attrs.setdefault(res, []).append(got)
        first = None
        for net in sorted(o['addresses'], reverse=True):
            if o['addresses'][net]:
                first = o['addresses'][net][0]['addr']
                break
        for a in self.ATTRS[:4]:
            expect(got[a] == first, '%s output %r, want %r' % (a, got[a], first))
        zone = o.get('OS-EXT-AZ:availability_zone')
        expect(got['AvailabilityZone'] == zone, 'AvailabilityZone output %r, want %r' % (got['AvailabilityZone'],
                                                                                          zone))

    def check_server(self, res, pid, flavor, metadata, user_data=None, cidr=None):
        """The server in Nova: active, flavor, metadata, image, project, one
        address on the stack's network, the user data's part; returns its
        ports."""
        api = self.api
        o = self.server(pid)
        expect(o['status'] == 'ACTIVE', 'status %r' % o['status'])
        expect(o['flavor'].get('original_name') == flavor, 'flavor %r, want %s' % (o['flavor'], flavor))
        expect(o['metadata'] == metadata, 'metadata %r, want %r' % (o['metadata'], metadata))
        expect((o.get('image') or {}).get('id') == self.image_id(), 'image %r' % o.get('image'))
        expect(o['tenant_id'] == api.project_id(self.who), 'project %s' % o['tenant_id'])
        ips = [a['addr'] for a in o['addresses'].get(self.name + '-net', [])
               if a.get('OS-EXT-IPS:type') != 'floating']
        prefix = (cidr or self.cidr).rsplit('.', 1)[0] + '.'
        expect(len(ips) == 1 and ips[0].startswith(prefix), 'addresses %r' % o['addresses'])
        if user_data is not None and o.get('OS-EXT-SRV-ATTR:user_data') is not None:
            data = base64.b64decode(o['OS-EXT-SRV-ATTR:user_data'])
            texts = [part.get_payload(decode=True) for part in email.message_from_bytes(data).walk()
                     if not part.is_multipart()]
            expect(user_data.encode() in texts, 'no part of the user data is %r' % user_data)
        self.check_attributes(res, o)
        return api.get('neutron', '/ports?device_id=' + pid)['ports']

    def check(self, res, pid, step):
        v = self.values(step)
        cidr = self.cidr if v['subnet'] == 'subnet' else self.cidr_b
        ports = self.check_server(res, pid, v['flavor'], v['tags'], v['user_data'], cidr)
        subnets = [ip['subnet_id'] for p in ports for ip in p['fixed_ips']]
        expect(subnets == [self.extra_ids[v['subnet']]], 'port subnets %r' % subnets)
        known = self.vm_ports.setdefault(pid, [])
        # a port the instance had before (on the old subnet) is gone
        left = [p for p in known if p not in [q['id'] for q in ports] and self.api.get('neutron', '/ports/' + p)]
        expect(not left, 'the old ports %r are still there' % left)
        known.extend(p['id'] for p in ports if p['id'] not in known)

    def gone(self, res, pid):
        if self.api.get('nova', '/servers/' + pid) is not None:
            return False
        # the port Heat made for SubnetId goes with the instance
        return all(self.api.get('neutron', '/ports/' + p) is None for p in self.vm_ports.get(pid, []))


class Ec2Attach(Ec2):
    """Two AWS::EC2::Instance on ports of the stack's (NetworkInterfaces), a
    volume attached to one, a floating IP associated with its port:

      vm      NetworkInterfaces (`port`), Tags; the update resizes it and
              changes its Tags in place;
      vm_b    NetworkInterfaces (`port_b`): where the replace step moves the
              attachment and the association;
      attach  OS::Cinder::VolumeAttachment of `vol` to `vm` at /dev/vdb (the
              fake driver names it /dev/sdb); every property is
              update_allowed: the replace step's new instance_uuid (vm_b)
              detaches and attaches again in place, the physical id staying
              the volume's (Nova names the attachment after it);
      assoc   OS::Neutron::FloatingIPAssociation of `fip` with `port`; the
              replace step moves it to `port_b` (update_allowed: the same
              physical id, Heat's resource row id).

    Nothing here is replaced: `replace` is the step that moves the
    attachment and the association."""
    short = 'ec2attach'
    types = {'vm': 'AWS::EC2::Instance (NetworkInterfaces)', 'attach': 'OS::Cinder::VolumeAttachment',
             'assoc': 'OS::Neutron::FloatingIPAssociation'}
    updated = ('vm', 'attach', 'assoc')
    replaced = ()
    cidr = '10.81.1.0/24'

    def values(self, step):
        v = super().values(step)
        v['target'] = 'vm_b' if step == 'replace' else 'vm'
        v['port'] = 'port_b' if step == 'replace' else 'port'
        return v

    def template(self, step):
        v = self.values(step)
        resources = self.network()
        resources.update({
            'router': {'type': 'OS::Neutron::Router', 'properties': {
                'external_gateway_info': {'network': 'public'}}},
            'iface': {'type': 'OS::Neutron::RouterInterface', 'properties': {
                'router': {'get_resource': 'router'}, 'subnet': {'get_resource': 'subnet'}}},
            'vol': {'type': 'OS::Cinder::Volume', 'properties': {'size': 1, 'name': self.name + '-vol'}},
            'attach': {'type': 'OS::Cinder::VolumeAttachment', 'properties': {
                'instance_uuid': {'get_resource': v['target']}, 'volume_id': {'get_resource': 'vol'},
                'mountpoint': '/dev/vdb'}},
            # The router interface comes first, as in the port family.
            'fip': {'type': 'OS::Neutron::FloatingIP', 'depends_on': ['iface'], 'properties': {
                'floating_network': 'public'}},
            'assoc': {'type': 'OS::Neutron::FloatingIPAssociation', 'properties': {
                'floatingip_id': {'get_resource': 'fip'}, 'port_id': {'get_resource': v['port']}}},
        })
        for vm, port, tags, flavor in (('vm', 'port', v['tags'], v['flavor']),
                                       ('vm_b', 'port_b', {'role': 'spare'}, SERVER_FLAVORS[0][0])):
            resources[port] = {'type': 'OS::Neutron::Port', 'properties': {
                'network': {'get_resource': 'net'}, 'fixed_ips': [{'subnet': {'get_resource': 'subnet'}}]}}
            resources[vm] = {'type': 'AWS::EC2::Instance', 'properties': {
                'ImageId': 'cloud-test', 'InstanceType': flavor, 'Tags': self.tags(tags),
                'NetworkInterfaces': [{'NetworkInterfaceId': {'get_resource': port}, 'DeviceIndex': '0'}]}}
        return tmpl(resources, self.outputs(['vm']))

    def check(self, res, pid, step):
        v, api = self.values(step), self.api
        if res == 'vm':
            ports = self.check_server(res, pid, v['flavor'], v['tags'])
            expect([p['id'] for p in ports] == [self.extra_ids['port']], 'ports %r' % [p['id'] for p in ports])
        elif res == 'attach':
            vol, server = self.extra_ids['vol'], self.extra_ids[v['target']]
            expect(pid == vol, "physical id %s, want the volume's id %s" % (pid, vol))
            o = (api.get('cinder', '/volumes/' + vol, who=self.who) or {}).get('volume')
            expect(o, 'volume %s missing' % vol)
            expect(o['status'] == 'in-use', 'volume status %r' % o['status'])
            servers = [a['server_id'] for a in o['attachments']]
            expect(servers == [server], 'volume attached to %r, want %r' % (servers, [server]))
            nova = api.get('nova', '/servers/%s/os-volume_attachments' % server)['volumeAttachments']
            got = [(a['volumeId'], a['device']) for a in nova]
            expect(got == [(vol, o['attachments'][0].get('device'))], 'nova attachments %r, cinder %r' % (
                got, o['attachments']))
            if step == 'replace':
                left = api.get('nova', '/servers/%s/os-volume_attachments' % self.extra_ids['vm'])
                expect(not left['volumeAttachments'], 'still on the first server: %r' % left)
            self.devices.append(got[0][1])
        elif res == 'assoc':
            fip = (api.get('neutron', '/floatingips/' + self.extra_ids['fip']) or {}).get('floatingip')
            expect(fip, 'floating ip %s missing' % self.extra_ids['fip'])
            want = self.extra_ids[v['port']]
            expect(fip['port_id'] == want, 'floating ip on port %s, want %s' % (fip['port_id'], want))
            expect(fip['floating_network_id'] == self.run_ctx['public'], 'network %s' % fip['floating_network_id'])
            self.assoc_fip = self.extra_ids['fip']

    def gone(self, res, pid):
        api = self.api
        if res == 'vm':
            return api.get('nova', '/servers/' + pid) is None
        if res == 'attach':
            o = (api.get('cinder', '/volumes/' + pid, who=self.who) or {}).get('volume')
            return o is None or not o['attachments']
        fip = (api.get('neutron', '/floatingips/' + self.assoc_fip) or {}).get('floatingip')
        return fip is None or fip['port_id'] is None


SIGNAL = {'status': 'SUCCESS', 'reason': 'ok', 'data': 'hello', 'id': '1'}


class Swift(Family):
    """A container with container and account metadata (no property of
    OS::Swift::Container is update_allowed: the update step sends the same
    template, the replace step new container metadata), and a signal
    handle with a SwiftSignal the create waits for: while the stack is
    being created this family PUTs SIGNAL to the handle's endpoint (a
    temporary URL, no token). Before the delete step an object is put into
    the container, which PurgeOnDelete must remove."""
    short = 'swift'
    types = {'bucket': 'OS::Swift::Container', 'handle': 'OS::Heat::SwiftSignalHandle',
             'signal': 'OS::Heat::SwiftSignal'}
    updated = ('bucket', 'handle')
    replaced = ('bucket',)
    no_physical_id = ('signal',)

    def values(self, step):
        return {'web': 'index.html' if step != 'replace' else 'home.html', 'account': 'heat-types'}

    def template(self, step):
        v = self.values(step)
        return tmpl({
            'bucket': {'type': 'OS::Swift::Container', 'properties': {
                'X-Container-Meta': {'Web-Index': v['web']}, 'X-Account-Meta': {'Keelson-Test': v['account']},
                'PurgeOnDelete': True}},
            'handle': {'type': 'OS::Heat::SwiftSignalHandle'},
            'signal': {'type': 'OS::Heat::SwiftSignal', 'properties': {
                'handle': {'get_resource': 'handle'}, 'count': 1, 'timeout': 120}},
        }, {'data': {'value': {'get_attr': ['signal', 'data']}},
            'endpoint': {'value': {'get_attr': ['handle', 'endpoint']}}})

    def signal_handle(self, name, sid, timeout=120):
        """PUTs SIGNAL to the handle's endpoint as soon as the handle's
        resource shows it (the stack is still being created)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.api.resource(self.who, name, sid, 'handle') or {}
            endpoint = (r.get('attributes') or {}).get('endpoint')
            if endpoint:
                self.endpoint = endpoint
                status, _, doc = http('PUT', endpoint, SIGNAL)
                expect(status in (200, 201), 'PUT to the endpoint: %s %s' % (status, doc))
                return
            time.sleep(1)
        raise Failed("the handle's resource showed no endpoint in %ss (last: %s %s, attributes %s)" % (
            timeout, r.get('resource_status'), r.get('resource_status_reason'), r.get('attributes')))

    during_create = signal_handle

    def purge_needed(self):
        """An object in the container, so that the delete must purge it."""
        status, _ = self.api.swift(self.who, 'PUT', '/%s/left-behind.txt' % self.ids['bucket'], b'purge me')
        expect(status == 201, 'PUT object: %s' % status)

    before_delete = purge_needed

    def check(self, res, pid, step):
        v, api = self.values(step), self.api
        if res == 'bucket':
            status, h = api.swift(self.who, 'HEAD', '/' + pid)
            expect(status == 204, 'HEAD container %s: %s' % (pid, status))
            expect(h.get('X-Container-Meta-Web-Index') == v['web'],
                   'X-Container-Meta-Web-Index %r' % h.get('X-Container-Meta-Web-Index'))
            status, h = api.swift(self.who, 'HEAD', '')
            expect(h.get('X-Account-Meta-Keelson-Test') == v['account'],
                   'X-Account-Meta-Keelson-Test %r' % h.get('X-Account-Meta-Keelson-Test'))
        elif res == 'handle':
            status, _ = api.swift(self.who, 'HEAD', '/%s/%s' % (self.sid, pid))
            expect(status == 200, "HEAD the handle's object %s/%s: %s" % (self.sid, pid, status))
            shown = getattr(self, 'endpoint', None)
            out = api.outputs(self.who, self.name, self.sid)
            expect(out.get('endpoint') == shown, 'endpoint output %r, the resource showed %r' % (
                out.get('endpoint'), shown))
        elif res == 'signal':
            data = api.outputs(self.who, self.name, self.sid).get('data')
            expect(isinstance(data, str) and json.loads(data) == {'1': 'hello'}, 'data output %r' % (data,))

    def gone(self, res, pid):
        if res == 'bucket':
            return self.api.swift(self.who, 'HEAD', '/' + pid)[0] == 404
        # the handle's object and the signals are in the stack's container
        return self.api.swift(self.who, 'HEAD', '/' + self.sid)[0] == 404


FAMILIES = (Network, Ports, Compute, Servers, Volume, Image, Admin, Identity, Swift, Ec2, Ec2Attach)


# -- one family's steps ----------------------------------------------------------------------------------------
def run_family(fam, out, kind, results):
    api, who = fam.api, fam.who
    fam.ids, fam.egress, fam.attrs, fam.vm_ports, fam.devices = {}, {}, {}, {}, []
    made = {}  # res -> [physical ids ever]

    def record(res, step, ok, why=''):
        results[(fam.types[res], step)] = (ok, why)
        out('%s %s %s %s%s' % (kind, 'PASS' if ok else 'FAIL', fam.types[res], step, ': ' + why if why else ''))

    def settle(step):
        status, reason = api.wait_stack(who, fam.name, fam.sid)
        want = {'create': 'CREATE_COMPLETE', 'update': 'UPDATE_COMPLETE', 'replace': 'UPDATE_COMPLETE'}[step]
        res = api.resources(who, fam.name, fam.sid)
        before = dict(fam.ids)
        fam.extra_ids = {name: r.get('physical_resource_id') for name, r in res.items()}
        for name in fam.types:
            r = res.get(name)
            fam.ids[name] = r.get('physical_resource_id') if r else None
            if fam.ids[name]:
                made.setdefault(name, [])
                if fam.ids[name] not in made[name]:
                    made[name].append(fam.ids[name])
        for name in fam.types:
            r = res.get(name) or {}
            if status != want and not r.get('resource_status', '').endswith('COMPLETE'):
                record(name, step, False, '%s %s: %s (stack %s: %s)' % (
                    name, r.get('resource_status'), r.get('resource_status_reason'), status, reason))
                continue
            try:
                expect(r.get('resource_status', '').endswith('COMPLETE'), '%s %s: %s' % (
                    name, r.get('resource_status'), r.get('resource_status_reason')))
                pid = fam.ids[name]
                expect(pid or name in fam.no_physical_id, 'no physical id')
                if name in fam.no_physical_id:
                    pass
                elif step == 'update' and name in fam.updated:
                    expect(pid == before.get(name), 'replaced (%s -> %s), want an update in place'
                           % (before.get(name), pid))
                if step == 'replace' and name in fam.replaced:
                    expect(pid != before.get(name), 'not replaced (%s)' % pid)
                    expect(fam.gone(name, before[name]), 'the replaced %s is still there' % before[name])
                fam.check(name, pid, step)
                if status != want:
                    raise Failed('stack %s: %s' % (status, reason))
                record(name, step, True)
            except Failed as e:
                record(name, step, False, str(e))
            except Exception as e:
                record(name, step, False, 'check raised %r' % e)

    status, _, doc = api.stack(who, 'POST', '', {'stack_name': fam.name, 'template': fam.template('create'),
                                                   'timeout_mins': 10})
    if status != 201:
        for name in fam.types:
            record(name, 'create', False, 'POST stacks: %s %s' % (status, json.dumps(doc)[:300]))
        return
    fam.sid = doc['stack']['id']
    if hasattr(fam, 'during_create'):
        try:
            fam.during_create(fam.name, fam.sid)
        except Failed as e:
            out('%s ERROR %s during create: %s' % (kind, fam.short, e))
    settle('create')
    for step in ('update', 'replace'):
        status, _, doc = api.stack(who, 'PUT', '/%s/%s' % (fam.name, fam.sid), {
            'template': fam.template(step), 'timeout_mins': 10})
        if status != 202:
            for name in fam.types:
                record(name, step, False, 'PUT stack: %s %s' % (status, json.dumps(doc)[:300]))
            continue
        time.sleep(1)
        settle(step)
    if fam.egress:
        out('%s INFO %s egress rules after each step: %s' % (kind, fam.short, fam.egress))
    if fam.attrs:
        out('%s INFO %s attribute outputs after each step: %s' % (kind, fam.short, fam.attrs))
    if fam.devices:
        out('%s INFO %s attachment devices after each step: %s' % (kind, fam.short, fam.devices))
    if hasattr(fam, 'before_delete'):
        try:
            fam.before_delete()
        except Exception as e:
            out('%s ERROR %s before delete: %r' % (kind, fam.short, e))
    status, _, doc = api.stack(who, 'DELETE', '/%s/%s' % (fam.name, fam.sid))
    if status not in (202, 204):
        for name in fam.types:
            record(name, 'delete', False, 'DELETE stack: %s %s' % (status, doc))
        return
    final, reason = api.wait_stack(who, fam.name, fam.sid)
    for name in fam.types:
        try:
            expect(final in ('GONE', 'DELETE_COMPLETE'), 'stack %s: %s' % (final, reason))
            left = [pid for pid in made.get(name, []) if not fam.gone(name, pid)]
            if name in fam.no_physical_id and not fam.gone(name, None):
                left.append('the assignments')
            expect(not left, 'still in the service: %s' % left)
            record(name, 'delete', True)
        except Failed as e:
            record(name, 'delete', False, str(e))
        except Exception as e:
            record(name, 'delete', False, 'check raised %r' % e)


def prepare(cloud):
    """The external network routers use, and a parent project."""
    public = cloud.neutron('POST', '/v2.0/networks', {'network': {
        'name': 'public', 'router:external': True, 'provider:network_type': 'flat',
        'provider:physical_network': 'physnet1'}})['network']
    cloud.neutron('POST', '/v2.0/subnets', {'subnet': {
        'name': 'public-subnet', 'network_id': public['id'], 'ip_version': 4, 'cidr': '172.24.5.0/24',
        'enable_dhcp': False}})
    for name, vcpus, ram, disk in SERVER_FLAVORS:
        cloud.nova('POST', '/flavors', {'flavor': {'name': name, 'vcpus': vcpus, 'ram': ram, 'disk': disk}})
    parent = cloud.keystone('POST', '/v3/projects', {'project': {
        'name': 'heat-types-parent', 'domain_id': 'default'}})['project']['id']
    return {'public': public['id'], 'parent': parent}


def run_kind(kind, args, out):
    files = FileServer()
    placement = 'keelson' if kind == 'keelson' else args.placement
    cloud = Cloud(placement, computes=0, nodes=1, log=out, orchestration=kind, cinder=True,
                  swift=True)
    # Glance fetches from loopback only when the host is allowed by name.
    cloud.glance_options = {'import_filtering_opts': {'allowed_ports': '[]', 'allowed_hosts': '[127.0.0.1]'}}
    # One compute: the server family's resize stays on its host.
    cloud.nova_options = {'DEFAULT': {'allow_resize_to_same_host': 'true'}}
    results = {}
    try:
        cloud.start()
        ctx = prepare(cloud)
        ctx['image_url'] = files.url
        api = Apis(cloud, kind)
        run = uuid.uuid4().hex[:6]
        for cls in FAMILIES:
            if args.only and cls.short not in args.only:
                continue
            fam = cls(api, run)
            fam.run_ctx = ctx
            t = time.monotonic()
            try:
                run_family(fam, out, kind, results)
            except Exception:
                out('%s ERROR %s: %s' % (kind, cls.short, traceback.format_exc()))
                for name, typ in cls.types.items():
                    for step in ('create', 'update', 'replace', 'delete'):
                        results.setdefault((typ, step), (False, 'the script failed: see above'))
            out('%s: %s took %.0f s' % (kind, cls.short, time.monotonic() - t))
    finally:
        keep = os.path.join(args.keep_logs, kind) if args.keep_logs else None
        cloud.stop(keep_logs=keep)
        files.stop()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--orchestration', action='append', choices=('heat', 'keelson'),
                    help='each given runs in turn (default: keelson, then heat)')
    ap.add_argument('--only', action='append', choices=[f.short for f in FAMILIES],
                    help='only these stacks (repeatable)')
    ap.add_argument('--placement', choices=('keelson', 'python'), default='keelson',
                    help="Placement of the clouds with the real Heat (keelson's always has keelson's)")
    ap.add_argument('--keep-logs', help='every log to DIR/<kind>')
    args = ap.parse_args()

    def out(line):
        print(line, flush=True)

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    kinds = args.orchestration or ['keelson', 'heat']
    by_kind, ok = {}, True
    for kind in kinds:
        try:
            by_kind[kind] = run_kind(kind, args, out)
        except Exception:
            out('%s: FAILED to run: %s' % (kind, traceback.format_exc()))
            by_kind[kind], ok = {}, False
    keys = sorted({k for r in by_kind.values() for k in r})
    out('heat-types summary (%s):' % ' / '.join(kinds))
    for key in keys:
        cells = []
        for kind in kinds:
            got = by_kind[kind].get(key)
            cells.append('%s %s' % (kind, '-' if got is None else 'PASS' if got[0] else 'FAIL'))
        out('  %-36s %-8s %s' % (key[0], key[1], '  '.join(cells)))
    for kind in kinds:
        r = by_kind[kind]
        out('heat-types: %s %d passed, %d failed' % (kind, sum(1 for v in r.values() if v[0]),
                                                     sum(1 for v in r.values() if not v[0])))
    return 0 if ok and all(by_kind.values()) else 1


if __name__ == '__main__':
    sys.exit(main())
