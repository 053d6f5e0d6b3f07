#!/usr/bin/env bash
# Generated API attacks (issue 8): schemathesis (pinned) against the local server, started on a
# free port with scripts/schemathesis/server.toml, once per role: agent, a second agent (the
# ids it is offered are the first agent's, which answer it as missing ones), approver, admin.
# Fails on any 5xx and on any answer the OpenAPI document does not describe. Prints the case
# counts.
#   bash scripts/schemathesis.sh [MAX_EXAMPLES_PER_OPERATION]   (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
examples=${1:-20}
version=4.32.5
venv=${SCHEMATHESIS_VENV:-$HOME/.cache/countersign/schemathesis-$version}
if ! "$venv/bin/schemathesis" --version 2>/dev/null | grep -q "$version"; then
  python3 -m venv "$venv" 2>/dev/null || { apt-get update -qq && apt-get install -y -qq python3-venv && python3 -m venv "$venv"; }
  "$venv/bin/pip" install -q "schemathesis==$version"
fi

source scripts/schemathesis/start-server.sh
# Real actions (pending, sealed, another tenant's), so generated calls meet existing records
# too: their ids and the stop scopes are offered half of the time.
submit() {
  curl -s -X POST "$api/v1/actions" -H "Authorization: Bearer $1" \
    -H 'content-type: application/json' -d "{\"tool\":\"$2\",\"args\":{\"n\":1}}" |
    python3 -c 'import json, sys; d = json.load(sys.stdin); print(d.get("id") or d["error"]["action_id"])'
}
ids=()
for tool in mail.send mail.send search.web sandbox.echo nothing.here; do
  ids+=("\"$(submit sch-agent $tool)\"")
done
ids+=("\"$(submit sch-globex mail.send)\"")
# The second agent meets the first one's ids as missing ones (issue 28, item 6).
for id in "${ids[@]:0:5}"; do
  status=$(curl -s -o /dev/null -w '%{http_code}' "$api/v1/actions/${id//\"/}" -H 'Authorization: Bearer sch-agent-2')
  [ "$status" = 404 ] || { echo "sch-agent-2 read agent-1's ${id}: $status, not 404"; exit 1; }
done
cat >"$work/schemathesis.toml" <<TOML
[dictionaries.ids]
values = [$(IFS=,; echo "${ids[*]}")]

[dictionaries.scopes]
values = ["*", "agent-1", "agent-2"]

[parameters]
"path.id" = { dictionary = "ids", probability = 0.5 }
"path.scope" = { dictionary = "scopes", probability = 0.5 }
TOML

# One worker: CPython 3.11's ast.parse is not thread-safe, and hypothesis calls it while
# describing strategies (an intermittent "AST constructor recursion depth mismatch" with 2).
checks=not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance,negative_data_rejection
failed=0
for role in agent agent-2 approver admin; do
  echo "== schemathesis as $role ($examples examples per operation)"
  report="$work/$role.json"
  if ! "$venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$api/openapi.json" \
      -H "Authorization: Bearer sch-$role" \
      --checks "$checks" --max-examples "$examples" --seed 8 --workers 1 \
      --request-timeout 10 --no-color --suppress-health-check all \
      --report json --report-json-path "$report" >"$work/$role.log" 2>&1; then
    failed=1
    tail -60 "$work/$role.log"
  else
    tail -12 "$work/$role.log"
  fi
done
errors=$(grep -c "request failed" "$work/server.log" || true)
cases=$(python3 - "$work" <<'PY'
import json, sys
total = failed = 0
for role in ("agent", "agent-2", "approver", "admin"):
    try:
        report = json.load(open(f"{sys.argv[1]}/{role}.json"))
    except OSError:
        continue
    counts = report.get("test_cases", {})
    total += counts.get("generated", 0)
    failed += counts.get("with_failures", 0) + counts.get("errored", 0)
print(total, failed)
PY
)
read -r total failures <<<"$cases"
echo "server answers 5xx logged: $errors (server log: $work/server.log)"
[ "$errors" = 0 ] || failed=1
echo "schemathesis: $((total - failures)) passed, $failures failed"
exit $failed
