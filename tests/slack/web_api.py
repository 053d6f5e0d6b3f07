"""A local stand-in of Slack's Web API for tests/slack.rs, checked by Slack's own SDK (slack_sdk).

    python web_api.py BOT_TOKEN

Prints its port on the first line of stdout, then serves:

- POST /api/chat.postMessage, /api/chat.update, /api/chat.postEphemeral, /api/views.open,
  /api/users.info: the Web API methods countersign calls. Each checks the bot token
  (`Authorization: Bearer …`, else `{"ok": false, "error": "invalid_auth"}`), and every message's
  `blocks` and every view's are parsed by slack_sdk's Block Kit models (`Block.parse` then
  `to_dict()`, which validates lengths and shapes) and must come back unchanged: anything the
  models refuse or do not know is answered `invalid_blocks` (HTTP 200, as Slack does) and
  recorded as an error.
- GET /calls: every call so far, `[{"method", "body", "error"}]`, for the tests to look at.
- POST /fail {"times": n, "status": s}: answer the next n calls with HTTP s (Slack down);
  GET /failed: how many were answered so.
- POST /users {"U…": {"email": …, "deleted": bool, "is_bot": bool}}: the workspace's members
  `users.info` answers, in Slack's shape (`user.profile.email`; `user_not_found` for others).
  `users.info` takes its `user` as a form, as Slack's read methods do.
- POST /sign {"secret", "timestamp", "body"}: `x-slack-signature` for that request, computed by
  slack_sdk.signature.SignatureVerifier — the tests' interactions are signed by Slack's code.
"""

import json
import sys
from urllib.parse import parse_qsl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View
from slack_sdk.signature import SignatureVerifier

TOKEN = sys.argv[1]
CALLS = []
LOCK = threading.Lock()
FAIL = {"times": 0, "status": 503, "failed": 0}
TS = [1700000000]
USERS = {}


def check_blocks(blocks):
    """Parse with slack_sdk's models; the round trip must give the same blocks back."""
    if not isinstance(blocks, list) or not blocks:
        return "blocks must be a non-empty list"
    for raw in blocks:
        parsed = Block.parse(raw)
        if parsed is None:
            return f"unknown block {raw!r}"
        try:
            again = parsed.to_dict()
        except Exception as e:  # slack_sdk's SlackObjectFormationError and friends
            return f"invalid block {raw!r}: {e}"
        if again != raw:
            return f"block changed by the models: {raw!r} -> {again!r}"
    return None


def check_view(view):
    try:
        parsed = View(**view)
        again = parsed.to_dict()
    except Exception as e:
        return f"invalid view: {e}"
    if again.get("blocks") != view.get("blocks"):
        return f"view blocks changed by the models: {view!r} -> {again!r}"
    return check_blocks(view.get("blocks"))


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json; charset=utf-8")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/calls":
            with LOCK:
                return self.answer(200, CALLS)
        if self.path == "/failed":
            with LOCK:
                return self.answer(200, {"failed": FAIL["failed"]})
        self.answer(404, {"ok": False})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/fail":
            FAIL.update(json.loads(raw))
            return self.answer(200, {"ok": True})
        if self.path == "/users":
            with LOCK:
                USERS.update(json.loads(raw))
            return self.answer(200, {"ok": True})
        if self.path == "/sign":
            req = json.loads(raw)
            verifier = SignatureVerifier(req["secret"])
            return self.answer(
                200,
                {"signature": verifier.generate_signature(timestamp=req["timestamp"], body=req["body"])},
            )
        if not self.path.startswith("/api/"):
            return self.answer(404, {"ok": False})
        method = self.path[len("/api/"):]
        with LOCK:
            if FAIL["times"] > 0:
                FAIL["times"] -= 1
                FAIL["failed"] += 1
                return self.answer(FAIL["status"], {"ok": False, "error": "down"})
        form = self.headers.get("content-type", "").startswith("application/x-www-form-urlencoded")
        body = dict(parse_qsl(raw.decode())) if form else (json.loads(raw) if raw else {})
        error = None
        if self.headers.get("authorization") != f"Bearer {TOKEN}":
            error = "invalid_auth"
        elif method in ("chat.postMessage", "chat.update"):
            error = check_blocks(body.get("blocks"))
            if error is None and not body.get("text"):
                error = "no_text"
        elif method == "views.open":
            error = check_view(body.get("view", {})) if body.get("trigger_id") else "invalid_trigger"
        elif method not in ("chat.postEphemeral", "users.info"):
            error = "unknown_method"
        with LOCK:
            CALLS.append({"method": method, "body": body, "error": error})
            if error is not None:
                return self.answer(200, {"ok": False, "error": error})
            if method == "chat.postMessage":
                TS[0] += 1
                return self.answer(200, {"ok": True, "channel": body["channel"], "ts": f"{TS[0]}.000100"})
            if method == "chat.update":
                return self.answer(200, {"ok": True, "channel": body["channel"], "ts": body["ts"]})
            if method == "users.info":
                member = USERS.get(body.get("user"))
                if not form or member is None:
                    return self.answer(200, {"ok": False, "error": "user_not_found" if form else "invalid_arguments"})
                user = {
                    "id": body["user"],
                    "deleted": member.get("deleted", False),
                    "is_bot": member.get("is_bot", False),
                    "profile": {"email": member["email"]},
                }
                return self.answer(200, {"ok": True, "user": user})
            self.answer(200, {"ok": True})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
