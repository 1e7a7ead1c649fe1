-- The helpers of minhash_index_create (src/index/sql/, part 3 of 5), which minhash_index_rebuild
-- shares: the band table's format, reshaping and B-trees. minhash_index_create and
-- minhash_index_drop are Rust (src/index/manage/create.rs, drop.rs).

-- The band table format `format` (1 or 2; NULL: the setting pg_minhash.default_format, 1 if
-- unset, and 1 beyond 64 bands) for an index of `bands` bands: 22023 for another value (of the
-- argument or the setting), 0A000 for format 2 beyond 64 bands (a B-tree per band).
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

-- Gives the emptied band table of `cfg` the columns and B-trees of format `target` and its
-- catalog row that format (takes the band table's ACCESS EXCLUSIVE lock). Returns the row.
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

-- Creates the B-trees of the band table of `cfg` (PostgreSQL builds them as the band table's
-- owner) and sets its replica identity. Of format 1, a lookup reads and filters candidates from
-- `(key, id) INCLUDE (sketch1, sketch2)` alone (an index-only scan), and the sync trigger
-- deletes band rows through it. Of format 2, a lookup reads band i's candidates through the
-- B-tree on `key<i>` and their sketches from the band table, and the sync trigger deletes band
-- rows through the B-tree on `id`. On one node none is unique: a flag trigger writes a row's
-- band rows before it checks the row (src/index/claim.rs), while band rows of the row's id may
-- still be there; the replica identity is then the whole row, so UPDATE and DELETE on the
-- table work under a publication that includes the band table. On Citus, where checks make no
-- claims and a key's top bits are its band (src/core/bands.rs), `(key, id)` is unique by
-- construction: that B-tree is unique and the replica identity, so a shard move replays each
-- write through it (docs/citus.md).
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

-- minhash_index_drop and _minhash_drop_objects are Rust (src/index/manage/drop.rs).
