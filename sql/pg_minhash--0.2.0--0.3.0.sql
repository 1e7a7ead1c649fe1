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


CREATE OR REPLACE FUNCTION minhash_internal._minhash_sync_triggers(rel regclass, adding boolean)
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

CREATE OR REPLACE FUNCTION minhash_internal._minhash_citus_distribute(band regclass, tbl regclass, kind text)
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

-- Of a table of this node, the band-row SQL signs its rows in batches on the build's threads,
-- max_parallel_maintenance_workers of them (src/index/write/plpgsql.rs).
CREATE FUNCTION minhash_internal."_minhash_band_values_batch"(
	"docs" TEXT[], /* Array < '_, & str > */
	"k" INT, /* i32 */
	"ngram" INT, /* i32 */
	"unit" TEXT, /* & str */
	"bands" INT, /* i32 */
	"rows_per_band" INT /* i32 */
) RETURNS SETOF bigint[] /* :: std :: option :: Option < Vec < i64 > > */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_minhash_band_values_batch_wrapper';

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

CREATE OR REPLACE FUNCTION minhash_internal._minhash_band_rows_sql(cfg @extschema@.minhash_indexes, source text)
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

CREATE FUNCTION minhash_internal._minhash_check_format(format int, bands int)
RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    setting text := nullif(current_setting('pg_minhash.default_format', true), '');
BEGIN
    IF format IS NULL THEN
        IF setting IS NOT NULL AND setting NOT IN ('1', '2') THEN
            RAISE EXCEPTION 'pg_minhash.default_format must be 1 or 2, got %', setting
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN CASE WHEN setting = '2' AND bands <= 64 THEN 2 ELSE 1 END;
    ELSIF format NOT IN (1, 2) THEN
        RAISE EXCEPTION 'format must be 1 or 2, got %', format
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF format = 2 AND bands > 64 THEN
        RAISE EXCEPTION 'format 2 holds at most 64 bands, not %', bands
            USING ERRCODE = 'feature_not_supported', HINT = 'Use format 1, or fewer bands.';
    END IF;
    RETURN format;
END $$;

CREATE FUNCTION minhash_internal._minhash_band_indexes(cfg @extschema@.minhash_indexes)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    i int;
    citus boolean := (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL;
    -- (a unique key of a Citus table holds its distribution column: the tenant, if it has one)
    tenant text := CASE WHEN minhash_internal._minhash_tenant_column(cfg) IS NOT NULL
                        THEN ', tenant' ELSE '' END;
BEGIN
    IF cfg.format = 1 THEN
        EXECUTE format('CREATE %s INDEX ON %s (key, id%s) INCLUDE (sketch1, sketch2)',
                       CASE WHEN citus THEN 'UNIQUE' ELSE '' END, cfg.band_table, tenant);
    ELSE
        EXECUTE format('CREATE %s INDEX ON %s (id%s)', CASE WHEN citus THEN 'UNIQUE' ELSE '' END,
                       cfg.band_table, tenant);
        FOR i IN 1..cfg.bands LOOP
            EXECUTE format('CREATE INDEX ON %s (%I)', cfg.band_table, 'key' || i);
        END LOOP;
    END IF;
    IF citus THEN
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY USING INDEX %I', cfg.band_table,
                       (SELECT c.relname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
                        WHERE x.indrelid = cfg.band_table AND x.indisunique));
    ELSE
        EXECUTE format('ALTER TABLE %s REPLICA IDENTITY FULL', cfg.band_table);
    END IF;
END $$;

CREATE FUNCTION minhash_internal._minhash_band_reshape(cfg @extschema@.minhash_indexes, target int)
RETURNS @extschema@.minhash_indexes
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    idx regclass;
    columns text;
BEGIN
    IF cfg.band_table IS NULL OR cfg.bands IS NULL OR target IS NULL THEN
        RAISE EXCEPTION 'the catalog row and the format must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    FOR idx IN SELECT x.indexrelid::regclass FROM pg_index x WHERE x.indrelid = cfg.band_table LOOP
        EXECUTE format('DROP INDEX %s', idx);
    END LOOP;
    SELECT string_agg(format('DROP COLUMN %I', a.attname), ', ' ORDER BY a.attnum) INTO columns
    FROM pg_attribute a
    WHERE a.attrelid = cfg.band_table AND a.attnum > 0 AND NOT a.attisdropped
      AND a.attname NOT IN ('id', 'tenant');
    EXECUTE format('ALTER TABLE %s %s, %s', cfg.band_table, columns,
                   (SELECT string_agg(format('ADD COLUMN %I bigint NOT NULL', u.col), ', ' ORDER BY u.pos)
                    FROM unnest(minhash_internal._minhash_band_value_columns(target, cfg.bands))
                         WITH ORDINALITY AS u(col, pos)));
    UPDATE @extschema@.minhash_indexes i SET format = target WHERE i.band_table = cfg.band_table;
    cfg.format := target;
    PERFORM minhash_internal._minhash_band_indexes(cfg);
    RETURN cfg;
END $$;

-- minhash_index_rebuild, check, stats and drop are Rust (src/index/manage/), over the PL/pgSQL
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

CREATE OR REPLACE FUNCTION minhash_internal._minhash_backfill(band regclass, source regclass DEFAULT NULL)
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
