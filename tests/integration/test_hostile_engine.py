"""Hostile numbers and hostile trees against the stack engine, through
`keelson all-in-one`'s Orchestration API (noauth), on each configured
backend (issue 15, defects 3 and 4).

Numbers: template-supplied durations of 1e20, NaN, infinity or below zero
(TestResource's waits, a group's pause_time, timeout_mins) and integers
past 2**63 never panic an engine task: they are refused at validation with
Heat's property error, fail the resource with upstream's reason, or wait
until cancelled, as upstream does.

Trees: `max_resources_per_stack` counts the whole tree (group members,
groups of groups, template resources, a group an update grows), and a tree
past it is refused before anything is stored, with Heat's
RequestLimitExceeded.

Every case ends with the process healthy (a small stack still creates)
and, where the request was refused, nothing stored."""
import json
import uuid

import pytest

from conftest import BACKENDS, AllInOne, create_database
from heat import Heat

LIMIT = 1000
LIMIT_BODY = 'Request limit exceeded: Maximum resources per stack exceeded.'


@pytest.fixture(params=BACKENDS)
def heat(request, procs):
    # The limit is set explicitly: the cases below count against it.
    extra = {'orchestration': {'max_resources_per_stack': str(LIMIT)}}
    aio = AllInOne(procs, create_database(request.param, 'hen_%s' % uuid.uuid4().hex[:8]), extra=extra)
    h = Heat(aio.orchestration_url(), project='admin')
    h.aio = aio
    return h


def name(prefix):
    return '%s-%s' % (prefix, uuid.uuid4().hex[:6])


def hot(resources, outputs=None):
    t = {'heat_template_version': '2018-08-31', 'resources': resources}
    if outputs:
        t['outputs'] = outputs
    return t


def tr(**props):
    return {'type': 'OS::Heat::TestResource', 'properties': props}


def group(count, resource_def=None, **extra):
    g = {'type': 'OS::Heat::ResourceGroup',
         'properties': {'count': count, 'resource_def': resource_def or {'type': 'OS::Heat::None'}}}
    g.update(extra)
    return g


def post(heat, stack_name, template, **extra):
    body = {'stack_name': stack_name, 'template': template, 'disable_rollback': True}
    body.update(extra)
    return heat.call('POST', '/stacks', body)


def assert_fault(status, doc, code, error_type, message):
    assert status == code, (status, doc)
    assert doc['code'] == code, doc
    assert doc['error']['type'] == error_type, doc
    assert doc['error']['message'] == message, doc


def stack_names(heat):
    status, _, doc = heat.call('GET', '/stacks')
    assert status == 200, (status, doc)
    return {s['stack_name'] for s in doc['stacks']}


def assert_healthy(heat):
    """The engine still answers and still runs a small stack to the end."""
    n = name('healthy')
    sid = heat.create(n, hot({'a': tr(value='ok'), 'b': tr(value={'get_attr': ['a', 'output']})},
                             {'b': {'value': {'get_attr': ['b', 'output']}}}))
    heat.wait(sid, 'CREATE_COMPLETE', timeout=60)
    assert heat.output(n, sid, 'b') == 'ok'
    heat.delete(n, sid)
    heat.wait(sid, 'GONE', timeout=60)


def assert_refused(heat, stack_name, template, error_type, message, **extra):
    status, _, doc = post(heat, stack_name, template, **extra)
    assert_fault(status, doc, 400, error_type, message)
    assert stack_name not in stack_names(heat)


def create_failed(heat, template):
    n = name('fail')
    sid = heat.create(n, template)
    st = heat.wait(sid, 'CREATE_FAILED', timeout=60)
    return n, sid, st['stack_status_reason']


# -- defect 3: durations and integers from templates -------------------------------------------

@pytest.mark.parametrize('props', [
    {'wait_secs': 1e20},
    {'action_wait_secs': {'create': 1e20}},
    {'wait_secs': 1.7976931348623157e308},
], ids=['wait_secs', 'action_wait_secs', 'max_float'])
def test_a_wait_past_a_timedelta_fails_the_resource_as_upstream(heat, props):
    """Upstream measures the wait as a timedelta, which overflows: the
    resource fails with that OverflowError (here a worker used to panic
    and the stack stayed IN_PROGRESS forever)."""
    n, sid, reason = create_failed(heat, hot({'r': tr(**props)}))
    assert reason == 'Resource CREATE failed: OverflowError: resources.r: Python int too large to convert to C int'
    res = heat.resources(n, sid)
    assert res['r']['resource_status'] == 'CREATE_FAILED'
    assert_healthy(heat)


def test_a_wait_of_just_past_a_timedelta_names_the_days(heat):
    _, _, reason = create_failed(heat, hot({'r': tr(wait_secs=86400000000000)}))
    assert reason == ('Resource CREATE failed: OverflowError: resources.r: '
                      'days=1000000000; must have magnitude <= 999999999')
    assert_healthy(heat)


def test_an_attribute_wait_past_a_timedelta_neither_panics_nor_hangs(heat):
    """attr_wait_secs of 1e20 (used to panic whoever read `output`): the
    read is refused with upstream's OverflowError instead of sleeping, so
    the reader and the output answer at once (the output as null, as an
    unreadable attribute is)."""
    n = name('attr')
    sid = heat.create(n, hot({
        'slow': tr(value='v', attr_wait_secs=1e20),
        'reader': tr(value={'get_attr': ['slow', 'output']}),
    }, {'o': {'value': {'get_attr': ['slow', 'output']}}}))
    heat.wait(sid, 'CREATE_COMPLETE', timeout=60)
    status, _, doc = heat.call('GET', '/stacks/%s/%s/outputs/o' % (n, sid))
    assert status == 200, (status, doc)
    assert doc['output']['output_value'] is None, doc
    assert heat.resources(n, sid)['reader']['resource_status'] == 'CREATE_COMPLETE'
    assert_healthy(heat)


@pytest.mark.parametrize('secs', [-1, -1e300])
def test_a_negative_wait_is_infinite_and_still_cancellable(heat, secs):
    """Upstream waits forever below zero; a DELETE still cancels it."""
    n = name('forever')
    sid = heat.create(n, hot({'r': tr(wait_secs=secs)}))
    st = heat.stack(sid)
    assert st['stack_status'] == 'CREATE_IN_PROGRESS', st
    heat.delete(n, sid)
    heat.wait(sid, 'GONE', timeout=60)
    assert_healthy(heat)


@pytest.mark.parametrize('value,message', [
    ('nan', "could not convert string to float: 'nan'"),
    ('inf', "could not convert string to float: 'inf'"),
    ('1e400', "could not convert string to float: '1e400'"),
])
def test_non_finite_numbers_are_refused_at_validation(heat, value, message):
    n = name('nonfinite')
    assert_refused(heat, n, hot({'r': tr(wait_secs=value)}), 'StackValidationFailed',
                   'Property error: resources.r.properties.wait_secs: ' + message)
    assert_healthy(heat)


@pytest.mark.parametrize('count,message', [
    (2 ** 63, '9223372036854775808 is out of range (min: -9223372036854775808, max: 9223372036854775807)'),
    (2 ** 64, '1.8446744073709552e+19 is out of range (min: -9223372036854775808, max: 9223372036854775807)'),
    ('18446744073709551616',
     '18446744073709551616 is out of range (min: -9223372036854775808, max: 9223372036854775807)'),
    (1e20, '1e+20 is out of range (min: -9223372036854775808, max: 9223372036854775807)'),
    (-1, '-1 is out of range (min: 0, max: None)'),
    ('many', "Value 'many' is not an integer"),
], ids=['2**63', '2**64', '2**64-text', '1e20', 'negative', 'text'])
def test_a_count_past_an_integer_is_refused_not_turned_into_one(heat, count, message):
    """`count` of 2**63 used to become 1 silently."""
    n = name('count')
    assert_refused(heat, n, hot({'g': group(count)}), 'StackValidationFailed',
                   'Property error: resources.g.properties.count: ' + message)
    assert_healthy(heat)


def test_a_huge_pause_between_batches_fails_as_upstream(heat):
    """pause_time of 1e20 (used to panic the worker): upstream refuses a
    policy whose pauses outlast the stack's timeout."""
    n, sid, reason = create_failed(heat, hot({'g': group(
        2, update_policy={'batch_create': {'max_batch_size': 1, 'pause_time': 1e20}})}))
    assert reason == ('Resource CREATE failed: ValueError: resources.g: '
                      'The current update policy will result in stack update timeout.')
    assert_healthy(heat)


def test_pauses_are_measured_against_the_stacks_own_timeout(heat):
    """Two minutes of pauses do not fit a one-minute stack."""
    n = name('pauses')
    sid = heat.create(n, hot({'g': group(3, update_policy={'batch_create': {'max_batch_size': 1, 'pause_time': 60}})}),
                      timeout_mins=1)
    st = heat.wait(sid, 'CREATE_FAILED', timeout=60)
    assert st['stack_status_reason'] == ('Resource CREATE failed: ValueError: resources.g: '
                                         'The current update policy will result in stack update timeout.')


@pytest.mark.parametrize('policy,message', [
    ({'batch_create': {'pause_time': -1}},
     'batch_create.pause_time: -1 is out of range (min: 0, max: None)'),
    ({'batch_create': {'pause_time': 'inf'}},
     "batch_create.pause_time: could not convert string to float: 'inf'"),
    ({'batch_create': {'max_batch_size': 2 ** 64}},
     'batch_create.max_batch_size: 1.8446744073709552e+19 is out of range '
     '(min: -9223372036854775808, max: 9223372036854775807)'),
    ({'rolling_update': {'min_in_service': -5}},
     'rolling_update.min_in_service: -5 is out of range (min: 0, max: None)'),
], ids=['negative', 'inf', 'size-2**64', 'min_in_service'])
def test_bad_update_policy_numbers_are_refused(heat, policy, message):
    """Upstream validates a group's update_policy with the stack."""
    assert_refused(heat, name('policy'), hot({'g': group(2, update_policy=policy)}), 'StackValidationFailed',
                   'Property error: resources.g.update_policy.' + message)
    assert_healthy(heat)


def test_bad_update_policy_numbers_in_a_nested_group_fail_it(heat):
    """A nested stack's group is checked when it runs: it fails, with the
    same text, instead of panicking."""
    inner = hot({'g': group(2, update_policy={'batch_create': {'pause_time': -1}})})
    n = name('nestedpolicy')
    sid = heat.create(n, hot({'t': {'type': 'inner.yaml'}}), files={'inner.yaml': json.dumps(inner)})
    st = heat.wait(sid, 'CREATE_FAILED', timeout=60)
    assert 'Property error: resources.g.update_policy.batch_create.pause_time: -1 is out of range (min: 0, max: None)' \
        in st['stack_status_reason'], st
    assert_healthy(heat)


def test_a_huge_timeout_mins_does_not_overflow(heat):
    """timeout_mins * 60 used to overflow: 2**58 minutes wrapped to a
    negative number of seconds and the stack timed out at once (a debug
    build panicked)."""
    n = name('timeout')
    sid = heat.create(n, hot({'r': tr(value='x', wait_secs=1), 's': tr(value={'get_attr': ['r', 'output']})}),
                      timeout_mins=2 ** 58)
    st = heat.wait(sid, 'CREATE_COMPLETE', timeout=60)
    assert st['timeout_mins'] == 2 ** 58
    assert_healthy(heat)


# -- defect 4: the whole tree against max_resources_per_stack ----------------------------------

def test_a_group_past_the_limit_is_refused_before_anything_starts(heat):
    assert_refused(heat, name('group'), hot({'g': group(10000)}), 'RequestLimitExceeded', LIMIT_BODY)
    assert_healthy(heat)


def test_a_count_of_100000_is_answered_with_400(heat):
    """Used to hold the POST open past 120 s; the client's own 60 s
    timeout is the (generous) bound here."""
    assert_refused(heat, name('huge'), hot({'g': group(100000, tr(value='%index%'))}),
                   'RequestLimitExceeded', LIMIT_BODY)
    assert_healthy(heat)


def test_a_group_of_groups_counts_every_member(heat):
    """30 groups of 40: 1 + 30 + 1200 resources in the tree."""
    inner = group(40)
    assert_refused(heat, name('gog'), hot({'g': group(30, inner)}), 'RequestLimitExceeded', LIMIT_BODY)
    assert_healthy(heat)


def test_groups_side_by_side_count_together(heat):
    assert_refused(heat, name('pair'), hot({'a': group(600), 'b': group(600)}), 'RequestLimitExceeded', LIMIT_BODY)


def test_template_resources_count_their_nested_resources(heat):
    inner = hot({'g': group(600)})
    template = hot({'one': {'type': 'inner.yaml'}, 'two': {'type': 'inner.yaml'}})
    assert_refused(heat, name('tmpl'), template, 'RequestLimitExceeded', LIMIT_BODY,
                   files={'inner.yaml': json.dumps(inner)})
    assert_healthy(heat)


def test_a_tree_at_the_limit_still_creates(heat):
    """1 group + 999 members is exactly the limit."""
    n = name('exact')
    sid = heat.create(n, hot({'g': group(LIMIT - 1)}))
    heat.wait(sid, 'CREATE_COMPLETE', timeout=120)
    heat.delete(n, sid)
    heat.wait(sid, 'GONE', timeout=120)


def test_a_count_known_only_at_run_time_is_checked_when_the_group_is_made(heat):
    """The count comes from another resource: validation cannot tell it,
    the nested stack's creation refuses it (upstream's own check)."""
    template = hot({'size': tr(value='5000'), 'g': group({'get_attr': ['size', 'output']})})
    n, sid, reason = create_failed(heat, template)
    assert reason == 'Resource CREATE failed: RequestLimitExceeded: resources.g: ' + LIMIT_BODY
    res = heat.resources(n, sid)
    assert res['g']['resource_status'] == 'CREATE_FAILED'
    assert res['g']['physical_resource_id'] in ('', None)
    assert_healthy(heat)


def test_an_update_that_grows_a_group_past_the_limit_is_refused(heat):
    n = name('grow')
    sid = heat.create(n, hot({'g': group(10)}))
    heat.wait(sid, 'CREATE_COMPLETE', timeout=60)
    before = heat.call('GET', '/stacks/%s/%s/resources?nested_depth=1' % (n, sid))[2]['resources']
    for count in (5000, 2 ** 63):
        status, _, doc = heat.call('PUT', '/stacks/%s/%s' % (n, sid), {'template': hot({'g': group(count)})})
        assert status == 400, (status, doc)
        assert doc['error']['type'] in ('RequestLimitExceeded', 'StackValidationFailed'), doc
    status, _, doc = heat.call('PUT', '/stacks/%s/%s' % (n, sid), {'template': hot({'g': group(5000)})})
    assert_fault(status, doc, 400, 'RequestLimitExceeded', LIMIT_BODY)
    st = heat.stack(sid)
    assert st['stack_status'] == 'CREATE_COMPLETE', st
    after = heat.call('GET', '/stacks/%s/%s/resources?nested_depth=1' % (n, sid))[2]['resources']
    assert len(after) == len(before) == 11
    # PATCH with only a parameter that grows the group: the same check.
    template = {'heat_template_version': '2018-08-31', 'parameters': {'n': {'type': 'number', 'default': 10}},
                'resources': {'g': group({'get_param': 'n'})}}
    heat.update(n, sid, template)
    heat.wait(sid, 'UPDATE_COMPLETE', timeout=60)
    status, _, doc = heat.call('PATCH', '/stacks/%s/%s' % (n, sid), {'parameters': {'n': 1200}})
    assert_fault(status, doc, 400, 'RequestLimitExceeded', LIMIT_BODY)
    assert heat.stack(sid)['stack_status'] == 'UPDATE_COMPLETE'
    assert_healthy(heat)
