// An MCP client built on the official TypeScript SDK (@modelcontextprotocol/sdk 1.x, 2025-11-25
// with its experimental tasks), driven by tests/mcp.rs.
//
// Usage: node ts_client.mjs URL KEY SCENARIO [TOOL ARGS_JSON]
//   compat: TOOL is a plan ({"allowed": [name, args], "refused": …, "waiting": …}): each call by
//           its listed name, then countersign_status on the waiting one; after a line on stdin
//           (the test approved it), countersign_status until it ran.
//   stream: callToolStream (a task, polled by the SDK) — prints each message; after the first
//           one it waits for a line on stdin.
//   cancel: callToolStream until the task is created, then tasks/cancel and tasks/get.
// One JSON object per line on stdout; any exception exits non-zero.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [url, key, scenario, tool, args] = process.argv.slice(2);
// The script runs from the SDK's folder (tests/mcp.rs copies it there).
const sdk = JSON.parse(readFileSync(new URL("./node_modules/@modelcontextprotocol/sdk/package.json", import.meta.url)));
const say = (fields) => process.stdout.write(JSON.stringify(fields) + "\n");
const stdin = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const client = new Client({ name: "countersign-test", version: "1.0.0" }, { capabilities: { tasks: {} } });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
await client.connect(transport);
say({ event: "connected", protocol_version: transport.protocolVersion ?? null, sdk: `${sdk.name} ${sdk.version}` });
// The SDK learns which tools take tasks (execution.taskSupport) from the listing.
const listed = await client.listTools();
say({ event: "tools", names: listed.tools.map((t) => t.name), tools: listed.tools });

if (scenario === "compat") {
  // TOOL is the plan: an allowed, a refused and a waiting call, then countersign_status.
  const plan = JSON.parse(tool);
  let last;
  for (const label of ["allowed", "refused", "waiting"]) {
    const [name, callArgs] = plan[label];
    last = await client.callTool({ name, arguments: callArgs });
    say({ event: "call", label, result: last });
  }
  const follow = { name: "countersign_status", arguments: { action_id: last.structuredContent.action_id } };
  say({ event: "call", label: "status", result: await client.callTool(follow) });
  // The test approves it over the API, then countersign_status until it ran.
  await stdin.next();
  let ran;
  while ((ran = await client.callTool(follow)).content[0].text.startsWith("Not run yet")) {
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  say({ event: "call", label: "ran", result: ran });
  await client.close();
  process.exit(0);
}

const stream = client.experimental.tasks.callToolStream({ name: tool, arguments: JSON.parse(args) });
for await (const message of stream) {
  if (message.type === "taskCreated") {
    say({ event: "created", task: message.task });
    await stdin.next();
    if (scenario === "cancel") {
      say({ event: "cancelled", task: await client.experimental.tasks.cancelTask(message.task.taskId) });
      say({ event: "final", task: await client.experimental.tasks.getTask(message.task.taskId) });
      break;
    }
  } else if (message.type === "taskStatus") {
    say({ event: "status", task: message.task });
  } else if (message.type === "result") {
    say({ event: "result", result: message.result });
  } else {
    say({ event: "error", message: String(message.error?.message ?? message.error) });
  }
}
await client.close();
process.exit(0);
