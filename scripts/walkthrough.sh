#!/usr/bin/env bash
# Runs the README walkthroughs exactly as written (the shell blocks between each pair of
# markers), so the README stays true: the API walkthrough (`walkthrough`), the CLI one
# (`walkthrough-cli`) and the MCP one (`walkthrough-mcp`, with the Python SDK of
# scripts/mcp-sdks.sh). Each uses its own port and database. They run with a `date` that takes
# only what BSD/macOS `date` takes (no GNU `-d`), and a walkthrough whose approval is refused must
# stop there.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# Only API names the address: the README derives the server's --listen from it.
export COUNTERSIGN_DB="$work/countersign.db" API=http://127.0.0.1:18080
unset COUNTERSIGN_LISTEN

# A `date` as BSD/macOS has it: no `-d`/`--date` (GNU only). Caught on main: every walkthrough
# that computed a window with `date -u -d '+15 seconds'` failed at its first step on a Mac.
mkdir "$work/bsd"
cat > "$work/bsd/date" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do
  case "\$a" in -*d*|--*) echo "date: illegal option -- d (BSD date; the walkthroughs must not need GNU date)" >&2; exit 1;; esac
done
exec $(command -v date) "\$@"
EOF
chmod +x "$work/bsd/date"
export PATH="$work/bsd:$PATH"

# extract <marker> [blocks]: the shell of the walkthrough's code blocks (all, or the first N).
extract() {
  awk -v m="$1" -v n="${2:-0}" '$0 == "<!-- " m ":start -->"{on=1;next} $0 == "<!-- " m ":end -->"{on=0}
       on && /^```/{inblock=!inblock; if (!inblock && ++done == n) exit; next} on && inblock' README.md \
    | sed 's#http://127.0.0.1:8080#$API#g'
}

# alone <api> <script> <out>: run a script in its own process group, so that what it started in
# the background (a server, a receiver) ends with it, for at most 300 s; its exit status.
alone() {
  API=$1 setsid timeout 300 bash -euo pipefail "$2" > "$3" 2>&1 & local started=$!
  local rc=0; wait "$started" || rc=$?
  kill -- -"$started" 2>/dev/null || true
  return "$rc"
}

# run <marker> <expected output line>… : extract the block, run it, check its output. A block
# that fails ends the run there (caught on main: a failed step left the walkthrough's server
# holding the output pipe, and the script waited forever).
run() {
  local marker=$1; shift
  extract "$marker" > "$work/$marker.sh"
  echo "$marker: running $(grep -c . "$work/$marker.sh") lines from README.md"
  local rc=0; alone "$API" "$work/$marker.sh" "$work/$marker.out" || rc=$?
  cat "$work/$marker.out"
  [ "$rc" = 0 ] || { echo "$marker: failed (exit $rc)"; exit 1; }
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

# A walkthrough stops at its first failure: with the approver's key wrong, reading the approval
# context is refused and the walkthrough ends there, non-zero, saying so. Caught on main: the MCP
# one went on to print "approved: null", asked the agent how it ended and exited 0, and the API
# one waited forever for a call that was never approved.
for marker in walkthrough walkthrough-mcp; do
  extract "$marker" | sed 's/cs_approver-dev/cs_approver-wrong/' > "$work/$marker-refused.sh"
  rm -f "$COUNTERSIGN_DB"
  rc=0; alone http://127.0.0.1:18080 "$work/$marker-refused.sh" "$work/$marker-refused.out" || rc=$?
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || grep -qE '^(approved|ran): ' "$work/$marker-refused.out" \
     || ! grep -q "401" "$work/$marker-refused.out"; then
    echo "$marker: with a wrong approver key, expected it to stop at the refused read (exit $rc)"
    cat "$work/$marker-refused.out"; exit 1
  fi
  echo "$marker: a refused call stops it (exit $rc)"
done

# The start of each walkthrough gives up, saying so, when its server exits (here: the address
# is taken by another web server, which answers 404) instead of waiting forever; caught on
# main, where the API one spun until killed.
mkdir "$work/empty"
python3 -m http.server 18081 --bind 127.0.0.1 --directory "$work/empty" >/dev/null 2>&1 &
holder=$!
until curl -s -o /dev/null http://127.0.0.1:18081/; do sleep 0.1; done
for marker in walkthrough walkthrough-cli walkthrough-mcp; do
  extract "$marker" 1 > "$work/$marker-start.sh"
  rc=0; alone http://127.0.0.1:18081 "$work/$marker-start.sh" "$work/$marker-start.out" || rc=$?
  if [ "$rc" = 0 ] || [ "$rc" = 124 ] || ! grep -q "countersign-server exited" "$work/$marker-start.out"; then
    echo "$marker: with its address taken, expected the start to fail saying the server exited (exit $rc)"
    cat "$work/$marker-start.out"; exit 1
  fi
  echo "$marker: a server that exits ends the wait (exit $rc)"
done
kill "$holder"
