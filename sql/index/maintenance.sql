-- Keeping an index (sql/index/, part 5 of 6): rebuild, check and statistics.

CREATE FUNCTION @extschema@.minhash_index_rebuild(tbl regclass, format int DEFAULT NULL)
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
    -- Of another format, the emptied band table is made one of `format` (docs/contract.md).
    IF format IS NOT NULL AND format IS DISTINCT FROM cfg.format THEN
        PERFORM minhash_internal._minhash_check_format(format, cfg.bands);
        cfg := minhash_internal._minhash_band_reshape(cfg, format);
    -- (the band table of a Citus table indexed before 0.3.0 gets its unique B-tree and replica
    -- identity: see _minhash_band_indexes)
    ELSIF (SELECT c.relreplident FROM pg_class c WHERE c.oid = cfg.band_table) = 'f'
          AND (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN
        cfg := minhash_internal._minhash_band_reshape(cfg, cfg.format);
    END IF;
    -- (an index made before sketch stores existed gets its store)
    PERFORM minhash_internal._minhash_sync_stores(cfg.tbl);
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
    band text := minhash_internal._minhash_band_rows_of(cfg);
    progress text;
    -- (of a table distributed by a tenant, a band row is of its row's tenant too)
    tenant text := CASE WHEN minhash_internal._minhash_tenant_column(cfg) IS NOT NULL
                        THEN ', %1$s.tenant' END;
BEGIN
    -- Progress (src/index/progress.rs) as the rows of the table are signed and the band rows
    -- read (one in 64 counted for 64), of about as many as the table and the band table had
    -- when last vacuumed, analyzed or indexed (of format 2, a row holds `bands` band rows);
    -- in the target list, where it leaves the planner's estimates alone.
    -- (Not on a Citus table, whose rows are read on the workers.)
    IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NULL THEN
        progress := format('minhash_internal._minhash_progress(%L, %L, %s, %s, ',
            'minhash_index_check on ' || cfg.tbl::text, 'rows and band rows',
            (SELECT sum(greatest(c.reltuples, 0)
                        * CASE WHEN c.oid = cfg.band_table AND cfg.format = 2 THEN cfg.bands ELSE 1 END)::bigint
             FROM pg_class c WHERE c.oid IN (cfg.tbl, cfg.band_table)),
            extract(epoch FROM clock_timestamp()));
        source := format('(SELECT t.*, %s1) FROM %s t)', progress, cfg.tbl);
        band := format('(SELECT b.*, CASE WHEN (b.key & 63) = 0 THEN %s64) END FROM %s b)',
                       progress, minhash_internal._minhash_band_rows_of(cfg));
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
               FROM (SELECT e.id, e.key, e.sketch1, e.sketch2%3$s, true AS expected FROM (%1$s) e
                     UNION ALL
                     SELECT b.id, b.key, b.sketch1, b.sketch2%4$s, false FROM %2$s b) r
               GROUP BY r.id, r.key, r.sketch1, r.sketch2%5$s) g',
        minhash_internal._minhash_band_rows_sql(cfg, source), band,
        coalesce(format(tenant, 'e'), ''), coalesce(format(tenant, 'b'), ''),
        coalesce(format(tenant, 'r'), '')));
    RETURN QUERY SELECT (counts ->> 0)::bigint, (counts ->> 1)::bigint;
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
        (SELECT (greatest(c.reltuples, 0) * CASE WHEN cfg.format = 2 THEN cfg.bands ELSE 1 END)::bigint
         FROM pg_class c WHERE c.oid = cfg.band_table),
        extract(epoch FROM clock_timestamp()), minhash_internal._minhash_band_rows_of(cfg));
BEGIN
    -- (of a table distributed by a tenant, a row is its id and tenant: ids repeat across tenants)
    IF (minhash_internal._minhash_citus_table(cfg.tbl)).kind IS NOT NULL THEN
        groups := format('SELECT pg_catalog.count(*) AS size, 0 AS of_id FROM %1$s b GROUP BY b.key
                          UNION ALL SELECT pg_catalog.count(*), 1 FROM %1$s b GROUP BY b.id%2$s',
                         minhash_internal._minhash_band_rows_of(cfg),
                         CASE WHEN minhash_internal._minhash_tenant_column(cfg) IS NOT NULL
                              THEN ', b.tenant' ELSE '' END);
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
