-- Band table format 2 (docs/contract.md): one row per row, its band keys side by side, a
-- B-tree per band; where format is NULL, what pg_minhash.default_format says (setup.sql sets
-- it to 2 for this database), for at most 64 bands. Every answer equals that of a format 1
-- index (format => 1) of the same rows.
SET client_min_messages = warning;
CREATE TABLE f1 (id int PRIMARY KEY, body text, dup int);
CREATE TABLE f2 (id int PRIMARY KEY, body text, dup int);
INSERT INTO f1 SELECT g, format('How do I %s a %s in %s %s?', (ARRAY['sort','parse','merge','split'])[1 + g % 4],
    (ARRAY['list','table','file','string','date'])[1 + g % 5], (ARRAY['python','rust','bash'])[1 + g % 3], g % 97), NULL
FROM generate_series(1, 3000) g;
INSERT INTO f2 SELECT * FROM f1;
SELECT minhash_index_create('f1', 'id', 'body', format => 1);
SELECT minhash_index_create('f2', 'id', 'body');
SELECT i.tbl, i.format, i.bands,
       (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = i.band_table AND a.attnum > 0) AS columns,
       (SELECT count(*) FROM pg_index x WHERE x.indrelid = i.band_table) AS btrees,
       (SELECT count(*) FROM pg_class c WHERE c.oid = i.band_table) AS band_tables
FROM minhash_indexes i ORDER BY i.tbl::text;
SELECT count(*) AS rows_f2 FROM f2_minhash_bands;
SELECT (SELECT count(*) FROM f1_minhash_bands) = 16 * (SELECT count(*) FROM f2_minhash_bands) AS sixteen_times;
-- a lookup: the same rows and similarities, read through the B-trees and through SQL
CREATE FUNCTION pg_temp.same(q text, t float8 DEFAULT NULL) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ((SELECT * FROM minhash_similar('f1', q, t) EXCEPT ALL SELECT * FROM minhash_similar('f2', q, t))
                          UNION ALL
                          (SELECT * FROM minhash_similar('f2', q, t) EXCEPT ALL SELECT * FROM minhash_similar('f1', q, t))) d $$;
SELECT count(*) AS found FROM minhash_similar('f2', 'How do I sort a list in python 7?');
SELECT sum(pg_temp.same(body)) AS differences FROM f1 WHERE id % 50 = 1;
SELECT sum(pg_temp.same(body, 0.6)) AS differences_at_0_6 FROM f1 WHERE id % 50 = 1;
SELECT band_index, row_index FROM minhash_internal._minhash_direct_reads('f2');
BEGIN;
DROP INDEX f2_minhash_bands_key7_idx;
SELECT band_index, row_index FROM minhash_internal._minhash_direct_reads('f2');
SELECT sum(pg_temp.same(body)) AS differences_by_sql FROM f1 WHERE id % 50 = 1;
ROLLBACK;
SELECT line FROM minhash_explain('f2', 'How do I sort a list in python 7?') line WHERE line LIKE '%probed%';
-- every write keeps it exact
INSERT INTO f1 VALUES (5000, 'How do I sort a list in python 7?'), (5001, NULL), (5002, '');
INSERT INTO f2 VALUES (5000, 'How do I sort a list in python 7?'), (5001, NULL), (5002, '');
UPDATE f1 SET body = body || ' now' WHERE id % 7 = 0;
UPDATE f2 SET body = body || ' now' WHERE id % 7 = 0;
UPDATE f1 SET id = id + 10000 WHERE id % 11 = 0;
UPDATE f2 SET id = id + 10000 WHERE id % 11 = 0;
DELETE FROM f1 WHERE id % 13 = 0;
DELETE FROM f2 WHERE id % 13 = 0;
INSERT INTO f1 VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET body = 'How do I merge a file in bash?';
INSERT INTO f2 VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET body = 'How do I merge a file in bash?';
WITH d AS (DELETE FROM f1 WHERE id = 2 RETURNING id) INSERT INTO f1 SELECT id, 'How do I split a date in rust 2?' FROM d;
WITH d AS (DELETE FROM f2 WHERE id = 2 RETURNING id) INSERT INTO f2 SELECT id, 'How do I split a date in rust 2?' FROM d;
SELECT * FROM minhash_index_check('f1');
SELECT * FROM minhash_index_check('f2');
SELECT sum(pg_temp.same(body)) AS differences_after_writes FROM f1 WHERE id % 50 = 1;
-- the duplicate trigger, flagging and rejecting, through each format
CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON f1 FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON f2 FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
INSERT INTO f1 (id, body) VALUES (6000, 'How do I sort a list in python 7?') RETURNING id, dup IS NOT NULL AS flagged;
INSERT INTO f2 (id, body) VALUES (6000, 'How do I sort a list in python 7?') RETURNING id, dup IS NOT NULL AS flagged;
INSERT INTO f1 (id, body) VALUES (6001, 'Where can I buy cheap train tickets to Graz?') RETURNING id, dup IS NOT NULL AS flagged;
INSERT INTO f2 (id, body) VALUES (6001, 'Where can I buy cheap train tickets to Graz?') RETURNING id, dup IS NOT NULL AS flagged;
DROP TRIGGER flag ON f1;
DROP TRIGGER flag ON f2;
CREATE TRIGGER reject BEFORE INSERT OR UPDATE ON f1 FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', NULL, 'reject');
CREATE TRIGGER reject BEFORE INSERT OR UPDATE ON f2 FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', NULL, 'reject');
\set VERBOSITY sqlstate
-- a copy of row 6001: 23505
INSERT INTO f1 (id, body) VALUES (6002, 'Where can I buy cheap train tickets to Graz?');
INSERT INTO f2 (id, body) VALUES (6002, 'Where can I buy cheap train tickets to Graz?');
\set VERBOSITY default
INSERT INTO f1 (id, body) VALUES (6003, 'What is the capital of Austria?');
INSERT INTO f2 (id, body) VALUES (6003, 'What is the capital of Austria?');
DROP TRIGGER reject ON f1;
DROP TRIGGER reject ON f2;
SELECT * FROM minhash_index_check('f1');
SELECT * FROM minhash_index_check('f2');
-- rebuilt into the other format and back, exact each time
SELECT minhash_index_rebuild('f2', format => 1) > 0 AS rebuilt;
SELECT format FROM minhash_indexes WHERE tbl = 'f2'::regclass;
SELECT * FROM minhash_index_check('f2');
SELECT minhash_index_rebuild('f2', format => 2) > 0 AS rebuilt;
SELECT format, (SELECT count(*) FROM pg_index x WHERE x.indrelid = i.band_table) AS btrees
FROM minhash_indexes i WHERE tbl = 'f2'::regclass;
SELECT * FROM minhash_index_check('f2');
SELECT rows_indexed, keys FROM minhash_index_stats('f2');
SELECT rows_indexed, keys FROM minhash_index_stats('f1');
-- bad formats
\set VERBOSITY sqlstate
SELECT minhash_index_rebuild('f2', format => 3);
SELECT minhash_index_create('f1', 'id', 'body', bands => 128, format => 2);
\set VERBOSITY default
-- format NULL with pg_minhash.default_format = 2: 2 for at most 64 bands (on a table that is
-- not a Citus table), else 1
CREATE TABLE f3 (id int PRIMARY KEY, body text);
INSERT INTO f3 SELECT id, body FROM f1 WHERE id % 10 = 0;
SELECT minhash_index_create('f3', 'id', 'body', format => NULL) IS NOT NULL AS created;
SELECT minhash_index_create('f3', 'id', 'body', bands => 64, rows_per_band => 2, format => NULL) IS NOT NULL AS created;
SELECT minhash_index_create('f3', 'id', 'body', bands => 128, rows_per_band => 1, format => NULL) IS NOT NULL AS created;
SELECT i.bands, i.format, (SELECT count(*) FROM pg_index x WHERE x.indrelid = i.band_table) AS btrees,
       minhash_index_check(i.band_table) AS check
FROM minhash_indexes i WHERE tbl = 'f3'::regclass ORDER BY i.bands;
-- the setting: unset (or empty), format 1; not 1 or 2, 22023
CREATE TABLE f4 (id int PRIMARY KEY, body text);
SET pg_minhash.default_format = '';
SELECT minhash_index_create('f4', 'id', 'body') IS NOT NULL AS created;
SET pg_minhash.default_format = 1;
SELECT minhash_index_create('f4', 'id', 'body', ngram => 4) IS NOT NULL AS created;
SELECT ngram, format FROM minhash_indexes WHERE tbl = 'f4'::regclass ORDER BY ngram;
SET pg_minhash.default_format = 'two';
\set VERBOSITY sqlstate
SELECT minhash_index_create('f4', 'id', 'body', ngram => 3);
\set VERBOSITY default
RESET pg_minhash.default_format;
DROP TABLE f4;
SELECT minhash_index_drop('f1');
SELECT minhash_index_drop('f2');
DROP TABLE f1, f2, f3;
