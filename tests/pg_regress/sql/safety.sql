-- Hostile names, other schemas, and privileges: everything runs as the caller.
SET client_min_messages = warning;

-- Mixed case, spaces, quotes and semicolons in schema, table and column names.
CREATE SCHEMA "Odd Schema";
CREATE TABLE "Odd Schema"."Q's ""Table""; DROP TABLE x" (
    "Id Col" bigint PRIMARY KEY,
    "Body; DROP TABLE y --" text);
INSERT INTO "Odd Schema"."Q's ""Table""; DROP TABLE x" VALUES
  (1, 'a perfectly ordinary sentence'), (2, 'a perfectly ordinary sentence!'), (3, 'something else');
SELECT minhash_index_create('"Odd Schema"."Q''s ""Table""; DROP TABLE x"', 'Id Col', 'Body; DROP TABLE y --');
SELECT relname FROM pg_class WHERE relnamespace = '"Odd Schema"'::regnamespace AND relkind = 'r' ORDER BY 1;
INSERT INTO "Odd Schema"."Q's ""Table""; DROP TABLE x" VALUES (4, 'something else.');
UPDATE "Odd Schema"."Q's ""Table""; DROP TABLE x" SET "Body; DROP TABLE y --" = 'changed' WHERE "Id Col" = 3;
DELETE FROM "Odd Schema"."Q's ""Table""; DROP TABLE x" WHERE "Id Col" = 3;
SELECT * FROM minhash_index_check('"Odd Schema"."Q''s ""Table""; DROP TABLE x"');
SELECT * FROM minhash_duplicates('"Odd Schema"."Q''s ""Table""; DROP TABLE x"');
SELECT * FROM minhash_clusters('"Odd Schema"."Q''s ""Table""; DROP TABLE x"');
SELECT * FROM minhash_similar('"Odd Schema"."Q''s ""Table""; DROP TABLE x"', 'A perfectly ordinary sentence.');
SELECT rows_indexed FROM minhash_index_stats('"Odd Schema"."Q''s ""Table""; DROP TABLE x"');
SELECT minhash_index_drop('"Odd Schema"."Q''s ""Table""; DROP TABLE x"');
DROP SCHEMA "Odd Schema" CASCADE;

-- A non-superuser who owns a table can index it; others cannot read it through the functions.
CREATE ROLE regress_minhash_owner;
CREATE ROLE regress_minhash_reader;
CREATE ROLE regress_minhash_stranger;
CREATE ROLE regress_minhash_writer;
GRANT CREATE ON SCHEMA public TO regress_minhash_owner;
SET ROLE regress_minhash_owner;
CREATE TABLE owned (id int PRIMARY KEY, body text);
INSERT INTO owned VALUES (1, 'private text that should stay private'), (2, 'private text that should stay private!');
GRANT SELECT ON owned TO regress_minhash_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON owned TO regress_minhash_writer;
SELECT minhash_index_create('owned', 'id', 'body');
RESET ROLE;

-- Readers of the table can query it; the band table stays private to the owner.
SET ROLE regress_minhash_reader;
SELECT * FROM minhash_duplicates('owned');
SELECT try($$SELECT * FROM owned_minhash_bands$$);
RESET ROLE;

-- A role without SELECT on the table gets permission denied, not the data.
SET ROLE regress_minhash_stranger;
SELECT try($$SELECT * FROM minhash_similar('owned', 'private text that should stay private')$$);
SELECT try($$SELECT * FROM minhash_duplicates('owned')$$);
SELECT try($$SELECT * FROM owned_minhash_bands$$);
-- nor can it index, drop, rebuild or edit the catalog of a table it does not own
SELECT try($$SELECT minhash_index_create('owned', 'id', 'body')$$);
SELECT try($$SELECT minhash_index_drop('owned')$$);
SELECT try($$SELECT minhash_index_rebuild('owned')$$);
SELECT try($$DELETE FROM minhash_indexes$$);
SELECT try($$UPDATE minhash_indexes SET threshold = 0.1$$);
RESET ROLE;
SELECT count(*) AS catalog_rows, min(threshold) AS threshold FROM minhash_indexes;

-- A writer keeps the band table exact without any privilege on the band table itself.
SET ROLE regress_minhash_writer;
INSERT INTO owned VALUES (3, 'written by another role');
UPDATE owned SET body = 'rewritten by another role' WHERE id = 3;
DELETE FROM owned WHERE id = 1;
SELECT try($$INSERT INTO owned_minhash_bands VALUES (1, 1)$$);
RESET ROLE;
SELECT * FROM minhash_index_check('owned');

SET ROLE regress_minhash_owner;
SELECT minhash_index_drop('owned');
DROP TABLE owned;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_minhash_owner;
DROP ROLE regress_minhash_owner, regress_minhash_reader, regress_minhash_stranger, regress_minhash_writer;
