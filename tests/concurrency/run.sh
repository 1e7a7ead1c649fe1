#!/usr/bin/env bash
# Concurrency test: several sessions insert, upsert, update (text, other columns and ids),
# delete and roll back at once on a table with a managed index; afterwards
# minhash_index_check must report 0 missing and 0 orphaned band rows.
# Usage: tests/concurrency/run.sh [seconds] (the extension must be installed).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
seconds="${1:-10}"

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-concurrency.XXXXXX)"
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE items (id bigint PRIMARY KEY, body text, tag text);
INSERT INTO items SELECT g, 'item ' || g || ' ' || md5(g::text) FROM generate_series(1, 3000) g;
\o /dev/null
SELECT minhash_index_create('items', 'id', 'body');
SQL

scripts=()
for f in insert upsert bulk update move delete rollback; do
    scripts+=(-f "tests/concurrency/$f.sql")
done
"$PG_BIN/pgbench" -n -d postgres -c 6 -j 2 -T "$seconds" "${scripts[@]}" > "$CLUSTER_DIR/pgbench.log" 2>&1 || {
    cat "$CLUSTER_DIR/pgbench.log"
    echo "concurrency: pgbench failed" >&2
    exit 1
}
grep -E '^number of (transactions actually processed|failed)' "$CLUSTER_DIR/pgbench.log" || true

read -r rows moved missing orphaned < <(psql -X -At -F ' ' -d postgres -c \
    "SELECT (SELECT count(*) FROM items), (SELECT count(*) FROM items WHERE id > 100000),
            c.missing, c.orphaned FROM minhash_index_check('items') c")
echo "concurrency: $rows rows ($moved moved to new ids) after ${seconds}s of 6 writers;" \
     "missing $missing, orphaned $orphaned"
[ "$missing" = 0 ] && [ "$orphaned" = 0 ]
