-- The demo: near-duplicate Debian package descriptions with the managed index.
-- Run by scripts/demo.sh as `psql -v threshold=0.8 -f demo.sql < FILE.csv`.
\set ON_ERROR_STOP on
\pset footer off
CREATE EXTENSION pg_minhash;

CREATE TABLE packages (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    description text NOT NULL,
    duplicate_of bigint
);
\copy packages (name, description) FROM pstdin WITH (FORMAT csv)

\echo
\echo '== The corpus'
SELECT count(*) AS documents, pg_size_pretty(sum(octet_length(description))) AS text
FROM packages;

\echo '== 1. One call: band table, btree index, backfill (progress NOTICEs), triggers'
\timing on
SELECT minhash_index_create('packages', 'id', 'description', threshold => :threshold);
\timing off
SELECT k, ngram, unit, threshold, bands, rows_per_band FROM minhash_indexes;
SELECT rows_indexed, keys, largest_bucket FROM minhash_index_stats('packages');

\echo '== 2. Deduplicating: clusters of near-duplicates (each named after its smallest id)'
\timing on
CREATE TABLE clusters AS SELECT * FROM minhash_clusters('packages');
\timing off
SELECT count(DISTINCT cluster_id) AS clusters,
       count(*) AS rows_in_clusters,
       count(*) FILTER (WHERE id <> cluster_id) AS rows_a_dedupe_would_delete
FROM clusters;

\echo '== The largest clusters'
SELECT count(*) AS size,
       left(string_agg(p.name, ', ' ORDER BY p.id), 60) AS packages,
       left(split_part((array_agg(p.description ORDER BY p.id))[1], E'\n', 1), 45) AS synopsis
FROM clusters c JOIN packages p ON p.id = c.id
GROUP BY c.cluster_id
ORDER BY size DESC, c.cluster_id
LIMIT 10;

\echo '== Near-duplicates that are not identical (a cluster links rows through pairs at or above'
\echo '   the threshold, so a member can be further than that from the row it keeps)'
SELECT round(jaccard(a.description, b.description)::numeric, 3) AS similarity,
       a.name AS kept, b.name AS near_duplicate,
       left(split_part(b.description, E'\n', 1), 45) AS its_synopsis
FROM clusters c
JOIN packages a ON a.id = c.cluster_id
JOIN packages b ON b.id = c.id
WHERE c.id <> c.cluster_id AND jaccard(a.description, b.description) < 0.9
ORDER BY md5(b.name)
LIMIT 10;

\echo '== 3. "What is similar to this text?"'
\set probe 'Transitional dummy package. This is a transitional package; it can safely be removed.'
\timing on
SELECT s.id, p.name, round(s.similarity::numeric, 3) AS similarity
FROM minhash_similar('packages', :'probe', threshold => 0.6, max_results => 5) s
JOIN packages p USING (id);
\timing off

\echo '== 4. Flagging duplicates on insert'
CREATE TRIGGER packages_flag BEFORE INSERT ON packages
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
INSERT INTO packages (name, description)
SELECT 'firefox-esr-l10n-xx', replace(description, 'German', 'Klingon')
FROM packages WHERE name = 'firefox-esr-l10n-de'
RETURNING id, name, duplicate_of,
          (SELECT p.name FROM packages p WHERE p.id = packages.duplicate_of) AS duplicate_of_name;
-- the index is exact: no row missing from it, no band row without its row (its progress
-- NOTICEs left out)
SET client_min_messages = warning;
SELECT * FROM minhash_index_check('packages');
RESET client_min_messages;
