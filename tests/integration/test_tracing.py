"""OpenTelemetry: with [telemetry] otlp_endpoint set, the gateway and the
inventory service export their spans over OTLP/gRPC, in the caller's trace,
the service's span a child of the gateway's. The collector here is a real
OTLP gRPC endpoint (opentelemetry-proto's TraceService) run by the test."""
import os
import tempfile
import threading
import time
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from conftest import Proc, free_port, http, keelson_bin, new_uuid, wait_http, wait_port, write_conf


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


def test_spans_exported_in_one_trace(procs):
    collector = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    otlp_port = free_port()
    server.add_insecure_port('127.0.0.1:%d' % otlp_port)
    server.start()
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
