#!/usr/bin/env bash
# The bounded chaos run against the local server: `bash scripts/chaos.sh [SECONDS]` (default 20).
# Agents submit (API and MCP), approvers approve or deny, some clients hang up mid-request,
# cancels and a stop race the workers, tools misbehave (slow, 5xx, refused, a 10 MB body,
# invalid JSON; MCP tools that leave a stream open, frame with CRLF, report progress then an
# error), every approval request goes to a Slack stand-in and an SMTP server that are slow,
# refuse, and are down for a quarter of the run (no notice may be lost, each mail keeps its
# notice's Message-ID), store writes fail now and then, and the
# server is killed (SIGKILL) and stopped (SIGTERM) and restarted mid-run. Then the store's
# invariants are checked twice (by the run itself and by `countersign-server verify`), and every
# tool attempt is held to the rules, and every outcome to what happened (no `outcome_unknown`
# that no attempt reached and no SIGKILL explains; no 409 to a cancel that sealed its action).
# Exits non-zero on any violation. Run it longer with e.g.
# `bash scripts/chaos.sh 600`.
#
# `bash scripts/chaos.sh --store postgres --instances 3 [SECONDS]`: the same run on Postgres
# (scripts/postgres.sh's server, a fresh schema), with that many servers sharing it behind the
# drivers; the restarts kill and stop one server after another while the others serve on.
set -euo pipefail
cd "$(dirname "$0")/.."
store=sqlite
instances=1
seconds=20
while [ $# -gt 0 ]; do
  case "$1" in
    --store) store=$2; shift 2 ;;
    --instances) instances=$2; shift 2 ;;
    *) seconds=$1; shift ;;
  esac
done
dir=${CHAOS_DIR:-target/chaos}
target=${CARGO_TARGET_DIR:-target}
cargo build -q -p countersign-tests --bin chaos
cargo build -q -p countersign-server
if [ "$store" = postgres ]; then
  # shellcheck source=postgres.sh
  source scripts/postgres.sh ensure
  "$target/debug/chaos" run --seconds "$seconds" --dir "$dir" --store postgres --instances "$instances"
  on=(--database-url "$(cat "$dir/database_url")")
else
  "$target/debug/chaos" run --seconds "$seconds" --dir "$dir"
  on=(--db "$dir/chaos.db")
fi
# The same store through the operator's command (the config names the tools' secret variable).
# Leases as of the instant the run judged them (before its final stop; see tests/chaos/main.rs).
CHAOS_TOOL_SECRET=chaos-secret "$target/debug/countersign-server" --config "$dir/chaos.toml" \
  "${on[@]}" verify --at "$(cat "$dir/checked_at")"
