#!/usr/bin/env python3
"""Load through the gateway: requests per second and latency percentiles
of keelson's Placement API at 16, 64 and 256 concurrent clients.

It starts the services as separate processes on loopback, as the Helm
chart runs them (`keelson db sync`, then `keelson inventory`,
`keelson candidates` and one `keelson gateway` in front of them), on a
fresh database; or, with --all-in-one, `keelson all-in-one` on that
database. It creates a fleet (--providers compute nodes with VCPU,
MEMORY_MB and DISK_GB, --allocations existing allocations), then runs wrk
(one thread, loopback) for --seconds at each concurrency against:

  read mix   GET /resource_providers and GET /allocation_candidates
             (VCPU:1, MEMORY_MB:512, DISK_GB:10; no limit: one candidate
             per provider), alternately on every connection
  write      PUT /allocations/{new consumer}, the providers in turn
  move       POST /allocations as Nova writes a move: each consumer the
             write run wrote takes resources of the provider half the
             fleet away at its generation, a new migration consumer the
             source's
  delete     DELETE /allocations/{consumer}: the move run's migrations,
             then the write run's consumers
  (move and delete need write; at each level they run in this order, the
  write run for three times --seconds when delete follows, and the level's
  consumers are deleted after it, so every level starts from the same
  --allocations)

and prints one table. A benchmark, not a test: nothing is asserted, and
CI does not run it.

With --breakdown (MariaDB), each row also shows where a request's time
went: CPU seconds of each keelson process, of mariadbd and of wrk per
successful request, and the MariaDB server's counters per request
(statements by kind, pings, commits, redo log fsyncs, row lock waits and
their time) from SHOW GLOBAL STATUS before and after the row. The
counters are the server's: anything else using it during the row is
counted too.

usage: tests/bench/load.py [--backend mysql|postgresql|sqlite]
          [--providers 200] [--allocations 1000] [--seconds 10]
          [--clients 16,64,256] [--all-in-one] [--json out.json]
          [--workloads read,write,move,delete] [--breakdown]

Needs wrk (Debian package `wrk`: apt-get install -y wrk), the test
virtualenv (tests/run sets it up) and a release build of keelson
(KEELSON_BIN, else $CARGO_TARGET_DIR/release/keelson).
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))

import conftest  # noqa: E402  (shared helpers: processes, databases, ports)
from conftest import (AllInOne, Proc, create_database, free_port, http, keelson_bin, new_uuid, wait_http,  # noqa: E402
                      wait_port, write_conf)

READ_LUA = r'''
local paths = {"/resource_providers", "/allocation_candidates?resources=VCPU:1,MEMORY_MB:512,DISK_GB:10"}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", paths[(n %% 2) + 1])
end
'''

PUT_LUA = r'''
-- New consumers numbered per run, so that the run's allocations can be
-- removed afterwards and every concurrency level starts from the same fleet.
-- Consumer n goes to provider n (mod the fleet): the move and delete runs
-- that follow know where each consumer is without asking.
local providers = {%(providers)s}
%(counter)s
request = function()
  n = n + 1
  local rp = providers[(n %% #providers) + 1]
  local body = '{"allocations": {"' .. rp .. '": {"resources": {"VCPU": 1, "MEMORY_MB": 64}}}, ' ..
    '"project_id": "load-project", "user_id": "load-user", "consumer_generation": null, "consumer_type": "INSTANCE"}'
  return wrk.format("PUT", "/allocations/" .. string.format("%%08x-0000-4000-8000-%%012x", %(run)d, n), nil, body)
end
'''

# Nova's move as it writes it (a cold migration's or resize's claim on the
# destination): one POST /allocations that gives the instance the
# destination's resources (its generation, 1 after the PUT run) and a new
# migration consumer the source's. Consumer n of the PUT run moves to the
# provider half the fleet away, so that the moves in flight at once (fewer
# than half the fleet) touch different providers, as Nova's moves to hosts
# its scheduler picked mostly do. After the last consumer written it starts again from the
# first, whose generation is then 2: such a second move is refused (409,
# counted as non-2xx); the PUT run writes more than a move run moves.
MOVE_LUA = r'''
local providers = {%(providers)s}
local written = %(written)d
%(counter)s
request = function()
  n = n %% written + 1
  local source = providers[(n %% #providers) + 1]
  local dest = providers[((n + math.floor(#providers / 2)) %% #providers) + 1]
  local instance = string.format("%%08x-0000-4000-8000-%%012x", %(run)d, n)
  local migration = string.format("%%08x-0000-4000-9000-%%012x", %(run)d, n)
  local body = '{"' .. instance .. '": {"allocations": {"' .. dest .. '": {"resources": {"VCPU": 1, "MEMORY_MB": 64}}}, ' ..
    '"project_id": "load-project", "user_id": "load-user", "consumer_generation": 1, "consumer_type": "INSTANCE"}, ' ..
    '"' .. migration .. '": {"allocations": {"' .. source .. '": {"resources": {"VCPU": 1, "MEMORY_MB": 64}}}, ' ..
    '"project_id": "load-project", "user_id": "load-user", "consumer_generation": null, "consumer_type": "MIGRATION"}}'
  return wrk.format("POST", "/allocations", nil, body)
end
'''

# DELETE /allocations/{consumer}: the move run's migrations (a confirmed
# move), then the PUT run's instances (deleted servers), in order. Past the
# last one it asks for the last again (404, counted as non-2xx).
DELETE_LUA = r'''
local written, moved = %(written)d, %(moved)d
%(counter)s
request = function()
  n = n + 1
  local kind, k = "4000-9000", n
  if n > moved then kind, k = "4000-8000", math.min(n - moved, written) end
  return wrk.format("DELETE", "/allocations/" .. string.format("%%08x-0000-%%s-%%012x", %(run)d, kind, k))
end
'''

# wrk calls request() once before it sends anything, to check the script
# (script_verify_request): each write script starts counting at -1 so
# that the number that call takes, 0, is the one never sent.
WASTED_FIRST = 'local n = -1'

# Appended to every write script: the first refusal's status and body, so
# that a run whose requests fail says why.
FIRST_REFUSAL_LUA = r'''
local told = false
response = function(status, headers, body)
  if status >= 300 and not told then
    told = true
    io.write("first non-2xx: " .. status .. " (near request " .. n .. ") " .. string.sub(body, 1, 300) .. "\n")
  end
end
'''

INVENTORY = {'VCPU': {'total': 1000000, 'max_unit': 64}, 'MEMORY_MB': {'total': 100000000, 'max_unit': 1000000},
             'DISK_GB': {'total': 1000000, 'max_unit': 10000}}


def wrk(url, seconds, connections, script, watch=None):
    """One wrk run. `watch`: {name: pid} of processes whose CPU seconds
    during the run are answered as 'cpu' (wrk's own as 'wrk')."""
    args = ['wrk', '-t1', '-c%d' % connections, '-d%ds' % seconds, '--latency', '--timeout', '10s',
            '-H', 'x-auth-token: admin', '-H', 'openstack-api-version: placement 1.39',
            '-H', 'content-type: application/json', '-s', script, url + '/']
    watch = watch or {}
    before = {name: cpu_seconds(pid) for name, pid in watch.items()}
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    wrk_cpu = 0.0
    while proc.poll() is None:
        wrk_cpu = max(wrk_cpu, cpu_seconds(proc.pid))
        time.sleep(0.2)
    out = proc.communicate(timeout=seconds + 120)[0]
    cpu = {name: cpu_seconds(pid) - before[name] for name, pid in watch.items()}

    def ms(p):
        m = re.search(r'\s%s%%\s+([\d.]+)(us|ms|s)\b' % p, out)
        if not m:
            return float('nan')
        value, unit = float(m.group(1)), m.group(2)
        return value / 1000 if unit == 'us' else value * 1000 if unit == 's' else value

    rps = re.search(r'Requests/sec:\s+([\d.]+)', out)
    total = re.search(r'(\d+) requests in', out)
    non2xx = re.search(r'Non-2xx or 3xx responses: (\d+)', out)
    sock = re.search(r'Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)', out)
    return {'rps': float(rps.group(1)) if rps else 0.0, 'requests': int(total.group(1)) if total else 0,
            'p50_ms': ms(50), 'p90_ms': ms(90), 'p99_ms': ms(99),
            'non_2xx': int(non2xx.group(1)) if non2xx else 0,
            'socket_errors': sum(int(x) for x in sock.groups()) if sock else 0, 'raw': out,
            'cpu': dict(cpu, wrk=wrk_cpu)}


def print_breakdown(r, status_before, status_after):
    """A row's cost per successful request: CPU by process, MariaDB's counters."""
    ok = r['requests'] - r['non_2xx']
    if ok <= 0:
        return
    cpu = '  '.join('%s %.2f ms' % (name, 1000 * sec / ok) for name, sec in r['cpu'].items())
    print('      CPU per request: %s (wrk: at least; it was sampled)' % cpu)
    if status_before:
        delta = {k: status_after[k] - status_before[k] for k in STATUS_COUNTERS}
        r['mysql_per_request'] = {k: v / ok for k, v in delta.items()}
        print('      MariaDB per request: ' + '  '.join('%s %.2f' % (k, v / ok) for k, v in delta.items()))


# MariaDB counters a --breakdown row reports per request.
STATUS_COUNTERS = ('Com_stmt_execute', 'Com_select', 'Com_insert', 'Com_update', 'Com_delete', 'Com_begin',
                   'Com_commit', 'Com_rollback', 'Com_admin_commands', 'Innodb_os_log_fsyncs',
                   'Innodb_row_lock_waits', 'Innodb_row_lock_time', 'Binlog_group_commits',
                   # What the statements cost the server: prepares, rows read by
                   # index and by scan, temporary tables, table opens.
                   'Com_stmt_prepare', 'Com_stmt_close', 'Handler_read_key', 'Handler_read_next',
                   'Handler_read_rnd_next', 'Innodb_rows_read', 'Select_scan', 'Created_tmp_tables',
                   'Opened_tables', 'Table_open_cache_misses')


def mysql_status():
    """The MariaDB server's STATUS_COUNTERS now."""
    import pymysql
    u = urllib.parse.urlparse(conftest.MYSQL.replace('mysql+pymysql', 'mysql'))
    conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or 'root', password=u.password or '')
    try:
        with conn.cursor() as cur:
            cur.execute('SHOW GLOBAL STATUS')
            values = dict(cur.fetchall())
    finally:
        conn.close()
    return {k: int(values.get(k, 0)) for k in STATUS_COUNTERS}


def cpu_seconds(pid):
    """User + system CPU seconds of a process and its threads so far."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, IndexError, ValueError):
        return 0.0


def server_pids(name):
    out = subprocess.run(['pgrep', '-x', name], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out]


def start_mesh(procs, url, workdir, database=None):
    """db sync, inventory, candidates, one gateway; answers the gateway's
    Placement URL. `database`: more [placement_database] options."""
    env = {'RUST_LOG': 'warn'}
    inv, cand, p_port, o_port = free_port(), free_port(), free_port(), free_port()
    conf = write_conf(os.path.join(workdir, 'keelson.conf'), {
        'placement_database': dict(database or {}, connection=url),
        'api': {'auth_strategy': 'noauth2'},
        'orchestration': {'auth_strategy': 'noauth'},
        'keelson': {'inventory_listen': '127.0.0.1:%d' % inv, 'candidates_listen': '127.0.0.1:%d' % cand,
                    'inventory_endpoint': 'http://127.0.0.1:%d' % inv, 'candidates_endpoint': 'http://127.0.0.1:%d' % cand,
                    'placement_listen': '127.0.0.1:%d' % p_port, 'orchestration_listen': '127.0.0.1:%d' % o_port,
                    # No stack engine runs: the gateway's engine channel is
                    # lazy and this benchmark never uses it.
                    'engine_endpoints': 'http://127.0.0.1:%d' % free_port()},
    })
    sync = subprocess.run([keelson_bin(), '--config-file', conf, 'db', 'sync'], capture_output=True, text=True, cwd=workdir)
    if sync.returncode != 0:
        sys.exit('keelson db sync failed:\n' + sync.stdout + sync.stderr)
    for command, port in (('inventory', inv), ('candidates', cand)):
        p = Proc([keelson_bin(), '--config-file', conf, command], env=env, cwd=workdir)
        procs.append(p)
        wait_port(port, proc=p)
    g = Proc([keelson_bin(), '--config-file', conf, 'gateway'], env=env, cwd=workdir)
    procs.append(g)
    base = 'http://127.0.0.1:%d' % p_port
    wait_http(base + '/', proc=g)
    return base


def populate(base, providers, allocations):
    rps = []
    for i in range(providers):
        status, _, rp = http('POST', base + '/resource_providers', {'name': 'load-cn-%04d' % i})
        assert status == 200, (status, rp)
        status, _, inv = http('PUT', base + '/resource_providers/%s/inventories' % rp['uuid'], {
            'resource_provider_generation': rp['generation'], 'inventories': INVENTORY})
        assert status == 200, (status, inv)
        rps.append(rp['uuid'])

    def claim(i):
        rp = rps[i % len(rps)]
        status, _, body = http('PUT', base + '/allocations/' + new_uuid(), {
            'allocations': {rp: {'resources': {'VCPU': 2, 'MEMORY_MB': 2048, 'DISK_GB': 20}}},
            'project_id': 'load-project', 'user_id': 'load-user', 'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        return status

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(claim, range(allocations)))
    bad = [s for s in statuses if s != 204]
    if bad:
        sys.exit('%d of %d set-up allocations failed: %s' % (len(bad), allocations, sorted(set(bad))))
    return rps


def remove_run(base, run, count):
    """Deletes the allocations of one level's consumers, instances and
    migrations (bounded: the numbers wrk can have used)."""
    def delete(consumer):
        return http('DELETE', base + '/allocations/' + consumer)[0]

    consumers = ['%08x-0000-4000-%s-%012x' % (run, kind, n) for kind in ('8000', '9000') for n in range(1, count + 1)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(delete, consumers))
    bad = [s for s in statuses if s not in (204, 404)]
    if bad:
        print('  warning: %d deletes answered %s' % (len(bad), sorted(set(bad))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--backend', default='mysql')
    ap.add_argument('--providers', type=int, default=200)
    ap.add_argument('--allocations', type=int, default=1000)
    ap.add_argument('--seconds', type=int, default=10)
    ap.add_argument('--clients', default='16,64,256')
    ap.add_argument('--all-in-one', action='store_true', help='keelson all-in-one instead of separate processes')
    ap.add_argument('--json')
    ap.add_argument('--max-pool-size', type=int, help='[placement_database] max_pool_size (default: keelson\'s, 16)')
    ap.add_argument('--workloads', default='read,write',
                    help='read, write, move, delete (comma-separated; move and delete need write)')
    ap.add_argument('--breakdown', action='store_true',
                    help='CPU per process and MariaDB counters per request (see above)')
    args = ap.parse_args()
    workloads = [{'read': 'read mix', 'write': 'write', 'move': 'move', 'delete': 'delete'}[w]
                 for w in args.workloads.split(',')]
    if ('move' in workloads or 'delete' in workloads) and 'write' not in workloads:
        sys.exit('move and delete act on the consumers of the write run: add write to --workloads')
    # In this order at each level: the move and delete runs use what the
    # write run wrote.
    workloads.sort(key=['read mix', 'write', 'move', 'delete'].index)
    if not shutil.which('wrk'):
        sys.exit('wrk is not installed: apt-get install -y wrk (Debian package wrk)')
    levels = [int(c) for c in args.clients.split(',')]

    procs = []
    workdir = tempfile.mkdtemp(prefix='kb-load-')
    try:
        url = create_database(args.backend, 'load')
        database = {'max_pool_size': str(args.max_pool_size)} if args.max_pool_size else {}
        if args.all_in_one:
            base = AllInOne(procs, url, extra={'placement_database': database}, env={'RUST_LOG': 'warn'}).url
        else:
            base = start_mesh(procs, url, workdir, database)
        t = time.monotonic()
        rps = populate(base, args.providers, args.allocations)
        print('fleet: %d providers, %d allocations (%.1fs); %s on %s; %d CPUs; load average %s'
              % (args.providers, args.allocations, time.monotonic() - t,
                 'all-in-one' if args.all_in_one else 'inventory + candidates + gateway processes', args.backend,
                 os.cpu_count(), ' '.join('%.2f' % x for x in os.getloadavg())))
        read_lua = os.path.join(workdir, 'read.lua')
        with open(read_lua, 'w') as f:
            f.write(READ_LUA % {})
        results = []
        watch = {}
        if args.breakdown:
            # Named by subcommand: all-in-one, or inventory, candidates, gateway.
            watch = {'keelson ' + p.p.args[-1]: p.p.pid for p in procs}
            if args.backend == 'mysql':
                watch.update({'mariadbd': pid for pid in server_pids('mariadbd')[:1]})
        for c in levels:
            written = moved = 0
            for name in workloads:
                script = read_lua
                if name != 'read mix':
                    script = os.path.join(workdir, '%s-%d.lua' % (name, c))
                    lua = {'write': PUT_LUA, 'move': MOVE_LUA, 'delete': DELETE_LUA}[name]
                    with open(script, 'w') as f:
                        f.write(lua % {'run': c, 'providers': ', '.join('"%s"' % u for u in rps),
                                       'written': max(written, 1), 'moved': moved, 'counter': WASTED_FIRST}
                            + FIRST_REFUSAL_LUA)
                status_before = mysql_status() if args.breakdown and args.backend == 'mysql' else None
                # The delete run must not run out of consumers: the write
                # run before it writes for three times as long (a DELETE
                # costs less than a PUT).
                seconds = args.seconds * 3 if name == 'write' and 'delete' in workloads else args.seconds
                r = wrk(base, seconds, c, script, watch)
                status_after = mysql_status() if status_before else None
                r.update({'workload': name, 'clients': c})
                if name == 'write':
                    # The last `c` numbered may not have been answered.
                    written = max(r['requests'] - c, 0)
                    issued = r['requests'] + c + 16
                elif name == 'move':
                    moved = min(max(r['requests'] - c, 0), written)
                results.append(r)
                print('  %-9s %4d clients: %8.0f req/s  p50 %8.1f  p90 %8.1f  p99 %8.1f ms  non-2xx %d  socket errors %d'
                      % (name, c, r['rps'], r['p50_ms'], r['p90_ms'], r['p99_ms'], r['non_2xx'], r['socket_errors']),
                      flush=True)
                refusal = re.search(r'first non-2xx: (.*)', r['raw'])
                if refusal:
                    print('      first non-2xx: ' + refusal.group(1))
                if args.breakdown:
                    print_breakdown(r, status_before, status_after)
            if 'write' in workloads:
                remove_run(base, c, issued)
        print('\n| workload | clients | req/s | p50 | p90 | p99 | non-2xx / socket errors |')
        print('|---|---:|---:|---:|---:|---:|---:|')
        for r in results:
            what = {'read mix': '`GET /resource_providers` + `GET /allocation_candidates`',
                    'write': '`PUT /allocations/{consumer}`', 'move': '`POST /allocations` (a move: 2 consumers)',
                    'delete': '`DELETE /allocations/{consumer}`'}[r['workload']]
            print('| %s | %d | %.0f | %.1f ms | %.1f ms | %.1f ms | %d / %d |'
                  % (what, r['clients'], r['rps'], r['p50_ms'], r['p90_ms'], r['p99_ms'], r['non_2xx'], r['socket_errors']))
        print('load average after: %s' % ' '.join('%.2f' % x for x in os.getloadavg()))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump({'meta': {'backend': args.backend, 'providers': args.providers, 'allocations': args.allocations,
                                    'seconds': args.seconds, 'all_in_one': args.all_in_one, 'cpus': os.cpu_count()},
                           'results': [{k: v for k, v in r.items() if k != 'raw'} for r in results]}, f, indent=2)
    finally:
        for p in procs:
            p.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        if args.backend in ('mysql', 'postgresql'):
            server = conftest.MYSQL if args.backend == 'mysql' else conftest.POSTGRES
            subprocess.run([sys.executable, os.path.join(HERE, '..', 'lib', 'drop_dbs.py'), 'kt_%s_load' % conftest.RUN_ID, server])


if __name__ == '__main__':
    main()
