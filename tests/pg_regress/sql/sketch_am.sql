-- The sketch store, index access method minhash_sketch: it keeps one entry (TID, value) per row
-- whose key is not NULL, through every write path, VACUUM, REINDEX (CONCURRENTLY), CREATE
-- INDEX CONCURRENTLY, partitions and unlogged tables; every value has the first one's width;
-- it takes no options and the planner never uses it.
SET client_min_messages = warning;

-- entries(i): (tid, value) of every entry of index i; stats(i): its metapage
CREATE FUNCTION public.sketch_entries(i regclass) RETURNS TABLE (tid tid, sketch bytea)
LANGUAGE sql AS $$ SELECT * FROM minhash_internal._minhash_sketch_entries(i) $$;
CREATE FUNCTION public.sketch_stats(i regclass) RETURNS TABLE (width int, entries bigint, pages bigint)
LANGUAGE sql AS $$ SELECT * FROM minhash_internal._minhash_sketch_stats(i) $$;
-- exact(t, i): the entries of index i are the live rows of t whose md5 key is not NULL, each
-- once: (entries, rows, entries not rows, rows not entries)
CREATE FUNCTION public.sketch_exact(t regclass, i regclass)
RETURNS TABLE (entries bigint, live_rows bigint, extra bigint, missing bigint)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'WITH e AS (SELECT * FROM public.sketch_entries(%2$L)),
              r AS (SELECT ctid AS tid, pg_catalog.decode(pg_catalog.md5(body), ''hex'') AS sketch
                    FROM %1$s WHERE body IS NOT NULL)
         SELECT (SELECT pg_catalog.count(*) FROM e), (SELECT pg_catalog.count(*) FROM r),
                (SELECT pg_catalog.count(*) FROM (SELECT * FROM e EXCEPT ALL SELECT * FROM r) x),
                (SELECT pg_catalog.count(*) FROM (SELECT * FROM r EXCEPT ALL SELECT * FROM e) x)',
        t, i);
END $$;
-- plan(q): the plan of q, without the line PostgreSQL 18 adds for a disabled node
CREATE FUNCTION public.sketch_plan(q text) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE line text;
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        IF line NOT LIKE '%Disabled%' THEN RETURN NEXT line; END IF;
    END LOOP;
END $$;

-- a store of 16-byte values (an md5 digest of the body); rows with a NULL body are skipped
CREATE TABLE sk_docs (id int PRIMARY KEY, body text, note text) WITH (autovacuum_enabled = off);
INSERT INTO sk_docs SELECT g, 'document ' || g FROM generate_series(1, 1000) g;
INSERT INTO sk_docs VALUES (0, NULL, NULL);
CREATE INDEX sk_docs_md5 ON sk_docs USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
-- 370 entries of 16 bytes to a page: 3 data pages and the metapage
SELECT * FROM sketch_stats('sk_docs_md5');
SELECT * FROM sketch_exact('sk_docs', 'sk_docs_md5');
SELECT tid, sketch FROM sketch_entries('sk_docs_md5') ORDER BY tid LIMIT 2;

-- inserts, updates (each a new row version, the old one's entry stays until VACUUM), deletes
INSERT INTO sk_docs SELECT g, 'document ' || g FROM generate_series(1001, 1200) g;
UPDATE sk_docs SET body = body || ' revised' WHERE id % 10 = 0;
DELETE FROM sk_docs WHERE id % 7 = 0;
UPDATE sk_docs SET body = NULL WHERE id = 3;
SELECT * FROM sketch_stats('sk_docs_md5');
-- 1000 + 200 inserted + 120 new versions; VACUUM removes the entries of dead rows: 1200 rows,
-- 171 deleted, 1 now NULL
VACUUM sk_docs;
SELECT * FROM sketch_stats('sk_docs_md5');
SELECT * FROM sketch_exact('sk_docs', 'sk_docs_md5');
-- VACUUM lists the blocks it leaves with room (the insert block aside), and inserts fill the
-- insert block, then those, lowest first, before they add blocks: 2000 entries, 370 to a page
CREATE TABLE sk_reuse (id int, body text) WITH (autovacuum_enabled = off);
CREATE INDEX sk_reuse_md5 ON sk_reuse USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
INSERT INTO sk_reuse SELECT g, 'reused ' || g FROM generate_series(1, 2000) g;
SELECT * FROM sketch_stats('sk_reuse_md5');
DELETE FROM sk_reuse WHERE id <= 1000;
VACUUM sk_reuse;
SELECT * FROM sketch_stats('sk_reuse_md5');
-- 220 to the insert block (6), 370 to block 1, 370 to block 2, 40 to block 3: no new block
INSERT INTO sk_reuse SELECT g, 'reused ' || g FROM generate_series(2001, 3000) g;
SELECT * FROM sketch_stats('sk_reuse_md5');
SELECT * FROM sketch_exact('sk_reuse', 'sk_reuse_md5');
-- 221 more fill block 3, the last with room, and one more takes a new block
INSERT INTO sk_reuse SELECT g, 'reused ' || g FROM generate_series(3001, 3220) g;
SELECT * FROM sketch_stats('sk_reuse_md5');
INSERT INTO sk_reuse VALUES (3221, 'reused 3221');
SELECT * FROM sketch_stats('sk_reuse_md5');
SELECT * FROM sketch_exact('sk_reuse', 'sk_reuse_md5');

-- an aborted insert leaves an entry until VACUUM
BEGIN;
INSERT INTO sk_docs SELECT g, 'rolled back ' || g FROM generate_series(2001, 2050) g;
ROLLBACK;
SELECT entries FROM sketch_stats('sk_docs_md5');
VACUUM sk_docs;
SELECT * FROM sketch_exact('sk_docs', 'sk_docs_md5');

-- more writes of every kind, then VACUUM: the entries are exactly the live rows
INSERT INTO sk_docs SELECT g, 'document ' || g FROM generate_series(3001, 3500) g
    ON CONFLICT (id) DO UPDATE SET body = excluded.body || ' again';
MERGE INTO sk_docs d USING generate_series(3400, 3600) g ON d.id = g
    WHEN MATCHED AND g % 2 = 0 THEN DELETE
    WHEN MATCHED THEN UPDATE SET body = d.body || ' merged'
    WHEN NOT MATCHED THEN INSERT VALUES (g, 'merged ' || g);
COPY sk_docs (id, body) FROM STDIN;
5001	copied one
5002	\N
5003	copied three
\.
DELETE FROM sk_docs WHERE id BETWEEN 500 AND 800;
VACUUM sk_docs;
SELECT * FROM sketch_exact('sk_docs', 'sk_docs_md5');
SELECT entries FROM sketch_stats('sk_docs_md5');

-- REINDEX, REINDEX CONCURRENTLY and CREATE INDEX CONCURRENTLY give the same entries
REINDEX INDEX sk_docs_md5;
SELECT * FROM sketch_exact('sk_docs', 'sk_docs_md5');
REINDEX INDEX CONCURRENTLY sk_docs_md5;
SELECT * FROM sketch_exact('sk_docs', 'sk_docs_md5');
CREATE INDEX CONCURRENTLY sk_docs_md5_cic ON sk_docs USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
SELECT * FROM sketch_exact('sk_docs', 'sk_docs_md5_cic');
SELECT indisvalid FROM pg_index WHERE indexrelid = 'sk_docs_md5_cic'::regclass;
DROP INDEX sk_docs_md5_cic;

-- an update that leaves the key alone on a page with room is HOT: no new entry; the entry
-- names the root of the HOT chain (the lookups follow it), also after VACUUM
CREATE TABLE sk_hot (id int, body text, note text) WITH (fillfactor = 50, autovacuum_enabled = off);
INSERT INTO sk_hot SELECT g, 'hot ' || g FROM generate_series(1, 6) g;
CREATE INDEX sk_hot_md5 ON sk_hot USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
UPDATE sk_hot SET note = 'changed' WHERE id <= 3;
UPDATE sk_hot SET note = 'again' WHERE id <= 2;
VACUUM sk_hot;
SELECT e.tid, h.ctid, h.id FROM sketch_entries('sk_hot_md5') e
    JOIN sk_hot h ON pg_catalog.decode(pg_catalog.md5(h.body), 'hex') OPERATOR(pg_catalog.=) e.sketch
ORDER BY h.id;
SELECT entries FROM sketch_stats('sk_hot_md5');

-- the planner never uses it, not even with every other path disabled
SET enable_seqscan = off;
SELECT * FROM sketch_plan($$SELECT id FROM sk_docs WHERE pg_catalog.decode(pg_catalog.md5(body), 'hex') OPERATOR(pg_catalog.=) '\x00'$$);
SELECT * FROM sketch_plan($$SELECT id FROM sk_docs ORDER BY pg_catalog.decode(pg_catalog.md5(body), 'hex') LIMIT 1$$);
RESET enable_seqscan;

-- every value has the width of the first: 22023 for another width or an empty value, 54000
-- for one wider than a page holds (8152 bytes)
CREATE TABLE sk_width (v bytea);
CREATE INDEX sk_width_v ON sk_width USING minhash_sketch (v);
SELECT * FROM sketch_stats('sk_width_v');
INSERT INTO sk_width VALUES (NULL);
SELECT try($$INSERT INTO sk_width VALUES ('')$$);
SELECT try($$INSERT INTO sk_width VALUES (pg_catalog.decode(pg_catalog.repeat('ab', 8153), 'hex'))$$);
SELECT * FROM sketch_stats('sk_width_v');
INSERT INTO sk_width VALUES ('\x0102030405060708');
SELECT try($$INSERT INTO sk_width VALUES ('\x01020304050607')$$);
SELECT try($$INSERT INTO sk_width VALUES ('\x010203040506070809')$$);
SELECT try($$INSERT INTO sk_width VALUES ('')$$);
SELECT try($$UPDATE sk_width SET v = '\x01' WHERE v IS NOT NULL$$);
SELECT * FROM sketch_stats('sk_width_v');
-- a build meets the mismatch too
INSERT INTO sk_width VALUES ('\x0807060504030201');
DROP INDEX sk_width_v;
INSERT INTO sk_width VALUES ('\x01');
SELECT try($$CREATE INDEX sk_width_v ON sk_width USING minhash_sketch (v)$$);
DELETE FROM sk_width WHERE v OPERATOR(pg_catalog.=) '\x01';
CREATE INDEX sk_width_v ON sk_width USING minhash_sketch (v);
SELECT * FROM sketch_entries('sk_width_v') ORDER BY sketch;

-- values the heap keeps out of line (x) or compressed (y) are stored whole, by a build and by
-- an insert; so is the widest value, one to a page
CREATE TABLE sk_toast (x bytea, y bytea);
ALTER TABLE sk_toast ALTER COLUMN x SET STORAGE EXTERNAL;
INSERT INTO sk_toast SELECT pg_catalog.decode(pg_catalog.repeat(pg_catalog.md5(g::text), 250), 'hex'),
                            pg_catalog.decode(pg_catalog.repeat(pg_catalog.md5(g::text), 250), 'hex')
FROM generate_series(1, 3) g;
CREATE INDEX sk_toast_x ON sk_toast USING minhash_sketch (x);
CREATE INDEX sk_toast_y ON sk_toast USING minhash_sketch (y);
INSERT INTO sk_toast SELECT pg_catalog.decode(pg_catalog.repeat(pg_catalog.md5(g::text), 250), 'hex'),
                            pg_catalog.decode(pg_catalog.repeat(pg_catalog.md5(g::text), 250), 'hex')
FROM generate_series(4, 5) g;
SELECT pg_catalog.pg_column_compression(y) IS NOT NULL AS y_compressed FROM sk_toast LIMIT 1;
SELECT i, s.width, s.entries, s.pages,
       (SELECT pg_catalog.array_agg(pg_catalog.md5(sketch) ORDER BY tid) FROM sketch_entries(i))
       OPERATOR(pg_catalog.=) (SELECT pg_catalog.array_agg(pg_catalog.md5(x) ORDER BY ctid) FROM sk_toast) AS same
FROM unnest(ARRAY['sk_toast_x', 'sk_toast_y']::regclass[]) i, LATERAL sketch_stats(i) s;
CREATE TABLE sk_widest (v bytea);
CREATE INDEX sk_widest_v ON sk_widest USING minhash_sketch (v);
INSERT INTO sk_widest SELECT pg_catalog.decode(pg_catalog.repeat(pg_catalog.lpad(pg_catalog.to_hex(g), 2, '0'), 8152), 'hex') FROM generate_series(1, 3) g;
SELECT * FROM sketch_stats('sk_widest_v');
SELECT pg_catalog.length(sketch), pg_catalog.get_byte(sketch, 8151) FROM sketch_entries('sk_widest_v') ORDER BY tid;

-- no options, no unique or multicolumn index, no INCLUDE
SELECT try($$CREATE INDEX ON sk_docs USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex'))) WITH (fillfactor = 50)$$);
SELECT try($$ALTER INDEX sk_docs_md5 SET (fillfactor = 50)$$);
SELECT try($$CREATE UNIQUE INDEX ON sk_width USING minhash_sketch (v)$$);
SELECT try($$CREATE INDEX ON sk_width USING minhash_sketch (v, v)$$);
SELECT try($$CREATE INDEX ON sk_width USING minhash_sketch (v) INCLUDE (v)$$);
SELECT try($$CREATE INDEX ON sk_docs USING minhash_sketch (body)$$);
-- its opclass is valid
SELECT amvalidate(oid) FROM pg_opclass WHERE opcname OPERATOR(pg_catalog.=) 'bytea_minhash_sketch_ops';

-- an unlogged table
CREATE UNLOGGED TABLE sk_unlogged (id int, body text) WITH (autovacuum_enabled = off);
CREATE INDEX sk_unlogged_md5 ON sk_unlogged USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
INSERT INTO sk_unlogged SELECT g, 'unlogged ' || g FROM generate_series(1, 500) g;
DELETE FROM sk_unlogged WHERE id > 450;
VACUUM sk_unlogged;
SELECT * FROM sketch_exact('sk_unlogged', 'sk_unlogged_md5');
SELECT relpersistence FROM pg_class WHERE oid = 'sk_unlogged_md5'::regclass;

-- TRUNCATE gives a store a new, empty file (and one truncated in the transaction that made it)
TRUNCATE sk_unlogged;
SELECT * FROM sketch_stats('sk_unlogged_md5');
INSERT INTO sk_unlogged SELECT g, 'unlogged ' || g FROM generate_series(1, 3) g;
SELECT * FROM sketch_exact('sk_unlogged', 'sk_unlogged_md5');
BEGIN;
CREATE TABLE sk_trunc (id int, body text);
CREATE INDEX sk_trunc_md5 ON sk_trunc USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
INSERT INTO sk_trunc SELECT g, 'truncated ' || g FROM generate_series(1, 500) g;
TRUNCATE sk_trunc;
INSERT INTO sk_trunc SELECT g, 'kept ' || g FROM generate_series(1, 7) g;
COMMIT;
SELECT * FROM sketch_stats('sk_trunc_md5');
SELECT * FROM sketch_exact('sk_trunc', 'sk_trunc_md5');

-- a partitioned table: one store per partition, the partitioned index has none (42809)
CREATE TABLE sk_parts (id int, body text) PARTITION BY RANGE (id);
CREATE TABLE sk_parts_1 PARTITION OF sk_parts FOR VALUES FROM (0) TO (100) WITH (autovacuum_enabled = off);
CREATE TABLE sk_parts_2 PARTITION OF sk_parts FOR VALUES FROM (100) TO (200) WITH (autovacuum_enabled = off);
INSERT INTO sk_parts SELECT g, 'part ' || g FROM generate_series(0, 149) g;
CREATE INDEX sk_parts_md5 ON sk_parts USING minhash_sketch ((pg_catalog.decode(pg_catalog.md5(body), 'hex')));
INSERT INTO sk_parts SELECT g, 'part ' || g FROM generate_series(150, 199) g;
UPDATE sk_parts SET id = id + 100 WHERE id < 10;
VACUUM sk_parts;
SELECT c.relname, s.* FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
     LATERAL sketch_exact(c.oid, (SELECT indexrelid FROM pg_index WHERE indrelid = c.oid)::regclass) s
WHERE i.inhparent = 'sk_parts'::regclass ORDER BY 1;
SELECT try($$SELECT * FROM sketch_stats('sk_parts_md5')$$);
CREATE TABLE sk_parts_3 PARTITION OF sk_parts FOR VALUES FROM (200) TO (300);
INSERT INTO sk_parts VALUES (250, 'part 250');
SELECT * FROM sketch_stats((SELECT indexrelid FROM pg_index WHERE indrelid = 'sk_parts_3'::regclass)::regclass);

-- the internal functions: superusers only (42501); a store only (42809)
SELECT try($$SELECT * FROM sketch_stats('sk_docs')$$);
SELECT try($$SELECT * FROM sketch_stats('sk_docs_pkey')$$);
CREATE ROLE regress_sketch_reader;
GRANT SELECT ON sk_docs TO regress_sketch_reader;
SET ROLE regress_sketch_reader;
SELECT try($$SELECT * FROM minhash_internal._minhash_sketch_entries('sk_docs_md5')$$);
SELECT try($$SELECT * FROM minhash_internal._minhash_sketch_stats('sk_docs_md5')$$);
RESET ROLE;

DROP TABLE sk_docs, sk_reuse, sk_hot, sk_width, sk_toast, sk_widest, sk_unlogged, sk_trunc, sk_parts;
DROP FUNCTION public.sketch_entries(regclass), public.sketch_stats(regclass),
    public.sketch_exact(regclass, regclass), public.sketch_plan(text);
REVOKE ALL ON SCHEMA public FROM regress_sketch_reader;
DROP ROLE regress_sketch_reader;
