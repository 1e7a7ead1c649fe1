-- Texts from an SQL expression over the row (text_expression): created, kept exact through
-- every kind of write, searched, deduplicated and flagged; the expression is checked when the
-- index is made and when the table changes, and runs only as the table's owner.
SET client_min_messages = warning;

-- a uuid-keyed table whose text is made of two columns and a JSON field
CREATE TABLE articles (id uuid PRIMARY KEY, title text, body text, payload jsonb,
                       duplicate_of uuid);
INSERT INTO articles (id, title, body, payload)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       CASE WHEN g % 10 <> 0 THEN format('Report %s', g % 50) END,
       format('Sales in region %s rose by %s percent over the quarter', g % 13, g),
       jsonb_build_object('tag', 'q' || (g % 4))
FROM generate_series(1, 400) g;
-- a row whose expression is NULL (no body) is not indexed
INSERT INTO articles (id, title) VALUES ('00000000-0000-4000-8000-000000000fff', 'Title only');
SELECT minhash_index_create('articles', 'id',
    text_expression => $$coalesce(title, '') || ' ' || body || ' ' || (payload ->> 'tag')$$,
    threshold => 0.7);
SELECT text_column, text_expression FROM minhash_indexes WHERE tbl = 'articles'::regclass;
SELECT * FROM minhash_index_check('articles');
SELECT rows_indexed FROM minhash_index_stats('articles');
SELECT count(*) FROM articles_minhash_bands
WHERE id = '00000000-0000-4000-8000-000000000fff';

-- every kind of write keeps it exact
INSERT INTO articles (id, title, body, payload)
VALUES ('10000000-0000-4000-8000-000000000001', 'Report 7',
        'Sales in region 7 rose by 7 percent over the quarter', '{"tag": "q3"}');
UPDATE articles SET title = 'Report 8' WHERE id = '00000000-0000-4000-8000-000000000001';
UPDATE articles SET payload = '{"tag": "q9"}' WHERE id = '00000000-0000-4000-8000-000000000002';
UPDATE articles SET body = NULL WHERE id = '00000000-0000-4000-8000-000000000003';
UPDATE articles SET body = 'now it has a body' WHERE id = '00000000-0000-4000-8000-000000000fff';
DELETE FROM articles WHERE id = '00000000-0000-4000-8000-000000000004';
COPY articles (id, title, body, payload) FROM stdin;
20000000-0000-4000-8000-000000000001	Report 9	Sales in region 9 rose by 9 percent over the quarter	{"tag": "q1"}
20000000-0000-4000-8000-000000000002	\N	\N	\N
\.
SELECT * FROM minhash_index_check('articles');

-- searches read the same text
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('articles', 'Report 7 Sales in region 7 rose by 7 percent over the quarter q3',
                     NULL::uuid, threshold => 0.9);
SELECT count(*) AS pairs, round(min(similarity)::numeric, 4) AS min_similarity
FROM minhash_duplicates('articles', NULL::uuid, 0.8);
-- exact against brute force over the same expression
WITH texts AS (
    SELECT id, coalesce(title, '') || ' ' || body || ' ' || (payload ->> 'tag') AS t
    FROM articles WHERE body IS NOT NULL AND payload IS NOT NULL)
SELECT count(*) AS truth
FROM texts a JOIN texts b ON a.id < b.id
WHERE jaccard(a.t, b.t) >= 0.8;
SELECT count(DISTINCT cluster_id) AS clusters
FROM minhash_clusters('articles', NULL::uuid, 0.8, mode => 'representative');
SELECT probe, id, round(similarity::numeric, 4) AS similarity
FROM minhash_matches('articles', ARRAY['Report 9 Sales in region 9 rose by 9 percent over the quarter q1',
                                       'nothing like it'], NULL::uuid, threshold => 0.9)
ORDER BY probe, id;

-- flag and reject read the expression too
CREATE TRIGGER articles_flag BEFORE INSERT OR UPDATE ON articles
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of', '0.9');
INSERT INTO articles (id, title, body, payload)
VALUES ('30000000-0000-4000-8000-000000000001', 'Report 9',
        'Sales in region 9 rose by 9 percent over the quarter', '{"tag": "q1"}')
RETURNING duplicate_of;
-- an update of a column the expression does not read checks nothing again
UPDATE articles SET duplicate_of = NULL WHERE id = '30000000-0000-4000-8000-000000000001'
RETURNING duplicate_of;
-- one that changes the expression's value is checked
UPDATE articles SET payload = '{"tag": "q2"}', duplicate_of = NULL
WHERE id = '30000000-0000-4000-8000-000000000001' RETURNING duplicate_of;
DROP TRIGGER articles_flag ON articles;
CREATE TRIGGER articles_reject BEFORE INSERT OR UPDATE ON articles
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('', '0.9', 'reject');
SELECT try($$INSERT INTO articles (id, title, body, payload)
             VALUES ('30000000-0000-4000-8000-000000000002', 'Report 9',
                     'Sales in region 9 rose by 9 percent over the quarter', '{"tag": "q1"}')$$);
DROP TRIGGER articles_reject ON articles;
SELECT * FROM minhash_index_check('articles');

-- DDL that changes what the expression reads is refused; other DDL is not
SELECT try($$ALTER TABLE articles RENAME COLUMN title TO headline$$);
SELECT try($$ALTER TABLE articles DROP COLUMN payload$$);
SELECT try($$ALTER TABLE articles ALTER COLUMN body TYPE varchar(200)$$);
SELECT try($$ALTER TABLE articles ADD COLUMN views int$$);
SELECT try($$ALTER TABLE articles RENAME COLUMN duplicate_of TO dup$$);
SELECT minhash_index_rebuild('articles');
SELECT * FROM minhash_index_check('articles');
TRUNCATE articles;
SELECT * FROM minhash_index_check('articles');
SELECT count(*) FROM articles_minhash_bands;

-- what an expression may not be
CREATE TABLE plain (id int PRIMARY KEY, body text, n int);
CREATE FUNCTION public.declared_volatile(t text) RETURNS text LANGUAGE sql AS $$ SELECT lower(t) $$;
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'now()::text || body')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'public.declared_volatile(body)')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'declared_volatile(body)')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => '(SELECT body)')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'max(body)')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'generate_series(1, 2)::text')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'length(body)')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'ctid::text')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'plain::text')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'nosuch')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'body) FROM pg_class WHERE (true')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => 'body); DROP TABLE plain; SELECT (1')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', text_expression => '')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', 'body', text_expression => 'body')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id')$$);
SELECT try($$SELECT minhash_index_create('plain', 'id', 'n')$$);
-- a trailing comment is part of the text, not of the statement around it
SELECT minhash_index_create('plain', 'id', text_expression => 'body || '' '' || n::text -- the number too');
SELECT text_expression FROM minhash_indexes WHERE tbl = 'plain'::regclass;

-- the expression runs as the table's owner in a security-restricted operation, whoever
-- writes or reads: here a function (falsely marked IMMUTABLE) reports the role it runs as
CREATE ROLE text_expr_owner;
CREATE ROLE text_expr_writer;
CREATE ROLE text_expr_columns;
CREATE ROLE text_expr_stranger;
GRANT CREATE ON SCHEMA public TO text_expr_owner;
SET ROLE text_expr_owner;
CREATE FUNCTION public.text_expr_who(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RAISE WARNING 'expression runs as %', current_user;
    RETURN t;
END $$;
CREATE TABLE owned (id int PRIMARY KEY, body text, note text);
SELECT minhash_index_create('owned', 'id', text_expression => 'public.text_expr_who(body)');
GRANT SELECT, INSERT, UPDATE, DELETE ON owned TO text_expr_writer;
GRANT SELECT (id, body) ON owned TO text_expr_columns;
GRANT SELECT (id, note) ON owned TO text_expr_stranger;
RESET ROLE;
SET ROLE text_expr_writer;
INSERT INTO owned VALUES (1, 'the same words again and again', NULL);
SELECT id FROM minhash_similar('owned', 'the same words again and again');
RESET ROLE;
-- a superuser's search too (through the direct read)
SELECT id FROM minhash_similar('owned', 'the same words again and again');
-- a role with SELECT on the columns only searches through SQL, and the expression still
-- runs as the owner
SET ROLE text_expr_columns;
SELECT id FROM minhash_similar('owned', 'the same words again and again');
SELECT count(*) FROM minhash_duplicates('owned');
RESET ROLE;
-- a role that may not read the columns the expression reads gets nothing
SET ROLE text_expr_stranger;
SELECT try($$SELECT * FROM minhash_similar('owned', 'the same words again and again')$$);
SELECT try($$SELECT minhash_internal._minhash_row_text('owned', o) FROM owned o$$);
RESET ROLE;
-- the row function takes records of the expression's columns only
SELECT try($$SELECT minhash_internal._minhash_row_text('owned', ROW(1))$$);
SELECT try($$SELECT minhash_internal._minhash_row_text('owned', ROW('a', 'b'))$$);
SELECT minhash_internal._minhash_row_text('owned', ROW('computed as the owner'::text));
SELECT try($$SELECT minhash_internal._minhash_row_text('plain', ROW('a'))$$);

DROP TABLE owned, plain, articles;
DROP FUNCTION public.text_expr_who(text), public.declared_volatile(text);
REVOKE CREATE ON SCHEMA public FROM text_expr_owner;
DROP ROLE text_expr_owner, text_expr_writer, text_expr_columns, text_expr_stranger;
