-- Creating an index (sql/index/, part 3 of 5), and what a rebuild shares with it: the band
-- table's format, columns and B-trees. (Dropping one is Rust: src/index/manage/drop.rs.)

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
    band_format int;
    -- of a Citus table distributed by another column than the id (a tenant): that column's
    -- type, as the band table's tenant column repeats it (docs/citus.md)
    tenant_type text;
BEGIN
    IF tbl IS NULL OR id_column IS NULL OR k IS NULL OR ngram IS NULL
       OR unit IS NULL OR threshold IS NULL THEN
        RAISE EXCEPTION 'only text_column, text_expression, bands, rows_per_band and format may be NULL'
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
    -- A Citus table distributed by another column (a tenant) needs a unique key of that column
    -- and the id (Citus refuses one without the distribution column): the id is unique within
    -- a tenant; its band rows carry the tenant, which places them on the row's shard.
    IF citus.kind = 'distributed' AND citus.dist_column <> id_column THEN
        SELECT format_type(a.atttypid, a.atttypmod)
               || CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                       THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END
        INTO tenant_type
        FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
        WHERE a.attrelid = tbl AND a.attname = citus.dist_column AND a.attnum > 0 AND NOT a.attisdropped;
        IF NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = tbl AND x.indisunique
                       AND x.indimmediate AND x.indpred IS NULL AND x.indexprs IS NULL
                       AND x.indnkeyatts = 2
                       AND (x.indkey::int2[])[0:1] @> ARRAY[id_attnum,
                           (SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = tbl
                            AND a.attname = citus.dist_column)]) THEN
            RAISE EXCEPTION 'id column "%" of table % is not unique within its distribution column "%"',
                id_column, tbl, citus.dist_column
                USING ERRCODE = 'invalid_column_reference',
                      HINT = format('Add a primary key or unique constraint, not deferrable, on the two '
                                    'columns: PRIMARY KEY (%I, %I).', citus.dist_column, id_column);
        END IF;
    ELSIF NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = tbl AND x.indisunique
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
    -- Format 1: one row per row and band, one B-tree; format 2: one row per row, its band keys
    -- side by side, each band's keys in a B-tree of their own (docs/contract.md).
    band_format := minhash_internal._minhash_check_format(format, bands);
    -- sketch1 and sketch2: 128 signature bits a lookup compares before fetching a candidate
    -- (unlogged like its table: after a crash both come back empty)
    -- (id: bigint for integer keys, the key's own type otherwise; see src/index/key.rs)
    -- (tenant: of a table distributed by another column than the id, that column's value)
    EXECUTE format('CREATE %s TABLE %I.%I (id %s NOT NULL, %s%s)',
                   CASE rel.relpersistence WHEN 'u' THEN 'UNLOGGED' ELSE '' END,
                   rel.nspname, band_name, band_id_type,
                   (SELECT string_agg(format('%I bigint NOT NULL', u.col), ', ' ORDER BY u.pos)
                    FROM unnest(minhash_internal._minhash_band_value_columns(band_format, bands))
                         WITH ORDINALITY AS u(col, pos)),
                   coalesce(', tenant ' || tenant_type || ' NOT NULL', ''));
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
               rows_per_band, now(), band_format, text_expression,
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
    PERFORM minhash_internal._minhash_band_indexes(cfg);
    -- The sketch store that lookups for the k most similar rows and low thresholds sweep (an
    -- index of access method minhash_sketch on the table, src/index/store.rs)
    PERFORM minhash_internal._minhash_sync_stores(tbl);
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
