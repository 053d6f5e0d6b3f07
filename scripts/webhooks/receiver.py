"""A webhook and notification receiver that verifies every request with independent libraries:
`standardwebhooks` for signing = "standard-webhooks", Stripe's `WebhookSignature.verify_header`
for the default countersign signature (scripts/webhook-verifiers.sh). Paths name the format;
each request is answered 200 when it verifies, 401 otherwise, and logged one JSON line per
request to the file given.

    python receiver.py <port> <log file>
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import standardwebhooks
import stripe

STANDARD = standardwebhooks.Webhook(os.environ["COUNTERSIGN_STD_SECRET"])
COUNTERSIGN = os.environ["COUNTERSIGN_CS_SECRET"]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        kind = self.path.strip("/")
        try:
            if kind.endswith("standard"):
                STANDARD.verify(body, dict(self.headers))
                # A tool call's webhook-id is its action id (the same on every attempt); a
                # notice's is its event id.
                doc = json.loads(body)
                expected = doc["action_id"] if kind.startswith("tool") else doc["id"]
                assert self.headers["webhook-id"] == expected, (self.headers["webhook-id"], expected)
            else:
                stripe.WebhookSignature.verify_header(
                    body.decode(), self.headers["countersign-signature"], COUNTERSIGN, tolerance=300
                )
            ok, why = True, ""
        except Exception as e:  # noqa: BLE001 — any failure is a failed verification
            ok, why = False, f"{type(e).__name__}: {e}"
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps({"kind": kind, "ok": ok, "why": why}) + "\n")
        self.send_response(200 if ok else 401)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"ok": true}')

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
