#!/usr/bin/env bash
# Webhook and notification signatures verified by independent libraries (issue 16): PyPI
# `standardwebhooks` (pinned) for signing = "standard-webhooks", PyPI `stripe` (pinned,
# `WebhookSignature.verify_header`) for the default countersign signature. The local server
# calls one tool of each format and notifies one endpoint of each; the receiver
# (scripts/webhooks/receiver.py) answers 401 to anything that does not verify.
#   bash scripts/webhook-verifiers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${WEBHOOK_VERIFIERS_VENV:-$HOME/.cache/countersign/webhook-verifiers}
if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("standardwebhooks") == "1.1.0" and m.version("stripe") == "16.1.0"' 2>/dev/null; then
  python3 -m venv "$venv" 2>/dev/null || { apt-get update -qq && apt-get install -y -qq python3-venv && python3 -m venv "$venv"; }
  "$venv/bin/pip" install -q "standardwebhooks==1.1.0" "stripe==16.1.0"
fi
cargo build -q -p countersign-server
bin=${CARGO_TARGET_DIR:-target}/debug/countersign-server
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
hook_port=$(free_port); api_port=$(free_port)
export COUNTERSIGN_STD_SECRET="whsec_$(head -c 24 /dev/urandom | base64)"
export COUNTERSIGN_CS_SECRET="cs-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
sed "s/@PORT@/$hook_port/g" scripts/webhooks/server.toml.in >"$work/server.toml"
"$venv/bin/python" scripts/webhooks/receiver.py "$hook_port" "$work/received.jsonl" &
receiver=$!
"$bin" --listen "127.0.0.1:$api_port" --db "$work/countersign.db" --config "$work/server.toml" 2>"$work/server.log" &
server=$!
trap 'kill $server $receiver 2>/dev/null; wait $server $receiver 2>/dev/null || true; rm -rf "$work"' EXIT
api="http://127.0.0.1:$api_port"
for _ in $(seq 150); do curl -sf "$api/healthz" >/dev/null && break; sleep 0.2; done
# The receiver is up once it answers (405 to a GET).
for _ in $(seq 150); do curl -s -o /dev/null "http://127.0.0.1:$hook_port/" && break; sleep 0.2; done
curl -sf "$api/healthz" >/dev/null || { cat "$work/server.log"; exit 1; }
for tool in std.send cs.send; do
  state=$(curl -s -X POST "$api/v1/actions" -H 'Authorization: Bearer sch-agent' \
    -H 'content-type: application/json' -d "{\"tool\":\"$tool\",\"args\":{\"n\":1}}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
  echo "$tool: $state"
  [ "$state" = succeeded ] || { cat "$work/received.jsonl" "$work/server.log" 2>/dev/null | tail -20; exit 1; }
done
# Both sealings notify both endpoints (the outbox delivers within a sweep or two).
for _ in $(seq 50); do
  [ "$(grep -c notice "$work/received.jsonl" 2>/dev/null || true)" -ge 4 ] && break; sleep 0.2
done
python3 - "$work/received.jsonl" <<'PY'
import collections, json, sys
seen = [json.loads(line) for line in open(sys.argv[1])]
bad = [s for s in seen if not s["ok"]]
counts = collections.Counter(s["kind"] for s in seen if s["ok"])
print("verified:", dict(sorted(counts.items())))
kinds = {"tool-standard", "tool-countersign", "notice-standard", "notice-countersign"}
if bad or set(counts) != kinds:
    sys.exit(f"not verified: {bad or kinds - set(counts)}")
PY
