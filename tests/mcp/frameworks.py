"""Agent frameworks over countersign's MCP tools, driven by tests/mcp.rs; no model is needed.

Usage: frameworks.py URL KEY FRAMEWORK PLAN
  agents:    the OpenAI Agents SDK lists the tools and converts them to strict function schemas
             (what its Runner hands a model), then invokes each call of PLAN as a model's tool
             call arrives: every property of a strict schema is sent, null where left out.
  langchain: LangChain's MCP adapters load the tools as LangChain tools and invoke them.
PLAN is {"allowed": [name, args], "refused": …, "waiting": …}; countersign_status follows the
waiting call, and again, after a line on stdin, until it ran. One JSON object per line on stdout, as tests/mcp/py_client.py prints them.
"""

import asyncio
import json
import re
import sys
from importlib.metadata import version
from typing import Any, Awaitable, Callable


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def action_id(text: str) -> str:
    found = re.search(r"act_[0-9A-Z]{26}", text)
    assert found, text
    return found.group(0)


def as_text(output: Any) -> str:
    """A tool's output as the model reads it: its text blocks."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        return output.get("text", json.dumps(output))
    return "".join(as_text(item) for item in output)


Invoke = Callable[[str, str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def drive(plan: dict[str, Any], invoke: Invoke) -> None:
    """PLAN's calls as a model's tool calls arrive, then countersign_status on the waiting one;
    after a line on stdin (the test approved it over the API), countersign_status until it ran."""
    for label in ("allowed", "refused", "waiting"):
        name, arguments = plan[label]
        result = await invoke(label, name, dict(arguments))
        say(event="call", label=label, result=result)
    status = {"action_id": action_id(result["content"][0]["text"])}
    say(event="call", label="status", result=await invoke("status", "countersign_status", dict(status)))
    sys.stdin.readline()
    while (ran := await invoke("ran", "countersign_status", dict(status)))["content"][0]["text"].startswith("Not run yet"):
        await asyncio.sleep(0.2)
    say(event="call", label="ran", result=ran)


async def agents(url: str, key: str, plan: dict[str, Any]) -> None:
    from agents import Agent
    from agents.mcp import MCPServerStreamableHttp, MCPUtil
    from agents.run_context import RunContextWrapper
    from agents.tool_context import ToolContext

    params = {"url": url, "headers": {"Authorization": f"Bearer {key}"}}
    async with MCPServerStreamableHttp(name="countersign", params=params) as server:
        negotiated = server.server_initialize_result.protocolVersion
        say(event="connected", protocol_version=negotiated, sdk=f"openai-agents {version('openai-agents')}")
        agent = Agent(name="ops", mcp_servers=[server])
        tools = await MCPUtil.get_function_tools(server, True, RunContextWrapper(context=None), agent)
        say(
            event="tools",
            tools=[{"name": t.name, "strict": t.strict_json_schema, "inputSchema": t.params_json_schema} for t in tools],
        )
        by_name = {t.name: t for t in tools}

        async def invoke(label: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            tool = by_name[name]
            if tool.strict_json_schema:
                # A strict schema requires every property: a model sends null for one it leaves out.
                for prop in tool.params_json_schema.get("properties", {}):
                    arguments.setdefault(prop, None)
            raw = json.dumps(arguments)
            context = ToolContext(context=None, tool_name=name, tool_call_id=f"call_{label}", tool_arguments=raw)
            text = as_text(await tool.on_invoke_tool(context, raw))
            return {"content": [{"type": "text", "text": text}]}

        await drive(plan, invoke)


async def langchain(url: str, key: str, plan: dict[str, Any]) -> None:
    from langchain_mcp_adapters.tools import load_mcp_tools
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {key}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            sdk = f"langchain-mcp-adapters {version('langchain-mcp-adapters')}"
            say(event="connected", protocol_version=init.protocolVersion, sdk=sdk)
            tools = await load_mcp_tools(session)
            say(event="tools", tools=[{"name": t.name, "inputSchema": t.args_schema} for t in tools])
            by_name = {t.name: t for t in tools}

            async def invoke(label: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
                # As an agent invokes it: a tool call in, a ToolMessage out (an isError result
                # is a message of status "error").
                call = {"type": "tool_call", "id": f"call_{label}", "name": name, "args": arguments}
                message = await by_name[name].ainvoke(call)
                text, is_error = as_text(message.content), message.status == "error"
                return {"content": [{"type": "text", "text": text}], "isError": is_error}

            await drive(plan, invoke)


if __name__ == "__main__":
    url, key, framework, plan = sys.argv[1:]
    run = {"agents": agents, "langchain": langchain}[framework]
    asyncio.run(run(url, key, json.loads(plan)))
