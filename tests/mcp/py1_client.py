"""An MCP client on the official Python SDK's 1.x line (`mcp` 1.22.0 speaks 2025-06-18, 1.9.4
speaks 2025-03-26 and sends no MCP-Protocol-Version header), driven by tests/mcp.rs.

Usage: py1_client.py URL KEY SCENARIO [ARG...]
  compat PLAN: connect, list, then each call of PLAN ({"allowed": [name, args], "refused": …,
               "waiting": …}) and countersign_status on the waiting call's action; after a
               line on stdin (the test approved it), countersign_status until it ran.
  call NAME ARGS: connect, then one tools/call.
One JSON object per line on stdout; any exception exits non-zero with its text on stderr.
"""

import asyncio
import json
import re
import sys
from importlib.metadata import version
from typing import Any

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def dump(result: Any) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def action_id(result: dict[str, Any]) -> str:
    """The action a waiting call answered, read from its text (2025-03-26 has no structuredContent)."""
    found = re.search(r"act_[0-9A-Z]{26}", result["content"][0]["text"])
    assert found, result
    return found.group(0)


async def run(url: str, key: str, scenario: str, args: list[str]) -> None:
    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {key}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            say(event="connected", protocol_version=init.protocolVersion, sdk=f"mcp {version('mcp')}")
            if scenario == "compat":
                plan = json.loads(args[0])
                listed = await session.list_tools()
                say(event="tools", tools=[dump(t) for t in listed.tools])
                for label in ("allowed", "refused", "waiting"):
                    name, arguments = plan[label]
                    result = dump(await session.call_tool(name, arguments))
                    say(event="call", label=label, result=result)
                status = {"action_id": action_id(result)}
                say(event="call", label="status", result=dump(await session.call_tool("countersign_status", status)))
                # The test approves it over the API, then countersign_status until it ran.
                sys.stdin.readline()
                while (ran := dump(await session.call_tool("countersign_status", status)))["content"][0]["text"].startswith("Not run yet"):
                    await asyncio.sleep(0.2)
                say(event="call", label="ran", result=ran)
            elif scenario == "call":
                say(event="result", result=dump(await session.call_tool(args[0], json.loads(args[1]))))
            else:
                raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    url, key, scenario, *rest = sys.argv[1:]
    asyncio.run(run(url, key, scenario, rest))
