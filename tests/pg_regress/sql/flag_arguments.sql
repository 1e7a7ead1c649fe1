-- minhash_flag_duplicate's arguments are checked when the trigger is made (CREATE [OR REPLACE]
-- TRIGGER, its clones on partitions, CREATE TABLE ... PARTITION OF, ATTACH PARTITION): the
-- command fails with the SQLSTATE and message the trigger's first row would get. Each bad
-- trigger is also made with event triggers off (replica mode), to show the first row's error.
SET client_min_messages = warning;

CREATE TABLE docs (id bigint PRIMARY KEY, body text, dup bigint, note text);
INSERT INTO docs VALUES (1, 'the quick brown fox jumps over the lazy dog');
SELECT minhash_index_create('docs', 'id', 'body', threshold => 0.7) IS NOT NULL AS created;

-- both(trigger, row): the error of CREATE TRIGGER zz_check <trigger>, and that of statement
-- `row` once the same trigger was made with event triggers off.
CREATE FUNCTION pg_temp.both(trigger text, row_sql text DEFAULT
                             $$INSERT INTO docs VALUES (2, 'the quick brown fox jumps over the lazy dog!')$$,
                             OUT at_create text, OUT at_row text)
LANGUAGE plpgsql AS $$
BEGIN
    at_create := public.try('CREATE TRIGGER zz_check ' || trigger);
    EXECUTE 'DROP TRIGGER IF EXISTS zz_check ON docs';
    SET LOCAL session_replication_role = replica;
    EXECUTE 'CREATE TRIGGER zz_check ' || trigger;
    SET LOCAL session_replication_role = origin;
    at_row := public.try(row_sql);
    EXECUTE 'DROP TRIGGER zz_check ON docs';
END $$;

-- a mistyped mode (22023)
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.8', 'warn')$$);
-- a flag column the table does not have (42703), no argument at all (the same)
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('no_such_column')$$);
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate()$$);
-- a threshold out of range (22023), not a number (22P02)
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '1.5')$$);
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', 'high', 'reject')$$);
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, '-0.1', 'reject')$$);
-- a flag column the index reads: the text, the id (22023)
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('body')$$);
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('id')$$);
-- an index (by its band table) the table does not have (42704)
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', NULL, 'flag', 'no_such_band_table')$$);
-- fired at the wrong time (39P01): AFTER, per statement, on DELETE too
SELECT * FROM pg_temp.both($$AFTER INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
SELECT * FROM pg_temp.both($$BEFORE INSERT OR DELETE ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$, 'DELETE FROM docs WHERE id = 1');
-- A BEFORE ROW trigger that fires after it (by name) and could change the row: its rows refuse
-- it (55000), its creation does not (triggers are made, renamed and dropped after it, and one
-- may fire only on a path a workload never takes, an UPDATE OF columns it never sets).
CREATE FUNCTION pg_temp.touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RETURN NEW; END $$;
CREATE TRIGGER zzz_touch BEFORE INSERT ON docs FOR EACH ROW EXECUTE FUNCTION pg_temp.touch();
SELECT * FROM pg_temp.both($$BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
DROP TRIGGER zzz_touch ON docs;
-- nothing was made by the failed commands
SELECT count(*) AS flag_triggers FROM pg_trigger
WHERE tgfoid = 'minhash_flag_duplicate()'::regprocedure;

-- A good trigger is made and works; CREATE OR REPLACE TRIGGER with a bad argument fails and
-- leaves the trigger as it was.
CREATE TRIGGER docs_flag BEFORE INSERT OR UPDATE ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.6');
SELECT try($$CREATE OR REPLACE TRIGGER docs_flag BEFORE INSERT OR UPDATE ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.6', 'rejekt')$$);
SELECT try($$CREATE OR REPLACE TRIGGER docs_flag AFTER INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgname = 'docs_flag';
INSERT INTO docs (id, body) VALUES (3, 'the quick brown fox jumps over the lazy dog!') RETURNING id, dup;
CREATE OR REPLACE TRIGGER docs_flag BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, '', 'reject');
SELECT try($$INSERT INTO docs (id, body) VALUES (4, 'the quick brown fox jumps over the lazy dog')$$);
DROP TRIGGER docs_flag ON docs;
-- other functions' triggers are not ours to check
CREATE TRIGGER docs_other AFTER DELETE ON docs FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.touch();
DROP TRIGGER docs_other ON docs;
-- a view's INSTEAD OF trigger (39P01)
CREATE VIEW docs_view AS SELECT * FROM docs;
SELECT try($$CREATE TRIGGER v INSTEAD OF INSERT ON docs_view
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
DROP VIEW docs_view;

-- A trigger made before its table's index: what does not depend on the index is checked now,
-- the rest at its first row (as before, 42704 while there is no index); once the index exists
-- the trigger works.
CREATE TABLE later (id int PRIMARY KEY, body text, dup int);
SELECT try($$CREATE TRIGGER later_flag BEFORE INSERT ON later
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.8', 'warn')$$);
SELECT try($$CREATE TRIGGER later_flag BEFORE INSERT ON later
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('no_such_column')$$);
SELECT try($$CREATE TRIGGER later_flag BEFORE INSERT ON later
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '2')$$);
SELECT try($$CREATE TRIGGER later_flag AFTER INSERT ON later
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
CREATE TRIGGER later_flag BEFORE INSERT ON later
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.6');
SELECT try($$INSERT INTO later VALUES (1, 'Cheap flights to Lisbon in May')$$);
SELECT minhash_index_create('later', 'id', 'body') IS NOT NULL AS created;
INSERT INTO later VALUES (1, 'Cheap flights to Lisbon in May'), (2, 'Cheap flights to Lisbon in May!')
RETURNING id, dup;
SELECT minhash_index_drop('later', cascade => true);
DROP TABLE later;

-- Partitioned tables: a trigger on the root is checked on every partition it is cloned to;
-- CREATE TABLE ... PARTITION OF and ATTACH PARTITION check the clones they make.
CREATE TABLE parts (id int PRIMARY KEY, body text, dup int) PARTITION BY RANGE (id);
CREATE TABLE parts_1 PARTITION OF parts FOR VALUES FROM (0) TO (100);
SELECT minhash_index_create('parts', 'id', 'body') IS NOT NULL AS created;
SELECT try($$CREATE TRIGGER parts_flag BEFORE INSERT ON parts
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '1.5')$$);
CREATE TRIGGER parts_flag BEFORE INSERT ON parts
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.6');
SELECT try($$CREATE OR REPLACE TRIGGER parts_flag BEFORE INSERT ON parts
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', 'high')$$);
CREATE TABLE parts_2 PARTITION OF parts FOR VALUES FROM (100) TO (200);
-- A table with a duplicate trigger of its own, made while it had no index: attached, it checks
-- against the root's index, which reads the column it would write (22023), so it is refused.
CREATE TABLE parts_3 (id int PRIMARY KEY, body text, dup int);
CREATE TRIGGER parts_3_flag BEFORE INSERT ON parts_3
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('body');
SELECT try($$ALTER TABLE parts ATTACH PARTITION parts_3 FOR VALUES FROM (200) TO (300)$$);
SELECT count(*) AS attached FROM pg_inherits WHERE inhrelid = 'parts_3'::regclass;
DROP TRIGGER parts_3_flag ON parts_3;
ALTER TABLE parts ATTACH PARTITION parts_3 FOR VALUES FROM (200) TO (300);
SELECT tgrelid::regclass AS partition, tgparentid <> 0 AS clone FROM pg_trigger
WHERE tgname = 'parts_flag' ORDER BY 1;
INSERT INTO parts VALUES (1, 'Cheap flights to Lisbon in May'), (150, 'Cheap flights to Lisbon in May!'),
                         (250, 'Cheap flights to Lisbon in May?')
RETURNING id, dup;
SELECT minhash_index_drop('parts', cascade => true);
DROP TABLE parts;

-- As a role that is not a superuser, on its own table; and a role with TRIGGER on another's
-- table, which cannot read that table's index: it is refused an argument that does not depend
-- on the index, and, as for a trigger made before the index, its first row checks the rest.
CREATE ROLE regress_flagargs_owner;
CREATE ROLE regress_flagargs_other;
GRANT CREATE ON SCHEMA public TO regress_flagargs_owner, regress_flagargs_other;
SET ROLE regress_flagargs_owner;
CREATE TABLE owned (id int PRIMARY KEY, body text, dup int);
SELECT minhash_index_create('owned', 'id', 'body') IS NOT NULL AS created;
SELECT try($$CREATE TRIGGER owned_flag BEFORE INSERT ON owned
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('body')$$);
CREATE TRIGGER owned_flag BEFORE INSERT ON owned
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
GRANT TRIGGER, INSERT, SELECT ON owned TO regress_flagargs_other;
RESET ROLE;
SELECT c.relname AS owned_band FROM minhash_indexes i JOIN pg_class c ON c.oid = i.band_table
WHERE i.tbl = 'owned'::regclass \gset
SET ROLE regress_flagargs_other;
CREATE TABLE theirs (id int PRIMARY KEY, body text, dup int);
SELECT minhash_index_create('theirs', 'id', 'body') IS NOT NULL AS created;
-- naming another table's index (the other role's band table): 42704
SELECT try(format($$CREATE TRIGGER theirs_flag BEFORE INSERT ON theirs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', NULL, 'flag', %L)$$, :'owned_band'));
SELECT try($$CREATE TRIGGER other_flag BEFORE INSERT ON owned
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '0.8', 'warn')$$);
SELECT try($$CREATE TRIGGER zz_other_flag BEFORE INSERT ON owned
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
RESET ROLE;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'owned'::regclass
  AND tgfoid = 'minhash_flag_duplicate()'::regprocedure ORDER BY 1;
SET ROLE regress_flagargs_owner;
SELECT minhash_index_drop('owned', cascade => true);
DROP TABLE owned;
SET ROLE regress_flagargs_other;
SELECT minhash_index_drop('theirs');
DROP TABLE theirs;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_flagargs_owner, regress_flagargs_other;
DROP ROLE regress_flagargs_owner;
DROP ROLE regress_flagargs_other;

SELECT minhash_index_drop('docs');
DROP TABLE docs;
