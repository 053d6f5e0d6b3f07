# Sourced by scripts/test.sh: the official MCP SDKs the tests use as clients, pinned, installed
# once into ~/.cache/countersign/mcp from the package registries (PyPI, npm).
# Exports COUNTERSIGN_MCP_PYTHON (a Python with `mcp` and FastMCP), COUNTERSIGN_MCP_PYTHON_2025_06_18
# and _2025_03_26 (the SDK's 1.x line), COUNTERSIGN_MCP_PYTHON_FRAMEWORKS (agent frameworks) and
# COUNTERSIGN_MCP_NODE_DIR (a folder with @modelcontextprotocol/sdk in node_modules) and
# COUNTERSIGN_MCP_CLAUDE (Claude Code's CLI) for tests/mcp.rs.
mcp_dir=${COUNTERSIGN_MCP_DIR:-$HOME/.cache/countersign/mcp}
# FastMCP (the standalone framework, on the SDK above) serves tests/mcp/fastmcp_server.py, a
# downstream server whose tools log and report progress before their result, and its client
# drives countersign in tests/mcp/fastmcp_client.py.
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

# npm_pin NAME PACKAGE VERSION: PACKAGE@VERSION in a folder of its own under $mcp_dir (an ES
# module package, so scripts copied there import it), re-installed when the pin changes.
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
npm_pin() {
  local dir="$mcp_dir/$1"
  if [ "$(node -p "require('$dir/node_modules/$2/package.json').version" 2>/dev/null)" != "$3" ]; then
    echo "installing $2 $3 into $dir"
    mkdir -p "$dir"
    (cd "$dir" && echo '{"private": true, "type": "module"}' > package.json &&
      npm install --silent --no-audit --no-fund "$2@$3")
  fi
}
# The TypeScript SDK (2025-11-25 with its experimental tasks), for tests/mcp.rs's node client.
npm_pin node @modelcontextprotocol/sdk 1.32.2
export COUNTERSIGN_MCP_NODE_DIR="$mcp_dir/node"
# Claude Code's CLI (`claude mcp add` + `claude mcp list`, tests/mcp/claude_code.rs): the npm
# package brings its binary for this platform as an optional dependency; no model is used.
npm_pin claude @anthropic-ai/claude-code 2.1.332
export COUNTERSIGN_MCP_CLAUDE="$mcp_dir/claude/node_modules/.bin/claude"
