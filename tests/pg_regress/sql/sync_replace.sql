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

-- the test hook that stops a sync (pg_minhash.test_sync_pause, src/index/pause.rs) is off
-- and only a superuser may set it
SHOW pg_minhash.test_sync_pause;
CREATE ROLE regress_minhash_replace;
SET ROLE regress_minhash_replace;
SELECT try($$SET pg_minhash.test_sync_pause = 1$$);
RESET ROLE;
DROP ROLE regress_minhash_replace;

DROP TABLE rp1, rp2, rp_plain, rp_parted;
DROP FUNCTION check_replace(regclass);
