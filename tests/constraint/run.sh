#!/usr/bin/env bash
# Constraint test: 8 writers insert near-duplicates of a small pool of questions at once, into a
# table whose minhash_flag_duplicate trigger rejects them (and a partitioned one, each writer
# naming a partition at random, whose trigger rejects them across partitions) and one whose
# trigger flags them, for
# SECONDS seconds at each isolation level (READ COMMITTED, REPEATABLE READ, SERIALIZABLE;
# pgbench retries serialization failures and deadlocks). Afterwards, checked by brute force
# over every pair of rows: the reject tables hold no two near-duplicates, and in the flag table
# no near-duplicate pair is left with both rows unflagged; every index checks 0/0.
# Usage: tests/constraint/run.sh [seconds] (the extension must be installed).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
seconds="${1:-15}"

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-constraint.XXXXXX)"
psql -X -q -v ON_ERROR_STOP=1 -d postgres <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
-- 40 questions, each written in 4 ways that are near-duplicates of one another
CREATE TABLE pool (n int PRIMARY KEY, body text NOT NULL);
INSERT INTO pool
SELECT (q - 1) * 4 + v,
       CASE v WHEN 1 THEN t WHEN 2 THEN t || '?' WHEN 3 THEN 'so, ' || t ELSE t || ' thanks!' END
FROM generate_series(1, 40) q, generate_series(1, 4) v,
     LATERAL (SELECT format('how do I configure the %s module of the %s service on host %s',
                            md5(q::text), md5((q * 7)::text), q) AS t) s;
CREATE TABLE q_reject (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text);
CREATE TABLE q_flag (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text,
                     duplicate_of bigint);
CREATE TABLE q_parted (id bigint GENERATED ALWAYS AS IDENTITY, part int NOT NULL, body text,
                       PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE q_parted_0 PARTITION OF q_parted FOR VALUES IN (0);
CREATE TABLE q_parted_1 PARTITION OF q_parted FOR VALUES IN (1);
CREATE TABLE q_parted_2 PARTITION OF q_parted FOR VALUES IN (2);
CREATE TABLE q_parted_3 PARTITION OF q_parted FOR VALUES IN (3);
\o /dev/null
SELECT minhash_index_create('q_reject', 'id', 'body');
SELECT minhash_index_create('q_flag', 'id', 'body');
SELECT minhash_index_create('q_parted', 'id', 'body');
\o
CREATE TRIGGER q_reject_unique BEFORE INSERT OR UPDATE ON q_reject
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
CREATE TRIGGER q_parted_unique BEFORE INSERT OR UPDATE ON q_parted
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
CREATE TRIGGER q_flag_duplicate BEFORE INSERT OR UPDATE ON q_flag
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
-- a refused insert is an expected outcome; serialization failures and deadlocks go to pgbench
CREATE FUNCTION try_reject(n int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO q_reject (body) SELECT body FROM pool WHERE pool.n = try_reject.n;
EXCEPTION WHEN unique_violation THEN
    NULL;
END $$;
CREATE FUNCTION try_reject_parted(n int, part int) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO q_parted (part, body) SELECT part, body FROM pool WHERE pool.n = try_reject_parted.n;
EXCEPTION WHEN unique_violation THEN
    NULL;
END $$;
GRANT ALL ON ALL TABLES IN SCHEMA public TO PUBLIC;
SQL

cat > "$CLUSTER_DIR/reject.sql" <<'EOF2'
\set n random(1, 160)
SELECT try_reject(:n);
EOF2
cat > "$CLUSTER_DIR/parted.sql" <<'EOF2'
\set n random(1, 160)
\set part random(0, 3)
SELECT try_reject_parted(:n, :part);
EOF2
cat > "$CLUSTER_DIR/flag.sql" <<'EOF2'
\set n random(1, 160)
INSERT INTO q_flag (body) SELECT body FROM pool WHERE n = :n;
EOF2
cat > "$CLUSTER_DIR/update.sql" <<'EOF2'
\set n random(1, 160)
\set id random(1, 400)
UPDATE q_flag SET body = (SELECT body FROM pool WHERE n = :n) WHERE id = :id;
EOF2

status=0
for level in 'read committed' 'repeatable read' 'serializable'; do
    psql -X -q -d postgres -c "TRUNCATE q_reject, q_flag, q_parted RESTART IDENTITY"
    PGOPTIONS="-c default_transaction_isolation=${level// /\\ }" \
        "$PG_BIN/pgbench" -n -d postgres -c 8 -j 2 -T "$seconds" --max-tries=100000 \
        -f "$CLUSTER_DIR/reject.sql@4" -f "$CLUSTER_DIR/parted.sql@2" -f "$CLUSTER_DIR/flag.sql@4" \
        -f "$CLUSTER_DIR/update.sql@1" \
        > "$CLUSTER_DIR/pgbench.log" 2>&1 || {
        cat "$CLUSTER_DIR/pgbench.log"
        echo "constraint ($level): pgbench failed" >&2
        exit 1
    }
    tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$CLUSTER_DIR/pgbench.log")
    retried=$(sed -n 's/^number of transactions retried: \([0-9]*\).*/\1/p' "$CLUSTER_DIR/pgbench.log")
    read -r rejected_rows reject_pairs parted_rows parted_pairs flag_rows flagged unflagged_pairs \
        bad_flags checks < <(
        psql -X -At -F ' ' -d postgres -c "
        SELECT (SELECT count(*) FROM q_reject),
               (SELECT count(*) FROM q_reject a JOIN q_reject b ON a.id < b.id
                WHERE jaccard(a.body, b.body) >= 0.8),
               (SELECT count(*) FROM q_parted),
               (SELECT count(*) FROM q_parted a JOIN q_parted b ON a.id < b.id
                WHERE jaccard(a.body, b.body) >= 0.8),
               (SELECT count(*) FROM q_flag),
               (SELECT count(*) FROM q_flag WHERE duplicate_of IS NOT NULL),
               (SELECT count(*) FROM q_flag a JOIN q_flag b ON a.id < b.id
                WHERE a.duplicate_of IS NULL AND b.duplicate_of IS NULL
                  AND jaccard(a.body, b.body) >= 0.8),
               (SELECT count(*) FROM q_flag a LEFT JOIN q_flag b ON b.id = a.duplicate_of
                WHERE a.duplicate_of IS NOT NULL
                  AND (b.id IS NULL OR b.id = a.id)),
               (SELECT string_agg(c.missing || '/' || c.orphaned, ',')
                FROM (VALUES ('q_reject'::regclass), ('q_flag'), ('q_parted')) t(tbl),
                     LATERAL minhash_index_check(t.tbl) c)")
    echo "constraint ($level): ${seconds}s of 8 writers, $tx transactions ($retried retried);" \
         "reject table $rejected_rows rows, $reject_pairs near-duplicate pairs;" \
         "partitioned reject table $parted_rows rows in 4 partitions, $parted_pairs pairs;" \
         "flag table $flag_rows rows, $flagged flagged, $unflagged_pairs pairs with neither flagged;" \
         "index checks $checks"
    if [ "$reject_pairs" != 0 ] || [ "$parted_pairs" != 0 ] || [ "$unflagged_pairs" != 0 ] \
        || [ "$bad_flags" != 0 ] || [ "$checks" != "0/0,0/0,0/0" ]; then
        status=1
    fi
done
exit "$status"
