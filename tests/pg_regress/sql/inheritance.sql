-- Tables in an inheritance tree are refused (0A000): a query of a parent reads its children's
-- rows, which the parent's triggers never see. Neither an indexed table can join a tree later.
\set VERBOSITY verbose
\set SHOW_CONTEXT never
CREATE TABLE parent (id int PRIMARY KEY, body text);
CREATE TABLE child (id int PRIMARY KEY, body text) INHERITS (parent);
SELECT minhash_index_create('parent', 'id', 'body');
SELECT minhash_index_create('child', 'id', 'body');
-- a partition: its root is indexed instead (partitioned.sql)
CREATE TABLE parted (id int, body text) PARTITION BY RANGE (id);
CREATE TABLE part1 PARTITION OF parted FOR VALUES FROM (0) TO (100);
ALTER TABLE part1 ADD PRIMARY KEY (id);
SELECT minhash_index_create('part1', 'id', 'body');
\set VERBOSITY terse

-- An indexed table cannot become a parent, a child or a partition afterwards.
CREATE TABLE solo (id int PRIMARY KEY, body text);
INSERT INTO solo VALUES (101, 'a question about trees');
SET client_min_messages = warning;
SELECT minhash_index_create('solo', 'id', 'body') AS band_table;
RESET client_min_messages;
SELECT try($$CREATE TABLE heir () INHERITS (solo)$$);
SELECT try($$ALTER TABLE solo INHERIT parent$$);
CREATE TABLE orphan (id int PRIMARY KEY, body text);
SELECT try($$ALTER TABLE orphan INHERIT solo$$);
SELECT try($$ALTER TABLE parted ATTACH PARTITION solo FOR VALUES FROM (100) TO (200)$$);
SELECT count(*) AS inheritance_rows FROM pg_inherits
WHERE 'solo'::regclass IN (inhrelid, inhparent);
-- and still works
INSERT INTO solo VALUES (102, 'a question about trees!');
SELECT * FROM minhash_index_check('solo');
SELECT * FROM minhash_duplicates('solo');

SELECT minhash_index_drop('solo');
DROP TABLE solo, orphan, parted, child, parent;
