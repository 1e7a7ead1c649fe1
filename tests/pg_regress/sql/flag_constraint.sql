-- minhash_flag_duplicate as a constraint: rows of the same statement are compared, the row's
-- band rows are written before the check and stay exact whatever happens to the row
-- (ON CONFLICT, a later BEFORE trigger, a rolled-back savepoint), and a 23505 names the
-- schema, table and constraint (the trigger). Concurrent writers: tests/constraint/run.sh.
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.fields(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE s text; t text; c text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN unique_violation THEN
    GET STACKED DIAGNOSTICS s = SCHEMA_NAME, t = TABLE_NAME, c = CONSTRAINT_NAME;
    RETURN SQLSTATE || ': schema ' || s || ', table ' || t || ', constraint ' || c;
END $$;

CREATE TABLE flagged (id int PRIMARY KEY, body text, duplicate_of int);
CREATE TABLE strict (id int PRIMARY KEY, body text);
SELECT minhash_index_create('flagged', 'id', 'body') IS NOT NULL AS created;
SELECT minhash_index_create('strict', 'id', 'body') IS NOT NULL AS created;
CREATE VIEW health AS
    SELECT t.tbl, c.missing, c.orphaned
    FROM (VALUES ('flagged'::regclass), ('strict')) t(tbl), LATERAL minhash_index_check(t.tbl) c;
CREATE TRIGGER flagged_dup BEFORE INSERT OR UPDATE ON flagged
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
CREATE TRIGGER strict_unique BEFORE INSERT OR UPDATE ON strict
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');

-- Rows of one statement are compared with each other: the later one is flagged, or refused.
INSERT INTO flagged VALUES (1, 'How do I reverse a string in Python?'),
                           (2, 'How do I reverse a string in Python??'),
                           (3, 'What is the capital of France?')
RETURNING *;
SELECT pg_temp.fields($$INSERT INTO strict VALUES (1, 'How do I reverse a string in Python?'),
                                                 (2, 'How do I reverse a string in Python??')$$);
INSERT INTO strict VALUES (1, 'How do I reverse a string in Python?');
-- a unique violation's fields: schema, table, and the trigger as the constraint
SELECT pg_temp.fields($$INSERT INTO strict VALUES (2, 'how do I reverse a string in python')$$);
SELECT * FROM health;

-- A row that ON CONFLICT does not insert leaves no band rows behind once its statement ends;
-- nor does one that ON CONFLICT turns into an update.
BEGIN;
INSERT INTO flagged VALUES (1, 'A text that is never inserted at all') ON CONFLICT (id) DO NOTHING;
SELECT * FROM health;
COMMIT;
INSERT INTO flagged VALUES (3, 'Which is the capital of France?')
ON CONFLICT (id) DO UPDATE SET body = excluded.body || ' (edited)' RETURNING *;
SELECT * FROM health;

-- The duplicate check sees the row as it will be stored, as an exclusion constraint does: a
-- BEFORE trigger that would fire after it (triggers fire in the order of their names) and could
-- change the row makes it refuse to fire (55000), whatever that trigger does.
CREATE FUNCTION pg_temp.skip_or_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.body LIKE 'skip%' THEN
        RETURN NULL;
    END IF;
    IF NEW.body LIKE 'change%' THEN
        NEW.body := 'Completely different words about gardening tomatoes';
    END IF;
    IF NEW.body LIKE 'copy%' THEN
        NEW.body := 'How do I reverse a string in Python?';
    END IF;
    IF NEW.body LIKE 'renumber%' THEN
        NEW.id := NEW.id + 1000;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER zz_after_flag BEFORE INSERT OR UPDATE ON flagged
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_or_change();
\set VERBOSITY default
INSERT INTO flagged VALUES (10, 'skip this row, it never arrives');
\set VERBOSITY terse
-- One that fires before it may skip the row or change it: the check sees what is written, and
-- the band rows follow it.
ALTER TRIGGER zz_after_flag ON flagged RENAME TO aa_before_flag;
INSERT INTO flagged VALUES (10, 'skip this row, it never arrives'),
                           (11, 'change this row before it is written');
SELECT id, body FROM flagged WHERE id >= 10;
SELECT count(*) AS similar_to_written FROM minhash_similar('flagged', 'Completely different words about gardening tomatoes');
CREATE TRIGGER aa_before_strict BEFORE INSERT OR UPDATE ON strict
    FOR EACH ROW EXECUTE FUNCTION pg_temp.skip_or_change();
SELECT try($$INSERT INTO strict VALUES (12, 'copy: a text that becomes a duplicate')$$);
SELECT try($$INSERT INTO strict VALUES (13, 'renumber: How do I reverse a string in Python??')$$);
SELECT id FROM strict WHERE id > 10;
SELECT * FROM health;
DROP TRIGGER aa_before_flag ON flagged;
DROP TRIGGER aa_before_strict ON strict;
-- Another duplicate trigger that writes a column the check does not read may come after it.
CREATE TRIGGER zz_second_flag BEFORE INSERT ON flagged
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
INSERT INTO flagged VALUES (14, 'Which is the capital of France??');
SELECT id, duplicate_of FROM flagged WHERE id = 14;
DROP TRIGGER zz_second_flag ON flagged;
-- The flag column may be neither the id nor the text column.
CREATE TABLE flag_targets (id bigint PRIMARY KEY, body text);
SELECT minhash_index_create('flag_targets', 'id', 'body') IS NOT NULL AS created;
SELECT try($$CREATE TRIGGER flag_into_id BEFORE INSERT ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('id')$$);
-- (refused as it is made; made with event triggers off, as in replica mode, its rows get the
-- same error)
SET session_replication_role = replica;
CREATE TRIGGER flag_into_id BEFORE INSERT ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('id');
RESET session_replication_role;
SELECT try($$INSERT INTO flag_targets VALUES (1, 'some text')$$);
DROP TRIGGER flag_into_id ON flag_targets;
SELECT try($$CREATE TRIGGER flag_into_text BEFORE INSERT ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('body')$$);
SET session_replication_role = replica;
CREATE TRIGGER flag_into_text BEFORE INSERT ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('body');
RESET session_replication_role;
SELECT try($$INSERT INTO flag_targets VALUES (1, 'some text')$$);
-- The arguments are checked at every firing, also by an UPDATE that leaves the text alone
-- (and so compares nothing).
DROP TRIGGER flag_into_text ON flag_targets;
INSERT INTO flag_targets VALUES (2, 'another text');
SELECT try($$CREATE TRIGGER flag_into_text_on_update BEFORE UPDATE ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('body')$$);
SET session_replication_role = replica;
CREATE TRIGGER flag_into_text_on_update BEFORE UPDATE ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('body');
RESET session_replication_role;
SELECT try($$UPDATE flag_targets SET id = id WHERE id = 2$$);
DROP TRIGGER flag_into_text_on_update ON flag_targets;
SELECT try($$CREATE TRIGGER bad_threshold_on_update BEFORE UPDATE ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('', '2', 'reject')$$);
SET session_replication_role = replica;
CREATE TRIGGER bad_threshold_on_update BEFORE UPDATE ON flag_targets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('', '2', 'reject');
RESET session_replication_role;
SELECT try($$UPDATE flag_targets SET id = id WHERE id = 2$$);
DROP TRIGGER bad_threshold_on_update ON flag_targets;

-- A savepoint rolled back takes the row and its band rows; the same row written again after
-- it is indexed once.
BEGIN;
SAVEPOINT a;
INSERT INTO flagged VALUES (20, 'Where can I buy cheap train tickets to Vienna?');
ROLLBACK TO a;
INSERT INTO flagged VALUES (20, 'Where can I buy cheap train tickets to Vienna?');
SAVEPOINT b;
INSERT INTO flagged VALUES (21, 'Where can I buy cheap train tickets to Vienna??') RETURNING *;
RELEASE b;
COMMIT;
SELECT * FROM health;

-- Updates that change the text write new band rows; an id that moves is never its own duplicate.
UPDATE flagged SET body = body || ' Thanks!' WHERE id IN (20, 21) RETURNING *;
UPDATE flagged SET id = 30 WHERE id = 20 RETURNING *;
DELETE FROM flagged WHERE id = 30;
SELECT * FROM health;

-- Without the band table's indexes the check cannot run: 55000, and nothing is written. Of
-- format 2 (the default) it reads the B-tree of every band: one missing is enough.
BEGIN;
DROP INDEX flagged_minhash_bands_key7_idx;
SELECT try($$INSERT INTO flagged VALUES (40, 'Where can I buy cheap train tickets to Graz?')$$);
SELECT count(*) AS rows_40 FROM flagged WHERE id = 40;
ROLLBACK;
SELECT format('DROP INDEX %s', indexrelid::regclass) FROM pg_index
WHERE indrelid = 'flagged_minhash_bands'::regclass \gexec
SELECT try($$INSERT INTO flagged VALUES (40, 'Where can I buy cheap train tickets to Graz?')$$);
SELECT count(*) AS rows_40 FROM flagged WHERE id = 40;
-- Of format 1, its one B-tree (key, id) INCLUDE (sketch1, sketch2).
SELECT minhash_index_rebuild('strict', format => 1) > 0 AS rebuilt;
DROP INDEX strict_minhash_bands_key_id_sketch1_sketch2_idx;
SELECT try($$INSERT INTO strict VALUES (40, 'Where can I buy cheap train tickets to Graz?')$$);
SELECT count(*) AS rows_40 FROM strict WHERE id = 40;

DROP VIEW health;
DROP TABLE flagged, strict, flag_targets;
