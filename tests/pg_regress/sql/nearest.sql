-- Below the index's threshold and the k most similar rows (docs/contract.md): recall against
-- brute force (exact jaccard() over every row), on an index built for 0.8.
SET client_min_messages = notice;
-- 2,000 rows of 12 words from 60, in groups of five around one base text: row g replaces
-- 2 * (g % 5) of its group's words, so similarities spread from about 0.1 to 1
CREATE TABLE nn (id int PRIMARY KEY, body text, category int);
INSERT INTO nn
SELECT g, (SELECT string_agg(v.w[1 + abs(hashint4(CASE WHEN i <= (g % 5) * 2 THEN g * 100 + i
                                                        ELSE (g / 5) * 100 + i END)) % 60], ' ' ORDER BY i)
           FROM generate_series(1, 12) i), g % 7
FROM generate_series(1, 2000) g, (SELECT array_agg('w' || x || 'x') AS w FROM generate_series(1, 60) x) v;
SELECT minhash_index_create('nn', 'id', 'body');
SELECT threshold, bands, rows_per_band, format FROM minhash_indexes WHERE tbl = 'nn'::regclass;
-- the probes: every 20th row; the truth: every (probe, row) pair with its exact similarity
CREATE TABLE truth AS
SELECT p.id AS probe, r.id, jaccard(p.body, r.body) AS similarity
FROM nn p CROSS JOIN nn r WHERE p.id % 20 = 0;
SELECT count(*) FILTER (WHERE similarity >= 0.5) AS at_0_5, count(*) FILTER (WHERE similarity >= 0.6) AS at_0_6,
       count(*) FILTER (WHERE similarity >= 0.7) AS at_0_7, count(*) FILTER (WHERE similarity >= 0.8) AS at_0_8
FROM truth;
-- 1. Any threshold from 0.5 up: the rows at or above it, with their exact similarities
CREATE FUNCTION pg_temp.recall(t float8) RETURNS TABLE (truth bigint, found bigint, missed bigint, wrong bigint)
LANGUAGE sql AS $$
    WITH found AS MATERIALIZED (
        SELECT p.id AS probe, s.id, s.similarity
        FROM nn p CROSS JOIN LATERAL minhash_similar('nn', p.body, threshold => t) s WHERE p.id % 20 = 0)
    SELECT (SELECT count(*) FROM truth WHERE similarity >= t),
           (SELECT count(*) FROM found),
           (SELECT count(*) FROM truth x WHERE x.similarity >= t
              AND NOT EXISTS (SELECT FROM found f WHERE f.probe = x.probe AND f.id = x.id)),
           (SELECT count(*) FROM found f
              WHERE NOT EXISTS (SELECT FROM truth x WHERE x.probe = f.probe AND x.id = f.id
                                AND x.similarity = f.similarity AND x.similarity >= t)) $$;
SELECT 0.8 AS threshold, * FROM pg_temp.recall(0.8);
SELECT 0.7 AS threshold, * FROM pg_temp.recall(0.7);
SELECT 0.6 AS threshold, * FROM pg_temp.recall(0.6);
SELECT 0.5 AS threshold, * FROM pg_temp.recall(0.5);
-- below 0.5 only the band keys are read, as the NOTICE says
SELECT count(*) > 0 AS found FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 20), threshold => 0.4);
-- 2. The k most similar: recall@10 (a row counts as a hit if it is at least as similar as the
-- tenth most similar row, ties included), most similar first, exact similarities
CREATE TABLE top AS
SELECT p.id AS probe, s.id, s.similarity, row_number() OVER (PARTITION BY p.id) AS rank
FROM nn p CROSS JOIN LATERAL minhash_similar('nn', p.body, k => 10) s WHERE p.id % 20 = 0;
WITH tenth AS (
    SELECT probe, min(similarity) AS similarity
    FROM (SELECT probe, similarity, row_number() OVER (PARTITION BY probe ORDER BY similarity DESC) AS n FROM truth) x
    WHERE n <= 10 GROUP BY probe)
SELECT count(*) AS returned,
       count(*) FILTER (WHERE t.similarity >= tenth.similarity) AS hits,
       round(count(*) FILTER (WHERE t.similarity >= tenth.similarity)::numeric / (10 * count(DISTINCT t.probe)), 3) AS recall_at_10,
       count(*) FILTER (WHERE t.similarity <> x.similarity) AS inexact
FROM top t JOIN tenth USING (probe) JOIN truth x ON x.probe = t.probe AND x.id = t.id;
SELECT count(*) AS out_of_order
FROM top a JOIN top b ON a.probe = b.probe AND b.rank = a.rank + 1
WHERE a.similarity < b.similarity OR (a.similarity = b.similarity AND a.id > b.id);
-- with a threshold, the k most similar at or above it; max_results cuts after k
SELECT count(*) AS k_above_0_9, bool_and(similarity >= 0.9) AS all_above
FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 20), threshold => 0.9, k => 10);
SELECT count(*) AS k_then_max FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 20), max_results => 3, k => 10);
SELECT count(*) AS matches_k FROM minhash_matches('nn', ARRAY[(SELECT body FROM nn WHERE id = 20), NULL, 'zz'], k => 4);
SELECT count(*) AS null_text FROM minhash_similar('nn', NULL, k => 10);
-- 2b. Among the rows a WHERE clause keeps (`among`, the ids they have): k and the threshold
-- count among them only. A set of at most 4096 ids is verified directly, the same rows as
-- brute force over them; a larger one through the band keys and the scan, with their recall.
-- pg_temp.among_check(t): returned rows, hits (at least as similar as the k-th most similar
-- row of the set), rows outside the set, inexact similarities, of k => 5 among the rows of
-- category 3 (286 rows) or of every other category with 4,000 ids of no row (5,714 ids)
CREATE FUNCTION pg_temp.among_check(small boolean)
RETURNS TABLE (returned bigint, hits bigint, outside bigint, inexact bigint)
LANGUAGE sql AS $$
    WITH ids AS (
        SELECT CASE WHEN small THEN ARRAY(SELECT id FROM nn WHERE category = 3)
                    ELSE ARRAY(SELECT id FROM nn WHERE category <> 3)
                         || ARRAY(SELECT g FROM generate_series(10001, 14000) g) END AS a),
    found AS MATERIALIZED (
        SELECT p.id AS probe, s.id, s.similarity
        FROM nn p, ids, LATERAL minhash_similar('nn', p.body, k => 5, among => ids.a::bigint[]) s
        WHERE p.id % 20 = 0),
    kth AS (
        SELECT probe, min(similarity) AS similarity
        FROM (SELECT x.probe, x.similarity,
                     row_number() OVER (PARTITION BY x.probe ORDER BY x.similarity DESC) AS n
              FROM truth x JOIN (SELECT DISTINCT unnest(ids.a) AS id FROM ids) u ON u.id = x.id) r
        WHERE n <= 5 GROUP BY probe)
    SELECT count(*), count(*) FILTER (WHERE f.similarity >= kth.similarity),
           count(*) FILTER (WHERE NOT f.id = ANY (ids.a)),
           count(*) FILTER (WHERE f.similarity <> x.similarity)
    FROM found f JOIN kth USING (probe) JOIN truth x ON x.probe = f.probe AND x.id = f.id, ids $$;
SELECT 'small' AS among, * FROM pg_temp.among_check(true);
SELECT 'large' AS among, * FROM pg_temp.among_check(false);
-- with a threshold the index's band keys suffice at, the band keys alone, filtered: the rows
-- of the set that minhash_similar finds without among (every 20th row's lookup, odd ids)
SELECT (SELECT count(*) FROM nn p, LATERAL minhash_similar('nn', p.body,
            among => ARRAY(SELECT id::bigint FROM nn WHERE id % 2 = 1)) s
        WHERE p.id % 20 = 0) AS found_among,
       (SELECT count(*) FROM nn p, LATERAL minhash_similar('nn', p.body) s
        WHERE p.id % 20 = 0 AND s.id % 2 = 1) AS found_then_filtered;
-- an empty set finds nothing; NULL elements are no id; NULL is every row
SELECT count(*) AS empty_among FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 20), k => 5, among => '{}');
SELECT count(*) AS null_elements FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 20), k => 5, among => ARRAY[NULL, 20]::bigint[]);
SELECT count(*) AS null_among FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 20), k => 5, among => NULL);
-- ids of another key type (text keys here) are given as text: matched by the column's equality
-- as the caller sees the rows; the same rows as the integer keys
CREATE TABLE nn_text AS SELECT 'r' || id AS id, body, category FROM nn;
ALTER TABLE nn_text ADD PRIMARY KEY (id);
SELECT minhash_index_create('nn_text', 'id', 'body') IS NOT NULL AS created;
SELECT (SELECT array_agg(s.id ORDER BY s.similarity DESC, s.id)
        FROM minhash_similar('nn_text', (SELECT body FROM nn WHERE id = 45), NULL::text, threshold => 0.5,
                             among => ARRAY(SELECT id FROM nn_text WHERE category <> 4) || '{r99999}'::text[]) s)
     = (SELECT array_agg('r' || s.id ORDER BY s.similarity DESC, 'r' || s.id)
        FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 45), threshold => 0.5,
                             among => ARRAY(SELECT id FROM nn WHERE category <> 4)::bigint[]) s) AS same_rows,
       (SELECT count(*) FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 45), threshold => 0.5,
                             among => ARRAY(SELECT id FROM nn WHERE category <> 4)::bigint[])) AS rows,
       (SELECT count(*) FROM minhash_similar('nn', (SELECT body FROM nn WHERE id = 45), threshold => 0.5)) AS rows_of_all;
SELECT minhash_index_drop('nn_text');
DROP TABLE nn_text;
-- what a lookup did: the band keys, then the sweep of the sketch store (sketch_store.sql)
SELECT regexp_replace(line, '[0-9.]+ ms', 'N ms', 'g') AS line
FROM minhash_explain('nn', (SELECT body FROM nn WHERE id = 20), k => 10) line;
SELECT count(*) AS sweep_lines
FROM minhash_explain('nn', (SELECT body FROM nn WHERE id = 20), threshold => 0.6) line WHERE line LIKE '%swept%';
SELECT count(*) AS sweep_lines_at_0_8
FROM minhash_explain('nn', (SELECT body FROM nn WHERE id = 20)) line WHERE line LIKE '%swept%';
-- 3. A format 1 index of the same rows answers the same
CREATE TABLE nn1 AS SELECT * FROM nn;
ALTER TABLE nn1 ADD PRIMARY KEY (id);
SELECT minhash_index_create('nn1', 'id', 'body', format => 1);
SELECT count(*) AS differences
FROM nn p, LATERAL ((SELECT * FROM minhash_similar('nn', p.body, k => 10)
                     EXCEPT ALL SELECT * FROM minhash_similar('nn1', p.body, k => 10))
                    UNION ALL
                    (SELECT * FROM minhash_similar('nn', p.body, threshold => 0.55)
                     EXCEPT ALL SELECT * FROM minhash_similar('nn1', p.body, threshold => 0.55))) d
WHERE p.id % 100 = 0;
-- 4. Without a sketch store (dropped here; minhash_index_rebuild makes it again), a lookup
-- scans every row's band sketch. The scan reads the band table directly; under SERIALIZABLE
-- (whose predicate locks only SQL takes) through its query. Both give the same rows, of either
-- format.
DROP INDEX nn_minhash_sketch_idx, nn1_minhash_sketch_idx;
SELECT count(*) AS scan_lines
FROM minhash_explain('nn', (SELECT body FROM nn WHERE id = 20), threshold => 0.6) line WHERE line LIKE '%scanned%';
SELECT count(*) AS scan_lines_at_0_8
FROM minhash_explain('nn', (SELECT body FROM nn WHERE id = 20)) line WHERE line LIKE '%scanned%';
CREATE TEMP TABLE direct_read AS
SELECT p.id AS probe, f.tbl, s.* FROM nn p, (VALUES ('nn'), ('nn1')) f(tbl),
     LATERAL (SELECT * FROM minhash_similar(f.tbl::regclass, p.body, k => 10)
              UNION ALL SELECT * FROM minhash_similar(f.tbl::regclass, p.body, threshold => 0.55)) s
WHERE p.id % 100 = 0;
BEGIN ISOLATION LEVEL SERIALIZABLE;
CREATE TEMP TABLE sql_read AS
SELECT p.id AS probe, f.tbl, s.* FROM nn p, (VALUES ('nn'), ('nn1')) f(tbl),
     LATERAL (SELECT * FROM minhash_similar(f.tbl::regclass, p.body, k => 10)
              UNION ALL SELECT * FROM minhash_similar(f.tbl::regclass, p.body, threshold => 0.55)) s
WHERE p.id % 100 = 0;
SELECT f.tbl, substring(line FROM 'band table read (directly|by SQL)') AS read
FROM (VALUES ('nn'), ('nn1')) f(tbl),
     LATERAL minhash_explain(f.tbl::regclass, (SELECT body FROM nn WHERE id = 20), k => 10) line
WHERE line LIKE '%scanned%';
COMMIT;
SELECT f.tbl, substring(line FROM 'band table read (directly|by SQL)') AS read
FROM (VALUES ('nn'), ('nn1')) f(tbl),
     LATERAL minhash_explain(f.tbl::regclass, (SELECT body FROM nn WHERE id = 20), k => 10) line
WHERE line LIKE '%scanned%';
SELECT (SELECT count(*) FROM direct_read) AS rows,
       (SELECT count(*) FROM ((TABLE direct_read EXCEPT ALL TABLE sql_read)
                              UNION ALL (TABLE sql_read EXCEPT ALL TABLE direct_read)) d) AS differences;
-- the same after a delete (read past dead rows) and after VACUUM (format 1 reads all-visible
-- pages from its B-tree alone)
DELETE FROM nn1 WHERE id % 10 = 3;
CREATE FUNCTION pg_temp.k10() RETURNS TABLE (probe int, id bigint, similarity float8) LANGUAGE sql AS $$
    SELECT p.id, s.* FROM nn p, LATERAL minhash_similar('nn1', p.body, k => 10) s WHERE p.id % 100 = 0 $$;
CREATE TEMP TABLE a AS SELECT * FROM pg_temp.k10();
BEGIN ISOLATION LEVEL SERIALIZABLE;
CREATE TEMP TABLE b AS SELECT * FROM pg_temp.k10();
COMMIT;
SELECT (SELECT count(*) FROM a) AS rows,
       (SELECT count(*) FROM ((TABLE a EXCEPT ALL TABLE b) UNION ALL (TABLE b EXCEPT ALL TABLE a)) d) AS differences,
       (SELECT count(*) FROM a WHERE id % 10 = 3) AS deleted_rows_found;
VACUUM nn1_minhash_bands;
TRUNCATE a;
INSERT INTO a SELECT * FROM pg_temp.k10();
SELECT (SELECT count(*) FROM a) AS rows,
       (SELECT count(*) FROM ((TABLE a EXCEPT ALL TABLE b) UNION ALL (TABLE b EXCEPT ALL TABLE a)) d) AS differences;
-- and after the owner rewrites band rows in place (HOT updates, then pruned: format 1's
-- B-tree entries point at the first of each chain)
VACUUM nn1_minhash_bands;
UPDATE nn1_minhash_bands SET id = id WHERE id % 10 = 5;
SELECT pg_stat_force_next_flush();
VACUUM nn1_minhash_bands;
SELECT n_tup_hot_upd > 0 AS hot_updates FROM pg_stat_user_tables WHERE relname = 'nn1_minhash_bands';
TRUNCATE a;
INSERT INTO a SELECT * FROM pg_temp.k10();
SELECT (SELECT count(*) FROM a) AS rows,
       (SELECT count(*) FROM ((TABLE a EXCEPT ALL TABLE b) UNION ALL (TABLE b EXCEPT ALL TABLE a)) d) AS differences;
DROP TABLE a, b;
-- 5. Bad arguments
\set VERBOSITY sqlstate
SELECT * FROM minhash_similar('nn', 'x', k => 0);
SELECT * FROM minhash_matches('nn', ARRAY['x'], k => -1);
SELECT * FROM minhash_explain('nn', 'x', k => 0);
\set VERBOSITY default
SELECT minhash_index_drop('nn');
SELECT minhash_index_drop('nn1');
DROP TABLE nn, nn1, truth, top;
