"""FastMCP's client (the standalone framework's `fastmcp.Client`), driven by tests/mcp/compat.rs.

Usage: fastmcp_client.py URL KEY PLAN
Connects over Streamable HTTP with the agent key as the bearer token, lists the tools, then
each call of PLAN ({"allowed": [name, args], "refused": …, "waiting": …}) as an application
calls a tool: `call_tool(..., raise_on_error=False)`, so a refusal is an error result to read,
not an exception. Then countersign_status on the waiting call's action; after one line on
stdin (the test approved it over the API) countersign_status again until it ran.
One JSON object per line on stdout, as tests/mcp/py_client.py prints them.
"""

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def dump(result: Any) -> dict[str, Any]:
    """FastMCP's parsed CallToolResult, in the wire's field names."""
    return {
        "content": [block.model_dump(mode="json", exclude_none=True) for block in result.content],
        "structuredContent": result.structured_content,
        "isError": result.is_error,
    }


async def run(url: str, key: str, plan: dict[str, Any]) -> None:
    transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {key}"})
    async with Client(transport, timeout=60) as client:
        say(event="connected", protocol_version=client.protocol_version, sdk=f"fastmcp {version('fastmcp')}")
        tools = await client.list_tools()
        say(event="tools", tools=[t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools])
        for label in ("allowed", "refused", "waiting"):
            name, arguments = plan[label]
            result = dump(await client.call_tool(name, arguments, raise_on_error=False))
            say(event="call", label=label, result=result)
        status = {"action_id": result["structuredContent"]["action_id"]}
        say(event="call", label="status", result=dump(await client.call_tool("countersign_status", status)))
        sys.stdin.readline()
        while True:
            ran = dump(await client.call_tool("countersign_status", status, raise_on_error=False))
            if not ran["content"][0]["text"].startswith("Not run yet"):
                say(event="call", label="ran", result=ran)
                return
            await asyncio.sleep(0.2)


if __name__ == "__main__":
    url, key, plan = sys.argv[1:]
    asyncio.run(run(url, key, json.loads(plan)))
