"""A downstream MCP server written with the official Python SDK, started by tests/mcp.rs.

Usage: py_tool_server.py PORT TOKEN CALLS_FILE [v2]
Serves Streamable HTTP at /mcp (stateless, JSON answers). Each request appends one JSON line to
CALLS_FILE — its time, Authorization, Idempotency-Key and body — so the test counts the calls.
Tools: `deliver` (answers {"delivered": to}) and `refuse` (always an isError result). With
`v2`, `deliver` has changed since: it takes a `signature` too (a new schema and description).
"""

import json
import sys
import time

import uvicorn
from mcp.server.mcpserver import MCPServer

port, token, calls_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
v2 = sys.argv[4:] == ["v2"]
server = MCPServer("downstream")

if v2:
    @server.tool()
    def deliver(to: str, signature: bool = False) -> dict[str, str]:
        """Deliver a parcel, signed for when asked."""
        return {"delivered": to, "signed": str(signature)}
else:
    @server.tool()
    def deliver(to: str) -> dict[str, str]:
        """Deliver a parcel."""
        return {"delivered": to}


@server.tool()
def refuse(to: str) -> dict[str, str]:
    """Always fails."""
    raise ValueError(f"cannot deliver to {to}")


app = server.streamable_http_app(json_response=True, stateless_http=True)


async def counted(scope, receive, send):
    """Record every POST, and refuse a wrong bearer token, before the SDK sees it."""
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
    sent = False

    async def replay():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return await app(scope, replay, send)


uvicorn.run(counted, host="127.0.0.1", port=port, log_level="warning")
