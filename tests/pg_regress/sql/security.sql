-- Attacks on an installed extension by unprivileged roles. Nothing the extension creates runs
-- code or names a caller controls with another role's rights; the band table is private; the
-- query functions show only rows the caller may SELECT. After every attack the attacker's
-- rights are unchanged and the victims' indexes are exact.
SET client_min_messages = warning;
CREATE ROLE regress_sec_attacker LOGIN;
CREATE ROLE regress_sec_owner;
CREATE ROLE regress_sec_reader;
CREATE ROLE regress_sec_columns;
GRANT CREATE ON SCHEMA public TO regress_sec_owner, regress_sec_attacker;
SELECT format('GRANT CREATE ON DATABASE %I TO regress_sec_attacker', current_database()) \gexec
-- try_detail(q): like try(), with the error's DETAIL (or 'no detail')
CREATE FUNCTION public.try_detail(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN others THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || ' / ' || coalesce(nullif(detail, ''), 'no detail');
END $$;
-- A superuser's indexed table, and one of an ordinary role with row-level security.
CREATE TABLE questions (id bigint PRIMARY KEY, body text);
INSERT INTO questions SELECT g, format('question %s: how do I %s the %s in %s?', g,
    (ARRAY['sort', 'reverse', 'split', 'join'])[1 + g % 4],
    (ARRAY['list', 'string', 'file', 'table'])[1 + g % 4 / 2],
    (ARRAY['Python', 'Rust', 'SQL'])[1 + g % 3]) FROM generate_series(1, 50) g;
SELECT minhash_index_create('questions', 'id', 'body') IS NOT NULL AS created;
GRANT SELECT, INSERT ON questions TO regress_sec_attacker;
SET ROLE regress_sec_owner;
CREATE TABLE secrets (id int PRIMARY KEY, tenant text NOT NULL, body text);
INSERT INTO secrets VALUES
    (1, 'a', 'the launch code of tenant a is 4711, keep it safe'),
    (2, 'b', 'the launch code of tenant b is 0815, keep it safe'),
    (3, 'a', 'an ordinary note of tenant a about lunch'),
    (4, 'b', 'an ordinary note of tenant b about lunch');
ALTER TABLE secrets ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_tenant ON secrets USING (tenant = 'a');
-- granted before the index exists: nothing is mirrored onto the band table
GRANT SELECT, INSERT ON secrets TO regress_sec_reader;
GRANT SELECT (id) ON secrets TO regress_sec_columns;
SELECT minhash_index_create('secrets', 'id', 'body', threshold => 0.5) IS NOT NULL AS created;
RESET ROLE;
-- the state every attack must leave alone
CREATE FUNCTION public.unharmed() RETURNS TABLE (attacker_superuser boolean, attacker_roles bigint,
                                                 questions_check text, secrets_check text,
                                                 questions_band_rows bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT (SELECT rolsuper OR rolcreaterole OR rolbypassrls FROM pg_roles
            WHERE rolname = 'regress_sec_attacker'),
           (SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member
            WHERE r.rolname = 'regress_sec_attacker'),
           (SELECT format('%s/%s', missing, orphaned) FROM minhash_index_check('questions')),
           (SELECT format('%s/%s', missing, orphaned) FROM minhash_index_check('secrets')),
           (SELECT count(*) FROM public.questions_minhash_bands)
$$;

SELECT * FROM unharmed();

-- No function of ours is SECURITY DEFINER, and none was generated into a user's schema.
SELECT count(*) AS security_definer FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_minhash') AND p.prosecdef;
SELECT count(*) AS generated_functions FROM pg_proc
WHERE proname LIKE '%minhash%'
  AND pronamespace NOT IN ((SELECT extnamespace FROM pg_extension WHERE extname = 'pg_minhash'),
                           'minhash_internal'::regnamespace);
-- The searches of a table run no PL/pgSQL: Rust, behind SQL functions that name one Rust call.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments, l.lanname AS language
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = (SELECT extnamespace FROM pg_extension WHERE extname = 'pg_minhash')
  AND p.proname IN ('minhash_duplicates', 'minhash_clusters')
ORDER BY 1, 2;
-- Creating an index runs no PL/pgSQL: minhash_index_create is Rust, with a pinned search path.
SELECT p.proname, l.lanname AS language, p.proconfig AS settings
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = (SELECT extnamespace FROM pg_extension WHERE extname = 'pg_minhash')
  AND p.proname = 'minhash_index_create';
-- Checking, rebuilding and dropping an index run no PL/pgSQL either: Rust.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments, l.lanname AS language
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = (SELECT extnamespace FROM pg_extension WHERE extname = 'pg_minhash')
  AND p.proname IN ('minhash_index_check', 'minhash_index_stats', 'minhash_index_rebuild',
                    'minhash_index_drop')
ORDER BY 1, 2;
-- Nor does the machinery they share (finding an index, the backfill, the sync triggers, a
-- band table's format, columns and B-trees, Citus placement): Rust, each with the search path
-- pinned as before.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments, l.lanname AS language,
       p.provolatile AS volatility, p.proparallel AS parallel, p.proconfig AS settings
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'minhash_internal'::regnamespace
  AND p.proname IN ('_minhash_citus_worker', '_minhash_index', '_minhash_citus_table',
                    '_minhash_citus_distribute', '_minhash_backfill', '_minhash_sync_triggers',
                    '_minhash_check_format', '_minhash_band_reshape', '_minhash_band_indexes')
ORDER BY 1, 2;
-- Nor does DDL on an indexed table, or loading the catalog: the event trigger of DDL and the
-- catalog's triggers are Rust, with a pinned search path (_minhash_tree_changed is gone).
SELECT p.proname, l.lanname AS language, p.proconfig AS settings
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
WHERE p.pronamespace = 'minhash_internal'::regnamespace
  AND p.proname IN ('_minhash_ddl', '_minhash_tree_changed', '_minhash_relink',
                    '_minhash_catalog_loaded', '_minhash_catalog_insert')
ORDER BY 1;

-- No function of the extension is PL/pgSQL, or of any language but C (Rust) and SQL.
SELECT coalesce(array_agg(p.oid::regprocedure::text), '{}') AS procedural
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_minhash'
WHERE p.prolang NOT IN (SELECT oid FROM pg_language WHERE lanname IN ('c', 'sql'));

-- The band tables are private: no privileges but their owner's.
SELECT c.relname, pg_get_userbyid(c.relowner) AS owner,
       c.relacl IS NULL OR c.relacl = acldefault('r', c.relowner) AS private
FROM minhash_indexes i JOIN pg_class c ON c.oid = i.band_table
WHERE i.tbl IN ('questions'::regclass, 'secrets'::regclass) ORDER BY 1;

SET ROLE regress_sec_attacker;
-- 1. Our trigger function on the attacker's own tables, temp and not, for every event, with
-- and without transition tables, named like ours, beside temp relations named like ours
-- (the old sync function resolved `new_rows` through the search path to such a view).
CREATE FUNCTION public.escalate() RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    ALTER ROLE regress_sec_attacker SUPERUSER;
    RETURN 1;
END $$;
CREATE TEMP VIEW new_rows AS SELECT 1::bigint AS id, 'x' || public.escalate() AS body;
CREATE TEMP VIEW old_rows AS SELECT 1::bigint AS id, 'x' || public.escalate() AS body;
-- (with the columns of the band table of format 2, the default: key1 ... key16)
SELECT format('CREATE TEMP TABLE questions_minhash_bands (id bigint, sketch1 bigint, sketch2 bigint, %s)',
              string_agg(format('key%s bigint', i), ', ' ORDER BY i))
FROM generate_series(1, 16) i \gexec
CREATE TEMP TABLE z (id bigint PRIMARY KEY, body text);
CREATE TABLE mine (id bigint PRIMARY KEY, body text);
-- attach(...): creates the trigger, fires it once and drops it again
CREATE FUNCTION public.attach(name text, timing text, event text, tbl text, transition text,
                              level text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    created text := try(format('CREATE TRIGGER %I %s %s ON %s %s FOR EACH %s
                                EXECUTE FUNCTION minhash_internal._minhash_sync()',
                               name, timing, event, tbl, transition, level));
    fired text := try(CASE event
        WHEN 'INSERT' THEN format($$INSERT INTO %1$s SELECT coalesce(max(id), 0) + 1, 'x' FROM %1$s$$, tbl)
        WHEN 'UPDATE' THEN format($$UPDATE %s SET body = body || 'y'$$, tbl)
        WHEN 'DELETE' THEN format('DELETE FROM %s', tbl)
        ELSE format('TRUNCATE %s', tbl) END);
BEGIN
    IF created = 'ok' THEN
        EXECUTE format('DROP TRIGGER %I ON %s', name, tbl);
    END IF;
    RETURN CASE WHEN created = 'ok' THEN fired ELSE 'not created: ' || created END;
END $f$;
INSERT INTO z VALUES (1, 'x');
INSERT INTO mine VALUES (1, 'x');
-- (a temp schema's number is its backend's slot, which differs between server versions)
SELECT tbl, name, timing, event, level, transition <> '' AS transition,
       regexp_replace(attach(name, timing, event, tbl, transition, level),
                      'pg_temp_[0-9]+', 'pg_temp_N') AS attach
FROM (VALUES ('minhash_sync_insert', 'AFTER', 'INSERT', 'REFERENCING NEW TABLE AS new_rows', 'STATEMENT'),
             ('minhash_sync_insert', 'AFTER', 'INSERT', '', 'STATEMENT'),
             ('minhash_sync_insert', 'BEFORE', 'INSERT', '', 'ROW'),
             ('minhash_sync_insert', 'AFTER', 'INSERT', 'REFERENCING NEW TABLE AS new_rows', 'ROW'),
             ('minhash_sync_update', 'AFTER', 'UPDATE', 'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows', 'STATEMENT'),
             ('minhash_sync_update', 'AFTER', 'UPDATE', 'REFERENCING NEW TABLE AS new_rows', 'STATEMENT'),
             ('minhash_sync_update', 'AFTER', 'UPDATE', '', 'STATEMENT'),
             ('minhash_sync_delete', 'AFTER', 'DELETE', 'REFERENCING OLD TABLE AS old_rows', 'STATEMENT'),
             ('minhash_sync_delete', 'AFTER', 'DELETE', '', 'ROW'),
             ('minhash_sync_truncate', 'AFTER', 'TRUNCATE', '', 'STATEMENT'),
             ('minhash_sync_truncate', 'BEFORE', 'TRUNCATE', '', 'STATEMENT'),
             ('~minhash_sync_claim', 'BEFORE', 'UPDATE', '', 'ROW'),
             ('~minhash_sync_claim', 'AFTER', 'UPDATE', '', 'ROW'),
             ('~minhash_sync_claim', 'BEFORE', 'INSERT', '', 'ROW'),
             ('~minhash_sync_claim_12', 'BEFORE', 'UPDATE', '', 'ROW'),
             ('other_name', 'AFTER', 'INSERT', 'REFERENCING NEW TABLE AS new_rows', 'STATEMENT'))
     AS t(name, timing, event, transition, level),
     (VALUES ('z'), ('mine')) AS r(tbl)
ORDER BY tbl, event, name, level, transition, timing;
-- The other trigger functions refuse other tables too.
CREATE TABLE fake (tbl regclass);
CREATE TRIGGER fake AFTER INSERT ON fake FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_catalog_changed();
SELECT try($$INSERT INTO fake VALUES ('questions')$$);
CREATE TRIGGER fake_flag BEFORE INSERT ON mine FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('id');
SELECT try($$INSERT INTO mine VALUES (100, 'x')$$);
-- (the claim trigger on a table with an INSERT-only check but no index)
CREATE TRIGGER "~minhash_sync_claim" BEFORE UPDATE ON mine FOR EACH ROW EXECUTE FUNCTION minhash_internal._minhash_sync();
SELECT try($$UPDATE mine SET body = body || 'y'$$);
DROP TRIGGER "~minhash_sync_claim" ON mine;
DROP TABLE fake;
DROP TRIGGER fake_flag ON mine;
-- 2. A catalog row for the attacker's table naming a victim's band table; changes to the
-- victims' rows (row-level security hides them: nothing is updated or deleted).
SELECT try($$INSERT INTO minhash_indexes (tbl, id_column, text_column, band_table, k, ngram, unit,
                                          threshold, bands, rows_per_band)
             VALUES ('mine', 'id', 'body', 'public.questions_minhash_bands', 128, 5, 'char', 0.8, 16, 6)$$);
SELECT try($$INSERT INTO minhash_indexes (tbl, id_column, text_column, band_table, k, ngram, unit,
                                          threshold, bands, rows_per_band)
             VALUES ('z', 'id', 'body', 'secrets_minhash_bands', 128, 5, 'char', 0.8, 16, 6)$$);
SELECT try($$UPDATE minhash_indexes SET band_table = 'z' WHERE tbl = 'questions'::regclass$$);
SELECT try($$DELETE FROM minhash_indexes$$);
RESET ROLE;
SELECT tbl, band_table FROM minhash_indexes
WHERE tbl IN ('questions'::regclass, 'secrets'::regclass) ORDER BY 1;
SET ROLE regress_sec_attacker;
-- 3. The maintenance functions on tables the attacker does not own, and the internal helpers.
SELECT try($$SELECT minhash_index_rebuild('questions')$$);
SELECT try($$SELECT minhash_index_rebuild('questions', format => 1)$$);
SELECT try($$SELECT minhash_internal._minhash_band_reshape(NULL::minhash_indexes, 1)$$);
SELECT try($$SELECT minhash_internal._minhash_band_reshape(i, 1) FROM minhash_indexes i WHERE i.tbl = 'questions'::regclass$$);
SELECT try($$SELECT minhash_index_drop('secrets')$$);
SELECT try($$SELECT * FROM minhash_index_check('questions')$$);
SELECT try($$SELECT * FROM minhash_index_stats('questions')$$);
SELECT try($$SELECT minhash_internal._minhash_as_owner('questions', 'TRUNCATE questions_minhash_bands')$$);
SELECT try($$SELECT minhash_internal._minhash_as_owner('secrets', 'SELECT to_jsonb(count(*)) FROM secrets')$$);
SELECT try($$SELECT minhash_internal._minhash_link_band_table('mine', 'questions')$$);
SELECT try($$SELECT * FROM public.questions_minhash_bands$$);
SELECT try($$TRUNCATE public.questions_minhash_bands$$);
-- 4. Writing the indexed table with the attacker's own operators and functions first in the
-- search path: the sync trigger resolves nothing through it.
CREATE SCHEMA trap;
CREATE FUNCTION trap.int8eq(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.escalate();
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE OPERATOR trap.= (FUNCTION = trap.int8eq, LEFTARG = bigint, RIGHTARG = bigint);
CREATE FUNCTION trap.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.escalate();
    RETURN QUERY SELECT * FROM pg_catalog.unnest($1);
END $$;
SET search_path = trap, public, pg_catalog;
INSERT INTO public.questions VALUES (1001, 'question 1001: how do I sort the list in Python?');
SELECT id FROM minhash_similar('public.questions', (SELECT body FROM public.questions WHERE id = 4));
RESET search_path;
RESET ROLE;
SELECT * FROM unharmed();

-- 5. The attacker's own indexed table, hooked everywhere, maintained by a superuser: whatever
-- runs, runs as the attacker, in a security-restricted operation.
SET ROLE regress_sec_attacker;
CREATE TABLE hooked (id int PRIMARY KEY, body text);
INSERT INTO hooked VALUES (1, 'a text for the attacker''s own table'), (2, 'another text here');
SELECT minhash_index_create('hooked', 'id', 'body') IS NOT NULL AS created;
CREATE TABLE hook_log (who name, what text);
-- an expression index on the band table, made while the function claimed to be immutable
CREATE FUNCTION hook(what text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE INDEX hooked_bands_hook ON hooked_minhash_bands ((hook('band index')));
CREATE OR REPLACE FUNCTION hook(what text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO public.hook_log VALUES (current_user, what);
    BEGIN
        ALTER ROLE regress_sec_attacker SUPERUSER;
        INSERT INTO public.hook_log VALUES (current_user, 'escalated');
    EXCEPTION WHEN others THEN
        INSERT INTO public.hook_log VALUES (current_user, what || ': ' || SQLSTATE);
    END;
    BEGIN
        RESET ROLE;
        INSERT INTO public.hook_log VALUES (current_user, 'reset role');
    EXCEPTION WHEN others THEN
        INSERT INTO public.hook_log VALUES (current_user, what || ': ' || SQLSTATE);
    END;
    RETURN true;
END $$;
-- and a forced row-level security policy on the table
ALTER TABLE hooked ENABLE ROW LEVEL SECURITY;
ALTER TABLE hooked FORCE ROW LEVEL SECURITY;
CREATE POLICY hooked_policy ON hooked USING (hook('policy'));
GRANT SELECT ON hooked TO PUBLIC;
TRUNCATE hook_log;
RESET ROLE;
INSERT INTO hooked VALUES (3, 'a superuser writes the attacker''s table');
SELECT minhash_index_rebuild('hooked') AS rows_read;
SELECT * FROM minhash_index_check('hooked');
SELECT rows_indexed FROM minhash_index_stats('hooked');
SELECT DISTINCT who, what FROM hook_log ORDER BY 1, 2;
SELECT current_user AS still, * FROM unharmed();

-- 6. Row-level security and column privileges on the indexed table apply to every result.
SET ROLE regress_sec_reader;
SELECT try($$SELECT * FROM secrets_minhash_bands$$);
SELECT id, round(similarity::numeric, 3) AS similarity
FROM minhash_similar('secrets', 'the launch code of tenant b is 0815, keep it safe');
SELECT * FROM minhash_duplicates('secrets');
SELECT * FROM minhash_clusters('secrets');
SELECT try($$SELECT * FROM minhash_index_stats('secrets')$$);
SELECT try($$SELECT * FROM minhash_index_check('secrets')$$);
RESET ROLE;
SET ROLE regress_sec_columns;
SELECT try($$SELECT * FROM minhash_similar('secrets', 'an ordinary note')$$);
SELECT try($$SELECT * FROM minhash_duplicates('secrets')$$);
SELECT try($$SELECT * FROM minhash_clusters('secrets')$$);
RESET ROLE;
-- a REVOKE takes effect at once
SET ROLE regress_sec_owner;
REVOKE SELECT ON secrets FROM regress_sec_reader;
RESET ROLE;
SET ROLE regress_sec_reader;
SELECT try($$SELECT * FROM minhash_similar('secrets', 'an ordinary note')$$);
SELECT try($$SELECT * FROM minhash_duplicates('secrets')$$);
RESET ROLE;
-- A reject trigger holds against rows the writer cannot see, like a unique constraint, and its
-- DETAIL names the row only to those who may see it.
SET ROLE regress_sec_owner;
GRANT SELECT ON secrets TO regress_sec_reader;
CREATE TRIGGER no_copies BEFORE INSERT ON secrets
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('', '0.9', 'reject');
SELECT try_detail($$INSERT INTO secrets VALUES (10, 'a', 'the launch code of tenant b is 0815, keep it safe!')$$);
RESET ROLE;
SET ROLE regress_sec_reader;
SELECT try_detail($$INSERT INTO secrets VALUES (11, 'a', 'the launch code of tenant b is 0815, keep it safe!')$$);
RESET ROLE;
SELECT * FROM unharmed();

-- 6b. A band table its owner gives a `tenant` column (the column of a Citus table distributed
-- by a tenant) on a table that is not one: lookups and writes refuse the index (55000), nothing
-- is read as a tenant.
SET ROLE regress_sec_owner;
CREATE TABLE forged_tenant (id int PRIMARY KEY, body text);
INSERT INTO forged_tenant VALUES (1, 'a row whose band table gets a tenant');
SELECT minhash_index_create('forged_tenant', 'id', 'body') IS NOT NULL AS created;
ALTER TABLE forged_tenant_minhash_bands ADD COLUMN tenant int;
SELECT try($$SELECT count(*) FROM minhash_similar('forged_tenant', 'a row whose band table gets a tenant')$$);
SELECT try($$INSERT INTO forged_tenant VALUES (2, 'another row')$$);
DROP TABLE forged_tenant;
RESET ROLE;

-- 7. No Rust backtrace in an error, whatever the server's environment (this cluster runs with
-- RUST_BACKTRACE=full, see scripts/regress.sh).
CREATE TABLE flagged (id int PRIMARY KEY, body text, dup int);
SELECT minhash_index_create('flagged', 'id', 'body') IS NOT NULL AS created;
SELECT try_detail($$CREATE TRIGGER bad_argument BEFORE INSERT ON flagged
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', 'not a number')$$);
-- (refused as it is made; made with event triggers off, as in replica mode, its first row
-- gets the same error)
SET session_replication_role = replica;
CREATE TRIGGER bad_argument BEFORE INSERT ON flagged
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', 'not a number');
RESET session_replication_role;
SELECT try_detail($$INSERT INTO flagged VALUES (1, 'some text', NULL)$$);
SELECT try_detail($$SELECT minhash('x', 0)$$);

DROP TABLE flagged, questions;
DROP OWNED BY regress_sec_attacker, regress_sec_owner, regress_sec_reader, regress_sec_columns;
DROP FUNCTION public.try_detail(text), public.unharmed();
REVOKE CREATE ON SCHEMA public FROM regress_sec_owner, regress_sec_attacker;
DROP ROLE regress_sec_attacker, regress_sec_owner, regress_sec_reader, regress_sec_columns;
