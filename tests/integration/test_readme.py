"""The README's quick-start lines, run as written against all-in-one.

The block after the two set-up commands is taken from README.md and run
by bash in an empty directory, with the `openstack` CLI of the test
virtualenv on PATH. The only change made to the lines is the ports: the
harness's all-in-one listens on free ports instead of 8778 and 8004. Every
curl answer must be a 2xx JSON document (`curl` itself exits 0 on a 404,
so its status is checked here), every other line must exit 0."""
import json
import os
import re
import subprocess
import sys
import tempfile

from conftest import ROOT, AllInOne, create_database


def quick_start_block():
    with open(os.path.join(ROOT, 'README.md')) as f:
        text = f.read()
    after = text.split('\nThen:\n', 1)[1]
    match = re.search(r'```sh\n(.*?)```', after, re.S)
    assert match, 'no sh block after "Then:" in README.md'
    return match.group(1)


def commands(block):
    """The block's commands: one per line, a heredoc kept with its body."""
    lines = block.splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        heredoc = re.search(r"<<'?(\w+)'?", line)
        if heredoc:
            body = []
            while lines[i] != heredoc.group(1):
                body.append(lines[i])
                i += 1
            i += 1
            line = '\n'.join([line] + body + [heredoc.group(1)])
        out.append(line)
    return out


def test_quick_start_runs_as_written(procs):
    aio = AllInOne(procs, create_database('sqlite', 'readme'))
    placement = aio.url.split('://', 1)[1]
    orchestration = aio.orchestration_url().split('://', 1)[1]
    workdir = tempfile.mkdtemp(prefix='kt-readme-')
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get('PATH', ''))
    exports = []
    ran = 0
    for command in commands(quick_start_block()):
        command = command.replace('127.0.0.1:8778', placement).replace('127.0.0.1:8004', orchestration)
        if command.startswith('export '):
            exports.append(command)
            continue
        run = command
        if command.startswith('curl '):
            run = command.replace('curl ', "curl -sS -o body.json -w '%{http_code}' --max-time 30 ", 1)
        script = '\n'.join(['set -e'] + exports + [run])
        p = subprocess.run(['bash', '-c', script], cwd=workdir, env=env, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, '%s\nstdout: %s\nstderr: %s' % (command, p.stdout, p.stderr)
        if command.startswith('curl '):
            assert p.stdout.startswith('2'), '%s answered %s' % (command, p.stdout)
            with open(os.path.join(workdir, 'body.json')) as f:
                json.load(f)
        ran += 1
    # Two curl lines, the template, three openstack lines.
    assert ran >= 6, ran
