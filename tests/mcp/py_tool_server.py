"""A downstream MCP server written with the official Python SDK, started by tests/mcp.rs.

Usage: py_tool_server.py PORT TOKEN CALLS_FILE VARIANT MODE
Serves Streamable HTTP at /mcp, stateless; MODE `json` answers JSON, `sse` an SSE stream (the
SDK's framing: CRLF line ends, `event: message`). recording.py records each request and checks
the token. Tools: `deliver` (answers {"delivered": to}), `refuse` (always an isError result),
`track` (logs and reports progress, then answers) and `survey` (reports progress — more than
64 KiB of it — then fails). With VARIANT `v2`, `deliver` has changed since: it takes a
`signature` too (a new schema and description).
"""

import logging
import sys
import warnings

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

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


@server.tool()
async def track(parcel: str, ctx: Context) -> dict[str, str]:
    """Find a parcel, saying so on the way."""
    await ctx.info(f"looking up {parcel}")
    await ctx.report_progress(1, 2, "found the depot")
    await ctx.debug("asked the depot")
    await ctx.report_progress(2, 2, "found the parcel")
    return {"parcel": parcel, "at": "Berlin"}


@server.tool()
async def survey(parcel: str, ctx: Context) -> dict[str, str]:
    """Ask every depot, then give up: progress over 64 KiB before an isError result."""
    for depot in range(40):
        await ctx.report_progress(depot, 40, f"depot {depot}: " + "no sign of it. " * 120)
    raise ValueError(f"{parcel} is lost")


app = server.streamable_http_app(json_response=mode == "json", stateless_http=True)
uvicorn.run(recorded(app, token, calls_file), host="127.0.0.1", port=port, log_level="warning")
