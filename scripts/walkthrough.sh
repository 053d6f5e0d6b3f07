#!/usr/bin/env bash
# Runs the README walkthrough exactly as written (the shell blocks between the walkthrough
# markers), so the README stays true. Uses its own port and database.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
export COUNTERSIGN_DB="$work/countersign.db" COUNTERSIGN_LISTEN=127.0.0.1:18080 API=http://127.0.0.1:18080
awk '/<!-- walkthrough:start -->/{on=1;next} /<!-- walkthrough:end -->/{on=0} on && /^```/{inblock=!inblock;next} on && inblock' README.md \
  | sed 's#http://127.0.0.1:8080#$API#g' > "$work/walkthrough.sh"
echo "walkthrough: running $(grep -c . "$work/walkthrough.sh") lines from README.md"
bash -euo pipefail "$work/walkthrough.sh" | tee "$work/out.txt"
# The walkthrough's own checks print these lines; all must be there.
for expect in "ran: succeeded" "cancelled: cancelled" "missed: cancelled schedule_missed"; do
  grep -q "$expect" "$work/out.txt" || { echo "walkthrough: expected '$expect'"; exit 1; }
done
echo "walkthrough: 3 passed, 0 failed"
