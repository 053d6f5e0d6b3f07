#!/usr/bin/env bash
# The bench command (BENCHMARKS.md): LocalStack as for the tests, then countersign-bench.
#   bash scripts/bench.sh all     # the figures: optimized build, full N (about 30 min on 2 cores)
#   bash scripts/bench.sh quick   # CI's smoke run: debug build, small N, every section (minutes)
# Extra arguments go to the bench, e.g. `bash scripts/bench.sh all --only embedded`.
set -euo pipefail
cd "$(dirname "$0")/.."
source localstack/ensure.sh
# The Postgres section: reuse the server COUNTERSIGN_TEST_DATABASE_URL names, else start one.
source scripts/postgres.sh ensure
mode=${1:-quick}
shift || true
case "$mode" in
  # The bench itself builds with the `bench` profile (optimized, no whole-program LTO: quicker
  # to build); the Lambda functions it measures build with `release`, as they ship. A whole run
  # writes its table into BENCHMARKS.md; a partial one (`--only …`) only prints it.
  all)
    if [ $# -eq 0 ]; then set -- --write BENCHMARKS.md; fi
    cargo run --profile bench -p countersign-bench -- all "$@" ;;
  quick) cargo run -p countersign-bench -- quick "$@" ;;
  *) echo "usage: bash scripts/bench.sh all|quick [bench options]" >&2; exit 2 ;;
esac
