# Sourced by the Citus test and benchmark: a throwaway Citus cluster on this machine, a
# coordinator and two workers of the system PostgreSQL 15, run by the `postgres` user in a
# private directory. The nodes listen on 127.0.0.1 (Citus connects the nodes over TCP, trusted
# from that address only) and on a Unix socket in that directory. wal_level is logical, as
# Citus moves shards by logical replication while writes go on.
#
#   citus_install               makes Citus available to the system PostgreSQL 15: an installed
#                               Citus is used as it is; otherwise it is built from the source
#                               tarball CITUS_SOURCE names, or from ../shared/citus beside the
#                               project; returns 2 (and says why) when there is none
#   citus_start DIR [PORT]      starts the nodes on PORT, PORT+1, PORT+2 (default 5501)
#   citus_psql NODE ...         psql on node 0 (coordinator), 1 or 2, as CITUS_USER (postgres)
#   citus_stop                  stops the nodes and removes DIR

CITUS_BIN="${PG15_HOME:-/usr/lib/postgresql/15}/bin"

citus_install() {
    local root pg_config libdir sharedir
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    pg_config="$CITUS_BIN/pg_config"
    [ -x "$pg_config" ] || pg_config=/usr/bin/pg_config
    libdir=$("$pg_config" --pkglibdir) sharedir=$("$pg_config" --sharedir)
    if [ -f "$libdir/citus.so" ] && [ -f "$sharedir/extension/citus.control" ]; then
        return 0
    fi
    if [ -n "${CITUS_SOURCE:-}" ]; then
        citus_build "$CITUS_SOURCE" "$pg_config"
    elif [ -f "$root/../shared/citus/install.sh" ]; then
        bash "$root/../shared/citus/install.sh"
    else
        echo "citus_install: no Citus installed in $libdir, CITUS_SOURCE not set and no" \
             "../shared/citus beside $root" >&2
        return 2
    fi
}

# citus_build TARBALL PG_CONFIG: builds and installs Citus from an upstream source tarball
# (citus-VERSION.tar.gz or .tar.xz, as GitHub releases publish them), with the build
# dependencies from Debian's packages.
citus_build() {
    local tarball=$1 pg_config=$2 work src
    [ -f "$tarball" ] || { echo "citus_build: CITUS_SOURCE=$tarball is not a file" >&2; return 1; }
    local deps=(postgresql-server-dev-15 build-essential libcurl4-openssl-dev liblz4-dev
                libzstd-dev libkrb5-dev libssl-dev libxml2-dev libxslt1-dev libselinux1-dev
                libpam0g-dev libreadline-dev zlib1g-dev)
    as_root apt-get install -y -qq "${deps[@]}" >/dev/null 2>&1 ||
        { as_root apt-get update -qq >/dev/null && as_root apt-get install -y -qq "${deps[@]}" >/dev/null; }
    work=$(mktemp -d /tmp/pg_minhash-citus-build.XXXXXX)
    tar -xaf "$tarball" -C "$work"
    src=$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
    # Debian's PostgreSQL 15 exports have_createdb_privilege(), which Citus 13's compatibility
    # header defines too: Citus's copy gets another name.
    if grep -q "extern bool have_createdb_privilege" "$("$pg_config" --includedir-server)/commands/dbcommands.h" &&
       [ -f "$src/src/include/pg_version_compat.h" ]; then
        sed -i -e 's/^have_createdb_privilege(void)$/citus_compat_have_createdb_privilege(void)/' \
            -e '/^citus_compat_have_createdb_privilege(void)$/i #define have_createdb_privilege citus_compat_have_createdb_privilege' \
            "$src/src/include/pg_version_compat.h"
    fi
    (cd "$src" && ./configure --without-libcurl PG_CONFIG="$pg_config" >/dev/null &&
        make -j"$(nproc)" >/dev/null && as_root make install >/dev/null)
    rm -rf "$work"
    echo "citus: built from $tarball into $("$pg_config" --pkglibdir)"
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
