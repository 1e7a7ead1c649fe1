-- Building an index's band table on several threads (minhash_index_create signs its rows on
-- 1 + max_parallel_maintenance_workers threads, at most max_parallel_workers more than one)
-- and writing it in bulk (_minhash_band_fill, multi-inserts into the new band table): the
-- same band rows as on one thread and as the INSERT ... SELECT of a rebuild, of both formats,
-- on a plain and a partitioned table, NULL ids left out, NULL, empty and repeated texts; the
-- batch function equals the one-text one; the bulk write refuses what it must not write; a
-- cancel (statement_timeout) during a large build is served and leaves no index.
SET client_min_messages = warning;

-- 24,000 rows: random texts, near-duplicates of them, copies, empty and NULL texts, NULL ids.
CREATE TABLE docs (id int UNIQUE, body text);
INSERT INTO docs
SELECT g, CASE WHEN g % 97 = 0 THEN ''
               WHEN g % 89 = 0 THEN NULL
               WHEN g % 10 = 0 THEN 'question ' || md5((g - 1)::text) || ' please'
               WHEN g % 7 = 0 THEN 'the same text, copied'
               ELSE 'question ' || md5(g::text) || ' about ' || (g % 300)::text END
FROM generate_series(1, 24000) g;
INSERT INTO docs SELECT NULL, 'a row without an id ' || g FROM generate_series(1, 50) g;
CREATE TABLE parts (id int, body text) PARTITION BY RANGE (id);
CREATE TABLE parts_low PARTITION OF parts FOR VALUES FROM (MINVALUE) TO (12000);
CREATE TABLE parts_high PARTITION OF parts FOR VALUES FROM (12000) TO (MAXVALUE);
CREATE UNIQUE INDEX ON parts (id);
INSERT INTO parts SELECT * FROM docs WHERE id IS NOT NULL;

-- A row with a text and no id cannot be indexed: the build refuses the table (23502) as the
-- sync trigger refuses such a row, and leaves no index; it builds once those rows have no text
-- (rows without an id and a NULL or empty text have no band rows, and stay).
SELECT try($$SELECT minhash_index_create('docs', 'id', 'body')$$);
SELECT count(*) AS indexes FROM minhash_indexes WHERE tbl = 'docs'::regclass;
UPDATE docs SET body = CASE WHEN body LIKE '%1' THEN '' END WHERE id IS NULL;

-- built(tbl, workers, format): the band rows of an index of tbl built with that many
-- maintenance workers, in the table built_<workers>_<format>; the index is dropped after.
CREATE FUNCTION built(tbl regclass, workers int, band_format int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('max_parallel_maintenance_workers', workers::text, true);
    PERFORM minhash_index_create(tbl, 'id', 'body', format => band_format);
    EXECUTE format('CREATE TABLE %I AS SELECT * FROM %s',
                   format('built_%s_%s_%s', tbl, workers, band_format), tbl || '_minhash_bands');
    EXECUTE format('SELECT count(*) FROM %s', tbl || '_minhash_bands') INTO n;
    IF workers = 0 THEN
        -- (a rebuild writes through INSERT ... SELECT: the band table has its indexes)
        PERFORM minhash_index_rebuild(tbl);
        EXECUTE format('CREATE TABLE %I AS SELECT * FROM %s',
                       format('built_%s_rebuilt_%s', tbl, band_format), tbl || '_minhash_bands');
    END IF;
    PERFORM minhash_index_drop(tbl);
    RETURN n;
END $$;
BEGIN;
SET LOCAL max_parallel_workers = 8;
SELECT t, f, built(t, 0, f) AS serial_rows, built(t, 2, f) AS two_workers_rows,
       built(t, 3, f) AS three_workers_rows
FROM unnest(ARRAY['docs', 'parts']::regclass[]) t, unnest(ARRAY[1, 2]) f
ORDER BY 1, 2;
COMMIT;
-- the same rows, both ways (EXCEPT ALL: copies count)
CREATE FUNCTION differing(a text, b text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT (SELECT count(*) FROM (TABLE %1$I EXCEPT ALL TABLE %2$I) x)
                         + (SELECT count(*) FROM (TABLE %2$I EXCEPT ALL TABLE %1$I) y)', a, b)
    INTO n;
    RETURN n;
END $$;
SELECT t, f, differing(format('built_%s_0_%s', t, f), format('built_%s_2_%s', t, f)) AS two,
       differing(format('built_%s_0_%s', t, f), format('built_%s_3_%s', t, f)) AS three,
       differing(format('built_%s_0_%s', t, f), format('built_%s_rebuilt_%s', t, f)) AS rebuilt
FROM unnest(ARRAY['docs', 'parts']) t, unnest(ARRAY[1, 2]) f
ORDER BY 1, 2;
-- no row without an id, none of an empty or NULL text
SELECT count(*) AS unindexed_rows FROM built_docs_2_1 b JOIN docs d USING (id)
WHERE d.body IS NULL OR d.body = '';
SELECT count(*) FILTER (WHERE id IS NULL) AS null_ids, count(DISTINCT id) AS indexed_rows
FROM built_docs_2_2;

-- The batch function (threads) equals the one-text function, in order, NULL for a NULL or
-- empty text; a batch larger than one thread's share.
BEGIN;
SET LOCAL max_parallel_maintenance_workers = 2;
SELECT count(*) AS texts,
       count(*) FILTER (WHERE b.v IS DISTINCT FROM
           minhash_internal._minhash_band_values(d.body, '(128,5,char,16,6)')) AS differing,
       count(*) FILTER (WHERE b.v IS NULL) AS unindexed
FROM (SELECT array_agg(body ORDER BY id) AS docs, array_agg(id ORDER BY id) AS ids
      FROM docs WHERE id <= 3000) a
CROSS JOIN LATERAL ROWS FROM (unnest(a.ids),
    minhash_internal._minhash_band_values_batch(a.docs, '(128,5,char,16,6)')) b(id, v)
JOIN docs d ON d.id = b.id;
COMMIT;
-- bad settings: the errors of the one-text function
SELECT try($$SELECT minhash_internal._minhash_band_values_batch(ARRAY['a'], '(0,5,char,16,6)')$$);
SELECT try($$SELECT minhash_internal._minhash_band_values_batch(ARRAY['a'], '(128,5,word!,16,6)')$$);
SELECT try($$SELECT minhash_internal._minhash_band_values(text 'a', '(128,,char,16,6)')$$);
SELECT count(*) AS empty_batch FROM minhash_internal._minhash_band_values_batch('{}', '(128,5,char,16,6)');

-- Format 2 of one band has four columns, as format 1 has: the bulk write writes each in its
-- place, as a rebuild's INSERT does.
SELECT minhash_index_create('parts', 'id', 'body', bands => 1, rows_per_band => 4, format => 2);
CREATE TABLE one_band AS SELECT * FROM parts_minhash_bands;
SELECT minhash_index_rebuild('parts');
SELECT count(*) AS one_band_rows, differing('one_band', 'parts_minhash_bands') AS differing
FROM one_band;
SELECT minhash_index_drop('parts');
DROP TABLE one_band;

-- The bulk write writes only into a band table without indexes, of an index of the table, in
-- its id type, for the table's owner; its query names what it reads (it runs with a safe
-- search_path).
SELECT minhash_index_create('docs', 'id', 'body', format => 1);
SELECT try($$SELECT minhash_internal._minhash_band_fill('docs', 'docs_minhash_bands',
    'SELECT id::bigint, body, id::text FROM public.docs')$$);
DROP INDEX docs_minhash_bands_key_id_sketch1_sketch2_idx;
SELECT try($$SELECT minhash_internal._minhash_band_fill('docs', 'parts',
    'SELECT id::bigint, body, id::text FROM public.docs')$$);
SELECT try($$SELECT minhash_internal._minhash_band_fill('docs', 'docs_minhash_bands',
    'SELECT id, body, id::text FROM public.docs')$$);
SELECT try($$SELECT minhash_internal._minhash_band_fill('docs', 'docs_minhash_bands',
    'SELECT id::bigint, id, id::text FROM public.docs')$$);
SELECT try($$SELECT minhash_internal._minhash_band_fill('docs', 'docs_minhash_bands',
    'SELECT id::bigint, body FROM public.docs')$$);
CREATE ROLE parallel_build_other;
GRANT INSERT ON docs_minhash_bands TO parallel_build_other;
SET ROLE parallel_build_other;
SELECT try($$SELECT minhash_internal._minhash_band_fill('docs', 'docs_minhash_bands',
    'SELECT 1::bigint, ''some text'', ''1''')$$);
RESET ROLE;
-- (into the band table without its index: the rows the query yields, NULL ids left out; the
-- rows read and the last one's id)
SELECT count(*) AS band_rows_before FROM docs_minhash_bands;
SELECT minhash_internal._minhash_band_fill('docs', 'docs_minhash_bands',
    'SELECT id::bigint, body, id::text FROM public.docs WHERE id <= 10 OR id IS NULL ORDER BY 1');
SELECT count(*) AS band_rows_after FROM docs_minhash_bands;
SELECT minhash_index_drop('docs');
DROP ROLE parallel_build_other;

-- minhash_index_check reads the whole table through the same SQL (several batches): nothing
-- missing, nothing orphaned, of a table with rows without an id and text as without.
SET max_parallel_maintenance_workers = 2;
SELECT minhash_index_create('parts', 'id', 'body', format => 1);
SELECT * FROM minhash_index_check('parts');
SELECT minhash_index_drop('parts');
SELECT minhash_index_create('docs', 'id', 'body', format => 2);
SELECT * FROM minhash_index_check('docs');
SELECT minhash_index_drop('docs');
RESET max_parallel_maintenance_workers;

-- A cancel (statement_timeout) during the build of 300,000 rows on threads: 57014, and no
-- index, no band table, no trigger left.
CREATE TABLE big (id int PRIMARY KEY, body text);
INSERT INTO big SELECT g, 'question ' || (g % 1000)::text || ' about ' || md5(g::text)
FROM generate_series(1, 300000) g;
CREATE FUNCTION cancelled(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'finished';
EXCEPTION WHEN query_canceled THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SET max_parallel_maintenance_workers = 2;
SET statement_timeout = '300ms';
SELECT cancelled($$SELECT minhash_index_create('big', 'id', 'body')$$);
RESET statement_timeout;
RESET max_parallel_maintenance_workers;
SELECT count(*) AS indexes FROM minhash_indexes WHERE tbl = 'big'::regclass;
SELECT to_regclass('big_minhash_bands') AS band_table;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'big'::regclass;
SELECT count(*) AS stores FROM pg_index WHERE indrelid = 'big'::regclass AND NOT indisprimary;

DROP TABLE big, docs, parts;
DROP FUNCTION built(regclass, int, int);
DROP FUNCTION differing(text, text);
DROP FUNCTION cancelled(text);
DO $$
DECLARE
    t text;
BEGIN
    FOR t IN SELECT relname FROM pg_class WHERE relname LIKE 'built\_%' AND relkind = 'r' LOOP
        EXECUTE format('DROP TABLE %I', t);
    END LOOP;
END $$;
