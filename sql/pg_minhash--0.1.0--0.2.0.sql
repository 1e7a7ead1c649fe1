-- pg_minhash 0.1.0 -> 0.2.0. Run by ALTER EXTENSION pg_minhash UPDATE; never edited once
-- released (a change is a new upgrade script). Indexes, band tables and their triggers stay as
-- they are: the moved functions keep their OIDs, which the triggers reference.
\echo Use "ALTER EXTENSION pg_minhash UPDATE TO '0.2.0'" to load this file. \quit

-- The catalog records the signature format of each band table. (First: the ALTER TABLE fires
-- the extension's event trigger, whose function must still find what it calls.)
ALTER TABLE @extschema@.minhash_indexes
    ADD COLUMN format int NOT NULL DEFAULT 1 CHECK (format OPERATOR(pg_catalog.=) 1);
COMMENT ON COLUMN @extschema@.minhash_indexes.format IS 'signature format version of the band table (minhash_format_version())';

-- Several indexes per table: the catalog's key is the band table. Texts from an SQL expression
-- over the row, in place of a text column; the partition tree of an indexed partitioned table.
ALTER TABLE @extschema@.minhash_indexes
    DROP CONSTRAINT minhash_indexes_pkey,
    DROP CONSTRAINT minhash_indexes_band_table_key,
    ADD CONSTRAINT minhash_indexes_pkey PRIMARY KEY (band_table),
    ALTER COLUMN tbl SET NOT NULL,
    ALTER COLUMN text_column DROP NOT NULL,
    ADD COLUMN text_expression text,
    ADD COLUMN partitions regclass[],
    ADD CONSTRAINT minhash_indexes_text_check CHECK ((text_column IS NULL) OPERATOR(pg_catalog.<>) (text_expression IS NULL));
COMMENT ON TABLE @extschema@.minhash_indexes IS 'one row per managed pg_minhash index';

-- Internal functions move out of the extension's schema into one of their own.
CREATE SCHEMA minhash_internal;
GRANT USAGE ON SCHEMA minhash_internal TO PUBLIC;
COMMENT ON SCHEMA minhash_internal IS 'pg_minhash internals: not for direct use';

ALTER FUNCTION @extschema@._minhash_as_owner(regclass, text) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_band_values(text, int, int, text, int, int) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_direct_reads(regclass) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_link_band_table(regclass, regclass) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_lookup_sql(regclass) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_search_pairs(text, int, int, text, int, int, float8) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_threshold(float8, float8) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_band_load() SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_catalog_changed() SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_sync() SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_relink() SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_catalog_loaded() SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_catalog_insert() SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_index(regclass) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_band_rows_sql(@extschema@.minhash_indexes, text) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_backfill(regclass) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_drop_objects(@extschema@.minhash_indexes) SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_ddl() SET SCHEMA minhash_internal;
ALTER FUNCTION @extschema@._minhash_rows_sql(@extschema@.minhash_indexes) SET SCHEMA minhash_internal;

-- Functions 0.2.0 replaces by others with more arguments (minhash_clusters' mode and priority,
-- typed ids) and the library functions it adds.
DROP FUNCTION @extschema@.minhash_clusters(regclass, float8);
DROP FUNCTION @extschema@._minhash_search_clusters(text, int, int, text, int, int, float8);
DROP FUNCTION minhash_internal._minhash_rows_sql(@extschema@.minhash_indexes);

CREATE FUNCTION minhash_internal._minhash_search_clusters(
    rows_query text, k int, ngram int, unit text, bands int, rows_per_band int,
    threshold float8, mode text)
RETURNS TABLE (id bigint, cluster_id bigint)
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_search_clusters_wrapper';

CREATE FUNCTION minhash_internal._minhash_search_keyed_pairs(
    id_type anyelement, rows_query text, k int, ngram int, unit text, bands int,
    rows_per_band int, threshold float8)
RETURNS TABLE (id_a anyelement, id_b anyelement, similarity float8)
STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_search_keyed_pairs_wrapper';

CREATE FUNCTION minhash_internal._minhash_search_keyed_clusters(
    id_type anyelement, rows_query text, k int, ngram int, unit text, bands int,
    rows_per_band int, threshold float8, mode text)
RETURNS TABLE (id anyelement, cluster_id anyelement)
STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_search_keyed_clusters_wrapper';

CREATE FUNCTION minhash_internal._minhash_cluster_mode(mode text, priority text)
RETURNS bool
IMMUTABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_cluster_mode_wrapper';

CREATE FUNCTION @extschema@.minhash_duplicates(
    ids anyarray, texts text[], threshold float8 DEFAULT 0.8, k int DEFAULT 128,
    ngram int DEFAULT 5, unit text DEFAULT 'char')
RETURNS TABLE (id_a anyelement, id_b anyelement, similarity float8)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'minhash_duplicates_of_arrays_wrapper';

CREATE FUNCTION @extschema@.minhash_clusters(
    ids anyarray, texts text[], threshold float8 DEFAULT 0.8, k int DEFAULT 128,
    ngram int DEFAULT 5, unit text DEFAULT 'char', mode text DEFAULT 'connected')
RETURNS TABLE (id anyelement, cluster_id anyelement)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'minhash_clusters_of_arrays_wrapper';

-- The SQL-language functions, as 0.2.0 defines them (they call the moved functions by their
-- new schema; builds report progress only once they take seconds).

CREATE OR REPLACE FUNCTION minhash_internal._minhash_relink()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    link record;
BEGIN
    FOR link IN
        SELECT i.tbl, i.band_table FROM @extschema@.minhash_indexes i
        JOIN pg_class t ON t.oid = i.tbl JOIN pg_class b ON b.oid = i.band_table
        WHERE b.relowner = t.relowner AND pg_has_role(t.relowner, 'USAGE')
          -- (a Citus table's band table has none on its table: _minhash_link_band_table)
          AND (minhash_internal._minhash_citus_table(i.tbl)).kind IS NULL
          AND NOT EXISTS (SELECT FROM pg_depend d
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = i.band_table
                            AND d.refclassid = 'pg_class'::regclass AND d.refobjid = i.tbl)
    LOOP
        PERFORM minhash_internal._minhash_link_band_table(link.tbl, link.band_table);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_catalog_loaded()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM minhash_internal._minhash_relink();
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_catalog_insert()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM @extschema@.minhash_indexes i
               WHERE i.band_table = NEW.band_table AND i.tbl = NEW.tbl) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_index(tbl regclass)
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
    IF (SELECT count(*) FROM @extschema@.minhash_indexes i WHERE i.tbl = _minhash_index.tbl) > 1 THEN
        RAISE EXCEPTION 'table % has % minhash indexes', tbl,
            (SELECT count(*) FROM @extschema@.minhash_indexes i WHERE i.tbl = _minhash_index.tbl)
            USING ERRCODE = 'ambiguous_function',
                  HINT = format('Name one by its band table: %s.',
                                (SELECT string_agg(i.band_table::text, ', ' ORDER BY i.band_table::oid)
                                 FROM @extschema@.minhash_indexes i WHERE i.tbl = _minhash_index.tbl));
    END IF;
    SELECT * INTO cfg FROM @extschema@.minhash_indexes i
    WHERE i.tbl = _minhash_index.tbl OR i.band_table = _minhash_index.tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % has no minhash index', tbl
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create one with minhash_index_create(table, id_column, text_column).';
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

-- Texts from an expression: checked and printed as the catalog keeps it, and computed as the
-- table's owner for SQL that runs with the caller's rights (src/index/text.rs).
CREATE FUNCTION minhash_internal._minhash_text_expression(tbl regclass, expression text)
RETURNS text
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_text_expression_wrapper';
CREATE FUNCTION minhash_internal._minhash_row_text(band regclass, columns anyelement)
RETURNS text
STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_row_text_wrapper';
CREATE FUNCTION minhash_internal._minhash_row_text_sql(band regclass, alias text)
RETURNS text
STRICT STABLE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_row_text_sql_wrapper';

-- The text of the row `alias` of an index's table in SQL: the text column, or the text
-- expression. SQL that runs as the table's owner (as_caller false: backfill, check) computes the
-- expression inline over the bare column names (`alias` must be the only relation in scope);
-- SQL that runs with the caller's rights has it computed by _minhash_row_text, as the owner
-- (src/index/text.rs): the owner's code never runs with the caller's rights.
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

-- The band rows of one text as a set (src/index/mod.rs), for the band-row SQL of Citus tables.
CREATE FUNCTION minhash_internal._minhash_band_rows(doc text, k int, ngram int, unit text,
    bands int, rows_per_band int)
RETURNS TABLE (key bigint, sketch1 bigint, sketch2 bigint)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_band_rows_wrapper';

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

-- Makes the (empty) band table of an index of a Citus table a Citus table too: of a distributed
-- table, distributed by id and co-located with it, so that each band row lives on the shard of
-- its row and the sync triggers on the shards write locally; of a reference table, a
-- reference table, written on each node beside the table's copy there.
CREATE FUNCTION minhash_internal._minhash_citus_distribute(band regclass, tbl regclass, kind text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF kind = 'distributed' THEN
        EXECUTE 'SELECT pg_catalog.create_distributed_table($1, ''id'', colocate_with => $2)'
        USING band, tbl::text;
    ELSE
        EXECUTE 'SELECT pg_catalog.create_reference_table($1)' USING band;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_band_rows_sql(cfg @extschema@.minhash_indexes, source text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    -- (Citus runs the SELECT on each shard only without OFFSET: there the band values come
    -- from a function in FROM, once per text too)
    SELECT CASE WHEN (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN format(
        'SELECT d.%1$I::%2$s AS id, b.key, b.sketch1, b.sketch2 FROM %3$s d
         CROSS JOIN LATERAL minhash_internal._minhash_band_rows(%4$s, %5$s, %6$s, %7$L, %8$s, %9$s) b',
        cfg.id_column, minhash_internal._minhash_band_id_type(cfg.band_table), source,
        minhash_internal._minhash_text_sql(cfg, 'd', false), cfg.k, cfg.ngram, cfg.unit, cfg.bands,
        cfg.rows_per_band) ELSE format(
        'SELECT s.id, pg_catalog.unnest(s.v[1:%1$s]) AS key, s.v[%1$s + 1] AS sketch1,
                s.v[%1$s + 2] AS sketch2
         FROM (SELECT d.%2$I::%9$s AS id,
                      minhash_internal._minhash_band_values(%3$s, %4$s, %5$s, %6$L, %1$s, %7$s) AS v
               FROM %8$s d OFFSET 0) s
         WHERE s.v IS NOT NULL',
        cfg.bands, cfg.id_column, minhash_internal._minhash_text_sql(cfg, 'd', false), cfg.k,
        cfg.ngram, cfg.unit, cfg.rows_per_band, source, minhash_internal._minhash_band_id_type(cfg.band_table)) END
$$;

DROP FUNCTION minhash_internal._minhash_backfill(regclass);
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
BEGIN
    source := coalesce(source, tbl);
    -- Of a Citus table: one INSERT ... SELECT, which Citus runs on each shard of the table into
    -- the band table's shard beside it.
    IF (minhash_internal._minhash_citus_table(tbl)).kind IS NOT NULL THEN
        total := minhash_internal._minhash_as_owner(tbl, format(
            'SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM %s', source))::bigint;
        PERFORM minhash_internal._minhash_as_owner(tbl, format(
            'INSERT INTO %s (id, key, sketch1, sketch2) %s', cfg.band_table,
            minhash_internal._minhash_band_rows_sql(cfg, source::text)));
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
        progress := minhash_internal._minhash_as_owner(tbl, format(
            'WITH chunk AS MATERIALIZED (
                 SELECT * FROM %1$s WHERE %2$I IS NOT NULL %5$s ORDER BY %2$I
                 FETCH FIRST %6$s ROWS WITH TIES),
             added AS (INSERT INTO %3$s (id, key, sketch1, sketch2) %4$s)
             SELECT pg_catalog.jsonb_build_array(pg_catalog.count(*),
                 (SELECT c.%2$I::pg_catalog.text FROM chunk c ORDER BY c.%2$I DESC LIMIT 1))
             FROM chunk',
            source, cfg.id_column, cfg.band_table, minhash_internal._minhash_band_rows_sql(cfg, 'chunk'),
            CASE WHEN last_id IS NOT NULL
                 THEN format('AND %I > %L::%s', cfg.id_column, last_id, id_type) ELSE '' END,
            chunk));
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

-- The arguments of trigger `trigger`.
CREATE FUNCTION minhash_internal._minhash_trigger_args(trigger oid)
RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- (tgargs: the arguments, each ended by a zero byte)
    SELECT coalesce(array_agg(convert_from(decode(u.a, 'escape'), 'UTF8') ORDER BY u.n), '{}')
    FROM pg_trigger t
    CROSS JOIN LATERAL unnest((string_to_array(encode(t.tgargs, 'escape'), '\000'))[1:t.tgnargs])
         WITH ORDINALITY u(a, n)
    WHERE t.oid = trigger
$$;

-- (a new last argument, text_expression, and text_column may be NULL)
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
            ('minhash_sync_insert', 'INSERT', 'REFERENCING NEW TABLE AS new_rows'),
            ('minhash_sync_update', 'UPDATE', 'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows'),
            ('minhash_sync_delete', 'DELETE', 'REFERENCING OLD TABLE AS old_rows'),
            ('minhash_sync_truncate', 'TRUNCATE', '')) t(name, event, transition)
    LOOP
        IF adding
           AND EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = rel AND t.tgname = trg.name
                       AND t.tgfoid = 'minhash_internal._minhash_sync()'::regprocedure
                       AND (NOT citus OR minhash_internal._minhash_trigger_args(t.oid)
                                         = minhash_internal._minhash_citus_args(rel))) THEN
            CONTINUE;
        END IF;
        IF (citus OR NOT adding)
           AND EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = rel AND t.tgname = trg.name) THEN
            EXECUTE format('DROP TRIGGER %I ON %s', trg.name, rel);
        END IF;
        IF adding THEN
            EXECUTE format('CREATE TRIGGER %I AFTER %s ON %s %s
                            FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_sync(%s)',
                           trg.name, trg.event, rel, trg.transition, args);
        END IF;
    END LOOP;
    IF citus THEN
        PERFORM set_config('citus.enable_unsafe_triggers', unsafe_triggers, true);
    END IF;
END $$;

CREATE FUNCTION minhash_internal._minhash_partitions(tbl regclass)
RETURNS SETOF regclass
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.relid FROM pg_partition_tree(tbl) t WHERE t.relid <> tbl ORDER BY t.level, t.relid::oid
$$;

DROP FUNCTION @extschema@.minhash_index_create(regclass, name, name, int, int, text, float8, int, int);
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
    text_expression text DEFAULT NULL)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel record;
    id_type regtype;
    id_collation oid;
    band_id_type text;
    text_type regtype;
    id_attnum int2;
    band_name text;
    n int;
    band regclass;
    cfg @extschema@.minhash_indexes;
    grantee text;
    citus record;
BEGIN
    IF tbl IS NULL OR id_column IS NULL OR k IS NULL OR ngram IS NULL
       OR unit IS NULL OR threshold IS NULL THEN
        RAISE EXCEPTION 'only text_column, text_expression, bands and rows_per_band may be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF (text_column IS NULL) = (text_expression IS NULL) THEN
        RAISE EXCEPTION 'give either text_column or text_expression'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'minhash_index_create(tbl, id_column, text_column) indexes a column; '
                         'minhash_index_create(tbl, id_column, text_expression => ''...'') an expression over the row.';
    END IF;
    SELECT c.relname, c.relkind, c.relpersistence, c.relispartition, n.nspname, c.relowner INTO rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', tbl USING ERRCODE = 'wrong_object_type',
            HINT = 'Views, materialized views and foreign tables cannot have a minhash index.';
    END IF;
    -- (an index covers a whole partition tree; its triggers would not see rows written through
    -- the tables above the partition)
    IF rel.relispartition THEN
        RAISE EXCEPTION '% is a partition of %', tbl,
            (SELECT h.inhparent::regclass FROM pg_inherits h WHERE h.inhrelid = tbl)
            USING ERRCODE = 'feature_not_supported',
                  HINT = format('Index the partitioned table at the root of its tree, %s.',
                                pg_partition_root(tbl));
    END IF;
    -- (its catalog row would outlive the session, and pg_dump would carry it)
    IF rel.relpersistence = 't' THEN
        RAISE EXCEPTION '% is a temporary table', tbl USING ERRCODE = 'feature_not_supported',
            HINT = 'Index a permanent or unlogged table.';
    END IF;
    -- (the Rust side reads text as UTF-8; the contract hashes UTF-8 bytes)
    IF pg_catalog.getdatabaseencoding() <> 'UTF8' THEN
        RAISE EXCEPTION 'database encoding % is not supported', pg_catalog.getdatabaseencoding()
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'A minhash index needs a UTF8 database: CREATE DATABASE ... ENCODING ''UTF8'' TEMPLATE template0.';
    END IF;
    -- (a query of a parent reads its children's rows, which the triggers of the parent never see)
    IF rel.relkind = 'r' AND EXISTS (SELECT FROM pg_inherits h WHERE h.inhrelid = tbl OR h.inhparent = tbl) THEN
        RAISE EXCEPTION '% has inheritance parents or children', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Index a table that neither inherits nor is inherited from, or a partitioned table.';
    END IF;
    IF NOT pg_has_role(rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- A table of Citus: its band table becomes a Citus table of the same kind, written by the
    -- sync triggers on the table's shards (README, "Scaling out with Citus").
    citus := minhash_internal._minhash_citus_table(tbl);
    IF citus.kind = 'other' THEN
        RAISE EXCEPTION '% is a Citus table that is neither distributed by a column nor a reference table', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Index a hash-distributed table, a reference table or a table Citus does not manage.';
    ELSIF citus.kind IS NOT NULL AND rel.relkind = 'p' THEN
        RAISE EXCEPTION '% is a partitioned Citus table', tbl USING ERRCODE = 'feature_not_supported',
            HINT = 'A minhash index of a Citus table needs a table that is not partitioned.';
    ELSIF citus.kind = 'distributed' AND citus.dist_column <> id_column THEN
        RAISE EXCEPTION '% is distributed by column "%", not by its id column "%"', tbl,
            citus.dist_column, id_column
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'A minhash index keeps the band rows of each row on the row''s shard: '
                         'distribute the table by the id column the index names.';
    ELSIF citus.kind IS NOT NULL AND text_expression IS NOT NULL THEN
        RAISE EXCEPTION 'a minhash index of Citus table % cannot index a text expression', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Index a stored generated column of that expression: ALTER TABLE ... ADD COLUMN '
                         '... text GENERATED ALWAYS AS (...) STORED.';
    END IF;

    SELECT a.atttypid::regtype, a.attnum, a.attcollation,
           CASE WHEN a.atttypid IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype)
                THEN 'bigint' ELSE format_type(a.atttypid, a.atttypmod) END
    INTO id_type, id_attnum, id_collation, band_id_type FROM pg_attribute a
    WHERE a.attrelid = tbl AND a.attname = id_column AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of table % does not exist', id_column, tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    -- The id may be of any type: a unique B-tree on it alone is what makes it a row's key. A
    -- partitioned table's unique keys must hold its partition key too: one that holds the id
    -- is taken (the id is then unique within a partition; see the README on repeated ids).
    -- (PostgreSQL gives a partitioned table with a unique index no foreign partitions, whose
    -- writes would fire no statement triggers with transition tables)
    -- (a deferrable key lets two rows share an id until commit, and their band rows with it)
    IF NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = tbl AND x.indisunique
                   AND x.indimmediate AND x.indpred IS NULL AND x.indexprs IS NULL
                   AND CASE WHEN rel.relkind = 'p'
                            THEN id_attnum = ANY ((x.indkey::int2[])[0:x.indnkeyatts - 1])
                            ELSE x.indnkeyatts = 1 AND x.indkey[0] = id_attnum END) THEN
        RAISE EXCEPTION 'id column "%" of table % is not unique', id_column, tbl
            USING ERRCODE = 'invalid_column_reference',
                  HINT = CASE WHEN rel.relkind = 'p'
                              THEN 'Add a primary key or unique constraint, not deferrable, that holds '
                                   'that column and the partition key, e.g. PRIMARY KEY (id, created_at).'
                              ELSE 'Add a primary key or unique constraint on that column alone, not deferrable. '
                                   'A key of several columns cannot identify rows for a minhash index: '
                                   'add a single-column key, e.g. an identity column.' END;
    END IF;
    -- (ids are bigint or bytes in Rust, compared byte for byte; a collation that calls
    -- different strings equal would let two rows' ids differ only in bytes)
    IF id_collation <> 0 AND EXISTS (SELECT FROM pg_collation c WHERE c.oid = id_collation
                                     AND NOT c.collisdeterministic) THEN
        RAISE EXCEPTION 'id column "%" of table % has a nondeterministic collation', id_column, tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Index the table through a key with a deterministic collation.';
    END IF;
    -- (band rows are written and deleted through arrays of ids)
    IF NOT EXISTS (SELECT FROM pg_type t WHERE t.oid = id_type AND t.typarray <> 0) THEN
        RAISE EXCEPTION 'id column "%" of table % is of type %, which has no array type', id_column, tbl, id_type
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Index the table through a key of a scalar type.';
    END IF;
    IF id_collation <> 0 AND id_collation <> 'pg_catalog.default'::regcollation THEN
        band_id_type := band_id_type || ' COLLATE ' || id_collation::regcollation::text;
    END IF;
    IF text_expression IS NOT NULL THEN
        -- (checked, and printed in the form the catalog keeps: names outside pg_catalog
        -- qualified; 42P17 if it is not IMMUTABLE)
        text_expression := minhash_internal._minhash_text_expression(tbl, text_expression);
    ELSE
        SELECT a.atttypid::regtype INTO text_type FROM pg_attribute a
        WHERE a.attrelid = tbl AND a.attname = text_column AND a.attnum > 0 AND NOT a.attisdropped;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'column "%" of table % does not exist', text_column, tbl
                USING ERRCODE = 'undefined_column';
        END IF;
        IF text_type NOT IN ('text'::regtype, 'character varying'::regtype) THEN
            RAISE EXCEPTION 'text column "%" is of type %, not text or character varying', text_column, text_type
                USING ERRCODE = 'datatype_mismatch',
                      HINT = format('Index an expression instead: text_expression => %L.',
                                    format('%I::text', text_column));
        END IF;
        -- (PostgreSQL 18: a virtual generated column has no value in the rows triggers see)
        IF EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = text_column
                   AND a.attgenerated = 'v') THEN
            RAISE EXCEPTION 'text column "%" of table % is a virtual generated column', text_column, tbl
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Make it a stored generated column (GENERATED ALWAYS AS (...) STORED).';
        END IF;
    END IF;

    -- Argument checks with the core's own messages.
    PERFORM @extschema@.minhash('', k, ngram, unit);
    threshold := minhash_internal._minhash_threshold(threshold, NULL);
    IF bands IS NULL THEN
        IF rows_per_band IS NOT NULL THEN
            RAISE EXCEPTION 'rows_per_band needs bands' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT p.bands, p.rows_per_band INTO bands, rows_per_band
        FROM @extschema@.lsh_params(threshold, k) p LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'no banding of % slots reaches 0.99 recall at threshold %', k, threshold
                USING ERRCODE = 'invalid_parameter_value', HINT = 'Use a larger k.';
        END IF;
    ELSIF rows_per_band IS NULL THEN
        PERFORM @extschema@.lsh_bands(@extschema@.minhash('', k), bands);
        rows_per_band := k / bands;
    ELSE
        PERFORM @extschema@.lsh_bands(@extschema@.minhash('', k), bands, rows_per_band);
    END IF;

    -- Writers wait until this transaction commits: the backfill sees every row.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);

    -- (a second index of the same text with the same settings would only cost writes)
    IF EXISTS (SELECT FROM @extschema@.minhash_indexes i
               WHERE i.tbl = minhash_index_create.tbl AND i.id_column = minhash_index_create.id_column
                 AND i.text_column IS NOT DISTINCT FROM minhash_index_create.text_column
                 AND i.text_expression IS NOT DISTINCT FROM minhash_index_create.text_expression
                 AND (i.k, i.ngram, i.unit, i.threshold, i.bands, i.rows_per_band)
                     = (minhash_index_create.k, minhash_index_create.ngram, minhash_index_create.unit,
                        minhash_index_create.threshold, minhash_index_create.bands,
                        minhash_index_create.rows_per_band)) THEN
        RAISE EXCEPTION 'table % already has a minhash index of this text with these settings', tbl
            USING ERRCODE = 'duplicate_object',
                  HINT = 'Use minhash_index_rebuild() to rebuild it, or minhash_index_drop() first.';
    END IF;

    -- <table>_minhash_bands, or with the first number that makes it free (a second index, or a
    -- table renamed and another created under its old name), as PostgreSQL names indexes
    FOR n IN 0..1000 LOOP
        band_name := left(rel.relname, 63 - length('_minhash_bands') - coalesce(length(nullif(n, 0)::text), 0))
                     || '_minhash_bands' || coalesce(nullif(n, 0)::text, '');
        EXIT WHEN to_regclass(format('%I.%I', rel.nspname, band_name)) IS NULL;
    END LOOP;
    IF to_regclass(format('%I.%I', rel.nspname, band_name)) IS NOT NULL THEN
        RAISE EXCEPTION 'relation %.% already exists', quote_ident(rel.nspname), quote_ident(band_name)
            USING ERRCODE = 'duplicate_table';
    END IF;
    -- sketch1 and sketch2: 128 signature bits a lookup compares before fetching a candidate
    -- (unlogged like its table: after a crash both come back empty)
    -- (id: bigint for integer keys, the key's own type otherwise; see src/index/key.rs)
    EXECUTE format('CREATE %s TABLE %I.%I (id %s NOT NULL, key bigint NOT NULL,
                    sketch1 bigint NOT NULL, sketch2 bigint NOT NULL)',
                   CASE rel.relpersistence WHEN 'u' THEN 'UNLOGGED' ELSE '' END,
                   rel.nspname, band_name, band_id_type);
    band := format('%I.%I', rel.nspname, band_name)::regclass;
    EXECUTE format('COMMENT ON TABLE %s IS %L', band,
                   format('pg_minhash band keys of %s; maintained by triggers', tbl));
    -- The band table belongs to the table's owner, whoever made it (a superuser, or another
    -- member of the owning role), like the table's own indexes, and is private to that role:
    -- default privileges may have granted something on it.
    EXECUTE format('ALTER TABLE %s OWNER TO %I', band, pg_get_userbyid(rel.relowner));
    FOR grantee IN
        SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
        FROM pg_class c
        CROSS JOIN LATERAL aclexplode(c.relacl) a
        LEFT JOIN pg_roles r ON r.oid = a.grantee
        WHERE c.oid = band AND a.grantee <> rel.relowner
    LOOP
        EXECUTE format('REVOKE ALL ON %s FROM %s', band, grantee);
    END LOOP;
    IF citus.kind IS NOT NULL THEN
        PERFORM minhash_internal._minhash_citus_distribute(band, tbl, citus.kind);
    END IF;
    PERFORM minhash_internal._minhash_link_band_table(tbl, band);

    cfg := ROW(tbl, id_column, text_column, band, k, ngram, unit, threshold, bands,
               rows_per_band, now(), @extschema@.minhash_format_version(), text_expression,
               CASE WHEN rel.relkind = 'p'
                    THEN ARRAY(SELECT minhash_internal._minhash_partitions(tbl)) END);
    INSERT INTO @extschema@.minhash_indexes SELECT cfg.*;

    -- The sync triggers (once per table, for all its indexes), on every table of a partition
    -- tree: a statement fires the statement triggers of the table it names only
    -- (src/index/sync.rs).
    PERFORM minhash_internal._minhash_sync_triggers(tbl, true);
    PERFORM minhash_internal._minhash_sync_triggers(p, true)
    FROM minhash_internal._minhash_partitions(tbl) p;

    PERFORM minhash_internal._minhash_backfill(band);
    -- A lookup reads and filters candidates from this index alone (an index-only scan); the
    -- sync trigger deletes band rows through it. It is not unique: a flag trigger writes a
    -- row's band rows before it checks the row (src/index/claim.rs), while band rows of the
    -- row's id may still be there. The band table's replica identity is its whole row (four
    -- columns), so UPDATE and DELETE on the table work under a publication that includes the
    -- band table. PostgreSQL builds the index and analyzes the band table as the band table's
    -- owner.
    EXECUTE format('CREATE INDEX ON %s (key, id) INCLUDE (sketch1, sketch2)', band);
    EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', band);
    -- Rows a data-only restore copies into the band table after the sync triggers indexed
    -- the table are dropped (src/index/restore.rs). (Citus has its own way of moving tables
    -- and no triggers on band tables.)
    IF citus.kind IS NULL THEN
        EXECUTE format('CREATE TRIGGER minhash_bands_load BEFORE INSERT ON %s
                        FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_band_load()', band);
    END IF;
    -- (Citus analyzes the shards of a Citus table on the workers, by their autovacuum)
    IF citus.kind IS NULL THEN
        EXECUTE format('ANALYZE %s', band);
    END IF;
    RETURN band;
END $$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_drop_objects(cfg @extschema@.minhash_indexes)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- (a dropped band table prints as a bare OID, which DROP TABLE cannot parse)
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = cfg.band_table) THEN
        EXECUTE format('DROP TABLE %s', cfg.band_table);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION @extschema@.minhash_index_drop(tbl regclass, cascade boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
    trg text;
    flags text[];
BEGIN
    tbl := cfg.tbl;
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = tbl AND pg_has_role(c.relowner, 'USAGE')) THEN
        RAISE EXCEPTION 'must be owner of relation %', (SELECT quote_ident(c.relname) FROM pg_class c WHERE c.oid = tbl)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Readers and writers of the table go first, then nothing can hold the band table: each
    -- of them takes the table before the band table, so dropping both cannot deadlock.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    SELECT array_agg(t.tgname::text ORDER BY t.tgname) INTO flags FROM pg_trigger t
    WHERE t.tgrelid = tbl AND t.tgfoid = '@extschema@.minhash_flag_duplicate()'::regprocedure
      AND coalesce(nullif((string_to_array(encode(t.tgargs, 'escape'), '\000'))[4], ''),
                   (SELECT c.relname FROM pg_class c WHERE c.oid = cfg.band_table))
          = (SELECT c.relname FROM pg_class c WHERE c.oid = cfg.band_table);
    IF flags IS NOT NULL AND NOT coalesce(cascade, false) THEN
        RAISE EXCEPTION 'cannot drop the minhash index of table % because other objects depend on it', tbl
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = (SELECT string_agg(format('trigger %s on table %s depends on it', f, tbl), E'\n')
                            FROM unnest(flags) f),
                  HINT = format('Drop the triggers first, or use minhash_index_drop(%L, cascade => true) to drop them too.', tbl);
    END IF;
    FOREACH trg IN ARRAY coalesce(flags, '{}') LOOP
        RAISE NOTICE 'drop cascades to trigger % on table %', trg, tbl;
        -- (Citus drops a trigger of its tables only with citus.enable_unsafe_triggers on)
        IF (minhash_internal._minhash_citus_table(tbl)).kind IS NOT NULL THEN
            PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
        END IF;
        EXECUTE format('DROP TRIGGER %I ON %s', trg, tbl);
    END LOOP;
    -- (the catalog row first: a band table dropped while its row names it is refused below)
    DELETE FROM @extschema@.minhash_indexes i WHERE i.band_table = cfg.band_table;
    PERFORM minhash_internal._minhash_drop_objects(cfg);
    IF NOT EXISTS (SELECT FROM @extschema@.minhash_indexes i WHERE i.tbl = cfg.tbl) THEN
        PERFORM minhash_internal._minhash_sync_triggers(tbl, false);
        PERFORM minhash_internal._minhash_sync_triggers(p, false)
        FROM minhash_internal._minhash_partitions(tbl) p;
    ELSIF (minhash_internal._minhash_citus_table(tbl)).kind IS NOT NULL THEN
        -- (the triggers on the shards carry the catalog rows of the indexes left)
        PERFORM minhash_internal._minhash_sync_triggers(tbl, true);
    END IF;
END $$;

CREATE FUNCTION minhash_internal._minhash_tree_changed(cfg @extschema@.minhash_indexes, dropped oid[])
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tree regclass[] := ARRAY(SELECT minhash_internal._minhash_partitions(cfg.tbl));
    kept oid[] := coalesce(cfg.partitions::oid[], '{}');
    member regclass;
BEGIN
    IF tree::oid[] = kept THEN
        RETURN;
    END IF;
    -- joined: parents before their partitions
    FOR member IN SELECT t FROM unnest(tree) WITH ORDINALITY u(t, n) WHERE t <> ALL (kept) ORDER BY n LOOP
        PERFORM minhash_internal._minhash_sync_triggers(member, true);
        IF (SELECT c.relkind FROM pg_class c WHERE c.oid = member) = 'r' THEN
            PERFORM minhash_internal._minhash_backfill(cfg.band_table, member);
        END IF;
    END LOOP;
    -- left, still there (detached): the band rows of their rows go
    FOR member IN
        SELECT k::regclass FROM unnest(kept) k
        WHERE k <> ALL (tree::oid[]) AND k <> ALL (coalesce(dropped, '{}'))
          AND EXISTS (SELECT FROM pg_class c WHERE c.oid = k)
    LOOP
        IF (SELECT c.relkind FROM pg_class c WHERE c.oid = member) = 'r' THEN
            PERFORM minhash_internal._minhash_as_owner(cfg.tbl, format(
                'WITH gone AS (%s), d AS (DELETE FROM %s b USING gone g
                     WHERE b.key OPERATOR(pg_catalog.=) g.key AND b.id OPERATOR(pg_catalog.=) g.id
                     RETURNING 1)
                 SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM d',
                minhash_internal._minhash_band_rows_sql(cfg, member::text), cfg.band_table));
        END IF;
        PERFORM minhash_internal._minhash_sync_triggers(member, false);
    END LOOP;
    -- left, dropped: their rows are gone with them
    IF kept && dropped THEN
        BEGIN
            PERFORM minhash_internal._minhash_as_owner(cfg.tbl, format(
                'WITH d AS (DELETE FROM %s b WHERE NOT EXISTS (SELECT FROM %s t
                     WHERE t.%I OPERATOR(pg_catalog.=) b.id) RETURNING 1)
                 SELECT pg_catalog.to_jsonb(pg_catalog.count(*)) FROM d',
                cfg.band_table, cfg.tbl, cfg.id_column));
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE WARNING 'the minhash index of % keeps the band rows of the dropped partition: %',
                cfg.tbl, SQLERRM
                USING HINT = format('Its owner can remove them with minhash_index_rebuild(%L).', cfg.tbl);
        END;
    END IF;
    UPDATE @extschema@.minhash_indexes i SET partitions = tree WHERE i.band_table = cfg.band_table;
END $$;

CREATE OR REPLACE FUNCTION minhash_internal._minhash_ddl()
RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes;
    bad name;
    table_owner oid;
    dropped_name text;
    inherited regclass;
    band_id regtype;
    problem text;
BEGIN
    IF NOT has_schema_privilege('@extschema@'::regnamespace, 'USAGE') THEN
        RETURN;  -- a role that cannot reach the extension cannot have made an index
    END IF;
    IF TG_EVENT = 'ddl_command_end' AND TG_TAG IN ('CREATE TRIGGER', 'ALTER TRIGGER') THEN
        -- A sync trigger of an indexed table fires by its name: a new name would leave the
        -- table unindexed (Citus's citus_add_local_table_to_metadata renames the table's
        -- triggers so, as it turns the table into a shard of a Citus local table).
        SELECT t.tgrelid INTO inherited
        FROM pg_event_trigger_ddl_commands() c JOIN pg_trigger t ON t.oid = c.objid
        WHERE TG_TAG = 'ALTER TRIGGER' AND c.classid = 'pg_trigger'::regclass
          AND t.tgfoid = 'minhash_internal._minhash_sync()'::regprocedure
          AND EXISTS (SELECT FROM @extschema@.minhash_indexes i
                      WHERE t.tgrelid = i.tbl OR t.tgrelid = ANY (i.partitions::oid[]))
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'the triggers of the minhash index of table % cannot be renamed', inherited
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'citus_add_local_table_to_metadata() and foreign keys between a '
                               'reference table and a local table rename them so.',
                      HINT = 'Drop the index first with minhash_index_drop(), and create it again '
                             'afterwards.';
        END IF;
        -- A table dropped with its index in this transaction, made again under its name with
        -- its sync triggers, as Citus's undistribute_table(), alter_distributed_table() and
        -- alter_table_set_access_method() do: the triggers would fire with no index.
        SELECT t.tgrelid INTO inherited
        FROM pg_event_trigger_ddl_commands() c JOIN pg_trigger t ON t.oid = c.objid
        WHERE TG_TAG = 'CREATE TRIGGER' AND c.classid = 'pg_trigger'::regclass
          AND t.tgfoid = 'minhash_internal._minhash_sync()'::regprocedure
          AND (pg_identify_object('pg_class'::regclass, t.tgrelid, 0)).identity
              = ANY (coalesce(nullif(current_setting('minhash_internal.dropped_tables', true), ''), '{}')::text[])
          AND NOT EXISTS (SELECT FROM @extschema@.minhash_indexes i
                          WHERE t.tgrelid = i.tbl OR t.tgrelid = ANY (i.partitions::oid[]))
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'table % was made again without the minhash index it had', inherited
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'undistribute_table(), alter_distributed_table() and '
                               'alter_table_set_access_method() of Citus make a table again '
                               'so, and do not carry a minhash index over.',
                      HINT = format('Drop the index first with minhash_index_drop(%L), and '
                                    'create it again afterwards.', inherited);
        END IF;
        RETURN;
    END IF;
    IF TG_EVENT = 'ddl_command_end' THEN
        IF '@extschema@.minhash_indexes'::regclass IN (SELECT c.objid FROM pg_event_trigger_ddl_commands() c) THEN
            PERFORM minhash_internal._minhash_relink();
        END IF;
        -- CREATE TABLE ... INHERITS, ALTER TABLE ... INHERIT and ATTACH PARTITION
        SELECT i.tbl INTO inherited FROM @extschema@.minhash_indexes i JOIN pg_class c ON c.oid = i.tbl
        WHERE c.relispartition
           OR c.relkind = 'r' AND EXISTS (SELECT FROM pg_inherits h
                                          WHERE h.inhrelid = i.tbl OR h.inhparent = i.tbl)
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'table % has a minhash index and cannot take part in inheritance or become a partition', inherited
                USING ERRCODE = 'feature_not_supported',
                      HINT = format('Drop the index first with minhash_index_drop(%L).', inherited);
        END IF;
        -- (CREATE TABLE ... PARTITION OF names the partition, ATTACH and DETACH its parent)
        FOR cfg IN
            SELECT i.* FROM @extschema@.minhash_indexes i
            WHERE i.partitions IS NOT NULL
              AND i.tbl IN (SELECT coalesce(pg_partition_root(c.objid), c.objid)
                            FROM pg_event_trigger_ddl_commands() c
                            WHERE c.classid = 'pg_class'::regclass)
        LOOP
            PERFORM minhash_internal._minhash_tree_changed(cfg, NULL);
        END LOOP;
        FOR cfg IN
            SELECT i.* FROM @extschema@.minhash_indexes i
            WHERE i.tbl IN (SELECT c.objid FROM pg_event_trigger_ddl_commands() c
                            WHERE c.classid = 'pg_class'::regclass)
        LOOP
            SELECT a.atttypid INTO band_id FROM pg_attribute a
            WHERE a.attrelid = cfg.band_table AND a.attname = 'id' AND NOT a.attisdropped;
            SELECT CASE WHEN NOT coalesce(bool_or(a.attname = cfg.id_column AND
                             CASE WHEN band_id = 'bigint'::regtype
                                  THEN a.atttypid IN ('smallint'::regtype, 'integer'::regtype,
                                                      'bigint'::regtype)
                                  ELSE a.atttypid = band_id END), false)
                        THEN cfg.id_column
                        WHEN cfg.text_column IS NOT NULL
                             AND NOT coalesce(bool_or(a.attname = cfg.text_column AND a.atttypid IN
                             ('text'::regtype, 'character varying'::regtype)
                             AND a.attgenerated <> 'v'), false)
                        THEN cfg.text_column END
            INTO bad
            FROM pg_attribute a WHERE a.attrelid = cfg.tbl AND a.attnum > 0 AND NOT a.attisdropped;
            IF bad IS NOT NULL THEN
                RAISE EXCEPTION 'the minhash index of table % reads column "%"', cfg.tbl, bad
                    USING ERRCODE = 'dependent_objects_still_exist',
                          DETAIL = format('Its id column "%s" must keep its type (%s) and its '
                                          'text column "%s" stay text or character varying '
                                          '(not virtual generated), under these names.',
                                          cfg.id_column,
                                          CASE WHEN band_id = 'bigint'::regtype
                                               THEN 'smallint, integer or bigint'
                                               ELSE format_type(band_id, NULL) END,
                                          cfg.text_column),
                          HINT = format('Drop the index first with minhash_index_drop(%L), and '
                                        'create it again afterwards.', cfg.tbl);
            END IF;
            -- a text expression must still read the same columns, with the same meaning
            IF cfg.text_expression IS NOT NULL THEN
                BEGIN
                    problem := CASE WHEN minhash_internal._minhash_text_expression(cfg.tbl, cfg.text_expression)
                                         IS DISTINCT FROM cfg.text_expression
                                    THEN 'would read differently' END;
                EXCEPTION WHEN OTHERS THEN
                    problem := 'fails: ' || SQLERRM;
                END;
                IF problem IS NOT NULL THEN
                    RAISE EXCEPTION 'the minhash index of table % reads columns this changes', cfg.tbl
                        USING ERRCODE = 'dependent_objects_still_exist',
                              DETAIL = format('Its text expression %s %s.', cfg.text_expression, problem),
                              HINT = format('Drop the index first with minhash_index_drop(%L), and '
                                            'create it again afterwards.', cfg.tbl);
                END IF;
            END IF;
            -- ALTER TABLE ... OWNER TO: the band table follows its table's owner (the sync
            -- trigger writes it as that owner and refuses a band table of anyone else)
            SELECT t.relowner INTO table_owner FROM pg_class t WHERE t.oid = cfg.tbl;
            IF EXISTS (SELECT FROM pg_class b WHERE b.oid = cfg.band_table
                       AND b.relowner <> table_owner) THEN
                EXECUTE format('ALTER TABLE %s OWNER TO %I', cfg.band_table,
                               pg_get_userbyid(table_owner));
            END IF;
        END LOOP;
        -- The sync triggers on the shards of a Citus table name it and its band tables
        -- (_minhash_citus_args): a new name or schema for either would leave them naming
        -- what is gone.
        FOR cfg IN
            SELECT i.* FROM @extschema@.minhash_indexes i
            WHERE EXISTS (SELECT FROM pg_event_trigger_ddl_commands() c
                          WHERE c.classid = 'pg_class'::regclass AND c.objid IN (i.tbl, i.band_table))
              AND (minhash_internal._minhash_citus_table(i.tbl)).kind IS NOT NULL
              AND minhash_internal._minhash_citus_args(i.tbl) IS DISTINCT FROM
                  (SELECT minhash_internal._minhash_trigger_args(t.oid) FROM pg_trigger t
                   WHERE t.tgrelid = i.tbl AND t.tgname = 'minhash_sync_insert')
        LOOP
            RAISE EXCEPTION 'Citus table % and its minhash band table % cannot be renamed or moved',
                cfg.tbl, cfg.band_table
                USING ERRCODE = 'feature_not_supported',
                      HINT = format('Drop the index first with minhash_index_drop(%L), and create it '
                                    'again afterwards.', cfg.tbl);
        END LOOP;
        RETURN;
    END IF;
    -- A band table dropped without its table takes its index along, as DROP INDEX would
    -- (pg_restore --clean drops the band table before its table): its sync triggers and
    -- catalog row go, so writes to the table go on unindexed (a duplicate trigger that uses
    -- the index refuses the drop, as minhash_index_drop does). The band table of a Citus
    -- table goes only with its index or its table: Citus's table conversions
    -- (alter_distributed_table(), undistribute_table()) of a band table alone would leave
    -- its shard triggers naming a table that is gone.
    FOR cfg IN
        SELECT i.* FROM @extschema@.minhash_indexes i
        WHERE i.band_table IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                               WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
          AND EXISTS (SELECT FROM pg_class c WHERE c.oid = i.tbl)
          AND i.tbl NOT IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                            WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
    LOOP
        IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN
            RAISE EXCEPTION 'the band table of the minhash index of Citus table % cannot be dropped or converted on its own', cfg.tbl
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = format('Drop the index with minhash_index_drop(%L).', cfg.tbl);
        END IF;
        SELECT d.object_name INTO dropped_name FROM pg_event_trigger_dropped_objects() d
        WHERE d.classid = 'pg_class'::regclass AND d.objid = cfg.band_table AND d.objsubid = 0;
        SELECT t.tgname INTO bad FROM pg_trigger t
        WHERE t.tgrelid = cfg.tbl AND t.tgfoid = '@extschema@.minhash_flag_duplicate()'::regprocedure
          AND coalesce(nullif((string_to_array(encode(t.tgargs, 'escape'), '\000'))[4], ''), dropped_name)
              = dropped_name
        LIMIT 1;
        IF bad IS NOT NULL THEN
            RAISE EXCEPTION 'cannot drop table % because trigger % on table % uses its minhash index',
                dropped_name, bad, cfg.tbl
                USING ERRCODE = 'dependent_objects_still_exist',
                      HINT = format('Drop the trigger first, or the index and the trigger with '
                                    'minhash_index_drop(%L, cascade => true).', cfg.tbl);
        END IF;
        RAISE NOTICE 'drop cascades to the minhash index of table %', cfg.tbl;
        PERFORM @extschema@.minhash_index_drop(cfg.band_table);
    END LOOP;
    FOR cfg IN
        SELECT i.* FROM @extschema@.minhash_indexes i
        WHERE i.tbl IN (SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                        WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
    LOOP
        -- (for the CREATE TRIGGER check above, till the end of the transaction)
        PERFORM set_config('minhash_internal.dropped_tables',
            (coalesce(nullif(current_setting('minhash_internal.dropped_tables', true), ''), '{}')::text[]
             || (SELECT d.object_identity FROM pg_event_trigger_dropped_objects() d
                 WHERE d.classid = 'pg_class'::regclass AND d.objid = cfg.tbl AND d.objsubid = 0))::text,
            true);
        BEGIN
            PERFORM minhash_internal._minhash_drop_objects(cfg);
        EXCEPTION WHEN insufficient_privilege THEN
            -- (the dropped table's regclass prints as a bare OID)
            SELECT d.object_identity INTO dropped_name FROM pg_event_trigger_dropped_objects() d
            WHERE d.classid = 'pg_class'::regclass AND d.objid = cfg.tbl AND d.objsubid = 0;
            RAISE WARNING 'the minhash index of dropped table % was left behind: %',
                dropped_name, SQLERRM
                USING HINT = format('Its owner can drop %s.', cfg.band_table);
        END;
        DELETE FROM @extschema@.minhash_indexes i WHERE i.band_table = cfg.band_table;
    END LOOP;
    FOR cfg IN
        SELECT i.* FROM @extschema@.minhash_indexes i
        WHERE i.partitions::oid[] && ARRAY(SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                                         WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
    LOOP
        PERFORM minhash_internal._minhash_tree_changed(cfg, ARRAY(
            SELECT d.objid FROM pg_event_trigger_dropped_objects() d
            WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0));
    END LOOP;
END $$;

-- (the event trigger on ddl_command_end now fires on CREATE TRIGGER and ALTER TRIGGER too)
DROP EVENT TRIGGER minhash_ddl_altered;
CREATE EVENT TRIGGER minhash_ddl_altered ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION minhash_internal._minhash_ddl();

CREATE OR REPLACE FUNCTION @extschema@.minhash_index_rebuild(tbl regclass)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
BEGIN
    -- Writers wait until this transaction commits. The band rows are deleted rather than
    -- truncated: a lookup that holds the band table while it waits to write the table keeps
    -- its lock and goes on once this commits (a TRUNCATE would wait for it: a deadlock), and a
    -- REPEATABLE READ writer whose snapshot is older gets a serialization failure instead of
    -- missing the new band rows. (As the owner: the caller must have the owner's privileges,
    -- 42501 otherwise.)
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', cfg.tbl);
    PERFORM minhash_internal._minhash_as_owner(cfg.tbl, format(
        'WITH d AS (DELETE FROM %s RETURNING 1) SELECT pg_catalog.to_jsonb(count(*)) FROM d',
        cfg.band_table));
    RETURN minhash_internal._minhash_backfill(cfg.band_table);
END $$;

CREATE OR REPLACE FUNCTION @extschema@.minhash_index_check(tbl regclass)
RETURNS TABLE (missing bigint, orphaned bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
    counts jsonb;
BEGIN
    counts := minhash_internal._minhash_as_owner(cfg.tbl, format(
        'WITH expected AS (%1$s), actual AS (SELECT id, key, sketch1, sketch2 FROM %2$s)
         SELECT pg_catalog.jsonb_build_array(
             (SELECT pg_catalog.count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM actual) m),
             (SELECT pg_catalog.count(*) FROM (SELECT * FROM actual EXCEPT ALL SELECT * FROM expected) o))',
        minhash_internal._minhash_band_rows_sql(cfg, cfg.tbl::text), cfg.band_table));
    RETURN QUERY SELECT (counts ->> 0)::bigint, (counts ->> 1)::bigint;
END $$;

CREATE FUNCTION minhash_internal._minhash_rows_sql(cfg @extschema@.minhash_indexes,
    typed boolean, ordered boolean, priority text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN cfg.text_expression IS NULL
                THEN format('SELECT d.%1$I%4$s, d.%2$I::text FROM %3$s d WHERE d.%2$I IS NOT NULL',
                            cfg.id_column, cfg.text_column, cfg.tbl,
                            CASE WHEN typed THEN '' ELSE '::bigint' END)
                -- (OFFSET 0: the expression is computed once per row)
                ELSE format('SELECT d.%1$I%4$s, x.text FROM %3$s d
                             CROSS JOIN LATERAL (SELECT %2$s AS text OFFSET 0) x
                             WHERE x.text IS NOT NULL',
                            cfg.id_column, minhash_internal._minhash_text_sql(cfg, 'd', true),
                            cfg.tbl, CASE WHEN typed THEN '' ELSE '::bigint' END) END
        -- (a line break ends a comment the priority may end with)
        || CASE WHEN ordered THEN format(E' ORDER BY %s d.%I', priority || E'\n,', cfg.id_column)
                ELSE '' END
$$;

-- Checks the type of tbl's id column for the function `fn`: the bigint forms (id_type NULL)
-- take smallint, integer and bigint keys, a typed form (id_type the type of its witness) the
-- key's own type (42804 otherwise, with a hint naming the call that fits). A witness of a
-- numeric type is passed by name: in second place it would be taken for the threshold (the
-- bigint form's float8 wins the overload resolution).
CREATE FUNCTION minhash_internal._minhash_check_id_type(cfg @extschema@.minhash_indexes,
    id_type regtype, fn text)
RETURNS void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    key_type regtype;
    typed_call text;
BEGIN
    SELECT a.atttypid INTO key_type FROM pg_attribute a
    WHERE a.attrelid = cfg.tbl AND a.attname = cfg.id_column AND a.attnum > 0 AND NOT a.attisdropped;
    SELECT format('%s(%L, %sNULL::%s)', fn, cfg.tbl::text,
                  CASE WHEN t.typcategory = 'N' THEN 'id_type => ' ELSE '' END, key_type)
    INTO typed_call FROM pg_type t WHERE t.oid = key_type;
    IF id_type IS NULL AND key_type NOT IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype) THEN
        RAISE EXCEPTION 'id column "%" of table % is of type %, not smallint, integer or bigint',
            cfg.id_column, cfg.tbl, key_type
            USING ERRCODE = 'datatype_mismatch',
                  HINT = format('Call %s for ids of type %s.', typed_call, key_type);
    ELSIF id_type IS NOT NULL AND id_type <> key_type THEN
        RAISE EXCEPTION 'id_type is %, but id column "%" of table % is of type %',
            id_type, cfg.id_column, cfg.tbl, key_type
            USING ERRCODE = 'datatype_mismatch', HINT = format('Call %s.', typed_call);
    END IF;
END $$;

-- Verifies candidate pairs of a Citus table's index (src/index/citus.rs).
CREATE FUNCTION minhash_internal._minhash_verify_pairs(rows_sql text, ids_a text[], ids_b text[],
    ngram int, unit text, threshold float8)
RETURNS TABLE (id_a text, id_b text, similarity float8)
STABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_verify_pairs_wrapper';

-- The near-duplicate pairs of rows of an index of a Citus table, at least `threshold` similar,
-- with ids as text (id_a < id_b). The candidate pairs, rows sharing a band key, are found where
-- the band rows are: a repartition join of the band table with itself on the key (Citus moves
-- band rows between the workers by key), grouped there, so that only distinct pairs come back
-- (never the band rows). They are verified in this backend (_minhash_verify_pairs), which reads
-- the text of each row that is in a pair once. The band table is read as the table's owner;
-- the table with the caller's rights, as minhash_duplicates reads it on one node: rows the
-- caller may not see are in no pair.
CREATE FUNCTION minhash_internal._minhash_citus_pairs(cfg @extschema@.minhash_indexes, threshold float8)
RETURNS TABLE (id_a text, id_b text, similarity float8)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    repartition text := current_setting('citus.enable_repartition_joins');
    pairs jsonb;
    id_type text := (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
                     WHERE a.attrelid = cfg.tbl AND a.attname = cfg.id_column);
BEGIN
    PERFORM set_config('citus.enable_repartition_joins', 'on', true);
    pairs := minhash_internal._minhash_as_owner(cfg.tbl, format(
        'SELECT pg_catalog.jsonb_build_array(coalesce(pg_catalog.array_agg(p.a::pg_catalog.text), ''{}''),
                                             coalesce(pg_catalog.array_agg(p.b::pg_catalog.text), ''{}''))
         FROM (SELECT x.id AS a, y.id AS b FROM %1$s x JOIN %1$s y ON x.key OPERATOR(pg_catalog.=) y.key
               WHERE x.id OPERATOR(pg_catalog.<) y.id GROUP BY x.id, y.id) p', cfg.band_table));
    PERFORM set_config('citus.enable_repartition_joins', repartition, true);
    RETURN QUERY SELECT * FROM minhash_internal._minhash_verify_pairs(
        format('SELECT d.%1$I::pg_catalog.text, d.%2$I::pg_catalog.text FROM %3$s d
                WHERE d.%1$I OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]::%4$s[])
                  AND d.%2$I IS NOT NULL',
               cfg.id_column, cfg.text_column, cfg.tbl, id_type),
        ARRAY(SELECT pg_catalog.jsonb_array_elements_text(pairs OPERATOR(pg_catalog.->) 0)),
        ARRAY(SELECT pg_catalog.jsonb_array_elements_text(pairs OPERATOR(pg_catalog.->) 1)),
        cfg.ngram, cfg.unit, threshold);
END $$;

-- Refuses (0A000) what minhash_clusters does not do on a Citus table: ids of a key type other
-- than an integer (typed), and mode 'representative'.
CREATE FUNCTION minhash_internal._minhash_citus_clusters(cfg @extschema@.minhash_indexes,
    typed boolean, ordered boolean)
RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NULL THEN
        RETURN false;
    ELSIF typed OR ordered THEN
        RAISE EXCEPTION 'minhash_clusters of Citus table % takes integer ids in mode ''connected'' only', cfg.tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'minhash_duplicates() gives the pairs of near-duplicates of any key type.';
    END IF;
    RETURN true;
END $$;

CREATE OR REPLACE FUNCTION @extschema@.minhash_duplicates(tbl regclass, threshold float8 DEFAULT NULL)
RETURNS TABLE (id_a bigint, id_b bigint, similarity float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
BEGIN
    PERFORM minhash_internal._minhash_check_id_type(cfg, NULL, 'minhash_duplicates');
    threshold := minhash_internal._minhash_query_threshold(threshold, cfg.threshold, cfg.bands,
                                                           cfg.rows_per_band);
    IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN
        RETURN QUERY SELECT p.id_a::bigint, p.id_b::bigint, p.similarity
                     FROM minhash_internal._minhash_citus_pairs(cfg, threshold) p;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM minhash_internal._minhash_search_pairs(
        minhash_internal._minhash_rows_sql(cfg, false, false, NULL), cfg.k, cfg.ngram, cfg.unit,
        cfg.bands, cfg.rows_per_band, threshold);
END $$;

CREATE FUNCTION @extschema@.minhash_duplicates(tbl regclass, id_type anyelement,
    threshold float8 DEFAULT NULL)
RETURNS TABLE (id_a anyelement, id_b anyelement, similarity float8)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
BEGIN
    PERFORM minhash_internal._minhash_check_id_type(cfg, pg_typeof(id_type), 'minhash_duplicates');
    threshold := minhash_internal._minhash_query_threshold(threshold, cfg.threshold, cfg.bands,
                                                           cfg.rows_per_band);
    IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN
        RETURN QUERY EXECUTE format(
            'SELECT p.id_a::%1$s, p.id_b::%1$s, p.similarity
             FROM minhash_internal._minhash_citus_pairs($1, $2) p', pg_typeof(id_type))
        USING cfg, threshold;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM minhash_internal._minhash_search_keyed_pairs(id_type,
        minhash_internal._minhash_rows_sql(cfg, true, false, NULL), cfg.k, cfg.ngram, cfg.unit,
        cfg.bands, cfg.rows_per_band, threshold);
END $$;

CREATE FUNCTION @extschema@.minhash_clusters(tbl regclass, threshold float8 DEFAULT NULL,
    mode text DEFAULT 'connected', priority text DEFAULT NULL)
RETURNS TABLE (id bigint, cluster_id bigint)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
    ordered boolean := minhash_internal._minhash_cluster_mode(mode, priority);
BEGIN
    PERFORM minhash_internal._minhash_check_id_type(cfg, NULL, 'minhash_clusters');
    threshold := minhash_internal._minhash_query_threshold(threshold, cfg.threshold, cfg.bands,
                                                           cfg.rows_per_band);
    -- (of a Citus table: the connected components of its pairs, in this backend)
    IF minhash_internal._minhash_citus_clusters(cfg, false, ordered) THEN
        RETURN QUERY SELECT c.id, c.cluster_id FROM (
            SELECT pg_catalog.array_agg(p.id_a::bigint) AS a, pg_catalog.array_agg(p.id_b::bigint) AS b
            FROM minhash_internal._minhash_citus_pairs(cfg, threshold) p) e
        CROSS JOIN LATERAL @extschema@.minhash_components(coalesce(e.a, '{}'), coalesce(e.b, '{}')) c;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM minhash_internal._minhash_search_clusters(
        minhash_internal._minhash_rows_sql(cfg, false, ordered, priority), cfg.k, cfg.ngram,
        cfg.unit, cfg.bands, cfg.rows_per_band, threshold, mode);
END $$;

CREATE FUNCTION @extschema@.minhash_clusters(tbl regclass, id_type anyelement,
    threshold float8 DEFAULT NULL, mode text DEFAULT 'connected', priority text DEFAULT NULL)
RETURNS TABLE (id anyelement, cluster_id anyelement)
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
    ordered boolean := minhash_internal._minhash_cluster_mode(mode, priority);
BEGIN
    PERFORM minhash_internal._minhash_check_id_type(cfg, pg_typeof(id_type), 'minhash_clusters');
    threshold := minhash_internal._minhash_query_threshold(threshold, cfg.threshold, cfg.bands,
                                                           cfg.rows_per_band);
    PERFORM minhash_internal._minhash_citus_clusters(cfg, true, ordered);
    RETURN QUERY SELECT * FROM minhash_internal._minhash_search_keyed_clusters(id_type,
        minhash_internal._minhash_rows_sql(cfg, true, ordered, priority), cfg.k, cfg.ngram,
        cfg.unit, cfg.bands, cfg.rows_per_band, threshold, mode);
END $$;

CREATE OR REPLACE FUNCTION @extschema@.minhash_index_stats(tbl regclass)
RETURNS TABLE (rows_indexed bigint, keys bigint, distinct_buckets bigint, largest_bucket bigint,
               bucket_histogram jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
    stats jsonb;
BEGIN
    -- bucket sizes in power-of-two classes: "1", "2", "3-4", "5-8", ...
    stats := minhash_internal._minhash_as_owner(cfg.tbl, format(
        'WITH buckets AS (SELECT key, pg_catalog.count(*) AS size FROM %1$s GROUP BY key),
         classes AS (
             SELECT CASE WHEN size <= 2 THEN size::text
                         ELSE (p / 2 + 1)::text || ''-'' || p::text END AS label,
                    pg_catalog.min(size) AS lo, pg_catalog.count(*) AS n
             FROM (SELECT size, (2 ^ pg_catalog.ceil(pg_catalog.log(2, size)))::bigint AS p
                   FROM buckets) b
             GROUP BY 1)
         SELECT pg_catalog.jsonb_build_array(
                (SELECT pg_catalog.count(DISTINCT id) FROM %1$s),
                (SELECT pg_catalog.count(*) FROM %1$s),
                (SELECT pg_catalog.count(*) FROM buckets),
                (SELECT coalesce(pg_catalog.max(size), 0) FROM buckets),
                (SELECT coalesce(pg_catalog.jsonb_object_agg(label, n ORDER BY lo),
                                            ''{}'') FROM classes))',
        cfg.band_table));
    RETURN QUERY SELECT (stats ->> 0)::bigint, (stats ->> 1)::bigint, (stats ->> 2)::bigint,
                        (stats ->> 3)::bigint, stats -> 4;
END $$;


-- A query threshold, with a NOTICE below the index's.
CREATE FUNCTION minhash_internal._minhash_query_threshold(
	threshold double precision,
	index_threshold double precision,
	bands INT,
	rows_per_band INT
) RETURNS double precision
IMMUTABLE PARALLEL SAFE 
LANGUAGE c
AS 'MODULE_PATHNAME', '_minhash_query_threshold_wrapper';

-- Lookups returning ids in their own type, and many texts at once.
CREATE FUNCTION @extschema@.minhash_similar(
	tbl regclass,
	doc TEXT,
	id_type anyelement,
	threshold double precision DEFAULT NULL,
	max_results INT DEFAULT NULL
) RETURNS TABLE (
	id anyelement, 
	similarity double precision 
)
STABLE PARALLEL SAFE 
LANGUAGE c
AS 'MODULE_PATHNAME', 'minhash_similar_typed_wrapper';

CREATE FUNCTION @extschema@.minhash_matches(
	tbl regclass,
	docs TEXT[],
	threshold double precision DEFAULT NULL,
	max_results INT DEFAULT NULL
) RETURNS TABLE (
	probe INT, 
	id bigint, 
	similarity double precision 
)
STABLE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'minhash_matches_wrapper';

CREATE FUNCTION @extschema@.minhash_matches(
	tbl regclass,
	docs TEXT[],
	id_type anyelement,
	threshold double precision DEFAULT NULL,
	max_results INT DEFAULT NULL
) RETURNS TABLE (
	probe INT, 
	id anyelement, 
	similarity double precision 
)
STABLE PARALLEL SAFE 
LANGUAGE c
AS 'MODULE_PATHNAME', 'minhash_matches_typed_wrapper';

-- What \df+ and \dd show for each function users call (all overloads of a name, or those whose
-- first argument is of the type given).
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.oid::pg_catalog.regprocedure AS fn, c.description
        FROM (VALUES
            ('minhash', NULL, 'MinHash signature of a text: k 32-bit slots over its n-gram shingles (format 1)'),
            ('lsh_bands', NULL, 'LSH band keys of a signature: one int8 key per band of r slots'),
            ('jaccard', NULL, 'exact Jaccard similarity of the shingle sets of two texts'),
            ('shingles', NULL, 'the distinct shingles of a text, exactly what minhash() hashes'),
            ('minhash_similarity', NULL, 'estimated Jaccard similarity of two signatures: the share of equal slots'),
            ('lsh_probability', NULL, 'probability that a pair of this similarity shares a band: 1 - (1 - s^r)^b'),
            ('lsh_params', NULL, 'band settings (b, r) that catch pairs at a threshold with a minimum recall, best first'),
            ('minhash_components', NULL, 'connected components of a graph given as (id_a, id_b) edge arrays'),
            ('minhash_format_version', NULL, 'the signature format version this build computes'),
            ('minhash_index_create', NULL, 'create a managed MinHash index on a table''s text column or text expression and fill it'),
            ('minhash_index_drop', NULL, 'drop a table''s managed MinHash index (cascade: with its flag triggers)'),
            ('minhash_index_rebuild', NULL, 'rebuild a table''s managed MinHash index from its rows'),
            ('minhash_index_check', NULL, 'count the band rows a table''s managed index misses and holds in excess of its rows'),
            ('minhash_index_stats', NULL, 'rows, keys and bucket sizes of a table''s managed MinHash index'),
            ('minhash_similar', NULL, 'rows of an indexed table similar to a text, with exact Jaccard, most similar first'),
            ('minhash_matches', NULL, 'for each of many texts, the rows of an indexed table similar to it, with exact Jaccard'),
            ('minhash_duplicates', 'regclass', 'every pair of near-duplicate rows of an indexed table, with exact Jaccard'),
            ('minhash_duplicates', 'anyarray', 'every pair of near-duplicate texts of an array, by the ids of a parallel array, with exact Jaccard'),
            ('minhash_clusters', 'regclass', 'the clusters of near-duplicate rows of an indexed table: connected (named by their smallest id) or around a kept row'),
            ('minhash_clusters', 'anyarray', 'the clusters of near-duplicate texts of an array, by the ids of a parallel array: connected or around a kept row'),
            ('minhash_flag_duplicate', NULL, 'row trigger: flags a row that near-duplicates another, or rejects it (23505)')
        ) c(name, first_arg, description)
        JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) c.name
         AND p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('@extschema@')
         AND (c.first_arg IS NULL OR p.proargtypes[0] OPERATOR(pg_catalog.=) c.first_arg::pg_catalog.regtype)
    LOOP
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', f.fn, f.description);
    END LOOP;
END $$;
