#!/usr/bin/env bash
# A persistent PostgreSQL server for trying deploy/dagster.yaml by hand (Debian's postgresql package).
# The tests do not use it: test_postgres.py starts its own throwaway cluster (initdb/pg_ctl in a temporary
# folder on a free port) and removes it at the end; .ci/run only installs the package.
#
#   scripts/postgres.sh start    # install (once) + create cluster/user/db (once) + start + wait
#   scripts/postgres.sh stop
#   scripts/postgres.sh status   # exit 0 = accepting connections, 3 = not running
#
# Must run as root (apt-get, pg_ctlcluster).  Uses a dedicated Debian cluster
# "$PG_CLUSTER" (default "pstuts") listening only on 127.0.0.1:$PG_PORT (default 5433),
# so the distribution's default "main" cluster on 5432 is never touched.
#
#   URL: postgresql://dagster:dagster@127.0.0.1:5433/dagster_test
#
# Environment knobs (optional): PG_PORT, PG_CLUSTER, PG_USER, PG_PASSWORD, PG_DB,
# PG_START_TIMEOUT (seconds, default 60).
set -Eeuo pipefail

log() { printf '[postgres] %s\n' "$*"; }
die() { printf '[postgres] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; printf "[postgres] ERROR: command failed (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR

PG_PORT="${PG_PORT:-5433}"
PG_CLUSTER="${PG_CLUSTER:-pstuts}"
PG_USER="${PG_USER:-dagster}"
PG_PASSWORD="${PG_PASSWORD:-dagster}"
PG_DB="${PG_DB:-dagster_test}"
PG_HOST=127.0.0.1
PG_START_TIMEOUT="${PG_START_TIMEOUT:-60}"
URL="postgresql://$PG_USER:$PG_PASSWORD@$PG_HOST:$PG_PORT/$PG_DB"
SOCKDIR=/var/run/postgresql

usage() { echo "usage: $0 start|stop|status" >&2; exit 2; }

[[ "$(id -u)" == 0 ]] || die "must run as root (uses apt-get and pg_ctlcluster)"
[[ "$PG_PORT" =~ ^[0-9]+$ ]] || die "PG_PORT must be a number, got '$PG_PORT'"

# highest installed server major version, empty if none
pg_version() {
    local v
    v="$(ls -1 /usr/lib/postgresql 2>/dev/null | grep -E '^[0-9]+$' | sort -n | tail -n1 || true)"
    [[ -n "$v" && -x "/usr/lib/postgresql/$v/bin/postgres" ]] && echo "$v" || true
}

ensure_installed() {
    if [[ -n "$(pg_version)" ]] && command -v pg_createcluster >/dev/null && command -v pg_isready >/dev/null; then
        log "PostgreSQL $(pg_version) already installed"
        return 0
    fi
    local t0=$SECONDS
    export DEBIAN_FRONTEND=noninteractive
    log "apt-get update"
    apt-get update -q
    log "apt-get install -y postgresql"
    apt-get install -y -q postgresql
    [[ -n "$(pg_version)" ]] || die "postgresql installed but no server binary under /usr/lib/postgresql/*/bin"
    log "installed PostgreSQL $(pg_version) in $((SECONDS - t0)) s"
}

cluster_exists() { [[ -f "/etc/postgresql/$1/$PG_CLUSTER/postgresql.conf" ]]; }

cluster_port() { awk -F'[ =\t]+' '/^[[:space:]]*port[[:space:]]*=/{print $2; exit}' "/etc/postgresql/$1/$PG_CLUSTER/postgresql.conf"; }

cluster_online() { pg_lsclusters -h "$1" "$PG_CLUSTER" 2>/dev/null | awk '{print $4}' | grep -qx online; }

ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 2; }

as_postgres_psql() {
    # superuser over the unix socket (peer auth as OS user postgres)
    runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -h "$SOCKDIR" -p "$PG_PORT" -d postgres "$@"
}

ensure_cluster() {
    local v="$1"
    if cluster_exists "$v"; then
        local p; p="$(cluster_port "$v")"
        [[ "$p" == "$PG_PORT" ]] || die "cluster $v/$PG_CLUSTER exists but uses port $p, not $PG_PORT (drop it with: pg_dropcluster --stop $v $PG_CLUSTER)"
        log "cluster $v/$PG_CLUSTER already exists (port $PG_PORT)"
        return 0
    fi
    log "pg_createcluster $v $PG_CLUSTER --port $PG_PORT"
    pg_createcluster "$v" "$PG_CLUSTER" --port "$PG_PORT" --start-conf manual \
        --locale C.UTF-8 -- --auth-local=peer --auth-host=scram-sha-256
}

# (re)written on every start: idempotent and self-healing
write_conf() {
    local v="$1" f="/etc/postgresql/$1/$PG_CLUSTER/conf.d/90-pstuts.conf"
    install -d -o postgres -g postgres "$(dirname "$f")"
    cat > "$f.tmp" <<CONF
# written by scripts/postgres.sh -- test-only settings
port = $PG_PORT
listen_addresses = '$PG_HOST'
unix_socket_directories = '$SOCKDIR'
max_connections = 200
# throwaway test data: trade durability for speed
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
    if ! cmp -s "$f.tmp" "$f" 2>/dev/null; then
        log "writing $f"
        mv "$f.tmp" "$f"; chown postgres:postgres "$f"
        CONF_CHANGED=1
    else
        rm -f "$f.tmp"
    fi
}

ensure_role_and_db() {
    # idempotent: role (re)gets the password, db created only if missing
    log "ensuring role '$PG_USER' and database '$PG_DB'"
    as_postgres_psql <<SQL
DO \$\$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER') THEN
    CREATE ROLE "$PG_USER" LOGIN PASSWORD '$PG_PASSWORD' CREATEDB;
  ELSE
    ALTER ROLE "$PG_USER" LOGIN PASSWORD '$PG_PASSWORD' CREATEDB;
  END IF;
END
\$\$;
SQL
    if [[ "$(as_postgres_psql -tA -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]]; then
        log "CREATE DATABASE $PG_DB OWNER $PG_USER"
        as_postgres_psql -c "CREATE DATABASE \"$PG_DB\" OWNER \"$PG_USER\""
    fi
    # verify a password login over TCP exactly as the tests will connect
    PGPASSWORD="$PG_PASSWORD" PGCONNECT_TIMEOUT=5 \
        psql -X -q -v ON_ERROR_STOP=1 "$URL" -tA -c 'SELECT 1' | grep -qx 1 \
        || die "cannot log in as $PG_USER over TCP at $URL"
    log "password login over TCP OK"
}

do_start() {
    ensure_installed
    local v; v="$(pg_version)"
    ensure_cluster "$v"
    install -d -o postgres -g postgres -m 2775 "$SOCKDIR"
    CONF_CHANGED=0
    write_conf "$v"
    if cluster_online "$v" && (( CONF_CHANGED )); then
        log "configuration changed: pg_ctlcluster $v $PG_CLUSTER restart"
        pg_ctlcluster "$v" "$PG_CLUSTER" restart -m fast
    fi
    if cluster_online "$v" && ready; then
        log "cluster $v/$PG_CLUSTER already running on $PG_HOST:$PG_PORT"
    else
        if ready; then
            die "something else already accepts connections on $PG_HOST:$PG_PORT"
        fi
        log "pg_ctlcluster $v $PG_CLUSTER start"
        local t0=$SECONDS
        pg_ctlcluster "$v" "$PG_CLUSTER" start || {
            tail -n 30 "/var/log/postgresql/postgresql-$v-$PG_CLUSTER.log" >&2 || true
            die "pg_ctlcluster start failed"
        }
        until ready; do
            if (( SECONDS - t0 >= PG_START_TIMEOUT )); then
                tail -n 30 "/var/log/postgresql/postgresql-$v-$PG_CLUSTER.log" >&2 || true
                die "timed out after ${PG_START_TIMEOUT}s waiting for pg_isready"
            fi
            sleep 0.5
        done
        log "ready after $((SECONDS - t0)) s"
    fi
    pg_isready -h "$PG_HOST" -p "$PG_PORT"
    ensure_role_and_db
    log "URL: $URL"
    log "SQLAlchemy/Dagster URL (SQLAlchemy 2.1 maps bare postgresql:// to psycopg v3): ${URL/postgresql:/postgresql+psycopg2:}"
}

do_stop() {
    local v; v="$(pg_version)"
    if [[ -z "$v" ]] || ! cluster_exists "$v"; then
        log "cluster $PG_CLUSTER does not exist: nothing to stop"
        return 0
    fi
    if cluster_online "$v"; then
        log "pg_ctlcluster $v $PG_CLUSTER stop -m fast"
        pg_ctlcluster "$v" "$PG_CLUSTER" stop -m fast
        log "stopped"
    else
        log "cluster $v/$PG_CLUSTER is not running"
    fi
}

do_status() {
    local v; v="$(pg_version)"
    if [[ -z "$v" ]]; then log "PostgreSQL is not installed"; return 3; fi
    if ! cluster_exists "$v"; then log "cluster $v/$PG_CLUSTER does not exist"; return 3; fi
    pg_lsclusters -h "$v" "$PG_CLUSTER" | sed 's/^/[postgres] /'
    if ready; then
        log "accepting connections on $PG_HOST:$PG_PORT; URL: $URL"
        return 0
    fi
    log "not accepting connections on $PG_HOST:$PG_PORT"
    return 3
}

case "${1:-}" in
    start) do_start ;;
    stop) do_stop ;;
    status) rc=0; do_status || rc=$?; exit "$rc" ;;
    *) usage ;;
esac
