-- DDL on an indexed table. ALTER TABLE may not take away the id or text column the index reads
-- (its catalog row names them): dropping, renaming or retyping either one is refused with 2BP01
-- until the index is dropped. A dropped table takes its band table and catalog row along, as it
-- takes its ordinary indexes.
SET client_min_messages = warning;
\set VERBOSITY terse
-- what the index of table `qualified` (schema.name) leaves in the catalogs
CREATE FUNCTION pg_temp.leftovers(qualified text) RETURNS TABLE (catalog_rows bigint,
                                                                band_table boolean)
LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM minhash_indexes i
            WHERE i.tbl = to_regclass($1) OR NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = i.tbl)),
           to_regclass($1 || '_minhash_bands') IS NOT NULL
$$;

CREATE TABLE posts (id int PRIMARY KEY, title text, extra text);
INSERT INTO posts VALUES (1, 'Cheap flights to Lisbon in May', 'x'), (2, 'Best pizza in Naples', 'y');
SELECT minhash_index_create('posts', 'id', 'title', threshold => 0.6) IS NOT NULL AS created;

-- Renaming, dropping or retyping an indexed column is refused, and the table is unchanged.
ALTER TABLE posts RENAME COLUMN title TO headline;
ALTER TABLE posts RENAME COLUMN id TO post_id;
ALTER TABLE posts DROP COLUMN title;
ALTER TABLE posts DROP COLUMN title CASCADE;
ALTER TABLE posts ALTER COLUMN title TYPE int USING length(title);
ALTER TABLE posts ALTER COLUMN id TYPE text;
-- also inside a multi-command ALTER TABLE
ALTER TABLE posts ADD COLUMN more text, DROP COLUMN title;
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
WHERE attrelid = 'posts'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
-- the whole error
\set VERBOSITY verbose
ALTER TABLE posts RENAME COLUMN title TO headline;
\set VERBOSITY terse

-- Everything else goes through, and the index stays exact.
ALTER TABLE posts RENAME COLUMN extra TO notes;
ALTER TABLE posts DROP COLUMN notes;
ALTER TABLE posts ADD COLUMN dup int;
ALTER TABLE posts ALTER COLUMN title TYPE varchar(200);
ALTER TABLE posts ALTER COLUMN id TYPE bigint;
ALTER TABLE posts RENAME TO articles;
INSERT INTO articles (id, title) VALUES (3, 'Cheap flights to Lisbon in June');
UPDATE articles SET title = 'Best pizza in Naples!' WHERE id = 2;
SELECT * FROM minhash_index_check('articles');
SELECT id, round(similarity::numeric, 3) FROM minhash_similar('articles', 'Cheap flights to Lisbon in May') ORDER BY id;
ALTER TABLE articles RENAME TO posts;
-- The sync triggers fire by their names: renaming one is refused.
ALTER TRIGGER minhash_sync_insert ON posts RENAME TO posts_inserted;
-- So is making them on a table made again, in the transaction that dropped the indexed table
-- of that name, without the index (as Citus converts a table).
BEGIN;
DROP TABLE posts;
CREATE TABLE posts (id bigint PRIMARY KEY, title text);
CREATE TRIGGER minhash_sync_insert AFTER INSERT ON posts REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION minhash_internal._minhash_sync();
ROLLBACK;
SELECT * FROM minhash_index_check('posts');
-- With the index dropped, the columns are the table's own again.
SELECT minhash_index_drop('posts');
ALTER TABLE posts RENAME COLUMN title TO headline;
SELECT minhash_index_create('posts', 'id', 'headline', threshold => 0.6) IS NOT NULL AS created;

-- DROP TABLE takes the index along; rolled back, all of it comes back.
BEGIN;
DROP TABLE posts;
SELECT * FROM pg_temp.leftovers('public.posts');
ROLLBACK;
SELECT * FROM pg_temp.leftovers('public.posts');
SELECT * FROM minhash_index_check('posts');
INSERT INTO posts (id, headline) VALUES (4, 'Best pizza in Naples!!');
SELECT * FROM minhash_index_check('posts');
DROP TABLE posts;
SELECT * FROM pg_temp.leftovers('public.posts');

-- Several tables in one DROP, the band table among them, and DROP SCHEMA ... CASCADE.
CREATE SCHEMA drops;
CREATE TABLE drops.a (id int PRIMARY KEY, body text);
CREATE TABLE drops.b (id int PRIMARY KEY, body text);
CREATE TABLE public.c (id int PRIMARY KEY, body text);
SELECT minhash_index_create('drops.a', 'id', 'body') IS NOT NULL AS a,
       minhash_index_create('drops.b', 'id', 'body') IS NOT NULL AS b,
       minhash_index_create('public.c', 'id', 'body') IS NOT NULL AS c;
DROP TABLE public.c, public.c_minhash_bands;
SELECT * FROM pg_temp.leftovers('public.c');
DROP SCHEMA drops CASCADE;
SELECT * FROM pg_temp.leftovers('drops.a');
SELECT * FROM pg_temp.leftovers('drops.b');
SELECT count(*) AS catalog_rows FROM minhash_indexes;

-- The band table belongs to the table's owner, whoever created the index, and is private to it;
-- the owner's DROP TABLE takes it along.
CREATE ROLE regress_minhash_ddl;
CREATE ROLE regress_minhash_other;
GRANT CREATE ON SCHEMA public TO regress_minhash_ddl;
CREATE TABLE owned (id int PRIMARY KEY, body text);
ALTER TABLE owned OWNER TO regress_minhash_ddl;
SELECT minhash_index_create('owned', 'id', 'body') IS NOT NULL AS created_by_superuser;
SELECT pg_get_userbyid(relowner) AS band_table_owner FROM pg_class WHERE oid = 'owned_minhash_bands'::regclass;
SELECT relacl IS NULL OR relacl = acldefault('r', relowner) AS band_table_private
FROM pg_class WHERE oid = 'owned_minhash_bands'::regclass;
SET ROLE regress_minhash_ddl;
ALTER TABLE owned RENAME COLUMN body TO text;
DROP TABLE owned;
RESET ROLE;
SELECT * FROM pg_temp.leftovers('public.owned');

-- ALTER SCHEMA ... RENAME: nothing names the schema (the catalog holds OIDs), so every write
-- and lookup goes on working, in this session (whose cached lookups name the old schema) too.
CREATE SCHEMA s1;
CREATE TABLE s1.renamed (id int PRIMARY KEY, body text);
INSERT INTO s1.renamed VALUES (1, 'a row before the rename'), (2, 'a row before the rename!');
SELECT minhash_index_create('s1.renamed', 'id', 'body') IS NOT NULL AS created;
SELECT id FROM minhash_similar('s1.renamed', 'a row before the rename?') ORDER BY id;
ALTER SCHEMA s1 RENAME TO s2;
INSERT INTO s2.renamed VALUES (3, 'a row after the rename');
UPDATE s2.renamed SET body = 'a row rewritten after the rename' WHERE id = 3;
DELETE FROM s2.renamed WHERE id = 2;
SELECT id FROM minhash_similar('s2.renamed', 'a row before the rename?') ORDER BY id;
SELECT * FROM minhash_index_check('s2.renamed');
TRUNCATE s2.renamed;
SELECT * FROM minhash_index_check('s2.renamed');
DROP SCHEMA s2 CASCADE;

-- ALTER TABLE ... OWNER TO: the band table follows, stays private, and the index keeps working
-- for the new owner; the old owner keeps no right on either.
CREATE TABLE moved (id int PRIMARY KEY, body text);
ALTER TABLE moved OWNER TO regress_minhash_ddl;
SELECT minhash_index_create('moved', 'id', 'body') IS NOT NULL AS created;
ALTER TABLE moved OWNER TO regress_minhash_other;
SELECT pg_get_userbyid(relowner) AS band_table_owner,
       relacl IS NULL OR relacl = acldefault('r', relowner) AS band_table_private
FROM pg_class WHERE oid = 'moved_minhash_bands'::regclass;
INSERT INTO moved VALUES (1, 'a row written after the owner changed');
UPDATE moved SET body = 'a row rewritten after the owner changed' WHERE id = 1;
SET ROLE regress_minhash_other;
SELECT * FROM minhash_index_check('moved');
SELECT minhash_index_rebuild('moved') AS rows_read;
RESET ROLE;
SET ROLE regress_minhash_ddl;
SELECT try($$TRUNCATE moved_minhash_bands$$);
SELECT try($$SELECT minhash_index_rebuild('moved')$$);
RESET ROLE;
SET ROLE regress_minhash_other;
SELECT minhash_index_drop('moved');
DROP TABLE moved;
RESET ROLE;

-- The band table goes with its table through its dependency, even if it was given to another
-- role since (as an index would); the catalog row goes too.
SET ROLE regress_minhash_ddl;
CREATE TABLE owned (id int PRIMARY KEY, body text);
SELECT minhash_index_create('owned', 'id', 'body') IS NOT NULL AS created;
RESET ROLE;
ALTER TABLE owned_minhash_bands OWNER TO regress_minhash_other;
SET ROLE regress_minhash_ddl;
SET client_min_messages = warning;
DROP TABLE owned;
RESET ROLE;
SELECT * FROM pg_temp.leftovers('public.owned');

-- A catalog row may name only a band table of the table's owner: minhash_index_drop and DROP
-- TABLE drop it as whoever runs those, maybe a superuser.
CREATE TABLE victim (id int);
INSERT INTO victim VALUES (1);
SET ROLE regress_minhash_ddl;
CREATE TABLE bait (id int PRIMARY KEY, body text);
CREATE TABLE bait_bands (id bigint, key bigint, sketch1 bigint, sketch2 bigint);
INSERT INTO minhash_indexes (tbl, id_column, text_column, band_table, k, ngram, unit, threshold,
                             bands, rows_per_band)
VALUES ('bait', 'id', 'body', 'victim', 128, 5, 'char', 0.8, 16, 6);
INSERT INTO minhash_indexes (tbl, id_column, text_column, band_table, k, ngram, unit, threshold,
                             bands, rows_per_band)
VALUES ('bait', 'id', 'body', 'bait_bands', 128, 5, 'char', 0.8, 16, 6);
RESET ROLE;
SELECT minhash_index_drop('bait');
SELECT to_regclass('bait_bands') IS NULL AS own_band_table_dropped,
       (SELECT count(*) FROM victim) AS victim_rows;
DROP TABLE bait, victim;

-- minhash_index_rebuild writes the band table as its owner, in a security-restricted operation:
-- what that owner hung on it runs with the owner's rights, not with those of the superuser who
-- called the rebuild, and cannot change role.
SET ROLE regress_minhash_ddl;
CREATE TABLE hooked (id int PRIMARY KEY, body text);
INSERT INTO hooked VALUES (1, 'some text to index');
SELECT minhash_index_create('hooked', 'id', 'body') IS NOT NULL AS created;
CREATE TABLE hook_log (who name);
CREATE FUNCTION hook() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hook_log VALUES (current_user);
    RETURN NULL;
END $$;
CREATE TRIGGER hook AFTER INSERT ON hooked_minhash_bands EXECUTE FUNCTION hook();
RESET ROLE;
SELECT minhash_index_rebuild('hooked') AS rows_read;
SELECT DISTINCT who AS hook_ran_as FROM hook_log;
SELECT current_user AS back_to;
SELECT * FROM minhash_index_check('hooked');
DROP TABLE hooked, hook_log;
DROP FUNCTION hook();

-- A role that cannot reach the extension's schema still runs its own DDL.
REVOKE USAGE ON SCHEMA public FROM PUBLIC;
CREATE SCHEMA own AUTHORIZATION regress_minhash_ddl;
SET ROLE regress_minhash_ddl;
CREATE TABLE own.mine (id int PRIMARY KEY, body text);
ALTER TABLE own.mine RENAME COLUMN body TO words;
DROP TABLE own.mine;
RESET ROLE;
GRANT USAGE ON SCHEMA public TO PUBLIC;
DROP SCHEMA own;

-- The extension in a schema whose name needs quoting.
BEGIN;
DROP EXTENSION pg_minhash;
CREATE SCHEMA "Odd Ext";
CREATE EXTENSION pg_minhash SCHEMA "Odd Ext";
CREATE TABLE odd (id int PRIMARY KEY, body text, extra text);
SELECT "Odd Ext".minhash_index_create('odd', 'id', 'body') IS NOT NULL AS created;
ALTER TABLE odd RENAME COLUMN extra TO notes;
ALTER TABLE odd RENAME COLUMN body TO words;
ROLLBACK;

-- A band table dropped on its own takes its index along, as DROP INDEX would (pg_restore
-- --clean drops it before its table); a duplicate trigger that uses the index refuses it.
CREATE TABLE lone (id int PRIMARY KEY, body text, dup int);
INSERT INTO lone VALUES (1, 'a row of its own'), (2, 'another row');
SELECT minhash_index_create('lone', 'id', 'body') IS NOT NULL AS created;
CREATE TRIGGER lone_flag BEFORE INSERT ON lone FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
DROP TABLE lone_minhash_bands;
DROP TRIGGER lone_flag ON lone;
DROP TABLE lone_minhash_bands;
SELECT count(*) AS indexes FROM minhash_indexes WHERE tbl = 'lone'::regclass;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'lone'::regclass;
INSERT INTO lone VALUES (3, 'a row of its own');
UPDATE lone SET body = 'changed' WHERE id = 1;
DELETE FROM lone WHERE id = 2;
SELECT minhash_index_create('lone', 'id', 'body') IS NOT NULL AS created;
SELECT * FROM minhash_index_check('lone');
DROP TABLE lone;

-- A non-superuser may install the (trusted) extension; its event triggers come along, owned by
-- the bootstrap superuser, and guard that role's tables.
BEGIN;
DROP EXTENSION pg_minhash;
SELECT format('GRANT CREATE ON DATABASE %I TO regress_minhash_ddl', current_database()) \gexec
SET ROLE regress_minhash_ddl;
CREATE EXTENSION pg_minhash;
SELECT evtname, evtowner = 10 AS bootstrap_owned FROM pg_event_trigger ORDER BY 1;
CREATE TABLE trusted (id int PRIMARY KEY, body text);
SELECT minhash_index_create('trusted', 'id', 'body') IS NOT NULL AS created;
ALTER TABLE trusted RENAME COLUMN body TO words;
ROLLBACK;

REVOKE CREATE ON SCHEMA public FROM regress_minhash_ddl;
DROP ROLE regress_minhash_ddl, regress_minhash_other;
