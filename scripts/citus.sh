# Sourced by the Citus test and benchmark: a throwaway Citus cluster on this machine, a
# coordinator and two workers of the system PostgreSQL 15, run by the `postgres` user in a
# private directory. The nodes listen on 127.0.0.1 (Citus connects the nodes over TCP, trusted
# from that address only) and on a Unix socket in that directory. wal_level is logical, as
# Citus moves shards by logical replication while writes go on.
#
#   citus_install               builds and installs Citus 13.2.2 (../shared/citus/install.sh)
#   citus_start DIR [PORT]      starts the nodes on PORT, PORT+1, PORT+2 (default 5501)
#   citus_psql NODE ...         psql on node 0 (coordinator), 1 or 2, as CITUS_USER (postgres)
#   citus_stop                  stops the nodes and removes DIR

CITUS_BIN="${PG15_HOME:-/usr/lib/postgresql/15}/bin"

# The Citus install script: beside the project in ../shared, as on the development machines.
citus_install() {
    local root script
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    for script in "$root/../shared/citus/install.sh" /work/shared/citus/install.sh; do
        if [ -f "$script" ]; then
            bash "$script"
            return
        fi
    done
    echo "citus_install: ../shared/citus/install.sh not found beside $root" >&2
    return 1
}

citus_as_postgres() { if [ "$(id -u)" -eq 0 ]; then sudo -u postgres "$@"; else sudo sudo -u postgres "$@"; fi; }

citus_start() {
    CITUS_DIR="$1"
    CITUS_PORT="${2:-5501}"
    local i port
    mkdir -p "$CITUS_DIR"
    chmod 755 "$CITUS_DIR"
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$CITUS_DIR"; else sudo chown postgres: "$CITUS_DIR"; fi
    for i in 0 1 2; do
        port=$((CITUS_PORT + i))
        citus_as_postgres "$CITUS_BIN/initdb" -D "$CITUS_DIR/node$i" -U postgres -A trust -E UTF8 \
            --locale=C.UTF-8 >/dev/null
        citus_as_postgres tee -a "$CITUS_DIR/node$i/postgresql.conf" >/dev/null <<EOF
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$CITUS_DIR'
max_connections = 100
shared_buffers = 128MB
fsync = off
max_prepared_transactions = 100
wal_level = logical
EOF
        citus_as_postgres "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/node$i" -l "$CITUS_DIR/node$i.log" -w start >/dev/null
        citus_psql "$i" -qc "CREATE EXTENSION citus" >/dev/null
    done
    citus_psql 0 -qAt \
        -c "SELECT citus_set_coordinator_host('127.0.0.1', $CITUS_PORT)" \
        -c "SELECT citus_add_node('127.0.0.1', $((CITUS_PORT + 1)))" \
        -c "SELECT citus_add_node('127.0.0.1', $((CITUS_PORT + 2)))" >/dev/null
}

citus_psql() {
    local node="$1"
    shift
    PGHOST="$CITUS_DIR" PGPORT=$((CITUS_PORT + node)) PGUSER="${CITUS_USER:-postgres}" psql -X -v ON_ERROR_STOP=1 -d postgres "$@"
}

citus_stop() {
    [ -n "${CITUS_DIR:-}" ] || return 0
    local i
    for i in 0 1 2; do
        if [ -f "$CITUS_DIR/node$i/postmaster.pid" ]; then
            citus_as_postgres "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/node$i" -m fast -w stop >/dev/null || true
        fi
    done
    if [ "$(id -u)" -eq 0 ]; then rm -rf "$CITUS_DIR"; else sudo rm -rf "$CITUS_DIR"; fi
    CITUS_DIR=
}
