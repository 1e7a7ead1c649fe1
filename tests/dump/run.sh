#!/usr/bin/env bash
# pg_dump round trip: a database with a managed index is dumped and restored into a new
# database; the catalog row, band table and triggers come back and keep working.
# Usage: tests/dump/run.sh (the extension must be installed).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-dump.XXXXXX)"
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
CREATE DATABASE source;
CREATE DATABASE restored;
\c source
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE notes (id int PRIMARY KEY, body text);
INSERT INTO notes VALUES (1, 'a note worth keeping'), (2, 'a note worth keeping!'), (3, 'other');
\o /dev/null
SELECT minhash_index_create('notes', 'id', 'body', threshold => 0.7);
SQL
"$PG_BIN/pg_dump" -d source -f "$CLUSTER_DIR/dump.sql"
psql -X -q -v ON_ERROR_STOP=1 -d restored -f "$CLUSTER_DIR/dump.sql" >/dev/null
result=$(psql -X -q -At -v ON_ERROR_STOP=1 -d restored <<'SQL'
INSERT INTO notes VALUES (4, 'a note worth keeping?');
SELECT format('%s %s %s %s', i.threshold, c.missing, c.orphaned,
              (SELECT string_agg(id_a || '-' || id_b, ',') FROM minhash_duplicates('notes')))
FROM minhash_indexes i, minhash_index_check('notes') c;
SQL
)
echo "dump: restored threshold, missing, orphaned, pairs: $result"
[ "$result" = "0.7 0 0 1-2,1-4,2-4" ]
