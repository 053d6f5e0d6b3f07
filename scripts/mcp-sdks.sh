# Sourced by scripts/test.sh: the official MCP SDKs the tests use as clients, pinned, installed
# once into ~/.cache/countersign/mcp from the package registries (PyPI, npm).
# Exports COUNTERSIGN_MCP_PYTHON (a Python with `mcp`) for tests/mcp.rs.
mcp_dir=${COUNTERSIGN_MCP_DIR:-$HOME/.cache/countersign/mcp}
mcp_python_sdk=2.3.0
if ! "$mcp_dir/venv/bin/python" -c "import mcp, sys; sys.exit(0 if __import__('importlib.metadata').metadata.version('mcp') == '$mcp_python_sdk' else 1)" 2>/dev/null; then
  echo "installing the MCP Python SDK $mcp_python_sdk into $mcp_dir/venv"
  mkdir -p "$mcp_dir"
  python3 -m venv "$mcp_dir/venv"
  "$mcp_dir/venv/bin/pip" install -q "mcp==$mcp_python_sdk"
fi
export COUNTERSIGN_MCP_PYTHON="$mcp_dir/venv/bin/python"
