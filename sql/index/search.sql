-- Whole-table searches of an index (sql/index/, part 6 of 6): minhash_duplicates and
-- minhash_clusters of a table, on one node or across Citus workers; last, the comments of every
-- function users call.

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
            ('minhash_flag_duplicate', NULL, 'row trigger: flags a row that near-duplicates another, or rejects it (23505)')
        ) c(name, first_arg, description)
        JOIN pg_catalog.pg_proc p ON p.proname = c.name
         AND p.pronamespace = pg_catalog.to_regnamespace('@extschema@')
         AND (c.first_arg IS NULL OR p.proargtypes[0] = c.first_arg::pg_catalog.regtype)
    LOOP
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s IS %L', f.fn, f.description);
    END LOOP;
END $$;
