"""Heat's notifications are not lost when the broker connection breaks.

keelson all-in-one publishes to the machine's real RabbitMQ, in a virtual
host of this run's own, through a TCP relay of this test's that can break
the connection under it: an abrupt close (as a restarted broker or a
failover gives), and a silent stall (a peer that stops answering without
closing: only missed heartbeats reveal it). While stacks are created, the
relay breaks the connection three times; afterwards a kombu listener
(connected to RabbitMQ directly) must have received every
`orchestration.stack.create.start` and `.end` of every stack. A copy may
arrive twice (a confirmation lost with the connection); none may be lost.

Before publisher confirms and heartbeats, this lost the messages written
into a dead socket, and after the stall everything until the next write
error.

rabbitmqctl (root, on every machine here) makes and removes the vhost."""
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid

import kombu
import pytest

from conftest import RUN_ID
from test_heat_signals import start

RABBIT_HOST, RABBIT_PORT = '127.0.0.1', 5672
STACKS = 24


def rabbitmqctl(*args):
    return subprocess.run(['rabbitmqctl', *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def vhost():
    if shutil.which('rabbitmqctl') is None or os.geteuid() != 0:
        pytest.fail('rabbitmqctl (as root) makes the per-run vhost; it is part of every machine here')
    name = 'kt_%s_notify_%s' % (RUN_ID, uuid.uuid4().hex[:6])
    rabbitmqctl('add_vhost', name)
    rabbitmqctl('set_permissions', '-p', name, 'guest', '.*', '.*', '.*')
    yield name
    rabbitmqctl('delete_vhost', name)


class Relay:
    """A TCP relay to RabbitMQ that can break the connections through it:
    `sever()` resets them, `stall()` stops forwarding (the sockets stay
    open, nothing passes), `heal()` closes the stalled ones and forwards
    new connections again."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(('127.0.0.1', 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []
        self.stalled = False
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((RABBIT_HOST, RABBIT_PORT), timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.accepted += 1
                self.pairs.append((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        src.settimeout(0.2)
        while True:
            if self.stalled:
                time.sleep(0.05)
                if src.fileno() < 0:
                    return
                continue
            try:
                data = src.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                data = b''
            if not data:
                for s in (src, dst):
                    self._close(s)
                return
            try:
                dst.sendall(data)
            except OSError:
                for s in (src, dst):
                    self._close(s)
                return

    @staticmethod
    def _close(s, reset=False):
        try:
            if reset:
                # An abrupt close (RST), as a crashed peer gives.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\x01\x00\x00\x00\x00\x00\x00\x00')
            s.close()
        except OSError:
            pass

    def _drop_all(self, reset):
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for s in pair:
                self._close(s, reset=reset)

    def sever(self):
        self._drop_all(reset=True)

    def stall(self):
        self.stalled = True

    def heal(self):
        self._drop_all(reset=False)
        self.stalled = False

    def close(self):
        self._close(self.listener)
        self._drop_all(reset=False)


@pytest.fixture
def relay():
    r = Relay()
    yield r
    r.close()


def test_no_notification_is_lost_when_the_connection_breaks(procs, vhost, relay):
    broker = 'amqp://guest:guest@%s:%d/%s' % (RABBIT_HOST, RABBIT_PORT, vhost)
    conn = kombu.Connection(broker)
    exchange = kombu.Exchange('heat', 'topic', durable=False)
    queue = kombu.Queue('kt-listener', exchange=exchange, routing_key='notifications.*')(conn.channel())
    queue.declare()
    # Heartbeats of 2 s: a stalled connection is given up after 4 s of
    # silence; reconnection is retried every second or two.
    extra = {
        'oslo_messaging_notifications': {'driver': 'messagingv2',
                                         'transport_url': 'rabbit://guest:guest@127.0.0.1:%d/%s' % (relay.port, vhost)},
        'oslo_messaging_rabbit': {'heartbeat_timeout_threshold': 2, 'rabbit_retry_interval': 1,
                                  'rabbit_interval_max': 2},
    }
    heat = start(procs, 'sqlite', extra=extra)
    template = {'heat_template_version': '2013-05-23', 'resources': {'r': {'type': 'OS::Heat::None'}}}
    names = ['deliver-%02d-%s' % (i, uuid.uuid4().hex[:4]) for i in range(STACKS)]
    created = []
    for i, name in enumerate(names):
        if i == 6:
            relay.sever()
        if i == 12:
            relay.stall()
        if i == 16:
            # The stall outlasts two heartbeat timeouts.
            time.sleep(6)
            relay.heal()
        if i == 20:
            relay.sever()
        created.append((name, heat.create(name, template)))
    for name, sid in created:
        heat.wait(sid, 'CREATE_COMPLETE')

    wanted = {(n, 'orchestration.stack.create.%s' % phase) for n in names for phase in ('start', 'end')}
    received = []

    def take(body, message):
        received.append(body)
        message.ack()

    def seen():
        out = set()
        for body in received:
            if isinstance(body, (bytes, str)):
                body = json.loads(body)
            m = json.loads(body['oslo.message'])
            out.add((m['payload'].get('stack_name'), m['event_type']))
        return out

    deadline = time.monotonic() + 60
    with conn.Consumer(queue, callbacks=[take]):
        while not wanted <= seen() and time.monotonic() < deadline:
            try:
                conn.drain_events(timeout=1)
            except (TimeoutError, socket.timeout):
                pass
    conn.release()
    missing = sorted(wanted - seen())
    assert not missing, 'lost %d of %d notifications: %s' % (len(missing), len(wanted), missing[:10])
    # The relay was broken three times: the publisher connected again.
    assert relay.accepted >= 3, relay.accepted
