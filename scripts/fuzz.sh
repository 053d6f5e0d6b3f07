#!/usr/bin/env bash
# Fuzz the parsers that read hostile or damaged input (issue 8), each for a bounded time:
# request bodies, schedules, the config loader, stored action records, deed files, policy
# conditions (a CEL `when` and the args it reads), bearer tokens (the verifier, a fixed key set).
# `cargo test` replays the token seeds on stable (shared/src/identity/tests.rs); the condition
# seeds are read by shared/src/domain/condition/tests.rs.
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET…]   (default 60 s, every target)
# Needs the nightly toolchain (rustup run nightly) and cargo-fuzz (installed here, pinned).
# Seeds are committed in fuzz/seeds/<target>; what a run learns goes to fuzz/corpus (ignored),
# crashes to fuzz/artifacts/<target>.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
version=0.13.2
if ! cargo fuzz --version 2>/dev/null | grep -q "$version"; then
  cargo install cargo-fuzz --version "$version" --locked
fi
targets=(request_body schedule config stored_record deed condition token)
# Named targets only, when given (e.g. `bash scripts/fuzz.sh 600 token`).
if [ $# -gt 0 ]; then targets=("$@"); fi
(cd fuzz && rustup run nightly cargo fuzz build -O)
printf '%-14s %12s %8s %s\n' target executions crashes seconds
status=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  log=$(mktemp)
  set +e
  (cd fuzz && rustup run nightly cargo fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
    -max_total_time="$seconds" -print_final_stats=1 -max_len=65536) >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  crashes=$(ls "fuzz/artifacts/$t" 2>/dev/null | grep -c '^crash-\|^oom-\|^timeout-' || true)
  printf '%-14s %12s %8s %s\n' "$t" "${execs:-0}" "$crashes" "$seconds"
  if [ "$rc" != 0 ]; then
    status=1
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -5
  fi
  rm -f "$log"
done
exit $status
