-- DROP EXTENSION and the objects an index made at run time: the sync triggers depend on the
-- extension, so a plain DROP EXTENSION refuses while an index exists, and CASCADE leaves the
-- indexed table writable (no trigger left that calls a function that is gone).
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
-- left behind as plain objects: the band table and the sync function (README, Dropping)
SELECT to_regclass('dropme_minhash_bands') IS NOT NULL AS band_table_left,
       to_regprocedure('dropme_minhash_sync()') IS NOT NULL AS sync_function_left;
ROLLBACK;

-- the rollback brought the extension and the index back, exact
SELECT * FROM minhash_index_check('dropme');
INSERT INTO dropme VALUES (3, 'the quick brown fox jumps!', NULL);
SELECT id, dup FROM dropme ORDER BY id;
SELECT minhash_index_drop('dropme');
DROP TABLE dropme;
