-- The managed band-key index: a catalog of indexed tables, the band tables and the triggers
-- that keep them exact, and the functions that query them.
--
-- Every function here runs with the caller's rights (SECURITY INVOKER) and builds dynamic SQL
-- only from regclass output (already quoted) and %I-quoted column names. What reads or writes
-- an indexed table or its band table on the index's behalf (backfill, rebuild, check, stats)
-- goes through _minhash_as_owner (src/index/owner.rs): as the table's owner inside a
-- security-restricted operation, for callers that have the owner's privileges. The band table
-- is private to the table's owner; the sync triggers call one fixed function of the extension,
-- _minhash_sync (src/index/sync.rs), which writes it as the owner in the same way.

-- The extension's internal functions live in a schema of their own, minhash_internal, out of
-- the user's way (\df of the extension's schema lists only what users call). pgrx creates it
-- (src/index/mod.rs; an existing schema of that name that is not the extension's makes CREATE
-- EXTENSION fail). Everyone may use it: the user-facing functions call into it with the
-- caller's rights, and each function's EXECUTE privilege is what guards it.
GRANT USAGE ON SCHEMA minhash_internal TO PUBLIC;
COMMENT ON SCHEMA minhash_internal IS 'pg_minhash internals: not for direct use';

-- The trigger functions written in Rust (pgrx creates the other functions of this schema).
CREATE FUNCTION minhash_internal._minhash_sync() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_sync_wrapper';
CREATE FUNCTION minhash_internal._minhash_band_load() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_band_load_wrapper';
CREATE FUNCTION minhash_internal._minhash_catalog_changed() RETURNS trigger
    LANGUAGE c AS 'MODULE_PATHNAME', '_minhash_catalog_changed_wrapper';

-- One row per index; a table may have several (each with its own band table, which names the
-- index where a call must say which).
CREATE TABLE @extschema@.minhash_indexes (
    tbl regclass NOT NULL,
    id_column name NOT NULL,
    -- the column rows' texts come from, or NULL for text_expression
    text_column name,
    band_table regclass PRIMARY KEY,
    k int NOT NULL,
    ngram int NOT NULL,
    unit text NOT NULL,
    threshold float8 NOT NULL,
    bands int NOT NULL,
    rows_per_band int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- the signature format the band table's keys and sketches are in (docs/contract.md)
    format int NOT NULL DEFAULT 1 CHECK (format = 1),
    -- the SQL expression over the table's columns rows' texts come from, in place of a text
    -- column, as _minhash_text_expression prints it (src/index/text.rs)
    text_expression text,
    -- of a partitioned table: the tables of its partition tree below it that the index covers
    -- (kept by the minhash_ddl_* event triggers, which compare it with the tree after DDL)
    partitions regclass[],
    CONSTRAINT minhash_indexes_text_check CHECK ((text_column IS NULL) <> (text_expression IS NULL))
);
COMMENT ON TABLE @extschema@.minhash_indexes IS 'one row per managed pg_minhash index';
COMMENT ON COLUMN @extschema@.minhash_indexes.format IS 'signature format version of the band table (minhash_format_version())';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.minhash_indexes', '');

-- Everyone may read the catalog (the triggers of a table read it as whoever writes the table);
-- only a table's owner may add, change or remove its row. A row may name only a band table
-- that belongs to the same owner: minhash_index_drop and the minhash_ddl_dropped event trigger
-- drop it as whoever runs those, maybe a superuser, and must not be steered at someone else's
-- table. A row whose table is gone may be removed by anyone (minhash_ddl_dropped removes it as
-- whoever dropped the table, when the table's owner can no longer be looked up).
ALTER TABLE @extschema@.minhash_indexes ENABLE ROW LEVEL SECURITY;
CREATE POLICY minhash_indexes_read ON @extschema@.minhash_indexes FOR SELECT USING (true);
CREATE POLICY minhash_indexes_owner ON @extschema@.minhash_indexes FOR ALL
    USING (pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid = tbl), 'USAGE')
           OR NOT EXISTS (SELECT FROM pg_catalog.pg_class WHERE oid = tbl))
    WITH CHECK (pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid = tbl), 'USAGE')
                AND (SELECT relowner FROM pg_catalog.pg_class WHERE oid = band_table AND relkind = 'r')
                    = (SELECT relowner FROM pg_catalog.pg_class WHERE oid = tbl));
GRANT SELECT, INSERT, UPDATE, DELETE ON @extschema@.minhash_indexes TO PUBLIC;

-- Each backend caches the catalog rows its lookups read (src/index/catalog.rs). A changed row
-- invalidates its table's relcache entry, which drops the cached copy in every backend.
CREATE TRIGGER minhash_indexes_changed AFTER INSERT OR UPDATE OR DELETE ON @extschema@.minhash_indexes
    FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_catalog_changed();
CREATE TRIGGER minhash_indexes_truncated AFTER TRUNCATE ON @extschema@.minhash_indexes
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_catalog_changed();

-- pg_dump carries no dependency of a band table on its table and on the extension (pg_depend
-- is not dumped); a restore gets them back here. Links every band table of the catalog that
-- lacks them, where the current user has the privileges of the owner of both (anyone else's
-- are left for their owner's restore). Called after rows are added to the catalog (a full or
-- data-only restore copies them in) and after ALTER TABLE on the catalog (pg_restore
-- --disable-triggers enables its triggers again after the copy).
CREATE FUNCTION minhash_internal._minhash_relink()
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

CREATE FUNCTION minhash_internal._minhash_catalog_loaded()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM minhash_internal._minhash_relink();
    RETURN NULL;
END $$;

CREATE TRIGGER minhash_indexes_loaded AFTER INSERT ON @extschema@.minhash_indexes
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_catalog_loaded();

-- A data-only restore into a table that has an index already copies in a second catalog row
-- for it (the same table and band table): the index there stands, and the row is skipped (its band
-- rows are dropped by the band table's load trigger, src/index/restore.rs).
CREATE FUNCTION minhash_internal._minhash_catalog_insert()
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

CREATE TRIGGER minhash_indexes_kept BEFORE INSERT ON @extschema@.minhash_indexes
    FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_catalog_insert();

-- The catalog row of the index `tbl` names: the one index of table tbl, or the index whose band
-- table tbl is (42725 for a table with several, 42704 for a table with none).
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
        PERFORM minhash_internal._minhash_check_indexable(tbl);
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

-- The SELECT that yields (id, key, sketch1, sketch2) band rows for the rows of `source` (a table
-- or transition table) with the index's id column and text (run as the table's owner). NULL and empty texts are not
-- indexed (see _minhash_band_values in src/index/mod.rs). OFFSET 0 keeps the subquery whole,
-- so each text is signed once rather than once per reference to `v`.
CREATE FUNCTION minhash_internal._minhash_band_rows_sql(cfg @extschema@.minhash_indexes, source text)
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
    PERFORM minhash_internal._minhash_check_indexable(tbl);
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
    -- (one band table, of the root's persistence, serves the whole tree: a crash must empty
    -- both or neither)
    IF EXISTS (SELECT FROM pg_partition_tree(tbl) p JOIN pg_class c ON c.oid = p.relid
               WHERE c.relpersistence <> rel.relpersistence) THEN
        RAISE EXCEPTION 'the partitions of % are not all of its persistence', tbl
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Make every partition logged, or every one unlogged, like the partitioned table.';
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

-- Drops the band table of an index if it still exists: it may be gone already, dropped by hand
-- or along with its table. The catalog policy made sure the row names a band table of the
-- table's owner.
CREATE FUNCTION minhash_internal._minhash_drop_objects(cfg @extschema@.minhash_indexes)
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

-- A minhash_flag_duplicate trigger on the table looks rows up in the index, like a
-- constraint's index: dropping the index refuses while one exists, or drops it too (cascade).
-- A trigger uses the index its fourth argument names by its band table, or, without one, the
-- table's only index. `tbl` names the index as for the query functions (the table, or the band
-- table of one of its indexes); the sync triggers go with the table's last index.
CREATE FUNCTION @extschema@.minhash_index_drop(tbl regclass, cascade boolean DEFAULT false)
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
      AND coalesce(nullif((minhash_internal._minhash_trigger_args(t.oid))[4], ''),
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

-- After DDL on the partition tree of the indexed partitioned table of `cfg` (CREATE TABLE ...
-- PARTITION OF, ATTACH PARTITION, DETACH PARTITION, DROP TABLE): a table that joined the tree
-- gets the sync triggers and its rows their band rows; a table that left it loses both (the
-- band rows of its rows, or, when it was dropped, the band rows whose id no row of the table
-- has any more: one anti-join of the band table). `dropped`: the OIDs of the tables dropped.
-- The catalog row then lists the tree as it is. As whoever runs the DDL, who owns the
-- partitioned table (or the band rows are left with a WARNING, see below).
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
    -- left, still there (detached): the band rows of their rows go. The list of the tree the
    -- catalog keeps is input (the table's owner may write it): a table it names is touched only
    -- if it has the id column, belongs to a role whose rights the index's owner has, and no
    -- index covers it now (as an indexed table or a partition of one).
    FOR member IN
        SELECT k::regclass FROM unnest(kept) k JOIN pg_class c ON c.oid = k
        WHERE k <> ALL (tree::oid[]) AND k <> ALL (coalesce(dropped, '{}'))
          AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = k AND a.attname = cfg.id_column
                      AND a.attnum > 0 AND NOT a.attisdropped)
          AND pg_has_role((SELECT t.relowner FROM pg_class t WHERE t.oid = cfg.tbl), c.relowner, 'USAGE')
          AND NOT EXISTS (SELECT FROM @extschema@.minhash_indexes i
                          WHERE i.tbl = coalesce(pg_partition_root(k), k))
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

-- The two event triggers: DDL on indexed tables. Runs as whoever runs the DDL, on every
-- ALTER TABLE and every DROP, so it looks only at the catalog rows of the tables involved.
--
-- minhash_ddl_altered (ddl_command_end, ALTER and CREATE TABLE and TRIGGER): the catalog names the
-- id and text columns, so an ALTER TABLE that drops, renames or retypes either of them is
-- refused (it would make every later INSERT and UPDATE fail); the index has to be dropped
-- first. A new owner of the table becomes the owner of its band table too. An indexed table
-- may not become a parent, child or partition (CREATE TABLE ... INHERITS, ALTER TABLE ...
-- INHERIT, ATTACH PARTITION): its triggers would not see the other tables' rows. After an
-- ALTER TABLE of the catalog itself, band tables get their dependencies back (_minhash_relink).
-- An indexed partitioned table's index follows its partition tree (_minhash_tree_changed).
-- On CREATE TRIGGER and ALTER TRIGGER it refuses to rename the sync triggers of an indexed
-- table, and to make them on a table made again under the name of an indexed table dropped in
-- the same transaction (how Citus converts tables: README, "Scaling out with Citus").
--
-- minhash_ddl_dropped (sql_drop): a dropped table takes its index along, as it takes its
-- ordinary indexes: the band table (dropped with the table through its dependency, or here if
-- that is missing) and the catalog row. A band table the dropping role may not drop is left
-- behind with a WARNING rather than failing the DROP. A dropped partition of an indexed table
-- takes its rows' band rows along (_minhash_tree_changed). The band table of a Citus table
-- cannot be dropped on its own; any other band table dropped on its own takes its index along.
CREATE FUNCTION minhash_internal._minhash_ddl()
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
    persistence "char";
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
                      WHERE i.tbl = coalesce(pg_partition_root(t.tgrelid), t.tgrelid))
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
                          WHERE i.tbl = coalesce(pg_partition_root(t.tgrelid), t.tgrelid))
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
            -- ALTER TABLE ... SET LOGGED / SET UNLOGGED: so does the band table (a crash then
            -- empties both or neither)
            SELECT t.relpersistence INTO persistence FROM pg_class t
            WHERE t.oid = cfg.tbl AND t.relkind = 'r'
              AND (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NULL;
            IF EXISTS (SELECT FROM pg_class b WHERE b.oid = cfg.band_table
                       AND b.relpersistence <> persistence) THEN
                EXECUTE format('ALTER TABLE %s SET %s', cfg.band_table,
                               CASE persistence WHEN 'u' THEN 'UNLOGGED' ELSE 'LOGGED' END);
            END IF;
        END LOOP;
        -- A band table keeps its table's persistence, and so does every table of an indexed
        -- partition tree (a crash empties an unlogged partition, whose band rows a logged band
        -- table would keep).
        SELECT i.band_table INTO inherited FROM @extschema@.minhash_indexes i
        JOIN pg_class t ON t.oid = i.tbl JOIN pg_class b ON b.oid = i.band_table
        WHERE i.band_table IN (SELECT c.objid FROM pg_event_trigger_ddl_commands() c
                               WHERE c.classid = 'pg_class'::regclass)
          AND t.relkind IN ('r', 'p') AND b.relpersistence <> t.relpersistence
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'band table % must keep the persistence of its table', inherited
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'ALTER TABLE ... SET LOGGED or SET UNLOGGED the indexed table: its band table follows.';
        END IF;
        SELECT p.relid INTO inherited FROM @extschema@.minhash_indexes i
        JOIN pg_class b ON b.oid = i.band_table
        CROSS JOIN LATERAL pg_partition_tree(i.tbl) p JOIN pg_class c ON c.oid = p.relid
        WHERE i.partitions IS NOT NULL AND c.relpersistence <> b.relpersistence
          AND i.tbl IN (SELECT coalesce(pg_partition_root(x.objid), x.objid)
                        FROM pg_event_trigger_ddl_commands() x WHERE x.classid = 'pg_class'::regclass)
        LIMIT 1;
        IF inherited IS NOT NULL THEN
            RAISE EXCEPTION 'partition % of an indexed table must have the persistence of its band table', inherited
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'Every table of an indexed partition tree is logged, or every one unlogged, like the partitioned table.';
        END IF;
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
          AND coalesce(nullif((minhash_internal._minhash_trigger_args(t.oid))[4], ''), dropped_name)
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
    -- (the catalog's partition list is input, and may name any table: what it leads to here is
    -- its own index's cleanup, which never fails anyone's DROP)
    FOR cfg IN
        SELECT i.* FROM @extschema@.minhash_indexes i
        WHERE i.partitions::oid[] && ARRAY(SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                                         WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0)
          -- (a partition of an indexed tree carries the sync triggers, dropped with it)
          AND EXISTS (SELECT FROM pg_event_trigger_dropped_objects() d
                      WHERE d.classid = 'pg_trigger'::regclass
                        AND d.object_identity LIKE 'minhash\_sync\_insert on %')
    LOOP
        BEGIN
            PERFORM minhash_internal._minhash_tree_changed(cfg, ARRAY(
                SELECT d.objid FROM pg_event_trigger_dropped_objects() d
                WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0));
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'the minhash index of % was not brought up to date with its partitions: %',
                cfg.tbl, SQLERRM
                USING HINT = format('Its owner can make it exact with minhash_index_rebuild(%L).', cfg.tbl);
        END;
    END LOOP;
END $$;

CREATE EVENT TRIGGER minhash_ddl_altered ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION minhash_internal._minhash_ddl();
CREATE EVENT TRIGGER minhash_ddl_dropped ON sql_drop
    EXECUTE FUNCTION minhash_internal._minhash_ddl();

CREATE FUNCTION @extschema@.minhash_index_rebuild(tbl regclass)
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

CREATE FUNCTION @extschema@.minhash_index_check(tbl regclass)
RETURNS TABLE (missing bigint, orphaned bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
    counts jsonb;
    source text := cfg.tbl::text;
    band text := cfg.band_table::text;
    progress text;
BEGIN
    -- Progress (src/index/progress.rs) as the rows of the table are signed and the band rows
    -- read (one in 64 counted for 64), of about as many as the table and the band table had
    -- when last vacuumed, analyzed or indexed; in the target list, where it leaves the
    -- planner's estimates alone.
    -- (Not on a Citus table, whose rows are read on the workers.)
    IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NULL THEN
        progress := format('minhash_internal._minhash_progress(%L, %L, %s, %s, ',
            'minhash_index_check on ' || cfg.tbl::text, 'rows and band rows',
            (SELECT sum(greatest(c.reltuples, 0))::bigint FROM pg_class c
             WHERE c.oid IN (cfg.tbl, cfg.band_table)),
            extract(epoch FROM clock_timestamp()));
        source := format('(SELECT t.*, %s1) FROM %s t)', progress, cfg.tbl);
        band := format('(SELECT b.*, CASE WHEN (b.key & 63) = 0 THEN %s64) END FROM %s b)',
                       progress, cfg.band_table);
    END IF;
    -- The band rows the table's rows give (expected) against those the band table holds, as
    -- multisets: missing = expected EXCEPT ALL held, orphaned = held EXCEPT ALL expected, both
    -- from one grouping of the two.
    counts := minhash_internal._minhash_as_owner(cfg.tbl, format(
        'SELECT pg_catalog.jsonb_build_array(
             coalesce(pg_catalog.sum(GREATEST(g.expected - g.held, 0)), 0),
             coalesce(pg_catalog.sum(GREATEST(g.held - g.expected, 0)), 0))
         FROM (SELECT pg_catalog.count(*) FILTER (WHERE r.expected) AS expected,
                      pg_catalog.count(*) FILTER (WHERE NOT r.expected) AS held
               FROM (SELECT e.id, e.key, e.sketch1, e.sketch2, true AS expected FROM (%1$s) e
                     UNION ALL
                     SELECT b.id, b.key, b.sketch1, b.sketch2, false FROM %2$s b) r
               GROUP BY r.id, r.key, r.sketch1, r.sketch2) g',
        minhash_internal._minhash_band_rows_sql(cfg, source), band));
    RETURN QUERY SELECT (counts ->> 0)::bigint, (counts ->> 1)::bigint;
END $$;

-- The query minhash_duplicates and minhash_clusters read tbl through: (id, text) of every row
-- with a text, the id as bigint or (typed) in its own type. They search it in memory
-- (src/core/dedup.rs) rather than joining the band table with itself: signing the text again
-- costs less than reading `bands` band rows per row, and gives the same keys. `ordered` reads
-- the rows in the greedy order of mode 'representative': by `priority` (the caller's ORDER BY
-- list over the table's columns, part of the caller's query, run with the caller's rights),
-- then by id.
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

-- minhash_duplicates streams its pairs: it is an SQL function PostgreSQL inlines into the
-- calling query (no SET clause, not STRICT: a subquery, not a function scan that would hold the
-- whole result), and _minhash_search_pairs makes one pair per call in its target list
-- (OFFSET 0 keeps it there), so `LIMIT 10` stops after ten pairs. Every name in it is
-- schema-qualified: the body is parsed with the caller's search path.
CREATE FUNCTION @extschema@.minhash_duplicates(tbl regclass, threshold float8 DEFAULT NULL)
RETURNS TABLE (id_a bigint, id_b bigint, similarity float8)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT (s.p).id_a, (s.p).id_b, (s.p).similarity FROM (
        SELECT minhash_internal._minhash_search_pairs(
                   minhash_internal._minhash_rows_sql(c, false, false, NULL), c.k, c.ngram,
                   c.unit, c.bands, c.rows_per_band, q.threshold) AS p
        FROM minhash_internal._minhash_index(minhash_duplicates.tbl) c
        CROSS JOIN LATERAL minhash_internal._minhash_check_id_type(c, NULL, 'minhash_duplicates') t
        CROSS JOIN LATERAL minhash_internal._minhash_query_threshold(
                   minhash_duplicates.threshold, c.threshold, c.bands, c.rows_per_band) q(threshold)
        WHERE (minhash_internal._minhash_citus_table(c.tbl)).kind IS NULL
        OFFSET 0) s
    UNION ALL
    SELECT p.id_a::pg_catalog.int8, p.id_b::pg_catalog.int8, p.similarity
    FROM minhash_internal._minhash_index(minhash_duplicates.tbl) c
    CROSS JOIN LATERAL minhash_internal._minhash_check_id_type(c, NULL, 'minhash_duplicates') t
    CROSS JOIN LATERAL minhash_internal._minhash_query_threshold(
               minhash_duplicates.threshold, c.threshold, c.bands, c.rows_per_band) q(threshold)
    CROSS JOIN LATERAL minhash_internal._minhash_citus_pairs(c, q.threshold) p
    WHERE (minhash_internal._minhash_citus_table(c.tbl)).kind IS NOT NULL
$$;

-- The pairs of a Citus table's index for the typed minhash_duplicates, ids in id_type's type.
CREATE FUNCTION minhash_internal._minhash_citus_keyed_pairs(cfg @extschema@.minhash_indexes,
    id_type anyelement, threshold float8)
RETURNS TABLE (id_a anyelement, id_b anyelement, similarity float8)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT p.id_a::%1$s, p.id_b::%1$s, p.similarity
         FROM minhash_internal._minhash_citus_pairs($1, $2) p', pg_typeof(id_type))
    USING cfg, threshold;
END $$;

CREATE FUNCTION @extschema@.minhash_duplicates(tbl regclass, id_type anyelement,
    threshold float8 DEFAULT NULL)
RETURNS TABLE (id_a anyelement, id_b anyelement, similarity float8)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT (s.p).id_a, (s.p).id_b, (s.p).similarity FROM (
        SELECT minhash_internal._minhash_search_keyed_pairs(minhash_duplicates.id_type,
                   minhash_internal._minhash_rows_sql(c, true, false, NULL), c.k, c.ngram,
                   c.unit, c.bands, c.rows_per_band, q.threshold) AS p
        FROM minhash_internal._minhash_index(minhash_duplicates.tbl) c
        CROSS JOIN LATERAL minhash_internal._minhash_check_id_type(
                   c, pg_catalog.pg_typeof(minhash_duplicates.id_type), 'minhash_duplicates') t
        CROSS JOIN LATERAL minhash_internal._minhash_query_threshold(
                   minhash_duplicates.threshold, c.threshold, c.bands, c.rows_per_band) q(threshold)
        WHERE (minhash_internal._minhash_citus_table(c.tbl)).kind IS NULL
        OFFSET 0) s
    UNION ALL
    SELECT p.id_a, p.id_b, p.similarity
    FROM minhash_internal._minhash_index(minhash_duplicates.tbl) c
    CROSS JOIN LATERAL minhash_internal._minhash_check_id_type(
               c, pg_catalog.pg_typeof(minhash_duplicates.id_type), 'minhash_duplicates') t
    CROSS JOIN LATERAL minhash_internal._minhash_query_threshold(
               minhash_duplicates.threshold, c.threshold, c.bands, c.rows_per_band) q(threshold)
    CROSS JOIN LATERAL minhash_internal._minhash_citus_keyed_pairs(c, minhash_duplicates.id_type, q.threshold) p
    WHERE (minhash_internal._minhash_citus_table(c.tbl)).kind IS NOT NULL
$$;

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

CREATE FUNCTION @extschema@.minhash_index_stats(tbl regclass)
RETURNS TABLE (rows_indexed bigint, keys bigint, distinct_buckets bigint, largest_bucket bigint,
               bucket_histogram jsonb)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes := minhash_internal._minhash_index(tbl);
    stats jsonb;
    -- the rows of each key (its bucket, of_id 0) and of each id (of_id 1): on one node as two
    -- grouping sets of one read of the band rows, with progress (src/index/progress.rs) over
    -- them (one in 64 counted for 64), of about as many as the band table had when last
    -- vacuumed, analyzed or indexed; on Citus, which plans no grouping sets, as two groupings
    groups text := format(
        'SELECT pg_catalog.count(*) AS size, GROUPING(b.key) AS of_id
         FROM (SELECT b.*, CASE WHEN (b.key & 63) = 0
                                THEN minhash_internal._minhash_progress(%L, %L, %s, %s, 64) END
               FROM %s b) b
         GROUP BY GROUPING SETS ((b.key), (b.id))',
        'minhash_index_stats on ' || cfg.tbl::text, 'band rows',
        (SELECT greatest(c.reltuples, 0)::bigint FROM pg_class c WHERE c.oid = cfg.band_table),
        extract(epoch FROM clock_timestamp()), cfg.band_table);
BEGIN
    IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN
        groups := format('SELECT pg_catalog.count(*) AS size, 0 AS of_id FROM %1$s GROUP BY key
                          UNION ALL SELECT pg_catalog.count(*), 1 FROM %1$s GROUP BY id',
                         cfg.band_table);
    END IF;
    -- Bucket sizes in power-of-two classes: "1", "2", "3-4", "5-8", ...
    stats := minhash_internal._minhash_as_owner(cfg.tbl, format(
        'WITH groups AS MATERIALIZED (%1$s),
         buckets AS (SELECT size FROM groups WHERE of_id = 0),
         classes AS (
             SELECT CASE WHEN size <= 2 THEN size::text
                         ELSE (p / 2 + 1)::text || ''-'' || p::text END AS label,
                    pg_catalog.min(size) AS lo, pg_catalog.count(*) AS n
             FROM (SELECT size, (2 ^ pg_catalog.ceil(pg_catalog.log(2, size)))::bigint AS p
                   FROM buckets) b
             GROUP BY 1)
         SELECT pg_catalog.jsonb_build_array(
                (SELECT pg_catalog.count(*) FROM groups WHERE of_id = 1),
                (SELECT coalesce(pg_catalog.sum(size), 0) FROM buckets),
                (SELECT pg_catalog.count(*) FROM buckets),
                (SELECT coalesce(pg_catalog.max(size), 0) FROM buckets),
                (SELECT coalesce(pg_catalog.jsonb_object_agg(label, n ORDER BY lo),
                                            ''{}'') FROM classes))',
        groups));
    RETURN QUERY SELECT (stats ->> 0)::bigint, (stats ->> 1)::bigint, (stats ->> 2)::bigint,
                        (stats ->> 3)::bigint, stats -> 4;
END $$;

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
        JOIN pg_catalog.pg_proc p ON p.proname = c.name
         AND p.pronamespace = pg_catalog.to_regnamespace('@extschema@')
         AND (c.first_arg IS NULL OR p.proargtypes[0] = c.first_arg::pg_catalog.regtype)
    LOOP
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', f.fn, f.description);
    END LOOP;
END $$;
