-- Flagging duplicate questions on insert with the ready trigger function.
SET client_min_messages = warning;
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE detail text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN others THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' | ' || nullif(detail, ''), '');
END $$;

CREATE TABLE questions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    body text NOT NULL,
    duplicate_of bigint REFERENCES questions (id));
INSERT INTO questions (body) VALUES
  ('How do I reverse a string in Python?'),
  ('What is the capital of France?');
SELECT minhash_index_create('questions', 'id', 'body', threshold => 0.7);

-- Without arguments beyond the column, the index's threshold (0.7) applies.
CREATE TRIGGER questions_flag BEFORE INSERT OR UPDATE ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
INSERT INTO questions (body) VALUES
  ('How do I reverse a string in python?'),
  ('Who was the first king of Poland?')
RETURNING id, body, duplicate_of;
INSERT INTO questions (body) VALUES ('What is the capital city of France?') RETURNING id, duplicate_of;

-- An update is compared with the other rows, never with itself.
UPDATE questions SET body = 'Who was the first king of Poland??' WHERE id = 4 RETURNING id, duplicate_of;
UPDATE questions SET body = 'What is the capital of France?!' WHERE id = 5 RETURNING id, duplicate_of;

-- An UPDATE is checked again only when it changes the text: a flag cleared by hand stays
-- cleared, and touching another column leaves the flag as it is.
UPDATE questions SET duplicate_of = NULL WHERE id = 5 RETURNING id, duplicate_of;
UPDATE questions SET body = body WHERE id = 5 RETURNING id, duplicate_of;
UPDATE questions SET duplicate_of = 2 WHERE id = 5 RETURNING id, duplicate_of;
-- The flag points at the original (the smallest matching id), not at a later copy.
INSERT INTO questions (body) VALUES ('What is the capital of France!?') RETURNING id, duplicate_of;

-- A stricter threshold as the second argument.
DROP TRIGGER questions_flag ON questions;
CREATE TRIGGER questions_flag BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of', '0.95');
INSERT INTO questions (body) VALUES ('How do I reverse a string in Python!') RETURNING id, duplicate_of;
INSERT INTO questions (body) VALUES ('How do I reverse a string in Python?') RETURNING id, duplicate_of;

-- 'reject' mode refuses near-duplicates with SQLSTATE 23505 and names the existing row.
DROP TRIGGER questions_flag ON questions;
CREATE TRIGGER questions_reject BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, '0.8', 'reject');
SELECT pg_temp.try($$INSERT INTO questions (body) VALUES ('What is the capital of France ?')$$);
SELECT pg_temp.try($$INSERT INTO questions (body) VALUES ('An entirely new question')$$);
SELECT id, body, duplicate_of FROM questions ORDER BY id;
SELECT * FROM minhash_index_check('questions');
-- NULL (or '') as the threshold means the index's (0.7 here).
DROP TRIGGER questions_reject ON questions;
CREATE TRIGGER questions_reject BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
SELECT pg_temp.try($$INSERT INTO questions (body) VALUES ('What is the capital of France ?')$$);

-- Misuse gets clear errors, when the trigger is made (flag_arguments.sql shows each is its
-- first row's).
DROP TRIGGER questions_reject ON questions;
SELECT pg_temp.try($$CREATE TRIGGER bad_mode BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of', '0.8', 'warn')$$);
SELECT pg_temp.try($$CREATE TRIGGER bad_column BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('no_such_column')$$);
SELECT pg_temp.try($$CREATE TRIGGER bad_threshold BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of', '1.5')$$);
SELECT pg_temp.try($$CREATE TRIGGER threshold_not_a_number BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of', 'high')$$);
SELECT pg_temp.try($$CREATE TRIGGER after_trigger AFTER INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of')$$);

CREATE TABLE unindexed (id int PRIMARY KEY, body text, duplicate_of int);
CREATE TRIGGER flag BEFORE INSERT ON unindexed
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
SELECT pg_temp.try($$INSERT INTO unindexed VALUES (1, 'x')$$);

DROP TABLE unindexed;
SELECT minhash_index_drop('questions');
DROP TABLE questions;

-- Any id column width, and a flag column of another type: the id goes through that type's
-- input, so a value that does not fit is an error, not a wrong flag.
CREATE TABLE posts (
    id integer PRIMARY KEY,
    title varchar(200),
    dup_text text,
    dup_small smallint);
INSERT INTO posts VALUES (1, 'Cheap flights to Lisbon in May'), (70000, 'Best pizza in Naples, Italy');
SELECT minhash_index_create('posts', 'id', 'title', threshold => 0.6) IS NOT NULL AS created;
CREATE TRIGGER flag_text BEFORE INSERT OR UPDATE ON posts
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_text');
CREATE TRIGGER flag_small BEFORE INSERT OR UPDATE ON posts
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_small');
INSERT INTO posts (id, title) VALUES (7, 'Cheap flights to Lisbon in June') RETURNING *;
SELECT pg_temp.try($$INSERT INTO posts (id, title) VALUES (8, 'Best pizza in Naples, Italy!')$$);
-- NULL texts are never duplicates
INSERT INTO posts (id, title) VALUES (9, NULL) RETURNING *;
UPDATE posts SET title = 'Cheap flights to Lisbon in July' WHERE id = 7 RETURNING *;
-- a row that moves to a new id (with a new text) is not a duplicate of its own old id
DELETE FROM posts WHERE id IN (1, 7);
INSERT INTO posts (id, title) VALUES (20, 'Cheap flights to Porto in August') RETURNING *;
UPDATE posts SET id = 100, title = 'Cheap flights to Porto in August!' WHERE id = 20 RETURNING *;
-- A renamed indexed column is named in the error. (ALTER TABLE refuses to rename it, see ddl.sql;
-- with event triggers off, as in replica mode, the rename goes through.)
SET session_replication_role = replica;
ALTER TABLE posts RENAME COLUMN title TO headline;
RESET session_replication_role;
SELECT pg_temp.try($$INSERT INTO posts (id, headline) VALUES (10, 'Anything')$$);
SET session_replication_role = replica;
ALTER TABLE posts RENAME COLUMN headline TO title;
RESET session_replication_role;
SELECT minhash_index_drop('posts', cascade => true);
DROP TABLE posts;
-- A text that is a stored generated column is computed after the BEFORE triggers: the check
-- refuses it (0A000) rather than check the row without it; the index itself follows it.
CREATE TABLE gen_posts (id bigint PRIMARY KEY, raw text,
                        body text GENERATED ALWAYS AS (lower(raw)) STORED, dup bigint);
INSERT INTO gen_posts (id, raw) VALUES (1, 'Cheap flights to Porto in August');
SELECT minhash_index_create('gen_posts', 'id', 'body') IS NOT NULL AS created;
SELECT pg_temp.try($$CREATE TRIGGER gen_posts_flag BEFORE INSERT OR UPDATE ON gen_posts
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup')$$);
-- (made with event triggers off, as in replica mode: its first row gets the same error)
SET session_replication_role = replica;
CREATE TRIGGER gen_posts_flag BEFORE INSERT OR UPDATE ON gen_posts
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
RESET session_replication_role;
SELECT pg_temp.try($$INSERT INTO gen_posts (id, raw) VALUES (2, 'CHEAP FLIGHTS TO PORTO IN AUGUST!')$$);
DROP TRIGGER gen_posts_flag ON gen_posts;
INSERT INTO gen_posts (id, raw) VALUES (2, 'CHEAP FLIGHTS TO PORTO IN AUGUST!');
SELECT id FROM minhash_similar('gen_posts', 'cheap flights to porto in august') ORDER BY id;
SELECT minhash_index_drop('gen_posts');
DROP TABLE gen_posts;
