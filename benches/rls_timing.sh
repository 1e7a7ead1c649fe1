#!/usr/bin/env bash
# What a lookup's time tells a role about rows row-level security hides from it, and what a
# lookup costs where none are hidden. An owner's table of 3,000 rows (people, diagnoses, doses)
# under a policy that hides every row from a reader role; the reader times minhash_similar
# (median of N calls, 200 by default) for (a) the exact text of a hidden row, (b) that text with
# one number changed, (c) another name, (d) an unrelated text; by the index's threshold, with
# k => 10 and with threshold => 0.5 (both scan every row's sketch). Then, on a copy of the table
# without row-level security that the reader may SELECT, the median of N lookups of the table's
# own texts (the common case).
#
#   PGHOST=... PGPORT=... PGDATABASE=... bash benches/rls_timing.sh [N]
#
# Runs against a database with pg_minhash installed (superuser connection); it creates and
# drops the roles regress_timing_owner and regress_timing_reader and their tables.
set -euo pipefail
calls="${1:-200}"
psql -X -q -v ON_ERROR_STOP=1 -v calls="$calls" <<'SQL'
SET client_min_messages = warning;
DROP TABLE IF EXISTS timing_hidden, timing_open;
DROP FUNCTION IF EXISTS public.timing_median(text, text, int, int, float8);
DO $$ BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_timing_reader') THEN
        DROP OWNED BY regress_timing_reader; DROP ROLE regress_timing_reader;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_timing_owner') THEN
        DROP OWNED BY regress_timing_owner; DROP ROLE regress_timing_owner;
    END IF;
END $$;
CREATE ROLE regress_timing_owner;
CREATE ROLE regress_timing_reader;
GRANT CREATE ON SCHEMA public TO regress_timing_owner;
-- timing_median(tbl, doc, n, k, threshold): the median time of n lookups of doc in tbl (the k
-- most similar rows with k; at or above threshold with it), in ms
CREATE FUNCTION public.timing_median(tbl text, doc text, n int, k int DEFAULT NULL,
                                     threshold float8 DEFAULT NULL) RETURNS numeric
LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz;
    times float8[] := '{}';
BEGIN
    FOR i IN 1..n LOOP
        t := clock_timestamp();
        PERFORM count(*) FROM minhash_similar(tbl::regclass, doc, k => k, threshold => threshold);
        times := times || extract(epoch FROM clock_timestamp() - t) * 1000;
    END LOOP;
    RETURN (SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY x)::numeric, 3)
            FROM unnest(times) x);
END $$;
SET ROLE regress_timing_owner;
CREATE TABLE timing_hidden (id int PRIMARY KEY, author name NOT NULL, body text);
INSERT INTO timing_hidden
SELECT g, current_user, format('%s %s, born %s, was diagnosed with %s and prescribed %s mg of %s',
                 (ARRAY['Anna', 'Ben', 'Clara', 'David', 'Eva', 'Felix', 'Greta', 'Hugo'])[1 + g % 8],
                 (ARRAY['Meier', 'Schmidt', 'Weber', 'Fischer', 'Wagner'])[1 + g / 8 % 5],
                 1940 + g % 60,
                 (ARRAY['asthma', 'diabetes', 'gout', 'migraine'])[1 + g % 4],
                 10 * (1 + g % 20), (ARRAY['cortisone', 'insulin', 'colchicine', 'triptan'])[1 + g % 4])
FROM generate_series(1, 3000) g;
ALTER TABLE timing_hidden ENABLE ROW LEVEL SECURITY;
CREATE POLICY own ON timing_hidden FOR SELECT USING (author = current_user);
GRANT SELECT ON timing_hidden TO regress_timing_reader;
SELECT minhash_index_create('timing_hidden', 'id', 'body') IS NOT NULL AS created \gset
CREATE TABLE timing_open AS SELECT * FROM timing_hidden;
ALTER TABLE timing_open ADD PRIMARY KEY (id);
GRANT SELECT ON timing_open TO regress_timing_reader;
SELECT minhash_index_create('timing_open', 'id', 'body') IS NOT NULL AS created \gset
ANALYZE timing_hidden, timing_open;
RESET ROLE;
-- row 1000: Anna Fischer, born 1980, asthma, 10 mg of cortisone
SELECT body AS exact FROM timing_hidden WHERE id = 1000 \gset
SET ROLE regress_timing_reader;
SELECT count(*) AS reader_sees FROM timing_hidden;
-- warm up the backend's caches
SELECT public.timing_median('timing_hidden', :'exact', 20) IS NOT NULL AS warm \gset
SELECT public.timing_median('timing_open', :'exact', 20) IS NOT NULL AS warm \gset
SELECT 'hidden: (a) exact text' AS lookup, public.timing_median('timing_hidden', :'exact', :calls) AS median_ms
UNION ALL
SELECT 'hidden: (b) one number changed',
       public.timing_median('timing_hidden', replace(:'exact', 'born 1980', 'born 1981'), :calls)
UNION ALL
SELECT 'hidden: (c) another name',
       public.timing_median('timing_hidden', replace(:'exact', 'Anna', 'Hanna'), :calls)
UNION ALL
SELECT 'hidden: (d) unrelated text',
       public.timing_median('timing_hidden', 'the weather in the mountains was fine all week', :calls)
UNION ALL
SELECT 'hidden, k => 10: (a) exact text', public.timing_median('timing_hidden', :'exact', :calls, 10)
UNION ALL
SELECT 'hidden, k => 10: (b) one number changed',
       public.timing_median('timing_hidden', replace(:'exact', 'born 1980', 'born 1981'), :calls, 10)
UNION ALL
SELECT 'hidden, k => 10: (d) unrelated text',
       public.timing_median('timing_hidden', 'the weather in the mountains was fine all week', :calls, 10)
UNION ALL
SELECT 'hidden, threshold => 0.5: (a) exact text',
       public.timing_median('timing_hidden', :'exact', :calls, NULL, 0.5)
UNION ALL
SELECT 'hidden, threshold => 0.5: (b) one number changed',
       public.timing_median('timing_hidden', replace(:'exact', 'born 1980', 'born 1981'), :calls, NULL, 0.5)
UNION ALL
SELECT 'hidden, threshold => 0.5: (d) unrelated text',
       public.timing_median('timing_hidden', 'the weather in the mountains was fine all week', :calls, NULL, 0.5)
UNION ALL
SELECT 'open table: a row''s own text', public.timing_median('timing_open', :'exact', :calls)
UNION ALL
SELECT 'open table: another row''s text',
       public.timing_median('timing_open', (SELECT body FROM timing_open WHERE id = 2222), :calls);
RESET ROLE;
DROP TABLE timing_hidden, timing_open;
DROP FUNCTION public.timing_median(text, text, int, int, float8);
REVOKE CREATE ON SCHEMA public FROM regress_timing_owner;
DROP ROLE regress_timing_owner, regress_timing_reader;
SQL
