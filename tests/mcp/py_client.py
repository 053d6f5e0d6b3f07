"""An MCP client built on the official Python SDK (`mcp` 2.x), driven by tests/mcp.rs.

Usage: py_client.py URL KEY MODE SCENARIO [ARG...]
  MODE is "modern" (the SDK's default 2026-07-28, probing server/discover) or "legacy"
  (mode="legacy": the 2025-11-25 initialize handshake).
It prints one JSON object per line (what it saw) and, where a scenario waits for the test,
reads one line from stdin first. Any exception exits non-zero with its text on stderr.
"""

import asyncio
import json
import sys
from importlib.metadata import version
from typing import Any

import httpx2
import mcp.types as types
from mcp import Client
from mcp.client import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

TASKS = "io.modelcontextprotocol/tasks"
ANY = TypeAdapter(dict[str, Any])


class TaskRequest(types.Request[dict[str, Any], str]):
    """tasks/get, tasks/cancel: the SDK has no tasks helper, so a generic request (Mcp-Name = taskId)."""

    name_param = "taskId"


class RawCall(types.Request[dict[str, Any], str]):
    """tools/call answered by a task: the SDK's typed call_tool knows no `resultType: "task"`."""

    name_param = "name"


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def dump(result: Any) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def task_rpc(client: Client, method: str, task_id: str) -> dict[str, Any]:
    return await client.session.send_request(TaskRequest(method=method, params={"taskId": task_id}), ANY)


async def run(url: str, key: str, mode: str, scenario: str, args: list[str]) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    # The tasks extension is advertised through the SDK's generic extension support.
    extensions = [advertise(TASKS)] if scenario in ("task", "cancel") else None
    client = Client(
        streamable_http_client(url, http_client=http),
        mode="legacy" if mode == "legacy" else "auto",
        extensions=extensions,
        cache=None,
    )
    async with client:
        say(event="connected", protocol_version=client.session.protocol_version, sdk=f"mcp {version('mcp')}")
        if scenario == "list":
            listed = await client.list_tools()
            say(event="tools", tools=[dump(t) for t in listed.tools])
        elif scenario == "call":
            name, arguments = args[0], json.loads(args[1])
            say(event="result", result=dump(await client.call_tool(name, arguments)))
        elif scenario == "status":
            # The plain path: a waiting call, then countersign_status until it ends.
            name, arguments = args[0], json.loads(args[1])
            first = dump(await client.call_tool(name, arguments))
            action_id = first["structuredContent"]["action_id"]
            say(event="waiting", result=first, action_id=action_id)
            sys.stdin.readline()
            while True:
                status = dump(await client.call_tool("countersign_status", {"action_id": action_id}))
                if status["structuredContent"]["state"] not in ("pending_approval", "approved", "executing"):
                    say(event="final", result=status)
                    return
                await asyncio.sleep(0.2)
        elif scenario in ("task", "cancel"):
            name, arguments = args[0], json.loads(args[1])
            call = RawCall(method="tools/call", params={"name": name, "arguments": arguments})
            created = await client.session.send_request(call, ANY)
            say(event="created", result=created)
            task_id = created["taskId"]
            sys.stdin.readline()
            if scenario == "cancel":
                say(event="cancelled", result=await task_rpc(client, "tasks/cancel", task_id))
            while True:
                task = await task_rpc(client, "tasks/get", task_id)
                if task["status"] not in ("working", "input_required"):
                    say(event="final", result=task)
                    return
                # The server asks for 2 s; the test's windows are short, so poll faster.
                await asyncio.sleep(0.2)
        elif scenario == "compat":
            # An allowed, a refused and a waiting call by their listed names, then countersign_status
            # before and after the approval.
            plan = json.loads(args[0])
            listed = await client.list_tools()
            say(event="tools", tools=[dump(t) for t in listed.tools])
            for label in ("allowed", "refused", "waiting"):
                name, arguments = plan[label]
                result = dump(await client.call_tool(name, arguments))
                say(event="call", label=label, result=result)
            status = {"action_id": result["structuredContent"]["action_id"]}
            say(event="call", label="status", result=dump(await client.call_tool("countersign_status", status)))
            # The test approves it over the API, then countersign_status until it ran.
            sys.stdin.readline()
            while (ran := dump(await client.call_tool("countersign_status", status)))["content"][0]["text"].startswith("Not run yet"):
                await asyncio.sleep(0.2)
            say(event="call", label="ran", result=ran)
        elif scenario == "get":
            try:
                say(event="task", result=await task_rpc(client, "tasks/get", args[0]))
            except MCPError as e:
                say(event="error", code=e.error.code, message=e.error.message)
        else:
            raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    url, key, mode, scenario, *rest = sys.argv[1:]
    asyncio.run(run(url, key, mode, scenario, rest))
