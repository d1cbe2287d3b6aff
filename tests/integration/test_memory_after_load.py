"""Memory after load: a burst of large but legal requests raises the
process's RSS; once the burst is over and the process is idle, the memory
goes back to the system instead of staying held by the allocator (glibc
keeps freed pages in its arenas unless asked: services/keelson/src/memory.rs).

The figures are the all-in-one process's own (/proc/<pid>/status): the
burst must raise RSS by at least LOAD_FLOOR, or the test proves nothing;
after the idle wait at most RETAINED_CEILING of it may remain."""
import concurrent.futures
import json
import time
import urllib.request

from conftest import AllInOne, create_database, http, new_uuid

MIB = 1 << 20
LOAD_FLOOR = 150 * MIB
# What may stay after the burst: the trimmer's threshold (32 MiB) plus
# what the caches and pools legitimately keep (connections, the parsed
# definition cache, tokio's worker stacks).
RETAINED_CEILING = 96 * MIB
# The trimmer reads the allocator's counters every 5 s.
IDLE_WAIT = 12


def status_kib(pid, field):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def post_json(url, body, headers):
    data = json.dumps(body).encode()
    h = {'content-type': 'application/json', 'accept': 'application/json'}
    h.update(headers)
    req = urllib.request.Request(url, data=data, headers=h, method='POST')
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status
    except urllib.error.HTTPError as e:
        e.read()
        return e.code


def big_template(resources):
    """A legal template under max_template_size (512 KiB) and
    max_resources_per_stack (1000) of OS::Heat::Value resources with list
    values."""
    return {
        'heat_template_version': '2018-08-31',
        'resources': {
            'r%d' % i: {'type': 'OS::Heat::Value', 'properties': {'value': list(range(i % 7, i % 7 + 90))}}
            for i in range(resources)
        },
    }


def test_rss_returns_after_a_burst(procs):
    aio = AllInOne(procs, create_database('sqlite', 'memory'))
    pid = aio.proc.p.pid
    orchestration = aio.orchestration_url()
    # A fleet for the candidates requests.
    for i in range(60):
        uuid = new_uuid()
        assert http('POST', aio.url + '/resource_providers', {'name': 'cn%d' % i, 'uuid': uuid})[0] == 200
        assert http('PUT', aio.url + '/resource_providers/%s/inventories' % uuid, {
            'resource_provider_generation': 0,
            'inventories': {'VCPU': {'total': 64}, 'MEMORY_MB': {'total': 262144}, 'DISK_GB': {'total': 4000}}})[0] == 200
    time.sleep(IDLE_WAIT)
    baseline = status_kib(pid, 'VmRSS')

    template = big_template(950)
    assert len(json.dumps(template)) < 512 * 1024
    heat_headers = {'x-auth-token': 'admin', 'x-auth-project': 'admin', 'x-auth-user': 'admin'}

    def validate(_):
        return post_json(orchestration + '/v1/admin/validate', {'template': template}, heat_headers)

    def candidates(_):
        return http('GET', aio.url + '/allocation_candidates?resources=VCPU:1,MEMORY_MB:512,DISK_GB:1')[0]

    def aggregates(_):
        uuid = new_uuid()
        assert http('POST', aio.url + '/resource_providers', {'name': 'agg-' + uuid, 'uuid': uuid})[0] == 200
        body = {'resource_provider_generation': 0, 'aggregates': [new_uuid() for _ in range(20000)]}
        return http('PUT', aio.url + '/resource_providers/%s/aggregates' % uuid, body)[0]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in range(2):
            assert set(pool.map(validate, range(8))) == {200}
            assert set(pool.map(candidates, range(8))) == {200}
            assert set(pool.map(aggregates, range(4))) == {200}
    peak = status_kib(pid, 'VmHWM')
    assert peak - baseline >= LOAD_FLOOR, 'the burst raised RSS by %d MiB only' % ((peak - baseline) // MIB)

    time.sleep(IDLE_WAIT)
    after = status_kib(pid, 'VmRSS')
    print('memory-after-load: baseline %d MiB, peak %d MiB, after idle %d MiB'
          % (baseline // MIB, peak // MIB, after // MIB))
    assert after - baseline <= RETAINED_CEILING, (baseline // MIB, peak // MIB, after // MIB)
    # Still serving.
    assert http('GET', aio.url + '/resource_providers?name=cn1')[0] == 200
