# Sourced by the other scripts: a throwaway PostgreSQL cluster run by the `postgres` user
# (PostgreSQL refuses to run as root) in a private directory, reachable only through a Unix
# socket in that directory. `cluster_start DIR` starts it and sets PGHOST/PGPORT/PGUSER for
# psql; `cluster_stop` stops it and removes DIR.

# PG_MAJOR picks the PostgreSQL version (15 by default): 15 is Debian's in PG15_HOME (which
# may name another PostgreSQL 15 installation), 16, 17 and 18 the relocatable builds that
# scripts/setup.sh unpacks under /opt/pg_minhash. PG_BIN may name another installation's bin
# directory instead. Its psql, pg_dump and the like come first in PATH.
PG_MAJOR="${PG_MAJOR:-15}"
PG15_HOME="${PG15_HOME:-/usr/lib/postgresql/15}"

# pg_home MAJOR: that version's installation.
pg_home() {
    case "$1" in
        15) echo "$PG15_HOME" ;;
        *) echo "/opt/pg_minhash/postgresql-$1" ;;
    esac
}

# pg_bin_dir MAJOR: the bin directory of that version's installation.
pg_bin_dir() { echo "$(pg_home "$1")/bin"; }

PG_BIN="${PG_BIN:-$(pg_bin_dir "$PG_MAJOR")}"
PG_CONFIG="$PG_BIN/pg_config"
export PATH="$PG_BIN:$PATH"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
as_postgres() { as_root sudo -u postgres "$@"; }

# pg_major: the major version of the installation of PG_CONFIG.
pg_major() { "$PG_CONFIG" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/'; }

# Builds the extension for PG_CONFIG's version (release with $1 = --release) and installs it
# into that installation.
install_extension() {
    local sudo_flag=()
    [ "$(id -u)" -eq 0 ] || sudo_flag=(--sudo)
    cargo pgrx install "$@" "${sudo_flag[@]}" --pg-config "$PG_CONFIG" \
        --no-default-features --features "pg$(pg_major)" >/dev/null
}

cluster_start() {
    CLUSTER_DIR="$1"
    mkdir -p "$CLUSTER_DIR"
    chmod 755 "$CLUSTER_DIR"
    as_root chown postgres: "$CLUSTER_DIR"
    as_postgres "$PG_BIN/initdb" -D "$CLUSTER_DIR/data" -U postgres -A trust -E UTF8 \
        --locale=C.UTF-8 >/dev/null
    # (CLUSTER_ENV: extra NAME=value settings for the server's environment)
    as_postgres env ${CLUSTER_ENV:-} "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w \
        -o "-c listen_addresses='' -k $CLUSTER_DIR -p 5432" start >/dev/null
    export PGHOST="$CLUSTER_DIR" PGPORT=5432 PGUSER=postgres
}

cluster_stop() {
    [ -n "${CLUSTER_DIR:-}" ] || return 0
    if [ -f "$CLUSTER_DIR/data/postmaster.pid" ]; then
        as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null || true
    fi
    as_root rm -rf "$CLUSTER_DIR"
    CLUSTER_DIR=
}
