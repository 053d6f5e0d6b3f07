"""A downstream MCP server written with FastMCP (the standalone framework), started by
tests/mcp.rs.

Usage: fastmcp_server.py PORT TOKEN CALLS_FILE MODE
Serves Streamable HTTP at /mcp, stateless; MODE `json` answers JSON, `sse` an SSE stream
(FastMCP's framing: CRLF line ends, `event: message`). recording.py records each request and
checks the token. Tools: depot_tools.py's `track` and `survey`, which log and report progress
before their result.
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

from depot_tools import depot_tools  # noqa: E402
from recording import recorded  # noqa: E402

port, token, calls_file, mode = int(sys.argv[1]), *sys.argv[2:5]
server = FastMCP("downstream")
for tool in depot_tools(Context):
    server.tool()(tool)

app = server.http_app(path="/mcp", json_response=mode == "json", stateless_http=True)
uvicorn.run(recorded(app, token, calls_file), host="127.0.0.1", port=port, log_level="warning")
