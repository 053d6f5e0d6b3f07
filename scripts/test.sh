#!/usr/bin/env bash
# The test command: starts LocalStack (host or Docker; reused if one already answers) and
# installs cargo-lambda if needed, runs every test of the workspace, then the README walkthrough.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${LOCALSTACK_PORT:-4566}
export AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL:-http://127.0.0.1:$port}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
export AWS_REGION=${AWS_REGION:-us-east-1}

started=0
if ! curl -sf "http://127.0.0.1:$port/_localstack/health" >/dev/null 2>&1; then
  bash localstack/start.sh
  started=1
fi
# Stop LocalStack only if this run started it.
trap '[ "$started" = 1 ] && bash localstack/stop.sh' EXIT
bash localstack/install-cargo-lambda.sh

cargo test --workspace
bash scripts/walkthrough.sh
