-- What a table's owner can write is input. An owner's code (a text expression) runs restricted
-- and leaves no setting behind in the session of whoever reads or writes the table; a forged
-- catalog row breaks at most its owner's own index, with an error; a forged partition list
-- touches no other role's table; dependencies hold whatever a band table is called; the band
-- table keeps its table's persistence; a claim outlives neither its statement nor its
-- savepoint. Attacks run as unprivileged roles.
SET client_min_messages = warning;
CREATE ROLE regress_oc_attacker;
CREATE ROLE regress_oc_victim;
GRANT CREATE ON SCHEMA public TO regress_oc_attacker, regress_oc_victim;
SELECT format('GRANT CREATE ON DATABASE %I TO regress_oc_attacker', current_database()) \gexec
-- settings(): what the attacks must leave alone in the caller's session
CREATE FUNCTION public.settings() RETURNS text LANGUAGE sql AS $$
    SELECT format('search_path=%s marker=%s role=%s user=%s', current_setting('search_path'),
                  coalesce(nullif(current_setting('regress_oc.marker', true), ''), '-'),
                  current_setting('role'), current_user)
$$;
CREATE FUNCTION public.check_of(tbl regclass) RETURNS text LANGUAGE sql AS $$
    SELECT format('%s|%s', missing, orphaned) FROM minhash_index_check(tbl)
$$;

-- 1. A text expression that sets settings every way it can: set_config (session and local),
-- a role (refused in a restricted operation; it catches that), and a function's SET clause.
SET ROLE regress_oc_attacker;
CREATE SCHEMA mal;
CREATE FUNCTION mal.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'epoch'::timestamptz $$;
CREATE FUNCTION mal.inner_set(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE
SET search_path = mal, pg_catalog AS $$
BEGIN
    PERFORM pg_catalog.set_config('regress_oc.marker', 'set by a SET-clause function', false);
    RETURN t;
END $$;
CREATE FUNCTION mal.t(body text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'mal, pg_catalog, public', false);
    PERFORM pg_catalog.set_config('regress_oc.marker', 'set', false);
    PERFORM pg_catalog.set_config('work_mem', '64kB', true);
    BEGIN
        PERFORM pg_catalog.set_config('role', 'regress_oc_victim', false);
    EXCEPTION WHEN others THEN NULL;
    END;
    RETURN mal.inner_set(body);
END $$;
CREATE TABLE public.att_docs (id bigint PRIMARY KEY, body text, dup_of bigint);
INSERT INTO public.att_docs SELECT g, 'attacker document number ' || g || ' about ' || md5(g::text)
FROM generate_series(1, 40) g;
SELECT minhash_index_create('public.att_docs', 'id', text_expression => 'mal.t(body)') IS NOT NULL AS created;
CREATE TRIGGER flag BEFORE INSERT ON public.att_docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_of');
RESET ROLE;
SET search_path = public;
SET work_mem = '4MB';
SELECT settings();
SELECT count(*) AS similar FROM minhash_similar('att_docs', 'attacker document number 7 about ' || md5('7'));
SELECT settings(), current_setting('work_mem') AS work_mem;
SELECT count(*) AS matches FROM minhash_matches('att_docs', ARRAY['attacker document number 8 about ' || md5('8')]);
SELECT settings();
SELECT count(*) AS pairs FROM minhash_duplicates('att_docs');
SELECT settings();
SELECT count(*) AS clustered FROM minhash_clusters('att_docs');
SELECT settings();
SELECT check_of('att_docs');
SELECT settings();
INSERT INTO att_docs (id, body) VALUES (100, 'attacker document number 9 about ' || md5('9'));
SELECT settings(), (SELECT dup_of FROM att_docs WHERE id = 100) AS dup_of;
UPDATE att_docs SET body = body || ' (edited)' WHERE id = 100;
DELETE FROM att_docs WHERE id = 100;
SELECT settings();
SELECT minhash_index_rebuild('att_docs') > 0 AS rebuilt;
SELECT settings(), now() > 'epoch'::timestamptz AS real_now;
-- and as an unprivileged victim who inserts into the attacker's table
GRANT SELECT, INSERT ON att_docs TO regress_oc_victim;
SET ROLE regress_oc_victim;
INSERT INTO att_docs (id, body) VALUES (101, 'a victim''s row');
SELECT settings();
RESET ROLE;
SELECT check_of('att_docs');

-- 2. Catalog rows the owner edits (row-level security lets it): every value is checked where
-- it is used. A text column of another type, an id column of another type than the band
-- table's, and numbers out of range: an error with an SQLSTATE, never a crash.
SET ROLE regress_oc_attacker;
CREATE TABLE public.att_int (id bigint PRIMARY KEY, body text, n int, label text);
INSERT INTO public.att_int SELECT g, 'integer table row ' || g, g, 'l' || g FROM generate_series(1, 20) g;
SELECT minhash_index_create('public.att_int', 'id', 'body') IS NOT NULL AS created;
CREATE TABLE public.att_snapshot AS SELECT * FROM minhash_indexes WHERE tbl = 'public.att_int'::regclass;
UPDATE minhash_indexes SET text_column = 'n' WHERE tbl = 'public.att_int'::regclass;
SELECT try($$INSERT INTO public.att_int VALUES (21, 'a new row', 123456, 'x')$$);
SELECT try($$SELECT * FROM minhash_similar('public.att_int', 'integer table row 3')$$);
SELECT try($$UPDATE public.att_int SET body = 'changed' WHERE id = 1$$);
UPDATE minhash_indexes SET text_column = 'body', id_column = 'label' WHERE tbl = 'public.att_int'::regclass;
SELECT try($$INSERT INTO public.att_int VALUES (22, 'a new row', 1, 'y')$$);
SELECT try($$SELECT * FROM minhash_similar('public.att_int', 'integer table row 3')$$);
UPDATE minhash_indexes SET id_column = 'nope' WHERE tbl = 'public.att_int'::regclass;
SELECT try($$INSERT INTO public.att_int VALUES (23, 'a new row', 1, 'y')$$);
UPDATE minhash_indexes SET id_column = 'id', threshold = 'NaN' WHERE tbl = 'public.att_int'::regclass;
SELECT try($$SELECT * FROM minhash_similar('public.att_int', 'integer table row 3')$$);
UPDATE minhash_indexes SET threshold = 0.8, k = 100000000 WHERE tbl = 'public.att_int'::regclass;
SELECT try($$SELECT * FROM minhash_similar('public.att_int', 'integer table row 3')$$);
UPDATE minhash_indexes SET k = 128, bands = 0 WHERE tbl = 'public.att_int'::regclass;
SELECT try($$INSERT INTO public.att_int VALUES (24, 'a new row', 1, 'y')$$);
UPDATE minhash_indexes SET bands = 16, text_column = NULL, text_expression = '(n + 1)' WHERE tbl = 'public.att_int'::regclass;
SELECT try($$INSERT INTO public.att_int VALUES (25, 'a new row', 1, 'y')$$);
-- the row put back, the index works again
UPDATE minhash_indexes i SET text_column = s.text_column, text_expression = NULL, id_column = s.id_column,
    k = s.k, bands = s.bands, threshold = s.threshold
FROM public.att_snapshot s WHERE i.band_table = s.band_table;
INSERT INTO public.att_int VALUES (26, 'integer table row 3', 1, 'z');
SELECT id, round(similarity::numeric, 2) AS similarity FROM minhash_similar('public.att_int', 'integer table row 3') ORDER BY id;
RESET ROLE;
SELECT check_of('att_int');

-- 3. A forged partition list names another role's tables: dropping one of them, or DDL on the
-- attacker's partitioned table by a superuser, leaves the victim's triggers and index alone.
SET ROLE regress_oc_victim;
CREATE TABLE public.vic_events (id bigint PRIMARY KEY, body text);
INSERT INTO public.vic_events SELECT g, 'victim event ' || g || ' ' || md5(g::text) FROM generate_series(1, 30) g;
SELECT minhash_index_create('public.vic_events', 'id', 'body') IS NOT NULL AS created;
CREATE TABLE public.vic_scratch (id int);
RESET ROLE;
SET ROLE regress_oc_attacker;
CREATE TABLE public.att_tree (id bigint, body text, PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE public.att_tree_1 PARTITION OF public.att_tree FOR VALUES FROM (0) TO (1000);
INSERT INTO public.att_tree SELECT g, 'attacker tree row ' || g FROM generate_series(1, 10) g;
SELECT minhash_index_create('public.att_tree', 'id', 'body') IS NOT NULL AS created;
UPDATE minhash_indexes SET partitions = ARRAY['public.att_tree_1', 'public.vic_events', 'public.vic_scratch']::regclass[]
WHERE tbl = 'public.att_tree'::regclass;
RESET ROLE;
SET ROLE regress_oc_victim;
DROP TABLE public.vic_scratch;
SELECT count(*) AS victim_sync_triggers FROM pg_trigger WHERE tgrelid = 'public.vic_events'::regclass AND tgname LIKE 'minhash_sync_%';
INSERT INTO public.vic_events SELECT g, 'victim event ' || g || ' ' || md5(g::text) FROM generate_series(31, 62) g;
RESET ROLE;
SELECT check_of('vic_events');
SET ROLE regress_oc_attacker;
UPDATE minhash_indexes SET partitions = ARRAY['public.att_tree_1', 'public.vic_events']::regclass[]
WHERE tbl = 'public.att_tree'::regclass;
RESET ROLE;
-- a superuser's DDL on the attacker's table, then the attacker's
ALTER TABLE att_tree ADD COLUMN extra int;
SET ROLE regress_oc_attacker;
CREATE TABLE public.att_tree_2 PARTITION OF public.att_tree FOR VALUES FROM (1000) TO (2000);
RESET ROLE;
SELECT count(*) AS victim_sync_triggers FROM pg_trigger WHERE tgrelid = 'public.vic_events'::regclass AND tgname LIKE 'minhash_sync_%';
INSERT INTO vic_events SELECT g, 'victim event ' || g || ' ' || md5(g::text) FROM generate_series(63, 80) g;
SELECT check_of('vic_events'), check_of('att_tree');
-- the list was put right by the DDL: the tree as it is
SELECT partitions FROM minhash_indexes WHERE tbl = 'att_tree'::regclass;
-- a genuine DETACH still takes the detached partition's triggers and band rows away
INSERT INTO att_tree VALUES (1500, 'a row in the second partition');
ALTER TABLE att_tree DETACH PARTITION att_tree_2;
SELECT count(*) AS detached_sync_triggers FROM pg_trigger WHERE tgrelid = 'att_tree_2'::regclass AND tgname LIKE 'minhash_sync_%';
SELECT check_of('att_tree');

-- A list naming tables that do not exist yet, and leaving out a real partition, fails no
-- one's DROP: what it leads to is its own index's cleanup.
SET ROLE regress_oc_attacker;
UPDATE minhash_indexes SET partitions = ARRAY(SELECT 'public.att_tree_1'::regclass UNION ALL
    SELECT g::oid::regclass FROM generate_series(16384, 60000) g)
WHERE tbl = 'public.att_tree'::regclass;
RESET ROLE;
SET ROLE regress_oc_victim;
CREATE TABLE public.vic_short (id int PRIMARY KEY);
SET client_min_messages = error;
DROP TABLE public.vic_short;
SET client_min_messages = warning;
SELECT to_regclass('public.vic_short') AS victim_table_dropped;
RESET ROLE;
CREATE TABLE su_short (id int);
SET client_min_messages = error;
DROP TABLE su_short;
SET client_min_messages = warning;
SELECT to_regclass('su_short') AS superuser_table_dropped;

-- A row forged to name a view (or a table whose text column is of another type) is refused
-- where it is used: a lookup would read it with the caller's rights.
SET ROLE regress_oc_attacker;
CREATE FUNCTION public.escalate(t text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        EXECUTE 'ALTER ROLE regress_oc_attacker SUPERUSER';
    EXCEPTION WHEN others THEN NULL;
    END;
    RETURN t;
END $$;
CREATE VIEW public.att_view AS SELECT id, public.escalate(body) AS body FROM public.att_int;
UPDATE minhash_indexes SET tbl = 'public.att_view'::regclass WHERE tbl = 'public.att_int'::regclass;
RESET ROLE;
SELECT try($$SELECT * FROM minhash_similar('public.att_view', 'integer table row 3')$$);
SELECT try($$SELECT * FROM minhash_matches('public.att_view', ARRAY['integer table row 3'])$$);
SELECT try($$SELECT * FROM minhash_duplicates('public.att_view')$$);
SELECT try($$SELECT * FROM minhash_clusters('public.att_view')$$);
SELECT try($$SELECT * FROM minhash_index_check('public.att_view')$$);
SELECT rolsuper AS attacker_superuser FROM pg_roles WHERE rolname = 'regress_oc_attacker';
SET ROLE regress_oc_attacker;
UPDATE minhash_indexes SET tbl = 'public.att_int'::regclass WHERE tbl = 'public.att_view'::regclass;
DROP VIEW public.att_view;
DROP FUNCTION public.escalate(text);
RESET ROLE;
SELECT check_of('att_int');

-- 4. A band table with a name of any characters is a dependency of the flag trigger that names it.
CREATE TABLE "größe" (id bigint PRIMARY KEY, body text, dup bigint);
SELECT minhash_index_create('"größe"', 'id', 'body') IS NOT NULL AS created;
SELECT minhash_index_create('"größe"', 'id', 'body', ngram => 3) IS NOT NULL AS created;
SELECT band_table FROM minhash_indexes WHERE tbl = '"größe"'::regclass ORDER BY 1;
CREATE TRIGGER flag BEFORE INSERT ON "größe"
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup', '', 'flag', 'größe_minhash_bands1');
SELECT try($$SELECT minhash_index_drop('"größe_minhash_bands1"')$$);
SELECT try($$DROP TABLE "größe_minhash_bands1"$$);
SELECT minhash_index_drop('"größe_minhash_bands"') AS dropped_other;
INSERT INTO "größe" (id, body) VALUES (1, 'eine kleine Größe'), (2, 'eine kleine Größe!');
SELECT id, dup FROM "größe" ORDER BY id;
SELECT minhash_index_drop('"größe"', cascade => true) AS dropped;

-- 5. SET LOGGED and SET UNLOGGED of a table: its band table follows; on its own it may not.
CREATE TABLE persist (id bigint PRIMARY KEY, body text);
INSERT INTO persist SELECT g, 'persistent row ' || g FROM generate_series(1, 20) g;
SELECT minhash_index_create('persist', 'id', 'body') IS NOT NULL AS created;
CREATE FUNCTION persistence() RETURNS text LANGUAGE sql AS $$
    SELECT t.relpersistence::text || '/' || b.relpersistence::text FROM minhash_indexes i
    JOIN pg_class t ON t.oid = i.tbl JOIN pg_class b ON b.oid = i.band_table
    WHERE i.tbl = 'persist'::regclass
$$;
ALTER TABLE persist SET UNLOGGED;
SELECT persistence(), check_of('persist');
ALTER TABLE persist SET LOGGED;
SELECT persistence(), check_of('persist');
SELECT try($$ALTER TABLE persist_minhash_bands SET UNLOGGED$$);
SELECT persistence();
-- Every table of an indexed partition tree keeps its band table's persistence.
CREATE TABLE persist_tree (id bigint PRIMARY KEY, body text) PARTITION BY RANGE (id);
CREATE TABLE persist_tree_1 PARTITION OF persist_tree FOR VALUES FROM (0) TO (100);
CREATE UNLOGGED TABLE persist_tree_2 PARTITION OF persist_tree FOR VALUES FROM (100) TO (200);
SELECT try($$SELECT minhash_index_create('persist_tree', 'id', 'body')$$);
DROP TABLE persist_tree_2;
SELECT minhash_index_create('persist_tree', 'id', 'body') IS NOT NULL AS created;
SELECT try($$ALTER TABLE persist_tree_1 SET UNLOGGED$$);
SELECT try($$CREATE UNLOGGED TABLE persist_tree_3 PARTITION OF persist_tree FOR VALUES FROM (200) TO (300)$$);
SELECT try($$ALTER TABLE persist_tree_minhash_bands SET UNLOGGED$$);
SELECT c.relname, c.relpersistence FROM pg_class c
WHERE c.relname LIKE 'persist_tree%' AND c.relkind IN ('r', 'p') ORDER BY 1;

-- 6. Claims: the band rows a flag trigger wrote for a row ON CONFLICT skipped go at the end of
-- the statement, so neither a later statement in a rolled-back savepoint (that inserts the same
-- row where the trigger's WHEN skips the check) nor a rewrite of the band table leaves them
-- behind.
CREATE TABLE claimed (id bigint PRIMARY KEY, slug text UNIQUE, body text, dup bigint);
INSERT INTO claimed VALUES (1, 'a', 'the first row of the claimed table', NULL);
SELECT minhash_index_create('claimed', 'id', 'body') IS NOT NULL AS created;
CREATE TRIGGER flag BEFORE INSERT ON claimed FOR EACH ROW WHEN (NEW.dup IS NULL)
    EXECUTE FUNCTION minhash_flag_duplicate('dup', '', 'reject');
BEGIN;
INSERT INTO claimed VALUES (2, 'a', 'a row that conflicts on its slug and is skipped', NULL)
ON CONFLICT (slug) DO NOTHING;
SAVEPOINT s;
INSERT INTO claimed VALUES (2, 'b', 'a row that conflicts on its slug and is skipped', 0);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT count(*) AS rows, check_of('claimed') FROM claimed;
BEGIN;
INSERT INTO claimed VALUES (3, 'a', 'another row that conflicts on its slug', NULL)
ON CONFLICT (slug) DO NOTHING;
CLUSTER claimed_minhash_bands USING claimed_minhash_bands_id_idx;
COMMIT;
SELECT count(*) AS rows, check_of('claimed') FROM claimed;
-- the near-duplicate is still refused after both
SELECT try($$INSERT INTO claimed VALUES (4, 'c', 'the first row of the claimed table!', NULL)$$);
-- the same of format 1, a band row per row and band
SELECT minhash_index_rebuild('claimed', format => 1) > 0 AS rebuilt;
BEGIN;
INSERT INTO claimed VALUES (5, 'a', 'a row of format 1 that conflicts on its slug', NULL)
ON CONFLICT (slug) DO NOTHING;
SAVEPOINT s;
INSERT INTO claimed VALUES (5, 'd', 'a row of format 1 that conflicts on its slug', 0);
ROLLBACK TO SAVEPOINT s;
INSERT INTO claimed VALUES (6, 'a', 'another row of format 1 that conflicts on its slug', NULL)
ON CONFLICT (slug) DO NOTHING;
CLUSTER claimed_minhash_bands USING claimed_minhash_bands_key_id_sketch1_sketch2_idx;
COMMIT;
SELECT count(*) AS rows, check_of('claimed') FROM claimed;
SELECT try($$INSERT INTO claimed VALUES (7, 'e', 'the first row of the claimed table!', NULL)$$);

DROP TABLE att_docs, att_int, att_snapshot, att_tree, att_tree_2, vic_events, persist, persist_tree, claimed, "größe";
DROP SCHEMA mal CASCADE;
DROP FUNCTION settings(), check_of(regclass), persistence();
SELECT format('REVOKE CREATE ON DATABASE %I FROM regress_oc_attacker', current_database()) \gexec
REVOKE CREATE ON SCHEMA public FROM regress_oc_attacker, regress_oc_victim;
DROP ROLE regress_oc_attacker, regress_oc_victim;
