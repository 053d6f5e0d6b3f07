# Sourced by scripts/test.sh: the official MCP SDKs the tests use as clients, pinned, installed
# once into ~/.cache/countersign/mcp from the package registries (PyPI, npm).
# Exports COUNTERSIGN_MCP_PYTHON (a Python with `mcp` and FastMCP), COUNTERSIGN_MCP_PYTHON_2025_06_18
# and _2025_03_26 (the SDK's 1.x line), COUNTERSIGN_MCP_PYTHON_FRAMEWORKS (agent frameworks) and
# COUNTERSIGN_MCP_NODE_DIR (a folder with @modelcontextprotocol/sdk in node_modules) for tests/mcp.rs.
mcp_dir=${COUNTERSIGN_MCP_DIR:-$HOME/.cache/countersign/mcp}
# FastMCP (the standalone framework, on the SDK above) serves tests/mcp/fastmcp_server.py, a
# downstream server whose tools log and report progress before their result.
mcp_python_sdk=2.3.0
mcp_fastmcp=4.1.6
if ! "$mcp_dir/venv/bin/python" -c "import sys; from importlib.metadata import version as v; sys.exit(0 if (v('mcp'), v('fastmcp')) == ('$mcp_python_sdk', '$mcp_fastmcp') else 1)" 2>/dev/null; then
  echo "installing the MCP Python SDK $mcp_python_sdk and FastMCP $mcp_fastmcp into $mcp_dir/venv"
  mkdir -p "$mcp_dir"
  python3 -m venv "$mcp_dir/venv"
  "$mcp_dir/venv/bin/pip" install -q "mcp==$mcp_python_sdk" "fastmcp==$mcp_fastmcp"
fi
export COUNTERSIGN_MCP_PYTHON="$mcp_dir/venv/bin/python"

# mcp_venv NAME PIN...: a venv of its own under $mcp_dir holding these pins, re-made when they
# change (one `mcp` per environment, so each SDK line gets its own).
mcp_venv() {
  local dir="$mcp_dir/$1"; shift
  if [ "$(cat "$dir/pins" 2>/dev/null)" != "$*" ] || [ ! -x "$dir/bin/python" ]; then
    echo "installing $* into $dir"
    rm -rf "$dir" && python3 -m venv "$dir"
    "$dir/bin/pip" install -q "$@" && echo "$*" > "$dir/pins"
  fi
}
# The Python SDK's 1.x line, still in many deployed agents (tests/mcp/py1_client.py): 1.22.0 is
# the last 1.x that speaks 2025-06-18 (1.23 moved to 2025-11-25); 1.9.4 the last that speaks
# 2025-03-26, and it sends no MCP-Protocol-Version header (with the pydantic of its day: it
# imports a pydantic internal that later releases dropped).
mcp_venv py-2025-06-18 "mcp==1.22.0"
mcp_venv py-2025-03-26 "mcp==1.9.4" "pydantic==2.11.7"
# Agent frameworks over MCP (tests/mcp/frameworks.py): the OpenAI Agents SDK (its conversion of
# MCP tools to strict function schemas) and LangChain's MCP adapters, on the SDK's last 1.x.
mcp_venv py-frameworks "mcp==1.30.0" "openai-agents==0.24.0" "langchain-mcp-adapters==0.3.2"
export COUNTERSIGN_MCP_PYTHON_2025_06_18="$mcp_dir/py-2025-06-18/bin/python"
export COUNTERSIGN_MCP_PYTHON_2025_03_26="$mcp_dir/py-2025-03-26/bin/python"
export COUNTERSIGN_MCP_PYTHON_FRAMEWORKS="$mcp_dir/py-frameworks/bin/python"

# The TypeScript SDK (2025-11-25 with its experimental tasks), for tests/mcp.rs's node client.
mcp_ts_sdk=1.32.2
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
if [ "$(node -p "require('$mcp_dir/node/node_modules/@modelcontextprotocol/sdk/package.json').version" 2>/dev/null)" != "$mcp_ts_sdk" ]; then
  echo "installing the MCP TypeScript SDK $mcp_ts_sdk into $mcp_dir/node"
  mkdir -p "$mcp_dir/node"
  (cd "$mcp_dir/node" && echo '{"private": true, "type": "module"}' > package.json &&
    npm install --silent --no-audit --no-fund "@modelcontextprotocol/sdk@$mcp_ts_sdk")
fi
export COUNTERSIGN_MCP_NODE_DIR="$mcp_dir/node"
