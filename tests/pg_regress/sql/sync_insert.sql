-- Inserts write band rows directly (_minhash_sync_insert): the same rows the sync function's SQL
-- would write, and the SQL itself wherever a direct write would skip something the band table's
-- owner added to it.
SET client_min_messages = warning;
CREATE TABLE bulk (id int UNIQUE, body text);
SELECT minhash_index_create('bulk', 'id', 'body') IS NOT NULL AS created;
SELECT bands, rows_per_band FROM minhash_indexes WHERE tbl = 'bulk'::regclass;
-- Band rows that differ from what _minhash_band_values gives for the table's rows, either way.
CREATE FUNCTION pg_temp.band_diff() RETURNS TABLE (missing bigint, extra bigint) LANGUAGE sql AS $$
    WITH want AS (
        SELECT s.id, unnest(s.v[1:16]) AS key, s.v[17] AS sketch1, s.v[18] AS sketch2
        FROM (SELECT id, _minhash_band_values(body, 128, 5, 'char', 16, 6) AS v FROM bulk) s
        WHERE s.v IS NOT NULL),
    got AS (SELECT id, key, sketch1, sketch2 FROM bulk_minhash_bands)
    SELECT (SELECT count(*) FROM (TABLE want EXCEPT ALL TABLE got) m),
           (SELECT count(*) FROM (TABLE got EXCEPT ALL TABLE want) e)
$$;


-- One statement of 2,500 rows: 40,000 band rows, written 1,000 at a time; NULL and blank texts
-- get none.
INSERT INTO bulk SELECT g, CASE WHEN g % 500 = 0 THEN NULL WHEN g % 499 = 0 THEN ' '
                               ELSE 'generated row number ' || g || ' of the bulk insert' END
FROM generate_series(1, 2500) g;
SELECT count(*) AS band_rows, count(DISTINCT id) AS ids FROM bulk_minhash_bands;
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

-- A NULL id (the unique column allows it) with a text: the band table's id is NOT NULL, so the
-- insert fails as the sync function's INSERT would; without a text it has no band rows.
SELECT try($$INSERT INTO bulk VALUES (NULL, 'a text without an id')$$);
INSERT INTO bulk VALUES (NULL, NULL);

-- A trigger on the band table: inserts now go through the sync function's SQL, which fires it
-- (with the sync function's search_path, pg_catalog and pg_temp).
CREATE TABLE band_log (rows_added bigint);
CREATE FUNCTION log_band_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.band_log SELECT count(*) FROM added;
    RETURN NULL;
END $$;
CREATE TRIGGER logged AFTER INSERT ON bulk_minhash_bands REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION log_band_rows();
INSERT INTO bulk VALUES (3001, 'a row that the band trigger sees'), (3002, 'and another one');
SELECT * FROM band_log;
DROP TRIGGER logged ON bulk_minhash_bands;
INSERT INTO bulk VALUES (3003, 'back to direct writes, which the trigger did not see');
SELECT * FROM band_log;

-- A CHECK constraint on the band table holds.
ALTER TABLE bulk_minhash_bands ADD CONSTRAINT small_ids CHECK (id < 5000);
SELECT try($$INSERT INTO bulk VALUES (6000, 'an id the constraint refuses')$$);
INSERT INTO bulk VALUES (4000, 'an id the constraint allows');
ALTER TABLE bulk_minhash_bands DROP CONSTRAINT small_ids;

-- An added column gets its default.
ALTER TABLE bulk_minhash_bands ADD COLUMN added_at date NOT NULL DEFAULT '2026-01-01';
INSERT INTO bulk VALUES (4001, 'a row in a band table with one more column');
SELECT count(*) AS band_rows, min(added_at) AS added_at FROM bulk_minhash_bands WHERE id = 4001;
ALTER TABLE bulk_minhash_bands DROP COLUMN added_at;
-- (a dropped column stays in the descriptor: still the SQL path, still exact)
INSERT INTO bulk VALUES (4002, 'a row after the column was dropped again');
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

-- A unique (partial) index on the band table holds too: two equal texts share their keys.
CREATE UNIQUE INDEX one_row_per_key ON bulk_minhash_bands (key) WHERE id > 4002;
SELECT try($$INSERT INTO bulk VALUES (4003, 'twice in one band table'), (4004, 'twice in one band table')$$);
INSERT INTO bulk VALUES (4003, 'once in one band table');
DROP INDEX one_row_per_key;
-- A deferrable unique constraint is checked at commit, through the SQL path.
ALTER TABLE bulk_minhash_bands ADD CONSTRAINT one_row_per_band UNIQUE (key, id) DEFERRABLE INITIALLY DEFERRED;
INSERT INTO bulk VALUES (4005, 'a row under a deferred constraint');
SELECT try($$INSERT INTO bulk_minhash_bands SELECT id, key, sketch1, sketch2 FROM bulk_minhash_bands WHERE id = 4005 LIMIT 1; SET CONSTRAINTS ALL IMMEDIATE$$);
ALTER TABLE bulk_minhash_bands DROP CONSTRAINT one_row_per_band;

-- Rolled back, nothing stays.
BEGIN;
INSERT INTO bulk SELECT g, 'rolled back row ' || g FROM generate_series(5001, 5100) g;
ROLLBACK;
SELECT count(*) AS rolled_back_band_rows FROM bulk_minhash_bands WHERE id > 5000;
SELECT * FROM pg_temp.band_diff(), minhash_index_check('bulk');

-- The trigger function refuses any other use.
CREATE TABLE plain_table (id int PRIMARY KEY, body text);
CREATE TRIGGER misused BEFORE INSERT ON plain_table FOR EACH ROW EXECUTE FUNCTION _minhash_sync_insert();
SELECT try($$INSERT INTO plain_table VALUES (1, 'x')$$);
DROP TRIGGER misused ON plain_table;
CREATE TRIGGER misused AFTER INSERT ON plain_table REFERENCING NEW TABLE AS n
    FOR EACH STATEMENT EXECUTE FUNCTION _minhash_sync_insert();
SELECT try($$INSERT INTO plain_table VALUES (1, 'x')$$);

DROP TABLE plain_table, band_log;
DROP FUNCTION log_band_rows();
SELECT minhash_index_drop('bulk');
DROP TABLE bulk;
