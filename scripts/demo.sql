-- The demo: near-duplicate Debian package descriptions, found with the SQL-join workflow.
-- Run by scripts/demo.sh as `psql -v threshold=0.8 -f demo.sql < FILE.csv`.
\set ON_ERROR_STOP on
\pset footer off
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;

CREATE TABLE packages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    description text NOT NULL
);
\copy packages (name, description) FROM pstdin WITH (FORMAT csv)
ANALYZE packages;

\echo
\echo '== The corpus'
SELECT count(*) AS documents, pg_size_pretty(sum(octet_length(description))) AS text
FROM packages;

\echo '== LSH parameters for threshold' :threshold '(k = 128, char 5-grams)'
SELECT bands, rows_per_band, round(recall_at_threshold::numeric, 4) AS recall_at_threshold
FROM lsh_params(:threshold) LIMIT 1 \gset
SELECT :bands AS bands, :rows_per_band AS rows_per_band, :recall_at_threshold AS recall_at_threshold;

\timing on
\echo '== 1. Signatures, and rows with identical signatures grouped (a bucket of 1,000 copies'
\echo '      of one text then costs 1,000 rows, not 500,000 pairs)'
CREATE TABLE signatures AS
SELECT min(id) AS rep, array_agg(id ORDER BY id) AS members, sig
FROM (SELECT id, minhash(description) AS sig FROM packages) s
GROUP BY sig;

\echo '== 2. The band-key table and its btree index'
CREATE TABLE package_bands AS
SELECT rep AS id, unnest(lsh_bands(sig, :bands, :rows_per_band)) AS key FROM signatures;
CREATE INDEX package_bands_key ON package_bands (key);

\echo '== 3. Candidate pairs (sharing a band key), verified with exact Jaccard'
CREATE TABLE candidates AS
SELECT DISTINCT a.id AS id_a, b.id AS id_b
FROM package_bands a JOIN package_bands b ON a.key = b.key AND a.id < b.id;
CREATE TABLE near_duplicates AS
SELECT c.id_a, c.id_b, jaccard(pa.description, pb.description) AS similarity
FROM candidates c
JOIN packages pa ON pa.id = c.id_a
JOIN packages pb ON pb.id = c.id_b
WHERE jaccard(pa.description, pb.description) >= :threshold;
-- rows sharing a signature with their group's representative, verified too
INSERT INTO near_duplicates
SELECT s.rep, m, jaccard(pr.description, pm.description)
FROM signatures s, unnest(s.members) m, packages pr, packages pm
WHERE m <> s.rep AND pr.id = s.rep AND pm.id = m
  AND jaccard(pr.description, pm.description) >= :threshold;

\echo '== 4. Groups: connected components of the near-duplicate graph'
CREATE TABLE groups AS
SELECT id, id AS group_id
FROM (SELECT id_a AS id FROM near_duplicates UNION SELECT id_b FROM near_duplicates) ids;
CREATE INDEX ON groups (id);
DO $$
BEGIN
    LOOP
        UPDATE groups g SET group_id = m.group_id
        FROM (SELECT e.id, min(g2.group_id) AS group_id
              FROM (SELECT id_a AS id, id_b AS other FROM near_duplicates
                    UNION ALL SELECT id_b, id_a FROM near_duplicates) e
              JOIN groups g2 ON g2.id = e.other
              GROUP BY e.id) m
        WHERE g.id = m.id AND m.group_id < g.group_id;
        EXIT WHEN NOT FOUND;
    END LOOP;
END $$;
\timing off

\echo
\echo '== What was found'
SELECT (SELECT count(*) FROM packages) AS documents,
       (SELECT count(*) FROM signatures) AS distinct_signatures,
       (SELECT count(*) FROM candidates) AS candidate_pairs,
       (SELECT count(*) FROM near_duplicates) AS verified_pairs,
       (SELECT count(DISTINCT group_id) FROM groups) AS groups,
       (SELECT count(*) FROM groups WHERE id <> group_id) AS rows_a_dedupe_would_delete;

\echo '== The largest groups'
SELECT count(*) AS size,
       left(string_agg(p.name, ', ' ORDER BY p.id), 70) AS packages,
       left(split_part(min(p.description), E'\n', 1), 50) AS synopsis
FROM groups g JOIN packages p ON p.id = g.id
GROUP BY g.group_id
ORDER BY size DESC, g.group_id
LIMIT 12;

\echo '== Near-duplicates that are not identical: how the texts differ'
SELECT round(d.similarity::numeric, 3) AS similarity, pa.name AS package_a, pb.name AS package_b,
       left(split_part(pa.description, E'\n', 1), 38) AS synopsis_a,
       left(split_part(pb.description, E'\n', 1), 38) AS synopsis_b
FROM near_duplicates d
JOIN packages pa ON pa.id = d.id_a
JOIN packages pb ON pb.id = d.id_b
WHERE d.similarity < 0.9
ORDER BY md5(pa.name || pb.name)
LIMIT 12;

\echo '== How similar the verified pairs are'
SELECT width_bucket(similarity, :threshold, 1.0000001, 4) AS bucket,
       round(min(similarity)::numeric, 3) AS from_similarity,
       round(max(similarity)::numeric, 3) AS to_similarity,
       count(*) AS pairs
FROM near_duplicates GROUP BY 1 ORDER BY 1;
