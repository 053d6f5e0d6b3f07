"""A downstream MCP server that answers as the SDKs never do, started by tests/mcp.rs: the
Streamable HTTP answers a client must still read right, or must never take for a success.

Usage: misbehaving_server.py PORT TOKEN CALLS_FILE
Standard library only. Each POST appends one JSON line to CALLS_FILE (as recording.py does) and
is answered by the behaviour its `tools/call` names:

  open         SSE: a progress notification, the result, then the stream stays open
  framing      SSE framed with CR line ends only, and every other thing the SSE format allows
               around the result: a BOM, comments, a priming event (id, empty data), `retry`,
               `id`, an event of another type, data split over lines, a server request and a
               response to another id that both carry our id's number or another
  big-refusal  JSON: an isError result of 70 KB
  big-error    JSON: a JSON-RPC error whose data is 70 KB
  no-result    JSON: a response with neither `result` nor `error`
  huge         JSON: a successful result over 1 MiB (countersign's cap on one message)
  flood        SSE: over 4 MiB of notifications (countersign's cap on one answer), then a result
  garbled      SSE: an event whose data is not JSON, then the result
  cut          SSE: a notification, then the stream ends without a response
  big-503      503 with a 70 KB body
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, token, calls_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]

PAD = "x" * 70_000


def response(result=None, error=None, **more):
    message = {"jsonrpc": "2.0", "id": 1, **more}
    if result is not None:
        message["result"] = result
    if error is not None:
        message["error"] = error
    return json.dumps(message)


def progress(n, message="working"):
    return json.dumps({
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p", "progress": n, "message": message},
    })


def event(data, nl="\n"):
    return f"event: message{nl}data: {data}{nl}{nl}".encode()


DONE = {"content": [], "structuredContent": {"ok": True}}
REFUSED = {"content": [{"type": "text", "text": PAD}], "isError": True}


def framing():
    """Our result, with every legal thing around it, framed with CR alone."""
    parts = [
        "\ufeff: a comment before anything",
        "id: prime-1",
        "retry: 3000",
        "data:",
        "",
        "event: ping",
        "data: " + response(DONE | {"structuredContent": {"ok": "not this one"}}),
        "",
        "event: message",
        "data: " + json.dumps({"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage",
                               "params": {}}),
        "",
        "data: " + json.dumps({"jsonrpc": "2.0", "id": 2,
                               "result": {"structuredContent": {"ok": "another id"}}}),
        "",
        ": keep-alive",
        "id: 7",
        "data:{\"jsonrpc\": \"2.0\",",
        "data: \"id\": 1,",
        "data:  \"result\": {\"structuredContent\": {\"ok\": \"split\"}}}",
        "",
        "",
    ]
    return "\r".join(parts).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        with open(calls_file, "a") as f:
            f.write(json.dumps({
                "at": time.time(),
                "authorization": self.headers.get("authorization"),
                "idempotency_key": self.headers.get("idempotency-key"),
                "body": json.loads(body or b"null"),
            }) + "\n")
        if self.headers.get("authorization") != f"Bearer {token}":
            return self.whole(401, "application/json", b"")
        name = json.loads(body)["params"]["name"]
        try:
            getattr(self, name.replace("-", "_"))()
        except (BrokenPipeError, ConnectionResetError):
            pass  # countersign stopped reading: what it should do once it has its answer

    def whole(self, status, content_type, data):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, *chunks, stay_open=False):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        if stay_open:
            time.sleep(60)
        self.wfile.write(b"0\r\n\r\n")

    def open(self):
        self.stream(event(progress(1)), event(response(DONE)), stay_open=True)

    def framing(self):
        whole = framing()
        # In small pieces, so CR line ends and events fall across chunks.
        self.stream(*(whole[i:i + 7] for i in range(0, len(whole), 7)))

    def big_refusal(self):
        self.whole(200, "application/json", response(REFUSED).encode())

    def big_error(self):
        error = {"code": -32603, "message": "the depot is on fire", "data": PAD}
        self.whole(200, "application/json", response(error=error).encode())

    def no_result(self):
        self.whole(200, "application/json", response().encode())

    def huge(self):
        big = {"content": [], "structuredContent": {"pad": "x" * (1 << 20)}}
        self.whole(200, "application/json", response(big).encode())

    def flood(self):
        note = event(progress(1, PAD))
        self.stream(*([note] * 70), event(response(DONE)))

    def garbled(self):
        self.stream(b"event: message\ndata: {not json\n\n", event(response(DONE)))

    def cut(self):
        self.stream(event(progress(1)))

    def big_503(self):
        self.whole(503, "text/plain", PAD.encode())


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
