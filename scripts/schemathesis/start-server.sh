# Sourced by scripts/schemathesis.sh and scripts/generated-client.sh: builds and starts the local
# server on a free port with scripts/schemathesis/server.toml (test keys only; or the file
# $config names) and a fresh database in $work (or the one $work names); sets $api, $work and
# $server, and stops the server on exit.
cargo build -q -p countersign-server
bin=${CARGO_TARGET_DIR:-target}/debug/countersign-server
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
work=${work:-$(mktemp -d)}
# A test-only deed key (never use it elsewhere).
export COUNTERSIGN_SCHEMATHESIS_DEED_KEY="-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIHdVTkkkSYE9SXsyuMmrMYa7uDkQb2+LQOvPmNQ36wsn
-----END PRIVATE KEY-----"
"$bin" --listen "127.0.0.1:$port" --db "$work/countersign.db" \
  --config "${config:-scripts/schemathesis/server.toml}" 2>"$work/server.log" &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true; eval "${on_exit:-}"' EXIT
for _ in $(seq 150); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.2; done
curl -sf "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$work/server.log"; exit 1; }
api="http://127.0.0.1:$port"
