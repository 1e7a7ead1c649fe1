#!/usr/bin/env bash
# A hostile installer of the trusted extension (docs/security.md, "Names"). A role with only
# CREATE on a database plants, in a schema of its own, shadows of every operator and function
# the extension's SQL calls (tests/hostile_install/plant.sql), and installs the extension into
# that schema, which puts it first on the install script's search path: the current release,
# and each earlier release followed by ALTER EXTENSION UPDATE to this one. Then an
# unprivileged table owner, a reader and a superuser, each with that schema first on their
# search path, run every function users call and every write path
# (tests/hostile_install/victim.sql), and the reader looks up the owner's table under row-level
# security (reader.sql). Passes when nothing planted ever ran (evil.ran is empty)
# and the installer is still no superuser; before 0.3.0's fix, the catalog's policy bound the
# planted `=(oid, regclass)` and the install's DO block ran `=(oid, regnamespace)` as the
# bootstrap superuser.
# First, scripts/sqlcheck.py over the install script pgrx generated. Last, a second check: CREATE EXTENSION in a database where another role made the schema
# minhash_internal first fails with a message that names that role and the fix.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

RELEASES="${HOSTILE_RELEASES:-0.1.0 0.2.0}"
tmp=$(mktemp -d /tmp/pg_minhash-hostile.XXXXXX)
chmod 755 "$tmp"
trap 'cluster_stop; rm -rf "$tmp"' EXIT

[ "${SKIP_INSTALL:-0}" = 1 ] || install_extension
sharedir=$("$PG_CONFIG" --sharedir)/extension
CURRENT=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
# the static check over the install script pgrx generated (.ci/run checks the sources)
python3 scripts/sqlcheck.py --generated "$sharedir/pg_minhash--$CURRENT.sql" src/index/sql/catalog.sql >/dev/null ||
    { python3 scripts/sqlcheck.py --generated "$sharedir/pg_minhash--$CURRENT.sql" src/index/sql/catalog.sql; exit 1; }
# (the earlier releases' install scripts; this tree's library serves them)
as_root cp sql/pg_minhash--0.1.0.sql sql/pg_minhash--0.2.0.sql "$sharedir/"
cluster_start "$tmp/cluster"
psql() { command psql -X -q -v ON_ERROR_STOP=1 "$@"; }

# The names the extension's SQL calls: every identifier written before a parenthesis in its
# scripts and SQL strings (pg_catalog's functions of those names are shadowed), and the
# operator symbols pg_catalog defines for the types plant.sql plants for.
functions=$(cat sql/*.sql src/index/sql/*.sql "$sharedir"/pg_minhash--*.sql src/*/*.rs |
    grep -oE '[A-Za-z_][A-Za-z0-9_]*[[:space:]]*\(' | tr -d '( \t' | tr 'A-Z' 'a-z' | sort -u | tr '\n' ' ')
operators='= <> < > <= >= + - * / % || && # & | ~~ ~~* !~~ ~ @> <@ -> ->> ?'

psql -d postgres <<SQL
SET client_min_messages = warning;
CREATE ROLE installer LOGIN;
CREATE ROLE owner1 LOGIN;
CREATE ROLE reader LOGIN;
SQL

# hostile_db DB VERSION: a database where installer planted its shadows and installed VERSION
# of the extension into its schema `evil` (updated to this tree's version if older).
hostile_db() {
    local db=$1 version=$2
    psql -d postgres -c "CREATE DATABASE $db" -c "GRANT CREATE ON DATABASE $db TO installer"
    {
        cat tests/hostile_install/plant.sql
        echo "SET client_min_messages = warning;"
        if [ "$version" = current ]; then
            echo "CREATE EXTENSION pg_minhash SCHEMA evil;"
        else
            echo "CREATE EXTENSION pg_minhash VERSION '$version' SCHEMA evil;"
            echo "ALTER EXTENSION pg_minhash UPDATE;"
        fi
    } | psql -U installer -d "$db" -v functions="$functions" \
            -v operators="$operators"
}

# each role's run, with evil first on its search path
run_everything() {
    local db=$1
    psql -d "$db" -c "GRANT CREATE ON DATABASE $db TO owner1, reader"
    for role in owner1 reader postgres; do
        psql -U "$role" -d "$db" -v role="$role" -f tests/hostile_install/victim.sql >/dev/null
    done
    # owner1's table under row-level security, read by the reader
    psql -U owner1 -d "$db" >/dev/null <<'SQL'
SET search_path = pg_catalog;
CREATE SCHEMA owner1;
GRANT USAGE ON SCHEMA owner1 TO reader;
CREATE TABLE owner1.kept (id bigint PRIMARY KEY, body text);
INSERT INTO owner1.kept SELECT g, 'question ' || g || ' about the compiler of machine ' || (g * 7919 % 101)
                                  || ' which fails on boot number ' || (g % 13)
FROM generate_series(1, 200) g;
ALTER TABLE owner1.kept ENABLE ROW LEVEL SECURITY;
CREATE POLICY odd ON owner1.kept FOR SELECT USING (id % 2 = 1);
GRANT SELECT ON owner1.kept TO reader;
SELECT evil.minhash_index_create('owner1.kept', 'id', 'body');
SQL
    psql -U reader -d "$db" -f tests/hostile_install/reader.sql >/dev/null
}

status=0
check_db() {
    local db=$1 ran superuser
    ran=$(psql -At -d "$db" -c "SELECT count(*) FROM evil.ran")
    superuser=$(psql -At -d postgres -c "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'installer'")
    if [ "$ran" != 0 ] || [ "$superuser" != f ]; then
        echo "hostile install: FAILED in $db: planted objects ran $ran times; installer superuser: $superuser" >&2
        psql -d "$db" -c "SELECT who, superuser, what, count(*) FROM evil.ran GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 20" >&2
        status=1
    fi
}

planted=""
for version in current $RELEASES; do
    db="hostile_${version//./_}"
    echo "==> hostile install: $version into a planted schema$([ "$version" = current ] || echo ", then ALTER EXTENSION UPDATE")"
    out=$(hostile_db "$db" "$version" 2>&1) || { echo "$out" >&2; echo "hostile install: CREATE EXTENSION failed in $db" >&2; exit 1; }
    planted=$(grep -E '^\s*(function|operator|temporary relation)\s*\|' <<<"$out" |
        awk -F'|' '{gsub(/^ +| +$/, "", $1); gsub(/ /, "", $2); printf "%s%s %ss", sep, $2, $1; sep = ", "}')
    check_db "$db"
    run_everything "$db"
    check_db "$db"
done

# A squatted internal schema: a clear error naming its owner and the fix
psql -d postgres -c "CREATE DATABASE squatted" -c "GRANT CREATE ON DATABASE squatted TO installer"
psql -U reader -d squatted -c "CREATE SCHEMA minhash_internal" 2>/dev/null ||
    { psql -d squatted -c "GRANT CREATE ON DATABASE squatted TO reader"; psql -U reader -d squatted -c "CREATE SCHEMA minhash_internal"; }
err=$(psql -U installer -d squatted -c "CREATE EXTENSION pg_minhash" 2>&1) && {
    echo "hostile install: CREATE EXTENSION succeeded beside a squatted minhash_internal" >&2; exit 1; }
if ! grep -q 'schema "minhash_internal" already exists and belongs to role "reader"' <<<"$err" ||
   ! grep -q 'HINT:.*DROP SCHEMA minhash_internal' <<<"$err"; then
    echo "hostile install: the squatted schema's error does not name its owner and the fix:" >&2
    echo "$err" >&2
    status=1
fi

[ "$status" = 0 ] && echo "hostile install: planted ${planted}; current and ${RELEASES// /, } installed and updated into the planted schema, every function run by an owner, a reader and a superuser: nothing planted ran; a squatted minhash_internal named in the error"
exit "$status"
