#!/usr/bin/env bash
# Make sure Redis (127.0.0.1:6379) and PostgreSQL (127.0.0.1:5432, user postgres with
# trust auth on loopback, database "test") are running, installing them if missing.
# Idempotent, and fast when both already answer. Debian/Ubuntu; run as root (or with sudo).
set -euo pipefail

REDIS_PORT=${REDIS_PORT:-6379}
PG_HOST=127.0.0.1
PG_DATABASE=${PG_DATABASE:-test}
WAIT_SECONDS=${WAIT_SECONDS:-30}

log() { printf '[services] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

as_postgres() {
  if [ "$(id -un)" = postgres ]; then
    "$@"
  elif [ "$(id -u)" -eq 0 ]; then
    su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
  else
    sudo -u postgres "$@"
  fi
}

APT_UPDATED=0
apt_install() {
  if [ "$APT_UPDATED" -eq 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Wait (bounded) until "$@" succeeds.
wait_for() {
  local what=$1
  shift
  local deadline=$((SECONDS + WAIT_SECONDS))
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "$what did not come up within ${WAIT_SECONDS}s"
      return 1
    fi
    sleep 0.2
  done
}

# --- Redis ---------------------------------------------------------------------------

redis_up() {
  command -v redis-cli >/dev/null 2>&1 &&
    [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

ensure_redis() {
  if redis_up; then
    log "redis: up"
    return
  fi
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    log "redis: installing redis-server"
    apt_install redis-server
  fi
  if ! redis_up; then # the package may have started it already
    log "redis: starting on 127.0.0.1:$REDIS_PORT"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" \
      --save "" --appendonly no >/dev/null
  fi
  wait_for redis redis_up
  log "redis: up"
}

# --- PostgreSQL ----------------------------------------------------------------------

pg_up() {
  command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h "$PG_HOST"
}

psql_postgres() {
  psql -h "$PG_HOST" -U postgres -w -X -q -tA "$@"
}

pg_version() {
  # The newest configured cluster version, else the newest installed server.
  local v
  v=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -z "$v" ]; then
    v=$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1 || true)
  fi
  printf '%s' "$v"
}

ensure_postgres_running() {
  if pg_up; then
    return
  fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ -z "$(pg_version)" ]; then
    log "postgres: installing postgresql"
    apt_install postgresql
  fi
  if pg_up; then # the package may have started it already
    return
  fi
  local version
  version=$(pg_version)
  if [ ! -d "/etc/postgresql/$version/main" ]; then
    log "postgres: creating cluster $version/main"
    as_root pg_createcluster "$version" main >/dev/null
  fi
  log "postgres: starting cluster $version/main"
  as_postgres pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
    pg_up # lost a race with another starter: fine if it answers now
  wait_for postgres pg_up
}

ensure_postgres_access() {
  if psql_postgres -d postgres -c 'SELECT 1' >/dev/null 2>&1; then
    return
  fi
  # Trust loopback connections of the postgres user (a CI/dev box, not production).
  local version hba
  version=$(pg_version)
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  log "postgres: enabling trust auth for postgres on loopback in $hba"
  as_root sed -i '1i host all postgres 127.0.0.1/32 trust\nhost all postgres ::1/128 trust' "$hba"
  as_postgres pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  wait_for "postgres trust auth" psql_postgres -d postgres -c 'SELECT 1'
}

db_exists() {
  # psql interpolates :'db' (a quoted literal) in scripts read from stdin, not in -c.
  [ "$(psql_postgres -d postgres -v "db=$PG_DATABASE" \
    <<<"SELECT 1 FROM pg_database WHERE datname = :'db'")" = 1 ]
}

ensure_postgres() {
  ensure_postgres_running
  ensure_postgres_access
  if ! db_exists; then
    log "postgres: creating database $PG_DATABASE"
    createdb -h "$PG_HOST" -U postgres -w "$PG_DATABASE" || db_exists # tolerate a race
  fi
  log "postgres: up"
}

ensure_redis
ensure_postgres
