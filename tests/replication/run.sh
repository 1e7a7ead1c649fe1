#!/usr/bin/env bash
# Logical replication of a database with a managed index and a flag trigger: a publication FOR
# ALL TABLES on the publisher (UPDATE and DELETE must keep working there: the band table has a
# replica identity), and a subscriber made as docs/indexing.md says (schema from pg_dump
# --schema-only, then a subscription). The subscriber's index must be exact, with the same
# lookups and flags as the publisher's, after the initial copy and after changes. Publisher and
# subscriber are two databases of one cluster (wal_level = logical); the slot is made by hand,
# as CREATE SUBSCRIPTION cannot make one in its own cluster.
# Usage: tests/replication/run.sh (the extension must be installed; PG_BIN as in
# scripts/cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh

psql_q() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-replication.XXXXXX)"
psql_q -d postgres -c 'ALTER SYSTEM SET wal_level = logical' >/dev/null
as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w restart >/dev/null

psql_q -d postgres -c 'CREATE DATABASE pub' -c 'CREATE DATABASE sub' >/dev/null
psql_q -d pub >/dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE questions (id int PRIMARY KEY, body text, dup int, views int NOT NULL DEFAULT 0);
INSERT INTO questions (id, body)
SELECT g, 'question number ' || g || ' about ' || md5(g::text) FROM generate_series(1, 300) g;
SELECT minhash_index_create('questions', 'id', 'body', threshold => 0.7);
CREATE TRIGGER questions_flag BEFORE INSERT OR UPDATE ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
INSERT INTO questions (id, body)
SELECT g, 'question number ' || (g - 300) || ' about ' || md5((g - 300)::text) || '?'
FROM generate_series(301, 340) g;
CREATE PUBLICATION everything FOR ALL TABLES;
SELECT pg_create_logical_replication_slot('sub', 'pgoutput');
-- the bug this guards against: UPDATE and DELETE refused for want of a replica identity
UPDATE questions SET views = views + 1 WHERE id <= 10;
UPDATE questions SET body = body || ' (edited)' WHERE id = 11;
DELETE FROM questions WHERE id = 12;
SQL

"$PG_BIN/pg_dump" --schema-only --no-publications -d pub | psql_q -d sub >/dev/null
psql_q -d sub >/dev/null <<SQL
CREATE SUBSCRIPTION everything
    CONNECTION 'host=$CLUSTER_DIR port=5432 dbname=pub user=postgres'
    PUBLICATION everything WITH (create_slot = false, slot_name = 'sub');
SQL

# What both sides must agree on: rows, flags, lookups; and the subscriber's index health.
state_sql="
SELECT count(*) || ' rows, flags ' || md5(coalesce(string_agg(id || '>' || dup, ',' ORDER BY id)
       FILTER (WHERE dup IS NOT NULL), '')) FROM questions;
SELECT 'similar ' || string_agg(id || ':' || round(similarity::numeric, 4), ',' ORDER BY id)
FROM minhash_similar('questions', 'question number 7 about ' || md5('7') || '!');
SELECT 'pairs ' || count(*) FROM minhash_duplicates('questions');
SELECT 'band rows ' || count(*) FROM questions_minhash_bands;
"
# wait_synced STEP: waits until the subscriber shows what the publisher shows, then checks it.
failed=0
wait_synced() {
    local expected got health
    expected=$(psql_q -d pub <<<"$state_sql")
    for _ in $(seq 1 120); do
        got=$(psql_q -d sub <<<"$state_sql" 2>/dev/null || true)
        [ "$got" = "$expected" ] && break
        sleep 0.5
    done
    health=$(psql_q -d sub -c "SELECT missing || '/' || orphaned FROM minhash_index_check('questions')")
    if [ "$got" != "$expected" ] || [ "$health" != "0/0" ]; then
        echo "replication: $1: FAILED (subscriber check $health)" >&2
        diff <(echo "$expected") <(echo "$got") >&2 || true
        failed=1
        return
    fi
    echo "replication: $1: ok, check 0/0, $(echo "$got" | head -1 | cut -d, -f1), $(echo "$got" | sed -n 3p)"
}

wait_synced "initial copy"

psql_q -d pub >/dev/null <<'SQL'
INSERT INTO questions (id, body)
SELECT g, 'question number ' || (g - 400) || ' about ' || md5((g - 400)::text) || '!!'
FROM generate_series(401, 450) g;
UPDATE questions SET body = 'a wholly new text for row ' || id WHERE id BETWEEN 20 AND 40;
UPDATE questions SET views = views + 1;
UPDATE questions SET id = id + 1000 WHERE id BETWEEN 50 AND 60;
DELETE FROM questions WHERE id BETWEEN 100 AND 150;
UPDATE questions SET dup = NULL WHERE id = 305;
SQL
wait_synced "after inserts, updates and deletes"

psql_q -d pub >/dev/null <<'SQL'
TRUNCATE questions;
INSERT INTO questions (id, body) VALUES (1, 'after the truncate'), (2, 'after the truncate!');
SQL
wait_synced "after a truncate"

psql_q -d sub -c 'SET client_min_messages = warning' -c 'DROP SUBSCRIPTION everything' >/dev/null
[ "$failed" -eq 0 ]
