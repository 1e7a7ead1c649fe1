-- Creating and dropping an index (sql/index/, part 3 of 6), and following the partition tree
-- of an indexed partitioned table. minhash_index_create itself is Rust
-- (src/index/manage/create.rs); these are the helpers it calls.

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
-- table's default index (_minhash_index). `tbl` names the index: the table's only index, or the
-- band table of one (42725 for a table with several: a drop is never done by default); the
-- sync triggers go with the table's last index.
CREATE FUNCTION @extschema@.minhash_index_drop(tbl regclass, cascade boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cfg @extschema@.minhash_indexes;
    default_band name;
    trg text;
    flags text[];
BEGIN
    -- (dropping is never done by default: of a table with several indexes, name the one)
    IF (SELECT count(*) FROM @extschema@.minhash_indexes i WHERE i.tbl = minhash_index_drop.tbl) > 1 THEN
        RAISE EXCEPTION 'table % has % minhash indexes', tbl,
            (SELECT count(*) FROM @extschema@.minhash_indexes i WHERE i.tbl = minhash_index_drop.tbl)
            USING ERRCODE = 'ambiguous_function',
                  HINT = format('Name the one to drop by its band table: %s.',
                                (SELECT string_agg(i.band_table::text, ', ' ORDER BY i.band_table::oid)
                                 FROM @extschema@.minhash_indexes i WHERE i.tbl = minhash_index_drop.tbl));
    END IF;
    cfg := minhash_internal._minhash_index(tbl);
    tbl := cfg.tbl;
    -- (a duplicate trigger that names no index checks against the table's default one)
    default_band := (SELECT c.relname FROM @extschema@.minhash_indexes i
                     JOIN pg_class c ON c.oid = i.band_table
                     WHERE i.tbl = cfg.tbl ORDER BY i.band_table::oid LIMIT 1);
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = tbl AND pg_has_role(c.relowner, 'USAGE')) THEN
        RAISE EXCEPTION 'must be owner of relation %', (SELECT quote_ident(c.relname) FROM pg_class c WHERE c.oid = tbl)
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Readers and writers of the table go first, then nothing can hold the band table: each
    -- of them takes the table before the band table, so dropping both cannot deadlock.
    EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
    SELECT array_agg(t.tgname::text ORDER BY t.tgname) INTO flags FROM pg_trigger t
    WHERE t.tgrelid = tbl AND t.tgfoid = '@extschema@.minhash_flag_duplicate()'::regprocedure
      AND coalesce(nullif((minhash_internal._minhash_trigger_args(t.oid))[4], ''), default_band)
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
    -- (a sketch store no index of the table needs any more goes with the last one that did)
    PERFORM minhash_internal._minhash_sync_stores(tbl);
    IF NOT EXISTS (SELECT FROM @extschema@.minhash_indexes i WHERE i.tbl = cfg.tbl) THEN
        PERFORM minhash_internal._minhash_sync_triggers(tbl, false);
        PERFORM minhash_internal._minhash_sync_triggers(p, false)
        FROM minhash_internal._minhash_partitions(tbl) p;
    ELSIF (minhash_internal._minhash_citus_table(tbl)).kind IS NOT NULL THEN
        -- (the triggers on the shards carry the catalog rows of the indexes left)
        PERFORM minhash_internal._minhash_sync_triggers(tbl, true);
    END IF;
END $$;
