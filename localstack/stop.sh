#!/usr/bin/env bash
# Stop what localstack/start.sh started: the host LocalStack (pid file) or the compose
# container. Idempotent: does nothing (and exits 0) when nothing runs.
set -euo pipefail

# One compound command: bash reads the whole script before running it.
{
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${COUNTERSIGN_CACHE:-$HOME/.cache/countersign}
LS_DIR=$CACHE_ROOT/localstack
PID_FILE=$LS_DIR/localstack.pid
MODE_FILE=$LS_DIR/mode

log() { printf '[localstack] %s\n' "$*"; }

# descendants <pid>: all child pids, recursively (DynamoDB Local runs in its own session)
descendants() {
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null || true); do
        echo "$child"
        descendants "$child"
    done
}

stopped=0

# --- host mode ----------------------------------------------------------------------------
if [[ -f $PID_FILE ]]; then
    pid=$(cat "$PID_FILE")
    # only a live process that is still our LocalStack (guards against a reused pid)
    if [[ $pid =~ ^[0-9]+$ ]] && ps -o args= -p "$pid" 2>/dev/null | grep -q 'localstack\.runtime\.main'; then
        log "stopping LocalStack (pid $pid)"
        children=$(descendants "$pid")
        # SIGTERM: LocalStack shuts its services down, DynamoDB Local included
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "still running after 15 s: sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        # leftovers (e.g. a DynamoDB Local java process that outlived LocalStack)
        for child in $children; do
            kill -KILL "$child" 2>/dev/null || true
        done
        stopped=1
    else
        log "pid file $PID_FILE is stale (pid $pid not running)"
    fi
    rm -f "$PID_FILE"
fi

# --- docker mode --------------------------------------------------------------------------
if [[ "$(cat "$MODE_FILE" 2>/dev/null || true)" == docker ]]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        if docker compose version >/dev/null 2>&1; then
            compose=(docker compose)
        else
            compose=(docker-compose)
        fi
        log "docker compose down"
        "${compose[@]}" -f "$HERE/docker-compose.yml" down
        stopped=1
    else
        log "start.sh used Docker, but no Docker engine answers now; nothing to stop"
    fi
fi
rm -f "$MODE_FILE"

if ((stopped)); then log "stopped"; else log "nothing to stop"; fi
exit 0
}
