#!/usr/bin/env python3
"""Upstream Heat's functional tests (heat_integrationtests.functional, from
the openstack-heat 27.0.1 wheel, unchanged) against an orchestration
service on the live cloud: the real Heat 27.0.1 or keelson, with the same
cloud and the same test configuration. ./heat-functional is the entry
point (it prepares the virtualenvs).

  heat_functional.py --itest-venv DIR [--orchestration heat|keelson ...]
                     [--selection FILE] [--concurrency 2] [--keep-logs DIR]

Each --orchestration starts a cloud of its own (cloud.py: Keystone,
Glance, real Neutron, Nova with one compute whose one node runs the
Open vSwitch agent, so every port binds, Cinder, Swift, keelson as
Placement) with that
orchestration service (orchestration.py), runs the tests named in the
selection file (default heat-functional-selection.txt: stestr regexes,
one a line) with stestr, prints one line per test

  heat|keelson PASS|FAIL|SKIP <test id>[: first line of the reason]

and stops the cloud. What the tests are given ([heat_plugin] of their
tempest.conf): user heat-tester (member, heat_stack_owner) in project
demo, the cloud's admin, flavors m1.heat_int (1 VCPU, 512 MB, 1 GB) and
m1.heat_micro (1 VCPU, 128 MB, 1 GB), the cloud's image (4 KiB raw, the
fake driver boots anything) as image_ref and minimal_image_ref, the
shared network heat-net with subnet heat-subnet and the external
network public; the tests' Swift client (object_client) finds Swift as
object-store in the catalog, as the orchestration services do
(AwsStackTest's TemplateURLs and SwiftSignalHandle).
Last line: `heat-functional: <kind> P passed, F failed, S skipped` per
kind; the exit status is 0 when every run produced results.
"""
import argparse
import csv
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from cloud import ADMIN_PASSWORD, Cloud, REGION  # noqa: E402
from orchestration import TESTER_PASSWORD  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FLAVORS = (('m1.heat_int', 1, 512, 1), ('m1.heat_micro', 1, 128, 1))


def prepare(cloud):
    """The flavors, networks and image the tests' configuration names."""
    for name, vcpus, ram, disk in FLAVORS:
        cloud.nova('POST', '/flavors', {'flavor': {'name': name, 'vcpus': vcpus, 'ram': ram, 'disk': disk}})
    net = cloud.neutron('POST', '/v2.0/networks', {'network': {
        'name': 'heat-net', 'shared': True, 'provider:network_type': 'vlan',
        'provider:physical_network': 'physnet1'}})['network']
    cloud.neutron('POST', '/v2.0/subnets', {'subnet': {
        'name': 'heat-subnet', 'network_id': net['id'], 'ip_version': 4, 'cidr': '10.20.0.0/24'}})
    public = cloud.neutron('POST', '/v2.0/networks', {'network': {
        'name': 'public', 'router:external': True, 'provider:network_type': 'flat',
        'provider:physical_network': 'physnet1'}})['network']
    cloud.neutron('POST', '/v2.0/subnets', {'subnet': {
        'name': 'public-subnet', 'network_id': public['id'], 'ip_version': 4, 'cidr': '172.24.5.0/24',
        'enable_dhcp': False}})


def tempest_conf(cloud, work):
    image = 'cloud-test'
    sections = {
        'DEFAULT': {'log_file': os.path.join(work, 'tempest.log')},
        'heat_plugin': {
            'auth_url': cloud.url['keystone'] + '/v3', 'auth_version': '3',
            'username': 'heat-tester', 'password': TESTER_PASSWORD, 'project_name': 'demo',
            'admin_username': 'admin', 'admin_password': ADMIN_PASSWORD, 'admin_project_name': 'admin',
            'user_domain_name': 'Default', 'project_domain_name': 'Default', 'region': REGION,
            'instance_type': FLAVORS[0][0], 'minimal_instance_type': FLAVORS[1][0],
            'image_ref': image, 'minimal_image_ref': image,
            'fixed_network_name': 'heat-net', 'fixed_subnet_name': 'heat-subnet',
            'floating_network_name': 'public',
            'convergence_engine_enabled': 'true', 'hidden_stack_tag': 'hidden',
            'build_timeout': '300', 'build_interval': '2',
        },
    }
    etc = os.path.join(work, 'etc')
    os.makedirs(etc)
    from launch import write_conf
    write_conf(os.path.join(etc, 'tempest.conf'), sections)
    return etc


def run_tests(kind, args, out):
    """One cloud with `kind`, the selection run against it: [(status, test, reason)]."""
    work = tempfile.mkdtemp(prefix='kc-heat-itest-')
    cloud = Cloud(args.placement, computes=0, nodes=1, log=out, orchestration=kind, cinder=True, swift=True)
    # One compute: the tests' resizes (flavor updates) stay on its host.
    cloud.nova_options = {'DEFAULT': {'allow_resize_to_same_host': 'true'}}
    results = []
    try:
        cloud.start()
        prepare(cloud)
        etc = tempest_conf(cloud, work)
        site = subprocess.run([os.path.join(args.itest_venv, 'bin', 'python'), '-c',
                               'import heat_integrationtests, os; '
                               'print(os.path.dirname(os.path.dirname(heat_integrationtests.__file__)))'],
                              check=True, capture_output=True, text=True).stdout.strip()
        src = os.path.join(work, 'src')
        shutil.copytree(os.path.join(site, 'heat_integrationtests'), os.path.join(src, 'heat_integrationtests'))
        selection = os.path.join(work, 'selection.txt')
        with open(args.selection) as f, open(selection, 'w') as sel:
            sel.writelines(line for line in f if line.strip() and not line.startswith('#'))
        # PurgeTest runs the operator's tool on the engine's host.
        bin_dir = os.path.join(work, 'bin')
        os.makedirs(bin_dir)
        with open(os.path.join(bin_dir, 'heat-manage'), 'w') as f:
            f.write('#!/bin/sh\nexec %s "$@"\n' % ' '.join(shlex.quote(a) for a in cloud.orchestration.manage_argv()))
        os.chmod(os.path.join(bin_dir, 'heat-manage'), 0o755)
        env = dict(os.environ, TEMPEST_CONFIG_DIR=etc, TEMPEST_CONFIG='tempest.conf',
                   PATH=bin_dir + os.pathsep + os.environ.get('PATH', ''))
        stestr = [os.path.join(args.itest_venv, 'bin', 'stestr'), '--test-path', 'heat_integrationtests/functional',
                  '--top-dir', '.']
        subprocess.run(stestr + ['init'], cwd=src, env=env, capture_output=True, check=True)
        t = time.monotonic()
        with open(os.path.join(work, 'run.log'), 'wb') as log:
            subprocess.run(stestr + ['run', '--concurrency', str(args.concurrency), '--include-list', selection],
                           cwd=src, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout)
        out('%s: the selection ran in %.0f s' % (kind, time.monotonic() - t))
        results = collect(stestr, src, env, work)
        rss = cloud.rss_mib()
        out('%s: rss %.0f MiB in all (%s)' % (kind, sum(rss.values()), ', '.join(
            '%s %.0f' % kv for kv in sorted(rss.items()))))
    finally:
        keep = os.path.join(args.keep_logs, kind) if args.keep_logs else None
        cloud.stop(keep_logs=keep)
        if keep:
            for name in ('run.log', 'tempest.log'):
                if os.path.exists(os.path.join(work, name)):
                    shutil.copy(os.path.join(work, name), keep)
        shutil.rmtree(work, ignore_errors=True)
    return results


def collect(stestr, src, env, work):
    """Per test: (PASS|FAIL|SKIP, id, reason) from stestr's last run."""
    subunit = subprocess.run(stestr + ['last', '--subunit'], cwd=src, env=env, capture_output=True).stdout
    csv_text = subprocess.run([os.path.join(os.path.dirname(stestr[0]), 'subunit2csv')], input=subunit,
                              capture_output=True).stdout.decode('utf-8', 'replace')
    with open(os.path.join(work, 'run.log'), errors='replace') as f:
        log = f.read()
    results = []
    for row in csv.DictReader(csv_text.splitlines()):
        test = re.sub(r'\[.*\]$', '', row['test'])
        status = {'success': 'PASS', 'skip': 'SKIP'}.get(row['status'], 'FAIL')
        reason = ''
        if status != 'PASS':
            reason = reason_of(log, test)
        results.append((status, test, reason))
    return sorted(results, key=lambda r: r[1])


def reason_of(log, test):
    """The last line of the test's traceback (or its skip reason) in stestr's output."""
    at = log.find(test)
    while at >= 0:
        block = log[at:at + 20000]
        end = re.search(r'\n(?:=====|\{\d+\} |Totals)', block[1:])
        block = block[:end.start() + 1] if end else block
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        for line in reversed(lines):
            if re.match(r'^[\w.]+(Error|Exception|Failure|Mismatch|Timeout|Skip\w*|NotFound|Conflict|BadRequest)\b',
                        line) or line.startswith(('testtools.matchers', 'heat_integrationtests', 'AssertionError',
                                                  'Details:', 'skip', 'Skipped')):
                return line[:300]
        at = log.find(test, at + len(test))
    return ''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--itest-venv', required=True, help='the virtualenv of heat_integrationtests and stestr')
    ap.add_argument('--orchestration', action='append', choices=('heat', 'keelson'),
                    help='each given runs in turn (default: heat)')
    ap.add_argument('--placement', choices=('keelson', 'python'), default='keelson')
    ap.add_argument('--selection', default=os.path.join(HERE, 'heat-functional-selection.txt'))
    ap.add_argument('--concurrency', type=int, default=2)
    ap.add_argument('--timeout', type=int, default=5400, help='seconds the whole selection may take')
    ap.add_argument('--keep-logs', help="every log to DIR/<kind>")
    args = ap.parse_args()

    def out(line):
        print(line, flush=True)

    # SIGTERM as Ctrl-C: an exception, so that the cloud is cleaned up.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))
    summary, ok = [], True
    for kind in args.orchestration or ['heat']:
        try:
            results = run_tests(kind, args, out)
        except Exception as e:
            out('%s: FAILED to run: %s' % (kind, e))
            results, ok = [], False
        for status, test, reason in results:
            out('%s %s %s%s' % (kind, status, test, ': ' + reason if reason else ''))
        counts = {s: sum(1 for r in results if r[0] == s) for s in ('PASS', 'FAIL', 'SKIP')}
        ok = ok and bool(results)
        summary.append('%s %d passed, %d failed, %d skipped' % (kind, counts['PASS'], counts['FAIL'],
                                                                counts['SKIP']))
    out('heat-functional: ' + '; '.join(summary))
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
