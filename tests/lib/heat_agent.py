#!/usr/bin/env python3
"""A small stand-in for os-collect-config + heat-config, for tests.

It polls a server's metadata (`GET …/resources/<server>/metadata`, the
POLL_SERVER_HEAT transport), runs every deployment config of group
`script` (or `Heat::Ungrouped`) it has not run yet, with each input as an
environment variable (the deploy_* inputs included), and signals the
result (`deploy_stdout`, `deploy_stderr`, `deploy_status_code`) as the
config's `deploy_signal_transport` says: HEAT_SIGNAL posts to
`deploy_signal_id` (the resource's signal endpoint) with a token,
CFN_SIGNAL to the pre-signed `deploy_signal_id` with none.

    heat_agent.py METADATA_URL [--token T] [--interval S] [--once]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def request(method, url, token=None, body=None):
    headers = {'Accept': 'application/json', 'Content-Type': 'application/json'}
    if token:
        headers['X-Auth-Token'] = token
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        raw = r.read().decode()
        return json.loads(raw) if raw else None


def inputs_of(config):
    return {i['name']: i.get('value') for i in config.get('inputs') or []}


def as_env(value):
    if value is None:
        return ''
    if isinstance(value, str):
        return value
    return json.dumps(value)


def run_config(config):
    """(stdout, stderr, status code) of a script config."""
    values = inputs_of(config)
    env = dict(os.environ)
    env.update({k: as_env(v) for k, v in values.items()})
    with tempfile.NamedTemporaryFile('w', suffix='.sh', delete=False) as f:
        f.write(config.get('config') or '')
        path = f.name
    os.chmod(path, 0o700)
    try:
        script = config.get('config') or ''
        cmd = [path] if script.startswith('#!') else ['/bin/sh', path]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        return p.stdout, p.stderr, p.returncode
    finally:
        os.unlink(path)


def signal(config, result, token):
    values = inputs_of(config)
    stdout, stderr, code = result
    body = {'deploy_stdout': stdout, 'deploy_stderr': stderr, 'deploy_status_code': code}
    transport = values.get('deploy_signal_transport')
    url = values.get('deploy_signal_id')
    if transport == 'NO_SIGNAL' or not url:
        return
    verb = values.get('deploy_signal_verb') or 'POST'
    request(verb, url, token=token if transport == 'HEAT_SIGNAL' else None, body=body)


def poll_once(metadata_url, token, done):
    doc = request('GET', metadata_url, token=token)
    for config in (doc.get('metadata') or {}).get('deployments') or []:
        if config['id'] in done or config.get('group') not in ('script', 'Heat::Ungrouped'):
            continue
        result = run_config(config)
        signal(config, result, token)
        done.add(config['id'])
        print('deployed %s (%s): %s' % (config.get('name'), config['id'], result[2]), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('metadata_url')
    ap.add_argument('--token', default='agent-token')
    ap.add_argument('--interval', type=float, default=0.5)
    ap.add_argument('--once', action='store_true')
    args = ap.parse_args()
    done = set()
    while True:
        try:
            poll_once(args.metadata_url, args.token, done)
        except (urllib.error.URLError, OSError, ValueError) as e:
            print('poll failed: %s' % e, file=sys.stderr, flush=True)
        if args.once:
            return
        time.sleep(args.interval)


if __name__ == '__main__':
    main()
