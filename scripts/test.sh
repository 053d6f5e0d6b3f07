#!/usr/bin/env bash
# The test command: starts LocalStack (host or Docker; reused if one already answers) and
# installs cargo-lambda and the MCP SDKs (tests/mcp.rs) if needed, runs every test of the workspace, then the README walkthrough.
set -euo pipefail
cd "$(dirname "$0")/.."
source localstack/ensure.sh
bash localstack/install-cargo-lambda.sh
source scripts/mcp-sdks.sh

cargo test --workspace
bash scripts/walkthrough.sh
