#!/usr/bin/env bash
# The band table's persistence and storage follow its table's: an indexed table made unlogged,
# one made logged again and one unlogged from the start, then an immediate shutdown (a crash:
# unlogged tables come back empty, logged ones from the WAL). After the restart each index is
# exact (minhash_index_check 0|0) and a 'reject' trigger still refuses a near-duplicate of a
# row that survived. A sketch store (access method minhash_sketch) comes back from its generic
# WAL holding exactly the table's rows (writes and a VACUUM after the checkpoint replayed), an
# unlogged table's empty and usable; a page of it damaged on disk is an ERROR XX002. Also: a claim left by ON CONFLICT DO NOTHING, then the band
# table moved to another tablespace in the same transaction: no band rows are left behind.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

install_extension
dir=$(mktemp -d /tmp/pg_minhash-crash.XXXXXX)
trap 'cluster_stop' EXIT
cluster_start "$dir"
psql() { command psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }
fail() { echo "crash: $*" >&2; exit 1; }

# (recovery checks every generic WAL record it replays against a full image of the page: a
# sketch store's record that replays to other bytes than were written stops the restart)
psql -o /dev/null -c "ALTER SYSTEM SET wal_consistency_checking = 'generic'" -c "SELECT pg_reload_conf()"
psql -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE made_unlogged (id bigint PRIMARY KEY, body text);
CREATE TABLE made_logged (id bigint PRIMARY KEY, body text);
CREATE UNLOGGED TABLE born_unlogged (id bigint PRIMARY KEY, body text);
INSERT INTO made_unlogged SELECT g, 'unlogged later ' || g || ' ' || md5(g::text) FROM generate_series(1, 100) g;
INSERT INTO made_logged SELECT g, 'logged again ' || g || ' ' || md5(g::text) FROM generate_series(1, 100) g;
INSERT INTO born_unlogged SELECT g, 'always unlogged ' || g || ' ' || md5(g::text) FROM generate_series(1, 100) g;
SELECT minhash_index_create(t, 'id', 'body') FROM unnest(ARRAY['made_unlogged', 'made_logged', 'born_unlogged']) t;
ALTER TABLE made_unlogged SET UNLOGGED;
ALTER TABLE made_logged SET UNLOGGED;
ALTER TABLE made_logged SET LOGGED;
CREATE TABLE sketched (id int, body text);
CREATE UNLOGGED TABLE sketched_unlogged (id int, body text);
CREATE INDEX sketched_s ON sketched USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
CREATE INDEX sketched_unlogged_s ON sketched_unlogged USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
INSERT INTO sketched SELECT g, 'sketched ' || g FROM generate_series(1, 300) g;
INSERT INTO sketched_unlogged SELECT g, 'sketched ' || g FROM generate_series(1, 300) g;
CREATE TRIGGER zz_reject BEFORE INSERT OR UPDATE ON made_logged
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
INSERT INTO made_logged SELECT g, 'logged again ' || g || ' ' || md5(g::text) || ' after' FROM generate_series(101, 120) g;
CHECKPOINT;
INSERT INTO made_logged SELECT g, 'written after the checkpoint ' || g || ' ' || md5(g::text) FROM generate_series(121, 140) g;
INSERT INTO made_unlogged SELECT g, 'unlogged later ' || g || ' ' || md5(g::text) FROM generate_series(101, 140) g;
INSERT INTO sketched SELECT g, 'sketched ' || g FROM generate_series(301, 800) g;
DELETE FROM sketched WHERE id % 5 = 0;
VACUUM sketched;
UPDATE sketched SET body = body || ' updated' WHERE id % 7 = 0;
SQL

as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -m immediate -w stop >/dev/null
as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w \
    -o "-c listen_addresses='' -k $CLUSTER_DIR -p 5432" start >/dev/null

count_rows() { psql -At -c "SELECT count(*) FROM $1"; }
check_of() { psql -At -c "SELECT format('%s|%s', missing, orphaned) FROM minhash_index_check('$1')"; }
result=""
for t in born_unlogged made_logged made_unlogged; do
    result+="$t:$(count_rows "$t"):$(check_of "$t") "
done
result=${result% }
[ "$result" = "born_unlogged:0:0|0 made_logged:140:0|0 made_unlogged:0:0|0" ] ||
    fail "after the crash: $result"
refused=$(psql -At -c "DO \$\$ BEGIN
    INSERT INTO made_logged VALUES (500, 'written after the checkpoint 130 ' || md5('130') || '!');
    RAISE EXCEPTION 'accepted';
EXCEPTION WHEN unique_violation THEN RAISE NOTICE 'refused'; END \$\$" 2>&1)
case "$refused" in *refused*) ;; *) fail "a near-duplicate of a row written before the crash: $refused" ;; esac
# the sketch stores: (entries, rows, entries without a row, rows without an entry); unlogged:
# (width, entries, pages) after the crash, then entries after an insert
sketches=$(psql -At <<'SQL'
VACUUM sketched;
SELECT format('%s|%s|%s|%s', (SELECT entries FROM minhash_internal._minhash_sketch_stats('sketched_s')),
    (SELECT count(*) FROM sketched),
    (SELECT count(*) FROM (SELECT sketch FROM minhash_internal._minhash_sketch_entries('sketched_s')
                           EXCEPT ALL SELECT decode(md5(body), 'hex') FROM sketched) x),
    (SELECT count(*) FROM (SELECT decode(md5(body), 'hex') FROM sketched
                           EXCEPT ALL SELECT sketch FROM minhash_internal._minhash_sketch_entries('sketched_s')) x));
SELECT format('%s|%s|%s', width, entries, pages) FROM minhash_internal._minhash_sketch_stats('sketched_unlogged_s');
INSERT INTO sketched_unlogged VALUES (1, 'after the crash');
SELECT entries FROM minhash_internal._minhash_sketch_stats('sketched_unlogged_s');
SQL
)
[ "$(echo $sketches)" = "640|640|0|0 0|0|1 1" ] || fail "sketch stores after the crash: $(echo $sketches)"
# a store's page overwritten on disk (the page id of block 1): reading it or VACUUM is an ERROR
# XX002 naming the index and the block, not a crash
file=$(psql -At -c "SELECT pg_relation_filepath('sketched_s')")
as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null
# (PostgreSQL 18's initdb turns data checksums on, and the page's checksum would catch the damage
# first, as "invalid page" XX001: turned off, the store's own check of its page is what reads it)
if as_postgres "$PG_BIN/pg_controldata" -D "$CLUSTER_DIR/data" | grep -q '^Data page checksum version: *[1-9]'; then
    as_postgres "$PG_BIN/pg_checksums" --disable -D "$CLUSTER_DIR/data" >/dev/null
fi
printf '\x00\x00' | as_postgres dd of="$CLUSTER_DIR/data/$file" bs=1 seek=$((2 * 8192 - 2)) conv=notrunc status=none
as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w \
    -o "-c listen_addresses='' -k $CLUSTER_DIR -p 5432" start >/dev/null
corrupted=$(psql -At 2>&1 <<'SQL'
DO $$ BEGIN
    PERFORM count(*) FROM minhash_internal._minhash_sketch_entries('sketched_s');
EXCEPTION WHEN index_corrupted THEN RAISE NOTICE '%', SQLERRM; END $$;
SQL
)
[ "$corrupted" = 'NOTICE:  index "sketched_s" contains a corrupted page at block 1' ] ||
    fail "a corrupted sketch store page: $corrupted"
vacuumed=$(psql -c "DELETE FROM sketched WHERE id < 10" -c "VACUUM (INDEX_CLEANUP ON) sketched" 2>&1 || true)
case "$vacuumed" in
    *'ERROR:  index "sketched_s" contains a corrupted page at block 1'*) ;;
    *) fail "VACUUM of a corrupted sketch store: $vacuumed" ;;
esac

# a claim open while the band table moves to another tablespace
space="$dir/space"
as_postgres mkdir "$space"
result=$(psql -At <<SQL
SET client_min_messages = warning;
CREATE TABLESPACE elsewhere LOCATION '$space';
CREATE TABLE claimed (id bigint PRIMARY KEY, slug text UNIQUE, body text);
INSERT INTO claimed VALUES (1, 'a', 'the first row of the claimed table');
SELECT minhash_index_create('claimed', 'id', 'body') IS NOT NULL;
CREATE TRIGGER zz_reject BEFORE INSERT OR UPDATE ON claimed
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
BEGIN;
INSERT INTO claimed VALUES (2, 'a', 'a row that conflicts on its slug and is skipped') ON CONFLICT (slug) DO NOTHING;
ALTER TABLE claimed_minhash_bands SET TABLESPACE elsewhere;
COMMIT;
SELECT format('%s|%s', missing, orphaned) FROM minhash_index_check('claimed');
DROP TABLE claimed;
DROP TABLESPACE elsewhere;
SQL
)
[ "$(echo "$result" | tail -1)" = "0|0" ] || fail "a claim across SET TABLESPACE: $result"
echo "crash: band tables of logged, unlogged and re-logged tables and sketch stores exact after an immediate shutdown; a claim across SET TABLESPACE leaves nothing"
