-- Whole-table searches on several threads (1 + max_parallel_workers_per_gather, at most
-- max_parallel_workers): the same pairs and clusters as on one, equal to verifying every
-- candidate of the band table; typed ids and the array forms too; the same from temporary
-- files under a small maintenance_work_mem; a cancel during a threaded search is served and
-- leaves the session usable.
SET client_min_messages = warning;

-- Form letters (one template, a number in each: crowded buckets whose rows are partly above,
-- partly below the threshold), near-duplicate pairs of random texts, and copies.
CREATE TABLE letters (id bigint PRIMARY KEY, body text);
INSERT INTO letters
SELECT g, 'Dear customer, your order number ' || (g * 7919 % 100000)::text ||
          ' has been shipped and will arrive within three to five working days.'
FROM generate_series(1, 600) g;
INSERT INTO letters
SELECT 1000 + g, repeat(md5(g::text), 3) FROM generate_series(1, 1500) g;
INSERT INTO letters
SELECT 3000 + g, repeat(md5(g::text), 3) || 'x' FROM generate_series(1, 1500, 3) g;
INSERT INTO letters
SELECT 5000 + (id - 1000) * 10 + g, body FROM letters, generate_series(1, 3) g
WHERE id BETWEEN 1001 AND 1100;
SELECT count(*) FROM letters;
-- (format 1: one band row per key, which the expected pairs below join on)
SELECT minhash_index_create('letters', 'id', 'body', threshold => 0.8, format => 1);

-- the pairs of the band table's candidates, verified exactly
CREATE TABLE expected AS
WITH candidates AS (
    SELECT DISTINCT a.id AS id_a, b.id AS id_b
    FROM letters_minhash_bands a JOIN letters_minhash_bands b ON b.key = a.key AND a.id < b.id)
SELECT c.* FROM candidates c JOIN letters x ON x.id = c.id_a JOIN letters y ON y.id = c.id_b
WHERE jaccard(x.body, y.body) >= 0.8;
SELECT count(*) AS expected_pairs FROM expected;

CREATE FUNCTION searched(workers int) RETURNS TABLE (per_gather int, pairs bigint, pair_sum bigint,
    missing bigint, clustered bigint, clusters bigint, cluster_sum bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('max_parallel_workers_per_gather', workers::text, true);
    RETURN QUERY
    SELECT workers,
           (SELECT count(*) FROM minhash_duplicates('letters')),
           (SELECT sum(d.id_a * 10007 + d.id_b)::bigint FROM minhash_duplicates('letters') d),
           (SELECT count(*) FROM expected e WHERE NOT EXISTS (
                SELECT FROM minhash_duplicates('letters') d
                WHERE d.id_a = e.id_a AND d.id_b = e.id_b)),
           (SELECT count(*) FROM minhash_clusters('letters')),
           (SELECT count(DISTINCT c.cluster_id) FROM minhash_clusters('letters') c),
           (SELECT sum(c.id * 10007 + c.cluster_id)::bigint FROM minhash_clusters('letters') c);
END $$;
BEGIN;
SET LOCAL max_parallel_workers = 8;
SELECT * FROM searched(0);
SELECT * FROM searched(1);
SELECT * FROM searched(3);
-- the pool's limit caps the threads: 1 + min(3, 1) = 2
SET LOCAL max_parallel_workers = 1;
SELECT * FROM searched(3);
COMMIT;

-- Within a budget (maintenance_work_mem times pg_minhash.search_mem_multiplier, 1 from here
-- on) that the texts and band keys pass half of, the keys go to temporary files (the texts
-- past a quarter: not these) and the bands are searched one at a time: the same pairs and
-- clusters.
SET pg_minhash.search_mem_multiplier = 1;
SHOW pg_minhash.search_mem_multiplier;
BEGIN;
SET LOCAL max_parallel_workers = 8;
SET LOCAL maintenance_work_mem = '1MB';
SELECT * FROM searched(0);
SELECT * FROM searched(3);
SELECT count(*), sum(id * 10007 + cluster_id) FROM minhash_clusters('letters', mode => 'representative');
-- (the move is said at DEBUG1, once per search)
SET LOCAL client_min_messages = debug1;
SELECT count(*) FROM minhash_duplicates((SELECT array_agg(id ORDER BY id) FROM letters),
                                        (SELECT array_agg(body ORDER BY id) FROM letters));
COMMIT;

-- Texts that pass half the budget alone move too (after the keys): 4,000 texts of 193 bytes,
-- the same 2,000 pairs as in memory.
CREATE TABLE long_texts AS
SELECT array_agg(g ORDER BY g) AS ids,
       array_agg(repeat(md5((g / 2)::text), 6) || (g % 2)::text ORDER BY g) AS texts
FROM generate_series(1, 4000) g;
BEGIN;
SET LOCAL maintenance_work_mem = '1MB';
SELECT count(*), sum(hashint8(id_a) # hashint8(id_b)) FROM long_texts, minhash_duplicates(ids, texts);
-- (again, to see the moves: the catalog caches are warm)
SET LOCAL client_min_messages = debug1;
SELECT count(*) FROM long_texts, minhash_duplicates(ids, texts);
SET LOCAL client_min_messages = warning;
SET LOCAL maintenance_work_mem = '64MB';
SELECT count(*), sum(hashint8(id_a) # hashint8(id_b)) FROM long_texts, minhash_duplicates(ids, texts);
COMMIT;

-- The files of a search are held to temp_file_limit: 53400, as PostgreSQL's own.
SET maintenance_work_mem = '1MB';
SET temp_file_limit = '64kB';
SELECT count(*) FROM long_texts, minhash_duplicates(ids, texts);
RESET temp_file_limit;
RESET maintenance_work_mem;

-- keep-one groups run on one thread whatever the setting: the same groups
SELECT count(*), sum(id * 10007 + cluster_id) FROM minhash_clusters('letters', mode => 'representative');
SET max_parallel_workers_per_gather = 3;
SELECT count(*), sum(id * 10007 + cluster_id) FROM minhash_clusters('letters', mode => 'representative');

-- typed ids and the array forms, on one thread and on four
CREATE TABLE named (name text PRIMARY KEY, body text);
INSERT INTO named SELECT 'row ' || id, body FROM letters;
SELECT minhash_index_create('named', 'name', 'body', threshold => 0.8);
CREATE FUNCTION forms() RETURNS TABLE (what text, n bigint, checksum bigint)
LANGUAGE sql AS $$
SELECT 'named pairs', count(*), sum(hashtext(id_a) # hashtext(id_b))
FROM minhash_duplicates('named', NULL::text)
UNION ALL
SELECT 'named clusters', count(*), sum(hashtext(id) # hashtext(cluster_id))
FROM minhash_clusters('named', NULL::text)
UNION ALL
SELECT 'array pairs', count(*), sum(hashint8(id_a) # hashint8(id_b))
FROM minhash_duplicates((SELECT array_agg(id ORDER BY id) FROM letters),
                        (SELECT array_agg(body ORDER BY id) FROM letters))
UNION ALL
SELECT 'array clusters', count(*), sum(hashint8(id) # hashint8(cluster_id))
FROM minhash_clusters((SELECT array_agg(id ORDER BY id) FROM letters),
                      (SELECT array_agg(body ORDER BY id) FROM letters))
$$;
SET max_parallel_workers_per_gather = 0;
CREATE TABLE one_thread AS SELECT * FROM forms();
SET max_parallel_workers_per_gather = 3;
CREATE TABLE four_threads AS SELECT * FROM forms();
SELECT o.what, o.n, o.n = f.n AND o.checksum = f.checksum AS same_on_four_threads
FROM one_thread o JOIN four_threads f USING (what) ORDER BY 1;
-- and from temporary files
SET maintenance_work_mem = '1MB';
CREATE TABLE from_files AS SELECT * FROM forms();
RESET maintenance_work_mem;
SELECT o.what, o.n = f.n AND o.checksum = f.checksum AS same_from_files
FROM one_thread o JOIN from_files f USING (what) ORDER BY 1;

-- A cancel (statement_timeout) during a threaded search of 500,000 texts: 57014, and the
-- session goes on.
CREATE TABLE big AS
SELECT array_agg(g) AS ids,
       array_agg('question ' || (g % 1000)::text || ' about ' || md5(g::text)) AS texts
FROM generate_series(1, 500000) g;
CREATE FUNCTION cancelled(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'finished';
EXCEPTION WHEN query_canceled THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SET statement_timeout = '100ms';
SELECT cancelled('SELECT count(*) FROM big, minhash_clusters(big.ids, big.texts)');
SELECT cancelled('SELECT count(*) FROM big, minhash_duplicates(big.ids, big.texts)');
RESET statement_timeout;
SELECT count(*) FROM minhash_duplicates('letters');

DROP TABLE one_thread, four_threads, from_files, expected, big, long_texts;
DROP FUNCTION searched(int);
DROP FUNCTION cancelled(text);
DROP FUNCTION forms();
SELECT minhash_index_drop('named');
SELECT minhash_index_drop('letters');
DROP TABLE named, letters;
