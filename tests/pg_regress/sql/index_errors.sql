-- Bad arguments to the managed-index functions: SQLSTATE and message of each.
SET client_min_messages = warning;

CREATE TABLE docs (id int PRIMARY KEY, body text, label text, n int, shared int);
CREATE TABLE pair_keys (a int, b int, body text, PRIMARY KEY (a, b));
CREATE TABLE array_keys (id int[] PRIMARY KEY, body text);
CREATE TABLE no_key (id int, body text);
CREATE VIEW docs_view AS SELECT * FROM docs;
CREATE MATERIALIZED VIEW docs_mat AS SELECT * FROM docs;
CREATE SEQUENCE docs_seq;

SELECT try(q) FROM unnest(ARRAY[
  $$SELECT minhash_index_create('no_such_table', 'id', 'body')$$,
  $$SELECT minhash_index_create('docs', 'nope', 'body')$$,
  $$SELECT minhash_index_create('docs', 'id', 'nope')$$,
  $$SELECT minhash_index_create('pair_keys', 'a', 'body')$$,
  $$SELECT minhash_index_create('array_keys', 'id', 'body')$$,
  $$SELECT minhash_index_create('no_key', 'id', 'body')$$,
  $$SELECT minhash_index_create('docs', 'shared', 'body')$$,
  $$SELECT minhash_index_create('docs', 'id', 'n')$$,
  $$SELECT minhash_index_create('docs_view', 'id', 'body')$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', threshold => 0)$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', threshold => 1.5)$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', k => 0)$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', ngram => 100)$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', unit => 'line')$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', bands => 20)$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', bands => 20, rows_per_band => 7)$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', rows_per_band => 4)$$,
  $$SELECT minhash_index_create('docs', 'id', 'body', k => 1, threshold => 0.5)$$,
  $$SELECT minhash_index_create('docs', NULL, 'body')$$,
  $$SELECT minhash_index_drop('docs')$$,
  $$SELECT minhash_index_rebuild('docs')$$,
  $$SELECT * FROM minhash_index_check('docs')$$,
  $$SELECT * FROM minhash_similar('docs', 'x')$$,
  $$SELECT * FROM minhash_duplicates('docs')$$,
  $$SELECT * FROM minhash_clusters('docs')$$,
  $$SELECT * FROM minhash_index_stats('docs')$$,
  $$SELECT * FROM minhash_internal._minhash_direct_reads('docs')$$,
  $$SELECT * FROM minhash_similar(NULL, 'x')$$
]) q;
-- A relation that cannot have an index: what it is, and what can (42809), from every call.
SELECT try(q) FROM unnest(ARRAY[
  $$SELECT * FROM minhash_similar('docs_view', 'x')$$,
  $$SELECT * FROM minhash_matches('docs_view', ARRAY['x'])$$,
  $$SELECT * FROM minhash_duplicates('docs_view')$$,
  $$SELECT * FROM minhash_clusters('docs_view')$$,
  $$SELECT * FROM minhash_index_check('docs_view')$$,
  $$SELECT * FROM minhash_index_stats('docs_view')$$,
  $$SELECT minhash_index_drop('docs_view')$$,
  $$SELECT minhash_index_create('docs_mat', 'id', 'body')$$,
  $$SELECT * FROM minhash_similar('docs_mat', 'x')$$,
  $$SELECT * FROM minhash_similar('docs_seq', 'x')$$,
  $$SELECT * FROM minhash_similar('docs_pkey', 'x')$$
]) q;

-- With an index: the same one again, and bad query arguments.
SELECT minhash_index_create('docs', 'id', 'body', bands => 32);
SELECT try(q) FROM unnest(ARRAY[
  $$SELECT minhash_index_create('docs', 'id', 'body', bands => 32)$$,
  $$SELECT * FROM minhash_similar('docs', 'x', threshold => 0)$$,
  $$SELECT * FROM minhash_similar('docs', 'x', threshold => 2)$$,
  $$SELECT * FROM minhash_similar('docs', 'x', max_results => 0)$$,
  $$SELECT * FROM minhash_similar('docs', 'x', NULL::text)$$,
  $$SELECT * FROM minhash_similar('docs', 'x', NULL::bigint)$$,
  $$SELECT * FROM minhash_matches('docs', ARRAY['x'], NULL::numeric)$$,
  $$SELECT * FROM minhash_matches('docs', ARRAY['x'], max_results => -1)$$,
  $$SELECT * FROM minhash_matches(NULL, ARRAY['x'])$$,
  $$SELECT * FROM minhash_duplicates('docs', -1)$$,
  $$SELECT * FROM minhash_clusters('docs', threshold => 'NaN')$$,
  $$SELECT * FROM minhash_components('{1,2}', '{1}')$$,
  $$SELECT * FROM minhash_components('{1,NULL}', '{1,2}')$$
]) q;
SELECT bands, rows_per_band FROM minhash_indexes WHERE tbl = 'docs'::regclass;
-- The band table's name is taken: the next free one.
SELECT minhash_index_drop('docs');
CREATE TABLE docs_minhash_bands (x int);
SELECT minhash_index_create('docs', 'id', 'body');
SELECT minhash_index_drop('docs');
DROP TABLE docs_minhash_bands, docs CASCADE;
DROP TABLE pair_keys, array_keys, no_key;

-- A cancelled backfill leaves nothing behind.
CREATE TABLE big (id int PRIMARY KEY, body text);
INSERT INTO big SELECT g, repeat(md5(g::text), 20) FROM generate_series(1, 50000) g;
\set SHOW_CONTEXT never
SET statement_timeout = '50ms';
SELECT minhash_index_create('big', 'id', 'body');
RESET statement_timeout;
\set SHOW_CONTEXT errors
SELECT count(*) AS catalog_rows, to_regclass('big_minhash_bands') AS band_table,
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'big'::regclass) AS triggers
FROM minhash_indexes;
DROP TABLE big;

-- A band table dropped by hand takes its index along (ddl.sql has more): lookups say there is
-- none, and writes go on.
CREATE TABLE lost (id int PRIMARY KEY, body text);
INSERT INTO lost VALUES (1, 'a band table that will be dropped by hand');
SELECT minhash_index_create('lost', 'id', 'body') IS NOT NULL AS created;
SELECT count(*) FROM minhash_similar('lost', 'a band table that will be dropped by hand');
DROP TABLE lost_minhash_bands CASCADE;
SELECT regexp_replace(try($$SELECT count(*) FROM minhash_similar('lost', 'a band table')$$),
                      'OID \d+', 'OID n') AS error;
INSERT INTO lost VALUES (2, 'written after the drop');
SELECT count(*) AS catalog_rows, (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'lost'::regclass) AS triggers
FROM minhash_indexes;
DROP TABLE lost;

-- Tables the index refuses, and an unlogged one, whose band table is unlogged too.
CREATE TEMP TABLE scratch (id int PRIMARY KEY, body text);
SELECT try($$SELECT minhash_index_create('scratch', 'id', 'body')$$);
CREATE TABLE deferred_key (id int UNIQUE DEFERRABLE, body text);
SELECT try($$SELECT minhash_index_create('deferred_key', 'id', 'body')$$);
DROP TABLE scratch, deferred_key;
CREATE UNLOGGED TABLE quick (id int PRIMARY KEY, body text);
INSERT INTO quick VALUES (1, 'an unlogged row');
SELECT minhash_index_create('quick', 'id', 'body') IS NOT NULL AS created;
SELECT relpersistence FROM pg_class WHERE oid = 'quick_minhash_bands'::regclass;
SELECT * FROM minhash_index_check('quick');
DROP TABLE quick;

-- tenant => on a table that is not a Citus table distributed by a tenant: 22023, in every
-- function that takes it (tests/citus/run.sh tests tables that are).
CREATE TABLE untenanted (id int PRIMARY KEY, body text);
INSERT INTO untenanted VALUES (1, 'a row of a table with no tenant');
SELECT minhash_index_create('untenanted', 'id', 'body') IS NOT NULL AS created;
SELECT try($$SELECT count(*) FROM minhash_similar('untenanted', 'a row', tenant => '1')$$);
SELECT try($$SELECT count(*) FROM minhash_similar('untenanted', 'a row', NULL::int, tenant => '1')$$);
SELECT try($$SELECT count(*) FROM minhash_matches('untenanted', ARRAY['a row'], tenant => '1')$$);
SELECT try($$SELECT count(*) FROM minhash_duplicates('untenanted', tenant => '1')$$);
SELECT try($$SELECT count(*) FROM minhash_clusters('untenanted', tenant => '1')$$);
SELECT count(*) FROM minhash_similar('untenanted', 'a row of a table with no tenant', tenant => NULL);
DROP TABLE untenanted;
