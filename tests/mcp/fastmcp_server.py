"""A downstream MCP server written with FastMCP (the standalone framework), started by
tests/mcp.rs.

Usage: fastmcp_server.py PORT TOKEN CALLS_FILE MODE
Serves Streamable HTTP at /mcp, stateless; MODE `json` answers JSON, `sse` an SSE stream
(FastMCP's framing: CRLF line ends, `event: message`). recording.py records each request and
checks the token. Tools: `track` (logs and reports progress, then answers) and `survey`
(reports progress — more than 64 KiB of it — then fails).
"""

import os
import sys
import warnings

# Logging is deprecated in 2026-07-28 but still served; the failing tool's traceback is
# expected. Keep the test's output to what goes wrong otherwise.
os.environ.setdefault("FASTMCP_LOG_LEVEL", "CRITICAL")
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28")

import uvicorn  # noqa: E402
from fastmcp import Context, FastMCP  # noqa: E402

from recording import recorded  # noqa: E402

port, token, calls_file, mode = int(sys.argv[1]), *sys.argv[2:5]
server = FastMCP("downstream")


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


app = server.http_app(path="/mcp", json_response=mode == "json", stateless_http=True)
uvicorn.run(recorded(app, token, calls_file), host="127.0.0.1", port=port, log_level="warning")
