-- The index follows the rows as stored, whatever order PostgreSQL fires triggers in: several
-- data-modifying parts of one query (writable CTEs) on one table, and rows changed by nested
-- statements of the user's triggers before the statement's own sync trigger runs. After each
-- statement minhash_index_check is 0|0, and the duplicate trigger sees what is stored.
SET client_min_messages = warning;
CREATE TABLE ordered (id bigint PRIMARY KEY, body text, dup bigint);
INSERT INTO ordered SELECT g, 'ordered row number ' || g || ' about ' || md5(g::text)
FROM generate_series(1, 40) g;
SELECT minhash_index_create('ordered', 'id', 'body') IS NOT NULL AS created;
CREATE TRIGGER zz_reject BEFORE INSERT OR UPDATE ON ordered
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
CREATE FUNCTION check_ordered() RETURNS text LANGUAGE sql AS $$
    SELECT format('%s|%s', missing, orphaned) FROM minhash_index_check('ordered')
$$;

-- Writable CTEs: a row deleted and written again, with its text or another, moved to another
-- id and its id taken again, a row inserted while another is updated.
WITH d AS (DELETE FROM ordered WHERE id = 5 RETURNING *) INSERT INTO ordered SELECT * FROM d;
SELECT check_ordered();
WITH d AS (DELETE FROM ordered WHERE id = 6 RETURNING *)
INSERT INTO ordered SELECT id, body || ' changed', dup FROM d;
SELECT check_ordered();
WITH u AS (UPDATE ordered SET id = 1007 WHERE id = 7 RETURNING *)
INSERT INTO ordered SELECT 7, 'a new text for id seven ' || md5('new'), NULL FROM u;
SELECT check_ordered();
WITH i AS (INSERT INTO ordered VALUES (300, 'a brand new row written in a CTE', NULL) RETURNING *)
UPDATE ordered o SET body = 'an updated text of row eight ' || md5('eight') FROM i WHERE o.id = 8;
SELECT check_ordered();
WITH d AS (DELETE FROM ordered WHERE id = 9 RETURNING *),
     e AS (DELETE FROM ordered WHERE id = 10 RETURNING *)
INSERT INTO ordered SELECT id + 2000, body, dup FROM d UNION ALL SELECT id + 2000, body, dup FROM e;
SELECT check_ordered();
-- the row written again is still a constraint for its near-duplicates
SELECT try($$INSERT INTO ordered VALUES (400, 'ordered row number 5 about ' || md5('5') || '!', NULL)$$);

-- AFTER ROW triggers of the user that delete or rewrite the row just written, and one that
-- writes another row.
CREATE FUNCTION after_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.body LIKE 'ephemeral%' THEN
        DELETE FROM ordered WHERE id = NEW.id;
    ELSIF NEW.body LIKE 'rewrite%' THEN
        UPDATE ordered SET body = 'rewritten by a trigger ' || NEW.id || ' ' || md5(NEW.id::text)
        WHERE id = NEW.id;
    ELSIF NEW.body LIKE 'spawn%' THEN
        INSERT INTO ordered VALUES (NEW.id + 10000, 'a child of ' || NEW.id || ' ' || md5(NEW.body), NULL);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER after_row AFTER INSERT OR UPDATE ON ordered
    FOR EACH ROW EXECUTE FUNCTION after_row();
INSERT INTO ordered VALUES (500, 'ephemeral: a row that goes away', NULL);
SELECT check_ordered(), count(*) AS kept FROM ordered WHERE id = 500;
INSERT INTO ordered VALUES (501, 'rewrite me please', NULL), (502, 'rewrite me too', NULL),
                           (503, 'spawn a row from here', NULL), (504, 'a plain row beside them', NULL);
SELECT check_ordered();
SELECT id FROM minhash_similar('ordered', 'rewritten by a trigger 501 ' || md5('501'));
UPDATE ordered SET body = 'ephemeral again' WHERE id = 504;
SELECT check_ordered(), count(*) AS kept FROM ordered WHERE id = 504;
-- the rewritten text is what the duplicate trigger checks against
SELECT try($$INSERT INTO ordered VALUES (600, 'rewritten by a trigger 502 ' || md5('502'), NULL)$$);
DROP TRIGGER after_row ON ordered;

-- A statement trigger that writes the table before the sync trigger fires (its name sorts
-- first), and a BEFORE ROW trigger that writes other rows while the statement runs.
CREATE FUNCTION after_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ordered WHERE body LIKE 'short-lived%';
    RETURN NULL;
END $$;
CREATE TRIGGER a_after_statement AFTER INSERT ON ordered
    FOR EACH STATEMENT EXECUTE FUNCTION after_statement();
INSERT INTO ordered VALUES (700, 'short-lived row one', NULL), (701, 'a row that stays ' || md5('701'), NULL);
SELECT check_ordered(), array_agg(id ORDER BY id) AS kept FROM ordered WHERE id IN (700, 701);
DROP TRIGGER a_after_statement ON ordered;
CREATE FUNCTION before_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id = 800 THEN
        UPDATE ordered SET body = 'changed while 800 was written ' || md5('800') WHERE id = 11;
        DELETE FROM ordered WHERE id = 12;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER a_before_row BEFORE INSERT ON ordered
    FOR EACH ROW EXECUTE FUNCTION before_row();
INSERT INTO ordered VALUES (800, 'the row whose trigger writes others', NULL);
SELECT check_ordered();
DROP TRIGGER a_before_row ON ordered;

-- All of it in a transaction with savepoints, one rolled back.
BEGIN;
WITH d AS (DELETE FROM ordered WHERE id = 13 RETURNING *) INSERT INTO ordered SELECT * FROM d;
SAVEPOINT s;
WITH d AS (DELETE FROM ordered WHERE id = 14 RETURNING *)
INSERT INTO ordered SELECT id, body || ' in a savepoint', dup FROM d;
ROLLBACK TO SAVEPOINT s;
WITH d AS (DELETE FROM ordered WHERE id = 15 RETURNING *)
INSERT INTO ordered SELECT id, body || ' after the savepoint', dup FROM d;
COMMIT;
SELECT check_ordered();

-- A row with a text needs an id, on the reconciling path as on the usual one (23502).
CREATE TABLE nullable (id bigint UNIQUE, body text);
INSERT INTO nullable VALUES (1, 'the only row of the nullable table');
SELECT minhash_index_create('nullable', 'id', 'body') IS NOT NULL AS created;
SELECT try($$INSERT INTO nullable VALUES (NULL, 'a row without an id')$$);
SELECT try($$WITH d AS (DELETE FROM nullable WHERE id = 1 RETURNING *) INSERT INTO nullable SELECT NULL, body FROM d$$);
SELECT count(*) AS rows, check_ordered() AS ordered, (SELECT format('%s|%s', missing, orphaned) FROM minhash_index_check('nullable')) AS nullable FROM nullable;
DROP TABLE nullable;

DROP TABLE ordered;
DROP FUNCTION check_ordered(), after_row(), after_statement(), before_row();
