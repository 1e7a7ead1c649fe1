-- Inserts write band rows through one prepared INSERT per batch of 10,000 (_minhash_sync):
-- exactly the rows _minhash_band_values gives, as the table's owner; a band table that is no
-- longer the plain table it was is refused.
SET client_min_messages = warning;
CREATE TABLE bulk (id int UNIQUE, body text);
SELECT minhash_index_create('bulk', 'id', 'body') IS NOT NULL AS created;
SELECT bands, rows_per_band, format FROM minhash_indexes WHERE tbl = 'bulk'::regclass;
-- Band table rows that differ from what _minhash_band_values gives for the table's rows, either
-- way: of format 2 (the default), one per row, (id, sketch1, sketch2, key1, ..., key16).
CREATE FUNCTION pg_temp.band_diff() RETURNS TABLE (missing bigint, extra bigint) LANGUAGE sql AS $$
    WITH want AS (
        SELECT s.id, s.v[17] AS sketch1, s.v[18] AS sketch2, s.v[1:16] AS keys
        FROM (SELECT id, minhash_internal._minhash_band_values(body, '(128,5,char,16,6)') AS v FROM bulk) s
        WHERE s.v IS NOT NULL),
    got AS (SELECT id, sketch1, sketch2,
                   ARRAY[key1, key2, key3, key4, key5, key6, key7, key8,
                         key9, key10, key11, key12, key13, key14, key15, key16] AS keys
            FROM bulk_minhash_bands)
    SELECT (SELECT count(*) FROM (TABLE want EXCEPT ALL TABLE got) m),
           (SELECT count(*) FROM (TABLE got EXCEPT ALL TABLE want) e)
$$;

-- One statement of 12,000 rows: 11,952 band rows, written 10,000 at a time; NULL and blank
-- texts get none. One statement deletes them again, their band rows 10,000 at a time.
INSERT INTO bulk SELECT 100000 + g, CASE WHEN g % 500 = 0 THEN NULL WHEN g % 499 = 0 THEN ' '
                                         ELSE 'generated row number ' || g || ' of the bulk insert' END
FROM generate_series(1, 12000) g;
SELECT count(*) AS band_rows, count(DISTINCT id) AS ids FROM bulk_minhash_bands;
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');
DELETE FROM bulk WHERE id > 100000;
SELECT count(*) AS band_rows FROM bulk_minhash_bands;
-- and 2,500 rows, which stay
INSERT INTO bulk SELECT g, CASE WHEN g % 500 = 0 THEN NULL WHEN g % 499 = 0 THEN ' '
                               ELSE 'generated row number ' || g || ' of the bulk insert' END
FROM generate_series(1, 2500) g;
SELECT count(*) AS band_rows, count(DISTINCT id) AS ids FROM bulk_minhash_bands;
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

-- Of format 1, a band row per row and band, (id, key, sketch1, sketch2): one statement of
-- 2,500 rows, 39,840 band rows, written 10,000 at a time.
CREATE TABLE bulk1 (id int UNIQUE, body text);
SELECT minhash_index_create('bulk1', 'id', 'body', format => 1) IS NOT NULL AS created;
CREATE FUNCTION pg_temp.band_diff1() RETURNS TABLE (missing bigint, extra bigint) LANGUAGE sql AS $$
    WITH want AS (
        SELECT s.id, unnest(s.v[1:16]) AS key, s.v[17] AS sketch1, s.v[18] AS sketch2
        FROM (SELECT id, minhash_internal._minhash_band_values(body, '(128,5,char,16,6)') AS v FROM bulk1) s
        WHERE s.v IS NOT NULL),
    got AS (SELECT id, key, sketch1, sketch2 FROM bulk1_minhash_bands)
    SELECT (SELECT count(*) FROM (TABLE want EXCEPT ALL TABLE got) m),
           (SELECT count(*) FROM (TABLE got EXCEPT ALL TABLE want) e)
$$;
INSERT INTO bulk1 SELECT g, CASE WHEN g % 500 = 0 THEN NULL WHEN g % 499 = 0 THEN ' '
                                ELSE 'generated row number ' || g || ' of the bulk insert' END
FROM generate_series(1, 2500) g;
SELECT count(*) AS band_rows, count(DISTINCT id) AS ids FROM bulk1_minhash_bands;
SELECT * FROM pg_temp.band_diff1(), minhash_index_check('bulk1');
SELECT minhash_index_drop('bulk1');
DROP TABLE bulk1;

-- A NULL id (the unique column allows it) with a text: the band table's id is NOT NULL, so the
-- insert fails as an INSERT into it would; without a text it has no band rows.
SELECT try($$INSERT INTO bulk VALUES (NULL, 'a text without an id')$$);
INSERT INTO bulk VALUES (NULL, NULL);

-- A trigger function to hang on the band table.
CREATE TABLE band_log (rows_added bigint);
CREATE FUNCTION log_band_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.band_log SELECT count(*) FROM added;
    RETURN NULL;
END $$;
-- The band table must stay the plain table minhash_index_create made: the sync trigger writes
-- it as the table's owner and refuses (55000, nothing written) a band table with triggers,
-- rules, CHECK constraints, row-level security, other columns or deferrable constraints.
CREATE TRIGGER logged AFTER INSERT ON bulk_minhash_bands REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION log_band_rows();
SELECT try($$INSERT INTO bulk VALUES (3001, 'a row that the band trigger would see')$$);
SELECT * FROM band_log;
DROP TRIGGER logged ON bulk_minhash_bands;
INSERT INTO bulk VALUES (3003, 'written again without the band trigger');
SELECT * FROM band_log;

ALTER TABLE bulk_minhash_bands ADD CONSTRAINT small_ids CHECK (id < 5000);
SELECT try($$INSERT INTO bulk VALUES (4000, 'a band table with a CHECK constraint')$$);
ALTER TABLE bulk_minhash_bands DROP CONSTRAINT small_ids;
CREATE RULE no_delete AS ON DELETE TO bulk_minhash_bands DO INSTEAD NOTHING;
SELECT try($$DELETE FROM bulk WHERE id = 3003$$);
DROP RULE no_delete ON bulk_minhash_bands;
ALTER TABLE bulk_minhash_bands ENABLE ROW LEVEL SECURITY;
SELECT try($$UPDATE bulk SET body = 'changed under RLS' WHERE id = 3003$$);
ALTER TABLE bulk_minhash_bands DISABLE ROW LEVEL SECURITY;
ALTER TABLE bulk_minhash_bands ADD COLUMN added_at date NOT NULL DEFAULT '2026-01-01';
SELECT try($$INSERT INTO bulk VALUES (4001, 'a band table with one more column')$$);
ALTER TABLE bulk_minhash_bands DROP COLUMN added_at;
-- (a dropped column stays in the descriptor: rows are written around it)
INSERT INTO bulk VALUES (4002, 'a row after the column was dropped again');
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

-- A unique (partial) index on the band table holds: two equal texts share their keys.
CREATE UNIQUE INDEX one_row_per_key ON bulk_minhash_bands (key1) WHERE id > 4002;
SELECT try($$INSERT INTO bulk VALUES (4003, 'twice in one band table'), (4004, 'twice in one band table')$$);
INSERT INTO bulk VALUES (4003, 'once in one band table');
DROP INDEX one_row_per_key;
-- So does an exclusion constraint, which the executor checks as it inserts.
ALTER TABLE bulk_minhash_bands ADD CONSTRAINT one_key EXCLUDE USING btree (key1 WITH =) WHERE (id > 4003);
SELECT try($$INSERT INTO bulk VALUES (4004, 'twice under an exclusion constraint'), (4005, 'twice under an exclusion constraint')$$);
INSERT INTO bulk VALUES (4004, 'once under an exclusion constraint');
ALTER TABLE bulk_minhash_bands DROP CONSTRAINT one_key;
-- A deferrable unique constraint (a trigger on the band table) is refused.
ALTER TABLE bulk_minhash_bands ADD CONSTRAINT one_row_per_band UNIQUE (key1, id) DEFERRABLE INITIALLY DEFERRED;
SELECT try($$INSERT INTO bulk VALUES (4005, 'a row under a deferred constraint')$$);
ALTER TABLE bulk_minhash_bands DROP CONSTRAINT one_row_per_band;
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

-- Rolled back, nothing stays.
BEGIN;
INSERT INTO bulk SELECT g, 'rolled back row ' || g FROM generate_series(5001, 5100) g;
ROLLBACK;
SELECT count(*) AS rolled_back_band_rows FROM bulk_minhash_bands WHERE id > 5000;
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

-- The trigger function refuses any other use (39P01): the wrong timing or level, a trigger
-- that is not one of ours, or a table without an index, where only an INSERT does nothing (a
-- data-only restore loads tables before the catalog row of their index).
CREATE TABLE plain_table (id int PRIMARY KEY, body text);
CREATE TRIGGER misused BEFORE INSERT ON plain_table FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_sync();
SELECT try($$INSERT INTO plain_table VALUES (1, 'x')$$);
DROP TRIGGER misused ON plain_table;
CREATE TRIGGER misused AFTER INSERT ON plain_table REFERENCING NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_sync();
SELECT try($$INSERT INTO plain_table VALUES (1, 'x')$$);
DROP TRIGGER misused ON plain_table;
CREATE TRIGGER minhash_sync_insert AFTER INSERT ON plain_table REFERENCING NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_sync();
SELECT try($$INSERT INTO plain_table VALUES (1, 'x')$$);
CREATE TRIGGER second_sync AFTER INSERT ON bulk REFERENCING NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_sync();
SELECT try($$INSERT INTO bulk VALUES (6001, 'a second sync trigger would double the band rows')$$);
DROP TRIGGER second_sync ON bulk;
CREATE TRIGGER minhash_sync_delete AFTER INSERT ON plain_table REFERENCING NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_sync();
SELECT try($$INSERT INTO plain_table VALUES (2, 'x')$$);
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

DROP TABLE plain_table, band_log;
DROP FUNCTION log_band_rows();
SELECT minhash_index_drop('bulk');
DROP TABLE bulk;
