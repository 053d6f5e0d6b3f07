"""The conformance run's harness (scripts/mcp-conformance.sh), standard library only.

The suite's server scenarios connect without credentials, and countersign's /mcp takes only an
agent key: this relays each request to the server unchanged, adding `Authorization: Bearer
<key>` (the Host and Origin headers pass through as sent, so dns-rebinding-protection is
countersign's own answer). It also serves the conformance catalog's failing tool at
POST /tool/fail (HTTP 422), which countersign calls as a webhook.

    python3 harness.py LISTEN_PORT UPSTREAM_HOST:PORT AGENT_KEY
"""

import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

listen, upstream, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
up_host, up_port = upstream.rsplit(":", 1)
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "content-length"}


class Relay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def relay(self):
        n = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path == "/tool/fail":
            return self.answer(422, [("content-type", "application/json")],
                               b'{"error": "this tool intentionally fails for testing"}')
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Authorization"] = "Bearer " + key
        conn = http.client.HTTPConnection(up_host, int(up_port), timeout=60)
        conn.request(self.command, self.path, body=body or None, headers=headers)
        r = conn.getresponse()
        data = r.read()
        self.answer(r.status, [(k, v) for k, v in r.getheaders() if k.lower() not in HOP], data)
        sys.stderr.write(f"{self.command} {self.path} -> {r.status}\n")

    def answer(self, status, headers, data):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PUT = relay

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", listen), Relay).serve_forever()
