-- Run by every other role of tests/hostile_install/run.sh (an unprivileged owner, a reader and a
-- superuser), with the installer's schema `evil` first on the search path: every function
-- users call, every write path of an indexed table, and the maintenance calls. None may run
-- anything planted there (plant.sql). (This script's own expressions are qualified, as any
-- SQL run with a schema of someone else's on the path must be: what it tests is the
-- extension's SQL.)
\set ON_ERROR_STOP 1
\set tbl :role.docs
\set parts :role.parts
\set q7 'question 7 about the compiler of machine 89 which fails on boot number 7'
SET client_min_messages = warning;
-- the role's table, written before the installer's schema is on the path
SET search_path = pg_catalog;
DROP SCHEMA IF EXISTS :"role" CASCADE;
CREATE SCHEMA :"role";
CREATE TABLE :"role".docs (id bigint PRIMARY KEY, body text, dup bigint, tag text);
INSERT INTO :"role".docs (id, body, tag)
SELECT g, 'question ' || g || ' about the ' || (ARRAY['kernel', 'compiler', 'network', 'disk'])[g % 4 + 1]
          || ' of machine ' || (g * 7919 % 101) || ' which fails on boot number ' || (g % 13),
       (ARRAY['a', 'b'])[g % 2 + 1]
FROM generate_series(1, 300) g;
CREATE TABLE :"role".more AS SELECT 1000 + id AS id, body || ' again' AS body FROM :"role".docs WHERE id <= 20;
CREATE TABLE :"role".parts (id bigint, body text, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE :"role".parts_1 PARTITION OF :"role".parts FOR VALUES FROM (0) TO (1000);
INSERT INTO :"role".parts SELECT id, body FROM :"role".docs WHERE id < 1000;

SET search_path = evil, public;
SELECT minhash_index_create(:'tbl', 'id', 'body') IS NOT NULL AS created;
CREATE TRIGGER docs_flag BEFORE INSERT OR UPDATE ON :"role".docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.6', 'flag');
-- the write paths: several rows, upsert, writable CTE, update, delete, COPY
INSERT INTO :"role".docs (id, body) SELECT id, body FROM :"role".more;
INSERT INTO :"role".docs (id, body) VALUES (2000, 'question 5 about the network of machine 39 which fails on boot number 5')
    ON CONFLICT (id) DO UPDATE SET body = excluded.body;
WITH d AS (DELETE FROM :"role".docs WHERE id OPERATOR(pg_catalog.=) ANY (ARRAY[1001, 1002]) RETURNING *)
INSERT INTO :"role".docs (id, body) SELECT pg_catalog.int8pl(d.id, 5000), d.body FROM d;
UPDATE :"role".docs SET body = pg_catalog.textcat(body, ' edited') WHERE pg_catalog.int8mod(id, 17) OPERATOR(pg_catalog.=) 0;
DELETE FROM :"role".docs WHERE pg_catalog.int8mod(id, 23) OPERATOR(pg_catalog.=) 0;
COPY :"role".docs (id, body) FROM STDIN;
4000	question 11 about the disk of machine 64 which fails on boot number 11 copied
\.
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS flagged FROM :"role".docs WHERE dup IS NOT NULL;
-- lookups, both id forms
SELECT pg_catalog.count(*) AS similar FROM minhash_similar(:'tbl', :'q7');
SELECT pg_catalog.count(*) AS similar FROM minhash_similar(:'tbl', 'question 7 about the compiler', threshold => 0.3);
SELECT pg_catalog.count(*) AS nearest FROM minhash_similar(:'tbl', 'question 7 about the compiler', k => 3);
SELECT pg_catalog.count(*) AS among FROM minhash_similar(:'tbl', 'question 7 about the compiler', k => 3,
    among => ARRAY(SELECT id FROM :"role".docs WHERE tag OPERATOR(pg_catalog.=) 'a'));
SELECT pg_catalog.count(*) AS typed FROM minhash_similar(:'tbl', :'q7', NULL::bigint);
SELECT pg_catalog.count(*) AS matches FROM minhash_matches(:'tbl', ARRAY[:'q7', 'nothing like it']);
SELECT pg_catalog.count(*) AS matches FROM minhash_matches(:'tbl', ARRAY[:'q7'], NULL::bigint, k => 2);
SELECT pg_catalog.count(*) AS explained FROM minhash_explain(:'tbl', :'q7');
SELECT pg_catalog.count(*) AS explained FROM minhash_explain(:'tbl', :'q7', k => 5);
-- whole-table searches, both id forms and modes
SELECT pg_catalog.count(*) AS pairs FROM minhash_duplicates(:'tbl');
SELECT pg_catalog.count(*) AS pairs FROM minhash_duplicates(:'tbl', NULL::bigint, 0.7);
SELECT pg_catalog.count(*) AS clusters FROM minhash_clusters(:'tbl');
SELECT pg_catalog.count(*) AS clusters FROM minhash_clusters(:'tbl', mode => 'representative', priority => 'id DESC');
SELECT pg_catalog.count(*) AS clusters FROM minhash_clusters(:'tbl', NULL::bigint, 0.7);
-- maintenance: check, stats, conversion both ways, rebuild
SELECT * FROM minhash_index_check(:'tbl');
SELECT pg_catalog.count(*) AS stats FROM minhash_index_stats(:'tbl');
SELECT minhash_index_rebuild(:'tbl', format => 2);
INSERT INTO :"role".docs (id, body) VALUES (3000, 'question 9 about the kernel of machine 90 which fails on boot number 9 again');
SELECT * FROM minhash_index_check(:'tbl');
SELECT minhash_index_rebuild(:'tbl', format => 1);
SELECT minhash_index_rebuild(:'tbl');
-- partitions and the DDL the event triggers follow
SELECT minhash_index_create(:'parts', 'id', 'body', format => 2) IS NOT NULL AS created;
CREATE TABLE :"role".parts_2 PARTITION OF :"role".parts FOR VALUES FROM (1000) TO (10000);
INSERT INTO :"role".parts SELECT id, body FROM :"role".docs WHERE id OPERATOR(pg_catalog.>=) 1000;
ALTER TABLE :"role".parts DETACH PARTITION :"role".parts_2;
DROP TABLE :"role".parts_2;
SELECT * FROM minhash_index_check(:'parts');
TRUNCATE :"role".parts;
SELECT minhash_index_drop(:'parts');
-- the pure functions
SELECT minhash('a text of some words', 64, 3);
SELECT lsh_bands(minhash('a text of some words'), 16);
SELECT jaccard('a text of some words', 'a text of some other words');
SELECT * FROM shingles('a text of some words');
SELECT minhash_similarity(minhash('a text'), minhash('a text'));
SELECT lsh_probability(0.8, 16, 8);
SELECT * FROM lsh_params(0.8, 128);
SELECT * FROM minhash_components(ARRAY[1, 2, 4]::bigint[], ARRAY[2, 3, 5]::bigint[]);
SELECT minhash_format_version();
SELECT * FROM minhash_duplicates(ARRAY[1, 2, 3]::bigint[], ARRAY['a text of some words', 'a text of some words', 'else']);
SELECT * FROM minhash_clusters(ARRAY[1, 2, 3]::bigint[], ARRAY['a text of some words', 'a text of some words', 'else']);
SELECT minhash_index_drop(:'tbl', cascade => true);
SET search_path = pg_catalog;
DROP SCHEMA :"role" CASCADE;
