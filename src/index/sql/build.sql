-- The machinery of an index (src/index/sql/, part 2 of 4): the band-row SQL and the text SQL
-- of an index, the arguments of its triggers, and the tables of a partition tree.

-- _minhash_citus_worker and _minhash_citus_table are Rust (src/index/def/citus.rs);
-- _minhash_index, _minhash_backfill and _minhash_sync_triggers are Rust too
-- (src/index/manage/build.rs), and so is _minhash_citus_distribute
-- (src/index/manage/layout.rs).

-- The type of the id column of a band table: bigint for integer keys (smallint, integer or
-- bigint), the indexed table's key type otherwise (src/index/key.rs).
CREATE FUNCTION minhash_internal._minhash_band_id_type(band_table regclass)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
    WHERE a.attrelid = band_table AND a.attname = 'id' AND NOT a.attisdropped
$$;

-- Of an index of a Citus table distributed by another column than the id (a tenant): that
-- column, which the band table's tenant column repeats (docs/citus.md); NULL otherwise.
CREATE FUNCTION minhash_internal._minhash_tenant_column(cfg @extschema@.minhash_indexes)
RETURNS name
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT c.dist_column FROM minhash_internal._minhash_citus_table(cfg.tbl) c
    WHERE c.dist_column <> cfg.id_column
      AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = cfg.band_table
                  AND a.attname = 'tenant' AND a.attnum > 0 AND NOT a.attisdropped)
$$;

-- The text of the row `alias` of an index's table in SQL: the text column, or the text
-- expression. SQL that runs as the table's owner (as_caller false: backfill, check) computes the
-- expression inline over the bare column names (`alias` must be the only relation in scope);
-- SQL that runs with the caller's rights has it computed by _minhash_row_text, as the owner
-- (src/index/row_text.rs): the owner's code never runs with the caller's rights.
CREATE FUNCTION minhash_internal._minhash_text_sql(cfg @extschema@.minhash_indexes, alias text,
    as_caller boolean)
RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN cfg.text_expression IS NULL THEN format('%s.%I', alias, cfg.text_column)
                WHEN as_caller
                THEN minhash_internal._minhash_row_text_sql(cfg.band_table, alias)
                ELSE format('(%s)', cfg.text_expression) END
$$;

-- The settings of `cfg` that decide its band rows, as the constant the band-row SQL passes to
-- the functions that sign its texts (a minhash_internal.index_settings literal: the same on the
-- workers of a Citus table, which have no catalog rows).
CREATE FUNCTION minhash_internal._minhash_settings_sql(cfg @extschema@.minhash_indexes)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('%L::minhash_internal.index_settings',
                  ROW(cfg.k, cfg.ngram, cfg.unit, cfg.bands, cfg.rows_per_band)::minhash_internal.index_settings)
$$;

-- Of an index of a table of this node: a FROM item `s` of columns (id, v), the rows of `source`
-- (a table or transition table; run as the table's owner) with the index's id and their band
-- values (_minhash_band_values: NULL for a text that is not indexed). The texts go in batches
-- of 10,000 rows to _minhash_band_values_batch, which signs them on the build's threads
-- (max_parallel_maintenance_workers, src/index/write/internal.rs); ROWS FROM pairs each value
-- with its id (both arrays of a batch are aggregated from the same rows, in the same order).
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

-- The SELECT that yields (id, key, sketch1, sketch2) band rows for the rows of `source` (a table
-- or transition table) with the index's id column and text (run as the table's owner). NULL and empty texts are not
-- indexed (see _minhash_band_values in src/index/write/internal.rs). Of a table of this node, the
-- band values of each text come once from _minhash_band_values_sql.
CREATE FUNCTION minhash_internal._minhash_band_rows_sql(cfg @extschema@.minhash_indexes, source text)
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

-- The band table's columns after `id` (all bigint NOT NULL), in the order
-- _minhash_band_insert_sql yields them: of format 1, (key, sketch1, sketch2), one row per row
-- and band; of format 2, (sketch1, sketch2, key1, ..., key<bands>), one row per row
-- (docs/contract.md). The one list of them: table creation, conversion and writes use it.
CREATE FUNCTION minhash_internal._minhash_band_value_columns(format int, bands int)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN format = 1 THEN ARRAY['key', 'sketch1', 'sketch2']
                ELSE ARRAY['sketch1', 'sketch2']
                     || ARRAY(SELECT 'key' || i FROM generate_series(1, bands) i ORDER BY i) END
$$;

-- The band table's columns as an INSERT lists them: id, then _minhash_band_value_columns,
-- then of a table distributed by a tenant, tenant.
CREATE FUNCTION minhash_internal._minhash_band_columns(cfg @extschema@.minhash_indexes)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'id, ' || array_to_string(
        minhash_internal._minhash_band_value_columns(cfg.format, cfg.bands), ', ')
        || CASE WHEN minhash_internal._minhash_tenant_column(cfg) IS NOT NULL THEN ', tenant' ELSE '' END
$$;

-- The SELECT that yields the band table's rows (its columns as _minhash_band_columns lists
-- them) for the rows of `source`: of format 1, _minhash_band_rows_sql; of format 2, one row
-- per row with its band keys side by side.
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

-- The band rows of the band table of `cfg` as a FROM item of columns (id, key, sketch1,
-- sketch2, and of a table distributed by a tenant, tenant), one row per row and band, whatever
-- its format.
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

-- The arguments the sync triggers of a Citus table carry: the catalog rows of its indexes as
-- JSON (src/index/citus.rs), which name the table and the band tables.
CREATE FUNCTION minhash_internal._minhash_citus_args(tbl regclass)
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg((to_jsonb(i) - 'created_at' - 'partitions')::text
                              ORDER BY i.band_table::oid), '{}')
    FROM @extschema@.minhash_indexes i WHERE i.tbl = _minhash_citus_args.tbl
$$;

-- The arguments of trigger `trigger`, whatever their characters.
CREATE FUNCTION minhash_internal._minhash_trigger_args(trigger oid)
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

-- The tables of the partition tree of tbl below it (none for a table that is not partitioned),
-- parents before their partitions.
CREATE FUNCTION minhash_internal._minhash_partitions(tbl regclass)
RETURNS SETOF regclass
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.relid FROM pg_partition_tree(tbl) t WHERE t.relid <> tbl ORDER BY t.level, t.relid::oid
$$;
