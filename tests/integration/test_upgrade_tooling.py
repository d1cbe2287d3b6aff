"""Upgrade tooling as operators' automation expects it: `keelson status
upgrade check` and `keelson db online_data_migrations` against the real
`placement-status upgrade check` and `placement-manage db
online_data_migrations` of openstack-placement 16.0.0, on databases built
by the real `placement-manage db sync` and put into the states older
releases left behind (allocations without consumer records, providers
without root provider ids, a JSON policy file, an older schema revision).

Keelson's details name `keelson db online_data_migrations` where
upstream's name `placement-manage db online_data_migrations`; keelson adds
one check of its own, last ("Keelson Database Schema")."""
import os
import re
import subprocess
import tempfile

import pytest

from conftest import BACKENDS, create_database, execute, keelson_bin, query, ref_placement_venv, write_conf

ALL_BACKENDS = sorted(set(BACKENDS) | {'sqlite'})
UPSTREAM_CHECKS = ['Missing Root Provider IDs', 'Incomplete Consumers', 'Policy File JSON to YAML Migration']
KEELSON_CHECK = 'Keelson Database Schema'
INCOMPLETE_ID = '00000000-0000-0000-0000-000000000000'


# -- databases -------------------------------------------------------------

def conf_for(url, policy=None):
    d = tempfile.mkdtemp(prefix='kt-upgrade-')
    sections = {'placement_database': {'connection': url}}
    if policy is not None:
        name, text = policy
        with open(os.path.join(d, name), 'w') as f:
            f.write(text)
        sections['oslo_policy'] = {'policy_file': name}
    return write_conf(os.path.join(d, 'placement.conf'), sections)


_venv = []


def venv():
    """The reference venv, set up once per module."""
    if not _venv:
        _venv.append(ref_placement_venv())
    return _venv[0]


def ref(tool, conf, *args):
    return subprocess.run([os.path.join(venv(), 'bin', tool), '--config-file', conf, *args], capture_output=True,
                          text=True, timeout=300)


def keelson(conf, *args):
    return subprocess.run([keelson_bin(), '--config-file', conf, *args], capture_output=True, text=True, timeout=300)


def ref_upgrade_to(conf, revision):
    """The real alembic chain of placement 16.0.0, up to `revision`."""
    script = ('import sys\n'
              'from oslo_config import cfg\n'
              'from placement import conf, db_api\n'
              'from placement.db.sqlalchemy import migration\n'
              'c = cfg.ConfigOpts(); conf.register_opts(c)\n'
              "c(['--config-file', sys.argv[1]], project='placement'); db_api.configure(c)\n"
              'migration.upgrade(sys.argv[2])\n')
    r = subprocess.run([os.path.join(venv(), 'bin', 'python'), '-c', script, conf, revision], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr


_names = iter(range(10**6))


def synced_database(backend, revision=None):
    """A database made by the real placement-manage db sync (or its alembic
    chain up to `revision`)."""
    url = create_database(backend, 'upg%d' % next(_names))
    conf = conf_for(url)
    if revision is None:
        r = ref('placement-manage', conf, 'db', 'sync')
        assert r.returncode == 0, r.stderr
    else:
        ref_upgrade_to(conf, revision)
    return url


def rp_uuid(i):
    return 'aaaaaaaa-0000-4000-8000-%012d' % i


def consumer_uuid(i):
    return 'cccccccc-0000-4000-8000-%012d' % i


def add_old_providers(url, count, first=1):
    """Providers as releases before the root provider id wrote them."""
    execute(url, *[("INSERT INTO resource_providers (id, uuid, name, generation) VALUES (?, ?, ?, 0)",
                    (i, rp_uuid(i), 'rp%d' % i)) for i in range(first, first + count)])


def add_rooted_provider(url, i):
    execute(url, ("INSERT INTO resource_providers (id, uuid, name, generation, root_provider_id) VALUES (?, ?, ?, 0, ?)",
                  (i, rp_uuid(i), 'rp%d' % i, i)))


def add_old_allocations(url, consumers, rp=1):
    """Allocations whose consumer has no record (before microversion 1.8
    and Rocky): two resource classes each, so consumers repeat."""
    execute(url, *[("INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) "
                    "VALUES (?, ?, ?, 1)", (rp, consumer_uuid(c), rc)) for c in consumers for rc in (0, 1)])


def add_complete_consumer(url, c, rp=1):
    execute(url,
            ("INSERT INTO projects (id, external_id) VALUES (?, ?)", (100 + c, 'project-%d' % c)),
            ("INSERT INTO users (id, external_id) VALUES (?, ?)", (100 + c, 'user-%d' % c)),
            ("INSERT INTO consumers (uuid, project_id, user_id, generation, created_at) "
             "VALUES (?, ?, ?, 0, CURRENT_TIMESTAMP)",
             (consumer_uuid(c), 100 + c, 100 + c)),
            ("INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) VALUES (?, ?, 0, 1)",
             (rp, consumer_uuid(c))))


def snapshot(url):
    """What the migrations touch, comparable across databases."""
    return {
        'providers': sorted(query(url, 'SELECT id, root_provider_id FROM resource_providers')),
        'consumers': sorted(query(url, 'SELECT c.uuid, p.external_id, u.external_id, c.generation FROM consumers c '
                                       'JOIN projects p ON p.id = c.project_id JOIN users u ON u.id = c.user_id')),
        'projects': sorted(r[0] for r in query(url, 'SELECT external_id FROM projects')),
        'users': sorted(r[0] for r in query(url, 'SELECT external_id FROM users')),
        'missing_created_at': query(url, 'SELECT COUNT(*) FROM consumers WHERE created_at IS NULL')[0][0],
    }


# -- the check table ---------------------------------------------------------

def parse_checks(stdout):
    """oslo.upgradecheck's table as [(check, result, details)], details
    without wrapping (whitespace removed) and with the command name
    normalised."""
    lines = stdout.strip('\n').split('\n')
    assert lines[0].startswith('+-') and lines[1].startswith('| Upgrade Check Results'), stdout
    width = len(lines[0])
    assert all(len(line) == width for line in lines), stdout
    rows, current = [], []
    for line in lines[3:]:
        if line.startswith('+-'):
            rows.append(current)
            current = []
        else:
            assert line.startswith('| ') and line.endswith(' |'), line
            current.append(line[2:-2].rstrip())
    out = []
    for row in rows:
        assert row[0].startswith('Check: ') and row[1].startswith('Result: ') and row[2].startswith('Details: '), row
        details = ''.join([row[2][len('Details: '):]] + row[3:])
        details = re.sub(r'\s+', '', details).replace('placement-manage', 'keelson')
        out.append((row[0][len('Check: '):], row[1][len('Result: '):], details))
    return out


def compare_checks(conf):
    theirs = ref('placement-status', conf, 'upgrade', 'check')
    ours = keelson(conf, 'status', 'upgrade', 'check')
    assert theirs.returncode in (0, 1, 2), theirs.stdout + theirs.stderr
    upstream, keelsons = parse_checks(theirs.stdout), parse_checks(ours.stdout)
    assert [c[0] for c in upstream] == UPSTREAM_CHECKS
    assert keelsons[:3] == upstream, '\n%s\n%s' % (theirs.stdout, ours.stdout)
    assert [c[0] for c in keelsons] == UPSTREAM_CHECKS + [KEELSON_CHECK]
    return theirs, ours, keelsons


STATES = ['success', 'incomplete_consumers', 'missing_root_provider_ids', 'policy_json', 'policy_yaml_holding_json',
          'all']


# The policy-file checks read no database: SQLite is enough for them.
BACKEND_STATES = [(b, s) for b in ALL_BACKENDS for s in STATES
                  if b == 'sqlite' or s in ('incomplete_consumers', 'missing_root_provider_ids', 'all')]


@pytest.mark.parametrize('backend,state', BACKEND_STATES)
def test_status_checks_match_placement_status(backend, state):
    url = synced_database(backend)
    policy = None
    add_rooted_provider(url, 1)
    add_complete_consumer(url, 1)
    if state in ('incomplete_consumers', 'all'):
        add_old_allocations(url, [2, 3, 4])
    if state in ('missing_root_provider_ids', 'all'):
        add_old_providers(url, 2, first=2)
    if state in ('policy_json', 'all'):
        policy = ('policy.json', '{"placement:resource_providers:list": "role:admin"}\n')
    if state == 'policy_yaml_holding_json':
        policy = ('policy.yaml', '{}')
    conf = conf_for(url, policy)
    theirs, ours, rows = compare_checks(conf)
    assert ours.returncode == theirs.returncode, ours.stdout
    expected = {'success': 0, 'incomplete_consumers': 1, 'missing_root_provider_ids': 2, 'policy_json': 2,
                'policy_yaml_holding_json': 2, 'all': 2}[state]
    assert theirs.returncode == expected
    assert rows[3][1] == 'Success'
    if state == 'incomplete_consumers':
        assert rows[1][1:] == ('Warning', 'There are 3 incomplete consumers table records for existing allocations. '
                               'Run the "keelson db online_data_migrations" command.'.replace(' ', ''))
    # The whole table is upstream's, row for row, when nothing differs.
    if state == 'success':
        assert ours.stdout.startswith(theirs.stdout.rsplit('+-', 1)[0])


def test_a_yaml_policy_file_passes_both(tmp_path):
    url = synced_database('sqlite')
    conf = conf_for(url, ('policy.yaml', '"placement:resource_providers:list": "role:admin"\n'))
    theirs, ours, rows = compare_checks(conf)
    assert theirs.returncode == ours.returncode == 0


@pytest.mark.parametrize('backend', ['sqlite'])
def test_json_output_is_oslo_upgradecheck_format(backend):
    import json
    url = synced_database(backend)
    add_old_allocations(url, [7])
    r = keelson(conf_for(url), 'status', 'upgrade', 'check', '--json')
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc['name'] == 'Upgrade Check Results'
    assert [(c['check'], c['result']) for c in doc['checks']] == [
        ('Missing Root Provider IDs', 0), ('Incomplete Consumers', 1), ('Policy File JSON to YAML Migration', 0),
        (KEELSON_CHECK, 0)]
    assert doc['checks'][0]['details'] is None
    assert 'There are 1 incomplete consumers' in doc['checks'][1]['details']


def test_a_database_without_schema_is_an_error_for_both():
    url = create_database('sqlite', 'upg_empty')
    conf = conf_for(url)
    theirs = ref('placement-status', conf, 'upgrade', 'check')
    ours = keelson(conf, 'status', 'upgrade', 'check')
    assert theirs.returncode == ours.returncode == 255
    assert theirs.stdout.startswith('Error:\n') and ours.stdout.startswith('Error:\n')
    assert 'keelson db sync' in ours.stdout


# -- online data migrations --------------------------------------------------

def old_state(backend, revision=None):
    """Five providers without root ids, four consumers without records
    (eight allocations), one complete consumer."""
    url = synced_database(backend, revision)
    add_old_providers(url, 5)
    add_old_allocations(url, [2, 3, 4, 5])
    add_complete_consumer(url, 1)
    return url


def normalise(stdout):
    # Upstream prints a failing migration's Python function object.
    return re.sub(r'<function (\w+) at 0x[0-9a-f]+>', r'\1', stdout)


def run_both(conf_theirs, conf_ours, *args):
    theirs = ref('placement-manage', conf_theirs, 'db', 'online_data_migrations', *args)
    ours = keelson(conf_ours, 'db', 'online_data_migrations', *args)
    assert normalise(ours.stdout) == normalise(theirs.stdout), '\n%s\n%s\n%s' % (theirs.stdout, ours.stdout, ours.stderr)
    assert ours.returncode == theirs.returncode, ours.stderr
    return theirs.returncode


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_online_data_migrations_in_limited_batches(backend):
    theirs, ours = old_state(backend), old_state(backend)
    ct, co = conf_for(theirs), conf_for(ours)
    assert snapshot(theirs) == snapshot(ours)
    # Both refuse a limit that is not a positive integer, alike.
    for bad in ('0', '-2', 'many'):
        assert run_both(ct, co, '--max-count', bad) == 127
    codes = []
    for _ in range(8):
        codes.append(run_both(ct, co, '--max-count', '3'))
        assert snapshot(theirs) == snapshot(ours)
        if codes[-1] == 0:
            break
    # 5 providers + 4 consumers in batches of 3: three batches migrate,
    # the fourth finds nothing left.
    assert codes == [1, 1, 1, 0]
    compare_migrated(theirs, ours)


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_online_data_migrations_until_complete(backend):
    theirs, ours = old_state(backend), old_state(backend)
    ct, co = conf_for(theirs), conf_for(ours)
    assert run_both(ct, co) == 0
    # Nothing left: a second run and a limited one report zeros.
    assert run_both(ct, co) == 0
    assert run_both(ct, co, '--max-count', '10') == 0
    compare_migrated(theirs, ours)


def compare_migrated(theirs, ours):
    assert snapshot(theirs) == snapshot(ours)
    s = snapshot(ours)
    assert all(root == rp for rp, root in s['providers'])
    assert sorted(c[0] for c in s['consumers']) == [consumer_uuid(i) for i in range(1, 6)]
    assert [c[1:3] for c in s['consumers'] if c[0] != consumer_uuid(1)] == [(INCOMPLETE_ID, INCOMPLETE_ID)] * 4
    assert s['missing_created_at'] == 0
    # The real placement-status now finds nothing to migrate.
    conf = conf_for(ours)
    r = ref('placement-status', conf, 'upgrade', 'check')
    assert r.returncode == 0, r.stdout
    assert [c[1] for c in parse_checks(r.stdout)] == ['Success'] * 3
    assert keelson(conf, 'status', 'upgrade', 'check').returncode == 0


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_online_data_migrations_use_the_configured_incomplete_consumer_owner(backend):
    theirs, ours = old_state(backend), old_state(backend)
    opts = {'incomplete_consumer_project_id': 'legacy-project', 'incomplete_consumer_user_id': 'legacy-user'}

    def conf(url):
        path = conf_for(url)
        with open(path, 'a') as f:
            f.write('[placement]\n' + ''.join('%s = %s\n' % kv for kv in opts.items()))
        return path

    assert run_both(conf(theirs), conf(ours)) == 0
    assert snapshot(theirs) == snapshot(ours)
    assert ('legacy-project', 'legacy-user') in {c[1:3] for c in snapshot(ours)['consumers']}


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_a_failing_migration_exits_2_as_upstream(backend):
    theirs, ours = old_state(backend), old_state(backend)
    for url in (theirs, ours):
        execute(url, ('DROP TABLE users', ()))
    ct, co = conf_for(theirs), conf_for(ours)
    # Limited: the providers moved, so the failure is not final (1)...
    assert run_both(ct, co, '--max-count', '50') == 1
    # ...until nothing else moves (2), with or without a limit.
    assert run_both(ct, co, '--max-count', '50') == 2
    assert run_both(ct, co) == 2


@pytest.mark.parametrize('backend', ALL_BACKENDS)
def test_db_sync_of_an_older_schema_points_at_a_working_command(backend):
    # Upstream's revision 611cd6dffd7b refuses providers without root ids.
    theirs, ours = old_state(backend, 'b4ed3a175331'), old_state(backend, 'b4ed3a175331')
    ct, co = conf_for(theirs), conf_for(ours)
    theirs_checks, ours_checks, rows = compare_checks(co)
    assert ours_checks.returncode == theirs_checks.returncode == 2
    assert rows[3][1] == 'Warning' and 'b4ed3a175331' in rows[3][2]
    assert ref('placement-manage', ct, 'db', 'sync').returncode != 0
    r = keelson(co, 'db', 'sync')
    assert r.returncode != 0
    assert 'keelson db online_data_migrations' in r.stdout + r.stderr
    assert run_both(ct, co) == 0
    assert ref('placement-manage', ct, 'db', 'sync').returncode == 0
    r = keelson(co, 'db', 'sync')
    assert r.returncode == 0, r.stderr
    assert query(ours, 'SELECT version_num FROM alembic_version') == query(theirs, 'SELECT version_num FROM alembic_version')
    compare_migrated(theirs, ours)
