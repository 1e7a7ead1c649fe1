-- Keys of any type with a unique B-tree on the column alone: uuid, text, numeric, a domain.
-- Results come back in the key's own type through the forms with an id_type argument.
SET client_min_messages = warning;

-- uuid keys (fixed values, so the output is stable)
CREATE TABLE tickets (id uuid PRIMARY KEY, body text, duplicate_of uuid, dup_text text);
INSERT INTO tickets (id, body)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       format('The printer on floor %s jams whenever I print more than %s pages double sided', g % 7, g)
FROM generate_series(1, 300) g;
SELECT minhash_index_create('tickets', 'id', 'body', threshold => 0.7);
\d tickets_minhash_bands
SELECT * FROM minhash_index_check('tickets');
SELECT rows_indexed FROM minhash_index_stats('tickets');

-- the bigint forms refuse a uuid key and show the call that works
SELECT try($$SELECT * FROM minhash_similar('tickets', 'x')$$);
SELECT try($$SELECT * FROM minhash_matches('tickets', ARRAY['x'])$$);
SELECT try($$SELECT * FROM minhash_similar('tickets', 'x', NULL::text)$$);

SELECT id, round(similarity::numeric, 4) AS similarity, pg_typeof(id)
FROM minhash_similar('tickets', 'The printer on floor 3 jams whenever I print more than 10 pages double sided',
                     NULL::uuid, threshold => 0.85);
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('tickets', 'The printer on floor 3 jams whenever I print more than 10 pages double sided',
                     NULL::uuid, 0.85, 2);

-- whole-table searches in the key's type (the bigint forms refuse it)
SELECT try($$SELECT * FROM minhash_duplicates('tickets')$$);
SELECT count(*), min(pg_typeof(id_a)::text) AS type FROM minhash_duplicates('tickets', NULL::uuid, 0.9);
SELECT * FROM minhash_duplicates('tickets', NULL::uuid, 0.9) ORDER BY similarity DESC, id_a, id_b LIMIT 3;
SELECT count(DISTINCT cluster_id) AS groups, count(*) AS rows
FROM minhash_clusters('tickets', NULL::uuid, 0.9, mode => 'representative');

-- writes keep the index exact: insert, update of text and of key, delete, truncate
INSERT INTO tickets (id, body) VALUES
  ('10000000-0000-4000-8000-000000000001', 'My laptop battery drains in an hour since the last update'),
  ('10000000-0000-4000-8000-000000000002', NULL);
UPDATE tickets SET body = body || ' (again)' WHERE id = '00000000-0000-4000-8000-000000000005';
UPDATE tickets SET id = '20000000-0000-4000-8000-000000000006' WHERE id = '00000000-0000-4000-8000-000000000006';
DELETE FROM tickets WHERE id = '00000000-0000-4000-8000-000000000007';
SELECT * FROM minhash_index_check('tickets');
SELECT id FROM minhash_similar('tickets', 'My laptop battery drains in an hour since the last update!', NULL::uuid);
-- the same of format 1, whose lookups read the ids from its B-tree (key, id) INCLUDE (sketch1,
-- sketch2) rather than from the band table
SELECT minhash_index_rebuild('tickets', format => 1) > 0 AS rebuilt;
SELECT id FROM minhash_similar('tickets', 'My laptop battery drains in an hour since the last update!', NULL::uuid);
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('tickets', 'The printer on floor 3 jams whenever I print more than 10 pages double sided',
                     NULL::uuid, 0.85, 2);
SELECT minhash_index_rebuild('tickets', format => 2) > 0 AS rebuilt;

-- flag: a uuid column, and a text column (the id through its text form)
CREATE TRIGGER flag BEFORE INSERT OR UPDATE ON tickets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
CREATE TRIGGER flag_text BEFORE INSERT OR UPDATE ON tickets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_text');
INSERT INTO tickets (id, body)
VALUES ('30000000-0000-4000-8000-000000000001', 'My laptop battery drains in an hour since the last update.')
RETURNING id, duplicate_of, dup_text;
DROP TRIGGER flag ON tickets;
DROP TRIGGER flag_text ON tickets;
-- reject: the DETAIL names the row in the key's text form
CREATE TRIGGER reject BEFORE INSERT ON tickets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
\set VERBOSITY default
INSERT INTO tickets (id, body)
VALUES ('30000000-0000-4000-8000-000000000002', 'My laptop battery drains in an hour since the last update?');
\set VERBOSITY terse
DROP TRIGGER reject ON tickets;
SELECT * FROM minhash_index_check('tickets');
SELECT minhash_index_rebuild('tickets');
SELECT * FROM minhash_index_check('tickets');
-- the key column keeps its type while the index exists
SELECT try($$ALTER TABLE tickets ALTER COLUMN id TYPE text$$);
TRUNCATE tickets;
SELECT * FROM minhash_index_check('tickets');
SELECT count(*) FROM tickets_minhash_bands;
SELECT minhash_index_drop('tickets');
DROP TABLE tickets;

-- text keys: mixed case, quotes, non-ASCII, the empty string
CREATE TABLE pages ("Slug" text PRIMARY KEY, "Body Text" varchar(200), "Dup" text);
INSERT INTO pages VALUES
  ('Home', 'Welcome to our little shop of handmade wooden toys and puzzles', NULL),
  ('home', 'Welcome to our little shop of handmade wooden toys and puzzles!', NULL),
  ('it''s "quoted"', 'Shipping takes three to five working days within the country', NULL),
  ('Ωmega ☃', 'Shipping takes three to five working days within the country.', NULL),
  ('', 'Contact us by mail or phone from Monday to Friday', NULL);
SELECT minhash_index_create('pages', 'Slug', 'Body Text', threshold => 0.8);
SELECT * FROM minhash_similar('pages', 'Welcome to our little shop of handmade wooden toys and puzzles', NULL::text)
ORDER BY id COLLATE "C";
SELECT * FROM minhash_similar('pages', 'Shipping takes three to five working days within the country', NULL::text)
ORDER BY id COLLATE "C";
SELECT * FROM minhash_similar('pages', 'Contact us by mail or phone from Monday to Friday', NULL::text);
CREATE TRIGGER flag BEFORE INSERT ON pages
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('Dup');
INSERT INTO pages VALUES ('new', 'Shipping takes three to five working days within the country!!', NULL)
RETURNING *;
SELECT * FROM minhash_duplicates('pages', NULL::text);
SELECT * FROM minhash_clusters('pages', NULL::text);
UPDATE pages SET "Slug" = 'Home page' WHERE "Slug" = 'Home';
DELETE FROM pages WHERE "Slug" = 'it''s "quoted"';
SELECT * FROM minhash_index_check('pages');
-- of format 1 the same, the ids read from its B-tree
SELECT minhash_index_rebuild('pages', format => 1) > 0 AS rebuilt;
SELECT * FROM minhash_similar('pages', 'Shipping takes three to five working days within the country', NULL::text)
ORDER BY id COLLATE "C";
SELECT * FROM minhash_duplicates('pages', NULL::text);
SELECT * FROM minhash_index_check('pages');
SELECT minhash_index_drop('pages', cascade => true);
DROP TABLE pages;

-- numeric keys, and a domain over text as the key
CREATE TABLE prices (id numeric(8,2) PRIMARY KEY, body text);
INSERT INTO prices VALUES (1.5, 'red wooden train with three wagons'), (2.25, 'red wooden train with three wagons!'),
                          (10, 'blue sailing boat for the bath');
SELECT minhash_index_create('prices', 'id', 'body');
-- (a numeric witness in third place would be taken for the threshold: name it)
SELECT try($$SELECT * FROM minhash_similar('prices', 'red wooden train with three wagons', NULL::numeric)$$);
SELECT * FROM minhash_similar('prices', 'red wooden train with three wagons', id_type => NULL::numeric);
SELECT * FROM minhash_index_check('prices');
CREATE DOMAIN sku AS text CHECK (VALUE ~ '^[A-Z]+-[0-9]+$');
CREATE TABLE items (id sku PRIMARY KEY, body text);
INSERT INTO items VALUES ('AB-1', 'a small green frog that jumps'), ('AB-2', 'a small green frog that jumps!');
SELECT minhash_index_create('items', 'id', 'body');
SELECT id, pg_typeof(id) FROM minhash_similar('items', 'a small green frog that jumps', NULL::sku);
SELECT * FROM minhash_index_check('items');
-- among in the key's type, given as text: matched by the type's equality (1.50 = 1.5), and an
-- id of the domain's type that its CHECK refuses is an error
SELECT * FROM minhash_similar('prices', 'red wooden train with three wagons', id_type => NULL::numeric,
                              k => 5, among => '{1.50, 10.000}');
SELECT id FROM minhash_similar('items', 'a small green frog that jumps', NULL::sku, k => 5, among => '{AB-2}');
SELECT try($$SELECT * FROM minhash_similar('items', 'a small green frog', NULL::sku, k => 5, among => '{nope}')$$);
SELECT minhash_index_drop('prices'), minhash_index_drop('items');
DROP TABLE prices, items;
DROP DOMAIN sku;

-- Many texts at once: minhash_matches against brute force. Every pair at or above the
-- threshold that shares a band is found, with its exact similarity; no pair below it is.
CREATE TABLE catalog (id bigint PRIMARY KEY, body text);
INSERT INTO catalog
SELECT g, format('Item %s: %s wooden %s with %s wheels, painted %s',
                 g % 40, (ARRAY['small','large','tiny'])[g % 3 + 1],
                 (ARRAY['car','truck','bus','train'])[g % 4 + 1], g % 5 + 2,
                 (ARRAY['red','blue','green','yellow','white'])[g % 5 + 1])
FROM generate_series(1, 400) g;
SELECT minhash_index_create('catalog', 'id', 'body', threshold => 0.6);
CREATE TEMP TABLE probes AS
SELECT n, format('Item %s: %s wooden %s with %s wheels, painted %s',
                 n % 40, (ARRAY['small','large','tiny'])[n % 3 + 1],
                 (ARRAY['car','truck','bus','train'])[n % 4 + 1], n % 5 + 2, 'black') AS body
FROM generate_series(1, 60) n;
CREATE TEMP TABLE found AS
SELECT * FROM minhash_matches('catalog', (SELECT array_agg(body ORDER BY n) FROM probes));
CREATE TEMP TABLE truth AS
SELECT p.n AS probe, c.id, jaccard(p.body, c.body) AS similarity
FROM probes p CROSS JOIN catalog c WHERE jaccard(p.body, c.body) >= 0.6;
SELECT (SELECT count(*) FROM truth) AS true_pairs,
       (SELECT count(*) FROM found) AS found_pairs,
       (SELECT count(*) FROM truth t JOIN found f USING (probe, id)
        WHERE f.similarity = t.similarity) AS found_with_exact_similarity,
       (SELECT count(*) FROM found f WHERE NOT EXISTS
            (SELECT FROM truth t WHERE t.probe = f.probe AND t.id = f.id)) AS false_pairs;
-- the same as one minhash_similar per text through LATERAL
SELECT count(*) AS differences FROM (
    (SELECT * FROM found
     EXCEPT ALL
     SELECT p.n, s.id, s.similarity FROM probes p, LATERAL minhash_similar('catalog', p.body) s)
    UNION ALL
    (SELECT p.n, s.id, s.similarity FROM probes p, LATERAL minhash_similar('catalog', p.body) s
     EXCEPT ALL
     SELECT * FROM found)) d;
-- order: by probe, then most similar first; max_results applies per text; NULL texts match nothing
SELECT probe, count(*) FROM minhash_matches('catalog', ARRAY[(SELECT body FROM probes WHERE n = 1), NULL,
                                                          (SELECT body FROM probes WHERE n = 2)], max_results => 2)
GROUP BY probe ORDER BY probe;
SELECT probe, id, pg_typeof(id) FROM minhash_matches('catalog', ARRAY[(SELECT body FROM probes WHERE n = 1)],
                                                   NULL::bigint, max_results => 1);
-- a threshold below the index's: from 0.5 up, full recall (a scan of the sketches) and no
-- NOTICE; below 0.5, a NOTICE with the probability a pair at it is found
SET client_min_messages = notice;
SELECT count(*) FROM minhash_similar('catalog', (SELECT body FROM probes WHERE n = 1), threshold => 0.5);
SELECT count(*) FROM minhash_matches('catalog', ARRAY[(SELECT body FROM probes WHERE n = 1)], threshold => 0.45);
SELECT count(*) FROM minhash_similar('catalog', (SELECT body FROM probes WHERE n = 1), threshold => 0.6);
SELECT count(*) FROM minhash_duplicates('catalog', 0.5);
SELECT count(*) FROM minhash_clusters('catalog', 0.55, mode => 'representative');
SET client_min_messages = warning;
-- Lookups run in parallel workers (a LATERAL lookup per row of a parallel scan): they take no
-- transaction id there.
CREATE TABLE probe_rows AS SELECT * FROM probes;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT count(*) = (SELECT count(*) FROM found) AS same_matches
FROM probe_rows p, LATERAL minhash_similar('catalog', p.body) s;
SELECT count(*) = (SELECT count(*) FROM found) AS same_matches
FROM probe_rows p, LATERAL minhash_matches('catalog', ARRAY[p.body]) s;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE probe_rows;
SELECT count(*) FROM minhash_matches('catalog', '{}');
SELECT count(*) FROM minhash_matches('catalog', NULL);
SELECT minhash_index_drop('catalog');
DROP TABLE catalog;

-- Row-level security and privileges hold for typed lookups and minhash_matches: a role sees
-- only rows its policy shows, and one without SELECT gets 42501.
CREATE ROLE key_types_reader;
CREATE ROLE key_types_stranger;
CREATE TABLE secrets (id uuid PRIMARY KEY, owner name, body text);
INSERT INTO secrets VALUES
  ('00000000-0000-4000-8000-000000000001', 'key_types_reader', 'the quarterly numbers look very good this year'),
  ('00000000-0000-4000-8000-000000000002', 'someone_else', 'the quarterly numbers look very good this year!');
SELECT minhash_index_create('secrets', 'id', 'body');
ALTER TABLE secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON secrets FOR SELECT USING (owner = current_user);
GRANT SELECT ON secrets TO key_types_reader;
SET ROLE key_types_reader;
SELECT * FROM minhash_similar('secrets', 'the quarterly numbers look very good this year', NULL::uuid);
SELECT * FROM minhash_matches('secrets', ARRAY['the quarterly numbers look very good this year'], NULL::uuid);
-- among naming the hidden row's id too: only the row the policy shows, with k and by rows
SELECT * FROM minhash_similar('secrets', 'the quarterly numbers look very good this year', NULL::uuid,
    k => 5, among => '{00000000-0000-4000-8000-000000000001, 00000000-0000-4000-8000-000000000002}');
RESET ROLE;
SET ROLE key_types_stranger;
SELECT try($$SELECT * FROM minhash_matches('secrets', ARRAY['the quarterly numbers'], NULL::uuid)$$);
SELECT try($$SELECT * FROM minhash_similar('secrets', 'the quarterly numbers', NULL::uuid, k => 5,
                                            among => '{00000000-0000-4000-8000-000000000002}')$$);
RESET ROLE;
DROP TABLE secrets;
DROP ROLE key_types_reader, key_types_stranger;
