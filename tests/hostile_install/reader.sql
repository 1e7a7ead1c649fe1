-- Run by the reader of tests/hostile_install/run.sh, with the installer's schema first on its
-- search path: lookups and searches of another role's indexed table it may SELECT
-- (owner1.kept, made by run.sh), under row-level security.
\set ON_ERROR_STOP 1
\set q 'question 7 about the compiler of machine 89 which fails on boot number 7'
SET client_min_messages = warning;
SET search_path = evil, public;
SELECT pg_catalog.count(*) AS similar FROM minhash_similar('owner1.kept', :'q');
SELECT pg_catalog.count(*) AS nearest FROM minhash_similar('owner1.kept', :'q', k => 5);
SELECT pg_catalog.count(*) AS low FROM minhash_similar('owner1.kept', :'q', threshold => 0.3);
SELECT pg_catalog.count(*) AS matches FROM minhash_matches('owner1.kept', ARRAY[:'q']);
SELECT pg_catalog.count(*) AS explained FROM minhash_explain('owner1.kept', :'q');
SELECT pg_catalog.count(*) AS pairs FROM minhash_duplicates('owner1.kept');
SELECT pg_catalog.count(*) AS clusters FROM minhash_clusters('owner1.kept');
