#!/usr/bin/env bash
# Generated API attacks (issue 8): schemathesis (pinned) against the local server, started on a
# free port with scripts/schemathesis/server.toml, once per role: agent, a second agent (the
# ids it is offered are the first agent's, which answer it as missing ones), approver, admin —
# with their keys, then with access tokens (issue 31): tenant acme trusts a real OpenID provider
# (tests/identity/provider.mjs, installed by scripts/oidc-provider.sh), and an agent (client
# credentials), an approver and an admin (people signed in with authorization code + PKCE)
# call with the JWTs it issues. Fails on any 5xx and on any answer the OpenAPI document does not
# describe. Prints the case counts.
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

# The OpenID provider (tokens live an hour here: a run outlasts the tests' five minutes), and
# the server's configuration with tenant acme trusting it.
source scripts/oidc-provider.sh
work=$(mktemp -d)
cp tests/identity/provider.mjs "$COUNTERSIGN_OIDC_NODE_DIR/provider-schemathesis-$$.mjs"
COUNTERSIGN_OIDC_TOKEN_TTL=3600 node "$COUNTERSIGN_OIDC_NODE_DIR/provider-schemathesis-$$.mjs" \
  >"$work/provider.log" 2>"$work/provider.err" &
idp=$!
on_exit="kill $idp 2>/dev/null; rm -f $COUNTERSIGN_OIDC_NODE_DIR/provider-schemathesis-$$.mjs"
trap "$on_exit" EXIT
for _ in $(seq 150); do grep -q '^{' "$work/provider.log" && break; sleep 0.2; done
issuer=$(grep -m1 '^{' "$work/provider.log" | python3 -c 'import json, sys; print(json.load(sys.stdin)["acme"])') ||
  { cat "$work/provider.err"; exit 1; }
resource=https://countersign.schemathesis
config="$work/server.toml"
cat scripts/schemathesis/server.toml - >"$config" <<TOML

[tenants.acme.identity]
issuer = "$issuer"
audience = "$resource"
TOML
source scripts/schemathesis/start-server.sh
token() { python3 scripts/schemathesis/token.py "$@"; }
declare -A bearer=(
  [agent]=sch-agent [agent-2]=sch-agent-2 [approver]=sch-approver [admin]=sch-admin
  [agent-token]=$(token client "$issuer" acme-bot bot-secret countersign:agent "$resource")
  [approver-token]=$(token person "$issuer" acme-app ada countersign:approve "$resource")
  [admin-token]=$(token person "$issuer" acme-app bob countersign:admin "$resource")
)
roles=(agent agent-2 approver admin agent-token approver-token admin-token)
for role in agent-token approver-token admin-token; do
  who=$(curl -sf "$api/v1/me" -H "Authorization: Bearer ${bearer[$role]}") ||
    { echo "the $role is not accepted by the server"; exit 1; }
  echo "$role: $who"
done
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
# The token agent's own (it is agent acme-bot: agent-1's ids are missing ones to it).
ids+=("\"$(submit "${bearer[agent-token]}" mail.send)\"")
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
for role in "${roles[@]}"; do
  echo "== schemathesis as $role ($examples examples per operation)"
  report="$work/$role.json"
  if ! "$venv/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$api/openapi.json" \
      -H "Authorization: Bearer ${bearer[$role]}" \
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
cases=$(python3 - "$work" "${roles[@]}" <<'PY'
import json, sys
total = failed = 0
for role in sys.argv[2:]:
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
