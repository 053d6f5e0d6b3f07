#!/usr/bin/env bash
# The test command: every test of the workspace, then the README walkthrough.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
bash scripts/walkthrough.sh
