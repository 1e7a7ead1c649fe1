-- DROP EXTENSION and the objects an index made at run time: the sync triggers and the band table
-- depend on the extension, so a plain DROP EXTENSION refuses while an index exists, and CASCADE
-- takes them along, leaving nothing of the extension behind and the indexed table writable (no
-- trigger left that calls a function that is gone).
CREATE TABLE dropme (id int PRIMARY KEY, body text, dup int);
INSERT INTO dropme VALUES (1, 'the quick brown fox jumps', NULL), (2, 'the quick brown fox jumped', NULL);
SET client_min_messages = warning;
SELECT minhash_index_create('dropme', 'id', 'body', threshold => 0.5);
RESET client_min_messages;
CREATE TRIGGER flag BEFORE INSERT ON dropme
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'dropme'::regclass AND NOT tgisinternal ORDER BY 1;

DO $$
BEGIN
    DROP EXTENSION pg_minhash;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE '% %', SQLSTATE, SQLERRM;
END $$;

BEGIN;
SET LOCAL client_min_messages = warning;
DROP EXTENSION pg_minhash CASCADE;
-- every trigger on the table went with the extension, and every kind of write works
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgrelid = 'dropme'::regclass AND NOT tgisinternal;
INSERT INTO dropme VALUES (3, 'a lazy dog', NULL);
UPDATE dropme SET body = 'changed' WHERE id = 1;
DELETE FROM dropme WHERE id = 2;
COPY dropme FROM stdin;
4	copied row	\N
\.
TRUNCATE dropme;
-- nothing of the extension is left: no band table, no function, no event trigger
SELECT to_regclass('dropme_minhash_bands') IS NOT NULL AS band_table_left,
       (SELECT count(*) FROM pg_proc WHERE proname LIKE '%minhash%') AS functions_left,
       (SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'minhash%') AS event_triggers_left,
       (SELECT count(*) FROM pg_class WHERE relname LIKE '%minhash%') AS relations_left;
ROLLBACK;

-- the rollback brought the extension and the index back, exact
SELECT * FROM minhash_index_check('dropme');
INSERT INTO dropme VALUES (3, 'the quick brown fox jumps!', NULL);
SELECT id, dup FROM dropme ORDER BY id;
SELECT minhash_index_drop('dropme', cascade => true);
DROP TABLE dropme;
