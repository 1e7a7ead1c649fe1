-- Run as the hostile installer (a role with CREATE on the database only), in the session that
-- then runs CREATE EXTENSION. Plants, in its own schema `evil` (which CREATE EXTENSION ...
-- SCHEMA evil puts first on the install script's search path, and which the other roles of
-- tests/hostile_install/run.sh put first on theirs):
--   * for every operator symbol of :'operators' and every pair of the types below that
--     pg_catalog has no operator of that name for, an operator of that name;
--   * for every function of pg_catalog whose name is in :'functions', overloads that differ
--     from one of its signatures in one argument's type, by a type of the same family (oid and
--     the reg* types; text, name, varchar, "char"; the integer and float types), or with every
--     polymorphic argument made concrete, where pg_catalog has no such signature;
--   * temporary tables named as the catalogs the SQL reads, and as the types it casts to.
-- Each planted function records who ran it in evil.ran and, run by a superuser, makes the
-- installer one (the escalation it would be); tests/hostile_install/run.sh requires evil.ran
-- to be empty and the installer no superuser at the end.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.ran (who name, superuser boolean, what text, at timestamptz DEFAULT pg_catalog.clock_timestamp());
GRANT SELECT, INSERT ON evil.ran TO PUBLIC;
CREATE FUNCTION evil.trap(what text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    su boolean := (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) current_user);
BEGIN
    INSERT INTO evil.ran (who, superuser, what) VALUES (current_user, su, what);
    IF su THEN
        EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER',
            (SELECT r.rolname FROM pg_catalog.pg_roles r JOIN pg_catalog.pg_namespace n
                 ON n.nspowner OPERATOR(pg_catalog.=) r.oid WHERE n.nspname OPERATOR(pg_catalog.=) 'evil'));
    END IF;
END $$;
GRANT EXECUTE ON FUNCTION evil.trap(text) TO PUBLIC;

CREATE TEMP TABLE planted (kind text, signature text);
CREATE TEMP TABLE called (operators text[], functions text[]);
INSERT INTO called VALUES (string_to_array(:'operators', ' '), string_to_array(:'functions', ' '));

-- the types of the families below, and the arrays the SQL passes
CREATE TEMP TABLE family (name text, type regtype);
INSERT INTO family VALUES
    ('oid', 'oid'), ('oid', 'regclass'), ('oid', 'regtype'), ('oid', 'regnamespace'),
    ('oid', 'regproc'), ('oid', 'regprocedure'), ('oid', 'regrole'), ('oid', 'regoper'),
    ('text', 'text'), ('text', 'name'), ('text', 'varchar'), ('text', '"char"'), ('text', 'bpchar'),
    ('number', 'int2'), ('number', 'int4'), ('number', 'int8'), ('number', 'float8'),
    ('number', 'numeric'), ('number', 'float4'),
    ('other', 'bool'), ('other', 'bytea'), ('other', 'jsonb'), ('other', 'bit'),
    ('other', 'timestamptz'), ('other', 'int2vector'), ('other', 'oidvector'),
    ('array', 'int8[]'), ('array', 'int4[]'), ('array', 'text[]'), ('array', 'name[]'),
    ('array', 'oid[]'), ('array', 'regclass[]'), ('array', 'bool[]'), ('array', 'float8[]');

DO $plant$
DECLARE
    op text;
    l regtype;
    r regtype;
    fn text;
    n int := 0;
BEGIN
    -- operators: one trap function per type pair, shared by every symbol
    FOR l, r IN SELECT a.type, b.type FROM family a CROSS JOIN family b LOOP
        fn := pg_catalog.format('evil.%I', 'op_' || pg_catalog.md5(l::text || ',' || r::text));
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION %s(%s, %s) RETURNS boolean LANGUAGE plpgsql AS $f$
             BEGIN PERFORM evil.trap(%L); RETURN NULL; END $f$', fn, l, r,
            'operator (' || l::text || ', ' || r::text || ')');
        FOREACH op IN ARRAY (SELECT c.operators FROM called c) LOOP
            CONTINUE WHEN EXISTS (SELECT FROM pg_catalog.pg_operator o
                                  WHERE o.oprname OPERATOR(pg_catalog.=) op
                                    AND o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
                                    AND o.oprleft OPERATOR(pg_catalog.=) l AND o.oprright OPERATOR(pg_catalog.=) r);
            EXECUTE pg_catalog.format('CREATE OPERATOR evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %s)',
                                      op, l, r, fn);
            INSERT INTO planted VALUES ('operator', op || ' (' || l::text || ', ' || r::text || ')');
        END LOOP;
    END LOOP;
END $plant$;

-- functions: the signatures of pg_catalog's functions of those names, one argument changed
CREATE TEMP TABLE wanted AS
WITH RECURSIVE
proc AS (
    SELECT p.proname, p.proargtypes::oid[] AS args, p.prorettype, p.proretset
    FROM pg_catalog.pg_proc p
    WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
      AND p.proname OPERATOR(pg_catalog.=) ANY ((SELECT c.functions FROM called c)::name[])
      AND p.prokind OPERATOR(pg_catalog.=) 'f' AND p.pronargs BETWEEN 1 AND 4
      AND p.provariadic OPERATOR(pg_catalog.=) 0
),
-- polymorphic arguments made concrete (anyarray / anyelement by each array / its element)
concrete AS (
    SELECT p.proname,
           ARRAY(SELECT CASE WHEN t::regtype IN ('anyarray', 'anycompatiblearray') THEN a.type
                             WHEN t::regtype IN ('anyelement', 'anycompatible', 'anynonarray') THEN e.typelem
                             ELSE t END
                 FROM unnest(p.args) t) AS args,
           CASE WHEN p.prorettype::regtype IN ('anyarray', 'anycompatiblearray') THEN a.type::oid
                WHEN p.prorettype::regtype IN ('anyelement', 'anycompatible', 'anynonarray') THEN e.typelem
                ELSE p.prorettype END AS rettype,
           p.proretset
    FROM proc p
    CROSS JOIN (SELECT f.type FROM family f WHERE f.name = 'array') a
    JOIN pg_catalog.pg_type e ON e.oid = a.type
),
variant AS (
    -- one argument replaced by another type of its family
    SELECT c.proname, c.args[:i - 1] || f2.type::oid || c.args[i + 1:] AS args, c.rettype, c.proretset
    FROM concrete c
    CROSS JOIN LATERAL generate_subscripts(c.args, 1) i
    JOIN family f1 ON f1.type = c.args[i]
    JOIN family f2 ON f2.name = f1.name AND f2.type <> f1.type
    UNION
    SELECT * FROM concrete
)
SELECT DISTINCT v.proname, v.args, v.rettype, v.proretset FROM variant v
WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_proc p
                  WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = v.proname
                    AND p.proargtypes::oid[] = v.args)
  AND NOT EXISTS (SELECT FROM unnest(v.args || v.rettype) t
                  JOIN pg_catalog.pg_type y ON y.oid = t WHERE y.typtype = 'p');

DO $plant$
DECLARE
    w record;
    args text;
BEGIN
    FOR w IN SELECT * FROM wanted LOOP
        args := (SELECT string_agg(t::regtype::text, ', ' ORDER BY o) FROM unnest(w.args) WITH ORDINALITY u(t, o));
        BEGIN
            EXECUTE pg_catalog.format(
                'CREATE FUNCTION evil.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS $f$
                 BEGIN PERFORM evil.trap(%L); RETURN%s; END $f$',
                w.proname, args, CASE WHEN w.proretset THEN 'SETOF ' ELSE '' END, w.rettype::regtype,
                w.proname || '(' || args || ')', CASE WHEN w.proretset THEN '' ELSE ' NULL' END);
            INSERT INTO planted VALUES ('function', w.proname || '(' || args || ')');
        EXCEPTION WHEN duplicate_function THEN NULL;
        END;
    END LOOP;
END $plant$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evil TO PUBLIC;

-- temporary relations (and so row types) named as catalogs and types, seen first for
-- relations and types unless pg_temp is named last on the path
DO $plant$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['pg_class', 'pg_proc', 'pg_namespace', 'pg_attribute', 'pg_depend',
                                'pg_trigger', 'pg_index', 'pg_inherits', 'pg_extension', 'pg_type',
                                'pg_roles', 'pg_operator', 'pg_constraint', 'pg_policy', 'pg_am',
                                'pg_opclass', 'pg_event_trigger', 'pg_authid', 'pg_description',
                                'regclass', 'regtype', 'regnamespace', 'oid', 'text', 'name', 'int8',
                                'int4', 'float8', 'bool', 'jsonb', 'minhash_indexes'] LOOP
        EXECUTE pg_catalog.format('CREATE TEMP TABLE %I (x int)', name);
        INSERT INTO planted VALUES ('temporary relation', name);
    END LOOP;
END $plant$;

SELECT kind, count(*) FROM planted GROUP BY kind ORDER BY kind;
