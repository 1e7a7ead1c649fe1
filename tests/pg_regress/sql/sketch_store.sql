-- The sketch store (docs/internals.md, "The sketch store"): an index of access method
-- minhash_sketch on minhash_sketch(text, ngram, unit), made and dropped with the minhash index,
-- that a lookup for the k most similar rows or a threshold below the index's sweeps. Its
-- answers are checked against brute force (exact jaccard() over every row) after every kind
-- of write; where the caller may not read it directly, the lookup scans the band table.
SET client_min_messages = warning;
-- 1,500 rows of 14 words from 80, in groups of six around one base text: row g replaces
-- 2 * (g % 6) of its group's words, so that similarities spread from about 0.05 to 1
CREATE TABLE st (id int PRIMARY KEY, body varchar, category int);
INSERT INTO st
SELECT g, (SELECT string_agg(v.w[1 + abs(hashint4(CASE WHEN i <= (g % 6) * 2 THEN g * 100 + i
                                                        ELSE (g / 6) * 100 + i END)) % 80], ' ' ORDER BY i)
           FROM generate_series(1, 14) i), g % 5
FROM generate_series(1, 1500) g, (SELECT array_agg('w' || x || 'y') AS w FROM generate_series(1, 80) x) v;
SELECT minhash_index_create('st', 'id', 'body') IS NOT NULL AS created;
-- 1. the store: one index on the table, of the index's ngram and unit
SELECT c.relname, a.amname, pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
WHERE i.indrelid = 'st'::regclass AND a.amname = 'minhash_sketch';
SELECT length(minhash_sketch('a text of some words')) AS bytes, minhash_sketch('') IS NULL AS no_shingles,
       minhash_sketch('a text of some words') = minhash_sketch('A  text of some WORDS') AS normalized;
-- its settings are checked as minhash()'s (22023)
SELECT minhash_sketch('a text', 0);
SELECT minhash_sketch('a text', 5, 'byte');
-- Against brute force: every row at or above `t`, or the 10 most similar (a returned row is
-- right if at least as similar as the tenth most similar; ties count), for every 25th row.
CREATE FUNCTION pg_temp.check(t float8, k int)
RETURNS TABLE (probes bigint, wanted bigint, missed bigint, wrong bigint) LANGUAGE sql AS $$
    WITH truth AS (
        SELECT p.id AS probe, r.id, jaccard(p.body, r.body) AS similarity
        FROM st p CROSS JOIN st r WHERE p.id % 25 = 0),
    ranked AS (
        SELECT *, rank() OVER (PARTITION BY probe ORDER BY similarity DESC) AS rank
        FROM truth WHERE similarity >= coalesce(t, 0)),
    bar AS (
        SELECT probe, count(*) FILTER (WHERE rank <= coalesce(k, rank)) AS wanted,
               min(similarity) FILTER (WHERE rank <= coalesce(k, rank)) AS bar
        FROM ranked GROUP BY probe),
    found AS MATERIALIZED (
        SELECT p.id AS probe, s.id, s.similarity
        FROM st p CROSS JOIN LATERAL minhash_similar('st', p.body, threshold => t, k => k) s WHERE p.id % 25 = 0)
    SELECT (SELECT count(*) FROM bar),
           (SELECT sum(least(wanted, coalesce(k, wanted)))::bigint FROM bar),
           (SELECT sum(least(b.wanted, coalesce(k, b.wanted))
                       - (SELECT count(*) FROM found f WHERE f.probe = b.probe AND f.similarity >= b.bar))::bigint
            FROM bar b),
           (SELECT count(*) FROM found f
              WHERE NOT EXISTS (SELECT FROM truth x WHERE x.probe = f.probe AND x.id = f.id
                                AND x.similarity = f.similarity AND x.similarity >= coalesce(t, 0))) $$;
SELECT 0.7 AS threshold, * FROM pg_temp.check(0.7, NULL);
SELECT 0.5 AS threshold, * FROM pg_temp.check(0.5, NULL);
SELECT 0.4 AS threshold, * FROM pg_temp.check(0.4, NULL);
SELECT 0.3 AS threshold, * FROM pg_temp.check(0.3, NULL);
SELECT 'k 10' AS asked, * FROM pg_temp.check(NULL, 10);
SELECT 'k 3, 0.3' AS asked, * FROM pg_temp.check(0.3, 3);
-- what a lookup did: the store swept, far fewer rows verified than the table has
CREATE FUNCTION pg_temp.explained(t float8, k int) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT regexp_replace(regexp_replace(line, '[0-9.]+ ms', 'N ms', 'g'),
                          'entries read in ([0-9]+) sweeps?, ([0-9]+) rows verified', 'entries read, rows verified')
    FROM minhash_explain('st', (SELECT body FROM st WHERE id = 50), threshold => t, k => k) line $$;
SELECT * FROM pg_temp.explained(0.4, NULL);
SELECT (regexp_match(line, '([0-9]+) rows verified'))[1]::int < 1500 / 2 AS fewer_than_half
FROM minhash_explain('st', (SELECT body FROM st WHERE id = 50), k => 10) line WHERE line LIKE '%sketch store%';
-- 2. the store follows every write: updates (of the text and of other columns, HOT),
-- deletes, inserts, a rolled-back insert, and VACUUM's removal of dead entries
UPDATE st SET body = body || ' extra words here' WHERE id % 7 = 0;
UPDATE st SET category = category + 1 WHERE id % 3 = 0;
DELETE FROM st WHERE id % 11 = 0;
INSERT INTO st SELECT 2000 + id, body || ' again', 0 FROM st WHERE id % 13 = 0 AND id < 600;
BEGIN;
INSERT INTO st SELECT 3000 + id, body, 0 FROM st WHERE id < 100;
ROLLBACK;
SELECT 'after writes' AS state, * FROM pg_temp.check(0.4, NULL);
SELECT 'after writes, k 10' AS state, * FROM pg_temp.check(NULL, 10);
VACUUM st;
SELECT 'after vacuum' AS state, * FROM pg_temp.check(0.4, NULL);
-- a store rebuilt between two lookups of one session, its pages now in other buffers and
-- fewer: the buffers a session remembers its last sweep's pages in are checked, not trusted
REINDEX TABLE st;
SELECT 'after reindex' AS state, * FROM pg_temp.check(0.4, NULL);
-- 3. where the caller may not read the table directly, the band table is scanned instead, with
-- the same answers: under SERIALIZABLE, and for a role row-level security applies to
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FILTER (WHERE line LIKE '%sketch store%') AS store_lines
FROM minhash_explain('st', (SELECT body FROM st WHERE id = 50), k => 10) line;
SELECT 'serializable' AS state, * FROM pg_temp.check(NULL, 10);
COMMIT;
CREATE ROLE regress_store_reader;
GRANT SELECT ON st TO regress_store_reader;
ALTER TABLE st ENABLE ROW LEVEL SECURITY;
CREATE POLICY even ON st FOR SELECT TO regress_store_reader USING (id % 2 = 0);
SET ROLE regress_store_reader;
-- a role that reads the table may not make or drop its stores
SELECT minhash_internal._minhash_sync_stores('st');
SELECT count(*) FILTER (WHERE line LIKE '%sketch store%') AS store_lines,
       count(*) FILTER (WHERE line LIKE '%band table read%') AS band_scan_lines
FROM minhash_explain('st', (SELECT body FROM st WHERE id = 50), k => 10) line;
SELECT bool_and(s.id % 2 = 0) AS only_visible, count(*) AS found
FROM minhash_similar('st', (SELECT body FROM st WHERE id = 50), k => 10) s;
RESET ROLE;
ALTER TABLE st DISABLE ROW LEVEL SECURITY;
-- 4. a store of other settings, or of another function of that name, is not this index's
CREATE INDEX st_other ON st USING minhash_sketch (minhash_sketch(body, 3, 'char'));
CREATE FUNCTION pg_temp.minhash_sketch(text, int, text) RETURNS bytea IMMUTABLE LANGUAGE sql
    AS $$ SELECT '\x00'::bytea $$;
SELECT count(*) AS stores FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'st'::regclass AND a.amname = 'minhash_sketch';
DROP INDEX st_other;
-- 5. a second index of the same text, ngram and unit shares the store; the store goes with
-- the last index that needs it, and minhash_index_rebuild makes a missing one
SELECT minhash_index_create('st', 'id', 'body', threshold => 0.6) IS NOT NULL AS second;
SELECT count(*) AS stores FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'st'::regclass AND a.amname = 'minhash_sketch';
SELECT minhash_index_drop(band_table) FROM minhash_indexes WHERE tbl = 'st'::regclass AND threshold = 0.6;
SELECT count(*) AS stores FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'st'::regclass AND a.amname = 'minhash_sketch';
DO $$ BEGIN EXECUTE (SELECT format('DROP INDEX %s', i.indexrelid::regclass) FROM pg_index i
    JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
    WHERE i.indrelid = 'st'::regclass AND a.amname = 'minhash_sketch'); END $$;
SELECT count(*) FILTER (WHERE line LIKE '%sketch store%') AS store_lines
FROM minhash_explain('st', (SELECT body FROM st WHERE id = 50), k => 10) line;
SELECT minhash_index_rebuild('st') > 0 AS rebuilt;
SELECT count(*) FILTER (WHERE line LIKE '%sketch store%') AS store_lines
FROM minhash_explain('st', (SELECT body FROM st WHERE id = 50), k => 10) line;
SELECT minhash_index_drop('st');
SELECT count(*) AS stores FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = 'st'::regclass AND a.amname = 'minhash_sketch';
-- 6. a partitioned table: the store is made on the parent, so on every partition, and on one
-- attached later
CREATE TABLE stp (id int, body text, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE stp1 PARTITION OF stp FOR VALUES FROM (0) TO (800);
CREATE TABLE stp2 PARTITION OF stp FOR VALUES FROM (800) TO (1300);
INSERT INTO stp SELECT id, body FROM st WHERE id < 1300;
SELECT minhash_index_create('stp', 'id', 'body') IS NOT NULL AS created;
CREATE TABLE stp3 PARTITION OF stp FOR VALUES FROM (1300) TO (5000);
INSERT INTO stp SELECT id, body FROM st WHERE id >= 1300;
SELECT c.relname AS partition, count(i.indexrelid) AS stores
FROM pg_class c LEFT JOIN pg_index i ON i.indrelid = c.oid
     AND (SELECT a.amname FROM pg_class x JOIN pg_am a ON a.oid = x.relam WHERE x.oid = i.indexrelid) = 'minhash_sketch'
WHERE c.relname IN ('stp1', 'stp2', 'stp3') GROUP BY c.relname ORDER BY 1;
WITH probe AS (SELECT body FROM st WHERE id = 50),
truth AS (SELECT s.id, jaccard(s.body, (SELECT body FROM probe)) AS similarity FROM stp s
          ORDER BY 2 DESC, 1 LIMIT 10)
SELECT count(*) AS top10_matching
FROM minhash_similar('stp', (SELECT body FROM probe), k => 10) f JOIN truth t ON t.id = f.id AND t.similarity = f.similarity;
SELECT count(*) FILTER (WHERE line LIKE '%sketch store%') AS store_lines
FROM minhash_explain('stp', (SELECT body FROM st WHERE id = 50), k => 10) line;
DROP TABLE stp;
DROP TABLE st;
DROP ROLE regress_store_reader;
