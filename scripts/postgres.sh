# PostgreSQL for the tests, the chaos run and the bench, without Docker.
#
#   source scripts/postgres.sh ensure reuse the server COUNTERSIGN_TEST_DATABASE_URL names
#                                     if it answers, else start one (and stop it when the sourcing
#                                     shell exits). Name `ensure`: a script sourced without
#                                     arguments sees its caller's (`bench.sh quick` once made
#                                     this `quick`, which matched nothing and started nothing).
#   bash scripts/postgres.sh start    start one that outlives the shell; prints its exports
#   bash scripts/postgres.sh stop     stop the one `start` started
#
# The server: PostgreSQL from Debian's packages (installed with apt-get if no `postgres` binary
# is found), a fresh cluster in a temporary directory, on 127.0.0.1:${COUNTERSIGN_PG_PORT:-54329},
# password (SCRAM) authentication, TLS on with a certificate for 127.0.0.1 from a test CA, and
# `fsync` and `synchronous_commit` as shipped (on). PostgreSQL refuses to run as root: as root
# it runs as the `postgres` user the package creates.
#
# Exports COUNTERSIGN_TEST_DATABASE_URL (the tests give each test its own schema in it) and
# COUNTERSIGN_TEST_DATABASE_CA (the CA of the server's certificate, for the TLS tests).

pg_port=${COUNTERSIGN_PG_PORT:-54329}
pg_state=${COUNTERSIGN_PG_STATE:-/tmp/countersign-postgres-$pg_port}

pg_bindir() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ] && { echo "$dir"; return; }
  done
  return 1
}

pg_install() {
  pg_bindir >/dev/null && return
  echo "postgres.sh: installing PostgreSQL from the distribution's packages" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  pg_bindir >/dev/null
}

# Run as the cluster's owner: root → the `postgres` user.
pg_as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_exports() {
  export COUNTERSIGN_TEST_DATABASE_URL="postgres://countersign:countersign@127.0.0.1:$pg_port/countersign"
  export COUNTERSIGN_TEST_DATABASE_CA="$pg_state/ca.crt"
}

pg_answers() {
  local bin
  bin=$(pg_bindir) || return 1
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$pg_port"
}

pg_start() {
  pg_install
  local bin dir
  bin=$(pg_bindir)
  rm -rf "$pg_state" && mkdir -p "$pg_state"
  dir=$pg_state/data
  printf 'countersign\n' >"$pg_state/pw"
  # A test CA and a server certificate it signs (a self-signed CA certificate cannot be the
  # server's own: TLS clients refuse a CA certificate presented as an end entity).
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=countersign test CA" \
    -keyout "$pg_state/ca.key" -out "$pg_state/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$pg_state/server.key" -out "$pg_state/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >"$pg_state/ext"
  openssl x509 -req -in "$pg_state/server.csr" -CA "$pg_state/ca.crt" -CAkey "$pg_state/ca.key" \
    -CAcreateserial -days 30 -extfile "$pg_state/ext" -out "$pg_state/server.crt" 2>/dev/null
  chmod 600 "$pg_state/server.key"
  [ "$(id -u)" = 0 ] && chown -R postgres "$pg_state"
  pg_as "$bin/initdb" -D "$dir" -U countersign --pwfile="$pg_state/pw" \
    --auth-local=scram-sha-256 --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
  cat >>"$dir/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_state'
max_connections = 300
ssl = on
ssl_cert_file = '$pg_state/server.crt'
ssl_key_file = '$pg_state/server.key'
EOF
  pg_as "$bin/pg_ctl" -D "$dir" -l "$pg_state/log" -w -t 60 start >/dev/null
  PGPASSWORD=countersign "$bin/psql" -q -h 127.0.0.1 -p "$pg_port" -U countersign -d postgres \
    -c "CREATE DATABASE countersign" >/dev/null
}

pg_stop() {
  local bin
  bin=$(pg_bindir) || return 0
  [ -d "$pg_state/data" ] && pg_as "$bin/pg_ctl" -D "$pg_state/data" -m fast -w stop >/dev/null 2>&1
  rm -rf "$pg_state"
}

case "${1:-ensure}" in
  start)
    set -euo pipefail
    pg_answers || pg_start
    pg_exports
    echo "export COUNTERSIGN_TEST_DATABASE_URL=$COUNTERSIGN_TEST_DATABASE_URL"
    echo "export COUNTERSIGN_TEST_DATABASE_CA=$COUNTERSIGN_TEST_DATABASE_CA"
    ;;
  stop) pg_stop ;;
  ensure | "")
    postgres_started=0
    if ! pg_answers; then
      pg_start
      postgres_started=1
    fi
    pg_exports
    # Beside any exit trap already set (localstack/ensure.sh sets one).
    pg_prev_trap=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")
    trap "${pg_prev_trap:+$pg_prev_trap; }[ \"\$postgres_started\" = 1 ] && pg_stop" EXIT
    ;;
  *) echo "postgres.sh: unknown command '$1' (start, stop, ensure)" >&2; return 2 2>/dev/null || exit 2 ;;
esac
