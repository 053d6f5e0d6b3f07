"""A downstream MCP server written with the official Python SDK, started by tests/mcp.rs.

Usage: py_tool_server.py PORT TOKEN CALLS_FILE VARIANT MODE
Serves Streamable HTTP at /mcp, stateless; MODE `json` answers JSON, `sse` an SSE stream (the
SDK's framing: CRLF line ends, `event: message`). recording.py records each request and checks
the token. Tools: `deliver` (answers {"delivered": to}), `refuse` (always an isError result),
and depot_tools.py's `track` and `survey`, which log and report progress before their result.
With VARIANT `v2`, `deliver` has changed since: it takes a `signature` too (a new schema and
description).
"""

import logging
import sys
import warnings

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

from depot_tools import depot_tools
from recording import recorded

# Logging is deprecated in 2026-07-28 but still served; the failing tools' tracebacks are
# expected. Keep the test's output to what goes wrong otherwise.
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28")
logging.getLogger("mcp").setLevel(logging.CRITICAL)

port, token, calls_file, variant, mode = int(sys.argv[1]), *sys.argv[2:6]
server = MCPServer("downstream")

if variant == "v2":
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


for tool in depot_tools(Context):
    server.tool()(tool)

app = server.streamable_http_app(json_response=mode == "json", stateless_http=True)
uvicorn.run(recorded(app, token, calls_file), host="127.0.0.1", port=port, log_level="warning")
