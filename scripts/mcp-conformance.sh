#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) against the
# local server's /mcp: installs it once with the Node it needs (>= 22, from the npm registry's
# `node` package) into ~/.cache/countersign/mcp, starts the server with
# scripts/mcp-conformance/server.toml and the harness (an agent key added to each request; the
# failing fixture tool), runs every applicable server scenario and fails on any failed check.
# The suite's scenarios that do not apply, and why, are listed below and in docs/mcp.md.
#   bash scripts/mcp-conformance.sh
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== the official MCP conformance suite (pinned) against the local server's /mcp"
suite=0.1.16
node_version=22.23.3
dir=${COUNTERSIGN_MCP_DIR:-$HOME/.cache/countersign/mcp}/conformance-$suite
command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm; }
if [ "$("$dir/node_modules/.bin/node" --version 2>/dev/null)" != "v$node_version" ] ||
  [ "$(PATH="$dir/node_modules/.bin:$PATH" conformance --version 2>/dev/null)" != "$suite" ]; then
  echo "installing @modelcontextprotocol/conformance $suite and node $node_version into $dir"
  mkdir -p "$dir"
  echo '{"private": true}' >"$dir/package.json"
  # Both pinned, exact (node@$node_version, the suite @$suite), on one line.
  npm install --prefix "$dir" --silent --no-audit --no-fund --save-exact "node@$node_version" "@modelcontextprotocol/conformance@$suite"
fi
export PATH="$dir/node_modules/.bin:$PATH"

# Scenarios countersign answers (each must pass), and those that do not apply (docs/mcp.md,
# "Conformance"): capabilities countersign does not declare (logging, completions, resources,
# prompts); content it never produces (a tool's answer is JSON: structuredContent and text,
# never image, audio or embedded resources); server-to-client requests and notifications during
# a call (sampling, elicitation, progress, log messages), which need a stream, while /mcp
# answers JSON and keeps no session; and the SSE stream scenarios (no GET stream, no session).
applicable=(server-initialize ping tools-list tools-call-simple-text tools-call-error
  json-schema-2020-12 dns-rebinding-protection)
not_applicable=(logging-set-level completion-complete tools-call-image tools-call-audio
  tools-call-embedded-resource tools-call-mixed-content tools-call-with-logging
  tools-call-with-progress tools-call-sampling tools-call-elicitation elicitation-sep1034-defaults
  elicitation-sep1330-enums server-sse-polling server-sse-multiple-streams resources-list
  resources-read-text resources-read-binary resources-templates-read resources-subscribe
  resources-unsubscribe prompts-list prompts-get-simple prompts-get-with-args
  prompts-get-embedded-resource prompts-get-with-image)
# Every scenario the suite offers is in one list or the other (a new one must be judged).
offered=$(conformance list --server | sed -n 's/^  - \([a-z0-9-]*\).*/\1/p' | sort)
known=$(printf '%s\n' "${applicable[@]}" "${not_applicable[@]}" | sort)
if [ "$offered" != "$known" ]; then
  echo "the suite's server scenarios differ from the lists in $0:"
  diff <(echo "$known") <(echo "$offered") || true
  exit 1
fi

cargo build -q -p countersign-server
bin=${CARGO_TARGET_DIR:-target}/debug/countersign-server
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
harness_port=$(free_port)
work=$(mktemp -d)
sed "s/{harness_port}/$harness_port/" scripts/mcp-conformance/server.toml >"$work/server.toml"
export COUNTERSIGN_CONFORMANCE_SECRET=conformance-webhook-secret
"$bin" --listen "127.0.0.1:$port" --db "$work/countersign.db" --config "$work/server.toml" \
  2>"$work/server.log" &
server=$!
python3 scripts/mcp-conformance/harness.py "$harness_port" "127.0.0.1:$port" conformance-agent \
  2>"$work/harness.log" &
harness=$!
trap 'kill $server $harness 2>/dev/null; wait $server $harness 2>/dev/null || true' EXIT
for _ in $(seq 150); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$work/server.log"; exit 1; }

passed=0 failed=0
for scenario in "${applicable[@]}"; do
  conformance server --url "http://127.0.0.1:$harness_port/mcp" --scenario "$scenario" \
    -o "$work/out" >"$work/$scenario.log" 2>&1 || true
  verdict=$(python3 - "$work/out" "$scenario" <<'PY'
import glob, json, sys
files = glob.glob(f"{sys.argv[1]}/server-{sys.argv[2]}-*/checks.json")
checks = [c for f in files for c in json.load(open(f))]
bad = [c for c in checks if c.get("status") not in ("SUCCESS", "INFO")]
for c in bad:
    print(f"  {c.get('id')}: {c.get('status')} {c.get('errorMessage') or ''}", file=sys.stderr)
print("fail" if bad or not checks else f"pass {len(checks)}")
PY
  )
  if [ "${verdict%% *}" = pass ]; then
    passed=$((passed + 1))
    echo "ok   $scenario (${verdict#pass } checks)"
  else
    failed=$((failed + 1))
    echo "FAIL $scenario"
    cat "$work/$scenario.log"
  fi
done
echo "not applicable: ${not_applicable[*]}"
echo "mcp conformance: $passed passed, $failed failed"
[ "$failed" = 0 ]
