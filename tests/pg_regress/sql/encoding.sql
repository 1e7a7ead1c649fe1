-- A minhash index needs a UTF8 database: the contract hashes UTF-8 bytes and the triggers read
-- text as UTF-8. minhash_index_create refuses any other database encoding (0A000).
CREATE DATABASE regress_minhash_latin1 ENCODING 'LATIN1' LOCALE 'C' TEMPLATE template0;
CREATE DATABASE regress_minhash_ascii ENCODING 'SQL_ASCII' LOCALE 'C' TEMPLATE template0;
\set VERBOSITY verbose
\set SHOW_CONTEXT never

\c regress_minhash_latin1
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE questions (id int PRIMARY KEY, body text);
INSERT INTO questions VALUES (1, 'Où est la gare ?');
SELECT minhash_index_create('questions', 'id', 'body');
SELECT count(*) AS indexes FROM minhash_indexes;

\c regress_minhash_ascii
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
CREATE TABLE questions (id int PRIMARY KEY, body text);
SELECT minhash_index_create('questions', 'id', 'body');
SELECT count(*) AS indexes FROM minhash_indexes;

\c pg_minhash_regress
DROP DATABASE regress_minhash_latin1;
DROP DATABASE regress_minhash_ascii;
