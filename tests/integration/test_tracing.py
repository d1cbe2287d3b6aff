"""OpenTelemetry: with [telemetry] otlp_endpoint set, the gateway and the
services export their spans over OTLP/gRPC, in the caller's trace, each
service's span a child of its caller's: from the REST edge through the
stack engine's API and the worker that ran check_resource on to the
inventory service. The collector here is a real OTLP gRPC endpoint
(opentelemetry-proto's TraceService) run by the test."""
import json
import os
import tempfile
import threading
import time
import urllib.request
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from conftest import Proc, create_database, free_port, http, keelson_bin, new_uuid, wait_http, wait_port, write_conf
from heat import Heat


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self):
        self.spans = []  # (service name, span)
        self.lock = threading.Lock()

    def Export(self, request, context):
        with self.lock:
            for rs in request.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == 'service.name'), '')
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        self.spans.append((service, span))
        return trace_service_pb2.ExportTraceServiceResponse()

    def of_trace(self, trace_id):
        with self.lock:
            return [(svc, s) for svc, s in self.spans if s.trace_id.hex() == trace_id]


def start_collector():
    collector = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    port = free_port()
    server.add_insecure_port('127.0.0.1:%d' % port)
    server.start()
    return collector, server, port


def attribute(span, key):
    return next((a.value.string_value for a in span.attributes if a.key == key), None)


def test_spans_exported_in_one_trace(procs):
    collector, server, otlp_port = start_collector()
    try:
        d = tempfile.mkdtemp(prefix='kt-otel-')
        inv_port, p_port, o_port = free_port(), free_port(), free_port()
        conf = write_conf(os.path.join(d, 'k.conf'), {
            'placement_database': {'connection': 'sqlite:///%s/p.db' % d, 'sync_on_startup': 'true'},
            'api': {'auth_strategy': 'noauth2'},
            'telemetry': {'otlp_endpoint': 'http://127.0.0.1:%d' % otlp_port},
            'keelson': {'inventory_listen': '127.0.0.1:%d' % inv_port,
                        'inventory_endpoint': 'http://127.0.0.1:%d' % inv_port,
                        'placement_listen': '127.0.0.1:%d' % p_port,
                        'orchestration_listen': '127.0.0.1:%d' % o_port}})
        inv = Proc([keelson_bin(), '--config-file', conf, 'inventory'])
        procs.append(inv)
        wait_port(inv_port, proc=inv)
        gw = Proc([keelson_bin(), '--config-file', conf, 'gateway'])
        procs.append(gw)
        wait_http('http://127.0.0.1:%d/' % p_port, proc=gw)
        trace_id = new_uuid().replace('-', '')
        caller_span = 'b7ad6b7169203331'
        status, _, _ = http('GET', 'http://127.0.0.1:%d/resource_classes' % p_port,
                            headers={'traceparent': '00-%s-%s-01' % (trace_id, caller_span)})
        assert status == 200
        # Stopping flushes the exporters.
        gw.stop()
        inv.stop()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with collector.lock:
                mine = [(svc, s) for svc, s in collector.spans if s.trace_id.hex() == trace_id]
            if {'keelson-gateway', 'keelson-inventory'} <= {svc for svc, _ in mine}:
                break
            time.sleep(0.2)
        services = {svc for svc, _ in mine}
        assert {'keelson-gateway', 'keelson-inventory'} <= services, (services, gw.output()[-2000:])
        gateway_span = next(s for svc, s in mine if svc == 'keelson-gateway' and s.name == 'http.request')
        assert gateway_span.parent_span_id.hex() == caller_span
        rpc_span = next(s for svc, s in mine if svc == 'keelson-inventory' and s.name == 'rpc')
        assert rpc_span.parent_span_id == gateway_span.span_id
    finally:
        server.stop(0)


def test_one_trace_from_the_edge_through_the_engine_to_inventory(procs):
    """A stack of OS::Placement::ResourceProvider resources created through
    the REST gateway on two engines: the gateway's span, the engine API's
    CreateStack span, the check_resource span of the engine that ran each
    resource (behind its EngineWorker.CheckResource span when another
    engine ran it) and the inventory call it made are one trace, each the
    child of the one before."""
    collector, server, otlp_port = start_collector()
    try:
        d = tempfile.mkdtemp(prefix='kt-otel-heat-')
        telemetry = {'otlp_endpoint': 'http://127.0.0.1:%d' % otlp_port}
        inv_port, o_port = free_port(), free_port()
        engine_ports = [free_port(), free_port()]
        inventory = 'http://127.0.0.1:%d' % inv_port
        inv_conf = write_conf(os.path.join(d, 'inventory.conf'), {
            'placement_database': {'connection': 'sqlite:///%s/p.db' % d, 'sync_on_startup': 'true'},
            'telemetry': telemetry,
            'keelson': {'inventory_listen': '127.0.0.1:%d' % inv_port}})
        inv = Proc([keelson_bin(), '--config-file', inv_conf, 'inventory'])
        procs.append(inv)
        wait_port(inv_port, proc=inv)
        orchestration_db = create_database('sqlite', 'otel_heat')
        engines = []
        for i, port in enumerate(engine_ports):
            conf = write_conf(os.path.join(d, 'engine%d.conf' % i), {
                'database': {'connection': orchestration_db},
                'telemetry': telemetry,
                'orchestration': {'periodic_interval': '1', 'stall_timeout': '5'},
                'keelson': {'engine_listen': '127.0.0.1:%d' % port, 'inventory_endpoint': inventory}})
            engine = Proc([keelson_bin(), '--config-file', conf, 'engine'], cwd=d)
            procs.append(engine)
            wait_port(port, proc=engine)
            engines.append(engine)
        gw_conf = write_conf(os.path.join(d, 'gateway.conf'), {
            'telemetry': telemetry,
            'api': {'auth_strategy': 'noauth2'},
            'orchestration': {'auth_strategy': 'noauth'},
            'keelson': {'orchestration_listen': '127.0.0.1:%d' % o_port,
                        'placement_listen': '127.0.0.1:%d' % free_port(),
                        'inventory_endpoint': inventory,
                        'engine_endpoints': ','.join('http://127.0.0.1:%d' % p for p in engine_ports)}})
        gw = Proc([keelson_bin(), '--config-file', gw_conf, 'gateway'], cwd=d)
        procs.append(gw)
        url = 'http://127.0.0.1:%d' % o_port
        wait_http(url + '/', proc=gw)
        heat = Heat(url)

        # Several leaves, so that the engine handling CreateStack hands
        # some of them to the other engine (round robin over both).
        template = {'heat_template_version': '2018-08-31', 'resources': {
            'rp%d' % i: {'type': 'OS::Placement::ResourceProvider',
                         'properties': {'inventories': {'VCPU': {'total': 8}}}} for i in range(4)}}
        trace_id = new_uuid().replace('-', '')
        caller_span = 'c0ffee0ddba11e55'
        body = json.dumps({'stack_name': 'traced', 'template': template, 'disable_rollback': True}).encode()
        req = urllib.request.Request(heat.url('/stacks'), data=body, method='POST', headers={
            'X-Auth-Project': heat.project, 'X-Auth-User': 'tester', 'Content-Type': 'application/json',
            'Accept': 'application/json', 'traceparent': '00-%s-%s-01' % (trace_id, caller_span)})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 201
            ident = json.loads(r.read().decode())['stack']['id']
        heat.wait(ident, 'CREATE_COMPLETE')
        assert len(heat.resources('traced', ident)) == 4
        # Stopping flushes the exporters.
        for p in [gw] + engines + [inv]:
            p.stop()

        def chains(mine):
            by_id = {s.span_id: (svc, s) for svc, s in mine}
            calls = [s for svc, s in mine if svc == 'keelson-inventory' and s.name == 'rpc'
                     and attribute(s, 'method') == 'CreateResourceProvider']
            found = []
            for call in calls:
                chain = [('keelson-inventory', call)]
                while chain[-1][1].parent_span_id in by_id:
                    chain.append(by_id[chain[-1][1].parent_span_id])
                found.append(chain)
            return found

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = chains(collector.of_trace(trace_id))
            if len(found) == 4 and all(c[-1][1].parent_span_id.hex() == caller_span for c in found):
                break
            time.sleep(0.2)
        mine = collector.of_trace(trace_id)
        assert len(found) == 4, ({(svc, s.name, attribute(s, 'method')) for svc, s in mine}, gw.output()[-2000:])

        def step(svc, span):
            method = attribute(span, 'method')
            return (svc, span.name) + ((method,) if method else ())

        remote = 0
        for chain in found:
            steps = [step(svc, s) for svc, s in chain]
            # From the inventory call up to the caller of the REST request.
            assert steps[0] == ('keelson-inventory', 'rpc', 'CreateResourceProvider'), steps
            assert steps[1] == ('keelson-engine', 'check_resource'), steps
            if steps[2] == ('keelson-engine', 'rpc', 'CheckResource'):
                assert attribute(chain[2][1], 'service') == 'keelson.orchestration.v1.EngineWorker', steps
                remote += 1
                steps = steps[:2] + steps[3:]
            assert steps[2] == ('keelson-engine', 'rpc', 'CreateStack'), steps
            assert attribute(chain[-2][1], 'service') == 'keelson.orchestration.v1.Orchestration', steps
            assert steps[3:] == [('keelson-gateway', 'http.request', 'POST')], steps
            assert chain[-1][1].parent_span_id.hex() == caller_span
        # One gateway span and one CreateStack span: a single request.
        assert len({c[-1][1].span_id for c in found}) == 1
        assert remote >= 1, 'no check_resource ran on the other engine'
    finally:
        server.stop(0)
