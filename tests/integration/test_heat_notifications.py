"""Heat's notifications from `keelson all-in-one` on the machine's real
RabbitMQ, read with kombu as a Ceilometer-style listener does: what
upstream's NotificationTest checks (its own copy cannot run here: it reads
RabbitMQ options that current oslo.messaging no longer has).

Every state change of a stack is `orchestration.stack.<action>.<start|end>`
on exchange `heat` with routing key `notifications.info`, in oslo.messaging's
v2 envelope, its payload naming the stack; a scaling policy's signal sends
`orchestration.autoscaling.start` and `.end`.

KEELSON_TEST_RABBIT names the broker (default the local guest account)."""
import json
import os
import time
import urllib.request
import uuid

import kombu
import pytest

from test_heat_signals import start

BROKER = os.environ.get('KEELSON_TEST_RABBIT', 'amqp://guest:guest@127.0.0.1:5672/')

BASIC = [
    'orchestration.stack.%s.%s' % (action, phase)
    for action in ('create', 'update', 'suspend', 'resume', 'delete')
    for phase in ('start', 'end')
]

ASG_TEMPLATE = {
    'heat_template_version': '2013-05-23',
    'resources': {
        'asg': {'type': 'OS::Heat::AutoScalingGroup',
                'properties': {'resource': {'type': 'OS::Heat::RandomString'},
                               'min_size': 1, 'desired_capacity': 2, 'max_size': 3}},
        'up': {'type': 'OS::Heat::ScalingPolicy',
               'properties': {'adjustment_type': 'change_in_capacity', 'auto_scaling_group_id': {'get_resource': 'asg'},
                              'cooldown': 0, 'scaling_adjustment': 1}},
    },
    'outputs': {'up_url': {'value': {'get_attr': ['up', 'alarm_url']}}},
}


class Listener:
    """An exclusive queue on the `heat` exchange, as the upstream test binds."""

    def __init__(self):
        self.conn = kombu.Connection(BROKER)
        self.exchange = kombu.Exchange('heat', 'topic', durable=False)
        self.queue = kombu.Queue(exchange=self.exchange, routing_key='notifications.*', exclusive=True)(self.conn.channel())
        self.queue.declare()
        self.received = []

    def _take(self, body, message):
        self.received.append(body)
        message.ack()

    def drain(self, until, timeout=30):
        deadline = time.monotonic() + timeout
        with self.conn.Consumer(self.queue, callbacks=[self._take], auto_declare=False):
            while not until(self.received) and time.monotonic() < deadline:
                try:
                    self.conn.drain_events(timeout=1)
                except TimeoutError:
                    pass
                except Exception as e:  # socket.timeout on older Pythons
                    if 'timed out' not in str(e):
                        raise
        return self.received

    def close(self):
        self.conn.release()


def unwrap(body):
    """oslo.messaging's v2 envelope around the message."""
    if isinstance(body, (bytes, str)):
        body = json.loads(body)
    assert body['oslo.version'] == '2.0', body
    return json.loads(body['oslo.message'])


def events_of(messages, stack_name):
    out = []
    for m in map(unwrap, messages):
        if m['payload'].get('stack_name') == stack_name:
            out.append(m['event_type'])
    return out


@pytest.fixture
def listener():
    try:
        listen = Listener()
    except Exception as e:  # noqa: BLE001 (the broker is part of every machine)
        pytest.fail('RabbitMQ at %s is not reachable: %s' % (BROKER, e))
    yield listen
    listen.close()


@pytest.fixture
def heat(procs):
    extra = {'oslo_messaging_notifications': {'driver': 'messagingv2',
                                              'transport_url': BROKER.replace('amqp://', 'rabbit://')}}
    return start(procs, 'sqlite', extra=extra)


def test_every_stack_state_change_is_notified(heat, listener):
    name = 'notify-%s' % uuid.uuid4().hex[:6]
    one = {'heat_template_version': '2013-05-23', 'resources': {'r1': {'type': 'OS::Heat::RandomString'}}}
    two = {'heat_template_version': '2013-05-23',
           'resources': {'r1': {'type': 'OS::Heat::RandomString'}, 'r2': {'type': 'OS::Heat::RandomString'}}}
    sid = heat.create(name, one)
    heat.wait(sid, 'CREATE_COMPLETE')
    heat.update(name, sid, two)
    heat.wait(sid, 'UPDATE_COMPLETE')
    for action, state in (('suspend', 'SUSPEND_COMPLETE'), ('resume', 'RESUME_COMPLETE')):
        status, _, doc = heat.call('POST', '/stacks/%s/%s/actions' % (name, sid), {action: None})
        assert status == 200, (status, doc)
        heat.wait(sid, state)
    heat.delete(name, sid)
    heat.wait(sid, 'GONE')
    got = events_of(listener.drain(lambda r: set(BASIC) <= set(events_of(r, name))), name)
    assert set(BASIC) <= set(got), got
    assert got.index('orchestration.stack.create.start') < got.index('orchestration.stack.create.end')
    payload = next(unwrap(b)['payload'] for b in listener.received
                   if unwrap(b)['event_type'] == 'orchestration.stack.create.end' and unwrap(b)['payload']['stack_name'] == name)
    assert payload['stack_identity'] == sid
    assert payload['state'] == 'CREATE_COMPLETE'
    assert payload['tenant_id'] == 'admin'


def test_a_scaling_signal_is_notified_as_autoscaling_start_and_end(heat, listener):
    name = 'notify-asg-%s' % uuid.uuid4().hex[:6]
    sid = heat.create(name, ASG_TEMPLATE)
    heat.wait(sid, 'CREATE_COMPLETE')
    url = heat.output(name, sid, 'up_url')
    with urllib.request.urlopen(urllib.request.Request(url, data=b'', method='POST')) as resp:
        assert resp.status == 200

    def scaled(received):
        got = events_of(received, name)
        return 'orchestration.autoscaling.end' in got

    got = events_of(listener.drain(scaled), name)
    assert got.count('orchestration.autoscaling.start') == 1, got
    assert got.count('orchestration.autoscaling.end') == 1, got
    end = next(unwrap(b)['payload'] for b in listener.received if unwrap(b)['event_type'] == 'orchestration.autoscaling.end')
    # Heat's groupname is the group's reference (FnGetRefId): for
    # OS::Heat::AutoScalingGroup, its nested stack's id.
    group_ref = heat.resources(name, sid)['asg']['physical_resource_id']
    assert (end['groupname'], end['capacity'], end['adjustment']) == (group_ref, 3, 1)
