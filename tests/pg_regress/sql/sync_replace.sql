-- The sync trigger writes a row's new band rows (or keeps the claim that holds them) before it
-- deletes the old ones, in batches of 10,000 band rows (docs/internals.md, "The duplicate
-- trigger"; tests/isolation/specs/reject_sync.spec replays a check in the middle). What it
-- leaves is exact, checked inside the writing transaction and after it: UPDATEs of many rows
-- with and without claims, of both formats; rows whose ids move onto ids other rows of the same
-- statement leave; MERGE and INSERT ... ON CONFLICT, which fire two syncs; rows an UPDATE moves
-- to another partition.
SET client_min_messages = warning;
CREATE FUNCTION check_replace(tbl regclass) RETURNS text LANGUAGE sql AS $$
    SELECT format('%s|%s', missing, orphaned) FROM minhash_index_check(tbl)
$$;
-- (rows in descending id order: an UPDATE that adds 1 to every id reads id n + 1 before id n)
CREATE TABLE rp1 (id int PRIMARY KEY, body text);
INSERT INTO rp1 SELECT g, 'replaced row number ' || g || ' about ' || md5(g::text)
FROM generate_series(800, 1, -1) g;
CREATE TABLE rp2 (LIKE rp1 INCLUDING ALL);
INSERT INTO rp2 SELECT * FROM rp1;
CREATE TABLE rp_plain (LIKE rp1 INCLUDING ALL);
INSERT INTO rp_plain SELECT * FROM rp1;
SELECT minhash_index_create('rp1', 'id', 'body', bands => 32, rows_per_band => 4, format => 1)
           IS NOT NULL,
       minhash_index_create('rp2', 'id', 'body', bands => 32, rows_per_band => 4, format => 2)
           IS NOT NULL,
       minhash_index_create('rp_plain', 'id', 'body', bands => 32, rows_per_band => 4,
                            format => 1) IS NOT NULL;
CREATE TRIGGER rp1_reject BEFORE INSERT OR UPDATE ON rp1
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
CREATE TRIGGER rp2_reject BEFORE INSERT OR UPDATE ON rp2
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');

-- every id moves up by one, onto the id the row before it in the heap left, with a new text
-- for some: an id's old and new band rows are replaced together
BEGIN;
UPDATE rp1 SET id = id + 1, body = CASE WHEN id % 3 = 0 THEN body || ' moved' ELSE body END;
UPDATE rp2 SET id = id + 1, body = CASE WHEN id % 3 = 0 THEN body || ' moved' ELSE body END;
UPDATE rp_plain SET id = id + 1;
SELECT check_replace('rp1') AS rp1, check_replace('rp2') AS rp2,
       check_replace('rp_plain') AS rp_plain;
COMMIT;
SELECT min(id), max(id) FROM rp1;
-- the moved rows are still a constraint for their near-duplicates
SELECT try($$INSERT INTO rp1 VALUES (5000, 'replaced row number 9 about ' || md5('9') || ' moved!')$$);
SELECT try($$INSERT INTO rp2 VALUES (5000, 'replaced row number 10 about ' || md5('10') || '!')$$);

-- 800 rows, 25,600 band rows of format 1 (three batches), each row given a new text; the
-- table without a duplicate check (rp_plain) has no claims to keep
BEGIN;
UPDATE rp1 SET body = body || ' (edited)';
UPDATE rp2 SET body = body || ' (edited)';
UPDATE rp_plain SET body = body || ' (edited)';
SELECT check_replace('rp1') AS rp1, check_replace('rp2') AS rp2,
       check_replace('rp_plain') AS rp_plain;
COMMIT;
SELECT (SELECT count(*) FROM rp1_minhash_bands) AS rp1_band_rows,
       (SELECT count(*) FROM rp2_minhash_bands) AS rp2_band_rows,
       (SELECT count(*) FROM rp_plain_minhash_bands) AS rp_plain_band_rows;

-- a text whose bytes change and whose band rows do not (case and spaces)
UPDATE rp1 SET body = upper(body) WHERE id <= 100;
UPDATE rp2 SET body = '  ' || upper(body) WHERE id <= 100;
SELECT check_replace('rp1') AS rp1, check_replace('rp2') AS rp2;

-- MERGE (its UPDATE sync fires before its INSERT one) and INSERT ... ON CONFLICT
MERGE INTO rp1 t
USING (VALUES (2, 'row two, merged ' || md5('m2')), (900, 'row nine hundred, merged ' || md5('m900'))) s(id, body)
ON t.id = s.id
WHEN MATCHED THEN UPDATE SET body = s.body
WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.body);
MERGE INTO rp2 t
USING (VALUES (2, 'row two, merged ' || md5('m2')), (900, 'row nine hundred, merged ' || md5('m900'))) s(id, body)
ON t.id = s.id
WHEN MATCHED THEN UPDATE SET body = s.body
WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.body);
SELECT check_replace('rp1') AS rp1, check_replace('rp2') AS rp2;
INSERT INTO rp1 VALUES (3, 'row three, upserted ' || md5('u3')), (901, 'row nine hundred one ' || md5('u901'))
ON CONFLICT (id) DO UPDATE SET body = excluded.body;
INSERT INTO rp1 VALUES (4, 'row four, never written ' || md5('n4')) ON CONFLICT (id) DO NOTHING;
SELECT check_replace('rp1') AS rp1;
SELECT try($$INSERT INTO rp1 VALUES (5001, 'row nine hundred, merged ' || md5('m900') || '!')$$);
SELECT try($$INSERT INTO rp1 VALUES (5002, 'row three, upserted ' || md5('u3') || '!')$$);
SELECT try($$INSERT INTO rp1 VALUES (5003, 'row four, never written ' || md5('n4') || '!')$$);
SELECT check_replace('rp1') AS rp1;

-- rows an UPDATE moves to another partition, with and without a new text
CREATE TABLE rp_parted (id int, part int, body text, PRIMARY KEY (id, part)) PARTITION BY LIST (part);
CREATE TABLE rp_parted_0 PARTITION OF rp_parted FOR VALUES IN (0);
CREATE TABLE rp_parted_1 PARTITION OF rp_parted FOR VALUES IN (1);
INSERT INTO rp_parted SELECT g, 0, 'parted row number ' || g || ' about ' || md5(g::text)
FROM generate_series(1, 300) g;
SELECT minhash_index_create('rp_parted', 'id', 'body') IS NOT NULL AS created;
CREATE TRIGGER rp_parted_reject BEFORE INSERT OR UPDATE ON rp_parted
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
UPDATE rp_parted SET part = 1, body = CASE WHEN id % 2 = 0 THEN body || ' moved' ELSE body END
WHERE id <= 200;
SELECT check_replace('rp_parted') AS rp_parted;
SELECT part, count(*) FROM rp_parted GROUP BY part ORDER BY part;
SELECT try($$INSERT INTO rp_parted VALUES (1000, 0, 'parted row number 20 about ' || md5('20') || ' moved!')$$);

-- Claims live until the end of their query (docs/internals.md, "The duplicate trigger"): two
-- parts of one query that write one band table with one event (on a plain table PostgreSQL
-- fires one sync for both; a partition written beside its partitioned table fires a sync each;
-- a function the query calls runs statements whose syncs fire before the query's), rows ON
-- CONFLICT DO NOTHING skipped in each part, a user trigger that writes the table, cascaded
-- writes of a foreign key, COPY, savepoints and an error caught after the syncs fired. Each is
-- checked inside its transaction (a claim left behind is an orphaned band row there) and after.
CREATE TABLE rq1 (id int PRIMARY KEY, body text) PARTITION BY RANGE (id);
CREATE TABLE rq1_a PARTITION OF rq1 FOR VALUES FROM (1) TO (500);
CREATE TABLE rq1_b PARTITION OF rq1 FOR VALUES FROM (500) TO (10000);
CREATE TABLE rq2 (id int PRIMARY KEY, body text) PARTITION BY RANGE (id);
CREATE TABLE rq2_a PARTITION OF rq2 FOR VALUES FROM (1) TO (500);
CREATE TABLE rq2_b PARTITION OF rq2 FOR VALUES FROM (500) TO (10000);
INSERT INTO rq1 SELECT g, 'claimed row number ' || g || ' about ' || md5(g::text)
FROM generate_series(1, 40) g UNION ALL
SELECT g, 'claimed row number ' || g || ' about ' || md5(g::text) FROM generate_series(600, 640) g;
INSERT INTO rq2 SELECT * FROM rq1;
SELECT minhash_index_create('rq1', 'id', 'body', bands => 32, rows_per_band => 4, format => 1)
           IS NOT NULL,
       minhash_index_create('rq2', 'id', 'body', bands => 32, rows_per_band => 4, format => 2)
           IS NOT NULL;
CREATE TRIGGER rq1_reject BEFORE INSERT OR UPDATE ON rq1
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
CREATE TRIGGER rq2_reject BEFORE INSERT OR UPDATE ON rq2
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
-- (a new text for row n, unlike every other)
CREATE FUNCTION rq_text(n int, what text) RETURNS text LANGUAGE sql AS $$
    SELECT what || ' ' || n || ': ' || md5(what || n)
$$;
-- a function a query calls that inserts row n into tbl, or nothing if there is one
CREATE FUNCTION rq_add(tbl regclass, n int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('INSERT INTO %s VALUES ($1, $2) ON CONFLICT DO NOTHING', tbl)
        USING n, rq_text(n, 'added by a function');
    RETURN true;
END $$;
CREATE FUNCTION rq_checks(VARIADIC tbls regclass[]) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(t::text || ' ' || check_replace(t), ', ' ORDER BY t::text) FROM unnest(tbls) t
$$;

-- two INSERTs and two UPDATEs of one plain table; rows 10, 11, 12 and 13 are there, 10 and 12
-- unchanged
BEGIN;
WITH a AS (INSERT INTO rp1 VALUES (6001, rq_text(6001, 'first part')), (10, 'skipped')
           ON CONFLICT DO NOTHING RETURNING 1)
INSERT INTO rp1 VALUES (6002, rq_text(6002, 'second part')), (11, 'skipped too')
ON CONFLICT DO NOTHING;
WITH a AS (INSERT INTO rp2 VALUES (6001, rq_text(6001, 'first part')), (10, 'skipped')
           ON CONFLICT DO NOTHING RETURNING 1)
INSERT INTO rp2 VALUES (6002, rq_text(6002, 'second part')), (11, 'skipped too')
ON CONFLICT DO NOTHING;
WITH a AS (UPDATE rp1 SET body = rq_text(12, 'first update') WHERE id = 12 RETURNING 1)
UPDATE rp1 SET body = rq_text(13, 'second update') WHERE id = 13;
WITH a AS (UPDATE rp2 SET body = rq_text(12, 'first update') WHERE id = 12 RETURNING 1)
UPDATE rp2 SET body = rq_text(13, 'second update') WHERE id = 13;
SELECT rq_checks('rp1', 'rp2');
COMMIT;
SELECT rq_checks('rp1', 'rp2');
SELECT id, left(body, 20) AS body FROM rp1 WHERE id IN (10, 11, 12, 13) OR id > 6000 ORDER BY id;

-- a partition written beside its partitioned table: INSERTs with skipped rows, UPDATEs, an
-- upsert beside an INSERT
BEGIN;
WITH a AS (INSERT INTO rq1_b VALUES (6001, rq_text(6001, 'partition')), (600, 'skipped')
           ON CONFLICT DO NOTHING RETURNING 1)
INSERT INTO rq1 VALUES (6002, rq_text(6002, 'root')), (1, 'skipped'), (601, 'skipped')
ON CONFLICT DO NOTHING;
WITH a AS (INSERT INTO rq2_b VALUES (6001, rq_text(6001, 'partition')), (600, 'skipped')
           ON CONFLICT DO NOTHING RETURNING 1)
INSERT INTO rq2 VALUES (6002, rq_text(6002, 'root')), (1, 'skipped'), (601, 'skipped')
ON CONFLICT DO NOTHING;
SELECT rq_checks('rq1', 'rq2');
WITH a AS (UPDATE rq1_a SET body = rq_text(2, 'partition update') WHERE id = 2 RETURNING 1)
UPDATE rq1 SET body = rq_text(602, 'root update') WHERE id = 602;
WITH a AS (UPDATE rq2_a SET body = rq_text(2, 'partition update') WHERE id = 2 RETURNING 1)
UPDATE rq2 SET body = rq_text(602, 'root update') WHERE id = 602;
WITH a AS (INSERT INTO rq1_a VALUES (3, rq_text(3, 'upserted')), (50, rq_text(50, 'upsert new'))
           ON CONFLICT (id) DO UPDATE SET body = excluded.body RETURNING 1)
INSERT INTO rq1 VALUES (6003, rq_text(6003, 'beside an upsert')), (4, 'skipped')
ON CONFLICT DO NOTHING;
WITH a AS (INSERT INTO rq2_a VALUES (3, rq_text(3, 'upserted')), (50, rq_text(50, 'upsert new'))
           ON CONFLICT (id) DO UPDATE SET body = excluded.body RETURNING 1)
INSERT INTO rq2 VALUES (6003, rq_text(6003, 'beside an upsert')), (4, 'skipped')
ON CONFLICT DO NOTHING;
SELECT rq_checks('rq1', 'rq2');
COMMIT;
SELECT rq_checks('rq1', 'rq2');
SELECT id, left(body, 20) AS body FROM rq1 WHERE id IN (1, 2, 3, 4, 50, 600, 601, 602) OR id > 6000
ORDER BY id;

-- a function the query calls inserts rows (one of them there already) between the query's
-- rows, which skips one too
BEGIN;
INSERT INTO rq1 SELECT v.id, rq_text(v.id, 'outer')
FROM (VALUES (6010, 6011), (5, 6012), (6013, 6), (6014, 6015)) v(id, other)
WHERE rq_add('rq1', v.other)
ON CONFLICT DO NOTHING;
INSERT INTO rq2 SELECT v.id, rq_text(v.id, 'outer')
FROM (VALUES (6010, 6011), (5, 6012), (6013, 6), (6014, 6015)) v(id, other)
WHERE rq_add('rq2', v.other)
ON CONFLICT DO NOTHING;
SELECT rq_checks('rq1', 'rq2');
COMMIT;
SELECT rq_checks('rq1', 'rq2');
SELECT count(*) FILTER (WHERE body LIKE 'outer%') AS outer_rows,
       count(*) FILTER (WHERE body LIKE 'added by a function%') AS added_rows
FROM rq1 WHERE id > 6000;

-- a user trigger that writes the table for each row of a statement (one of its rows is there)
CREATE FUNCTION rq_copy() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('INSERT INTO %s VALUES ($1, $2) ON CONFLICT DO NOTHING', TG_TABLE_NAME)
        USING NEW.id + 100, rq_text(NEW.id + 100, 'copied by a trigger');
    RETURN NULL;
END $$;
CREATE TRIGGER rq_copy AFTER INSERT ON rp1 FOR EACH ROW WHEN (NEW.id BETWEEN 7000 AND 7099)
    EXECUTE FUNCTION rq_copy();
CREATE TRIGGER rq_copy AFTER INSERT ON rp2 FOR EACH ROW WHEN (NEW.id BETWEEN 7000 AND 7099)
    EXECUTE FUNCTION rq_copy();
INSERT INTO rp1 VALUES (7101, 'there before'), (7102, 'there before, too');
INSERT INTO rp2 VALUES (7101, 'there before'), (7102, 'there before, too');
BEGIN;
INSERT INTO rp1 VALUES (7000, rq_text(7000, 'copied')), (7001, rq_text(7001, 'copied')),
                       (7002, rq_text(7002, 'copied')), (7102, 'skipped')
ON CONFLICT DO NOTHING;
INSERT INTO rp2 VALUES (7000, rq_text(7000, 'copied')), (7001, rq_text(7001, 'copied')),
                       (7002, rq_text(7002, 'copied')), (7102, 'skipped')
ON CONFLICT DO NOTHING;
SELECT rq_checks('rp1', 'rp2');
COMMIT;
SELECT rq_checks('rp1', 'rp2');
SELECT id, left(body, 20) AS body FROM rp1 WHERE id BETWEEN 7000 AND 7199 ORDER BY id;
DROP TRIGGER rq_copy ON rp1;
DROP TRIGGER rq_copy ON rp2;

-- a foreign key's cascaded UPDATE of the texts (its statement leaves its triggers to the query
-- that runs it)
CREATE TABLE rq_names (name text PRIMARY KEY);
CREATE TABLE rq_fk (id int PRIMARY KEY, body text REFERENCES rq_names ON UPDATE CASCADE);
INSERT INTO rq_names SELECT 'named row number ' || g || ' about ' || md5(g::text)
FROM generate_series(1, 30) g;
INSERT INTO rq_fk SELECT g, 'named row number ' || g || ' about ' || md5(g::text)
FROM generate_series(1, 30) g;
SELECT minhash_index_create('rq_fk', 'id', 'body', format => 1) IS NOT NULL AS created;
CREATE TRIGGER rq_fk_reject BEFORE INSERT OR UPDATE ON rq_fk
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
BEGIN;
UPDATE rq_names SET name = 'renamed ' || name WHERE name LIKE '%number 1 %'
    OR name LIKE '%number 2 %';
SELECT rq_checks('rq_fk');
COMMIT;
SELECT rq_checks('rq_fk');
SELECT try($$INSERT INTO rq_fk VALUES (100, (SELECT body FROM rq_fk WHERE id = 2) || '!')$$);

-- COPY (a statement the executor does not run: its sync releases what it leaves)
BEGIN;
COPY rq1 FROM STDIN;
6100	a row copied in, number 6100, about 1b8f6a2dbd8a1d5f6a2a7e6c2f0f5e11
6101	a row copied in, number 6101, about 9c7e0c1b1a7e4d3c9f0a2b6e8d4c3a21
\.
SELECT rq_checks('rq1');
COMMIT;

-- savepoints: a query's claims rolled back, and an error caught after the syncs of a query
-- fired (the statement trigger after them fails when rq.fail is set)
CREATE FUNCTION rq_fail() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('rq.fail', true) = 'on' THEN
        RAISE EXCEPTION 'failing after the syncs';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER zz_fail AFTER INSERT ON rq2 FOR EACH STATEMENT EXECUTE FUNCTION rq_fail();
BEGIN;
SAVEPOINT s;
WITH a AS (INSERT INTO rq1_b VALUES (6200, rq_text(6200, 'rolled back')), (600, 'skipped')
           ON CONFLICT DO NOTHING RETURNING 1)
INSERT INTO rq1 VALUES (6201, rq_text(6201, 'rolled back')) ON CONFLICT DO NOTHING;
ROLLBACK TO SAVEPOINT s;
SET LOCAL rq.fail = 'on';
DO $$
BEGIN
    INSERT INTO rq2 VALUES (6202, rq_text(6202, 'failed')), (600, 'skipped')
    ON CONFLICT DO NOTHING;
EXCEPTION WHEN raise_exception THEN
    RAISE WARNING 'caught: %', SQLERRM;
END $$;
SET LOCAL rq.fail = 'off';
WITH a AS (INSERT INTO rq2_b VALUES (6203, rq_text(6203, 'kept')), (600, 'skipped')
           ON CONFLICT DO NOTHING RETURNING 1)
INSERT INTO rq2 VALUES (6204, rq_text(6204, 'kept')), (601, 'skipped') ON CONFLICT DO NOTHING;
SELECT rq_checks('rq1', 'rq2');
COMMIT;
SELECT rq_checks('rq1', 'rq2');
SELECT id FROM rq1 WHERE id >= 6200 UNION ALL SELECT id FROM rq2 WHERE id >= 6200 ORDER BY 1;
-- the rows written by parts of one query are a constraint for their near-duplicates
SELECT try($$INSERT INTO rq1 VALUES (9000, rq_text(6001, 'partition') || '!')$$);
SELECT try($$INSERT INTO rq2 VALUES (9000, rq_text(6002, 'root') || '!')$$);
SELECT try($$INSERT INTO rp2 VALUES (9000, rq_text(13, 'second update') || '!')$$);

-- the test hook that stops a sync (pg_minhash.test_sync_pause, src/index/write/pause.rs) is off
-- and only a superuser may set it
SHOW pg_minhash.test_sync_pause;
CREATE ROLE regress_minhash_replace;
SET ROLE regress_minhash_replace;
SELECT try($$SET pg_minhash.test_sync_pause = 1$$);
RESET ROLE;
DROP ROLE regress_minhash_replace;

DROP TABLE rp1, rp2, rp_plain, rp_parted, rq1, rq2, rq_fk, rq_names;
DROP FUNCTION rq_checks(regclass[]), rq_add(regclass, int), rq_text(int, text), rq_copy(), rq_fail();
DROP FUNCTION check_replace(regclass);
