#!/usr/bin/env python3
"""The SQL statements one allocation write sends: MariaDB's general log
of `PUT /allocations/{new consumer}` (one provider, VCPU and MEMORY_MB,
as tests/bench/load.py writes) through `keelson all-in-one`, each
statement of the write listed in order.

It turns the server's general log on (to a file next to the data) for
the run and off after it: use it on a scratch server, never a busy one.
Only the connections to this run's database are listed.

usage: tests/bench/write_statements.py [--writes 3]

Needs the test virtualenv and a release build of keelson (KEELSON_BIN,
else $CARGO_TARGET_DIR/release/keelson).
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
sys.path.insert(0, HERE)

import conftest  # noqa: E402
from conftest import AllInOne, create_database, http, new_uuid  # noqa: E402
from load import INVENTORY  # noqa: E402


def sql(statement):
    import pymysql
    import urllib.parse
    u = urllib.parse.urlparse(conftest.MYSQL.replace('mysql+pymysql', 'mysql'))
    conn = pymysql.connect(host=u.hostname, port=u.port or 3306, user=u.username or 'root', password=u.password or '')
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            return cur.fetchall()
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--writes', type=int, default=3)
    args = ap.parse_args()
    procs = []
    url = create_database('mysql', 'stmts')
    dbname = url.rsplit('/', 1)[1].split('?')[0]
    datadir = sql('SELECT @@datadir')[0][0]
    log = os.path.join(datadir, 'keelson-write-statements-%d.log' % os.getpid())
    sql("SET GLOBAL log_output = 'FILE'")
    sql("SET GLOBAL general_log_file = '%s'" % log)
    sql('SET GLOBAL general_log = ON')
    try:
        base = AllInOne(procs, url, env={'RUST_LOG': 'warn'}).url
        status, _, rp = http('POST', base + '/resource_providers', {'name': 'stmts-cn'})
        assert status == 200, rp
        status, _, _ = http('PUT', base + '/resource_providers/%s/inventories' % rp['uuid'],
                            {'resource_provider_generation': rp['generation'], 'inventories': INVENTORY})
        assert status == 200
        body = lambda: {'allocations': {rp['uuid']: {'resources': {'VCPU': 1, 'MEMORY_MB': 64}}},  # noqa: E731
                        'project_id': 'load-project', 'user_id': 'load-user', 'consumer_generation': None,
                        'consumer_type': 'INSTANCE'}
        # The first write creates the project, user and type; the rest
        # are the steady state load.py measures.
        http('PUT', base + '/allocations/' + new_uuid(), body())
        time.sleep(0.5)
        mark = os.path.getsize(log)
        for _ in range(args.writes):
            status, _, _ = http('PUT', base + '/allocations/' + new_uuid(), body())
            assert status == 204, status
        time.sleep(0.5)
    finally:
        sql('SET GLOBAL general_log = OFF')
        for p in procs:
            p.stop()
        subprocess.run([sys.executable, os.path.join(HERE, '..', 'lib', 'drop_dbs.py'), dbname, conftest.MYSQL])
    with open(log, errors='replace') as f:
        lines = f.read().splitlines()
    os.unlink(log)
    # Threads connected to this run's database.
    ours = set()
    for line in lines:
        m = re.search(r'\s(\d+)\s+Connect\s+\S+ on (\S+)', line)
        if m and m.group(2) == dbname:
            ours.add(m.group(1))
    size = 0
    steady = []
    for line in lines:
        size += len(line) + 1
        if size <= mark:
            continue
        m = re.match(r'^(?:\d{6}\s+[\d:]+\s+)?\s*(\d+)\s+(\w+(?: \w+)?)\t?(.*)$', line.strip())
        if m and m.group(1) in ours and m.group(2) not in ('Connect', 'Quit'):
            steady.append('%s %-8s %s' % (m.group(1), m.group(2), m.group(3)[:160]))
    print('\n'.join(steady))
    # A connection prepares a statement once and runs it many times.
    executed = [s for s in steady if ' Prepare ' not in s]
    print('\n%d statements run (BEGIN and COMMIT included; prepares and pings not) for %d writes: %.1f per write'
          % (len(executed), args.writes, len(executed) / args.writes))


if __name__ == '__main__':
    main()
