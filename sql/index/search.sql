-- Whole-table searches of an index (sql/index/, part 6 of 6): minhash_duplicates and
-- minhash_clusters of a table, on one node or across Citus workers; last, the comments of every
-- function users call.

-- The condition ` AND d.<tenant column> = '<tenant>'::<its type>` that keeps the rows of tenant
-- `tenant` (text, read as a cast to the type would) of the Citus table distributed by a tenant whose
-- index `cfg` is (docs/citus.md); '' for a NULL tenant; 22023 for a table not distributed by a
-- tenant.
CREATE FUNCTION minhash_internal._minhash_tenant_filter(cfg @extschema@.minhash_indexes, tenant text)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    col name := minhash_internal._minhash_tenant_column(cfg);
BEGIN
    IF tenant IS NULL THEN
        RETURN '';
    ELSIF col IS NULL THEN
        RAISE EXCEPTION '% is not a Citus table distributed by a tenant column', cfg.tbl
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'tenant applies to a table distributed by another column than the id (docs/citus.md).';
    END IF;
    -- (compared by the equality of the type's default B-tree operator class and read without
    -- the column's type modifier, as minhash_similar reads it)
    RETURN (SELECT format(' AND d.%I %s %L::%s', col,
                          minhash_internal._minhash_equality_operator(a.atttypid), tenant,
                          format_type(a.atttypid, NULL))
            FROM pg_attribute a WHERE a.attrelid = cfg.tbl AND a.attname = col);
END $$;

-- The query minhash_duplicates and minhash_clusters read tbl through: (id, text) of every row
-- with a text, the id as bigint or (typed) in its own type. They search it in memory
-- (src/core/dedup.rs) rather than joining the band table with itself: signing the text again
-- costs less than reading `bands` band rows per row, and gives the same keys. Of a Citus table
-- the query runs through Citus, which streams the rows of every shard to this backend: the
-- search is the one-node search, with no band rows moved between workers (docs/citus.md).
-- `ordered` reads the rows in the greedy order of mode 'representative': by `priority` (the
-- caller's ORDER BY list over the table's columns, part of the caller's query, run with the
-- caller's rights), then by id.
-- With `tenant` (of a Citus table distributed by a tenant, _minhash_tenant_filter), the rows of
-- that tenant only, which Citus reads from its one shard.
CREATE FUNCTION minhash_internal._minhash_rows_sql(cfg @extschema@.minhash_indexes,
    typed boolean, ordered boolean, priority text, tenant text)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE WHEN cfg.text_expression IS NULL
                THEN format('SELECT d.%1$I%4$s, d.%2$I::text FROM %3$s d WHERE d.%2$I IS NOT NULL%5$s',
                            cfg.id_column, cfg.text_column, cfg.tbl,
                            CASE WHEN typed THEN '' ELSE '::bigint' END,
                            minhash_internal._minhash_tenant_filter(cfg, tenant))
                -- (OFFSET 0: the expression is computed once per row)
                ELSE format('SELECT d.%1$I%4$s, x.text FROM %3$s d
                             CROSS JOIN LATERAL (SELECT %2$s AS text OFFSET 0) x
                             WHERE x.text IS NOT NULL%5$s',
                            cfg.id_column, minhash_internal._minhash_text_sql(cfg, 'd', true),
                            cfg.tbl, CASE WHEN typed THEN '' ELSE '::bigint' END,
                            minhash_internal._minhash_tenant_filter(cfg, tenant)) END
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

-- minhash_duplicates streams its pairs: it is an SQL function PostgreSQL inlines into the
-- calling query (no SET clause, not STRICT: a subquery, not a function scan that would hold the
-- whole result), and _minhash_search_pairs makes one pair per call in its target list
-- (OFFSET 0 keeps it there), so `LIMIT 10` stops after ten pairs. Every name in it is
-- schema-qualified: the body is parsed with the caller's search path.
CREATE FUNCTION @extschema@.minhash_duplicates(tbl regclass, threshold float8 DEFAULT NULL,
    tenant text DEFAULT NULL)
RETURNS TABLE (id_a bigint, id_b bigint, similarity float8)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT (s.p).id_a, (s.p).id_b, (s.p).similarity FROM (
        SELECT minhash_internal._minhash_search_pairs(
                   minhash_internal._minhash_rows_sql(c, false, false, NULL, minhash_duplicates.tenant),
                   c.k, c.ngram,
                   c.unit, c.bands, c.rows_per_band, q.threshold) AS p
        FROM minhash_internal._minhash_index(minhash_duplicates.tbl) c
        CROSS JOIN LATERAL minhash_internal._minhash_check_id_type(c, NULL, 'minhash_duplicates') t
        CROSS JOIN LATERAL minhash_internal._minhash_query_threshold(
                   minhash_duplicates.threshold, c.threshold, c.bands, c.rows_per_band) q(threshold)
        OFFSET 0) s
$$;

CREATE FUNCTION @extschema@.minhash_duplicates(tbl regclass, id_type anyelement,
    threshold float8 DEFAULT NULL, tenant text DEFAULT NULL)
RETURNS TABLE (id_a anyelement, id_b anyelement, similarity float8)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT (s.p).id_a, (s.p).id_b, (s.p).similarity FROM (
        SELECT minhash_internal._minhash_search_keyed_pairs(minhash_duplicates.id_type,
                   minhash_internal._minhash_rows_sql(c, true, false, NULL, minhash_duplicates.tenant),
                   c.k, c.ngram,
                   c.unit, c.bands, c.rows_per_band, q.threshold) AS p
        FROM minhash_internal._minhash_index(minhash_duplicates.tbl) c
        CROSS JOIN LATERAL minhash_internal._minhash_check_id_type(
                   c, pg_catalog.pg_typeof(minhash_duplicates.id_type), 'minhash_duplicates') t
        CROSS JOIN LATERAL minhash_internal._minhash_query_threshold(
                   minhash_duplicates.threshold, c.threshold, c.bands, c.rows_per_band) q(threshold)
        OFFSET 0) s
$$;

CREATE FUNCTION @extschema@.minhash_clusters(tbl regclass, threshold float8 DEFAULT NULL,
    mode text DEFAULT 'connected', priority text DEFAULT NULL, tenant text DEFAULT NULL)
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
    RETURN QUERY SELECT * FROM minhash_internal._minhash_search_clusters(
        minhash_internal._minhash_rows_sql(cfg, false, ordered, priority, tenant), cfg.k, cfg.ngram,
        cfg.unit, cfg.bands, cfg.rows_per_band, threshold, mode);
END $$;

CREATE FUNCTION @extschema@.minhash_clusters(tbl regclass, id_type anyelement,
    threshold float8 DEFAULT NULL, mode text DEFAULT 'connected', priority text DEFAULT NULL,
    tenant text DEFAULT NULL)
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
    RETURN QUERY SELECT * FROM minhash_internal._minhash_search_keyed_clusters(id_type,
        minhash_internal._minhash_rows_sql(cfg, true, ordered, priority, tenant), cfg.k, cfg.ngram,
        cfg.unit, cfg.bands, cfg.rows_per_band, threshold, mode);
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
            ('minhash_explain', NULL, 'what one lookup in an indexed table does, step by step, with its time'),
            ('minhash_duplicates', 'regclass', 'every pair of near-duplicate rows of an indexed table, with exact Jaccard'),
            ('minhash_duplicates', 'anyarray', 'every pair of near-duplicate texts of an array, by the ids of a parallel array, with exact Jaccard'),
            ('minhash_clusters', 'regclass', 'the clusters of near-duplicate rows of an indexed table: connected (named by their smallest id) or around a kept row'),
            ('minhash_clusters', 'anyarray', 'the clusters of near-duplicate texts of an array, by the ids of a parallel array: connected or around a kept row'),
            ('minhash_flag_duplicate', NULL, 'row trigger: flags a row that near-duplicates another, or rejects it (23505)'),
            ('minhash_sketch', NULL, 'the 64-byte fine sketch of a text (128 slots of 4 bits) that a sketch store holds of each row'),
            ('minhash_sketch_handler', NULL, 'handler of the index access method minhash_sketch, the sketch store of the lookups')
        ) c(name, first_arg, description)
        JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) c.name
         AND p.pronamespace OPERATOR(pg_catalog.=) pg_catalog.to_regnamespace('@extschema@')
         AND (c.first_arg IS NULL OR p.proargtypes[0] OPERATOR(pg_catalog.=) c.first_arg::pg_catalog.regtype)
    LOOP
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', f.fn, f.description);
    END LOOP;
END $$;
