#!/usr/bin/env python3
"""Run upstream Placement's gabbi files against a live server.

Each YAML file runs in a worker process of its own with a temp dir, a fresh
database, config and policy files, and a server on a free loopback port. The
worker builds the file's fixture over REST (placement_fixtures.py), exports
the fixture's variables for the files' $ENVIRON lookups, runs the tests with
the gabbi library against http://127.0.0.1:PORT and stops the server.

Server command contract: it runs under ``sh -c`` in a session of its own,
with PLACEMENT_CONFIG_FILE (an oslo.config INI), PLACEMENT_BIND and
PLACEMENT_PORT in its environment; it must create its schema on the empty
database, listen there, and exit on SIGTERM.

The YAML files are those shipped in the openstack-placement wheel, fetched
once with ``pip download`` into a cache dir and unzipped unchanged.
"""
import argparse
import concurrent.futures
import glob
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
import urllib.parse
import uuid
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import placement_fixtures  # noqa: E402

PLACEMENT_VERSION = '16.0.0'
GABBITS_IN_WHEEL = 'placement/tests/functional/gabbits/'


def cache_dir():
    default = os.path.join(os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'keelson-conformance')
    return os.environ.get('KEELSON_CONFORMANCE_CACHE') or default


def ensure_gabbits():
    """The wheel's gabbi files, downloaded and unzipped once per cache dir."""
    cache = cache_dir()
    target = os.path.join(cache, 'openstack-placement-%s' % PLACEMENT_VERSION, 'gabbits')
    if os.path.isfile(os.path.join(target, '.complete')):
        return target
    os.makedirs(cache, exist_ok=True)
    pattern = os.path.join(cache, 'openstack_placement-%s-*.whl' % PLACEMENT_VERSION)
    if not glob.glob(pattern):
        subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary', ':all:',
                        '-d', cache, 'openstack-placement==%s' % PLACEMENT_VERSION], check=True, timeout=600)
    wheel = sorted(glob.glob(pattern))[0]
    # Unzip beside the target and rename, so a concurrent or interrupted
    # run never sees half a directory.
    staging = tempfile.mkdtemp(dir=os.path.dirname(target) if os.path.isdir(os.path.dirname(target)) else cache)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.startswith(GABBITS_IN_WHEEL) and member.endswith('.yaml') and '/' not in member[len(
                    GABBITS_IN_WHEEL):]:
                with open(os.path.join(staging, os.path.basename(member)), 'wb') as out:
                    out.write(archive.read(member))
    open(os.path.join(staging, '.complete'), 'w').close()
    os.makedirs(os.path.dirname(target), exist_ok=True)
    try:
        os.rename(staging, target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not os.path.isfile(os.path.join(target, '.complete')):
            raise
    return target


# ---- one file (worker process) ----------------------------------------------


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def ini_value(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, list):
        return ','.join(value)
    return str(value)


def write_config(path, config):
    with open(path, 'w') as out:
        for group, options in config.items():
            out.write('[%s]\n' % group)
            for option, value in options.items():
                out.write('%s = %s\n' % (option, ini_value(value)))
            out.write('\n')


def merged_fixture(names):
    """The fixture data for a file's `fixtures:` list (upstream: one each)."""
    result = {'variables': [], 'config': {}, 'policy': {}, 'steps': []}
    for name in names or ['APIFixture']:
        if name not in placement_fixtures.FIXTURES:
            raise KeyError('no fixture data for %s' % name)
        fixture = placement_fixtures.FIXTURES[name]
        seen = {entry[0] for entry in result['variables']}
        result['variables'] += [entry for entry in fixture['variables'] if entry[0] not in seen]
        for group, options in fixture['config'].items():
            result['config'].setdefault(group, {}).update(options)
        result['policy'].update(fixture['policy'])
        result['steps'] += fixture['steps']
    return result


class Server:

    def __init__(self, command, tmpdir, port):
        self.log_path = os.path.join(tmpdir, 'server.log')
        self.port = port
        env = dict(os.environ, PLACEMENT_CONFIG_FILE=os.path.join(tmpdir, 'placement.conf'),
                   PLACEMENT_BIND='127.0.0.1', PLACEMENT_PORT=str(port))
        with open(self.log_path, 'wb') as log:
            self.proc = subprocess.Popen(['sh', '-c', command], env=env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('server exited with %s before answering' % self.proc.returncode)
            try:
                conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=2)
                conn.request('GET', '/')
                conn.getresponse().read()
                conn.close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError('server did not answer GET / within %ss' % timeout)

    def log_tail(self, chars=4000):
        """The end of the server's output, for error messages."""
        try:
            with open(self.log_path, 'rb') as log:
                return log.read().decode('utf-8', 'replace')[-chars:]
        except OSError:
            return ''

    def stop(self):
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass


def send_fixture_requests(port, fixture, variables):
    for request in placement_fixtures.requests(fixture):
        path = placement_fixtures.substitute(request['path'], variables)
        headers = {'x-auth-token': 'admin', 'accept': 'application/json',
                   'openstack-api-version': 'placement %s' % request['microversion']}
        body = None
        if request['body'] is not None:
            body = json.dumps(placement_fixtures.substitute(request['body'], variables))
            headers['content-type'] = 'application/json'
        conn = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
        try:
            conn.request(request['method'], path, body=body, headers=headers)
            response = conn.getresponse()
            text = response.read().decode('utf-8', 'replace')
        finally:
            conn.close()
        if response.status not in request['expect']:
            raise RuntimeError('fixture request %s %s answered %s (expected %s): %s' % (
                request['method'], path, response.status, request['expect'], text[:2000]))


class RawHttp:
    """Sends a request as given, for tests whose headers httpx refuses.

    basic-http.yaml sends a non-integer Content-Length to see the server's
    400; gabbi's httpx client will not send such a header.
    """

    def request(self, absolute_uri, method, body, headers, redirect, timeout):
        parsed = urllib.parse.urlsplit(absolute_uri)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=timeout)
        try:
            target = parsed.path + ('?' + parsed.query if parsed.query else '')
            has_host = any(name.lower() == 'host' for name in headers)
            conn.putrequest(method, target, skip_host=has_host, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.endheaders()
            if body:
                conn.send(body if isinstance(body, bytes) else body.encode('utf-8'))
            response = conn.getresponse()
            content = response.read()
        finally:
            conn.close()
        result = {name.lower(): value for name, value in response.getheaders()}
        result.update(status=str(response.status), reason=response.reason, http_protocol_version='HTTP/1.1')
        return result, content


def needs_raw_http(test_data):
    for name, value in (test_data.get('request_headers') or {}).items():
        if name.lower() == 'content-length' and not str(value).strip().isdigit():
            return True
    return False


class Collector(unittest.TestResult):
    """Keeps one {file, test, status, message} per gabbi test."""

    def __init__(self, file_name):
        super().__init__()
        self.file_name = file_name
        self.records = []

    def _record(self, test, status, message=''):
        name = getattr(test, 'test_data', {}).get('name', str(test))
        self.records.append({'file': self.file_name, 'test': name, 'status': status, 'message': message})

    def addSuccess(self, test):
        self._record(test, 'passed')

    def addFailure(self, test, err):
        self._record(test, 'failed', self._exc_info_to_string(err, test))

    def addError(self, test, err):
        self._record(test, 'error', self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        self._record(test, 'skipped', reason)

    def addExpectedFailure(self, test, err):
        self._record(test, 'xfail', self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):
        self._record(test, 'unexpected-success')


def build_suite(path, port):
    from gabbi import handlers, suitemaker, utils
    suite_dict = utils.load_yaml(yaml_file=path, safe=True)
    handler_objects = [handler() for handler in handlers.RESPONSE_HANDLERS]
    stem = os.path.splitext(os.path.basename(path))[0]
    suite = suitemaker.test_suite_from_dict(unittest.TestLoader(), stem, suite_dict, os.path.dirname(path),
                                            '127.0.0.1', port, None, None, handlers=handler_objects)
    for test in suite:
        if needs_raw_http(test.test_data):
            test.http = RawHttp()
    return suite


def run_file(path, args):
    """Runs one YAML file; returns its test records."""
    file_name = os.path.basename(path)
    stem = os.path.splitext(file_name)[0]
    with open(path) as source:
        import yaml
        suite_dict = yaml.safe_load(source)
    test_names = [test.get('name', '') for test in suite_dict.get('tests', [])]
    tmpdir = tempfile.mkdtemp(prefix='gabbi-%s-' % stem)
    server = None
    records = []
    try:
        fixture = merged_fixture(suite_dict.get('fixtures'))
        variables, exported = placement_fixtures.values(fixture, lambda: str(uuid.uuid4()))
        port = free_port()
        with open(os.path.join(tmpdir, 'policy.yaml'), 'w') as out:
            json.dump(fixture['policy'], out)  # JSON is YAML
        config = {'placement_database': {'connection': args.db_url_template.format(
            tmpdir=tmpdir, name=stem.replace('-', '_'), port=port)}}
        config.update(fixture['config'])
        config['oslo_policy'] = dict(config.get('oslo_policy', {}), policy_file=os.path.join(tmpdir, 'policy.yaml'))
        write_config(os.path.join(tmpdir, 'placement.conf'), config)
        server = Server(args.server_cmd, tmpdir, port)
        server.wait_ready(args.startup_timeout)
        send_fixture_requests(port, fixture, variables)
        os.environ.update({name: variables[name] for name in exported})
        suite = build_suite(path, port)
        collector = Collector(file_name)
        suite.run(collector)
        records = collector.records
    except Exception:
        message = traceback.format_exc()
        if server is not None:
            message += '\n--- server log tail ---\n' + server.log_tail()
        records = [{'file': file_name, 'test': name, 'status': 'error', 'message': message} for name in test_names]
    finally:
        if server is not None:
            server.stop()
        if args.keep_tmp:
            for record in records:
                record['tmpdir'] = tmpdir
        else:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return records


# ---- the whole run -----------------------------------------------------------


def run_worker(path, args):
    """Runs one file in a fresh interpreter: its own process and environment."""
    fd, result_path = tempfile.mkstemp(suffix='.json')
    os.close(fd)
    command = [sys.executable, os.path.abspath(__file__), '--worker', path, '--worker-result', result_path,
               '--server-cmd', args.server_cmd, '--db-url-template', args.db_url_template,
               '--startup-timeout', str(args.startup_timeout)]
    if args.keep_tmp:
        command.append('--keep-tmp')
    try:
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.file_timeout)
        with open(result_path) as result:
            return json.load(result)
    except (subprocess.TimeoutExpired, ValueError, OSError) as exc:
        output = getattr(exc, 'output', None) or (proc.stdout if 'proc' in locals() else b'')
        message = '%s: worker failed: %s\n%s' % (os.path.basename(path), exc, (output or b'').decode('utf-8',
                                                                                                    'replace')[-3000:])
        with open(path) as source:
            import yaml
            names = [test.get('name', '') for test in yaml.safe_load(source).get('tests', [])]
        return [{'file': os.path.basename(path), 'test': name, 'status': 'error', 'message': message}
                for name in names]
    finally:
        if os.path.exists(result_path):
            os.unlink(result_path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--server-cmd', required=True, help='shell command that starts the server under test')
    parser.add_argument('--db-url-template', default='sqlite:///{tmpdir}/placement.db',
                        help='database URL per file; may use {tmpdir}, {name} (file stem, - as _) and {port}')
    parser.add_argument('-j', '--jobs', type=int, default=3, help='files run at once')
    parser.add_argument('--report', help='write {tests: [{file, test, status, message}]} here')
    parser.add_argument('--only', nargs='*', default=[], help='file names (with or without .yaml) to run')
    parser.add_argument('--gabbits', help='directory of YAML files (default: from the wheel, cached)')
    parser.add_argument('--startup-timeout', type=float, default=60)
    parser.add_argument('--file-timeout', type=float, default=900)
    parser.add_argument('-v', '--verbose', action='store_true', help='print failure messages')
    parser.add_argument('--keep-tmp', action='store_true', help="keep each file's temp dir (config, log)")
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    parser.add_argument('--worker-result', help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        records = run_file(args.worker, args)
        with open(args.worker_result, 'w') as out:
            json.dump(records, out)
        return 0

    directory = args.gabbits or ensure_gabbits()
    paths = sorted(glob.glob(os.path.join(directory, '*.yaml')))
    if args.only:
        wanted = {name if name.endswith('.yaml') else name + '.yaml' for name in args.only}
        paths = [path for path in paths if os.path.basename(path) in wanted]
    started = time.monotonic()
    all_records = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_worker, path, args): path for path in paths}
        for future in concurrent.futures.as_completed(futures):
            records = future.result()
            all_records += records
            counts = {status: sum(1 for r in records if r['status'] == status)
                      for status in ('passed', 'failed', 'error', 'skipped')}
            print('%s: %d passed, %d failed, %d skipped' % (
                os.path.basename(futures[future]), counts['passed'], counts['failed'] + counts['error'],
                counts['skipped']), flush=True)
            if args.verbose:
                for record in records:
                    if record['status'] in ('failed', 'error'):
                        print('  %s: %s' % (record['test'], record['message'][-2000:]), flush=True)
    passed = sum(1 for r in all_records if r['status'] == 'passed')
    skipped = sum(1 for r in all_records if r['status'] == 'skipped')
    failed = len(all_records) - passed - skipped
    print('# %d files in %.0fs' % (len(paths), time.monotonic() - started))
    print('%d passed, %d failed, %d skipped' % (passed, failed, skipped))
    if args.report:
        order = {os.path.basename(path): index for index, path in enumerate(paths)}
        all_records.sort(key=lambda r: order.get(r['file'], 0))
        with open(args.report, 'w') as out:
            json.dump({'tests': all_records}, out, indent=1)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
