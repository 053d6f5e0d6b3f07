#!/usr/bin/env bash
# Runs the README walkthroughs exactly as written (the shell blocks between each pair of
# markers), so the README stays true: the API walkthrough (`walkthrough`), the CLI one
# (`walkthrough-cli`) and the MCP one (`walkthrough-mcp`, with the Python SDK of
# scripts/mcp-sdks.sh). Each uses its own port and database.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
export COUNTERSIGN_DB="$work/countersign.db" COUNTERSIGN_LISTEN=127.0.0.1:18080 API=http://127.0.0.1:18080

# run <marker> <expected output line>… : extract the block, run it, check its output.
run() {
  local marker=$1; shift
  awk -v m="$marker" '$0 == "<!-- " m ":start -->"{on=1;next} $0 == "<!-- " m ":end -->"{on=0}
       on && /^```/{inblock=!inblock;next} on && inblock' README.md \
    | sed 's#http://127.0.0.1:8080#$API#g' > "$work/$marker.sh"
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
run walkthrough-mcp "mail.send, payments.transfer" "waiting for a countersignature" "approved: succeeded" \
  "(mail.send): completed"
