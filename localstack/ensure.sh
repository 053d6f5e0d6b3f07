# Sourced by scripts/test.sh and scripts/bench.sh: point the AWS SDK at LocalStack, start it
# (host or Docker) unless one already answers, and stop it on exit only if this run started it.
port=${LOCALSTACK_PORT:-4566}
export AWS_ENDPOINT_URL=${AWS_ENDPOINT_URL:-http://127.0.0.1:$port}
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-test} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-test}
export AWS_REGION=${AWS_REGION:-us-east-1}

localstack_started=0
if ! curl -sf "http://127.0.0.1:$port/_localstack/health" >/dev/null 2>&1; then
  bash localstack/start.sh
  localstack_started=1
fi
trap '[ "$localstack_started" = 1 ] && bash localstack/stop.sh' EXIT
