"""Many concurrent clients writing allocations against a handful of
providers, through two keelson instances sharing one real database:
usage never exceeds capacity, no accepted write is lost, and every refusal
is a 409 with the right code."""
import collections
import random
import threading
import time

import pytest

from conftest import AllInOne, BACKENDS, connect, create_database, http, new_uuid, query, ref_placement

CLIENTS = 64
WRITES_PER_CLIENT = 12
PROVIDERS = 4
CAPACITY = 150  # VCPU per provider: the clients ask for more than exists

CONCURRENCY_BACKENDS = [b for b in BACKENDS if b in ('mysql', 'postgresql')] or ['sqlite']


@pytest.mark.parametrize('backend', CONCURRENCY_BACKENDS)
def test_concurrent_allocation_writers(backend, procs):
    url = create_database(backend, 'stress')
    first = AllInOne(procs, url)
    second = AllInOne(procs, url)  # stateless: two instances, one database
    providers = []
    for i in range(PROVIDERS):
        status, _, rp = http('POST', first.url + '/resource_providers', {'name': 'stress-%d' % i})
        assert status == 200, rp
        status, _, inv = http('PUT', first.url + '/resource_providers/%s/inventories' % rp['uuid'], {
            'resource_provider_generation': rp['generation'],
            'inventories': {'VCPU': {'total': CAPACITY, 'max_unit': 8}}})
        assert status == 200, inv
        providers.append(rp['uuid'])

    accepted = {}  # consumer -> (provider, amount)
    removed = set()
    refusals = collections.Counter()
    unexpected = []
    lock = threading.Lock()

    def client(n):
        rnd = random.Random(n)
        base = first.url if n % 2 == 0 else second.url
        mine = []
        for i in range(WRITES_PER_CLIENT):
            if mine and rnd.random() < 0.2:
                consumer = mine.pop(rnd.randrange(len(mine)))
                status, _, body = http('DELETE', base + '/allocations/' + consumer)
                if status == 204:
                    with lock:
                        removed.add(consumer)
                else:
                    with lock:
                        unexpected.append(('DELETE', status, body))
                continue
            consumer = new_uuid()
            rp = rnd.choice(providers)
            amount = rnd.randint(1, 8)
            status, _, body = http('PUT', base + '/allocations/' + consumer, {
                'allocations': {rp: {'resources': {'VCPU': amount}}},
                'project_id': 'p%d' % (n % 3), 'user_id': 'u%d' % n, 'consumer_generation': None, 'consumer_type': 'INSTANCE'})
            if status == 204:
                mine.append(consumer)
                with lock:
                    accepted[consumer] = (rp, amount)
            elif status == 409:
                code = body['errors'][0]['code']
                detail = body['errors'][0]['detail']
                with lock:
                    refusals[code] += 1
                    if code == 'placement.undefined_code' and 'exceed the capacity' not in detail:
                        unexpected.append(('PUT', status, body))
                    elif code not in ('placement.undefined_code', 'placement.concurrent_update'):
                        unexpected.append(('PUT', status, body))
            else:
                with lock:
                    unexpected.append(('PUT', status, body))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not unexpected, unexpected[:5]
    assert len(accepted) > 0

    # Every accepted and not deleted write is present, exactly.
    expected_usage = collections.Counter()
    for consumer, (rp, amount) in accepted.items():
        status, _, body = http('GET', second.url + '/allocations/' + consumer)
        assert status == 200
        if consumer in removed:
            assert body['allocations'] == {}, (consumer, body)
        else:
            assert body['allocations'] == {rp: {'generation': body['allocations'][rp]['generation'],
                                                 'resources': {'VCPU': amount}}}, (consumer, body)
            expected_usage[rp] += amount
    for rp in providers:
        status, _, usage = http('GET', first.url + '/resource_providers/%s/usages' % rp)
        assert status == 200
        used = usage['usages'].get('VCPU', 0)
        assert used == expected_usage[rp]
        assert used <= CAPACITY
    print('accepted %d, deleted %d, refused %s' % (len(accepted), len(removed), dict(refusals)))


# -- provider-level writers: deadlocks are retried, never a 500
#
# Writers of different providers collide in the tables they share: the same
# new aggregates created by every provider's PUT .../aggregates, the same
# new traits and resource classes created at once. On MariaDB the inserts'
# gap locks deadlock (1213); such a write runs again as a new transaction
# and, if it loses every attempt, answers 409 placement.concurrent_update.

PROVIDER_WRITERS = 16
ROUNDS = 12


def _provider_writers(base, rounds, stop_at_server_error=False):
    """PROVIDER_WRITERS clients, each with a provider of its own, start
    each round together: create the round's traits (in different orders)
    and resource class, then write their provider's aggregates (the
    round's 20 new ones, the same for all), traits and inventories.
    Answers (counts by (what, status), the answers that were neither
    expected nor a concurrent-update refusal, provider -> aggregates of
    its last accepted write)."""
    providers = []
    for i in range(PROVIDER_WRITERS):
        status, _, rp = http('POST', base + '/resource_providers', {'name': 'writer-%d' % i})
        assert status == 200, rp
        providers.append(rp['uuid'])
    answers = collections.Counter()
    unexpected = []
    written = {}
    lock = threading.Lock()

    def note(what, status, body, allowed):
        with lock:
            answers[(what, status)] += 1
            refused = status == 409 and body['errors'][0]['code'] == 'placement.concurrent_update'
            if status not in allowed and not refused:
                unexpected.append((what, status, body))

    for r in range(rounds):
        aggregates = [new_uuid() for _ in range(20)]
        traits = ['CUSTOM_ROUND_%d_%d' % (r, k) for k in range(10)]
        start = threading.Barrier(PROVIDER_WRITERS)

        def writer(n):
            rp = providers[n]
            start.wait(30)
            for t in traits[n % 3:] + traits[:n % 3]:
                status, _, body = http('PUT', base + '/traits/' + t)
                note('PUT /traits', status, body, (201, 204))
            status, _, body = http('PUT', base + '/resource_classes/CUSTOM_ROUND_%d' % r)
            note('PUT /resource_classes', status, body, (201, 204))
            status, _, body = http('GET', base + '/resource_providers/' + rp)
            generation = body['generation']
            status, _, body = http('PUT', base + '/resource_providers/%s/aggregates' % rp,
                                   {'aggregates': aggregates, 'resource_provider_generation': generation})
            note('PUT aggregates', status, body, (200,))
            if status != 200:
                return
            generation = body['resource_provider_generation']
            with lock:
                written[rp] = aggregates
            status, _, body = http('PUT', base + '/resource_providers/%s/traits' % rp,
                                   {'traits': traits, 'resource_provider_generation': generation})
            note('PUT traits', status, body, (200,))
            if status != 200:
                return
            status, _, body = http('PUT', base + '/resource_providers/%s/inventories' % rp, {
                'resource_provider_generation': body['resource_provider_generation'],
                'inventories': {'VCPU': {'total': 8 + r}, 'CUSTOM_ROUND_%d' % r: {'total': 1}}})
            note('PUT inventories', status, body, (200,))

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(PROVIDER_WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        if stop_at_server_error and any(status >= 500 for _, status, _ in unexpected):
            break
    return providers, answers, unexpected, written


@pytest.mark.parametrize('backend', CONCURRENCY_BACKENDS)
def test_concurrent_provider_writers_see_no_server_error(backend, procs):
    url = create_database(backend, 'provwriters')
    base = AllInOne(procs, url).url
    providers, answers, unexpected, written = _provider_writers(base, ROUNDS)
    assert not unexpected, unexpected[:5]
    for rp in providers:
        status, _, body = http('GET', base + '/resource_providers/%s/aggregates' % rp)
        assert status == 200 and sorted(body['aggregates']) == sorted(written.get(rp, [])), body
    print(dict(answers))


@pytest.mark.parametrize('backend', [b for b in BACKENDS if b == 'mysql'])
def test_upstream_concurrent_new_aggregates_answer_500(backend, procs):
    """The reference, under the same writers on MariaDB, answers some PUT
    .../aggregates with a 500 whose detail is the deadlocked INSERT INTO
    placement_aggregates statement (seen in 10 of 80 writes of 5 rounds)."""
    url = create_database(backend, 'provwriters_ref')
    base = ref_placement(procs, url, server='cheroot', threads=PROVIDER_WRITERS)[0]
    _, _, unexpected, _ = _provider_writers(base, 2 * ROUNDS, stop_at_server_error=True)
    errors = [body for what, status, body in unexpected if status == 500]
    assert errors, unexpected[:5]
    assert 'Deadlock found' in errors[0]['errors'][0]['detail'], errors[0]


# -- a named upstream defect: the conflict retry that skips the capacity check
#
# Upstream's PUT /allocations runs in one writer transaction. When the
# provider generation check fails (another writer committed since the
# provider was read), replace_all() reloads the generation in an
# independent transaction and calls _set_allocations() again inside the
# same transaction, where the failed attempt's own allocation rows are
# still written. The retry first reads the providers' "previous usage",
# which now counts that leftover row, then deletes it and checks capacity;
# the check lets an over-capacity write through when it leaves usage no
# higher than the previous usage, which, counting the write's own amount,
# it always does. So a write that needed one retry is accepted whatever
# the capacity, on MariaDB and PostgreSQL alike (on MariaDB the retry's
# reads also come from the first attempt's REPEATABLE READ snapshot).
# keelson retries in a new transaction, and checks with the provider rows
# held and their generations matched.
#
# The interleaving is forced rather than hoped for: the test's own
# transaction plays the other writer (it grows consumer A's allocation and
# moves the provider's generation, uncommitted), the server's write of
# consumer B then reads, checks and blocks on the provider row, and only
# when the database shows B waiting on that lock does the test commit.

STALE_CAPACITY = 10


def _lock_waits(db_url):
    if db_url.startswith('mysql'):
        # innodb_trx does not always list a waiting statement; the process
        # list shows it as a statement of the run's database that has run
        # for a while (nothing else runs there then: the test's own
        # transaction is idle, and this query is the one excluded).
        sql = ("SELECT (SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT') + "
               "(SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() "
               "AND command = 'Query' AND id <> CONNECTION_ID() AND time_ms > 300)")
    else:
        sql = "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
    return query(db_url, sql)[0][0]


def _commit_once_waited_on(conn, db_url, writer):
    """Starts `writer`, commits `conn` (the other writer) once the database
    shows a transaction waiting on a lock (or the writer has answered) and
    answers whether the writer was still waiting then."""
    writer.start()
    try:
        for _ in range(600):
            if _lock_waits(db_url) or not writer.is_alive():
                break
            time.sleep(0.05)
        blocked = writer.is_alive()
    finally:
        conn.commit()
        conn.close()
    writer.join(60)
    return blocked


def _race_a_concurrent_writer(base, db_url):
    """Runs the interleaving on a server `base` of database `db_url`;
    answers (status and body of B's write, the provider's VCPU usage)."""
    status, _, rp = http('POST', base + '/resource_providers', {'name': 'stale-snapshot'})
    assert status == 200, rp
    status, _, inv = http('PUT', base + '/resource_providers/%s/inventories' % rp['uuid'], {
        'resource_provider_generation': rp['generation'],
        'inventories': {'VCPU': {'total': STALE_CAPACITY, 'max_unit': STALE_CAPACITY}}})
    assert status == 200, inv
    a, b = new_uuid(), new_uuid()
    owner = {'project_id': 'p', 'user_id': 'u', 'consumer_generation': None, 'consumer_type': 'INSTANCE'}
    status, _, body = http('PUT', base + '/allocations/' + a,
                           dict(owner, allocations={rp['uuid']: {'resources': {'VCPU': 1}}}))
    assert status == 204, body

    # The other writer: A grows from 1 to 8 VCPU and the provider's
    # generation moves, as a committed PUT /allocations/A leaves them.
    conn, mark = connect(db_url)
    cur = conn.cursor()
    cur.execute('UPDATE resource_providers SET generation = generation + 1 WHERE uuid = %s' % mark, (rp['uuid'],))
    cur.execute('UPDATE allocations SET used = 8 WHERE consumer_id = %s' % mark, (a,))
    outcome = {}

    def write_b():
        outcome['b'] = http('PUT', base + '/allocations/' + b,
                            dict(owner, allocations={rp['uuid']: {'resources': {'VCPU': 8}}}))

    writer = threading.Thread(target=write_b)
    blocked = _commit_once_waited_on(conn, db_url, writer)
    assert blocked, 'B was answered before it waited on the provider row: %s' % (outcome.get('b'),)
    status, _, usage = http('GET', base + '/resource_providers/%s/usages' % rp['uuid'])
    assert status == 200, usage
    return outcome['b'], usage['usages'].get('VCPU', 0)


@pytest.mark.parametrize('backend', [b for b in BACKENDS if b in ('mysql', 'postgresql')])
def test_conflict_retry_checks_capacity_afresh(backend, procs):
    """keelson refuses the write the other writer's commit made too big."""
    url = create_database(backend, 'stale')
    (status, _, body), used = _race_a_concurrent_writer(AllInOne(procs, url).url, url)
    assert status == 409, body
    assert 'exceed the capacity' in body['errors'][0]['detail'], body
    assert used == 8 <= STALE_CAPACITY


@pytest.mark.parametrize('backend', [b for b in BACKENDS if b in ('mysql', 'postgresql')])
def test_upstream_conflict_retry_over_allocates(backend, procs):
    """The reference, raced the same way, accepts B and leaves the provider
    at 16 VCPU used of 10 (the defect this module's keelson case rules out)."""
    url = create_database(backend, 'stale_ref')
    (status, _, body), used = _race_a_concurrent_writer(ref_placement(procs, url)[0], url)
    assert (status, used) == (204, 16), (status, body, used)


# -- a second named upstream defect: a multi-provider write that loses the
# race on a later provider can never succeed on retry
#
# Upstream moves the providers' generations one after the other inside the
# request's transaction. When the first provider's UPDATE has succeeded and
# a later one finds its generation moved, the retry re-reads every
# provider's generation in an independent transaction, which sees the first
# provider's committed generation, not the one this transaction already
# moved; its UPDATE of the first provider then matches no row, and so on
# for all ten retries: 409 placement.concurrent_update, on a write that
# nothing else would stop. Nova's evacuations and migrations write to two
# providers (source and destination); these are the 409s Nova logs as
# "Failed to save allocation" when Python Placement serves the live cloud's
# evacuate phase. keelson's retry is a new transaction and succeeds.

def _race_on_the_second_provider(base, db_url):
    """B writes to providers one and two; the test's transaction moves
    two's generation first and commits once B waits on it. Answers B's
    (status, headers, body) and B's allocations afterwards."""
    providers = []
    for name in ('first', 'second'):
        status, _, rp = http('POST', base + '/resource_providers', {'name': name})
        assert status == 200, rp
        status, _, inv = http('PUT', base + '/resource_providers/%s/inventories' % rp['uuid'], {
            'resource_provider_generation': rp['generation'], 'inventories': {'VCPU': {'total': 8}}})
        assert status == 200, inv
        providers.append(rp['uuid'])
    b = new_uuid()
    conn, mark = connect(db_url)
    cur = conn.cursor()
    cur.execute('UPDATE resource_providers SET generation = generation + 1 WHERE uuid = %s' % mark, (providers[1],))
    outcome = {}

    def write_b():
        # JSON order is the order upstream moves the generations in.
        outcome['b'] = http('PUT', base + '/allocations/' + b, {
            'allocations': {providers[0]: {'resources': {'VCPU': 1}}, providers[1]: {'resources': {'VCPU': 1}}},
            'project_id': 'p', 'user_id': 'u', 'consumer_generation': None, 'consumer_type': 'INSTANCE'})

    writer = threading.Thread(target=write_b)
    blocked = _commit_once_waited_on(conn, db_url, writer)
    assert blocked, 'B was answered before it waited on the second provider: %s' % (outcome.get('b'),)
    status, _, held = http('GET', base + '/allocations/' + b)
    assert status == 200, held
    return outcome['b'], {rp: a['resources'] for rp, a in held['allocations'].items()}


@pytest.mark.parametrize('backend', [b for b in BACKENDS if b in ('mysql', 'postgresql')])
def test_retry_after_losing_on_a_later_provider_succeeds(backend, procs):
    url = create_database(backend, 'second')
    (status, _, body), held = _race_on_the_second_provider(AllInOne(procs, url).url, url)
    assert status == 204, body
    assert sorted(held.values(), key=str) == [{'VCPU': 1}, {'VCPU': 1}], held


@pytest.mark.parametrize('backend', [b for b in BACKENDS if b in ('mysql', 'postgresql')])
def test_upstream_retry_after_losing_on_a_later_provider_never_succeeds(backend, procs):
    """The reference refuses the write after its ten retries."""
    url = create_database(backend, 'second_ref')
    (status, _, body), held = _race_on_the_second_provider(ref_placement(procs, url)[0], url)
    assert status == 409 and body['errors'][0]['code'] == 'placement.concurrent_update', (status, body)
    assert held == {}, held
