#!/usr/bin/env bash
# DDL race test: at each isolation level (READ COMMITTED, REPEATABLE READ, SERIALIZABLE), 8
# sessions insert, upsert, update, move, delete, roll back, and look up then insert, while
# another session rebuilds the index, drops it and creates it again, over and over. pgbench
# retries serialization failures and deadlocks of the writers; any other error fails the test,
# and so does any error of the DDL session. Afterwards minhash_index_check must report 0
# missing and 0 orphaned band rows.
# Usage: tests/ddl_race/run.sh [seconds per level] (the extension must be installed).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
seconds="${1:-10}"

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-ddl-race.XXXXXX)"
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE items (id bigint PRIMARY KEY, body text, tag text);
INSERT INTO items SELECT g, 'item ' || g || ' ' || md5(g::text) FROM generate_series(1, 3000) g;
\o /dev/null
SELECT minhash_index_create('items', 'id', 'body');
\o
-- a lookup finds no index while it is dropped and not yet created again
CREATE FUNCTION lookup(n bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT count(*) FROM minhash_similar('items', 'item ' || n || ' ' || md5(n::text)));
EXCEPTION WHEN undefined_object THEN
    RETURN NULL;
END $$;
SQL

scripts=()
for f in insert upsert bulk update move delete rollback; do
    scripts+=(-f "tests/concurrency/$f.sql")
done
scripts+=(-f tests/ddl_race/lookup_insert.sql@3)

status=0
for level in 'read committed' 'repeatable read' 'serializable'; do
    PGOPTIONS="-c default_transaction_isolation=${level// /\\ }" \
        "$PG_BIN/pgbench" -n -d postgres -c 8 -j 2 -T "$seconds" --max-tries=100000 "${scripts[@]}" \
        > "$CLUSTER_DIR/pgbench.log" 2>&1 &
    bench=$!
    rounds=0
    while kill -0 "$bench" 2>/dev/null; do
        psql -X -q -v ON_ERROR_STOP=1 -d postgres -o /dev/null \
            -c "SELECT minhash_index_rebuild('items')" \
            -c "SELECT minhash_index_drop('items')" \
            -c "SELECT pg_sleep(0.2)" \
            -c "SET client_min_messages = warning" \
            -c "SELECT minhash_index_create('items', 'id', 'body')" \
            > "$CLUSTER_DIR/ddl.log" 2>&1 || {
            cat "$CLUSTER_DIR/ddl.log"
            echo "ddl race ($level): the DDL session failed" >&2
            status=1
            break
        }
        rounds=$((rounds + 1))
        sleep 0.3
    done
    wait "$bench" || {
        grep -E 'error|ERROR|aborted' "$CLUSTER_DIR/pgbench.log" | head -20
        echo "ddl race ($level): pgbench failed" >&2
        exit 1
    }
    tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$CLUSTER_DIR/pgbench.log")
    retried=$(sed -n 's/^number of transactions retried: \([0-9]*\).*/\1/p' "$CLUSTER_DIR/pgbench.log")
    read -r rows missing orphaned < <(psql -X -At -F ' ' -d postgres -c \
        "SELECT (SELECT count(*) FROM items), c.missing, c.orphaned FROM minhash_index_check('items') c")
    echo "ddl race ($level): ${seconds}s of 8 writers, $tx transactions ($retried retried), $rounds" \
         "rounds of rebuild, drop and create; $rows rows, missing $missing, orphaned $orphaned"
    [ "$missing" = 0 ] && [ "$orphaned" = 0 ] || status=1
done
exit "$status"
