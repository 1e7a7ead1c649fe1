-- Which path writes band rows: the sync trigger (_minhash_sync) and the flag trigger's claims
-- insert them with a prepared INSERT through SPI, so every band row goes through the executor,
-- which fires the band table's BEFORE INSERT trigger (minhash_bands_load, which keeps it) once
-- per row. Observed in the transaction's statistics (track_functions = all): the band rows
-- inserted (n_tup_ins, counted by the heap however a row gets there) against the calls of the
-- load trigger's function. A write around the executor would add to the first only, as the
-- backfill of minhash_index_rebuild does, which runs with the load trigger disabled.
SET client_min_messages = warning;
SET track_functions = 'all';
CREATE TABLE written (id int PRIMARY KEY, body text, duplicate_of int);
SELECT minhash_index_create('written', 'id', 'body') IS NOT NULL AS created;
CREATE FUNCTION pg_temp.band_writes() RETURNS TABLE (band_rows bigint, inserted bigint, through_executor bigint)
LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM written_minhash_bands),
           (SELECT n_tup_ins FROM pg_stat_xact_user_tables
            WHERE relid = 'written_minhash_bands'::regclass),
           coalesce((SELECT calls FROM pg_stat_xact_user_functions
                     WHERE funcid = 'minhash_internal._minhash_band_load'::regproc), 0)
$$;

BEGIN;
-- one statement of 100 rows: one band row each (format 2, the default: a row per row)
INSERT INTO written SELECT g, 'row number ' || g || ' of the write path test'
FROM generate_series(1, 100) g;
SELECT * FROM pg_temp.band_writes();
COPY written (id, body) FROM stdin;
101	a row that COPY brings
102	another row that COPY brings
\.
SELECT * FROM pg_temp.band_writes();
-- an UPDATE of a text: its old band rows deleted, its new ones inserted
UPDATE written SET body = 'row number 7 of the write path test, changed' WHERE id = 7;
SELECT * FROM pg_temp.band_writes();
-- a flagged insert writes its band rows first (a claim), which the sync trigger then keeps;
-- so does an UPDATE (its old band rows are deleted after); a row that ON CONFLICT skips leaves
-- its claim, which the statement's sync takes back
CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON written
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
INSERT INTO written (id, body) VALUES (103, 'row number 5 of the write path test!');
SELECT id, duplicate_of FROM written WHERE id = 103;
SELECT * FROM pg_temp.band_writes();
UPDATE written SET body = 'row number 9 of the write path test!' WHERE id = 103;
SELECT * FROM pg_temp.band_writes();
INSERT INTO written (id, body) VALUES (103, 'a row that is never inserted') ON CONFLICT DO NOTHING;
SELECT * FROM pg_temp.band_writes();
DROP TRIGGER flag ON written;
-- the backfill writes around the load trigger: inserted grows, through_executor does not
SELECT minhash_index_rebuild('written');
SELECT * FROM pg_temp.band_writes();
COMMIT;
SELECT * FROM minhash_index_check('written');
-- Of format 1 (a row per row and band): 16 band rows per row, each through the executor.
-- (Counted from the start of the transaction: the earlier transactions' counts may not have
-- been flushed to the statistics yet, which the xact views would add.)
SELECT minhash_index_rebuild('written', format => 1);
BEGIN;
CREATE TEMP TABLE earlier_writes AS SELECT * FROM pg_temp.band_writes();
CREATE FUNCTION pg_temp.new_band_writes() RETURNS TABLE (band_rows bigint, inserted bigint, through_executor bigint)
LANGUAGE sql AS $$
    SELECT w.band_rows, w.inserted - e.inserted, w.through_executor - e.through_executor
    FROM pg_temp.band_writes() w, earlier_writes e
$$;
INSERT INTO written SELECT g, 'row number ' || g || ' of the write path test'
FROM generate_series(201, 210) g;
SELECT * FROM pg_temp.new_band_writes();
UPDATE written SET body = 'row number 207 of the write path test, changed' WHERE id = 207;
SELECT * FROM pg_temp.new_band_writes();
CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON written
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
INSERT INTO written (id, body) VALUES (211, 'row number 205 of the write path test!');
SELECT id, duplicate_of FROM written WHERE id = 211;
SELECT * FROM pg_temp.new_band_writes();
INSERT INTO written (id, body) VALUES (211, 'a row that is never inserted') ON CONFLICT DO NOTHING;
SELECT * FROM pg_temp.new_band_writes();
DROP TRIGGER flag ON written;
COMMIT;
SELECT * FROM minhash_index_check('written');
SELECT minhash_index_drop('written');
DROP TABLE written;
