-- Whole-table searches of an index (src/index/sql/, part 4 of 4): minhash_duplicates and
-- minhash_clusters of a table, on one node or across Citus workers; last, the comments of every
-- function users call.

-- The searches are in Rust (src/index/read/whole_table.rs): each resolves the index once,
-- checks the arguments (the id type, the threshold, the mode and priority, the tenant) and reads
-- the rows with the caller's rights. The functions here only give them their SQL names.
--
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
