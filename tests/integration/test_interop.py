"""keelson and the real Python Placement (openstack-placement 16.0.0)
share databases: a schema created by either is used by the other without
change, and both create the same schema."""
import os
import sqlite3
import subprocess
import tempfile

import pytest

from conftest import AllInOne, BACKENDS, create_database, http, keelson_bin, ref_placement_venv, write_conf

SQL_BACKENDS = [b for b in BACKENDS if b in ('mysql', 'postgresql')] or ['sqlite']
HEAD = 'a082b8bb98d0'


def ref(venv, tool, conf, *args):
    return subprocess.run([os.path.join(venv, 'bin', tool), '--config-file', conf, *args], capture_output=True, text=True,
                          timeout=300)


def keelson(conf, *args):
    return subprocess.run([keelson_bin(), '--config-file', conf, *args], capture_output=True, text=True, timeout=300)


def conf_for(url):
    d = tempfile.mkdtemp(prefix='kt-interop-')
    return write_conf(os.path.join(d, 'placement.conf'), {'placement_database': {'connection': url}})


@pytest.mark.parametrize('backend', SQL_BACKENDS)
def test_keelson_uses_a_database_created_by_placement_manage(backend, procs):
    venv = ref_placement_venv()
    url = create_database(backend, 'pm_to_k')
    conf = conf_for(url)
    r = ref(venv, 'placement-manage', conf, 'db', 'sync')
    assert r.returncode == 0, r.stderr
    assert keelson(conf, 'db', 'version').stdout.strip() == HEAD
    assert keelson(conf, 'status', 'upgrade', 'check').returncode == 0
    aio = AllInOne(procs, url)
    status, _, body = http('GET', aio.url + '/resource_classes')
    assert status == 200
    names = [rc['name'] for rc in body['resource_classes']]
    assert names[:3] == ['VCPU', 'MEMORY_MB', 'DISK_GB'] and len(names) == 21
    assert http('PUT', aio.url + '/resource_classes/CUSTOM_INTEROP')[0] == 201
    assert http('GET', aio.url + '/traits/HW_CPU_X86_AVX2', version='1.6')[0] in (204, 200)


@pytest.mark.parametrize('backend', SQL_BACKENDS)
def test_placement_status_accepts_a_database_created_by_keelson(backend):
    venv = ref_placement_venv()
    url = create_database(backend, 'k_to_pm')
    conf = conf_for(url)
    r = keelson(conf, 'db', 'sync')
    assert r.returncode == 0, r.stderr
    r = ref(venv, 'placement-status', conf, 'upgrade', 'check')
    assert r.returncode == 0, r.stdout + r.stderr
    assert ref(venv, 'placement-manage', conf, 'db', 'version').stdout.strip().endswith(HEAD)
    # And Python's db sync finds nothing to do on it.
    r = ref(venv, 'placement-manage', conf, 'db', 'sync')
    assert r.returncode == 0, r.stderr


def describe(url):
    """A comparable description of a database's schema: columns, indexes,
    unique constraints and foreign keys."""
    if url.startswith('sqlite'):
        path = url.split(':///', 1)[1]
        c = sqlite3.connect(path)
        out = set()
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"):
            for cid, name, ty, notnull, default, pk in c.execute('PRAGMA table_info(%s)' % t):
                out.add(('col', t, name, ty.upper(), bool(notnull) or bool(pk), default))
            for _, iname, unique, origin, _ in c.execute('PRAGMA index_list(%s)' % t):
                cols = tuple(r[2] for r in c.execute('PRAGMA index_info("%s")' % iname))
                # Auto-index names differ by creation order: keep columns only.
                out.add(('index', t, iname if origin == 'c' else 'auto', bool(unique), cols))
            for row in c.execute('PRAGMA foreign_key_list(%s)' % t):
                out.add(('fk', t, row[3], row[2], row[4]))
        return out
    scheme = url.split('://', 1)[0].split('+')[0]
    if scheme == 'mysql':
        import pymysql
        import urllib.parse
        p = urllib.parse.urlparse('x://' + url.split('://', 1)[1])
        db = p.path.lstrip('/')
        conn = pymysql.connect(host=p.hostname, port=p.port or 3306, user=p.username, password=p.password or '', database=db)
        out = set()
        with conn.cursor() as cur:
            cur.execute('SELECT table_name, column_name, column_type, is_nullable, column_default, extra FROM '
                        'information_schema.columns WHERE table_schema = %s', (db,))
            out |= {('col',) + tuple(r) for r in cur.fetchall()}
            cur.execute('SELECT table_name, index_name, non_unique, GROUP_CONCAT(column_name ORDER BY seq_in_index) '
                        'FROM information_schema.statistics WHERE table_schema = %s GROUP BY table_name, index_name, non_unique', (db,))
            out |= {('index',) + tuple(r) for r in cur.fetchall()}
            cur.execute('SELECT table_name, column_name, referenced_table_name, referenced_column_name, constraint_name FROM '
                        'information_schema.key_column_usage WHERE table_schema = %s AND referenced_table_name IS NOT NULL', (db,))
            out |= {('fk',) + tuple(r) for r in cur.fetchall()}
            cur.execute("SELECT table_name, engine, table_collation FROM information_schema.tables WHERE table_schema = %s", (db,))
            out |= {('table',) + tuple(r) for r in cur.fetchall()}
        conn.close()
        return out
    import psycopg2
    import urllib.parse
    p = urllib.parse.urlparse('x://' + url.split('://', 1)[1])
    conn = psycopg2.connect(host=p.hostname, port=p.port or 5432, user=p.username, dbname=p.path.lstrip('/'))
    out = set()
    with conn.cursor() as cur:
        cur.execute("SELECT table_name, column_name, data_type, character_maximum_length, is_nullable, column_default "
                    "FROM information_schema.columns WHERE table_schema = 'public'")
        out |= {('col',) + tuple(r) for r in cur.fetchall()}
        cur.execute("SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
        out |= {('index',) + tuple(r) for r in cur.fetchall()}
        cur.execute("SELECT tc.table_name, tc.constraint_name, tc.constraint_type, kcu.column_name FROM "
                    "information_schema.table_constraints tc JOIN information_schema.key_column_usage kcu "
                    "ON tc.constraint_name = kcu.constraint_name AND tc.table_schema = kcu.table_schema "
                    "WHERE tc.table_schema = 'public'")
        out |= {('constraint',) + tuple(r) for r in cur.fetchall()}
    conn.close()
    return out


@pytest.mark.parametrize('backend', sorted(set(BACKENDS) | {'sqlite'}))
def test_both_create_the_same_schema(backend):
    venv = ref_placement_venv()
    ours = create_database(backend, 'schema_k')
    theirs = create_database(backend, 'schema_pm')
    assert keelson(conf_for(ours), 'db', 'sync').returncode == 0
    assert ref(venv, 'placement-manage', conf_for(theirs), 'db', 'sync').returncode == 0
    a, b = describe(ours), describe(theirs)
    assert a - b == set() and b - a == set(), 'only keelson: %s\nonly placement: %s' % (sorted(a - b), sorted(b - a))
