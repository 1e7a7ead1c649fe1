-- How a lookup reads the band table and the texts, and its per-backend cache of catalog rows.
-- A lookup reads the band index directly (index access method, visibility map, heap only for
-- pages not all-visible) and the candidates' texts through the table's unique index when it
-- may; otherwise it runs its SQL queries. Both must give exactly the same rows, under every
-- visibility case.
SET client_min_messages = warning;

-- 300 texts in clusters of near-duplicates: every text has 0-2 others within reach.
CREATE TABLE notes (id bigint PRIMARY KEY, body text);
INSERT INTO notes
SELECT g, format('note %s about topic %s: remember to %s the %s before %s%s',
                 g / 3, g % 17, (ARRAY['check', 'update', 'send', 'file'])[1 + (g / 3) % 4],
                 (ARRAY['report', 'invoice', 'draft', 'ticket', 'build'])[1 + (g / 3) % 5],
                 (ARRAY['monday', 'noon', 'the meeting'])[1 + (g / 3) % 3],
                 repeat('!', g % 3))
FROM generate_series(1, 300) g;
SELECT minhash_index_create('notes', 'id', 'body', threshold => 0.7) IS NOT NULL AS created;

-- Every row looked up by its own text, as (probe, id, similarity) rows.
CREATE FUNCTION pg_temp.all_lookups() RETURNS TABLE (probe bigint, id bigint, similarity float8)
LANGUAGE sql AS $$
    SELECT n.id, s.id, round(s.similarity::numeric, 6)::float8
    FROM notes n, minhash_similar('notes', n.body) s
$$;

-- Rows of all_lookups() that differ from a table of earlier lookups, in either direction.
CREATE FUNCTION pg_temp.differences(earlier regclass) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM (
        (SELECT * FROM %1$s EXCEPT ALL SELECT * FROM pg_temp.all_lookups())
        UNION ALL
        (SELECT * FROM pg_temp.all_lookups() EXCEPT ALL SELECT * FROM %1$s)) d', earlier)
    INTO n;
    RETURN n;
END $$;

-- Freshly written pages are not all-visible: every candidate is checked in the heap.
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
CREATE TEMP TABLE direct_fresh AS SELECT * FROM pg_temp.all_lookups();
SELECT count(*) AS matches, count(DISTINCT probe) AS probes FROM direct_fresh;

-- After VACUUM the visibility map answers instead; same rows.
VACUUM notes_minhash_bands;
SELECT pg_temp.differences('direct_fresh') AS differences;

-- SERIALIZABLE transactions use the SQL query (it takes the predicate locks); same rows.
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_fresh') AS differences;
COMMIT;

-- Rows deleted, updated or inserted in this transaction: seen exactly as SQL sees them, and
-- gone again after ROLLBACK.
BEGIN;
DELETE FROM notes WHERE id IN (10, 11);
UPDATE notes SET body = 'a completely different text now' WHERE id = 20;
INSERT INTO notes VALUES (1000, (SELECT body FROM notes WHERE id = 30) || '?');
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 12));
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 21));
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
CREATE TEMP TABLE direct_changed AS SELECT * FROM pg_temp.all_lookups();
-- the SQL query over the same rows, for comparison: of format 2 (the default) a lookup reads
-- the B-tree of every band directly or none, so one missing is enough
DROP INDEX notes_minhash_bands_key7_idx;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_changed') AS differences;
ROLLBACK;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_fresh') AS differences;

-- Another B-tree led by the band's key column serves as well; a hash index, a partial one or
-- one led by another column does not.
BEGIN;
DROP INDEX notes_minhash_bands_key1_idx;
CREATE INDEX notes_hash ON notes_minhash_bands USING hash (key1);
CREATE INDEX notes_partial ON notes_minhash_bands (key1) WHERE id > 0;
CREATE INDEX notes_second ON notes_minhash_bands (id, key1);
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_fresh') AS differences;
CREATE INDEX notes_other ON notes_minhash_bands (key1, id) INCLUDE (sketch2);
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_fresh') AS differences;
ROLLBACK;

-- Of format 1 (format => 1): one B-tree (key, id) INCLUDE (sketch1, sketch2), read alone; the
-- same rows, read directly and by SQL.
SELECT minhash_index_rebuild('notes', format => 1) > 0 AS rebuilt;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_fresh') AS differences;
BEGIN;
DELETE FROM notes WHERE id IN (10, 11);
UPDATE notes SET body = 'a completely different text now' WHERE id = 20;
INSERT INTO notes VALUES (1000, (SELECT body FROM notes WHERE id = 30) || '?');
CREATE TEMP TABLE direct_changed AS SELECT * FROM pg_temp.all_lookups();
DROP INDEX notes_minhash_bands_key_id_sketch1_sketch2_idx;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_changed') AS differences;
ROLLBACK;
-- another B-tree with the same columns in any order after the key serves as well; a hash
-- index or a partial one does not
BEGIN;
DROP INDEX notes_minhash_bands_key_id_sketch1_sketch2_idx;
CREATE INDEX notes_hash ON notes_minhash_bands USING hash (key);
CREATE INDEX notes_partial ON notes_minhash_bands (key, id, sketch1, sketch2) WHERE id > 0;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_fresh') AS differences;
CREATE INDEX notes_other ON notes_minhash_bands (key) INCLUDE (sketch2, id, sketch1);
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT pg_temp.differences('direct_fresh') AS differences;
ROLLBACK;
SELECT minhash_index_rebuild('notes', format => 2) > 0 AS rebuilt;

-- A renamed band table is followed.
ALTER TABLE notes_minhash_bands RENAME TO notes_bands_renamed;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
ALTER TABLE notes_bands_renamed RENAME TO notes_minhash_bands;

-- Texts stored out of line and compressed are read like any other.
INSERT INTO notes VALUES (2000, repeat('a long text that is stored out of line ', 5000)),
                         (2001, repeat('a long text that is stored out of line ', 5000) || '!');
SELECT pg_column_size(body) < length(body) AS compressed FROM notes WHERE id = 2000;
SELECT * FROM minhash_similar('notes', repeat('a long text that is stored out of line ', 5000) || '?');
DELETE FROM notes WHERE id >= 2000;

-- Column privileges on (id, body) alone: texts come through the SQL query.
CREATE ROLE regress_minhash_columns;
GRANT SELECT (id, body) ON notes TO regress_minhash_columns;
SET ROLE regress_minhash_columns;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
RESET ROLE;
-- Row-level security on the table: texts through the SQL query, which applies the policy.
GRANT SELECT ON notes TO regress_minhash_columns;
ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
CREATE POLICY even ON notes FOR SELECT USING (id % 2 = 0);
SET ROLE regress_minhash_columns;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
-- minhash_explain counts only the rows the policy shows (a line says so)
SELECT regexp_replace(e, '[0-9]+\.[0-9]+ ms', 'N ms', 'g') AS explained
FROM minhash_explain('notes', (SELECT body FROM notes WHERE id = 30)) e;
-- the k most similar rows and a threshold below the index's (both scan every row's sketch as
-- the owner) return only rows the policy shows: those brute force finds among them
SELECT count(*) FILTER (WHERE id % 2 = 1) AS hidden, count(*) AS found,
       array_agg(id ORDER BY similarity DESC, id) = (
           SELECT array_agg(id) FROM (
               SELECT id FROM notes ORDER BY jaccard(body, (SELECT body FROM notes WHERE id = 30)) DESC, id
               LIMIT 5) b) AS equals_brute_force
FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30), k => 5);
SELECT count(*) FILTER (WHERE id % 2 = 1) AS hidden, count(*) > 0 AS found,
       array_agg(id ORDER BY id) = (
           SELECT array_agg(id ORDER BY id) FROM notes
           WHERE jaccard(body, (SELECT body FROM notes WHERE id = 30)) >= 0.5) AS equals_brute_force
FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30), threshold => 0.5);
RESET ROLE;
DROP POLICY even ON notes;
ALTER TABLE notes DISABLE ROW LEVEL SECURITY;
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
REVOKE ALL ON notes FROM regress_minhash_columns;
DROP ROLE regress_minhash_columns;

-- The band table is private to the table's owner: a role with SELECT on the table needs nothing
-- on it, and reads the band index directly; one without SELECT on the table gets 42501.
CREATE ROLE regress_minhash_lookup;
GRANT SELECT ON notes TO regress_minhash_lookup;
SET ROLE regress_minhash_lookup;
SELECT * FROM minhash_internal._minhash_direct_reads('notes');
SELECT * FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
SELECT try($$SELECT * FROM notes_minhash_bands$$);
RESET ROLE;
REVOKE SELECT ON notes FROM regress_minhash_lookup;
SET ROLE regress_minhash_lookup;
SELECT try($$SELECT * FROM minhash_similar('notes', 'note 10 about topic 13')$$);
SELECT try($$SELECT * FROM minhash_explain('notes', 'note 10 about topic 13')$$);
RESET ROLE;
DROP ROLE regress_minhash_lookup;

-- The catalog row is cached per backend; changing it takes effect at once, and a rolled-back
-- change is forgotten.
SELECT count(*) AS at_0_7 FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
UPDATE minhash_indexes SET threshold = 0.99 WHERE tbl = 'notes'::regclass;
SELECT count(*) AS at_0_99 FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
BEGIN;
UPDATE minhash_indexes SET threshold = 0.7 WHERE tbl = 'notes'::regclass;
SELECT count(*) AS at_0_7 FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
ROLLBACK;
SELECT count(*) AS at_0_99 FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));
BEGIN;
TRUNCATE minhash_indexes;
SELECT count(*) FROM minhash_similar('notes', 'x');
ROLLBACK;
SELECT count(*) AS at_0_99 FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30));

-- (Another backend's changes to the catalog and the band indexes: tests/isolation/specs/
-- cache_invalidation.spec.)

-- Similar rows among those a WHERE clause keeps: minhash_similar without max_results returns
-- every row at or above the threshold it finds, so joining it to the table, filtering and then
-- ordering and limiting loses nothing to the filter: at 0.8, where this index (built for 0.7)
-- finds a pair with probability 0.9999, it gives what brute force over the filtered rows gives
-- (the two most similar matching rows at or above 0.8), for every row's text as the probe.
CREATE TEMP TABLE filtered_found AS
SELECT n.id AS probe, f.id, round(f.similarity::numeric, 6) AS similarity
FROM notes n, LATERAL (
    SELECT s.id, s.similarity
    FROM minhash_similar('notes', n.body, threshold => 0.8) s
    JOIN notes t ON t.id = s.id
    WHERE t.id % 3 = 0 AND t.id <> n.id
    ORDER BY s.similarity DESC, s.id
    LIMIT 2) f;
CREATE TEMP TABLE filtered_truth AS
SELECT n.id AS probe, f.id, round(f.similarity::numeric, 6) AS similarity
FROM notes n, LATERAL (
    SELECT t.id, jaccard(t.body, n.body) AS similarity
    FROM notes t
    WHERE t.id % 3 = 0 AND t.id <> n.id AND jaccard(t.body, n.body) >= 0.8
    ORDER BY 2 DESC, t.id
    LIMIT 2) f;
SELECT (SELECT count(*) FROM filtered_truth) AS true_rows,
       (SELECT count(*) FROM filtered_truth) > 50 AS enough,
       (SELECT count(*) FROM ((SELECT * FROM filtered_found EXCEPT ALL SELECT * FROM filtered_truth)
                              UNION ALL
                              (SELECT * FROM filtered_truth EXCEPT ALL SELECT * FROM filtered_found)) d)
           AS differences;

-- minhash_explain shows what one lookup did (times masked): the band rows it met, the
-- candidates left after the sketch filter, how it read them, and the rows it found, as many
-- as minhash_similar returns. Direct reads here; the SQL queries under SERIALIZABLE.
CREATE FUNCTION pg_temp.explained(doc text, threshold float8 DEFAULT NULL) RETURNS SETOF text
LANGUAGE sql AS $$
    SELECT regexp_replace(e, '[0-9]+\.[0-9]+ ms', 'N ms', 'g')
    FROM minhash_explain('notes', doc, threshold) e
$$;
SELECT * FROM pg_temp.explained((SELECT body FROM notes WHERE id = 30), 0.7);
SELECT count(*) AS similar_rows
FROM minhash_similar('notes', (SELECT body FROM notes WHERE id = 30), 0.7);
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT * FROM pg_temp.explained((SELECT body FROM notes WHERE id = 30), 0.7);
COMMIT;
-- a text without shingles probes nothing; NULL text, the same
SELECT * FROM pg_temp.explained('');
SELECT * FROM pg_temp.explained(NULL);
SELECT try($$SELECT * FROM minhash_explain(NULL, 'x')$$);
SELECT try($$SELECT * FROM minhash_explain('notes', 'x', 2)$$);

SELECT minhash_index_drop('notes');
DROP TABLE notes;
