#!/usr/bin/env bash
# The bench command (BENCHMARKS.md): LocalStack as for the tests, then countersign-bench.
#   bash scripts/bench.sh all     # the figures: optimized build, full N (about 30 min on 2 cores)
#   bash scripts/bench.sh quick   # CI's smoke run: debug build, small N, every section (minutes)
# Extra arguments go to the bench, e.g. `bash scripts/bench.sh all --only embedded`.
set -euo pipefail
cd "$(dirname "$0")/.."
source localstack/ensure.sh
mode=${1:-quick}
shift || true
case "$mode" in
  all) cargo run --release -p countersign-bench -- all "$@" ;;
  quick) cargo run -p countersign-bench -- quick "$@" ;;
  *) echo "usage: bash scripts/bench.sh all|quick [bench options]" >&2; exit 2 ;;
esac
