-- The index follows every shape of query: several data-modifying parts of one query on one
-- table (writable CTEs of any mix of INSERT, UPDATE, DELETE and upserts, chained, with and
-- without a LIMIT that leaves a part unfinished until the query ends), MERGE, functions in the
-- query and triggers of the user that write the table, on band-table format 1 and 2, on plain
-- and partitioned tables. The sync triggers of one query fire at its end, in an order that
-- depends on the plan: they must be recognised as one whatever order and number they fire in.
-- After each shape, minhash_index_check is 0|0 and the band table holds exactly the band rows
-- of the rows, computed here apart from the extension's check (lsh_bands of minhash), in the
-- form "missing|orphaned differences".
SET client_min_messages = warning;
CREATE TABLE s1 (id bigint PRIMARY KEY, body text);
CREATE TABLE s2 (id bigint PRIMARY KEY, body text);
CREATE TABLE p1 (id bigint PRIMARY KEY, body text) PARTITION BY RANGE (id);
CREATE TABLE p1_low PARTITION OF p1 FOR VALUES FROM (MINVALUE) TO (5000);
CREATE TABLE p1_high PARTITION OF p1 FOR VALUES FROM (5000) TO (MAXVALUE);
CREATE TABLE p2 (id bigint PRIMARY KEY, body text) PARTITION BY RANGE (id);
CREATE TABLE p2_low PARTITION OF p2 FOR VALUES FROM (MINVALUE) TO (5000);
CREATE TABLE p2_high PARTITION OF p2 FOR VALUES FROM (5000) TO (MAXVALUE);
SELECT minhash_index_create('s1', 'id', 'body', format => 1) IS NOT NULL AS s1,
       minhash_index_create('s2', 'id', 'body', format => 2) IS NOT NULL AS s2,
       minhash_index_create('p1', 'id', 'body', format => 1) IS NOT NULL AS p1,
       minhash_index_create('p2', 'id', 'body', format => 2) IS NOT NULL AS p2;
SELECT tbl, format FROM minhash_indexes WHERE tbl::text IN ('s1', 's2', 'p1', 'p2') ORDER BY tbl::text;

-- The table's rows 1 to 40 and nothing else.
CREATE PROCEDURE shape_reset(tbl regclass) LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('TRUNCATE %s', tbl);
    EXECUTE format($q$INSERT INTO %s SELECT g, 'shape row ' || g || ': ' || md5(g::text)
                      FROM generate_series(1, 40) g$q$, tbl);
END $$;
-- "missing|orphaned differences": minhash_index_check, and the count of (id, key) pairs in
-- which the band table and lsh_bands(minhash(...)) of the rows differ (either way).
CREATE FUNCTION shape_check(tbl regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    cfg minhash_indexes;
    differences bigint;
BEGIN
    SELECT * INTO STRICT cfg FROM minhash_indexes i WHERE i.tbl = shape_check.tbl;
    EXECUTE format($q$
        WITH stored AS (SELECT b.id, e.value::bigint AS key FROM %1$s b, jsonb_each_text(to_jsonb(b)) e
                        WHERE e.key ~ '^key[0-9]*$'),
             rebuilt AS (SELECT t.id, unnest(lsh_bands(minhash(t.body, %3$s, %4$s, %5$L), %6$s, %7$s)) AS key
                         FROM %2$s t WHERE t.body IS NOT NULL)
        SELECT count(*) FROM ((TABLE stored EXCEPT ALL TABLE rebuilt)
                              UNION ALL (TABLE rebuilt EXCEPT ALL TABLE stored)) d$q$,
        cfg.band_table, cfg.tbl, cfg.k, cfg.ngram, cfg.unit, cfg.bands, cfg.rows_per_band)
    INTO differences;
    RETURN (SELECT format('%s|%s', missing, orphaned) FROM minhash_index_check(tbl)) || ' ' || differences;
END $$;
-- A function a query calls that writes the table: deletes row n, returns a text.
CREATE FUNCTION shape_delete(tbl regclass, n bigint) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DELETE FROM %s WHERE id = $1', tbl) USING n;
    RETURN 'written beside the delete of row ' || n || ': ' || md5(n::text);
END $$;

-- The shapes: %1$I is the table, %2$I the part of it a statement may name (its first partition
-- if it is partitioned, else the table).
CREATE TABLE shapes (n int PRIMARY KEY, section text, shape text, statement text);
CREATE TABLE shape_results (n int, tbl text, rows bigint, content text, result text);
INSERT INTO shapes VALUES
(1, 'ctes', 'delete, insert again',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *) INSERT INTO %1$I SELECT * FROM d$$),
(2, 'ctes', 'delete, insert again, LIMIT 1',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *) INSERT INTO %1$I SELECT * FROM d LIMIT 1$$),
(3, 'ctes', 'delete 4, insert 2 again changed, LIMIT 2',
 $$WITH d AS (DELETE FROM %1$I WHERE id BETWEEN 1 AND 4 RETURNING *)
   INSERT INTO %1$I SELECT id, body || ' again' FROM d LIMIT 2$$),
(4, 'ctes', 'delete from the part, insert into the table, LIMIT 1',
 $$WITH d AS (DELETE FROM %2$I WHERE id IN (1, 2) RETURNING *) INSERT INTO %1$I SELECT * FROM d LIMIT 1$$),
(5, 'ctes', 'delete from the table, insert into the part, LIMIT 1',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *) INSERT INTO %2$I SELECT * FROM d LIMIT 1$$),
(6, 'ctes', 'move ids, take them again',
 $$WITH u AS (UPDATE %1$I SET id = id + 1000 WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id - 1000, body FROM u$$),
(7, 'ctes', 'move ids, take them again, LIMIT 1',
 $$WITH u AS (UPDATE %1$I SET id = id + 1000 WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id - 1000, body FROM u LIMIT 1$$),
(8, 'ctes', 'move ids to the other partition, take them again, LIMIT 1',
 $$WITH u AS (UPDATE %1$I SET id = id + 5000 WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id - 5000, body FROM u LIMIT 1$$),
(9, 'ctes', 'update texts, insert copies, LIMIT 1',
 $$WITH u AS (UPDATE %1$I SET body = body || ' edited' WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id + 500, body FROM u LIMIT 1$$),
(10, 'ctes', 'insert copies, delete the originals',
 $$WITH i AS (INSERT INTO %1$I SELECT id + 500, body FROM %1$I WHERE id IN (1, 2) RETURNING id)
   DELETE FROM %1$I WHERE id IN (SELECT id - 500 FROM i)$$),
(11, 'ctes', 'insert copies, delete one original, LIMIT 1',
 $$WITH i AS (INSERT INTO %1$I SELECT id + 500, body FROM %1$I WHERE id IN (1, 2) RETURNING id)
   DELETE FROM %1$I WHERE id IN (SELECT id - 500 FROM i LIMIT 1)$$),
(12, 'ctes', 'upsert moving the row it meets, its id taken again, LIMIT 1',
 $$WITH u AS (INSERT INTO %1$I VALUES (1, 'not written'), (300, 'a new row three hundred')
              ON CONFLICT (id) DO UPDATE SET id = %1$I.id + 1000 RETURNING *)
   INSERT INTO %1$I SELECT id - 1000, body FROM u WHERE id > 1000 LIMIT 1$$),
(13, 'ctes', 'upsert, delete the rows after the ones it wrote',
 $$WITH u AS (INSERT INTO %1$I VALUES (3, 'an upserted text for row three'), (301, 'a new row three hundred one')
              ON CONFLICT (id) DO UPDATE SET body = excluded.body RETURNING id)
   DELETE FROM %1$I WHERE id IN (SELECT id + 1 FROM u)$$),
(14, 'ctes', 'upsert',
 $$INSERT INTO %1$I VALUES (5, 'an upserted text for row five'), (302, 'a new row three hundred two')
   ON CONFLICT (id) DO UPDATE SET body = excluded.body$$),
(15, 'ctes', 'two updates of the same rows',
 $$WITH a AS (UPDATE %1$I SET body = body || ' by a' WHERE id IN (1, 2) RETURNING id),
        b AS (UPDATE %1$I SET body = body || ' by b' WHERE id IN (2, 3) RETURNING id)
   DELETE FROM %1$I WHERE id IN (SELECT id + 10 FROM a UNION ALL SELECT id + 20 FROM b)$$),
(16, 'ctes', 'two updates, one moving ids, taken again, LIMIT 1',
 $$WITH a AS (UPDATE %1$I SET id = id + 1000 WHERE id IN (1, 2) RETURNING *),
        b AS (UPDATE %1$I SET body = body || ' by b' WHERE id IN (2, 3) RETURNING *)
   INSERT INTO %1$I SELECT id - 1000, body FROM a LIMIT 1$$),
(17, 'ctes', 'chained: delete, insert again, update others',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *),
        i AS (INSERT INTO %1$I SELECT * FROM d RETURNING *)
   UPDATE %1$I SET body = body || ' touched' WHERE id IN (SELECT id + 2 FROM i)$$),
(18, 'ctes', 'chained, LIMIT 1 inside',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *),
        i AS (INSERT INTO %1$I SELECT * FROM d LIMIT 1 RETURNING *)
   UPDATE %1$I SET body = body || ' touched' WHERE id IN (SELECT id + 2 FROM i)$$),
(19, 'ctes', 'delete, move, insert both again, LIMIT 3',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *),
        u AS (UPDATE %1$I SET id = id + 1000 WHERE id IN (3, 4) RETURNING *)
   INSERT INTO %1$I SELECT id, body FROM d UNION ALL SELECT id - 1000, body FROM u LIMIT 3$$),
(20, 'ctes', 'merge: delete, update, insert',
 $$MERGE INTO %1$I t USING (VALUES (1), (2), (303)) v(id) ON t.id = v.id
   WHEN MATCHED AND t.id = 1 THEN DELETE
   WHEN MATCHED THEN UPDATE SET body = t.body || ' merged'
   WHEN NOT MATCHED THEN INSERT VALUES (v.id, 'a merged row ' || v.id)$$),
(21, 'ctes', 'a function in the query deletes a row the query wrote',
 $$INSERT INTO %1$I SELECT v.id, shape_delete(%1$L, v.id - 1) FROM (VALUES (700), (701)) v(id)$$),
(22, 'ctes', 'the same in a CTE, LIMIT 1',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (699, 700) RETURNING *)
   INSERT INTO %1$I SELECT v.id, shape_delete(%1$L, v.id - 1) FROM (VALUES (700), (701)) v(id)
   WHERE v.id NOT IN (SELECT id FROM d LIMIT 1)$$),
-- With the triggers below: rows with 'doomed' in their text are deleted by a statement
-- trigger that fires before the sync triggers, rows with 'rewrite' rewritten by a row trigger.
(31, 'triggers', 'delete, insert again doomed, LIMIT 1',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id, body || ' doomed' FROM d LIMIT 1$$),
(32, 'triggers', 'delete, insert again to be rewritten, LIMIT 1',
 $$WITH d AS (DELETE FROM %1$I WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id, body || ' rewrite' FROM d LIMIT 1$$),
(33, 'triggers', 'move ids, take them again to be rewritten',
 $$WITH u AS (UPDATE %1$I SET id = id + 1000 WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id - 1000, body || ' rewrite' FROM u$$),
(34, 'triggers', 'update to be rewritten and doomed, LIMIT 1',
 $$WITH u AS (UPDATE %1$I SET body = body || ' rewrite' WHERE id IN (1, 2) RETURNING *)
   INSERT INTO %1$I SELECT id + 500, body || ' doomed' FROM u LIMIT 1$$),
(35, 'triggers', 'insert doomed and rewritten rows',
 $$INSERT INTO %1$I VALUES (800, 'row 800 doomed'), (801, 'row 801 rewrite'), (802, 'row 802 kept')$$);

-- Each shape on each table, from the table's rows 1 to 40: the statements that run it and
-- record its result.
CREATE VIEW shape_runs AS
SELECT s.section, s.n, t,
       format('CALL shape_reset(%L)', t) AS reset,
       format(s.statement, t, CASE WHEN t LIKE 'p%' THEN t || '_low' ELSE t END) AS statement,
       format('INSERT INTO shape_results SELECT %s, %L, count(*), md5(string_agg(id || body, %L ORDER BY id)), shape_check(%L) FROM %I',
              s.n, t, ',', t, t) AS record
FROM shapes s, unnest(ARRAY['s1', 's2', 'p1', 'p2']) t;
SELECT reset, statement, record FROM shape_runs WHERE section = 'ctes' ORDER BY n, t \gexec

CREATE FUNCTION shape_doom() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    doomed boolean;
BEGIN
    -- (the DELETE fires this trigger again, which finds nothing left to delete)
    EXECUTE format($q$SELECT EXISTS (SELECT FROM %s WHERE body LIKE '%%doomed%%')$q$, TG_RELID::regclass)
    INTO doomed;
    IF doomed THEN
        EXECUTE format($q$DELETE FROM %s WHERE body LIKE '%%doomed%%'$q$, TG_RELID::regclass);
    END IF;
    RETURN NULL;
END $$;
CREATE FUNCTION shape_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.body LIKE '%rewrite' THEN
        EXECUTE format('UPDATE %s SET body = $1 WHERE id = $2', TG_RELID::regclass)
        USING 'rewritten by a trigger: ' || md5(NEW.body), NEW.id;
    END IF;
    RETURN NULL;
END $$;
SELECT format('CREATE TRIGGER a_doom AFTER INSERT OR UPDATE OR DELETE ON %I
                   FOR EACH STATEMENT EXECUTE FUNCTION shape_doom()', t),
       format('CREATE TRIGGER a_rewrite AFTER INSERT OR UPDATE ON %I
                   FOR EACH ROW EXECUTE FUNCTION shape_rewrite()', t)
FROM unnest(ARRAY['s1', 's2', 'p1', 'p2']) t \gexec
SELECT reset, statement, record FROM shape_runs WHERE section = 'triggers' ORDER BY n, t \gexec
SELECT format('DROP TRIGGER a_doom ON %I', t), format('DROP TRIGGER a_rewrite ON %I', t)
FROM unnest(ARRAY['s1', 's2', 'p1', 'p2']) t \gexec

-- (rows: how many rows the shape left; same: whether it left the same rows in all four tables)
SELECT s.n, s.shape, min(r.rows) AS rows, count(DISTINCT r.content) = 1 AS same,
       max(r.result) FILTER (WHERE r.tbl = 's1') AS s1, max(r.result) FILTER (WHERE r.tbl = 's2') AS s2,
       max(r.result) FILTER (WHERE r.tbl = 'p1') AS p1, max(r.result) FILTER (WHERE r.tbl = 'p2') AS p2
FROM shapes s LEFT JOIN shape_results r USING (n) GROUP BY s.n, s.shape ORDER BY s.n;

-- Several shapes in one transaction, one in a savepoint rolled back, and in a DO block (its
-- statements run through SPI).
CALL shape_reset('s1');
CALL shape_reset('s2');
BEGIN;
WITH d AS (DELETE FROM s1 WHERE id IN (1, 2) RETURNING *) INSERT INTO s1 SELECT * FROM d LIMIT 1;
WITH d AS (DELETE FROM s2 WHERE id IN (1, 2) RETURNING *) INSERT INTO s2 SELECT * FROM d LIMIT 1;
INSERT INTO s1 VALUES (900, 'a plain row between the shapes');
SAVEPOINT a;
WITH u AS (UPDATE s1 SET id = id + 1000 WHERE id IN (3, 4) RETURNING *) INSERT INTO s1 SELECT id - 1000, body FROM u LIMIT 1;
ROLLBACK TO SAVEPOINT a;
WITH u AS (UPDATE s1 SET id = id + 1000 WHERE id IN (5, 6) RETURNING *) INSERT INTO s1 SELECT id - 1000, body FROM u LIMIT 1;
WITH u AS (UPDATE s2 SET id = id + 1000 WHERE id IN (5, 6) RETURNING *) INSERT INTO s2 SELECT id - 1000, body FROM u LIMIT 1;
SELECT shape_check('s1') AS s1, shape_check('s2') AS s2;
COMMIT;
SELECT shape_check('s1') AS s1, shape_check('s2') AS s2;
DO $$
BEGIN
    WITH d AS (DELETE FROM s1 WHERE id IN (7, 8) RETURNING *) INSERT INTO s1 SELECT * FROM d LIMIT 1;
    WITH d AS (DELETE FROM s2 WHERE id IN (7, 8) RETURNING *) INSERT INTO s2 SELECT * FROM d LIMIT 1;
    WITH u AS (UPDATE s1 SET id = id + 1000 WHERE id IN (9, 10) RETURNING *) INSERT INTO s1 SELECT id - 1000, body FROM u LIMIT 1;
    WITH u AS (UPDATE s2 SET id = id + 1000 WHERE id IN (9, 10) RETURNING *) INSERT INTO s2 SELECT id - 1000, body FROM u LIMIT 1;
END $$;
SELECT shape_check('s1') AS s1, shape_check('s2') AS s2;
-- (under REPEATABLE READ, in a SQL function, and in a procedure that commits between them)
BEGIN ISOLATION LEVEL REPEATABLE READ;
WITH d AS (DELETE FROM s1 WHERE id IN (13, 14) RETURNING *) INSERT INTO s1 SELECT * FROM d LIMIT 1;
WITH u AS (UPDATE s2 SET id = id + 1000 WHERE id IN (13, 14) RETURNING *) INSERT INTO s2 SELECT id - 1000, body FROM u LIMIT 1;
COMMIT;
CREATE FUNCTION shape_sql() RETURNS void LANGUAGE sql AS $$
    WITH d AS (DELETE FROM s1 WHERE id IN (15, 16) RETURNING *) INSERT INTO s1 SELECT * FROM d LIMIT 1;
    WITH u AS (UPDATE s1 SET id = id + 1000 WHERE id IN (17, 18) RETURNING *) INSERT INTO s1 SELECT id - 1000, body FROM u LIMIT 1;
$$;
SELECT shape_sql();
CREATE PROCEDURE shape_commits() LANGUAGE plpgsql AS $$
BEGIN
    WITH d AS (DELETE FROM s2 WHERE id IN (15, 16) RETURNING *) INSERT INTO s2 SELECT * FROM d LIMIT 1;
    COMMIT;
    WITH u AS (UPDATE s2 SET id = id + 1000 WHERE id IN (17, 18) RETURNING *) INSERT INTO s2 SELECT id - 1000, body FROM u LIMIT 1;
END $$;
CALL shape_commits();
SELECT shape_check('s1') AS s1, shape_check('s2') AS s2;

-- What the attack was after: a row its query wrote again is still found, and still stops
-- its near-duplicates under 'reject'.
CREATE TRIGGER zz_reject BEFORE INSERT OR UPDATE ON s2
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
WITH d AS (DELETE FROM s2 WHERE id IN (11, 12) RETURNING *) INSERT INTO s2 SELECT * FROM d LIMIT 1;
SELECT id, round(similarity::numeric, 2) AS similarity
FROM minhash_similar('s2', 'shape row 11: ' || md5('11')) ORDER BY id;
SELECT try($$INSERT INTO s2 VALUES (950, 'shape row 11: ' || md5('11') || '!')$$);
SELECT shape_check('s2') AS s2;

DROP VIEW shape_runs;
DROP TABLE s1, s2, p1, p2, shapes, shape_results;
DROP PROCEDURE shape_reset(regclass), shape_commits();
DROP FUNCTION shape_sql(), shape_check(regclass), shape_delete(regclass, bigint), shape_doom(), shape_rewrite();
