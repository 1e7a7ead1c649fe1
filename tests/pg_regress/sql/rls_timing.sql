-- No work on rows the caller cannot see. Where row-level security hides rows of the table from
-- the caller, a lookup does nothing with a hidden row but read its band rows under the text's
-- band keys and ask the caller's own query for it (the policy decides there, before anything
-- else reads the row): it filters no hidden sketch, reads and compares no hidden text, and
-- minhash_explain counts only the rows the caller may see. So its time tells the caller no more
-- of the hidden rows than how many lie under the text's band keys, whatever their texts.
-- Asserted through a policy that counts its calls: a lookup calls it exactly once per distinct
-- row under the keys (and, where it scans every row's sketch, once more per row of the table),
-- whatever the rows' texts; and results under the policy equal brute force over the visible
-- rows.
SET client_min_messages = warning;
CREATE ROLE regress_rls_owner;
CREATE ROLE regress_rls_reader;
GRANT CREATE ON SCHEMA public TO regress_rls_owner;
-- the policy's calls, counted (a sequence: its count survives whatever the lookup does)
CREATE SEQUENCE public.rls_calls;
GRANT USAGE, SELECT ON SEQUENCE public.rls_calls TO PUBLIC;
CREATE FUNCTION public.rls_shown(author text) RETURNS boolean LANGUAGE plpgsql COST 1000 AS $$
BEGIN
    PERFORM pg_catalog.nextval('public.rls_calls');
    RETURN author = current_user;
END $$;
-- policy_calls(q): the calls of the policy while the statement q runs
CREATE FUNCTION public.policy_calls(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    before bigint := pg_catalog.nextval('public.rls_calls');
BEGIN
    EXECUTE q;
    RETURN pg_catalog.nextval('public.rls_calls') - before - 1;
END $$;

-- 1,500 rows of the owner, hidden from the reader: patients, drugs and doses.
SET ROLE regress_rls_owner;
CREATE TABLE diary (id int PRIMARY KEY, author text NOT NULL, body text);
INSERT INTO diary
SELECT g, 'regress_rls_owner',
       format('patient %s of ward %s was prescribed %s mg of %s, to be taken %s',
              g, g % 7, 10 * (g % 13), (ARRAY['aspirin', 'ibuprofen', 'codeine', 'insulin'])[1 + g % 4],
              (ARRAY['daily', 'twice a day', 'at night'])[1 + g % 3])
FROM generate_series(1, 1500) g;
ALTER TABLE diary ENABLE ROW LEVEL SECURITY;
CREATE POLICY shown ON diary FOR SELECT USING (public.rls_shown(author));
GRANT SELECT ON diary TO regress_rls_reader;
SELECT minhash_index_create('diary', 'id', 'body', threshold => 0.6, format => 1) IS NOT NULL AS created;
ANALYZE diary;
RESET ROLE;
-- the distinct rows under the band keys of row 77's text (its own band keys)
SELECT count(DISTINCT o.id) AS under_keys FROM diary_minhash_bands b
JOIN diary_minhash_bands o ON o.key = b.key WHERE b.id = 77 \gset
SELECT :under_keys > 1 AS crowded_keys;

-- 1. The reader sees no row: every lookup returns nothing; one of the exact text of a hidden
-- row calls the policy once per row under its keys, with k once more per row of the table.
SET ROLE regress_rls_reader;
SELECT count(*) AS visible FROM diary;
SELECT count(*) AS found FROM minhash_similar('diary',
    'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night');
SELECT count(*) AS found FROM minhash_similar('diary',
    'patient 77 of ward 0 was prescribed 130 mg of ibuprofen, to be taken at night');
SELECT count(*) AS found FROM minhash_similar('diary', 'a text unlike any other', k => 3);
SELECT public.policy_calls($$SELECT count(*) FROM minhash_similar('diary',
    'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night')$$)
    = :under_keys AS exact_guess_calls_once_per_row_under_its_keys;
SELECT public.policy_calls($$SELECT count(*) FROM minhash_similar('diary',
    'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night', k => 3)$$)
    = :under_keys + 1500 AS k_calls_once_more_per_row;
SELECT public.policy_calls($$SELECT count(*) FROM minhash_similar('diary', 'a text unlike any other',
                                                                k => 3)$$) AS unrelated_k_calls;
-- minhash_explain counts only the rows the reader may see: none
SELECT regexp_replace(e, '[0-9]+\.[0-9]+ ms', 'N ms', 'g') AS explained
FROM minhash_explain('diary',
    'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night', k => 3) e;
RESET ROLE;
-- the owner, whom the policy does not apply to, sees the counts of every row
SET ROLE regress_rls_owner;
SELECT e ~ '^  (Band rows sharing a key: [1-9]|Row-level)' AS counted
FROM minhash_explain('diary',
    'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night') e
WHERE e ~ '^  (Band rows|Row-level)';
RESET ROLE;

-- 2. Rows of the reader's own beside them, near copies of hidden rows: results equal brute
-- force over the rows the reader sees, by threshold, below it (a scan) and with k.
SET ROLE regress_rls_owner;
INSERT INTO diary
SELECT 2000 + g, 'regress_rls_reader',
       format('patient %s of ward %s was prescribed %s mg of %s, to be taken %s',
              g, g % 7, 10 * (g % 13), (ARRAY['aspirin', 'ibuprofen', 'codeine', 'insulin'])[1 + g % 4],
              (ARRAY['daily', 'twice a day', 'at night'])[1 + g % 3]) || repeat('!', g % 2)
FROM generate_series(70, 90) g;
RESET ROLE;
SET ROLE regress_rls_reader;
CREATE FUNCTION pg_temp.brute(doc text, threshold float8) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT array_agg(id::bigint ORDER BY jaccard(body, doc) DESC, id) FROM diary
    WHERE jaccard(body, doc) >= threshold $$;
SELECT count(*) AS visible FROM diary;
SELECT t.threshold, array_agg(s.id ORDER BY s.similarity DESC, s.id)
           = pg_temp.brute('patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night',
                           t.threshold) AS equals_brute_force,
       count(*) FILTER (WHERE s.id < 2000) AS hidden
FROM (VALUES (0.6), (0.5)) t(threshold),
     minhash_similar('diary', 'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night',
                     threshold => t.threshold) s
GROUP BY t.threshold ORDER BY t.threshold;
SELECT array_agg(id ORDER BY similarity DESC, id)
           = (pg_temp.brute('patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night', 0))[1:5]
           AS k_equals_brute_force
FROM minhash_similar('diary', 'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night', k => 5);
SELECT probe, count(*) FILTER (WHERE id < 2000) AS hidden, count(*) > 0 AS found
FROM minhash_matches('diary', ARRAY['patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night',
                                    'patient 80 of ward 3 was prescribed 20 mg of aspirin, to be taken at night'])
GROUP BY probe ORDER BY probe;
SELECT regexp_replace(e, '[0-9]+\.[0-9]+ ms', 'N ms', 'g') AS explained
FROM minhash_explain('diary',
    'patient 77 of ward 0 was prescribed 120 mg of ibuprofen, to be taken at night') e;
DROP FUNCTION pg_temp.brute(text, float8);
RESET ROLE;

DROP TABLE diary;
DROP FUNCTION public.policy_calls(text), public.rls_shown(text);
DROP SEQUENCE public.rls_calls;
REVOKE CREATE ON SCHEMA public FROM regress_rls_owner;
DROP ROLE regress_rls_owner, regress_rls_reader;
