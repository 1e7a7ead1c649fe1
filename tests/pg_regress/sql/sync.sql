-- The band table stays exact under every write, in the same transaction.
SET client_min_messages = warning;
CREATE TABLE notes (id bigint PRIMARY KEY, body text, tag text);
INSERT INTO notes VALUES (1, 'first note about databases'), (2, 'second note about rust');
SELECT minhash_index_create('notes', 'id', 'body');
CREATE VIEW health AS SELECT * FROM minhash_index_check('notes');
CREATE VIEW indexed AS SELECT array_agg(DISTINCT id ORDER BY id) AS ids FROM notes_minhash_bands;

-- INSERT, single and multi-row; NULL and empty texts are not indexed
INSERT INTO notes VALUES (3, 'third note about postgres');
INSERT INTO notes VALUES (4, 'fourth'), (5, NULL), (6, '   '), (7, 'seventh note');
SELECT * FROM health, indexed;

-- UPDATE of the text, of the id, of two rows' texts at once (a swap), to and from NULL
UPDATE notes SET body = 'third note, rewritten' WHERE id = 3;
UPDATE notes SET id = 30 WHERE id = 3;
UPDATE notes n SET body = o.body FROM notes o WHERE n.id IN (1, 2) AND o.id = 3 - n.id;
UPDATE notes SET body = 'fifth note appears' WHERE id = 5;
UPDATE notes SET body = NULL WHERE id = 4;
SELECT * FROM health, indexed;

-- An UPDATE of another column leaves the band rows untouched.
CREATE TEMP TABLE before AS SELECT ctid AS tid, b.* FROM notes_minhash_bands b;
UPDATE notes SET tag = 'x';
SELECT count(*) AS rewritten_band_rows FROM (
  SELECT ctid, b.* FROM notes_minhash_bands b EXCEPT SELECT * FROM before) r;

-- DELETE
DELETE FROM notes WHERE id IN (7, 30);
SELECT * FROM health, indexed;

-- COPY
COPY notes (id, body) FROM stdin;
100	copied note one
101	copied note two
102	\N
\.
SELECT * FROM health, indexed;

-- A rolled-back transaction, and a rolled-back savepoint, leave no trace.
BEGIN;
INSERT INTO notes VALUES (200, 'never committed');
DELETE FROM notes WHERE id = 100;
ROLLBACK;
BEGIN;
SAVEPOINT s;
UPDATE notes SET body = 'also never committed' WHERE id = 101;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT * FROM health, indexed;
SELECT * FROM minhash_similar('notes', 'copied note two');

-- TRUNCATE empties the band table too.
TRUNCATE notes;
SELECT * FROM health, (SELECT count(*) AS band_rows FROM notes_minhash_bands) c;
INSERT INTO notes VALUES (1, 'back again');
SELECT * FROM health, indexed;

-- minhash_index_check notices damage, counted in band rows (a row's band key and sketch in one
-- band); minhash_index_rebuild repairs it. Row 2, written while the sync trigger was off, has
-- its 16 band rows missing; a forged row of the band table (format 2, the default: one row per
-- row, its 16 band keys side by side) is 16 orphaned ones.
ALTER TABLE notes DISABLE TRIGGER minhash_sync_insert;
INSERT INTO notes VALUES (2, 'written while the trigger was off');
ALTER TABLE notes ENABLE TRIGGER minhash_sync_insert;
-- (its load trigger drops rows written into the band table of an indexed table by SQL)
ALTER TABLE notes_minhash_bands DISABLE TRIGGER minhash_bands_load;
SELECT format('INSERT INTO notes_minhash_bands VALUES (99, 0, 0, %s)', string_agg((12345 + i)::text, ', ' ORDER BY i))
FROM generate_series(1, 16) i \gexec
ALTER TABLE notes_minhash_bands ENABLE TRIGGER minhash_bands_load;
SELECT * FROM health;
-- a wrong key is damage too: one band row of row 1 missing, one orphaned
UPDATE notes_minhash_bands SET key5 = key5 + 1 WHERE id = 1;
SELECT * FROM health;
-- and a wrong sketch: row 1's sketch is that of all its 16 band rows, all missing now, and 16
-- wrong ones orphaned
UPDATE notes_minhash_bands SET sketch2 = sketch2 # 1 WHERE id = 1;
SELECT * FROM health;
SELECT minhash_index_rebuild('notes') AS rows_read;
SELECT * FROM health, indexed;
-- Of format 1 (a band row per row and band): a forged band row is one orphaned; a wrong
-- sketch in one band row, one missing and one orphaned.
SELECT minhash_index_rebuild('notes', format => 1) AS rows_read;
ALTER TABLE notes DISABLE TRIGGER minhash_sync_insert;
INSERT INTO notes VALUES (3, 'also written while the trigger was off');
ALTER TABLE notes ENABLE TRIGGER minhash_sync_insert;
ALTER TABLE notes_minhash_bands DISABLE TRIGGER minhash_bands_load;
INSERT INTO notes_minhash_bands VALUES (99, 12345, 0, 0);
ALTER TABLE notes_minhash_bands ENABLE TRIGGER minhash_bands_load;
SELECT * FROM health;
UPDATE notes_minhash_bands SET sketch2 = sketch2 # 1
WHERE ctid = (SELECT min(ctid) FROM notes_minhash_bands WHERE id = 1);
SELECT * FROM health;
SELECT minhash_index_rebuild('notes') AS rows_read;
SELECT * FROM health, indexed;

DROP VIEW health, indexed;
SELECT minhash_index_drop('notes');
DROP TABLE notes;
