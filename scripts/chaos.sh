#!/usr/bin/env bash
# The bounded chaos run against the local server: `bash scripts/chaos.sh [SECONDS]` (default 20).
# Agents submit, approvers approve or deny, cancels and a stop race the workers, tools misbehave
# (slow, 5xx, refused, a 10 MB body, invalid JSON), store writes fail now and then, and the
# server is killed (SIGKILL) and stopped (SIGTERM) and restarted mid-run. Then the store's
# invariants are checked twice (by the run itself and by `countersign-local verify`), and every
# tool attempt is held to the rules, and every outcome to what happened (no `outcome_unknown`
# that no attempt reached and no SIGKILL explains; no 409 to a cancel that sealed its action).
# Exits non-zero on any violation. Run it longer with e.g.
# `bash scripts/chaos.sh 600`.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
dir=${CHAOS_DIR:-target/chaos}
target=${CARGO_TARGET_DIR:-target}
cargo build -q -p countersign-tests --bin chaos
cargo build -q -p countersign-local
"$target/debug/chaos" run --seconds "$seconds" --dir "$dir"
# The same store through the operator's command (the config names the tools' secret variable).
# Leases as of the instant the run judged them (before its final stop; see tests/chaos/main.rs).
CHAOS_TOOL_SECRET=chaos-secret "$target/debug/countersign-local" --config "$dir/chaos.toml" \
  --db "$dir/chaos.db" verify --at "$(cat "$dir/checked_at")"
