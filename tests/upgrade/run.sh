#!/usr/bin/env bash
# Upgrading from the previous releases. For each of them (0.1.0 and 0.2.0): creates an indexed
# table with a flag trigger and rows as that release, then runs ALTER EXTENSION pg_minhash
# UPDATE with this tree installed (0.1.0 goes through every upgrade script since), and checks
# that
#   (a) the extension's objects equal a fresh install's: pg_dump --schema-only --binary-upgrade
#       (which dumps an extension's member objects) of both databases is the same, but for
#       OIDs, transaction ids, the dump's restrict key and the stored default of the column
#       0.2.0 added (ALTER TABLE ADD COLUMN keeps it for the rows already there);
#   (b) the index built by the old release keeps working: it has gained the claim trigger
#       ("~minhash_sync_claim"), minhash_index_check is 0/0 before and after new rows, the flag
#       trigger flags a near-duplicate, minhash_similar finds it.
# A release is installed from its frozen install script (sql/pg_minhash--VERSION.sql) with this
# tree's library; 0.1.0 is built from its release commit (tag v0.1.0) instead where the clone
# has it and the server is PostgreSQL 15 (0.1.0 builds for 15 only).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

RELEASES="0.1.0 0.2.0"
CURRENT=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
repo=$(pwd)
tmp=$(mktemp -d /tmp/pg_minhash-upgrade.XXXXXX)
chmod 755 "$tmp"
trap 'cluster_stop; rm -rf "$tmp"' EXIT

sharedir=$("$PG_CONFIG" --sharedir)/extension
if [ "$(pg_major)" = 15 ] && git rev-parse -q --verify "v0.1.0^{commit}" >/dev/null; then
    echo "upgrade: building pg_minhash 0.1.0 from tag v0.1.0"
    git archive "v0.1.0" | tar -x -C "$tmp" --one-top-level=previous
    # The release's own sources, with this tree's compiled dependencies. Both builds leave
    # their library in the same place, which cargo does not replace for a build it finds
    # fresh: each is made to compile again.
    touch "$tmp/previous/src/lib.rs"
    (cd "$tmp/previous" && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}" install_extension)
    # (the frozen script is the release's with its statements' operators and functions
    # schema-qualified since, docs/security.md "Names": the same objects)
    cp "sql/pg_minhash--0.1.0.sql" "$sharedir/pg_minhash--0.1.0.sql"
    touch src/lib.rs
else
    install_extension
fi
cluster_start "$tmp/cluster"
psql() { PGOPTIONS="-c client_min_messages=warning" command psql -X -q -v ON_ERROR_STOP=1 "$@"; }
dump() {
    as_postgres "$PG_BIN/pg_dump" -h "$PGHOST" -p "$PGPORT" -U postgres --schema-only \
        --binary-upgrade --exclude-schema=app "$1" |
        grep -v -e 'binary_upgrade_set_next_' -e '^-- Dumped' -e '^\\restrict' -e '^\\unrestrict' \
            -e 'relfrozenxid' -e '^-- set missing value' -e 'binary_upgrade_set_missing_value' -e '^$' |
        sed -E 's/[0-9]{4,}/OID/g'
}

# upgrade_from PREVIOUS: the checks above for an index made by release PREVIOUS.
upgrade_from() {
local PREVIOUS=$1 db=upgraded_${1//./_}
# (the previous releases' install scripts; this tree's library serves them)
as_root cp sql/pg_minhash--0.1.0.sql sql/pg_minhash--0.2.0.sql "$sharedir/"
psql -d postgres -c "CREATE DATABASE $db"
psql -d "$db" <<SQL
CREATE EXTENSION pg_minhash VERSION '$PREVIOUS';
CREATE SCHEMA app;
CREATE TABLE app.docs (id bigint PRIMARY KEY, body text, duplicate_of bigint);
INSERT INTO app.docs (id, body)
SELECT i, 'document ' || i || ' about ' || md5(i::text) || ' and ' || md5((i * 7)::text)
FROM generate_series(1, 2000) i;
SELECT minhash_index_create('app.docs', 'id', 'body');
CREATE TRIGGER flag BEFORE INSERT ON app.docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
SQL

# The new release's files replace the old ones, as a package upgrade does.
install_extension
check() { psql -d "$db" -Atc "SELECT missing || '/' || orphaned FROM minhash_index_check('app.docs')"; }
[ "$(check)" = "0/0" ] || { echo "upgrade: index not exact before the update: $(check)"; exit 1; }
psql -d "$db" -c 'ALTER EXTENSION pg_minhash UPDATE'
version=$(psql -d "$db" -Atc "SELECT extversion FROM pg_extension WHERE extname = 'pg_minhash'")
[ "$version" = "$CURRENT" ] || { echo "upgrade: version is $version, not $CURRENT"; exit 1; }

# (a) same objects as a fresh install
dump "$db" > "$tmp/upgraded.sql"
if ! diff -u "$tmp/fresh.sql" "$tmp/upgraded.sql"; then
    echo "upgrade: the extension updated from $PREVIOUS differs from a fresh install (diff above)"
    exit 1
fi

# (b) the index the old release built keeps working, with the claim trigger the update adds
[ "$(check)" = "0/0" ] || { echo "upgrade: index not exact after the update: $(check)"; exit 1; }
triggers=$(psql -d "$db" -Atc "SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger
    WHERE tgrelid = 'app.docs'::regclass AND tgfoid = 'minhash_internal._minhash_sync()'::regprocedure")
[ "$triggers" = "minhash_sync_delete,minhash_sync_insert,minhash_sync_truncate,minhash_sync_update,~minhash_sync_claim" ] ||
    { echo "upgrade: the sync triggers after the update are $triggers"; exit 1; }
psql -d "$db" <<'SQL'
INSERT INTO app.docs (id, body)
SELECT i, 'document ' || i || ' about ' || md5(i::text) || ' and ' || md5((i * 7)::text)
FROM generate_series(2001, 2100) i;
UPDATE app.docs SET body = body || ' edited' WHERE id % 50 = 0;
DELETE FROM app.docs WHERE id % 97 = 0;
INSERT INTO app.docs (id, body)
SELECT 5000, body || '!' FROM app.docs WHERE id = 1234;
SQL
[ "$(check)" = "0/0" ] || { echo "upgrade: index not exact after new writes: $(check)"; exit 1; }
flagged=$(psql -d "$db" -Atc 'SELECT duplicate_of FROM app.docs WHERE id = 5000')
similar=$(psql -d "$db" -Atc "SELECT string_agg(id::text, ',' ORDER BY id)
    FROM minhash_similar('app.docs', (SELECT body FROM app.docs WHERE id = 1234))")
[ "$flagged" = 1234 ] || { echo "upgrade: the flag trigger flagged '$flagged', not 1234"; exit 1; }
[ "$similar" = "1234,5000" ] || { echo "upgrade: minhash_similar found '$similar'"; exit 1; }
# the lookups' new argument k, on the index of the old version (format 1)
top=$(psql -d "$db" -Atc "SELECT string_agg(id::text, ',' ORDER BY similarity DESC, id)
    FROM minhash_similar('app.docs', (SELECT body FROM app.docs WHERE id = 1234), k => 2)")
[ "$top" = "1234,5000" ] || { echo "upgrade: minhash_similar(k => 2) found '$top'"; exit 1; }
# the format 1 index of the old version, converted to format 2 by a rebuild
psql -d "$db" -Atc "SELECT minhash_index_rebuild('app.docs', format => 2)" >/dev/null
format=$(psql -d "$db" -Atc "SELECT format FROM minhash_indexes WHERE tbl = 'app.docs'::regclass")
[ "$format" = 2 ] || { echo "upgrade: the rebuilt index is of format '$format', not 2"; exit 1; }
[ "$(check)" = "0/0" ] || { echo "upgrade: index not exact after its conversion: $(check)"; exit 1; }
psql -d "$db" -Atc "INSERT INTO app.docs (id, body) SELECT 5001, body || '?' FROM app.docs WHERE id = 1234" >/dev/null
similar=$(psql -d "$db" -Atc "SELECT string_agg(id::text, ',' ORDER BY id)
    FROM minhash_similar('app.docs', (SELECT body FROM app.docs WHERE id = 1234))")
[ "$similar" = "1234,5000,5001" ] || { echo "upgrade: after the conversion, minhash_similar found '$similar'"; exit 1; }
[ "$(check)" = "0/0" ] || { echo "upgrade: converted index not exact after a write: $(check)"; exit 1; }
echo "upgrade: $PREVIOUS -> $CURRENT: schema equals a fresh install's," \
     "index checks 0/0 before and after writes, flag trigger and lookups (k too) work," \
     "and minhash_index_rebuild(format => 2) converts the format 1 index exactly"
}

psql -d postgres -c 'CREATE DATABASE fresh'
psql -d fresh -c 'CREATE EXTENSION pg_minhash' -c 'CREATE SCHEMA app'
dump fresh > "$tmp/fresh.sql"
[ "$(grep -c 'ALTER EXTENSION pg_minhash ADD' "$tmp/fresh.sql")" -gt 30 ] ||
    { echo "upgrade: the dump shows no extension members"; exit 1; }
for release in $RELEASES; do
    upgrade_from "$release"
done
