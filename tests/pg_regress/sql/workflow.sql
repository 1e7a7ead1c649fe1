-- The SQL-join deduplication workflow, end to end, on a small fixed set of questions.
CREATE TABLE questions (id int PRIMARY KEY, body text NOT NULL);
INSERT INTO questions VALUES
  (1,  'How do I reverse a string in Python?'),
  (2,  'How do I reverse a string in python'),
  (3,  'How do I reverse a list in Python?'),
  (4,  'What is the capital of France?'),
  (5,  'What is the capital city of France?'),
  (6,  'Who was the first king of Poland?'),
  (7,  'Who was the first king of Poland ?'),
  (8,  'How do I sort a dictionary by value?'),
  (9,  'How do I sort a dictionary by its value?'),
  (10, 'Why is the sky blue?'),
  (11, 'why   is the SKY blue?'),
  (12, 'How many legs does a spider have?');

-- 1. One row per (document, band key): 32 bands of 4 rows of a 128-slot signature.
CREATE TABLE question_bands AS
SELECT id, unnest(lsh_bands(minhash(body), 32)) AS key FROM questions;

-- 2. A btree index on the key makes candidate lookup an index join.
CREATE INDEX question_bands_key ON question_bands (key);
ANALYZE question_bands;
SELECT count(*) AS band_rows, count(DISTINCT key) AS distinct_keys FROM question_bands;

-- 3. Candidates: pairs sharing at least one band key.
CREATE TEMP TABLE candidates AS
SELECT DISTINCT a.id AS id_a, b.id AS id_b
FROM question_bands a JOIN question_bands b ON a.key = b.key AND a.id < b.id;

-- 4. Verification with exact Jaccard: the near-duplicates at 0.6.
SELECT c.id_a, c.id_b, round(jaccard(qa.body, qb.body)::numeric, 3) AS similarity
FROM candidates c
JOIN questions qa ON qa.id = c.id_a
JOIN questions qb ON qb.id = c.id_b
WHERE jaccard(qa.body, qb.body) >= 0.6
ORDER BY c.id_a, c.id_b;

-- Brute force over all pairs finds the same pairs: banding lost nothing here.
SELECT a.id AS id_a, b.id AS id_b
FROM questions a JOIN questions b ON a.id < b.id
WHERE jaccard(a.body, b.body) >= 0.6
EXCEPT
SELECT id_a, id_b FROM candidates
ORDER BY 1, 2;

-- 5. Keep one row per group: delete every row with a smaller-id near-duplicate.
BEGIN;
DELETE FROM questions q
WHERE EXISTS (
  SELECT 1 FROM candidates c JOIN questions keep ON keep.id = c.id_a
  WHERE c.id_b = q.id AND jaccard(keep.body, q.body) >= 0.6);
SELECT id, body FROM questions ORDER BY id;
ROLLBACK;

-- "What is similar to this text?": one lookup uses the btree index.
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT DISTINCT b.id
FROM unnest(lsh_bands(minhash('how do i reverse a string in python'), 32)) q(key)
JOIN question_bands b ON b.key = q.key;
RESET enable_seqscan;

SELECT q.id, round(jaccard(q.body, 'how do I reverse a String in Python')::numeric, 3) AS similarity
FROM questions q
WHERE q.id IN (
  SELECT b.id FROM question_bands b
  WHERE b.key = ANY (lsh_bands(minhash('how do I reverse a String in Python'), 32)))
ORDER BY similarity DESC, q.id;

DROP TABLE question_bands, questions;
