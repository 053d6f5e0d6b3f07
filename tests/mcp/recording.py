"""The front of the downstream test servers written with the SDKs (py_tool_server.py,
fastmcp_server.py): an ASGI wrapper that records every POST and refuses a wrong bearer token
before the SDK sees it.

Each request appends one JSON line to CALLS_FILE — its time, Authorization, Idempotency-Key and
body — so the test counts the calls. 2026-07-28 makes log messages and progress opt-in per
request (`_meta` `io.modelcontextprotocol/logLevel`, `progressToken`), and countersign asks for
neither: the wrapper asks on its behalf (after recording the body as sent), so a tool's
`ctx.info` and `ctx.report_progress` reach countersign as they would reach a client that asked.
"""

import json
import time


def recorded(app, token, calls_file):
    async def wrapper(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        with open(calls_file, "a") as f:
            f.write(json.dumps({
                "at": time.time(),
                "authorization": headers.get("authorization"),
                "idempotency_key": headers.get("idempotency-key"),
                "body": json.loads(body or b"null"),
            }) + "\n")
        if headers.get("authorization") != f"Bearer {token}":
            await send({"type": "http.response.start", "status": 401, "headers": []})
            return await send({"type": "http.response.body", "body": b""})
        body = opted_in(body)
        sent = False

        async def replay():
            # The body once, then the connection's own events (its disconnect), which an SSE
            # answer listens for.
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await app(scope, replay, send)

    return wrapper


def opted_in(body):
    """A tools/call asking for every log level and for progress."""
    try:
        message = json.loads(body)
    except ValueError:
        return body
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return body
    meta = message.setdefault("params", {}).setdefault("_meta", {})
    meta.setdefault("io.modelcontextprotocol/logLevel", "debug")
    meta.setdefault("progressToken", "countersign-test")
    return json.dumps(message).encode()
