#!/usr/bin/env bash
# The managed index on a real Citus cluster (a coordinator and two workers on this machine,
# scripts/citus.sh; an installed Citus, or one built from CITUS_SOURCE or ../shared/citus;
# PostgreSQL 15), against the same data in a plain table on the coordinator without a sketch
# store, as a Citus table has none (exits 77 when there is no Citus):
# - minhash_index_create on a distributed table (and on a reference table), kept exact through
#   INSERT, UPDATE, DELETE, COPY and TRUNCATE, by sequential and concurrent writers;
# - two indexes on one distributed table: both kept exact, and a call naming the table and a
#   duplicate trigger naming no index read the first made;
# - minhash_similar, minhash_matches, minhash_duplicates and minhash_clusters (bigint and uuid
#   keys, every mode) give exactly what they give on the plain table, in every call form
#   (texts from subqueries, CTEs, lateral joins, prepared statements in psql and psycopg,
#   lookups made on a worker); 5,500 copies of one text stream; a whole-table search on a
#   worker says to run it on the coordinator;
# - a table distributed by a tenant (key (tenant, id)): kept exact; every call across tenants
#   equals the plain table's, within a tenant (tenant => ...) the plain table's rows of that
#   tenant (k against brute force); the duplicate trigger flags within the tenant, rows of the
#   same INSERT, INSERT ... SELECT or COPY too; ids that repeat across tenants of one shard are
#   each kept on their own;
# - the duplicate trigger flags as on the plain table, but for near-duplicates written
#   concurrently (or by the same transaction) on another worker, as documented; it refuses
#   mode 'reject' (0A000);
# - an unprivileged role's trigger that names another owner's band table writes nothing;
# - shard moves (by logical replication during writes, and blocking) and splits keep the
#   index exact, and the band table's replica identity is its unique (key, id) B-tree on every
#   shard (minhash_index_rebuild gives one to a band table made by 0.2.0); a local table named like a shard is indexed as on plain PostgreSQL;
# - Citus's conversions of an indexed table (undistribute_table, alter_distributed_table,
#   citus_add_local_table_to_metadata, create_distributed_table) or of its band table are
#   refused, and the index stays as it was;
# - minhash_index_check says 0/0 throughout; minhash_index_drop and DROP TABLE leave no trace
#   on any node.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
source scripts/citus.sh

PORT="${CITUS_TEST_PORT:-5511}"
# (exit 77, as automake's skipped tests do, when this machine has no Citus and no source of one)
citus_install || { status=$?; [ "$status" = 2 ] && exit 77; exit "$status"; }
install_extension
trap citus_stop EXIT
citus_start "$(mktemp -d /tmp/pg_minhash-citus.XXXXXX)" "$PORT"
citus_psql 0 -qc "CREATE EXTENSION pg_minhash"
# Every index of the run, on Citus and plain tables alike, is of band table format FORMAT
# (CITUS_TEST_FORMAT, 1 or 2), so that their band rows compare one to one.
FORMAT="${CITUS_TEST_FORMAT:-1}"
citus_psql 0 -qc "ALTER DATABASE postgres SET pg_minhash.default_format = $FORMAT"
echo "band table format $FORMAT"

q() { citus_psql 0 -qAt "$@"; }

# A corpus with near-duplicates: 2,000 texts of 24 words from a 400-word vocabulary, and for
# every fourth one a copy with one or two words changed (the same on every run).
q <<'EOF'
CREATE FUNCTION corpus_text(i int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT string_agg('w' || ((hashtext(i::text || '/' || j) & 2147483647) % 400), ' ' ORDER BY j)
    FROM generate_series(1, 24) j
$$;
CREATE FUNCTION corpus(n int) RETURNS TABLE (id bigint, body text) LANGUAGE sql AS $$
    SELECT g, corpus_text(g) FROM generate_series(1, n) g
    UNION ALL
    SELECT n + g, regexp_replace(corpus_text(g), '^(\S+ \S+ \S+)', '\1 changed' || (g % 3))
    FROM generate_series(1, n, 4) g
$$;
CREATE FUNCTION check_eq(label text, got bigint, want bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF got IS DISTINCT FROM want THEN
        RAISE EXCEPTION '%: got %, want %', label, got, want;
    END IF;
    RAISE NOTICE 'ok: % (%)', label, got;
END $$;
-- The plain tables answer as their Citus twins do: without the sketch store that
-- minhash_index_create makes on a table of this node (a Citus table gets none), whose k
-- lookups are exact only down to similarity 0.2 (docs/internals.md, "The sketch store").
CREATE FUNCTION drop_sketch_store(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    store regclass;
BEGIN
    FOR store IN SELECT i.indexrelid::regclass FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                 JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = tbl AND a.amname = 'minhash_sketch' LOOP
        EXECUTE format('DROP INDEX %s', store);
    END LOOP;
    PERFORM check_eq(tbl || ': sketch store dropped', (SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = tbl AND a.amname = 'minhash_sketch'), 0);
END $$;

CREATE TABLE docs (id bigint PRIMARY KEY, body text, dup_of bigint);
SELECT create_distributed_table('docs', 'id', shard_count => 8);
CREATE TABLE docs_local (id bigint PRIMARY KEY, body text, dup_of bigint);
INSERT INTO docs (id, body) SELECT * FROM corpus(2000);
INSERT INTO docs_local (id, body) SELECT * FROM corpus(2000);
SELECT minhash_index_create('docs', 'id', 'body', threshold => 0.7);
SELECT minhash_index_create('docs_local', 'id', 'body', threshold => 0.7);
SELECT drop_sketch_store('docs_local');
EOF

check() { # check TABLE LABEL: the index of TABLE is exact
    q -c "SELECT check_eq('$2: missing', missing, 0), check_eq('$2: orphaned', orphaned, 0)
          FROM minhash_index_check('$1')" >/dev/null
}
check docs "after create"
echo "ok: created on a distributed table of 8 shards"

# The band table is a distributed table co-located with the table, with a shard on each worker.
q <<EOF
SELECT check_eq('band table co-located',
    (SELECT count(*) FROM pg_dist_partition p JOIN pg_dist_partition b ON b.colocationid = p.colocationid
     WHERE p.logicalrelid = 'docs'::regclass AND b.logicalrelid = 'docs_minhash_bands'::regclass), 1);
SELECT check_eq('a Citus table gets band table format $FORMAT',
    (SELECT format FROM minhash_indexes WHERE tbl = 'docs'::regclass), $FORMAT);
SELECT check_eq('band rows on the workers', (SELECT count(*) FROM docs_minhash_bands),
                (SELECT count(*) FROM docs_local_minhash_bands));
EOF
# Its replica identity, on the coordinator and on every shard, is its unique B-tree (of format
# 1 on (key, id), of format 2 on id), through which a shard move by logical replication finds
# each replayed row.
identity_check() { # identity_check LABEL
    q <<EOF >/dev/null
SELECT check_eq('$1: replica identity a unique B-tree', count(*), 1)
FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid
WHERE x.indrelid = 'docs_minhash_bands'::regclass AND x.indisreplident AND x.indisunique
  AND x.indnkeyatts = 3 - $FORMAT AND c.relreplident = 'i';
SELECT check_eq('$1: the same on every shard', count(*) FILTER (WHERE result = 'i|true'), count(*))
FROM run_command_on_shards('docs_minhash_bands',
    \$\$SELECT c.relreplident::text || '|' || bool_and(x.indisunique) FROM pg_class c
        JOIN pg_index x ON x.indrelid = c.oid AND x.indisreplident WHERE c.oid = '%s'::regclass
        GROUP BY c.relreplident\$\$);
EOF
}
identity_check "band table"

# Sequential writes of every kind, the same on both tables.
for t in docs docs_local; do
    q <<EOF
INSERT INTO $t (id, body) VALUES (5001, corpus_text(17)), (5002, 'a short one'), (5003, NULL), (5004, '');
UPDATE $t SET body = body || ' w1 w2' WHERE id % 7 = 0;
UPDATE $t SET body = NULL WHERE id % 97 = 0;
UPDATE $t SET dup_of = 0 WHERE id % 5 = 0;
DELETE FROM $t WHERE id % 11 = 0;
\copy $t (id, body) FROM program 'seq 6001 6050 | sed "s/\$/\twords of a copied row/"'
EOF
done
check docs "after writes"
q -c "CREATE TABLE scratch (id bigint PRIMARY KEY, body text)" \
  -c "SELECT create_distributed_table('scratch', 'id', shard_count => 4)" \
  -c "INSERT INTO scratch SELECT * FROM corpus(100)" \
  -c "SELECT minhash_index_create('scratch', 'id', 'body')" \
  -c "TRUNCATE scratch" >/dev/null
q -c "SELECT check_eq('truncate empties the band table', (SELECT count(*) FROM scratch_minhash_bands), 0)" >/dev/null
q -c "INSERT INTO scratch SELECT * FROM corpus(40)" >/dev/null
check scratch "after truncate and insert"
echo "ok: INSERT, UPDATE, DELETE, COPY and TRUNCATE keep the band table exact"

# Two indexes on one distributed table: the shards' sync triggers keep both exact; a call
# naming the table reads the first made, and so does a duplicate trigger that names no index,
# on the shards (whose trigger arguments list the indexes in that order). The second index's
# threshold of 0.99 would flag nothing here.
q -c "CREATE TABLE twice (id bigint PRIMARY KEY, body text, dup_of bigint)" \
  -c "SELECT create_distributed_table('twice', 'id', shard_count => 4)" \
  -c "INSERT INTO twice (id, body) SELECT * FROM corpus(200)" \
  -c "SELECT minhash_index_create('twice', 'id', 'body', threshold => 0.7)" \
  -c "SELECT minhash_index_create('twice', 'id', 'body', ngram => 3, threshold => 0.99)" >/dev/null
q <<'EOF'
SELECT check_eq('a call naming the table reads the first index',
    (SELECT count(*) FROM ((SELECT * FROM minhash_duplicates('twice') EXCEPT SELECT * FROM minhash_duplicates('twice_minhash_bands'))
                           UNION ALL (SELECT * FROM minhash_duplicates('twice_minhash_bands') EXCEPT SELECT * FROM minhash_duplicates('twice'))) x), 0);
SELECT check_eq('the first index finds pairs', (SELECT (count(*) > 10)::int FROM minhash_duplicates('twice')), 1);
EOF
q -c "SET citus.enable_unsafe_triggers = on" \
  -c "CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON twice FOR EACH ROW
      EXECUTE FUNCTION minhash_flag_duplicate('dup_of')" >/dev/null
q -c "INSERT INTO twice (id, body) VALUES (9001, corpus_text(21) || ' w3')" >/dev/null
q -c "SELECT check_eq('flagged through the first index on a shard', (SELECT dup_of FROM twice WHERE id = 9001), 21)" >/dev/null
check twice_minhash_bands "first of two indexes"
check twice_minhash_bands1 "second of two indexes"
q -c "SET citus.enable_unsafe_triggers = on" -c "DROP TABLE twice" >/dev/null
echo "ok: two indexes on a distributed table: calls naming it, and its duplicate trigger, read the first"

# Concurrent writers, each on its own ids, then the same statements on the plain table.
writer() { # writer TABLE N
    local i
    for i in $(seq 1 30); do
        echo "BEGIN;
INSERT INTO $1 (id, body) VALUES ($((20000 + $2 * 1000 + i)), corpus_text($((i * 13 + $2))));
UPDATE $1 SET body = corpus_text($((i + 300))) WHERE id = $((100 + $2 * 40 + i));
DELETE FROM $1 WHERE id = $((1000 + $2 * 40 + i));
COMMIT;"
    done
}
pids=()
for w in 1 2 3 4; do
    writer docs "$w" | citus_psql 0 -q >/dev/null &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for w in 1 2 3 4; do writer docs_local "$w" | q >/dev/null; done
check docs "after 4 concurrent writers"
echo "ok: 4 concurrent writers x 30 transactions"

# The query functions give what they give on the plain table.
q <<'EOF'
CREATE TEMP TABLE pairs_d AS SELECT * FROM minhash_duplicates('docs');
CREATE TEMP TABLE pairs_l AS SELECT * FROM minhash_duplicates('docs_local');
SELECT check_eq('pairs found', (SELECT count(*) FROM pairs_d), (SELECT count(*) FROM pairs_l));
SELECT check_eq('more than 400 pairs', (SELECT (count(*) > 400)::int FROM pairs_d), 1);
SELECT check_eq('duplicates equal (pairs and similarities)',
    (SELECT count(*) FROM ((TABLE pairs_d EXCEPT TABLE pairs_l) UNION ALL (TABLE pairs_l EXCEPT TABLE pairs_d)) x), 0);
SELECT check_eq('duplicates at 0.9 equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_duplicates('docs', 0.9) EXCEPT SELECT * FROM minhash_duplicates('docs_local', 0.9))
                           UNION ALL (SELECT * FROM minhash_duplicates('docs_local', 0.9) EXCEPT SELECT * FROM minhash_duplicates('docs', 0.9))) x), 0);
CREATE TEMP TABLE clusters_d AS SELECT * FROM minhash_clusters('docs');
CREATE TEMP TABLE clusters_l AS SELECT * FROM minhash_clusters('docs_local');
SELECT check_eq('clusters equal',
    (SELECT count(*) FROM ((TABLE clusters_d EXCEPT TABLE clusters_l) UNION ALL (TABLE clusters_l EXCEPT TABLE clusters_d)) x), 0);
SELECT check_eq('rows in clusters', (SELECT count(*) FROM clusters_d), (SELECT count(*) FROM clusters_l));
CREATE TEMP TABLE probes AS SELECT array_agg(corpus_text(g) || CASE WHEN g % 2 = 0 THEN ' w9' ELSE '' END ORDER BY g) AS texts
    FROM generate_series(1, 120, 3) g;
CREATE TEMP TABLE matches_d AS SELECT m.* FROM probes, minhash_matches('docs', probes.texts) m;
CREATE TEMP TABLE matches_l AS SELECT m.* FROM probes, minhash_matches('docs_local', probes.texts) m;
SELECT check_eq('matches equal',
    (SELECT count(*) FROM ((TABLE matches_d EXCEPT TABLE matches_l) UNION ALL (TABLE matches_l EXCEPT TABLE matches_d)) x), 0);
SELECT check_eq('matches find rows', (SELECT (count(*) >= 40)::int FROM matches_d), 1);
-- (600 texts: three batches of lookups; max_results per text; k and 0.5 look up text by text)
CREATE TEMP TABLE many AS SELECT array_agg(corpus_text(g) || CASE WHEN g % 2 = 0 THEN ' w9' ELSE '' END ORDER BY g) AS texts
    FROM generate_series(1, 600) g;
CREATE FUNCTION all_matches(tbl regclass) RETURNS TABLE (form int, probe int, id bigint, similarity float8)
LANGUAGE sql AS $$
    SELECT 1, m.* FROM many, minhash_matches(tbl, many.texts) m
    UNION ALL SELECT 2, m.* FROM many, minhash_matches(tbl, many.texts, max_results => 1) m
    UNION ALL SELECT 3, m.* FROM probes, minhash_matches(tbl, probes.texts, k => 3) m
    UNION ALL SELECT 4, m.* FROM probes, minhash_matches(tbl, probes.texts, 0.5) m
$$;
CREATE TEMP TABLE all_d AS SELECT * FROM all_matches('docs');
CREATE TEMP TABLE all_l AS SELECT * FROM all_matches('docs_local');
SELECT check_eq('matches of 600 texts, max_results, k and 0.5 equal',
    (SELECT count(*) FROM ((TABLE all_d EXCEPT ALL TABLE all_l) UNION ALL (TABLE all_l EXCEPT ALL TABLE all_d)) x), 0);
SELECT check_eq('each form finds rows', (SELECT count(DISTINCT form) FROM all_d), 4);
SELECT check_eq('similar equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_similar('docs', corpus_text(5)) EXCEPT SELECT * FROM minhash_similar('docs_local', corpus_text(5)))
                           UNION ALL (SELECT * FROM minhash_similar('docs_local', corpus_text(5)) EXCEPT SELECT * FROM minhash_similar('docs', corpus_text(5)))) x), 0);
SELECT check_eq('similar finds the copies', (SELECT count(*) FROM minhash_similar('docs', corpus_text(5))), 2);
-- below the index's threshold and the k most similar: the scan of the sketches, through Citus
CREATE TEMP TABLE low_d AS
SELECT g, s.* FROM generate_series(1, 40, 7) g, minhash_similar('docs', corpus_text(g), threshold => 0.5) s
UNION ALL SELECT -g, s.* FROM generate_series(1, 40, 7) g, minhash_similar('docs', corpus_text(g), k => 5) s;
CREATE TEMP TABLE low_l AS
SELECT g, s.* FROM generate_series(1, 40, 7) g, minhash_similar('docs_local', corpus_text(g), threshold => 0.5) s
UNION ALL SELECT -g, s.* FROM generate_series(1, 40, 7) g, minhash_similar('docs_local', corpus_text(g), k => 5) s;
SELECT check_eq('threshold 0.5 and k => 5 equal',
    (SELECT count(*) FROM ((TABLE low_d EXCEPT TABLE low_l) UNION ALL (TABLE low_l EXCEPT TABLE low_d)) x), 0);
SELECT check_eq('k => 5 rows', (SELECT count(*) FROM low_d WHERE g < 0), 30);
-- among the rows a WHERE clause keeps (ids given as an array, verified row by row), and the
-- typed form with ids as text: the plain table's rows, all from the set
CREATE TEMP TABLE among_d AS
SELECT g, s.* FROM generate_series(1, 40, 7) g,
    minhash_similar('docs', corpus_text(g), k => 5, among => ARRAY(SELECT id FROM docs_local WHERE id % 3 = 0)) s
UNION ALL SELECT -g, s.* FROM generate_series(1, 40, 7) g,
    minhash_similar('docs', corpus_text(g), NULL::bigint, k => 5, among => ARRAY(SELECT id::text FROM docs_local WHERE id % 3 = 0)) s;
CREATE TEMP TABLE among_l AS
SELECT g, s.* FROM generate_series(1, 40, 7) g,
    minhash_similar('docs_local', corpus_text(g), k => 5, among => ARRAY(SELECT id FROM docs_local WHERE id % 3 = 0)) s
UNION ALL SELECT -g, s.* FROM generate_series(1, 40, 7) g,
    minhash_similar('docs_local', corpus_text(g), NULL::bigint, k => 5, among => ARRAY(SELECT id::text FROM docs_local WHERE id % 3 = 0)) s;
SELECT check_eq('k => 5 among equal',
    (SELECT count(*) FROM ((TABLE among_d EXCEPT TABLE among_l) UNION ALL (TABLE among_l EXCEPT TABLE among_d)) x), 0);
SELECT check_eq('k => 5 among rows, all in the set', (SELECT count(*) FROM among_d WHERE id % 3 = 0), 60);
EOF
echo "ok: similar (also at 0.5, with k and among), matches, duplicates and clusters equal the plain table's"

# Every call form as on the plain table: texts given as a subquery of the distributed table
# (Citus sends such a statement whole to the row's worker), a CTE, a lateral join, prepared
# parameters, ids from a subquery; a lookup made on a worker; a whole-table search on a worker
# says where to run it.
q <<'EOF'
CREATE TEMP TABLE forms_d AS
SELECT 'subquery' AS form, s.* FROM minhash_similar('docs', (SELECT body FROM docs WHERE id = 9), 0.6) s
UNION ALL SELECT 'cte', s.* FROM (WITH t AS (SELECT body FROM docs WHERE id = 13) SELECT s.* FROM t, minhash_similar('docs', t.body) s) s
UNION ALL SELECT 'lateral', s.* FROM docs d, minhash_similar('docs', d.body, k => 3) s WHERE d.id = 17
UNION ALL SELECT 'matches', m.id, m.similarity FROM minhash_matches('docs', ARRAY(SELECT body FROM docs WHERE id IN (21, 25) ORDER BY id)) m;
CREATE TEMP TABLE forms_l AS
SELECT 'subquery' AS form, s.* FROM minhash_similar('docs_local', (SELECT body FROM docs_local WHERE id = 9), 0.6) s
UNION ALL SELECT 'cte', s.* FROM (WITH t AS (SELECT body FROM docs_local WHERE id = 13) SELECT s.* FROM t, minhash_similar('docs_local', t.body) s) s
UNION ALL SELECT 'lateral', s.* FROM docs_local d, minhash_similar('docs_local', d.body, k => 3) s WHERE d.id = 17
UNION ALL SELECT 'matches', m.id, m.similarity FROM minhash_matches('docs_local', ARRAY(SELECT body FROM docs_local WHERE id IN (21, 25) ORDER BY id)) m;
SELECT check_eq('call forms equal',
    (SELECT count(*) FROM ((TABLE forms_d EXCEPT TABLE forms_l) UNION ALL (TABLE forms_l EXCEPT TABLE forms_d)) x), 0);
SELECT check_eq('call forms find rows', (SELECT count(DISTINCT form) FROM forms_d), 4);
-- (a lateral call over many rows of a distributed table is refused by Citus, "cannot push down
-- this subquery": the rows go through a materialized CTE, docs/citus.md)
SELECT check_eq('lateral over many rows through a CTE equal',
    (SELECT count(*) FROM ((WITH d AS MATERIALIZED (SELECT id, body FROM docs WHERE id <= 40)
                            SELECT d.id, s.* FROM d, minhash_similar('docs', d.body, 0.7) s
                            EXCEPT SELECT d.id, s.* FROM docs_local d, minhash_similar('docs_local', d.body, 0.7) s WHERE d.id <= 40)
                           UNION ALL (SELECT d.id, s.* FROM docs_local d, minhash_similar('docs_local', d.body, 0.7) s WHERE d.id <= 40
                            EXCEPT (WITH d AS MATERIALIZED (SELECT id, body FROM docs WHERE id <= 40)
                                    SELECT d.id, s.* FROM d, minhash_similar('docs', d.body, 0.7) s))) x), 0);
EOF
probe=$(q -c "SELECT body FROM docs_local WHERE id = 29")
found() { # found NODE TABLE: the rows similar to $probe, looked up on NODE
    citus_psql "$1" -qAt -v probe="$probe" <<<"SELECT string_agg(id || ':' || similarity, ',' ORDER BY id) FROM minhash_similar('$2', :'probe')"
}
want=$(found 0 docs_local)
[ -n "$want" ] || { echo "the probe finds no row" >&2; exit 1; }
for n in 1 2; do
    got=$(found "$n" docs)
    [ "$got" = "$want" ] || { echo "a lookup on worker $n: $got, the plain table's: $want" >&2; exit 1; }
done
# prepared, run six times (the sixth with PostgreSQL's generic plan), as a driver does
prepared() { # prepared TABLE
    { echo "PREPARE near(text, float8) AS SELECT string_agg(id || ':' || similarity, ',' ORDER BY id) FROM minhash_similar('$1', \$1, \$2);"
      for _ in 1 2 3 4 5 6; do echo "EXECUTE near('$(sed "s/'/''/g" <<<"$probe")', 0.6);"; done; } | q | tail -1
}
got=$(prepared docs) want=$(prepared docs_local)
[ -n "$want" ] && [ "$got" = "$want" ] || { echo "prepared lookups: $got, the plain table's: $want" >&2; exit 1; }
# and through psycopg's prepared statements, as an application makes them
venv=$(mktemp -d /tmp/pg_minhash-psycopg.XXXXXX)
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "psycopg[binary]==3.3.9"
"$venv/bin/python" tests/citus/psycopg_forms.py "host=$CITUS_DIR port=$CITUS_PORT user=postgres dbname=postgres"
rm -rf "$venv"
out=$(citus_psql 1 -qAt -v VERBOSITY=verbose -c "SELECT count(*) FROM minhash_duplicates('docs')" 2>&1 || true)
grep -q "ERROR:  0A000: this node has no minhash catalog" <<<"$out" && grep -q "Run this call on the coordinator" <<<"$out" \
    || { echo "a whole-table search on a worker: $out" >&2; exit 1; }
echo "ok: call forms (subquery, CTE, lateral, prepared in psql and psycopg, matches of a subquery) and lookups on a worker equal the plain table's; a search on a worker says to run it on the coordinator (0A000)"

# Rebuild and stats, as on the plain table; the check sees band rows deleted behind its back.
q <<'EOF2'
DELETE FROM docs_minhash_bands WHERE id = 3;
SELECT check_eq('check sees missing band rows', (SELECT missing FROM minhash_index_check('docs')),
                (SELECT count(*) FROM docs_local_minhash_bands WHERE id = 3)
                * (SELECT CASE WHEN format = 2 THEN bands ELSE 1 END FROM minhash_indexes
                   WHERE tbl = 'docs_local'::regclass));
SELECT check_eq('rebuild reads every row', minhash_index_rebuild('docs'), (SELECT count(*) FROM docs));
SELECT check_eq('stats: rows indexed', (SELECT rows_indexed FROM minhash_index_stats('docs')),
                (SELECT rows_indexed FROM minhash_index_stats('docs_local')));
SELECT check_eq('stats: distinct buckets', (SELECT distinct_buckets FROM minhash_index_stats('docs')),
                (SELECT distinct_buckets FROM minhash_index_stats('docs_local')));
EOF2
check docs "after rebuild"
echo "ok: rebuild and stats"

# A lookup's plan: Citus runs it on every shard (the band table's index on each).
key_column=$([ "$FORMAT" = 1 ] && echo key || echo key1)
q -c "EXPLAIN (COSTS OFF) SELECT b.id, b.sketch1, b.sketch2 FROM docs_minhash_bands b WHERE b.$key_column = ANY ('{1,2}'::int8[])" \
    | grep -q "Task Count: 8"
echo "ok: a lookup's band query runs on all 8 shards"

# uuid keys: typed duplicates and clusters equal the plain table's.
q <<'EOF'
CREATE TABLE udocs (id uuid PRIMARY KEY, body text);
SELECT create_distributed_table('udocs', 'id', shard_count => 4);
CREATE TABLE udocs_local (id uuid PRIMARY KEY, body text);
INSERT INTO udocs SELECT md5(id::text)::uuid, body FROM corpus(400);
INSERT INTO udocs_local SELECT * FROM udocs;
SELECT minhash_index_create('udocs', 'id', 'body', threshold => 0.7);
SELECT minhash_index_create('udocs_local', 'id', 'body', threshold => 0.7);
SELECT drop_sketch_store('udocs_local');
SELECT check_eq('uuid duplicates equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_duplicates('udocs', NULL::uuid) EXCEPT SELECT * FROM minhash_duplicates('udocs_local', NULL::uuid))
                           UNION ALL (SELECT * FROM minhash_duplicates('udocs_local', NULL::uuid) EXCEPT SELECT * FROM minhash_duplicates('udocs', NULL::uuid))) x), 0);
SELECT check_eq('uuid duplicates found', (SELECT count(*) FROM minhash_duplicates('udocs', NULL::uuid)), (SELECT count(*) FROM minhash_duplicates('udocs_local', NULL::uuid)));
SELECT check_eq('uuid matches equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_matches('udocs', ARRAY[corpus_text(9), corpus_text(10), NULL], NULL::uuid)
                            EXCEPT SELECT * FROM minhash_matches('udocs_local', ARRAY[corpus_text(9), corpus_text(10), NULL], NULL::uuid))
                           UNION ALL (SELECT * FROM minhash_matches('udocs_local', ARRAY[corpus_text(9), corpus_text(10), NULL], NULL::uuid)
                            EXCEPT SELECT * FROM minhash_matches('udocs', ARRAY[corpus_text(9), corpus_text(10), NULL], NULL::uuid))) x), 0);
SELECT check_eq('uuid matches found', (SELECT (count(*) >= 2)::int FROM minhash_matches('udocs', ARRAY[corpus_text(9), corpus_text(10), NULL], NULL::uuid)), 1);
SELECT check_eq('uuid similar equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_similar('udocs', corpus_text(9), NULL::uuid) EXCEPT SELECT * FROM minhash_similar('udocs_local', corpus_text(9), NULL::uuid))
                           UNION ALL (SELECT * FROM minhash_similar('udocs_local', corpus_text(9), NULL::uuid) EXCEPT SELECT * FROM minhash_similar('udocs', corpus_text(9), NULL::uuid))) x), 0);
EOF
expect_error() { # expect_error SQLSTATE SQL...
    local state="$1" out
    shift
    out=$(q -v VERBOSITY=verbose "$@" 2>&1 || true)
    grep -q "ERROR:  $state:" <<<"$out" || { echo "expected $state, got: $out" >&2; exit 1; }
}
q <<'EOF'
SELECT check_eq('uuid clusters equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_clusters('udocs', NULL::uuid) EXCEPT SELECT * FROM minhash_clusters('udocs_local', NULL::uuid))
                           UNION ALL (SELECT * FROM minhash_clusters('udocs_local', NULL::uuid) EXCEPT SELECT * FROM minhash_clusters('udocs', NULL::uuid))) x), 0);
SELECT check_eq('uuid clusters found', (SELECT (count(*) > 100)::int FROM minhash_clusters('udocs', NULL::uuid)), 1);
SELECT check_eq('representative clusters equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_clusters('docs', mode => 'representative', priority => 'length(body) DESC')
                            EXCEPT SELECT * FROM minhash_clusters('docs_local', mode => 'representative', priority => 'length(body) DESC'))
                           UNION ALL (SELECT * FROM minhash_clusters('docs_local', mode => 'representative', priority => 'length(body) DESC')
                            EXCEPT SELECT * FROM minhash_clusters('docs', mode => 'representative', priority => 'length(body) DESC'))) x), 0);
EOF
echo "ok: typed (uuid) clusters and mode 'representative' equal the plain table's"
echo "ok: uuid keys"

# A table distributed by a tenant (the usual multi-tenant shape: key (tenant, id)): indexed, its
# band table distributed by its tenant column beside it; across tenants every call gives the
# plain table's results (ids unique across the table here), and within a tenant (tenant => ...)
# the plain table's rows of that tenant: lookups, k among the tenant's rows, matches, pairs and
# clusters; the duplicate trigger checks a row within its tenant only. Then ids that repeat
# across tenants of one shard: each row is looked up, changed and deleted on its own.
expect_error 42P10 -c "CREATE TABLE bykey (id bigint, body text, k int, PRIMARY KEY (k, id, body))" \
    -c "SELECT create_distributed_table('bykey', 'k')" -c "SELECT minhash_index_create('bykey', 'id', 'body')"
q -v format="$FORMAT" <<'EOF'
CREATE FUNCTION tenant_of(id bigint) RETURNS int LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN id <= 1200 OR id % 8 < 4 THEN (id % 1200) % 12 ELSE (id % 1200 + 5) % 12 END::int
$$;
CREATE TABLE tdocs (tenant int, id bigint, body text, dup_of bigint, PRIMARY KEY (tenant, id));
SELECT create_distributed_table('tdocs', 'tenant', shard_count => 8);
CREATE TABLE tdocs_local (tenant int, id bigint PRIMARY KEY, body text, dup_of bigint);
INSERT INTO tdocs (tenant, id, body) SELECT tenant_of(id), id, body FROM corpus(1200);
INSERT INTO tdocs_local (tenant, id, body) SELECT tenant_of(id), id, body FROM corpus(1200);
SELECT minhash_index_create('tdocs', 'id', 'body', threshold => 0.7);
SELECT minhash_index_create('tdocs_local', 'id', 'body', threshold => 0.7);
SELECT drop_sketch_store('tdocs_local');
SELECT check_eq('tenant: band table distributed by its tenant column, co-located',
    (SELECT count(*) FROM pg_dist_partition p JOIN pg_dist_partition b ON b.colocationid = p.colocationid
     WHERE p.logicalrelid = 'tdocs'::regclass AND b.logicalrelid = 'tdocs_minhash_bands'::regclass
       AND column_to_column_name(b.logicalrelid, b.partkey) = 'tenant'), 1);
SELECT check_eq('tenant: replica identity a unique B-tree with the tenant', count(*), 1)
FROM pg_index x WHERE x.indrelid = 'tdocs_minhash_bands'::regclass AND x.indisreplident AND x.indisunique
  AND x.indnkeyatts = 4 - :format;
EOF
check tdocs "tenant table: after create"
for t in tdocs tdocs_local; do
    q <<EOF
INSERT INTO $t (tenant, id, body) VALUES (tenant_of(5001), 5001, corpus_text(17)), (tenant_of(5002), 5002, NULL);
UPDATE $t SET body = body || ' w1 w2' WHERE id % 7 = 0;
DELETE FROM $t WHERE id % 11 = 0;
\copy $t (tenant, id, body) FROM program 'for i in \$(seq 6001 6050); do printf "%s\t%s\twords of a copied row\n" \$((i % 12)) \$i; done'
EOF
done
check tdocs "tenant table: after writes"
q <<'EOF'
-- across tenants
CREATE TEMP TABLE tpairs_d AS SELECT * FROM minhash_duplicates('tdocs');
CREATE TEMP TABLE tpairs_l AS SELECT * FROM minhash_duplicates('tdocs_local');
SELECT check_eq('tenant: duplicates across tenants equal',
    (SELECT count(*) FROM ((TABLE tpairs_d EXCEPT TABLE tpairs_l) UNION ALL (TABLE tpairs_l EXCEPT TABLE tpairs_d)) x), 0);
CREATE TEMP TABLE tpairs_t AS SELECT a.tenant AS ta, b.tenant AS tb, p.* FROM tpairs_l p
    JOIN tdocs_local a ON a.id = p.id_a JOIN tdocs_local b ON b.id = p.id_b;
SELECT check_eq('tenant: pairs within and across tenants',
    (SELECT (count(*) FILTER (WHERE ta = tb) > 20 AND count(*) FILTER (WHERE ta <> tb) > 20)::int FROM tpairs_t), 1);
SELECT check_eq('tenant: clusters across tenants equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_clusters('tdocs') EXCEPT SELECT * FROM minhash_clusters('tdocs_local'))
                           UNION ALL (SELECT * FROM minhash_clusters('tdocs_local') EXCEPT SELECT * FROM minhash_clusters('tdocs'))) x), 0);
CREATE TEMP TABLE tsim_d AS SELECT g, s.* FROM generate_series(1, 60, 7) g, minhash_similar('tdocs', corpus_text(g), 0.6) s;
CREATE TEMP TABLE tsim_l AS SELECT g, s.* FROM generate_series(1, 60, 7) g, minhash_similar('tdocs_local', corpus_text(g), 0.6) s;
SELECT check_eq('tenant: similar across tenants equal',
    (SELECT count(*) FROM ((TABLE tsim_d EXCEPT TABLE tsim_l) UNION ALL (TABLE tsim_l EXCEPT TABLE tsim_d)) x), 0);
-- within each tenant: the plain table's rows of that tenant
CREATE TEMP TABLE tper_d AS
SELECT 'pairs' AS form, t, p.id_a, p.id_b, p.similarity FROM generate_series(0, 11) t, minhash_duplicates('tdocs', tenant => t::text) p
UNION ALL SELECT 'similar', t, g, s.id, s.similarity FROM generate_series(0, 11) t, generate_series(1, 60, 7) g,
    minhash_similar('tdocs', corpus_text(g), 0.6, tenant => t::text) s
UNION ALL SELECT 'matches', t, m.probe, m.id, m.similarity FROM generate_series(0, 11) t,
    minhash_matches('tdocs', ARRAY(SELECT corpus_text(g) FROM generate_series(1, 60, 7) g ORDER BY g), 0.6, tenant => t::text) m;
CREATE TEMP TABLE tper_l AS
SELECT 'pairs' AS form, p.ta AS t, p.id_a, p.id_b, p.similarity FROM tpairs_t p WHERE p.ta = p.tb
UNION ALL SELECT 'similar', l.tenant, s.g, s.id, s.similarity FROM tsim_l s JOIN tdocs_local l USING (id)
UNION ALL SELECT 'matches', l.tenant, (s.g + 6) / 7, s.id, s.similarity FROM tsim_l s JOIN tdocs_local l USING (id);
SELECT check_eq('tenant: within each tenant, pairs, similar and matches equal the plain table''s rows of the tenant',
    (SELECT count(*) FROM ((TABLE tper_d EXCEPT ALL TABLE tper_l) UNION ALL (TABLE tper_l EXCEPT ALL TABLE tper_d)) x), 0);
SELECT check_eq('tenant: each form finds rows', (SELECT count(DISTINCT form) FROM tper_d), 3);
-- k => 3 within each tenant (band keys, then a scan of the tenant's sketches, with the scan's
-- guarantee: a row at the bar is missed with probability at most 1%; here the third row is at
-- a similarity of about 0.1) against brute force over the tenant's rows (among, verified row
-- by row on the plain table): every row of the tenant with its exact similarity, both forms
-- alike, and at least 97% of brute force's rows
CREATE TEMP TABLE tk_d AS SELECT t, g, s.* FROM generate_series(0, 11) t, generate_series(1, 60, 7) g,
    minhash_similar('tdocs', corpus_text(g), k => 3, tenant => t::text) s;
CREATE TEMP TABLE tk_l AS SELECT t, g, s.* FROM generate_series(0, 11) t, generate_series(1, 60, 7) g,
    minhash_similar('tdocs_local', corpus_text(g), k => 3, among => ARRAY(SELECT id FROM tdocs_local WHERE tenant = t)) s;
SELECT check_eq('tenant: k => 3 in each tenant', (SELECT count(*) FROM tk_d), 12 * 9 * 3);
SELECT check_eq('tenant: k => 3 typed as untyped',
    (SELECT count(*) FROM ((SELECT t, g, s.* FROM generate_series(0, 11) t, generate_series(1, 60, 7) g,
                                   minhash_similar('tdocs', corpus_text(g), NULL::bigint, k => 3, tenant => t::text) s
                            EXCEPT TABLE tk_d)
                           UNION ALL (TABLE tk_d EXCEPT SELECT t, g, s.* FROM generate_series(0, 11) t, generate_series(1, 60, 7) g,
                                   minhash_similar('tdocs', corpus_text(g), NULL::bigint, k => 3, tenant => t::text) s)) x), 0);
SELECT check_eq('tenant: k => 3 rows of the tenant, exact similarities',
    (SELECT count(*) FROM tk_d k JOIN tdocs_local l USING (id)
     WHERE l.tenant <> k.t OR abs(k.similarity - jaccard(l.body, corpus_text(k.g))) > 1e-12), 0);
SELECT check_eq('tenant: k => 3 finds at least 97% of brute force''s rows (found of 324: '
                || (SELECT count(*) FROM tk_l JOIN tk_d USING (t, g, id)) || ')',
    (SELECT (100 * count(*) >= 97 * (SELECT count(*) FROM tk_l))::int FROM tk_l JOIN tk_d USING (t, g, id)), 1);
-- clusters of one tenant: the connected components of its pairs
WITH clu AS (SELECT g.tn, c.* FROM generate_series(0, 11) g(tn), minhash_clusters('tdocs', tenant => g.tn::text) c),
     comp AS (SELECT g.tn, c.* FROM generate_series(0, 11) g(tn),
              minhash_components(ARRAY(SELECT p.id_a FROM tper_l p WHERE p.form = 'pairs' AND p.t = g.tn ORDER BY p.id_a, p.id_b),
                                 ARRAY(SELECT p.id_b FROM tper_l p WHERE p.form = 'pairs' AND p.t = g.tn ORDER BY p.id_a, p.id_b)) c)
SELECT check_eq('tenant: clusters within each tenant equal the components of its pairs',
    (SELECT count(*) FROM ((TABLE clu EXCEPT TABLE comp) UNION ALL (TABLE comp EXCEPT TABLE clu)) x), 0);
EOF
# A lookup within a tenant reads one shard.
q -c "EXPLAIN (COSTS OFF) SELECT b.id FROM tdocs_minhash_bands b WHERE b.$key_column = ANY ('{1,2}'::int8[]) AND b.tenant = 3" \
    | grep -q "Task Count: 1"
expect_error 22023 -c "SELECT * FROM minhash_similar('docs', 'some text', tenant => '1')"
expect_error 22023 -c "SELECT * FROM minhash_duplicates('docs', tenant => '1')"
expect_error 22P02 -c "SELECT * FROM minhash_similar('tdocs', 'some text', tenant => 'x')"
echo "ok: a table distributed by a tenant: created, kept exact, and across and within tenants equal to the plain table's rows (similar, k, matches, duplicates, clusters); a lookup within a tenant reads one shard"

# The duplicate trigger on a table distributed by a tenant checks a row against its tenant's
# rows: each flag is the smallest id of the rows of the same tenant written before it that the
# plain table finds at 0.7 (rows of other tenants never); 'reject' is refused.
q -c "SET citus.enable_unsafe_triggers = on" \
  -c "CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON tdocs FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_of')" >/dev/null
for i in $(seq 1 40); do
    j=$((i * 29 % 1200 + 1))
    echo "INSERT INTO tdocs (tenant, id, body) VALUES ($(( i % 3 == 0 ? (j + 1) % 12 : j % 12 )), $((7000 + i)), corpus_text($j) || ' w7');"
done | q >/dev/null
q -c "INSERT INTO tdocs_local SELECT * FROM tdocs WHERE id > 7000" >/dev/null
q <<'EOF'
SELECT check_eq('tenant: flags are the plain table''s within the tenant',
    (SELECT count(*) FROM tdocs_local x
     WHERE x.id > 7000 AND x.dup_of IS DISTINCT FROM (
         SELECT min(s.id) FROM minhash_similar('tdocs_local', x.body, 0.7,
             among => ARRAY(SELECT l.id FROM tdocs_local l WHERE l.tenant = x.tenant AND l.id < x.id)) s)), 0);
SELECT check_eq('tenant: rows flagged', (SELECT (count(dup_of) >= 10)::int FROM tdocs WHERE id > 7000), 1);
SELECT check_eq('tenant: no flag names a row of another tenant',
    (SELECT count(*) FROM tdocs x WHERE x.dup_of IS NOT NULL
       AND NOT EXISTS (SELECT FROM tdocs y WHERE y.tenant = x.tenant AND y.id = x.dup_of)), 0);
EOF
# Rows one statement inserts within a tenant see each other, as on one node (the check writes
# a row's band rows before it looks, and the shard's later rows read them on the same node):
# INSERT ... SELECT, multi-row VALUES and COPY; a near-duplicate in another tenant is not a
# duplicate.
q <<'EOF'
INSERT INTO tdocs (tenant, id, body) SELECT 5, 8000 + g, corpus_text(20000 + g / 3) || repeat(' w8', g % 3) FROM generate_series(0, 29) g;
INSERT INTO tdocs (tenant, id, body) VALUES (6, 8100, corpus_text(20100)), (6, 8101, corpus_text(20100) || ' w8'), (7, 8102, corpus_text(20100));
SELECT check_eq('tenant: INSERT ... SELECT: rows flagged as duplicates of the statement''s earlier rows',
    (SELECT count(*) FROM tdocs WHERE id BETWEEN 8000 AND 8029
       AND dup_of IS NOT DISTINCT FROM CASE WHEN (id - 8000) % 3 <> 0 THEN id - (id - 8000) % 3 END), 30);
SELECT check_eq('tenant: multi-row VALUES: flagged within the tenant only',
    (SELECT string_agg(id || ':' || coalesce(dup_of::text, '-'), ' ' ORDER BY id) = '8100:- 8101:8100 8102:-'
     FROM tdocs WHERE id BETWEEN 8100 AND 8102)::int, 1);
EOF
# (an UPDATE makes no claim, docs/citus.md: two rows one UPDATE makes near-duplicates are not
# flagged; a row updated to a near-duplicate of another is)
q -c "UPDATE tdocs SET body = corpus_text(20300) || repeat(' w8', (id % 3)::int), dup_of = NULL WHERE tenant = 5 AND id IN (8000, 8001)" \
  -c "SELECT check_eq('tenant: multi-row UPDATE: its rows do not see each other',
          (SELECT count(*) FROM tdocs WHERE tenant = 5 AND id IN (8000, 8001) AND dup_of IS NOT NULL), 0)" \
  -c "UPDATE tdocs SET body = corpus_text(20300) || ' w9 w9 w9' WHERE tenant = 5 AND id = 8003" \
  -c "SELECT check_eq('tenant: a row updated to a near-duplicate is flagged',
          (SELECT dup_of FROM tdocs WHERE tenant = 5 AND id = 8003), 8000)" >/dev/null
# An INSERT of a key that exists fails on the table's key, not on the band table's; an upsert
# to a near-duplicate text works.
out=$(q -c "INSERT INTO tdocs (tenant, id, body) VALUES (5, 8004, corpus_text(20001))" 2>&1 || true)
grep -q 'duplicate key value violates unique constraint "tdocs_pkey' <<<"$out" \
    || { echo "an INSERT of an existing key: $out" >&2; exit 1; }
q -c "INSERT INTO tdocs (tenant, id, body) VALUES (5, 8004, corpus_text(20001) || ' w9'), (5, 8300, corpus_text(20001) || ' w9')
      ON CONFLICT (tenant, id) DO UPDATE SET body = EXCLUDED.body" \
  -c "SELECT check_eq('tenant: upsert: the new row flagged as a duplicate of the row the statement updated',
          (SELECT dup_of FROM tdocs WHERE tenant = 5 AND id = 8300), 8004)" >/dev/null
q -c "\copy tdocs (tenant, id, body) FROM program 'for i in 1 2 3; do printf \"8\t%s\tone text copied three times\n\" \$((8200 + i)); done'" >/dev/null
q -c "SELECT check_eq('tenant: COPY: rows flagged as duplicates of the first',
          (SELECT count(*) FROM tdocs WHERE id IN (8202, 8203) AND dup_of = 8201), 2)" >/dev/null
expect_error 0A000 -c "BEGIN" -c "SET LOCAL citus.enable_unsafe_triggers = on" \
    -c "CREATE TRIGGER rej BEFORE INSERT ON tdocs FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_of', 0.7, 'reject')" \
    -c "INSERT INTO tdocs (tenant, id, body) VALUES (1, 7999, 'a text to reject')"
check tdocs "tenant table: after flagged inserts"
echo "ok: the duplicate trigger flags within the tenant, as the plain table's rows of the tenant, rows one INSERT ... SELECT, VALUES or COPY wrote too (not an UPDATE's, as documented), upserts; 'reject' refused (0A000)"

# Ids that repeat across two tenants of one shard: each row is found within its tenant, and
# changing or deleting one leaves the other's band rows alone.
read -r ta tb < <(q -F ' ' -c "SELECT a.t, b.t FROM generate_series(100, 200) a(t), generate_series(100, 200) b(t)
    WHERE a.t < b.t AND get_shard_id_for_distribution_column('tdocs', a.t) = get_shard_id_for_distribution_column('tdocs', b.t)
    ORDER BY 1, 2 LIMIT 1")
q <<EOF
INSERT INTO tdocs (tenant, id, body) VALUES ($ta, 1, corpus_text(9001)), ($tb, 1, corpus_text(9001) || ' w5');
SELECT check_eq('repeated id: found within each tenant',
    (SELECT count(*) FROM minhash_similar('tdocs', corpus_text(9001), 0.99, tenant => '$ta'))
    + (SELECT count(*) FROM minhash_similar('tdocs', corpus_text(9001) || ' w5', 0.99, tenant => '$tb')), 2);
UPDATE tdocs SET body = corpus_text(9002) WHERE tenant = $ta AND id = 1;
DELETE FROM tdocs WHERE tenant = $ta AND id = 1;
SELECT check_eq('repeated id: the other tenant''s row still found',
    (SELECT count(*) FROM minhash_similar('tdocs', corpus_text(9001), 0.9, tenant => '$tb')), 1);
-- one statement writing the same id and text in both tenants, one row skipped (its key exists):
-- each check's band rows are its own tenant's (claims are by tenant)
INSERT INTO tdocs (tenant, id, body) VALUES ($ta, 1, corpus_text(9001) || ' w5'), ($tb, 1, corpus_text(9001) || ' w5')
    ON CONFLICT DO NOTHING;
SELECT check_eq('repeated id: the row written in one statement with its skipped twin is found',
    (SELECT count(*) FROM minhash_similar('tdocs', corpus_text(9001) || ' w5', 0.99, tenant => '$ta')), 1);
-- an upsert that updates one tenant's row and inserts the other's, of near-duplicate texts
DELETE FROM tdocs WHERE tenant = $ta AND id = 1;
INSERT INTO tdocs (tenant, id, body) VALUES ($tb, 1, corpus_text(9003)), ($ta, 1, corpus_text(9003) || ' w5')
    ON CONFLICT (tenant, id) DO UPDATE SET body = EXCLUDED.body;
SELECT check_eq('stats: rows indexed, ids repeated across tenants counted per tenant',
    (SELECT rows_indexed FROM minhash_index_stats('tdocs')),
    (SELECT count(*) FROM tdocs WHERE body IS NOT NULL AND body <> ''));
EOF
check tdocs "tenant table: ids repeated across tenants of one shard"
echo "ok: ids repeated across tenants of one shard: found, changed, deleted and claimed each on its own; stats count them apart"

# A shard whose tenant column its owner altered on a worker (Citus lets a session change a
# shard by hand): a write there is refused (42804), nothing is read as the wrong type.
q -c "CREATE TABLE tbroken (tenant text, id bigint, body text, PRIMARY KEY (tenant, id))" \
  -c "SELECT create_distributed_table('tbroken', 'tenant', shard_count => 2)" \
  -c "SELECT minhash_index_create('tbroken', 'id', 'body')" >/dev/null
read -r bnode bshard < <(q -F ' ' -c "SELECT p.nodeport - $CITUS_PORT, 'tbroken_' || s.shardid FROM pg_dist_shard s
    JOIN pg_dist_shard_placement p USING (shardid) WHERE s.logicalrelid = 'tbroken'::regclass ORDER BY s.shardid LIMIT 1")
out=$(citus_psql "$bnode" -qAt -v VERBOSITY=verbose -c "SET citus.enable_manual_changes_to_shards = on" \
    -c "ALTER TABLE $bshard ALTER COLUMN tenant TYPE int USING 0" \
    -c "INSERT INTO $bshard (tenant, id, body) VALUES (5, 1, 'a text of a row')" 2>&1 || true)
grep -Eq "ERROR:  42804: tenant column \"tenant\" of (public\.)?$bshard is not of the type the minhash index stores" <<<"$out" \
    || { echo "a write to a shard with an altered tenant column: $out" >&2; exit 1; }
citus_psql "$bnode" -qAt -c "SELECT 1" >/dev/null
q -c "DROP TABLE tbroken" >/dev/null
echo "ok: a shard whose tenant column was altered by hand refuses writes (42804)"

# A crowded bucket: 5,500 copies of one text (15,121,750 pairs), searched through Citus. The
# search streams: LIMIT stops it early, and the count is every pair.
q <<'EOF'
CREATE TABLE crowd (id bigint PRIMARY KEY, body text);
SELECT create_distributed_table('crowd', 'id', shard_count => 4);
INSERT INTO crowd SELECT g, corpus_text(1) FROM generate_series(1, 5500) g;
SELECT minhash_index_create('crowd', 'id', 'body');
SELECT check_eq('LIMIT 10 of a crowded bucket', (SELECT count(*) FROM (SELECT * FROM minhash_duplicates('crowd') LIMIT 10) d), 10);
SELECT check_eq('every pair of 5,500 copies', (SELECT count(*) FROM minhash_duplicates('crowd')), 5500 * 5499 / 2);
SELECT check_eq('one cluster of 5,500 rows', (SELECT count(DISTINCT cluster_id) FROM minhash_clusters('crowd')), 1);
DROP TABLE crowd;
EOF
echo "ok: 5,500 copies of one text: LIMIT 10, every pair, one cluster"

# The duplicate trigger: flags as on the plain table; 'reject' is refused.
for t in docs docs_local; do
    q -c "SET citus.enable_unsafe_triggers = on" \
      -c "CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON $t FOR EACH ROW
          EXECUTE FUNCTION minhash_flag_duplicate('dup_of', '0.7')" >/dev/null
    q -c "INSERT INTO $t (id, body) VALUES (7001, corpus_text(21) || ' w3'), (7002, 'nothing like it'),
                                           (7003, corpus_text(33))" >/dev/null
done
q <<'EOF'
SELECT check_eq('flagged rows equal',
    (SELECT count(*) FROM ((SELECT id, dup_of FROM docs WHERE id > 7000 EXCEPT SELECT id, dup_of FROM docs_local WHERE id > 7000)
                           UNION ALL (SELECT id, dup_of FROM docs_local WHERE id > 7000 EXCEPT SELECT id, dup_of FROM docs WHERE id > 7000)) x), 0);
SELECT check_eq('flagged', (SELECT count(*) FROM docs WHERE id > 7000 AND dup_of IS NOT NULL), 2);
SELECT check_eq('row 7001 flagged as a duplicate of row 21', (SELECT dup_of FROM docs WHERE id = 7001), 21);
EOF
check docs "after flagged inserts"

# What the flag trigger sees on Citus, against one node (docs/citus.md, "What is guaranteed"): a
# near-duplicate inserted while the first is not yet committed, on the other worker, is not
# flagged on Citus; on one node it waits for the first and is flagged. A near-duplicate
# inserted later, or by the same transaction on the same worker, is flagged.
worker_ids() { # worker_ids FROM: from id FROM on, an id of a shard on the first worker, one
               # on the second worker, and a larger id of the first id's shard
    q -F ' ' -c "WITH w AS (SELECT id, get_shard_id_for_distribution_column('docs', id) AS shard,
                                   (SELECT p.nodeport FROM pg_dist_shard_placement p
                                    WHERE p.shardid = get_shard_id_for_distribution_column('docs', id)) AS port
                            FROM generate_series($1, $1 + 200) id),
                      a AS (SELECT * FROM w WHERE port = $((PORT + 1)) ORDER BY id LIMIT 1)
                 SELECT a.id, (SELECT min(w.id) FROM w WHERE w.port = $((PORT + 2))),
                        (SELECT min(w.id) FROM w WHERE w.shard = a.shard AND w.id > a.id) FROM a"
}
read -r first second same < <(worker_ids 40001)
fresh=$(printf 'zq%d ' $(seq 1 24))
for t in docs docs_local; do
    citus_psql 0 -q -c "BEGIN" -c "INSERT INTO $t (id, body) VALUES ($first, '$fresh w7')" \
        -c "SELECT pg_sleep(2)" -c "COMMIT" >/dev/null &
    pid=$!
    sleep 0.7
    q -c "INSERT INTO $t (id, body) VALUES ($second, '$fresh w8')" >/dev/null
    wait "$pid"
done
q <<EOF
SELECT check_eq('Citus: a concurrent near-duplicate on the other worker is not flagged',
                (SELECT count(dup_of) FROM docs WHERE id = $second), 0);
SELECT check_eq('one node: a concurrent near-duplicate is flagged', (SELECT dup_of FROM docs_local WHERE id = $second), $first);
INSERT INTO docs (id, body) VALUES ($same, '$fresh w9');
INSERT INTO docs_local (id, body) VALUES ($same, '$fresh w9');
SELECT check_eq('Citus: a later near-duplicate is flagged', (SELECT dup_of FROM docs WHERE id = $same), least($first, $second));
EOF
read -r first second same < <(worker_ids 41001)
fresh=$(printf 'yv%d ' $(seq 1 24))
for t in docs docs_local; do
    q -c "BEGIN" -c "INSERT INTO $t (id, body) VALUES ($first, '$fresh')" \
      -c "INSERT INTO $t (id, body) VALUES ($same, '$fresh w1')" \
      -c "INSERT INTO $t (id, body) VALUES ($second, '$fresh w2')" -c "COMMIT" >/dev/null
done
q <<EOF
SELECT check_eq('Citus: a near-duplicate the same transaction wrote on the same worker is flagged',
                (SELECT dup_of FROM docs WHERE id = $same), $first);
SELECT check_eq('Citus: one it wrote on the other worker is not', (SELECT count(dup_of) FROM docs WHERE id = $second), 0);
EOF
check docs "after concurrent flagged inserts"
# ('reject' is refused when the trigger is made, by the check of its arguments)
expect_error 0A000 -c "SET citus.enable_unsafe_triggers = on" \
    -c "CREATE TRIGGER no_dups BEFORE INSERT ON docs FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_of', '0.7', 'reject')"
q -c "SELECT check_eq('the refused reject trigger is not made', (SELECT count(*) FROM pg_trigger WHERE tgname = 'no_dups'), 0)"
echo "ok: the duplicate trigger flags as on the plain table but for concurrent writes, as documented; 'reject' refused when made (0A000)"

# A reference table: indexed like any other, the band table a reference table.
q <<'EOF'
CREATE TABLE refdocs (id bigint PRIMARY KEY, body text);
SELECT create_reference_table('refdocs');
INSERT INTO refdocs SELECT * FROM corpus(200);
SELECT minhash_index_create('refdocs', 'id', 'body', threshold => 0.7);
INSERT INTO refdocs SELECT id + 1000, body FROM corpus(20);
DELETE FROM refdocs WHERE id % 9 = 0;
SELECT check_eq('reference band table', (SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'refdocs_minhash_bands'::regclass AND repmodel = 't'), 1);
CREATE TABLE refdocs_local (id bigint PRIMARY KEY, body text);
INSERT INTO refdocs_local SELECT * FROM refdocs;
SELECT minhash_index_create('refdocs_local', 'id', 'body', threshold => 0.7);
SELECT drop_sketch_store('refdocs_local');
SELECT check_eq('reference table duplicates equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_duplicates('refdocs') EXCEPT SELECT * FROM minhash_duplicates('refdocs_local'))
                           UNION ALL (SELECT * FROM minhash_duplicates('refdocs_local') EXCEPT SELECT * FROM minhash_duplicates('refdocs'))) x), 0);
SELECT check_eq('reference table similar equal',
    (SELECT count(*) FROM ((SELECT * FROM minhash_similar('refdocs', corpus_text(5)) EXCEPT SELECT * FROM minhash_similar('refdocs_local', corpus_text(5)))
                           UNION ALL (SELECT * FROM minhash_similar('refdocs_local', corpus_text(5)) EXCEPT SELECT * FROM minhash_similar('refdocs', corpus_text(5)))) x), 0);
EOF
check refdocs "reference table after writes"
echo "ok: a reference table"

# Shards moved to another worker, or split, keep the triggers and take the band rows along
# (co-located shards move and split together); writes go on, and the pairs are the same. The
# first move is by logical replication, with a writer at work on the same table.
other_worker="CASE p.nodeport WHEN $((PORT + 1)) THEN $((PORT + 2)) ELSE $((PORT + 1)) END"
writer docs 5 | sed 's/^COMMIT;$/COMMIT; SELECT pg_sleep(0.05);/' | citus_psql 0 -q >/dev/null &
writer_pid=$!
writer docs_local 5 | q >/dev/null
q -c "SELECT citus_move_shard_placement(s.shardid, '127.0.0.1', p.nodeport, '127.0.0.1', $other_worker,
                                        shard_transfer_mode => 'force_logical')
      FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)
      WHERE s.logicalrelid = 'docs'::regclass ORDER BY s.shardid DESC LIMIT 1" >/dev/null
wait "$writer_pid"
check docs "after a move by logical replication during writes"
q -c "SELECT citus_move_shard_placement(s.shardid, '127.0.0.1', p.nodeport, '127.0.0.1', $other_worker,
                                        shard_transfer_mode => 'block_writes')
      FROM pg_dist_shard s JOIN pg_dist_shard_placement p USING (shardid)
      WHERE s.logicalrelid = 'docs'::regclass ORDER BY s.shardid LIMIT 2" >/dev/null
q -c "SELECT citus_split_shard_by_split_points(s.shardid, ARRAY[((s.shardminvalue::bigint + s.shardmaxvalue::bigint) / 2)::text],
                                               ARRAY[(SELECT nodeid FROM pg_dist_node WHERE nodeport = $((PORT + 1))),
                                                     (SELECT nodeid FROM pg_dist_node WHERE nodeport = $((PORT + 2)))],
                                               'block_writes')
      FROM pg_dist_shard s WHERE s.logicalrelid = 'docs'::regclass ORDER BY s.shardid DESC LIMIT 1" >/dev/null
q -c "SELECT check_eq('shards after the split', (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'docs_minhash_bands'::regclass), 9)" >/dev/null
check docs "after moving and splitting shards"
for t in docs docs_local; do
    q -c "INSERT INTO $t (id, body) SELECT id + 30000, body FROM corpus(300)" \
      -c "UPDATE $t SET body = body || ' w5' WHERE id % 13 = 0" -c "DELETE FROM $t WHERE id % 17 = 0" >/dev/null
done
check docs "after writes to moved and split shards"
q -c "SELECT check_eq('duplicates equal after moves and splits',
    (SELECT count(*) FROM ((SELECT * FROM minhash_duplicates('docs') EXCEPT SELECT * FROM minhash_duplicates('docs_local'))
                           UNION ALL (SELECT * FROM minhash_duplicates('docs_local') EXCEPT SELECT * FROM minhash_duplicates('docs'))) x), 0)" >/dev/null
identity_check "after moves and splits"
echo "ok: shard moves and splits keep the index exact"

# A band table of a Citus table indexed before 0.3.0 (a B-tree that is not unique, the whole
# row as replica identity) gets the unique B-tree and its identity from minhash_index_rebuild.
q <<EOF >/dev/null
ALTER TABLE docs_minhash_bands REPLICA IDENTITY FULL;
SELECT format('DROP INDEX %s', x.indexrelid::regclass) FROM pg_index x
WHERE x.indrelid = 'docs_minhash_bands'::regclass AND x.indisunique \gexec
CREATE INDEX ON docs_minhash_bands $([ "$FORMAT" = 1 ] && echo "(key, id) INCLUDE (sketch1, sketch2)" || echo "(id)");
SELECT check_eq('a 0.2.0 band table: whole-row identity', count(*), 1) FROM pg_class
WHERE oid = 'docs_minhash_bands'::regclass AND relreplident = 'f';
SELECT minhash_index_rebuild('docs');
EOF
identity_check "after minhash_index_rebuild of a 0.2.0 band table"
check docs "after minhash_index_rebuild of a 0.2.0 band table"
echo "ok: minhash_index_rebuild gives a 0.2.0 band table its replica identity"

# A local table on the coordinator whose name ends like a shard's is indexed as on plain
# PostgreSQL.
q -c "CREATE TABLE events_2024 (id bigint PRIMARY KEY, body text)" \
  -c "INSERT INTO events_2024 SELECT * FROM corpus(100)" \
  -c "SELECT minhash_index_create('events_2024', 'id', 'body')" \
  -c "INSERT INTO events_2024 VALUES (9001, 'a new row')" -c "UPDATE events_2024 SET body = 'changed' WHERE id = 9001" \
  -c "DELETE FROM events_2024 WHERE id = 3" >/dev/null
check events_2024 "a local table named like a shard"
echo "ok: a local table named like a shard"

# Citus's table conversions would leave an index behind or naming what is gone: refused, and
# the index stays as it was.
# (citus.enable_unsafe_triggers on, or Citus itself refuses to make the duplicate trigger again)
expect_error 0A000 -c "SET citus.enable_unsafe_triggers = on" -c "SELECT undistribute_table('docs')"
expect_error 0A000 -c "SET citus.enable_unsafe_triggers = on" \
    -c "SELECT alter_distributed_table('docs', shard_count => 4, cascade_to_colocated => true)"
expect_error 0A000 -c "SET citus.enable_unsafe_triggers = on" -c "SELECT alter_distributed_table('docs', colocate_with => 'none')"
expect_error 2BP01 -c "SELECT alter_distributed_table('docs_minhash_bands', shard_count => 4, cascade_to_colocated => false)"
expect_error 2BP01 -c "SELECT undistribute_table('docs_minhash_bands')"
expect_error 2BP01 -c "DROP TABLE docs_minhash_bands"
expect_error 0A000 -c "SELECT citus_add_local_table_to_metadata('events_2024')"
expect_error 0A000 -c "ALTER TABLE events_2024 ADD FOREIGN KEY (id) REFERENCES refdocs (id)"
# (without citus.enable_unsafe_triggers, Citus refuses a table with triggers itself)
expect_error XX000 -c "SELECT create_distributed_table('events_2024', 'id')"
# (Citus passes the error of a shard's COPY on as XX000)
for make in "create_distributed_table('events_2024', 'id')" "create_reference_table('events_2024')"; do
    out=$(q -c "SET citus.enable_unsafe_triggers = on" -c "SELECT $make" 2>&1 || true)
    grep -q 'ERROR:  .*trigger "minhash_sync_insert_[0-9]*" on events_2024 belongs to a minhash index made before the table became a Citus table' <<<"$out" \
        || { echo "$make of an indexed table: $out" >&2; exit 1; }
done
check docs "after refused conversions"
check events_2024 "after refused conversions"
q -c "SELECT check_eq('no Citus metadata for events_2024', (SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'events\_2024%'), 0)" >/dev/null
echo "ok: Citus's table conversions of an indexed table or its band table refused (0A000, 2BP01)"

# An unprivileged role's own distributed table, with a trigger of ours that names the band
# table of docs: the write is refused, nothing is written.
q <<'EOF'
CREATE ROLE mallory LOGIN;
GRANT ALL ON SCHEMA public TO mallory;
EOF
before=$(q -c "SELECT count(*) FROM docs_minhash_bands")
args=$(q -c "SELECT quote_literal(jsonb_set(to_jsonb(i) - 'created_at' - 'partitions', '{tbl}', '\"public.mine\"'))
             FROM minhash_indexes i WHERE i.tbl = 'docs'::regclass")
out=$(CITUS_USER=mallory citus_psql 0 -qAt -v VERBOSITY=verbose \
    -c "CREATE TABLE mine (id bigint PRIMARY KEY, body text)" \
    -c "SELECT create_distributed_table('mine', 'id', colocate_with => 'docs')" \
    -c "SET citus.enable_unsafe_triggers = on" \
    -c "CREATE TRIGGER minhash_sync_insert AFTER INSERT ON mine REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_sync($args)" \
    -c "INSERT INTO mine VALUES (1, 'stolen words')" 2>&1 || true)
grep -q "ERROR:  42501: the band table of public.mine does not belong to the table's owner" <<<"$out" \
    || { echo "forged trigger: $out" >&2; exit 1; }
[ "$(q -c "SELECT count(*) FROM docs_minhash_bands")" = "$before" ]
echo "ok: a forged trigger of an unprivileged role writes nothing (42501)"

# Renaming the table or its band table is refused: the triggers on the shards name both.
expect_error 0A000 -c "ALTER TABLE docs RENAME TO docs2"
expect_error 0A000 -c "ALTER TABLE docs_minhash_bands RENAME TO other_bands"
q -c "ALTER TABLE docs ADD COLUMN note text" -c "INSERT INTO docs (id, body) VALUES (7100, 'an added row')" >/dev/null
check docs "after ALTER TABLE ADD COLUMN"
echo "ok: renames refused (0A000); other ALTER TABLE goes on"

# Drop, of the index or of the table: the band tables are gone from every node.
q -c "SELECT minhash_index_drop('docs', cascade => true)" -c "DROP TABLE scratch" >/dev/null
# (the placements that shard moves and splits left behind are Citus's to drop, later or now)
q -c "CALL citus_cleanup_orphaned_resources()" >/dev/null
q -c "SELECT check_eq('catalog rows of dropped indexes', (SELECT count(*) FROM minhash_indexes i WHERE i.tbl = 'docs'::regclass OR NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = i.tbl)), 0)" >/dev/null
for n in 0 1 2; do
    left=$(citus_psql "$n" -qAt -c "SET citus.override_table_visibility = off" \
        -c "SELECT count(*) FROM pg_class WHERE relname LIKE 'docs\_minhash\_bands%' OR relname LIKE 'scratch\_minhash\_bands%'")
    [ "$left" = 0 ] || { echo "node $n keeps $left band tables or shards" >&2; exit 1; }
done
q -c "INSERT INTO docs (id, body) VALUES (8001, 'after the drop')" >/dev/null
echo "ok: minhash_index_drop and DROP TABLE leave no band table or shard on any node; writes go on"
echo "citus: all checks passed"
