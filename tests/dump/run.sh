#!/usr/bin/env bash
# pg_dump and pg_restore of a database with managed indexes and flag triggers, every usual way:
# a plain-format dump run by psql, a full pg_restore, --schema-only then --data-only (with
# --disable-triggers, and without it, the flag triggers disabled by their owner meanwhile), and
# --data-only into tables whose indexes were made by hand.
# After each: every row restored, flags exactly as dumped, minhash_index_check 0/0 for every
# index, the band tables linked to their tables again, and the triggers working; a sketch store
# (access method minhash_sketch) on an expression comes back with its definition and entries.
# The tables' names put their data before, around and after the catalog's in the dump:
# articles (and its band table) before minhash_indexes, notes after it, and a long name whose
# band table comes before the table itself.
# Usage: tests/dump/run.sh (the extension must be installed; PG_BIN as in scripts/cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh

long=$(printf 'z%.0s' {1..55})   # band table: 49 z's + _minhash_bands, sorts before it
psql_q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-dump.XXXXXX)"

# The schema, as a user would write it; the source database runs it before its data.
schema_sql="
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE notes (id int PRIMARY KEY, body text, dup int);
CREATE TABLE articles (id bigint PRIMARY KEY, body text);
CREATE TABLE $long (id int PRIMARY KEY, body varchar);
SELECT count(*) FROM (SELECT minhash_index_create('notes', 'id', 'body', threshold => 0.7)
                      UNION ALL SELECT minhash_index_create('articles', 'id', 'body')
                      UNION ALL SELECT minhash_index_create('$long', 'id', 'body')) s;
CREATE TRIGGER notes_flag BEFORE INSERT OR UPDATE ON notes
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
CREATE INDEX notes_sketch ON notes USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
"
# What must come back: rows, flags, band rows, index health and dependencies.
state_sql="
SELECT 'notes ' || count(*) || ' flags ' || count(dup) || ' '
       || md5(string_agg(id || '>' || dup, ',' ORDER BY id) FILTER (WHERE dup IS NOT NULL)) FROM notes;
SELECT 'articles ' || count(*) FROM articles;
SELECT 'long ' || count(*) FROM $long;
SELECT 'band rows ' || (SELECT count(*) FROM notes_minhash_bands) || ' '
       || (SELECT count(*) FROM articles_minhash_bands) || ' '
       || (SELECT count(*) FROM ${long:0:49}_minhash_bands);
SELECT 'check ' || string_agg(c.missing || '/' || c.orphaned, ' ' ORDER BY i.tbl::text)
FROM minhash_indexes i, minhash_index_check(i.tbl) c;
SELECT 'linked ' || count(*) FROM minhash_indexes i
WHERE EXISTS (SELECT FROM pg_depend d WHERE d.objid = i.band_table AND d.refobjid = i.tbl
              AND d.deptype = 'a');
SELECT 'pairs ' || (SELECT count(*) FROM minhash_duplicates('notes')) || ' '
       || (SELECT count(*) FROM minhash_duplicates('articles'));
VACUUM notes;
SELECT 'sketch ' || pg_get_indexdef('notes_sketch'::regclass) || ' ' || s.width || ' ' || s.entries || ' '
       || (SELECT count(*) FROM (SELECT sketch FROM minhash_internal._minhash_sketch_entries('notes_sketch')
                                 EXCEPT ALL SELECT decode(md5(body), 'hex') FROM notes) x) || ' '
       || (SELECT count(*) FROM (SELECT decode(md5(body), 'hex') FROM notes
                                 EXCEPT ALL SELECT sketch FROM minhash_internal._minhash_sketch_entries('notes_sketch')) x)
FROM minhash_internal._minhash_sketch_stats('notes_sketch') s;
"

psql_q -d postgres -c 'CREATE DATABASE source' >/dev/null
psql_q -d source >/dev/null <<SQL
$schema_sql
-- Rows flagged as they arrive; one flag cleared and one set by a moderator; articles gets a
-- reject trigger after rows that it would refuse were in.
INSERT INTO notes SELECT g, 'a note worth keeping, number ' || g || ' ' || md5(g::text), NULL
FROM generate_series(1, 40) g;
INSERT INTO notes SELECT g, 'a note worth keeping, number ' || (g % 40) || ' ' || md5((g % 40)::text), NULL
FROM generate_series(41, 200) g;
UPDATE notes SET dup = NULL WHERE id = 150;
UPDATE notes SET dup = 7 WHERE id = 3;
INSERT INTO articles SELECT g, 'article ' || (g % 30) || ' ' || md5((g % 30)::text)
FROM generate_series(1, 90) g;
CREATE TRIGGER articles_reject BEFORE INSERT ON articles
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
INSERT INTO $long SELECT g, 'long table row ' || md5(g::text) FROM generate_series(1, 60) g;
SQL
expected=$(psql_q -d source <<<"$state_sql")
echo "$expected" | sed 's/^/dump: source: /'
"$PG_BIN/pg_dump" -d source -f "$CLUSTER_DIR/dump.sql"
"$PG_BIN/pg_dump" -Fc -d source -f "$CLUSTER_DIR/dump.fc"

# check NAME: the restored database NAME holds what the source held, and keeps working.
failed=0
check() {
    local got after
    got=$(psql_q -d "$1" <<<"$state_sql")
    if [ "$got" != "$expected" ]; then
        echo "dump: $1: FAILED, restored:" >&2
        diff <(echo "$expected") <(echo "$got") >&2 || true
        failed=1
        return
    fi
    # a new near-duplicate is flagged against the restored rows, and the indexes stay exact
    after=$(psql_q -d "$1" <<'SQL'
INSERT INTO notes VALUES (1000, 'a note worth keeping, number 5 ' || md5('5') || '!');
SELECT dup FROM notes WHERE id = 1000;
SELECT string_agg(c.missing || '/' || c.orphaned, ' ') FROM minhash_indexes i, minhash_index_check(i.tbl) c;
SQL
)
    if [ "$(echo $after)" != "5 0/0 0/0 0/0" ]; then
        echo "dump: $1: FAILED after an insert: $(echo $after)" >&2
        failed=1
        return
    fi
    echo "dump: $1: ok"
}
new_db() { psql_q -d postgres -c "CREATE DATABASE $1" >/dev/null; }
# flag_triggers DB DISABLE|ENABLE: what the owner does around a data-only restore without
# --disable-triggers (which needs a superuser), so that the rows keep the flags they were dumped
# with and the rows a reject trigger came after are not refused
flag_triggers() {
    psql_q -d "$1" -c "ALTER TABLE notes $2 TRIGGER notes_flag" \
                   -c "ALTER TABLE articles $2 TRIGGER articles_reject" >/dev/null
}

new_db plain
psql_q -d plain -f "$CLUSTER_DIR/dump.sql" >/dev/null
check plain

new_db whole
"$PG_BIN/pg_restore" --exit-on-error -d whole "$CLUSTER_DIR/dump.fc"
check whole

new_db split
"$PG_BIN/pg_restore" --exit-on-error --schema-only -d split "$CLUSTER_DIR/dump.fc"
flag_triggers split DISABLE
"$PG_BIN/pg_restore" --exit-on-error --data-only -d split "$CLUSTER_DIR/dump.fc"
flag_triggers split ENABLE
check split

new_db split_disabled
"$PG_BIN/pg_restore" --exit-on-error --schema-only -d split_disabled "$CLUSTER_DIR/dump.fc"
"$PG_BIN/pg_restore" --exit-on-error --data-only --disable-triggers -d split_disabled "$CLUSTER_DIR/dump.fc"
check split_disabled

new_db by_hand
psql_q -d by_hand >/dev/null <<SQL
$schema_sql
CREATE TRIGGER articles_reject BEFORE INSERT ON articles
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
SQL
flag_triggers by_hand DISABLE
"$PG_BIN/pg_restore" --exit-on-error --data-only -d by_hand "$CLUSTER_DIR/dump.fc"
flag_triggers by_hand ENABLE
check by_hand

[ "$failed" -eq 0 ]
