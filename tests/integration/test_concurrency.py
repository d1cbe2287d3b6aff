"""Many concurrent clients writing allocations against a handful of
providers, through two keelson instances sharing one real database:
usage never exceeds capacity, no accepted write is lost, and every refusal
is a 409 with the right code."""
import collections
import random
import threading

import pytest

from conftest import AllInOne, BACKENDS, create_database, http, new_uuid

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
