-- pg_minhash 0.2.0 -> 0.3.0. Run by ALTER EXTENSION pg_minhash UPDATE; never edited once
-- released (a change is a new upgrade script). Indexes, band tables and their triggers stay as
-- they are; the functions replaced keep their OIDs, which the triggers reference.
\echo Use "ALTER EXTENSION pg_minhash UPDATE TO '0.3.0'" to load this file. \quit

-- The catalog's policy, default and checks, bound again with every operator and function
-- schema-qualified. An install of an earlier release into a schema holding an operator
-- planted for (oid, regclass) bound the policy to it, so that it ran in the session of every
-- role that wrote the catalog (docs/security.md, "Names").
ALTER TABLE @extschema@.minhash_indexes
    ALTER COLUMN created_at SET DEFAULT pg_catalog.now(),
    DROP CONSTRAINT minhash_indexes_text_check,
    ADD CONSTRAINT minhash_indexes_text_check
        CHECK ((text_column IS NULL) OPERATOR(pg_catalog.<>) (text_expression IS NULL));
DROP POLICY minhash_indexes_owner ON @extschema@.minhash_indexes;
CREATE POLICY minhash_indexes_owner ON @extschema@.minhash_indexes FOR ALL
    USING (pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl), 'USAGE')
           OR NOT EXISTS (SELECT FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl))
    WITH CHECK (pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl), 'USAGE')
                AND (SELECT relowner FROM pg_catalog.pg_class
                     WHERE oid OPERATOR(pg_catalog.=) band_table AND relkind OPERATOR(pg_catalog.=) 'r')
                    OPERATOR(pg_catalog.=) (SELECT relowner FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl));

-- What a catalog row names is checked where it is used (a table, a text column of a text
-- type); a trigger's arguments are read whatever their characters (a band table named in a flag
-- trigger's arguments with non-ASCII characters is a dependency); only the extension's own sync
-- triggers are dropped by name; the partition list the catalog keeps is input: a table it names
-- is touched only if it has the id column, the index's owner has its owner's rights and no
-- index covers it, and cleaning up after a dropped partition fails no one's DROP; a band table
-- follows its table's SET LOGGED / SET UNLOGGED, and every table of an indexed partition tree
-- keeps the band table's persistence.

-- Whether this node is a Citus worker (its group is not the coordinator's, 0).
CREATE FUNCTION minhash_internal."_minhash_citus_worker"() RETURNS bool
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_citus_worker_wrapper';

CREATE OR REPLACE FUNCTION minhash_internal._minhash_index(tbl regclass)
RETURNS @extschema@.minhash_indexes
LANGUAGE c STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '_minhash_index_wrapper';


CREATE OR REPLACE FUNCTION minhash_internal._minhash_trigger_args(trigger oid)
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- (tgargs: the arguments' bytes, each ended by a zero byte, split at those bytes)
    SELECT coalesce(array_agg(convert_from(substring(t.tgargs FROM z.start FOR z.stop - z.start), 'UTF8')
                              ORDER BY z.stop), '{}')
    FROM pg_trigger t
    CROSS JOIN LATERAL (
        SELECT lag(i, 1, -1) OVER (ORDER BY i) + 2 AS start, i + 1 AS stop
        FROM generate_series(0, length(t.tgargs) - 1) i
        WHERE get_byte(t.tgargs, i) = 0) z
    WHERE t.oid = trigger
$$;


CREATE OR REPLACE FUNCTION minhash_internal."_minhash_sync_triggers"(
	"rel" regclass,
	"adding" bool
) RETURNS void
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_sync_triggers_wrapper';


-- A Citus table distributed by another column than the id (a tenant) may be indexed: its band
-- table has a tenant column, by which it is distributed (docs/citus.md).
CREATE OR REPLACE FUNCTION minhash_internal._minhash_tenant_column(cfg @extschema@.minhash_indexes)
RETURNS name
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.dist_column FROM minhash_internal._minhash_citus_table(cfg.tbl) c
    WHERE c.dist_column <> cfg.id_column
      AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = cfg.band_table
                  AND a.attname = 'tenant' AND a.attnum > 0 AND NOT a.attisdropped)
$$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_citus_table(tbl regclass, OUT kind text, OUT dist_column name)
LANGUAGE c STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '_minhash_citus_table_wrapper';

CREATE OR REPLACE FUNCTION minhash_internal."_minhash_citus_distribute"(
	"band" regclass,
	"tbl" regclass,
	"kind" TEXT
) RETURNS void
VOLATILE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_citus_distribute_wrapper';

-- Of a table of this node, the band-row SQL signs its rows in batches on the build's threads,
-- max_parallel_maintenance_workers of them (src/index/write/internal.rs).
-- The functions that sign texts for an index take its settings as one value.
CREATE TYPE minhash_internal.index_settings AS (
    k int,
    ngram int,
    unit text,
    bands int,
    rows_per_band int
);
DROP FUNCTION minhash_internal._minhash_band_values(text, int, int, text, int, int);
DROP FUNCTION minhash_internal._minhash_band_rows(text, int, int, text, int, int);
CREATE FUNCTION minhash_internal._minhash_band_values(doc text, settings minhash_internal.index_settings)
RETURNS bigint[]
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '_minhash_text_band_values_wrapper';
CREATE FUNCTION minhash_internal._minhash_band_rows(doc text, settings minhash_internal.index_settings)
RETURNS TABLE (key bigint, sketch1 bigint, sketch2 bigint)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '_minhash_text_band_rows_wrapper';
CREATE FUNCTION minhash_internal._minhash_band_values_batch(docs text[], settings minhash_internal.index_settings)
RETURNS SETOF bigint[]
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', '_minhash_band_values_batch_wrapper';

CREATE FUNCTION minhash_internal._minhash_settings_sql(cfg @extschema@.minhash_indexes)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('%L::minhash_internal.index_settings',
                  ROW(cfg.k, cfg.ngram, cfg.unit, cfg.bands, cfg.rows_per_band)::minhash_internal.index_settings)
$$;

CREATE FUNCTION minhash_internal._minhash_band_values_sql(cfg @extschema@.minhash_indexes, source text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format(
        '(SELECT u.id, u.v
          FROM (SELECT pg_catalog.array_agg(r.id) AS ids, pg_catalog.array_agg(r.doc) AS docs
                FROM (SELECT d.%1$I::%2$s AS id, %3$s AS doc,
                             pg_catalog.row_number() OVER () OPERATOR(pg_catalog./) 10000 AS batch
                      FROM %4$s d) r
                GROUP BY r.batch) b
          CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(b.ids),
              minhash_internal._minhash_band_values_batch(b.docs, %5$s)) u(id, v)) s',
        cfg.id_column, minhash_internal._minhash_band_id_type(cfg.band_table),
        minhash_internal._minhash_text_sql(cfg, 'd', false), source,
        minhash_internal._minhash_settings_sql(cfg))
$$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_band_rows_sql(cfg @extschema@.minhash_indexes, source text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    -- (Citus runs on each shard only a SELECT of one table and functions: there the band
    -- values come from a function in FROM, once per text too)
    -- (of a table distributed by a tenant, the row's tenant too, last)
    SELECT CASE WHEN (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN format(
        'SELECT d.%1$I::%2$s AS id, b.key, b.sketch1, b.sketch2%6$s FROM %3$s d
         CROSS JOIN LATERAL minhash_internal._minhash_band_rows(%4$s, %5$s) b',
        cfg.id_column, minhash_internal._minhash_band_id_type(cfg.band_table), source,
        minhash_internal._minhash_text_sql(cfg, 'd', false),
        minhash_internal._minhash_settings_sql(cfg),
        coalesce(', d.' || quote_ident(minhash_internal._minhash_tenant_column(cfg)) || ' AS tenant', '')) ELSE format(
        'SELECT s.id, pg_catalog.unnest(s.v[1:%1$s]) AS key, s.v[%1$s + 1] AS sketch1,
                s.v[%1$s + 2] AS sketch2
         FROM %2$s
         WHERE s.v IS NOT NULL',
        cfg.bands, minhash_internal._minhash_band_values_sql(cfg, source)) END
$$;

-- Indexes may be of band table format 2 (format => 2), and minhash_index_rebuild converts one
-- to the other (docs/contract.md).
ALTER TABLE @extschema@.minhash_indexes DROP CONSTRAINT minhash_indexes_format_check,
    ADD CONSTRAINT minhash_indexes_format_check CHECK (format OPERATOR(pg_catalog.=) ANY (ARRAY[1, 2]));
COMMENT ON COLUMN @extschema@.minhash_indexes.format IS 'format of the band table: 1, a row per row and band; 2, a row per row (signatures of format minhash_format_version() in both)';
DROP FUNCTION @extschema@.minhash_index_create(regclass, name, name, int, int, text, float8, int, int, text);
DROP FUNCTION @extschema@.minhash_index_rebuild(regclass);
CREATE FUNCTION minhash_internal._minhash_band_value_columns(format int, bands int)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN format = 1 THEN ARRAY['key', 'sketch1', 'sketch2']
                ELSE ARRAY['sketch1', 'sketch2']
                     || ARRAY(SELECT 'key' || i FROM generate_series(1, bands) i ORDER BY i) END
$$;

CREATE FUNCTION minhash_internal._minhash_band_columns(cfg @extschema@.minhash_indexes)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'id, ' || array_to_string(
        minhash_internal._minhash_band_value_columns(cfg.format, cfg.bands), ', ')
        || CASE WHEN minhash_internal._minhash_tenant_column(cfg) IS NOT NULL THEN ', tenant' ELSE '' END
$$;

CREATE FUNCTION minhash_internal._minhash_band_insert_sql(cfg @extschema@.minhash_indexes, source text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    -- (of a Citus table, as _minhash_band_rows_sql: the band values from a function in FROM)
    SELECT CASE WHEN cfg.format = 1 THEN minhash_internal._minhash_band_rows_sql(cfg, source)
                WHEN (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN format(
        'SELECT d.%2$I::%6$s AS id, b.v[%1$s + 1], b.v[%1$s + 2], %5$s%7$s
         FROM %4$s d
         CROSS JOIN LATERAL minhash_internal._minhash_band_values(%3$s, %8$s) b(v)
         WHERE b.v IS NOT NULL',
        cfg.bands, cfg.id_column, minhash_internal._minhash_text_sql(cfg, 'd', false), source,
        (SELECT string_agg(format('b.v[%s]', i), ', ' ORDER BY i) FROM generate_series(1, cfg.bands) i),
        minhash_internal._minhash_band_id_type(cfg.band_table),
        coalesce(', d.' || quote_ident(minhash_internal._minhash_tenant_column(cfg)), ''),
        minhash_internal._minhash_settings_sql(cfg))
                ELSE format(
        'SELECT s.id, s.v[%1$s + 1], s.v[%1$s + 2], %3$s
         FROM %2$s
         WHERE s.v IS NOT NULL',
        cfg.bands, minhash_internal._minhash_band_values_sql(cfg, source),
        (SELECT string_agg(format('s.v[%s]', i), ', ' ORDER BY i) FROM generate_series(1, cfg.bands) i)) END
$$;

CREATE FUNCTION minhash_internal._minhash_band_rows_of(cfg @extschema@.minhash_indexes)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN cfg.format = 1 THEN cfg.band_table::text ELSE format(
        '(SELECT w.id, k.key, w.sketch1, w.sketch2%s FROM %s w
          CROSS JOIN LATERAL pg_catalog.unnest(ARRAY[%s]) k(key))',
        CASE WHEN minhash_internal._minhash_tenant_column(cfg) IS NOT NULL THEN ', w.tenant' ELSE '' END,
        cfg.band_table,
        (SELECT string_agg('w.key' || i, ', ' ORDER BY i) FROM generate_series(1, cfg.bands) i)) END
$$;

CREATE FUNCTION minhash_internal."_minhash_check_format"(
	"format" INT,
	"bands" INT
) RETURNS INT
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_check_format_wrapper';

CREATE FUNCTION minhash_internal._minhash_band_indexes(cfg @extschema@.minhash_indexes)
RETURNS void
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '_minhash_band_indexes_wrapper';

CREATE FUNCTION minhash_internal._minhash_band_reshape(cfg @extschema@.minhash_indexes, target int)
RETURNS @extschema@.minhash_indexes
LANGUAGE c
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', '_minhash_band_reshape_wrapper';

-- minhash_index_rebuild, check, stats and drop are Rust (src/index/manage/), over the Rust
-- pieces they share with minhash_index_create.
CREATE FUNCTION @extschema@."minhash_index_rebuild"(
	"tbl" regclass, /* Option < Regclass > */
	"format" INT DEFAULT NULL /* Option < i32 > */
) RETURNS bigint /* Option < i64 > */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_index_rebuild_wrapper';

-- minhash_index_create is Rust (src/index/manage/create.rs), with the signature, defaults and
-- settings of the PL/pgSQL function it replaced.
CREATE FUNCTION @extschema@.minhash_index_create(
    tbl regclass,
    id_column name,
    text_column name DEFAULT NULL,
    k int DEFAULT 128,
    ngram int DEFAULT 5,
    unit text DEFAULT 'char',
    threshold float8 DEFAULT 0.8,
    bands int DEFAULT NULL,
    rows_per_band int DEFAULT NULL,
    text_expression text DEFAULT NULL,
    format int DEFAULT NULL)
RETURNS regclass
LANGUAGE c /* Rust */
SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'minhash_index_create_wrapper';

COMMENT ON FUNCTION @extschema@.minhash_index_create(regclass, name, name, int, int, text, float8, int, int, text, int) IS 'create a managed MinHash index on a table''s text column or text expression and fill it';
COMMENT ON FUNCTION @extschema@.minhash_index_rebuild(regclass, int) IS 'rebuild a table''s managed MinHash index from its rows';

-- A new band table is filled in bulk: its rows signed on the build's threads and written a
-- thousand at a time (src/index/write/fill.rs).
CREATE FUNCTION minhash_internal."_minhash_band_fill"(
	"tbl" regclass, /* Regclass */
	"band" regclass, /* Regclass */
	"rows_query" TEXT /* & str */
) RETURNS TEXT[] /* Vec < Option < String > > */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_band_fill_wrapper';

CREATE OR REPLACE FUNCTION minhash_internal."_minhash_backfill"(
	"band" regclass,
	"source" regclass DEFAULT NULL
) RETURNS bigint
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_backfill_wrapper';


CREATE OR REPLACE FUNCTION @extschema@."minhash_index_drop"(
	"tbl" regclass, /* Option < Regclass > */
	"cascade" bool DEFAULT false /* Option < bool > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_index_drop_wrapper';
DROP FUNCTION minhash_internal._minhash_drop_objects(@extschema@.minhash_indexes);
CREATE FUNCTION minhash_internal."_minhash_drop_objects"(
	"band_table" regclass /* Option < Regclass > */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_drop_objects_wrapper';


-- DDL on indexed tables (src/index/manage/ddl.rs) and the catalog's restore triggers
-- (src/index/def/restore.rs) are Rust; the partition tree is followed inside _minhash_ddl.
DROP FUNCTION minhash_internal._minhash_tree_changed(@extschema@.minhash_indexes, oid[]);
CREATE OR REPLACE FUNCTION minhash_internal._minhash_ddl() RETURNS event_trigger
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_ddl_wrapper';
CREATE OR REPLACE FUNCTION minhash_internal._minhash_relink() RETURNS void
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_relink_wrapper';
CREATE OR REPLACE FUNCTION minhash_internal._minhash_catalog_loaded() RETURNS trigger
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_catalog_loaded_wrapper';
CREATE OR REPLACE FUNCTION minhash_internal._minhash_catalog_insert() RETURNS trigger
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_catalog_insert_wrapper';


-- minhash_duplicates streams its pairs: SQL functions PostgreSQL inlines into the calling query.
-- Of a Citus table, minhash_duplicates and minhash_clusters search the rows Citus streams to the
-- coordinator in memory, as on one node (no repartition join).

DROP FUNCTION @extschema@.minhash_duplicates(regclass, float8);
DROP FUNCTION @extschema@.minhash_duplicates(regclass, anyelement, float8);
DROP FUNCTION @extschema@.minhash_clusters(regclass, float8, text, text);
DROP FUNCTION @extschema@.minhash_clusters(regclass, anyelement, float8, text, text);
DROP FUNCTION minhash_internal._minhash_rows_sql(@extschema@.minhash_indexes, boolean, boolean, text);
-- The searches resolve the index, check their arguments and build the rows query in Rust
-- (src/index/read/whole_table.rs), with no SQL or PL/pgSQL in between; the index settings no
-- longer travel as arguments.
DROP FUNCTION minhash_internal._minhash_check_id_type(@extschema@.minhash_indexes, regtype, text);
DROP FUNCTION minhash_internal._minhash_query_threshold(float8, float8, int, int);
DROP FUNCTION minhash_internal._minhash_cluster_mode(text, text);
DROP FUNCTION minhash_internal._minhash_search_pairs(text, int, int, text, int, int, float8);
DROP FUNCTION minhash_internal._minhash_search_clusters(text, int, int, text, int, int, float8, text);
DROP FUNCTION minhash_internal._minhash_search_keyed_pairs(anyelement, text, int, int, text, int, int,
    float8);
DROP FUNCTION minhash_internal._minhash_search_keyed_clusters(anyelement, text, int, int, text, int,
    int, float8, text);
CREATE FUNCTION minhash_internal."_minhash_search_pairs"(
	"tbl" regclass, /* Option < Regclass > */
	"threshold" double precision, /* Option < f64 > */
	"tenant" TEXT /* Option < & str > */
) RETURNS TABLE (
	"id_a" bigint,  /* i64 */
	"id_b" bigint,  /* i64 */
	"similarity" double precision  /* f64 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_search_pairs_wrapper';
CREATE FUNCTION minhash_internal."_minhash_search_keyed_pairs"(
	"tbl" regclass, /* Option < Regclass > */
	"id_type" anyelement, /* Option < AnyElement > */
	"threshold" double precision, /* Option < f64 > */
	"tenant" TEXT /* Option < & str > */
) RETURNS TABLE (
	"id_a" anyelement,  /* AnyElement */
	"id_b" anyelement,  /* AnyElement */
	"similarity" double precision  /* f64 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_search_keyed_pairs_wrapper';
CREATE FUNCTION minhash_internal."_minhash_search_clusters"(
	"tbl" regclass, /* Option < Regclass > */
	"threshold" double precision, /* Option < f64 > */
	"mode" TEXT, /* Option < & str > */
	"priority" TEXT, /* Option < & str > */
	"tenant" TEXT /* Option < & str > */
) RETURNS TABLE (
	"id" bigint,  /* i64 */
	"cluster_id" bigint  /* i64 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_search_clusters_wrapper';
CREATE FUNCTION minhash_internal."_minhash_search_keyed_clusters"(
	"tbl" regclass, /* Option < Regclass > */
	"id_type" anyelement, /* Option < AnyElement > */
	"threshold" double precision, /* Option < f64 > */
	"mode" TEXT, /* Option < & str > */
	"priority" TEXT, /* Option < & str > */
	"tenant" TEXT /* Option < & str > */
) RETURNS TABLE (
	"id" anyelement,  /* AnyElement */
	"cluster_id" anyelement  /* AnyElement */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_search_keyed_clusters_wrapper';

CREATE FUNCTION @extschema@.minhash_duplicates(tbl regclass, threshold float8 DEFAULT NULL,
    tenant text DEFAULT NULL)
RETURNS TABLE (id_a bigint, id_b bigint, similarity float8)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT (s.p).id_a, (s.p).id_b, (s.p).similarity FROM (
        SELECT minhash_internal._minhash_search_pairs(minhash_duplicates.tbl,
                   minhash_duplicates.threshold, minhash_duplicates.tenant) AS p
        OFFSET 0) s
$$;

CREATE FUNCTION @extschema@.minhash_duplicates(tbl regclass, id_type anyelement,
    threshold float8 DEFAULT NULL, tenant text DEFAULT NULL)
RETURNS TABLE (id_a anyelement, id_b anyelement, similarity float8)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT (s.p).id_a, (s.p).id_b, (s.p).similarity FROM (
        SELECT minhash_internal._minhash_search_keyed_pairs(minhash_duplicates.tbl,
                   minhash_duplicates.id_type, minhash_duplicates.threshold,
                   minhash_duplicates.tenant) AS p
        OFFSET 0) s
$$;

CREATE FUNCTION @extschema@.minhash_clusters(tbl regclass, threshold float8 DEFAULT NULL,
    mode text DEFAULT 'connected', priority text DEFAULT NULL, tenant text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id bigint)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT c.id, c.cluster_id FROM minhash_internal._minhash_search_clusters(minhash_clusters.tbl,
        minhash_clusters.threshold, minhash_clusters.mode, minhash_clusters.priority,
        minhash_clusters.tenant) c
$$;

CREATE FUNCTION @extschema@.minhash_clusters(tbl regclass, id_type anyelement,
    threshold float8 DEFAULT NULL, mode text DEFAULT 'connected', priority text DEFAULT NULL,
    tenant text DEFAULT NULL)
RETURNS TABLE (id anyelement, cluster_id anyelement)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT c.id, c.cluster_id FROM minhash_internal._minhash_search_keyed_clusters(
        minhash_clusters.tbl, minhash_clusters.id_type, minhash_clusters.threshold,
        minhash_clusters.mode, minhash_clusters.priority, minhash_clusters.tenant) c
$$;

COMMENT ON FUNCTION @extschema@.minhash_duplicates(regclass, float8, text) IS
    'every pair of near-duplicate rows of an indexed table, with exact Jaccard';
COMMENT ON FUNCTION @extschema@.minhash_duplicates(regclass, anyelement, float8, text) IS
    'every pair of near-duplicate rows of an indexed table, with exact Jaccard';
COMMENT ON FUNCTION @extschema@.minhash_clusters(regclass, float8, text, text, text) IS
    'the clusters of near-duplicate rows of an indexed table: connected (named by their smallest id) or around a kept row';
COMMENT ON FUNCTION @extschema@.minhash_clusters(regclass, anyelement, float8, text, text, text) IS
    'the clusters of near-duplicate rows of an indexed table: connected (named by their smallest id) or around a kept row';
DROP FUNCTION minhash_internal._minhash_citus_clusters(@extschema@.minhash_indexes, boolean, boolean);
DROP FUNCTION minhash_internal._minhash_citus_pairs(@extschema@.minhash_indexes, float8);
DROP FUNCTION minhash_internal._minhash_verify_pairs(text, text[], text[], int, text, float8);

-- The sketch store (src/index/store.rs): the fine sketch of a text, and the stores of a table
CREATE FUNCTION @extschema@."minhash_sketch"(
	"doc" TEXT,
	"ngram" INT DEFAULT 5,
	"unit" TEXT DEFAULT 'char'
) RETURNS bytea
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'minhash_sketch_wrapper';
COMMENT ON FUNCTION @extschema@.minhash_sketch(text, int, text) IS
    'the 64-byte fine sketch of a text (128 slots of 4 bits) that a sketch store holds of each row';
CREATE FUNCTION minhash_internal."_minhash_sync_stores"(
	"tbl" regclass
) RETURNS void
STRICT VOLATILE
LANGUAGE c
AS 'MODULE_PATHNAME', '_minhash_sync_stores_wrapper';

-- The relation a call names is checked to be a table or a partitioned table where it is used
-- (42809 naming what it is); minhash_index_check and minhash_index_stats report progress and
-- read what they count once.
CREATE FUNCTION minhash_internal."_minhash_check_indexable"(
	"rel" regclass /* Regclass */
) RETURNS bool /* bool */
STRICT STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_check_indexable_wrapper';

CREATE FUNCTION minhash_internal."_minhash_progress"(
	"what" TEXT, /* & str */
	"unit" TEXT, /* & str */
	"total" bigint, /* i64 */
	"run" double precision, /* f64 */
	"weight" bigint /* i64 */
) RETURNS bool /* bool */
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_progress_wrapper';

-- The k most similar rows (src/index/similar.rs): the lookups take `k` after `max_results`,
-- and minhash_similar the ids it may return (`among`) after `k`.
DROP FUNCTION @extschema@.minhash_similar(regclass, text, double precision, int);
DROP FUNCTION @extschema@.minhash_similar(regclass, text, anyelement, double precision, int);
DROP FUNCTION @extschema@.minhash_matches(regclass, text[], double precision, int);
DROP FUNCTION @extschema@.minhash_matches(regclass, text[], anyelement, double precision, int);
CREATE FUNCTION @extschema@."minhash_similar"(
	"tbl" regclass, /* Option < Regclass > */
	"doc" TEXT, /* Option < & str > */
	"threshold" double precision DEFAULT NULL, /* Option < f64 > */
	"max_results" INT DEFAULT NULL, /* Option < i32 > */
	"k" INT DEFAULT NULL, /* Option < i32 > */
	"among" bigint[] DEFAULT NULL, /* Option < Array < '_, i64 > > */
	"tenant" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"id" bigint,  /* i64 */
	"similarity" double precision  /* f64 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_similar_wrapper';
CREATE FUNCTION @extschema@."minhash_similar"(
	"tbl" regclass, /* Option < Regclass > */
	"doc" TEXT, /* Option < & str > */
	"id_type" anyelement, /* Option < AnyElement > */
	"threshold" double precision DEFAULT NULL, /* Option < f64 > */
	"max_results" INT DEFAULT NULL, /* Option < i32 > */
	"k" INT DEFAULT NULL, /* Option < i32 > */
	"among" TEXT[] DEFAULT NULL, /* :: std :: option :: Option < Array < '_, & str > > */
	"tenant" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"id" anyelement,  /* AnyElement */
	"similarity" double precision  /* f64 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_similar_typed_wrapper';
CREATE FUNCTION @extschema@."minhash_matches"(
	"tbl" regclass, /* Option < Regclass > */
	"docs" TEXT[], /* :: std :: option :: Option < Array < '_, & str > > */
	"threshold" double precision DEFAULT NULL, /* Option < f64 > */
	"max_results" INT DEFAULT NULL, /* Option < i32 > */
	"k" INT DEFAULT NULL, /* Option < i32 > */
	"tenant" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"probe" INT,  /* i32 */
	"id" bigint,  /* i64 */
	"similarity" double precision  /* f64 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_matches_wrapper';
CREATE FUNCTION @extschema@."minhash_matches"(
	"tbl" regclass, /* Option < Regclass > */
	"docs" TEXT[], /* :: std :: option :: Option < Array < '_, & str > > */
	"id_type" anyelement, /* Option < AnyElement > */
	"threshold" double precision DEFAULT NULL, /* Option < f64 > */
	"max_results" INT DEFAULT NULL, /* Option < i32 > */
	"k" INT DEFAULT NULL, /* Option < i32 > */
	"tenant" TEXT DEFAULT NULL /* Option < & str > */
) RETURNS TABLE (
	"probe" INT,  /* i32 */
	"id" anyelement,  /* AnyElement */
	"similarity" double precision  /* f64 */
)
STABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_matches_typed_wrapper';
COMMENT ON FUNCTION @extschema@.minhash_similar(regclass, text, double precision, int, int, bigint[], text) IS
    'rows of an indexed table similar to a text, with exact Jaccard, most similar first';
COMMENT ON FUNCTION @extschema@.minhash_similar(regclass, text, anyelement, double precision, int, int, text[], text) IS
    'rows of an indexed table similar to a text, with exact Jaccard, most similar first';
COMMENT ON FUNCTION @extschema@.minhash_matches(regclass, text[], double precision, int, int, text) IS
    'for each of many texts, the rows of an indexed table similar to it, with exact Jaccard';
COMMENT ON FUNCTION @extschema@.minhash_matches(regclass, text[], anyelement, double precision, int, int, text) IS
    'for each of many texts, the rows of an indexed table similar to it, with exact Jaccard';

-- What one lookup did (src/index/similar.rs).
CREATE FUNCTION @extschema@."minhash_explain"(
	"tbl" regclass, /* Option < Regclass > */
	"doc" TEXT, /* Option < & str > */
	"threshold" double precision DEFAULT NULL, /* Option < f64 > */
	"k" INT DEFAULT NULL /* Option < i32 > */
) RETURNS SETOF TEXT /* String */
VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_explain_wrapper';
COMMENT ON FUNCTION @extschema@.minhash_explain(regclass, text, double precision, int) IS
    'what one lookup in an indexed table does, step by step, with its time';

CREATE OR REPLACE FUNCTION @extschema@."minhash_index_check"(
	"tbl" regclass /* Option < Regclass > */
) RETURNS TABLE (
	"missing" bigint,  /* Option < i64 > */
	"orphaned" bigint  /* Option < i64 > */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_index_check_wrapper';

CREATE OR REPLACE FUNCTION @extschema@."minhash_index_stats"(
	"tbl" regclass /* Option < Regclass > */
) RETURNS TABLE (
	"rows_indexed" bigint,  /* Option < i64 > */
	"keys" bigint,  /* Option < i64 > */
	"distinct_buckets" bigint,  /* Option < i64 > */
	"largest_bucket" bigint,  /* Option < i64 > */
	"bucket_histogram" jsonb  /* Option < JsonB > */
)
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'minhash_index_stats_wrapper';
-- Every indexed table, and every table of an indexed partition tree, gets the claim trigger
-- "~minhash_sync_claim" beside its sync triggers: an UPDATE that a duplicate check does not
-- fire on claims its new text's band rows at once (src/index/sync.rs, claim_update).
SELECT minhash_internal._minhash_sync_triggers(t, true)
FROM (SELECT DISTINCT tbl FROM @extschema@.minhash_indexes) i,
     LATERAL (SELECT i.tbl UNION SELECT p FROM minhash_internal._minhash_partitions(i.tbl) p) x(t);

-- The sketch store: the index access method minhash_sketch (src/am/), which keeps each row's
-- TID and fixed-width sketch packed many to a page, and its internal functions.
CREATE FUNCTION @extschema@.minhash_sketch_handler(internal) RETURNS index_am_handler
LANGUAGE c AS 'MODULE_PATHNAME', 'minhash_sketch_handler_wrapper';
COMMENT ON FUNCTION @extschema@.minhash_sketch_handler(internal) IS
    'handler of the index access method minhash_sketch, the sketch store of the lookups';
CREATE ACCESS METHOD minhash_sketch TYPE INDEX HANDLER @extschema@.minhash_sketch_handler;
CREATE OPERATOR CLASS @extschema@.bytea_minhash_sketch_ops
    DEFAULT FOR TYPE bytea USING minhash_sketch AS STORAGE bytea;
CREATE FUNCTION minhash_internal."_minhash_sketch_entries"(
	"index" regclass /* Regclass */
) RETURNS TABLE (
	"tid" tid,  /* pg_sys :: ItemPointerData */
	"sketch" bytea  /* Vec < u8 > */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_sketch_entries_wrapper';
CREATE FUNCTION minhash_internal."_minhash_sketch_stats"(
	"index" regclass /* Regclass */
) RETURNS TABLE (
	"width" INT,  /* i32 */
	"entries" bigint,  /* i64 */
	"pages" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_sketch_stats_wrapper';

-- A minhash_flag_duplicate trigger is checked as it is made, with the checks and errors of its
-- first row (src/index/sql/ddl.sql, minhash_flag_created).
CREATE FUNCTION minhash_internal._minhash_flag_created() RETURNS event_trigger
    LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_flag_created_wrapper';
CREATE EVENT TRIGGER minhash_flag_created ON ddl_command_end
    WHEN TAG IN ('CREATE TRIGGER', 'CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION minhash_internal._minhash_flag_created();
