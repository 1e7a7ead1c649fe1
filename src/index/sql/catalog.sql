-- The managed band-key index, in four files run in this order (src/index/mod.rs): the catalog of
-- indexed tables (this file), the SQL-language helpers of an index (build.sql), DDL on indexed
-- tables (ddl.sql) and the whole-table searches (search.sql). Creating, checking, rebuilding and
-- dropping an index, and what the event triggers do, are Rust (src/index/manage/).
--
-- Every function here runs with the caller's rights (SECURITY INVOKER) and builds dynamic SQL
-- only from regclass output (already quoted) and %I-quoted column names. What reads or writes
-- an indexed table or its band table on the index's behalf (backfill, rebuild, check, stats)
-- goes through _minhash_as_owner (src/index/run/owner.rs): as the table's owner inside a
-- security-restricted operation, for callers that have the owner's privileges. The band table
-- is private to the table's owner; the sync triggers call one fixed function of the extension,
-- _minhash_sync (src/index/write/sync.rs), which writes it as the owner in the same way.

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
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- the band table's format (docs/contract.md): 1, a row per row and band; 2, a row per row
    format int NOT NULL DEFAULT 1 CHECK (format OPERATOR(pg_catalog.=) ANY (ARRAY[1, 2])),
    -- the SQL expression over the table's columns rows' texts come from, in place of a text
    -- column, as _minhash_text_expression prints it (src/index/text.rs)
    text_expression text,
    -- of a partitioned table: the tables of its partition tree below it that the index covers
    -- (kept by the minhash_ddl_* event triggers, which compare it with the tree after DDL)
    partitions regclass[],
    CONSTRAINT minhash_indexes_text_check CHECK ((text_column IS NULL) OPERATOR(pg_catalog.<>) (text_expression IS NULL))
);
COMMENT ON TABLE @extschema@.minhash_indexes IS 'one row per managed pg_minhash index';
COMMENT ON COLUMN @extschema@.minhash_indexes.format IS 'format of the band table: 1, a row per row and band; 2, a row per row (signatures of format minhash_format_version() in both)';
SELECT pg_catalog.pg_extension_config_dump('@extschema@.minhash_indexes', '');

-- The settings of an index that decide its band rows, as one value: what the functions that
-- sign texts for an index take (src/index/def/settings.rs). The band-row SQL passes them as a
-- constant (_minhash_settings_sql), which the workers of a Citus table, with no catalog rows,
-- read as well.
CREATE TYPE minhash_internal.index_settings AS (
    k int,
    ngram int,
    unit text,
    bands int,
    rows_per_band int
);

-- Everyone may read the catalog (the triggers of a table read it as whoever writes the table);
-- only a table's owner may add, change or remove its row. A row may name only a band table
-- that belongs to the same owner: minhash_index_drop and the minhash_ddl_dropped event trigger
-- drop it as whoever runs those, maybe a superuser, and must not be steered at someone else's
-- table. A row whose table is gone may be removed by anyone (minhash_ddl_dropped removes it as
-- whoever dropped the table, when the table's owner can no longer be looked up).
ALTER TABLE @extschema@.minhash_indexes ENABLE ROW LEVEL SECURITY;
CREATE POLICY minhash_indexes_read ON @extschema@.minhash_indexes FOR SELECT USING (true);
CREATE POLICY minhash_indexes_owner ON @extschema@.minhash_indexes FOR ALL
    USING (pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl), 'USAGE')
           OR NOT EXISTS (SELECT FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl))
    WITH CHECK (pg_catalog.pg_has_role((SELECT relowner FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl), 'USAGE')
                AND (SELECT relowner FROM pg_catalog.pg_class
                     WHERE oid OPERATOR(pg_catalog.=) band_table AND relkind OPERATOR(pg_catalog.=) 'r')
                    OPERATOR(pg_catalog.=) (SELECT relowner FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) tbl));
GRANT SELECT, INSERT, UPDATE, DELETE ON @extschema@.minhash_indexes TO PUBLIC;

-- Each backend caches the catalog rows its lookups read (src/index/access.rs). A changed row
-- invalidates its table's relcache entry, which drops the cached copy in every backend.
CREATE TRIGGER minhash_indexes_changed AFTER INSERT OR UPDATE OR DELETE ON @extschema@.minhash_indexes
    FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_catalog_changed();
CREATE TRIGGER minhash_indexes_truncated AFTER TRUNCATE ON @extschema@.minhash_indexes
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_catalog_changed();

-- pg_dump carries no dependency of a band table on its table and on the extension (pg_depend
-- is not dumped); a restore gets them back: _minhash_relink links every band table of the
-- catalog that lacks them, where the current user has the privileges of the owner of both
-- (anyone else's are left for their owner's restore). Called after rows are added to the
-- catalog (a full or data-only restore copies them in) and after ALTER TABLE on the catalog
-- (pg_restore --disable-triggers enables its triggers again after the copy). A data-only
-- restore into a table that has an index already copies in a second catalog row for it (the
-- same table and band table): the index there stands, and _minhash_catalog_insert skips the
-- row (its band rows are dropped by the band table's load trigger). All three in Rust
-- (src/index/def/restore.rs).
CREATE FUNCTION minhash_internal._minhash_relink() RETURNS void
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_relink_wrapper';
CREATE FUNCTION minhash_internal._minhash_catalog_loaded() RETURNS trigger
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_catalog_loaded_wrapper';
CREATE FUNCTION minhash_internal._minhash_catalog_insert() RETURNS trigger
    LANGUAGE c SET search_path = pg_catalog, pg_temp
    AS 'MODULE_PATHNAME', '_minhash_catalog_insert_wrapper';

CREATE TRIGGER minhash_indexes_loaded AFTER INSERT ON @extschema@.minhash_indexes
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_catalog_loaded();
CREATE TRIGGER minhash_indexes_kept BEFORE INSERT ON @extschema@.minhash_indexes
    FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_catalog_insert();
