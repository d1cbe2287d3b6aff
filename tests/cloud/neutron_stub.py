#!/usr/bin/env python3
"""A stand-in for Neutron's API: just enough for Nova to run servers that
have no network (`"networks": "none"`).

  neutron_stub.py PORT LOG_FILE

Only for a machine where the real Neutron (network.py: it needs root and
Open vSwitch) cannot run: `run --neutron stub`; the ports phase then does
not run. None of the other flows attach a port; what Nova still asks
Neutron for is bookkeeping. What it fakes, exactly:
- every GET of a collection (/v2.0/ports, /v2.0/networks,
  /v2.0/security-groups, /v2.0/floatingips, /v2.0/extensions, ...)
  answers 200 with an empty list under the collection's name, whatever
  the filters: there are no ports, networks or security groups;
- GET / and /v2.0 answer a version document;
- any other request (create, update, delete, a single resource) answers
  404 NeutronError, which Nova never needs for port-less servers;
- tokens are not validated.
Every request is appended to LOG_FILE (method, path, status), so a run
can show what Nova asked for.
"""
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    log_lock = threading.Lock()
    log_file = None

    def answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
        with self.log_lock, open(self.log_file, 'a') as log:
            log.write('%s %s %d\n' % (self.command, self.path, status))

    def drain(self):
        length = int(self.headers.get('Content-Length') or 0)
        if length:
            self.rfile.read(length)

    def do_GET(self):
        self.drain()
        parts = [p for p in urlsplit(self.path).path.split('/') if p]
        if not parts or parts == ['v2.0']:
            self.answer(200, {'versions': [{'id': 'v2.0', 'status': 'CURRENT', 'links': []}]})
        elif len(parts) == 2 and parts[0] == 'v2.0':
            # Collection names map to their JSON keys with '-' as '_'.
            self.answer(200, {parts[1].replace('-', '_').removesuffix('.json'): []})
        else:
            self.not_found()

    def not_found(self):
        self.drain()
        self.answer(404, {'NeutronError': {'type': 'HTTPNotFound', 'message': 'not faked', 'detail': ''}})

    do_POST = do_PUT = do_DELETE = do_PATCH = not_found

    def log_message(self, format, *args):
        pass


def main():
    port, Handler.log_file = int(sys.argv[1]), sys.argv[2]
    server = ThreadingHTTPServer(('127.0.0.1', port), Handler)
    server.daemon_threads = True
    print('neutron stub on http://127.0.0.1:%d' % port, file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == '__main__':
    main()
