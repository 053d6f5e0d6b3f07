#!/usr/bin/env bash
# The test command: starts LocalStack (host or Docker; reused if one already answers) and
# PostgreSQL (scripts/postgres.sh; installed from the distribution's packages if missing),
# installs cargo-lambda, the MCP SDKs (tests/mcp.rs), an OpenID provider (tests/identity.rs), Slack's SDK (tests/slack.rs), an SMTP server and Chromium (tests/email.rs) if needed, runs every test of the workspace, then the README walkthrough.
set -euo pipefail
cd "$(dirname "$0")/.."
source localstack/ensure.sh
source scripts/postgres.sh ensure
# The three-instance tests at CI size (the full 1,000 pairs / 1,000 due: run tests/instances.rs alone).
export COUNTERSIGN_TEST_PAIRS=${COUNTERSIGN_TEST_PAIRS:-300} COUNTERSIGN_TEST_DUE=${COUNTERSIGN_TEST_DUE:-300}
bash localstack/install-cargo-lambda.sh
source scripts/mcp-sdks.sh
source scripts/oidc-provider.sh
source scripts/slack-sdk.sh
source scripts/email-deps.sh

cargo test --workspace --no-fail-fast
bash scripts/walkthrough.sh
