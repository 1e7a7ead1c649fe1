-- The managed index: create it, ask the three questions users ask, look at its health.
SET client_min_messages = warning;  -- backfill progress NOTICEs carry timings

CREATE TABLE articles (id int PRIMARY KEY, title text NOT NULL, body text);
INSERT INTO articles VALUES
  (1,  'Python strings', 'How do I reverse a string in Python? I tried slicing but got confused.'),
  (2,  'Reverse a string', 'How do I reverse a string in Python? I tried slicing, but got confused.'),
  (3,  'Python lists', 'How do I reverse a list in Python? The reverse method returns None.'),
  (4,  'Capitals', 'What is the capital of France? Paris, I think, but I am not sure.'),
  (5,  'Capitals again', 'What is the capital of France? Paris I think but I am not sure!'),
  (6,  'Capital of france', 'what is the capital of france? paris, i think, but i am not sure.'),
  (7,  'Kings', 'Who was the first king of Poland? Was it Mieszko or Boleslaw?'),
  (8,  'Sky', 'Why is the sky blue? Something about scattering of sunlight.'),
  (9,  'Empty', ''),
  (10, 'Nothing', NULL),
  (11, 'Spaces', E' \t ');

-- One call: band table, B-trees, backfill, triggers, catalog row. With bands NULL it takes
-- the first recommendation of lsh_params(threshold, k); with format NULL, band table format 2:
-- a row per indexed row with its band keys side by side, a B-tree on the id and one per band.
SELECT minhash_index_create('articles', 'id', 'body', threshold => 0.8);
SELECT tbl, id_column, text_column, band_table, k, ngram, unit, threshold, bands, rows_per_band
FROM minhash_indexes;
\d articles_minhash_bands

-- NULL and empty texts carry no content and are not indexed.
SELECT count(DISTINCT id) AS rows_indexed, count(*) AS band_rows FROM articles_minhash_bands;
SELECT * FROM minhash_index_check('articles');

-- "What is similar to this text?" (exact Jaccard, most similar first)
SELECT * FROM minhash_similar('articles', 'How do I reverse a string in Python? I tried slicing but got confused!');
-- A lower threshold of its own (recall below the index's threshold falls: see lsh_probability).
SELECT * FROM minhash_similar('articles', 'What is the capital of France? Paris, I think, but I am not sure', threshold => 0.6);
SELECT * FROM minhash_similar('articles', 'What is the capital of France? Paris, I think, but I am not sure', 0.6, max_results => 1);
SELECT * FROM minhash_similar('articles', 'Nothing like any of them');
SELECT * FROM minhash_similar('articles', NULL);

-- "Which rows are near-duplicates?" (id_a < id_b, each pair once)
SELECT * FROM minhash_duplicates('articles');
SELECT count(*) AS pairs_at_0_5 FROM minhash_duplicates('articles', 0.5);

-- "Which rows should I keep?": clusters, named after their smallest id.
SELECT * FROM minhash_clusters('articles');

-- Clusters are the connected components of the verified pairs; minhash_components computes them
-- for any edge list:
-- a chain, a triangle, a lone pair; a self-loop alone is no cluster.
SELECT * FROM minhash_components('{5,3,20,21,22,1,7}', '{3,9,21,22,20,2,7}');

-- Deduplicating keeps one row per cluster.
BEGIN;
DELETE FROM articles WHERE id IN (SELECT id FROM minhash_clusters('articles') WHERE id <> cluster_id);
SELECT id, title FROM articles ORDER BY id;
SELECT * FROM minhash_index_check('articles');
ROLLBACK;

-- Health: rows, keys, buckets, the largest bucket and bucket sizes in power-of-two classes.
SELECT * FROM minhash_index_stats('articles');

-- The two queries minhash_similar and the insert trigger prepare: candidates with their
-- sketches, band i's through the B-tree on key<i>, then the texts of those the sketch keeps by
-- the table's primary key.
SELECT format('PREPARE %s(int8[]) AS %s', step, query) FROM minhash_internal._minhash_lookup_sql('articles') \gexec
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) EXECUTE bands(lsh_bands(minhash('some text'), 16, 6));
EXPLAIN (COSTS OFF) EXECUTE rows(ARRAY[1, 2]);
RESET enable_seqscan;
RESET enable_bitmapscan;
DEALLOCATE bands;
DEALLOCATE rows;
-- Of format 1 (format => 1, a row per indexed row and band): the candidates with their
-- sketches from its one B-tree (key, id) INCLUDE (sketch1, sketch2) alone.
SELECT minhash_index_rebuild('articles', format => 1) AS rows_read;
SELECT count(DISTINCT id) AS rows_indexed, count(*) AS band_rows FROM articles_minhash_bands;
SELECT format('PREPARE %s(int8[]) AS %s', step, query) FROM minhash_internal._minhash_lookup_sql('articles') \gexec
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) EXECUTE bands(lsh_bands(minhash('some text'), 16, 6));
RESET enable_seqscan;
RESET enable_bitmapscan;
DEALLOCATE bands;
DEALLOCATE rows;
SELECT * FROM minhash_similar('articles', 'How do I reverse a string in Python? I tried slicing but got confused!');
SELECT minhash_index_rebuild('articles', format => 2) AS rows_read;

-- 10,000 copies of one text form one cluster; a text is stored once however many rows have it,
-- so this costs one signature and no verification, rather than 50 million.
CREATE TABLE copies (id bigint PRIMARY KEY, body text);
INSERT INTO copies SELECT g, 'The same boilerplate disclaimer, over and over again.' FROM generate_series(1, 10000) g;
INSERT INTO copies VALUES (10001, 'The same boilerplate disclaimer, over and over again!!');
SELECT minhash_index_create('copies', 'id', 'body');
SELECT count(*) AS rows, count(DISTINCT cluster_id) AS clusters, min(cluster_id)
FROM minhash_clusters('copies');
SELECT minhash_index_drop('copies');
DROP TABLE copies;

-- Form letters: 1,500 rows of three templates with a number of 1 to 7 digits in each.
-- The texts of a template share most band keys, so buckets hold hundreds of distinct texts.
-- minhash_clusters joins them without verifying every candidate pair, and its clusters are
-- exactly the connected components of minhash_duplicates' pairs: at 0.8 the templates, at
-- 0.9 several clusters and texts that are near-duplicates of none (long numbers in short
-- letters).
CREATE TABLE letters (id bigint PRIMARY KEY, body text);
INSERT INTO letters
SELECT g, format((ARRAY['Dear customer, your order number %s has been shipped and will arrive within three to five working days.',
                        'Ticket %s was closed because we did not hear back from you.',
                        'How do I fix error %s when I run the installer on Windows?'])[1 + g % 3],
                 abs(hashint8(g)) % (10 ^ (1 + g % 7))::bigint)
FROM generate_series(1, 1500) g;
SELECT count(DISTINCT body) AS distinct_texts FROM letters;
SELECT minhash_index_create('letters', 'id', 'body');
SELECT largest_bucket >= 300 AS crowded FROM minhash_index_stats('letters');
SELECT t AS threshold, count(*) AS rows_in_clusters, count(DISTINCT cluster_id) AS clusters
FROM unnest(ARRAY[0.8, 0.9]::float8[]) t, minhash_clusters('letters', t) GROUP BY t ORDER BY t;
SELECT t AS threshold, (
  SELECT count(*) FROM (
    (SELECT * FROM minhash_clusters('letters', t)
     EXCEPT ALL
     SELECT c.* FROM (SELECT array_agg(id_a) AS a, array_agg(id_b) AS b
                      FROM minhash_duplicates('letters', t)) p, minhash_components(p.a, p.b) c)
    UNION ALL
    (SELECT c.* FROM (SELECT array_agg(id_a) AS a, array_agg(id_b) AS b
                      FROM minhash_duplicates('letters', t)) p, minhash_components(p.a, p.b) c
     EXCEPT ALL
     SELECT * FROM minhash_clusters('letters', t))) d) AS differences
FROM unnest(ARRAY[0.8, 0.9]::float8[]) t ORDER BY t;
SELECT minhash_index_drop('letters');
DROP TABLE letters;

-- Rebuilding from scratch gives the same band rows.
CREATE TEMP TABLE before AS SELECT * FROM articles_minhash_bands;
SELECT minhash_index_rebuild('articles') AS rows_read;
SELECT count(*) AS differences FROM (
  (TABLE before EXCEPT ALL TABLE articles_minhash_bands)
  UNION ALL
  (TABLE articles_minhash_bands EXCEPT ALL TABLE before)) d;

-- Dropping removes the band table, its triggers and the catalog row.
SELECT minhash_index_drop('articles');
SELECT count(*) FROM minhash_indexes;
SELECT to_regclass('articles_minhash_bands') IS NULL AS band_table_gone,
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'articles'::regclass) AS triggers;
DROP TABLE articles;

-- Lookups keep their prepared plan for the rest of the session; a table dropped and created
-- again under the same name, with other column types, is still looked up correctly.
CREATE TABLE replanned (id bigint PRIMARY KEY, body text);
INSERT INTO replanned VALUES (1, 'the plan cache is revalidated by postgres');
SELECT minhash_index_create('replanned', 'id', 'body') IS NOT NULL AS created;
SELECT * FROM minhash_similar('replanned', 'the plan cache is revalidated by postgres!');
SELECT minhash_index_drop('replanned');
DROP TABLE replanned;
CREATE TABLE replanned (id smallint PRIMARY KEY, body varchar(100));
INSERT INTO replanned VALUES (7, 'the plan cache is revalidated by postgres');
SELECT minhash_index_create('replanned', 'id', 'body') IS NOT NULL AS created;
SELECT * FROM minhash_similar('replanned', 'the plan cache is revalidated by postgres!');
