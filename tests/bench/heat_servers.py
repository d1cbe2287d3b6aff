#!/usr/bin/env python3
"""Servers through orchestration on the live cloud: keelson's stack engine
and the real Heat 27.0.1 side by side, in one run (issue 19's benchmark).

For each orchestration (--orchestration, default keelson then heat) it
starts a cloud of its own (tests/cloud/cloud.py: Keystone, Glance, real
Neutron with its OVS agent, Nova with the fake driver, keelson's
Placement for both, so that only the orchestration differs), then per
shape creates a stack as the cloud's admin, waits for CREATE_COMPLETE,
checks Nova has every server ACTIVE, deletes it and waits until it is
gone:

  servers   one OS::Heat::ResourceGroup of N OS::Nova::Server on the
            shared network heat-net (a port each, bound by the agent),
            placed on the agent's host (the only host ports bind on);
  networks  one ResourceGroup of N nested stacks, each a network, a
            subnet and a server on it.

It reports the wall time from the POST (DELETE) to the terminal status
(polled every second), the engines' peak resident memory over the run
(keelson: the `keelson engine` process; Heat: its two heat-engine
processes together, sampled every 0.5 s), and the ratios Heat/keelson.
The durations are mostly Nova's and Neutron's: both engines drive the same
services, and the figure says what the orchestration adds to them.

usage: tests/bench/heat-servers [--servers 100] [--shapes servers,networks]
                                [--orchestration keelson|heat ...]
                                [--json out.json] [--keep-logs DIR]
KEELSON_BIN: the keelson binary (default target/release/keelson).
"""
import argparse
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'cloud'))

from cloud import Cloud, http  # noqa: E402

FLAVOR = ('bench.tiny', 1, 64, 1)
IMAGE = 'cloud-test'


def template(shape, n, host):
    # Ports bind only on the agent's host (tests/cloud/network.py): the
    # servers are placed there (`nova:<host>`, the admin's forced host), so
    # that no boot depends on how Nova's retries fall across the hosts
    # without an agent.
    zone = 'nova:' + host
    server = {'type': 'OS::Nova::Server', 'properties': {
        'image': IMAGE, 'flavor': FLAVOR[0], 'availability_zone': zone, 'networks': [{'network': 'heat-net'}]}}
    if shape == 'servers':
        member = dict(server, properties=dict(server['properties'], name='bench-vm-%index%'))
        return {'heat_template_version': '2021-04-16', 'resources': {'group': {
            'type': 'OS::Heat::ResourceGroup', 'properties': {'count': n, 'resource_def': member}}}}
    # One network, subnet and server per member: a nested template given inline.
    nested = {'heat_template_version': '2021-04-16',
              'parameters': {'index': {'type': 'number'}},
              'resources': {
                  'net': {'type': 'OS::Neutron::Net'},
                  'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
                      'network': {'get_resource': 'net'}, 'cidr': '10.90.0.0/24', 'enable_dhcp': False}},
                  'server': {'type': 'OS::Nova::Server', 'depends_on': ['subnet'], 'properties': {
                      'image': IMAGE, 'flavor': FLAVOR[0], 'availability_zone': zone,
                      'networks': [{'network': {'get_resource': 'net'}}]}}}}
    return {'heat_template_version': '2021-04-16', 'resources': {'group': {
        'type': 'OS::Heat::ResourceGroup', 'properties': {'count': n, 'resource_def': {
            'type': 'member.yaml', 'properties': {'index': '%index%'}}}}}}, {'member.yaml': json.dumps(nested)}


class PeakRss:
    """Samples the named processes' summed resident memory every 0.5 s."""

    def __init__(self, procs):
        self.procs, self.peak_kib = procs, 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.done.wait(0.5):
            self.peak_kib = max(self.peak_kib, sum(p.rss_kib() for p in self.procs))

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.peak_kib / 1024


def prepare(cloud, n):
    """The flavor, the shared network and quotas that let the admin
    project hold n servers (and n networks)."""
    cloud.nova('POST', '/flavors', {'flavor': {'name': FLAVOR[0], 'vcpus': FLAVOR[1], 'ram': FLAVOR[2],
                                               'disk': FLAVOR[3]}})
    project = cloud.projects['admin']
    cloud.nova('PUT', '/os-quota-sets/' + project, {'quota_set': {
        'instances': -1, 'cores': -1, 'ram': -1}})
    cloud.neutron('PUT', '/v2.0/quotas/' + project, {'quota': {
        'network': -1, 'subnet': -1, 'port': -1}})
    net = cloud.neutron('POST', '/v2.0/networks', {'network': {
        'name': 'heat-net', 'shared': True, 'provider:network_type': 'vlan',
        'provider:physical_network': 'physnet1'}})['network']
    cloud.neutron('POST', '/v2.0/subnets', {'subnet': {
        'name': 'heat-subnet', 'network_id': net['id'], 'ip_version': 4, 'cidr': '10.20.0.0/22',
        'enable_dhcp': False}})


def orchestrate(cloud, method, path, body=None):
    url = '%s/v1/%s/stacks%s' % (cloud.orchestration.url, cloud.projects['admin'], path)
    return http(method, url, body, {'X-Auth-Token': cloud.token('admin')})


def wait_stack(cloud, name, sid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, _, doc = orchestrate(cloud, 'GET', '/%s/%s' % (name, sid))
        if status == 404:
            return 'GONE', ''
        if status == 200 and not doc['stack']['stack_status'].endswith('IN_PROGRESS'):
            return doc['stack']['stack_status'], doc['stack'].get('stack_status_reason') or ''
        time.sleep(1)
    return 'TIMEOUT', 'still in progress after %d s' % timeout


def active_servers(cloud):
    servers = cloud.nova('GET', '/servers/detail?all_tenants=1&limit=1000')['servers']
    return sum(1 for s in servers if s['status'] == 'ACTIVE'), len(servers)


def run_shape(cloud, shape, n, out):
    made = template(shape, n, cloud.network.agent_host)
    tmpl, files = made if isinstance(made, tuple) else (made, {})
    name = 'bench-%s-%d' % (shape, n)
    t0 = time.monotonic()
    status, _, doc = orchestrate(cloud, 'POST', '', {'stack_name': name, 'template': tmpl, 'files': files,
                                                      'timeout_mins': 60})
    if status != 201:
        return {'error': 'POST: %s %s' % (status, json.dumps(doc)[:300])}
    sid = doc['stack']['id']
    final, reason = wait_stack(cloud, name, sid, 3600)
    create_s = time.monotonic() - t0
    active, total = active_servers(cloud)
    out('  %s: %s in %.1f s, Nova: %d of %d servers ACTIVE%s' % (
        shape, final, create_s, active, total, (': ' + reason[:300]) if final != 'CREATE_COMPLETE' else ''))
    t0 = time.monotonic()
    status, _, doc = orchestrate(cloud, 'DELETE', '/%s/%s' % (name, sid))
    gone, reason = wait_stack(cloud, name, sid, 3600) if status in (202, 204) else ('FAILED', str(doc))
    delete_s = time.monotonic() - t0
    left = active_servers(cloud)[1]
    out('  %s: delete %s in %.1f s, %d servers left' % (shape, gone, delete_s, left))
    ok = final == 'CREATE_COMPLETE' and active == n and gone in ('GONE', 'DELETE_COMPLETE') and left == 0
    return {'create_s': round(create_s, 1), 'delete_s': round(delete_s, 1), 'ok': ok,
            'status': final, 'reason': reason[:300]}


def run_kind(kind, args, out):
    cloud = Cloud('keelson', computes=2, nodes=2, log=out, orchestration=kind)
    results = {}
    try:
        cloud.start()
        prepare(cloud, args.servers)
        engines = [p for name, p in cloud.procs.items()
                   if name.startswith('heat-engine') or name == 'keelson-engine']
        for shape in args.shapes.split(','):
            sampler = PeakRss(engines)
            results[shape] = run_shape(cloud, shape, args.servers, out)
            results[shape]['engine_peak_mib'] = round(sampler.stop(), 1)
            out('  %s: %s engines peak RSS %.0f MiB' % (shape, kind, results[shape]['engine_peak_mib']))
    finally:
        keep = os.path.join(args.keep_logs, kind) if args.keep_logs else None
        cloud.stop(keep_logs=keep)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--servers', type=int, default=100)
    ap.add_argument('--shapes', default='servers,networks')
    ap.add_argument('--orchestration', action='append', choices=('keelson', 'heat'))
    ap.add_argument('--json')
    ap.add_argument('--keep-logs')
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))

    def out(line):
        print(line, flush=True)

    kinds = args.orchestration or ['keelson', 'heat']
    by_kind = {}
    for kind in kinds:
        out('%s:' % kind)
        by_kind[kind] = run_kind(kind, args, out)
    out('heat-servers (%d servers):' % args.servers)
    for shape in args.shapes.split(','):
        cells = []
        for kind in kinds:
            r = by_kind[kind].get(shape, {})
            cells.append('%s create %s s, delete %s s, engines %s MiB%s' % (
                kind, r.get('create_s'), r.get('delete_s'), r.get('engine_peak_mib'),
                '' if r.get('ok') else ' (NOT OK: %s)' % (r.get('error') or r.get('reason') or r.get('status'))))
        out('  %-9s %s' % (shape, ' | '.join(cells)))
        k, h = by_kind.get('keelson', {}).get(shape), by_kind.get('heat', {}).get(shape)
        if k and h and k.get('ok') and h.get('ok'):
            out('  %-9s Heat/keelson: create %.2fx, delete %.2fx, engine memory %.1fx' % (
                '', h['create_s'] / k['create_s'], h['delete_s'] / k['delete_s'],
                h['engine_peak_mib'] / k['engine_peak_mib']))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(by_kind, f, indent=2)
    return 0 if all(r.get('ok') for rs in by_kind.values() for r in rs.values()) else 1


if __name__ == '__main__':
    sys.exit(main())
