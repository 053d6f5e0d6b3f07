#!/usr/bin/env bash
# Runs the README walkthroughs exactly as written (the shell blocks between each pair of
# markers), so the README stays true: the API walkthrough (`walkthrough`), the CLI one
# (`walkthrough-cli`) and the MCP one (`walkthrough-mcp`, with the Python SDK of
# scripts/mcp-sdks.sh). Each uses its own port and database.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# Only API names the address: the README derives the server's --listen from it.
export COUNTERSIGN_DB="$work/countersign.db" API=http://127.0.0.1:18080
unset COUNTERSIGN_LISTEN

# extract <marker> [blocks]: the shell of the walkthrough's code blocks (all, or the first N).
extract() {
  awk -v m="$1" -v n="${2:-0}" '$0 == "<!-- " m ":start -->"{on=1;next} $0 == "<!-- " m ":end -->"{on=0}
       on && /^```/{inblock=!inblock; if (!inblock && ++done == n) exit; next} on && inblock' README.md \
    | sed 's#http://127.0.0.1:8080#$API#g'
}

# run <marker> <expected output line>… : extract the block, run it, check its output.
run() {
  local marker=$1; shift
  extract "$marker" > "$work/$marker.sh"
  echo "$marker: running $(grep -c . "$work/$marker.sh") lines from README.md"
  bash -euo pipefail "$work/$marker.sh" | tee "$work/$marker.out"
  for expect in "$@"; do
    grep -q "$expect" "$work/$marker.out" || { echo "$marker: expected '$expect'"; exit 1; }
  done
  echo "$marker: $# passed, 0 failed"
}

run walkthrough "ran: succeeded" "cancelled: cancelled" "missed: cancelled schedule_missed"
rm -f "$COUNTERSIGN_DB"
run walkthrough-cli '"type": "approval_requested"' "approved act_" "sealed: succeeded" \
  "user approver-dev" "state  *denied" "cancel refused: exit 4"
rm -f "$COUNTERSIGN_DB"
run walkthrough-mcp "mail_send, payments_transfer" "waiting for a countersignature" "approved: succeeded" \
  "(mail.send): completed"

# The start of each walkthrough gives up, saying so, when its server exits (here: the address
# is taken by another web server, which answers 404) instead of waiting forever; caught on
# main, where the API one spun until killed.
mkdir "$work/empty"
python3 -m http.server 18081 --bind 127.0.0.1 --directory "$work/empty" >/dev/null 2>&1 &
holder=$!
until curl -s -o /dev/null http://127.0.0.1:18081/; do sleep 0.1; done
for marker in walkthrough walkthrough-cli walkthrough-mcp; do
  extract "$marker" 1 > "$work/$marker-start.sh"
  # Its own process group, so what it started in the background (a receiver) ends with it.
  API=http://127.0.0.1:18081 setsid timeout 300 bash -euo pipefail "$work/$marker-start.sh" \
    > "$work/$marker-start.out" 2>&1 & started=$!
  rc=0; wait "$started" || rc=$?
  kill -- -"$started" 2>/dev/null || true
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || ! grep -q "countersign-local exited" "$work/$marker-start.out"; then
    echo "$marker: with its address taken, expected the start to fail saying the server exited (exit $rc)"
    cat "$work/$marker-start.out"; exit 1
  fi
  echo "$marker: a server that exits ends the wait (exit $rc)"
done
kill "$holder"
