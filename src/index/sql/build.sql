-- The machinery of an index (src/index/sql/, part 2 of 5): finding an index's catalog row, the
-- band-row SQL, the backfill, the sync triggers, and what Citus needs of a table.

-- Whether this node is a Citus worker (its group is not the coordinator's, 0).
CREATE FUNCTION minhash_internal._minhash_citus_worker()
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    worker boolean := false;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_local_group') IS NOT NULL THEN
        EXECUTE 'SELECT g.groupid OPERATOR(pg_catalog.<>) 0 FROM pg_catalog.pg_dist_local_group g'
            INTO worker;
    END IF;
    RETURN coalesce(worker, false);
END $$;

-- The catalog row of the index `tbl` names: the index whose band table tbl is, or the default
-- index of table tbl, its first: the one whose band table has the lowest OID (42704 for a
-- table with none). A second index never changes what a call naming the table reads.
CREATE FUNCTION minhash_internal._minhash_index(tbl regclass)
RETURNS @extschema@.minhash_indexes
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'tbl must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO cfg FROM @extschema@.minhash_indexes i
    WHERE i.tbl = _minhash_index.tbl OR i.band_table = _minhash_index.tbl
    ORDER BY i.band_table = _minhash_index.tbl DESC, i.band_table::oid
    LIMIT 1;
    IF NOT FOUND THEN
        PERFORM minhash_internal._minhash_check_indexable(tbl);
        -- (a Citus worker keeps no catalog rows; the lookups read the shell table's triggers)
        IF (minhash_internal._minhash_citus_table(tbl)).kind IS NOT NULL
           AND minhash_internal._minhash_citus_worker() THEN
            RAISE EXCEPTION 'this node has no minhash catalog: % is a Citus table, and this is a worker', tbl
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Run this call on the coordinator, in a statement of its own: Citus sends a '
                             'statement that reads one row of a distributed table whole to that row''s worker.';
        END IF;
        RAISE EXCEPTION 'table % has no minhash index', tbl
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create one with minhash_index_create(table, id_column, text_column).';
    END IF;
    -- The row is input (its table's owner may write it): what it names must be what
    -- minhash_index_create indexes, a table whose text column is text or varchar. Queries
    -- read it as the caller, and a view or another type's cast would run the owner's code so.
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = cfg.tbl AND c.relkind IN ('r', 'p')) THEN
        RAISE EXCEPTION 'the minhash index of % is not on a table', cfg.tbl
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF cfg.text_column IS NOT NULL AND NOT EXISTS (
           SELECT FROM pg_attribute a
           WHERE a.attrelid = cfg.tbl AND a.attname = cfg.text_column AND a.attnum > 0
             AND NOT a.attisdropped
             AND a.atttypid IN ('text'::regtype, 'character varying'::regtype)) THEN
        RAISE EXCEPTION 'text column "%" of % is not of type text or character varying',
            cfg.text_column, cfg.tbl
            USING ERRCODE = 'datatype_mismatch';
    END IF;
    RETURN cfg;
END $$;

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

-- Citus (README, "Scaling out with Citus"): what tbl is to Citus when Citus is installed:
-- 'distributed' (hash-distributed by the column dist_column), 'reference', 'other' (a Citus
-- local or single-shard table), or NULL (a table Citus does not manage, or no Citus).
CREATE FUNCTION minhash_internal._minhash_citus_table(tbl regclass, OUT kind text, OUT dist_column name)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'SELECT CASE WHEN p.partmethod = ''h'' AND p.partkey IS NOT NULL THEN ''distributed''
                         WHEN p.partmethod = ''n'' AND p.repmodel = ''t'' THEN ''reference''
                         ELSE ''other'' END,
                    CASE WHEN p.partmethod = ''h'' AND p.partkey IS NOT NULL
                         THEN pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END
             FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = $1'
    INTO kind, dist_column USING tbl;
END $$;

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

-- Makes the (empty) band table of an index of a Citus table a Citus table too: of a distributed
-- table, distributed by id (or, of a table distributed by a tenant, by its tenant column) and
-- co-located with it, so that each band row lives on the shard of its row and the sync
-- triggers on the shards write locally; of a reference table, a reference table, written on
-- each node beside the table's copy there.
CREATE FUNCTION minhash_internal._minhash_citus_distribute(band regclass, tbl regclass, kind text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF kind = 'distributed' THEN
        EXECUTE 'SELECT pg_catalog.create_distributed_table($1, $3, colocate_with => $2)'
        USING band, tbl::text,
              CASE WHEN EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = band
                                AND a.attname = 'tenant' AND a.attnum > 0 AND NOT a.attisdropped)
                   THEN 'tenant' ELSE 'id' END;
    ELSE
        EXECUTE 'SELECT pg_catalog.create_reference_table($1)' USING band;
    END IF;
END $$;

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

-- Of an index of a table of this node: a FROM item `s` of columns (id, v), the rows of `source`
-- (a table or transition table; run as the table's owner) with the index's id and their band
-- values (_minhash_band_values: NULL for a text that is not indexed). The texts go in batches
-- of 10,000 rows to _minhash_band_values_batch, which signs them on the build's threads
-- (max_parallel_maintenance_workers, src/index/write/plpgsql.rs); ROWS FROM pairs each value
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
              minhash_internal._minhash_band_values_batch(b.docs, %5$s, %6$s, %7$L, %8$s, %9$s)) u(id, v)) s',
        cfg.id_column, minhash_internal._minhash_band_id_type(cfg.band_table),
        minhash_internal._minhash_text_sql(cfg, 'd', false), source, cfg.k, cfg.ngram, cfg.unit,
        cfg.bands, cfg.rows_per_band)
$$;

-- The SELECT that yields (id, key, sketch1, sketch2) band rows for the rows of `source` (a table
-- or transition table) with the index's id column and text (run as the table's owner). NULL and empty texts are not
-- indexed (see _minhash_band_values in src/index/write/plpgsql.rs). Of a table of this node, the
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
        'SELECT d.%1$I::%2$s AS id, b.key, b.sketch1, b.sketch2%10$s FROM %3$s d
         CROSS JOIN LATERAL minhash_internal._minhash_band_rows(%4$s, %5$s, %6$s, %7$L, %8$s, %9$s) b',
        cfg.id_column, minhash_internal._minhash_band_id_type(cfg.band_table), source,
        minhash_internal._minhash_text_sql(cfg, 'd', false), cfg.k, cfg.ngram, cfg.unit, cfg.bands,
        cfg.rows_per_band,
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
        'SELECT d.%2$I::%10$s AS id, b.v[%1$s + 1], b.v[%1$s + 2], %9$s%11$s
         FROM %8$s d
         CROSS JOIN LATERAL minhash_internal._minhash_band_values(%3$s, %4$s, %5$s, %6$L, %1$s, %7$s) b(v)
         WHERE b.v IS NOT NULL',
        cfg.bands, cfg.id_column, minhash_internal._minhash_text_sql(cfg, 'd', false), cfg.k,
        cfg.ngram, cfg.unit, cfg.rows_per_band, source,
        (SELECT string_agg(format('b.v[%s]', i), ', ' ORDER BY i) FROM generate_series(1, cfg.bands) i),
        minhash_internal._minhash_band_id_type(cfg.band_table),
        coalesce(', d.' || quote_ident(minhash_internal._minhash_tenant_column(cfg)), ''))
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

-- Fills the (empty) band table `band` of an index from its table's rows in ten set-based chunks of ascending ids
-- (rows with a NULL id are left out, as the sync refuses them); with `source`, from the rows of
-- that partition of tbl only (a partition attached to it). A chunk ends after all the rows of its
-- last id (WITH TIES: ids may repeat across the partitions of a partitioned table).
-- A build that has run for two seconds reports progress after each further chunk in a NOTICE:
-- rows done, percentage and rate (a small table's build says nothing). Returns the rows read. It reads the
-- table and writes the band table as the table's owner (_minhash_as_owner).
CREATE FUNCTION minhash_internal._minhash_backfill(band regclass, source regclass DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(band);
    tbl regclass := cfg.tbl;
    total bigint;
    chunk bigint;
    done bigint := 0;
    n bigint;
    progress jsonb;
    last_id text;  -- the last chunk's largest id, as text
    id_type text := (SELECT format_type(a.atttypid, NULL) FROM pg_attribute a
                     WHERE a.attrelid = tbl AND a.attname = cfg.id_column);
    started timestamptz := clock_timestamp();
    seconds float8;
    -- (the band table's load trigger would keep every row, at the cost of one call per band
    -- row; src/index/restore.rs)
    loading boolean := EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = cfg.band_table
                               AND t.tgname = 'minhash_bands_load' AND t.tgenabled <> 'D');
    bulk boolean := NOT EXISTS (SELECT FROM pg_index x WHERE x.indrelid = cfg.band_table);
BEGIN
    source := coalesce(source, tbl);
    -- A row with a text and no id cannot be indexed: 23502, as the sync trigger says of one
    -- (the chunks below read the rows in id order, which would leave it out unsaid). A NULL
    -- or empty text has no band values, and such a row stays.
    IF minhash_internal._minhash_as_owner(tbl, format(
           -- (an aggregate, not EXISTS: Citus runs it on each shard as it runs a count)
           'SELECT pg_catalog.to_jsonb(pg_catalog.count(*) OPERATOR(pg_catalog.>) 0) FROM %s d
            WHERE d.%I IS NULL
              AND minhash_internal._minhash_band_values((%s)::pg_catalog.text, %s, %s, %L, %s, %s)
                  IS NOT NULL',
           source, cfg.id_column, minhash_internal._minhash_text_sql(cfg, 'd', false), cfg.k,
           cfg.ngram, cfg.unit, cfg.bands, cfg.rows_per_band))::boolean THEN
        RAISE EXCEPTION 'null value in column "id" of relation "%" violates not-null constraint',
            (SELECT c.relname FROM pg_class c WHERE c.oid = cfg.band_table)
            USING ERRCODE = 'not_null_violation',
                  HINT = format('Rows of %s with a text need an id.', tbl);
    END IF;
    -- Of a Citus table: one INSERT ... SELECT, which Citus runs on each shard of the table into
    -- the band table's shard beside it.
    IF (minhash_internal._minhash_citus_table(tbl)).kind IS NOT NULL THEN
        total := minhash_internal._minhash_as_owner(tbl, format(
            'SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM %s', source))::bigint;
        PERFORM minhash_internal._minhash_as_owner(tbl, format(
            'INSERT INTO %s (%s) %s', cfg.band_table, minhash_internal._minhash_band_columns(cfg),
            minhash_internal._minhash_band_insert_sql(cfg, source::text)));
        RETURN total;
    END IF;
    IF loading THEN
        PERFORM minhash_internal._minhash_as_owner(tbl, format(
            'ALTER TABLE %s DISABLE TRIGGER minhash_bands_load', cfg.band_table));
    END IF;
    total := minhash_internal._minhash_as_owner(tbl, format(
        'SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM %s', source))::bigint;
    chunk := greatest(ceil(total / 10.0), 1);
    LOOP
        -- Into a new band table, which has no index yet (minhash_index_create's), the chunk's
        -- rows go to _minhash_band_fill, which signs them on the build's threads and writes
        -- their band rows a thousand at a time, as COPY writes rows (src/index/write/fill.rs);
        -- into one with its indexes (a rebuild, a partition attached), an INSERT ... SELECT.
        IF bulk THEN
            progress := minhash_internal._minhash_as_owner(tbl, format(
                'SELECT pg_catalog.to_jsonb(minhash_internal._minhash_band_fill(
                     %1$s::pg_catalog.oid::pg_catalog.regclass, %2$s::pg_catalog.oid::pg_catalog.regclass, %3$L))',
                tbl::oid, cfg.band_table::oid, format(
                'SELECT d.%1$I::%2$s, (%3$s)::pg_catalog.text, d.%1$I::pg_catalog.text
                 FROM (SELECT * FROM %4$s WHERE %1$I IS NOT NULL %5$s ORDER BY %1$I
                       FETCH FIRST %6$s ROWS WITH TIES) d
                 ORDER BY d.%1$I',
                cfg.id_column, minhash_internal._minhash_band_id_type(cfg.band_table),
                minhash_internal._minhash_text_sql(cfg, 'd', false), source,
                CASE WHEN last_id IS NOT NULL
                     THEN format('AND %I > %L::%s', cfg.id_column, last_id, id_type) ELSE '' END,
                chunk)));
        ELSE
            progress := minhash_internal._minhash_as_owner(tbl, format(
                'WITH chunk AS MATERIALIZED (
                     SELECT * FROM %1$s WHERE %2$I IS NOT NULL %5$s ORDER BY %2$I
                     FETCH FIRST %6$s ROWS WITH TIES),
                 added AS (INSERT INTO %3$s (%7$s) %4$s)
                 SELECT pg_catalog.jsonb_build_array(pg_catalog.count(*),
                     (SELECT c.%2$I::pg_catalog.text FROM chunk c ORDER BY c.%2$I DESC LIMIT 1))
                 FROM chunk',
                source, cfg.id_column, cfg.band_table, minhash_internal._minhash_band_insert_sql(cfg, 'chunk'),
                CASE WHEN last_id IS NOT NULL
                     THEN format('AND %I > %L::%s', cfg.id_column, last_id, id_type) ELSE '' END,
                chunk, minhash_internal._minhash_band_columns(cfg)));
        END IF;
        n := (progress ->> 0)::bigint;
        EXIT WHEN n = 0;
        last_id := progress ->> 1;
        done := done + n;
        seconds := greatest(extract(epoch FROM clock_timestamp() - started), 0.001);
        CONTINUE WHEN seconds < 2;
        RAISE NOTICE 'minhash index on %: % of % rows (% %%), % rows/s', source, done, total,
            round(100.0 * done / total), round(done / seconds);
    END LOOP;
    IF loading THEN
        PERFORM minhash_internal._minhash_as_owner(tbl, format(
            'ALTER TABLE %s ENABLE TRIGGER minhash_bands_load', cfg.band_table));
    END IF;
    RETURN done;
END $$;

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

-- Creates (adding true; those it has already stay) or drops the sync triggers on `rel`: an
-- indexed table or a table of its partition tree. They serve every index of the table: four
-- statement triggers that keep the band table exact, and the row trigger "~minhash_sync_claim"
-- (BEFORE UPDATE, named to fire after the table's other BEFORE triggers) that claims an updated
-- text's band rows at once when a duplicate check does not fire on UPDATE. One fixed trigger
-- function of the extension does both; it checks that the table and trigger that fire it are
-- these (src/index/sync.rs).
CREATE FUNCTION minhash_internal._minhash_sync_triggers(rel regclass, adding boolean)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    trg record;
    citus boolean := (minhash_internal._minhash_citus_table(rel)).kind IS NOT NULL;
    args text := '';
    unsafe_triggers text;
BEGIN
    IF citus THEN
        -- Citus makes each trigger on every shard of the table too, where it fires on the
        -- workers, which have no catalog rows: its arguments carry the catalog rows of the
        -- table's indexes (src/index/citus.rs), so they are made again whenever those change.
        -- Citus asks for citus.enable_unsafe_triggers to make triggers on its tables (README,
        -- "Scaling out with Citus"), here only.
        SELECT coalesce(string_agg(quote_literal(a), ', '), '') INTO args
        FROM unnest(minhash_internal._minhash_citus_args(rel)) a;
        unsafe_triggers := current_setting('citus.enable_unsafe_triggers');
        PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    END IF;
    FOR trg IN
        SELECT * FROM (VALUES
            ('minhash_sync_insert', 'AFTER INSERT', 'REFERENCING NEW TABLE AS new_rows', 'STATEMENT'),
            ('minhash_sync_update', 'AFTER UPDATE', 'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows', 'STATEMENT'),
            ('minhash_sync_delete', 'AFTER DELETE', 'REFERENCING OLD TABLE AS old_rows', 'STATEMENT'),
            ('minhash_sync_truncate', 'AFTER TRUNCATE', '', 'STATEMENT'),
            ('~minhash_sync_claim', 'BEFORE UPDATE', '', 'ROW')) t(name, event, transition, level)
    LOOP
        IF adding
           AND EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = rel AND t.tgname = trg.name
                       AND t.tgfoid = 'minhash_internal._minhash_sync()'::regprocedure
                       AND (NOT citus OR minhash_internal._minhash_trigger_args(t.oid)
                                         = minhash_internal._minhash_citus_args(rel))) THEN
            CONTINUE;
        END IF;
        IF (citus OR NOT adding)
           AND EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = rel AND t.tgname = trg.name
                       AND t.tgfoid = 'minhash_internal._minhash_sync()'::regprocedure) THEN
            EXECUTE format('DROP TRIGGER %I ON %s', trg.name, rel);
        END IF;
        IF adding THEN
            EXECUTE format('CREATE TRIGGER %I %s ON %s %s
                            FOR EACH %s EXECUTE FUNCTION minhash_internal._minhash_sync(%s)',
                           trg.name, trg.event, rel, trg.transition, trg.level, args);
        END IF;
    END LOOP;
    IF citus THEN
        PERFORM set_config('citus.enable_unsafe_triggers', unsafe_triggers, true);
    END IF;
END $$;

-- The tables of the partition tree of tbl below it (none for a table that is not partitioned),
-- parents before their partitions.
CREATE FUNCTION minhash_internal._minhash_partitions(tbl regclass)
RETURNS SETOF regclass
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.relid FROM pg_partition_tree(tbl) t WHERE t.relid <> tbl ORDER BY t.level, t.relid::oid
$$;
