-- Deduplication: connected clusters and keep-one groups (mode 'representative'), priority
-- orders, the array forms over ids of any type, typed results of an index, errors.
SET client_min_messages = warning;

-- try_hint(q): as try(q), with the error's HINT.
CREATE FUNCTION try_hint(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    hint text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN others THEN
    GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (HINT: ' || nullif(hint, '') || ')', '');
END $$;

-- A chain: b is a near-duplicate of a, c of b, but c is not one of a.
CREATE TABLE chain (id int PRIMARY KEY, body text);
INSERT INTO chain VALUES
  (1, md5('a') || md5('b') || md5('c')),
  (2, md5('a') || md5('b') || left(md5('c'), 26) || 'zzzzzz'),
  (3, 'yyyyyy' || right(md5('a'), 26) || md5('b') || left(md5('c'), 26) || 'zzzzzz');
SELECT x.id AS id_a, y.id AS id_b, round(jaccard(x.body, y.body)::numeric, 4) AS similarity
FROM chain x JOIN chain y ON x.id < y.id ORDER BY 1, 2;
SELECT minhash_index_create('chain', 'id', 'body', threshold => 0.8);
SELECT * FROM minhash_duplicates('chain');
-- Connected components chain: 3 is in 1's cluster although J(1, 3) < 0.8.
SELECT * FROM minhash_clusters('chain');
-- Keep-one groups: 1 is kept (ascending id) and takes 2; 3 is like no kept row, so it is
-- kept alone and not listed.
SELECT * FROM minhash_clusters('chain', mode => 'representative');
-- Kept first, 2 takes both.
SELECT * FROM minhash_clusters('chain', mode => 'representative', priority => 'id = 2 DESC');
-- Every member is at the threshold or above to its kept row.
SELECT bool_and(jaccard(m.body, k.body) >= 0.8) AS members_like_kept_row
FROM minhash_clusters('chain', mode => 'representative') c
JOIN chain m ON m.id = c.id JOIN chain k ON k.id = c.cluster_id;
-- The keep-one DELETE leaves one row of each group, and nothing unlike it deleted.
BEGIN;
DELETE FROM chain WHERE id IN
  (SELECT id FROM minhash_clusters('chain', mode => 'representative') WHERE id <> cluster_id);
SELECT id FROM chain ORDER BY id;
ROLLBACK;

-- Priority: which row of a group is kept.
CREATE TABLE posts (id bigint PRIMARY KEY, body text, created_at date);
INSERT INTO posts VALUES
  (1, 'How do I reverse a string in Python?', '2024-03-01'),
  (2, 'How do I reverse a string in Python? Thanks', '2024-01-01'),
  (3, 'How do I reverse a string in Python? Thanks a lot!', '2024-02-01'),
  (4, 'What is the capital of France?', '2024-01-15'),
  (5, 'what is the capital of France?!', '2023-12-31'),
  (6, 'Something else entirely', NULL);
SELECT minhash_index_create('posts', 'id', 'body', threshold => 0.6);
SELECT * FROM minhash_clusters('posts');
SELECT * FROM minhash_clusters('posts', 0.6, 'representative');
-- oldest first
SELECT * FROM minhash_clusters('posts', mode => 'representative', priority => 'created_at');
-- longest first (ties by id)
SELECT * FROM minhash_clusters('posts', mode => 'representative', priority => 'length(body) DESC');
-- NULLs last, and an expression over several columns
SELECT * FROM minhash_clusters('posts', mode => 'representative',
                               priority => 'created_at DESC NULLS LAST, length(body)');

-- The old call forms still pick the bigint functions.
SELECT pg_typeof(id_a), count(*) FROM minhash_duplicates('posts') GROUP BY 1;
SELECT pg_typeof(id_a), count(*) FROM minhash_duplicates('posts', 0.9) GROUP BY 1;
SELECT pg_typeof(id), count(*) FROM minhash_clusters('posts') GROUP BY 1;
SELECT pg_typeof(id), count(*) FROM minhash_clusters('posts', 0.9) GROUP BY 1;
SELECT pg_typeof(id), count(*) FROM minhash_clusters('posts', threshold => NULL) GROUP BY 1;
-- A quoted or NULL threshold in second place could also be a typed call's id_type witness.
SELECT try($$SELECT * FROM minhash_duplicates('posts', NULL)$$);

-- Typed results: ids in the key's own type, given by a witness of it. A witness of a numeric
-- type is passed by name: in second place it is taken for the threshold (float8 wins).
SELECT *, pg_typeof(id_a) FROM minhash_duplicates('posts', id_type => NULL::bigint);
SELECT *, pg_typeof(id) FROM minhash_clusters('posts', id_type => NULL::bigint,
                                               mode => 'representative', priority => 'created_at');
SELECT *, pg_typeof(id) FROM minhash_clusters('chain', id_type => NULL::int);
SELECT *, pg_typeof(id) FROM minhash_clusters('chain', NULL::int);
SELECT try_hint(q) FROM unnest(ARRAY[
  $$SELECT * FROM minhash_duplicates('posts', id_type => NULL::int)$$,
  $$SELECT * FROM minhash_clusters('chain', NULL::uuid)$$,
  $$SELECT * FROM minhash_clusters('chain', NULL::text, 0.5)$$
]) q;
-- An index whose key column is now text (the DDL trigger, which refuses this, is off).
CREATE TABLE tickets (id int PRIMARY KEY, body text);
INSERT INTO tickets VALUES (1, 'printer on floor 2 is out of toner'), (2, 'printer on floor 2 is out of toner!');
SELECT minhash_index_create('tickets', 'id', 'body');
ALTER EVENT TRIGGER minhash_ddl_altered DISABLE;
ALTER TABLE tickets ALTER COLUMN id TYPE text USING 'T-' || id;
ALTER EVENT TRIGGER minhash_ddl_altered ENABLE;
SELECT try_hint(q) FROM unnest(ARRAY[
  $$SELECT * FROM minhash_duplicates('tickets')$$,
  $$SELECT * FROM minhash_clusters('tickets', 0.5)$$,
  $$SELECT * FROM minhash_duplicates('tickets', NULL::int)$$
]) q;
SELECT *, pg_typeof(id_a) FROM minhash_duplicates('tickets', NULL::text);
SELECT * FROM minhash_clusters('tickets', NULL::text, mode => 'representative');
-- and numeric: the hint passes the witness by name
ALTER EVENT TRIGGER minhash_ddl_altered DISABLE;
ALTER TABLE tickets ALTER COLUMN id TYPE numeric USING substr(id, 3)::numeric / 10;
ALTER EVENT TRIGGER minhash_ddl_altered ENABLE;
SELECT try_hint($$SELECT * FROM minhash_duplicates('tickets')$$);
SELECT *, pg_typeof(id_a) FROM minhash_duplicates('tickets', id_type => NULL::numeric);
DROP TABLE tickets;

-- Without an index: arrays of ids of any type and of texts.
SELECT * FROM minhash_duplicates(ARRAY[3, 1, 2], ARRAY['the same old text', 'the same old text', 'the same old text!']);
-- uuid ids
SELECT * FROM minhash_clusters(
  ARRAY['00000000-0000-0000-0000-00000000000b', '00000000-0000-0000-0000-00000000000a',
        '00000000-0000-0000-0000-00000000000c']::uuid[],
  ARRAY['near duplicate texts here', 'near duplicate texts here!', 'near duplicate texts here?']);
-- text ids, mixed case and needing quotes: ordered as ORDER BY orders them
SELECT * FROM minhash_duplicates(
  ARRAY['b', 'B', 'O''Brien', 'a "quoted" id', ' space', 'Zed'],
  ARRAY['a question about sorting', 'a question about sorting!', 'a question about sorting?',
        'a question about sorting.', 'a question about sorting', 'unrelated']);
SELECT * FROM minhash_clusters(
  ARRAY['b', 'B', 'O''Brien', 'a "quoted" id', ' space', 'Zed'],
  ARRAY['a question about sorting', 'a question about sorting!', 'a question about sorting?',
        'a question about sorting.', 'a question about sorting', 'unrelated']);
-- numeric ids: numeric order, not text order
SELECT * FROM minhash_clusters(ARRAY[10, 2, 1.5, -3]::numeric[],
  ARRAY['four copies of one text', 'four copies of one text', 'four copies of one text', 'four copies of one text']);
-- Mode 'representative' keeps rows in array order: here the oldest of each group.
SELECT * FROM minhash_clusters(
  (SELECT array_agg(id ORDER BY created_at, id) FROM posts),
  (SELECT array_agg(body ORDER BY created_at, id) FROM posts),
  0.6, mode => 'representative');
-- NULL and empty texts are skipped, as the index skips them; a NULL id goes with a NULL text.
SELECT * FROM minhash_duplicates(ARRAY[1, 2, 3, 4, NULL], ARRAY['same text', NULL, '', 'same text', NULL]);
SELECT * FROM minhash_duplicates('{}'::int[], '{}'::text[]);
-- other settings
SELECT * FROM minhash_duplicates(ARRAY[1, 2], ARRAY['one two three four', 'one two three four five'],
                                 threshold => 0.5, k => 64, ngram => 2, unit => 'word');

-- Per-group deduplication: one call per category (LATERAL).
CREATE TABLE docs (id int PRIMARY KEY, category text, body text);
INSERT INTO docs VALUES
  (1, 'faq', 'How do I reset my password?'),
  (2, 'faq', 'How do I reset my password??'),
  (3, 'faq', 'Where is my invoice?'),
  (4, 'news', 'How do I reset my password?'),
  (5, 'news', 'Office closed on Friday'),
  (6, 'news', 'Office closed on Friday!');
SELECT g.category, d.*
FROM (SELECT category, array_agg(id ORDER BY id) ids, array_agg(body ORDER BY id) texts
      FROM docs GROUP BY category) g,
     LATERAL minhash_duplicates(g.ids, g.texts, 0.8) d
ORDER BY 1, 2, 3;
-- over a query: a subset, as ids of their own type
SELECT d.* FROM (SELECT array_agg(id) ids, array_agg(body) texts FROM docs WHERE id <> 1) s,
     LATERAL minhash_clusters(s.ids, s.texts) d;

-- Errors
SELECT try(q) FROM unnest(ARRAY[
  $$SELECT * FROM minhash_duplicates(ARRAY[1, 2], ARRAY['a'])$$,
  $$SELECT * FROM minhash_clusters(ARRAY[1], ARRAY['a', 'b'])$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[1, NULL], ARRAY['a', 'b'])$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[1, 1], ARRAY['a', 'b'])$$,
  $$SELECT * FROM minhash_clusters(ARRAY['x', 'y', 'x'], ARRAY['a', NULL, NULL])$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[[1, 2], [3, 4]], ARRAY['a', 'b', 'c', 'd'])$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[1, 2], ARRAY[['a', 'b']])$$,
  $$SELECT * FROM minhash_duplicates(ARRAY['{}'::json, '[]'], ARRAY['a', 'b'])$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[1, 2], ARRAY['a', 'b'], threshold => 0)$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[1, 2], ARRAY['a', 'b'], k => 0)$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[1, 2], ARRAY['a', 'b'], unit => 'line')$$,
  $$SELECT * FROM minhash_duplicates(ARRAY[1, 2], ARRAY['a', 'b'], threshold => 0.01, k => 1)$$,
  $$SELECT * FROM minhash_clusters(ARRAY[1, 2], ARRAY['a', 'b'], mode => 'components')$$,
  $$SELECT * FROM minhash_clusters('posts', mode => 'Representative')$$,
  $$SELECT * FROM minhash_clusters('posts', mode => NULL)$$,
  $$SELECT * FROM minhash_clusters('posts', priority => 'created_at')$$,
  $$SELECT * FROM minhash_clusters('posts', NULL::bigint, priority => 'created_at')$$,
  $$SELECT * FROM minhash_clusters('posts', mode => 'representative', priority => 'no_such_column')$$,
  $$SELECT * FROM minhash_clusters('posts', mode => 'representative', priority => 'created_at LIMIT')$$,
  $$SELECT * FROM minhash_clusters('posts', 2, 'representative')$$
]) q;
-- NULL arrays: no rows (the functions are STRICT)
SELECT count(*) FROM minhash_duplicates(NULL::int[], ARRAY['a']);

-- minhash_duplicates streams: 5,000 copies of one text make 12,497,500 pairs, and LIMIT 10
-- reads ten of them, without a temporary file (the limit below would refuse one), in FROM and
-- in the typed form alike.
CREATE TABLE copies (id bigint PRIMARY KEY, key text UNIQUE, body text);
INSERT INTO copies SELECT g, 'k' || g, 'the very same text, copied over and over' FROM generate_series(1, 5000) g;
SELECT minhash_index_create('copies', 'id', 'body') IS NOT NULL AS created;
SET work_mem = '64kB';
SET temp_file_limit = '128kB';
SELECT * FROM minhash_duplicates('copies') LIMIT 3;
SELECT * FROM minhash_duplicates('copies', NULL::bigint) LIMIT 2;
SELECT count(*) FROM (SELECT * FROM minhash_duplicates('copies') LIMIT 100000) d;
EXPLAIN (COSTS OFF) SELECT * FROM minhash_duplicates('copies') LIMIT 10;
RESET temp_file_limit;
RESET work_mem;
SELECT minhash_index_create('copies', 'key', 'body') IS NOT NULL AS second_index;
SELECT * FROM minhash_duplicates('copies_minhash_bands1', NULL::text) LIMIT 2;

DROP TABLE chain, posts, docs, copies;
DROP FUNCTION try_hint(text);
