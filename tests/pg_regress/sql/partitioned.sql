-- Partitioned tables: one index over the whole partition tree, kept exact through writes to
-- the table and to its partitions, rows moving between partitions, and partitions created,
-- attached, detached, truncated and dropped; searched, deduplicated and flagged.
SET client_min_messages = warning;

-- The common shape: an identity id, a key that must hold the partition key, range partitions
-- by time; the text comes from an expression.
CREATE TABLE tickets (id bigint GENERATED ALWAYS AS IDENTITY, created_at date NOT NULL,
                      subject text, body text, duplicate_of bigint,
                      PRIMARY KEY (id, created_at)) PARTITION BY RANGE (created_at);
CREATE TABLE tickets_2025 PARTITION OF tickets FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE tickets_2026 PARTITION OF tickets FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
INSERT INTO tickets (created_at, subject, body)
SELECT date '2025-01-01' + (g * 3), format('Printer %s', g % 17),
       format('The printer on floor %s jams when printing %s pages in duplex mode', g % 23, g % 9)
FROM generate_series(1, 240) g;
SELECT minhash_index_create('tickets', 'id',
    text_expression => $$coalesce(subject, '') || ': ' || body$$);
SELECT partitions FROM minhash_indexes WHERE tbl = 'tickets'::regclass;
SELECT tgrelid::regclass AS tbl, count(*) AS sync_triggers FROM pg_trigger
WHERE tgfoid = 'minhash_internal._minhash_sync()'::regprocedure GROUP BY 1 ORDER BY 1;
SELECT * FROM minhash_index_check('tickets');

-- searches read every partition: exact against brute force
SELECT count(*) AS pairs FROM minhash_duplicates('tickets', 0.8);
WITH texts AS (SELECT id, coalesce(subject, '') || ': ' || body AS t FROM tickets)
SELECT count(*) AS truth FROM texts a JOIN texts b ON a.id < b.id WHERE jaccard(a.t, b.t) >= 0.8;
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('tickets', 'Printer 3: The printer on floor 3 jams when printing 3 pages in duplex mode')
ORDER BY similarity DESC, id LIMIT 3;

-- writes through the table and straight into a partition (such a write names its id here:
-- PostgreSQL 15 gives a partition no identity default, PostgreSQL 18 the table's)
INSERT INTO tickets (created_at, subject, body)
VALUES ('2026-05-01', 'Scanner', 'the scanner in room 12 shows a paper feed error');
INSERT INTO tickets_2025 (id, created_at, subject, body) OVERRIDING SYSTEM VALUE
VALUES (1000, '2025-06-01', 'Scanner', 'the scanner in room 12 shows a paper feed error!');
UPDATE tickets_2025 SET body = body || ' again' WHERE id = 1000;
DELETE FROM tickets_2026 WHERE id = 200;
SELECT * FROM minhash_index_check('tickets');
-- a row moved to another partition (its text unchanged, then changed too)
UPDATE tickets SET created_at = '2026-07-01' WHERE id = 1000;
SELECT tableoid::regclass AS partition FROM tickets WHERE id = 1000;
SELECT * FROM minhash_index_check('tickets');
UPDATE tickets SET created_at = '2025-07-01', body = 'the scanner in room 14 shows a paper feed error'
WHERE id = 1000;
SELECT * FROM minhash_index_check('tickets');
SELECT id FROM minhash_similar('tickets', 'Scanner: the scanner in room 14 shows a paper feed error');

-- A partition created later gets the triggers; one attached later, its rows' band rows too,
-- whatever the order of its columns.
CREATE TABLE tickets_2027 PARTITION OF tickets FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
INSERT INTO tickets (created_at, subject, body)
VALUES ('2027-02-01', 'Badge', 'my badge does not open the door of the third floor');
CREATE TABLE tickets_2024 (body text, duplicate_of bigint, subject text, created_at date NOT NULL,
                           id bigint NOT NULL, PRIMARY KEY (id, created_at));
INSERT INTO tickets_2024 (id, created_at, subject, body)
VALUES (2000, '2024-03-01', 'Badge', 'my badge does not open the door of the third floor.'),
       (2001, '2024-04-01', NULL, 'the coffee machine on floor 2 is out of order');
ALTER TABLE tickets ATTACH PARTITION tickets_2024 FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
SELECT partitions FROM minhash_indexes WHERE tbl = 'tickets'::regclass;
SELECT * FROM minhash_index_check('tickets');
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('tickets', 'Badge: my badge does not open the door of the third floor') ORDER BY id;
-- writes straight into it read the expression over its own column order
INSERT INTO tickets_2024 (id, created_at, subject, body) OVERRIDING SYSTEM VALUE
VALUES (2002, '2024-05-01', 'Coffee', 'the coffee machine on floor 3 is out of order');
UPDATE tickets_2024 SET subject = 'Coffee!' WHERE id = 2002;
SELECT * FROM minhash_index_check('tickets');

-- A detached partition takes its rows' band rows and its triggers along; its writes no longer
-- reach the index.
ALTER TABLE tickets DETACH PARTITION tickets_2024;
SELECT * FROM minhash_index_check('tickets');
SELECT count(*) AS detached_triggers FROM pg_trigger WHERE tgrelid = 'tickets_2024'::regclass;
INSERT INTO tickets_2024 (id, created_at, body) VALUES (2003, '2024-06-01', 'no longer indexed');
SELECT count(*) AS band_rows_of_2003 FROM tickets_minhash_bands WHERE id = 2003;
-- attached again: indexed again
ALTER TABLE tickets ATTACH PARTITION tickets_2024 FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
SELECT * FROM minhash_index_check('tickets');

-- TRUNCATE and DROP of a partition take its rows' band rows along
TRUNCATE tickets_2027;
SELECT * FROM minhash_index_check('tickets');
DROP TABLE tickets_2024;
SELECT * FROM minhash_index_check('tickets');
SELECT partitions FROM minhash_indexes WHERE tbl = 'tickets'::regclass;

-- A sub-partitioned partition: its partitions get the triggers too.
CREATE TABLE tickets_2028 PARTITION OF tickets FOR VALUES FROM ('2028-01-01') TO ('2029-01-01')
    PARTITION BY RANGE (created_at);
CREATE TABLE tickets_2028_h1 PARTITION OF tickets_2028 FOR VALUES FROM ('2028-01-01') TO ('2028-07-01');
INSERT INTO tickets_2028 (id, created_at, body) OVERRIDING SYSTEM VALUE VALUES (3000, '2028-02-01', 'routed by a partition');
INSERT INTO tickets (created_at, body) VALUES ('2028-03-01', 'routed by the table');
SELECT * FROM minhash_index_check('tickets');
TRUNCATE tickets;
SELECT * FROM minhash_index_check('tickets');
SELECT count(*) AS band_rows FROM tickets_minhash_bands;
INSERT INTO tickets (created_at, subject, body)
SELECT date '2025-01-01' + (g * 3), format('Printer %s', g % 17),
       format('The printer on floor %s jams when printing %s pages in duplex mode', g % 23, g % 9)
FROM generate_series(1, 240) g;
SELECT * FROM minhash_index_check('tickets');

-- The flag trigger on the partitioned table fires on each partition (as a clone) and checks
-- against every partition; 'reject' holds across partitions.
CREATE TRIGGER tickets_flag BEFORE INSERT OR UPDATE ON tickets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
INSERT INTO tickets (created_at, subject, body)
VALUES ('2026-09-01', 'Printer 5', 'The printer on floor 5 jams when printing 5 pages in duplex mode!')
RETURNING duplicate_of IS NOT NULL AS flagged;
INSERT INTO tickets_2025 (id, created_at, subject, body) OVERRIDING SYSTEM VALUE
VALUES (4000, '2025-09-01', 'Printer 5', 'The printer on floor 5 jams when printing 5 pages in duplex mode?')
RETURNING duplicate_of IS NOT NULL AS flagged;
SELECT * FROM minhash_index_check('tickets');
CREATE TRIGGER tickets_reject BEFORE INSERT ON tickets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('', '', 'reject');
SELECT try($$INSERT INTO tickets_2026 (id, created_at, subject, body) OVERRIDING SYSTEM VALUE
             VALUES (4001, '2026-10-01', 'Printer 5', 'The printer on floor 5 jams when printing 5 pages in duplex mode')$$);
SELECT try($$INSERT INTO tickets (created_at, subject, body)
             VALUES ('2025-10-01', 'Printer 5', 'The printer on floor 5 jams when printing 5 pages in duplex mode')$$);
SELECT * FROM minhash_index_check('tickets');
-- keep-one dedup over every partition
SELECT count(*) AS members, count(DISTINCT cluster_id) AS kept
FROM minhash_clusters('tickets', mode => 'representative');

-- A writer with INSERT on one partition only: the sync writes as the table's owner.
CREATE ROLE partition_writer;
GRANT INSERT, SELECT ON tickets_2026 TO partition_writer;
SET ROLE partition_writer;
INSERT INTO tickets_2026 (id, created_at, body) OVERRIDING SYSTEM VALUE VALUES (5000, '2026-11-01', 'a writer of one partition');
SELECT try($$SELECT * FROM minhash_similar('tickets', 'a writer of one partition')$$);
RESET ROLE;
SELECT * FROM minhash_index_check('tickets');
SELECT minhash_index_drop('tickets', cascade => true);
SELECT count(*) AS sync_triggers_left FROM pg_trigger
WHERE tgfoid = 'minhash_internal._minhash_sync()'::regprocedure;
DROP TABLE tickets;
DROP ROLE partition_writer;

-- Hash partitions of a uuid key, the text from an expression: created, kept exact, searched,
-- deduplicated and flagged, the key in its own type.
CREATE TABLE notes (id uuid PRIMARY KEY, title text, body text, duplicate_of uuid)
    PARTITION BY HASH (id);
CREATE TABLE notes_0 PARTITION OF notes FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE notes_1 PARTITION OF notes FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE notes_2 PARTITION OF notes FOR VALUES WITH (MODULUS 3, REMAINDER 2);
INSERT INTO notes (id, title, body)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, format('Note %s', g % 30),
       format('Remember to water the plants in room %s every %s days', g % 11, g % 7)
FROM generate_series(1, 150) g;
SELECT minhash_index_create('notes', 'id', text_expression => $$title || ' ' || body$$,
                            threshold => 0.7);
SELECT * FROM minhash_index_check('notes');
SELECT count(*) AS pairs FROM minhash_duplicates('notes', NULL::uuid);
WITH texts AS (SELECT id, title || ' ' || body AS t FROM notes)
SELECT count(*) AS truth FROM texts a JOIN texts b ON a.id < b.id WHERE jaccard(a.t, b.t) >= 0.7;
SELECT id FROM minhash_similar('notes', 'Note 4 Remember to water the plants in room 4 every 4 days',
                               NULL::uuid, threshold => 0.95);
CREATE TRIGGER notes_reject BEFORE INSERT OR UPDATE ON notes
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of', '0.9', 'reject');
SELECT try($$INSERT INTO notes (id, title, body) VALUES ('10000000-0000-4000-8000-000000000001',
             'Note 4', 'Remember to water the plants in room 4 every 4 days!')$$);
INSERT INTO notes (id, title, body)
VALUES ('10000000-0000-4000-8000-000000000002', 'Note 99', 'Order more coffee for the kitchen');
SELECT * FROM minhash_index_check('notes');
SELECT count(DISTINCT cluster_id) AS kept FROM minhash_clusters('notes', NULL::uuid, mode => 'representative');
SELECT minhash_index_drop('notes', cascade => true);
DROP TABLE notes;

-- Ids that repeat across partitions (the key holds the partition key, so PostgreSQL allows
-- them): each row is indexed and found on its own.
CREATE TABLE logs (id int NOT NULL, day date NOT NULL, line text, PRIMARY KEY (id, day))
    PARTITION BY RANGE (day);
CREATE TABLE logs_a PARTITION OF logs FOR VALUES FROM ('2025-01-01') TO ('2025-07-01');
CREATE TABLE logs_b PARTITION OF logs FOR VALUES FROM ('2025-07-01') TO ('2026-01-01');
INSERT INTO logs VALUES (1, '2025-02-01', 'disk almost full on host alpha'),
                        (1, '2025-08-01', 'disk almost full on host alpha!'),
                        (2, '2025-03-01', 'backup finished without errors');
SELECT minhash_index_create('logs', 'id', 'line');
SELECT * FROM minhash_index_check('logs');
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('logs', 'disk almost full on host alpha') ORDER BY similarity DESC;
SELECT * FROM minhash_duplicates('logs');
SELECT minhash_index_drop('logs');
DROP TABLE logs;

-- What is refused.
\set VERBOSITY verbose
\set SHOW_CONTEXT never
CREATE TABLE parted (id int, day date, body text, PRIMARY KEY (id, day)) PARTITION BY RANGE (day);
CREATE TABLE parted_a PARTITION OF parted FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
-- a partition: its root is indexed instead
SELECT minhash_index_create('parted_a', 'id', 'body');
-- a key that does not hold the id
CREATE TABLE by_day (id int, day date, body text, UNIQUE (day)) PARTITION BY RANGE (day);
SELECT minhash_index_create('by_day', 'id', 'body');
\set VERBOSITY terse
SELECT minhash_index_create('parted', 'id', 'body');
-- an indexed table does not become a partition of another
CREATE TABLE outer_parted (id int, day date, body text) PARTITION BY LIST (body);
SELECT try($$ALTER TABLE outer_parted ATTACH PARTITION parted FOR VALUES IN ('x')$$);
SELECT * FROM minhash_index_check('parted');
SELECT minhash_index_drop('parted');
DROP TABLE parted, by_day, outer_parted;
