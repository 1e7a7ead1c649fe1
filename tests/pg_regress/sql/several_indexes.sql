-- Several indexes on one table (character 5-grams and word 3-grams of the same text): each is
-- kept exact by the same sync triggers, named by its band table (a call naming the table reads
-- the default index, the first made), and dropped on its own. Band tables get names that a renamed table does not block.
SET client_min_messages = warning;
CREATE TABLE questions (id int PRIMARY KEY, body text, dup_chars int, dup_words int);
INSERT INTO questions
SELECT g, format('how do I sort a list of %s items in python %s', g % 7, g % 5)
FROM generate_series(1, 60) g;
SELECT minhash_index_create('questions', 'id', 'body') AS chars;
SELECT minhash_index_create('questions', 'id', 'body', ngram => 3, unit => 'word',
                            threshold => 0.5) AS words;
-- the same index twice is refused
SELECT try($$SELECT minhash_index_create('questions', 'id', 'body')$$);
SELECT band_table, ngram, unit, threshold FROM minhash_indexes
WHERE tbl = 'questions'::regclass ORDER BY band_table::text;
-- one set of sync triggers serves both
SELECT count(*) AS sync_triggers FROM pg_trigger
WHERE tgrelid = 'questions'::regclass AND tgfoid = 'minhash_internal._minhash_sync()'::regprocedure;

-- A call naming the table reads its default index, the first made (the character one): a
-- second index breaks no call. Another is named by its band table.
SELECT (SELECT array_agg(id ORDER BY id) FROM minhash_similar('questions', 'how do I sort a list of 3 items in python 3!'))
     = (SELECT array_agg(id ORDER BY id) FROM minhash_similar('questions_minhash_bands', 'how do I sort a list of 3 items in python 3!'))
       AS default_is_first;
SELECT * FROM minhash_index_check('questions');
SELECT count(*) = (SELECT count(*) FROM minhash_duplicates('questions_minhash_bands')) AS same_pairs
FROM minhash_duplicates('questions');
-- dropping is never done by default: of a table with several indexes, name the one (42725)
SELECT try($$SELECT minhash_index_drop('questions')$$);
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('questions_minhash_bands', 'how do I sort a list of 3 items in python 3!')
ORDER BY similarity DESC, id LIMIT 3;
SELECT id, round(similarity::numeric, 4) AS similarity
FROM minhash_similar('questions_minhash_bands1', 'how do I sort a list of 3 items in python 3!')
ORDER BY similarity DESC, id LIMIT 3;
-- each against brute force over its own shingling: every pair found is true, and recall at
-- the index's threshold is at least the 0.99 its banding was chosen for
WITH found AS (SELECT id_a, id_b FROM minhash_duplicates('questions_minhash_bands')),
     truth AS (SELECT a.id AS id_a, b.id AS id_b FROM questions a JOIN questions b ON a.id < b.id
               WHERE jaccard(a.body, b.body) >= 0.8)
SELECT (SELECT count(*) FROM found) AS char_pairs, (SELECT count(*) FROM truth) AS char_truth,
       NOT EXISTS (SELECT * FROM found EXCEPT SELECT * FROM truth) AS all_true;
WITH found AS (SELECT id_a, id_b FROM minhash_duplicates('questions_minhash_bands1')),
     truth AS (SELECT a.id AS id_a, b.id AS id_b FROM questions a JOIN questions b ON a.id < b.id
               WHERE jaccard(a.body, b.body, 3, 'word') >= 0.5)
SELECT (SELECT count(*) FROM found) AS word_pairs, (SELECT count(*) FROM truth) AS word_truth,
       NOT EXISTS (SELECT * FROM found EXCEPT SELECT * FROM truth) AS all_true,
       (SELECT count(*) FROM found)::float8 / (SELECT count(*) FROM truth) >= 0.99 AS recall_ok;

-- every write keeps both exact
INSERT INTO questions (id, body) VALUES (100, 'how do I sort a list of 3 items in python 3?');
UPDATE questions SET body = body || ' now' WHERE id = 1;
DELETE FROM questions WHERE id = 2;
COPY questions (id, body) FROM STDIN;
101	how can I sort a list of 4 items in python 4
\.
SELECT * FROM minhash_index_check('questions_minhash_bands');
SELECT * FROM minhash_index_check('questions_minhash_bands1');
SELECT minhash_index_rebuild('questions_minhash_bands1') AS rows_read;
SELECT rows_indexed FROM minhash_index_stats('questions_minhash_bands1');

-- A role without privileges gets nothing by naming an index by its band table.
CREATE ROLE band_stranger;
SET ROLE band_stranger;
SELECT try($$SELECT * FROM minhash_similar('questions_minhash_bands', 'how do I sort a list')$$);
SELECT try($$SELECT * FROM minhash_duplicates('questions_minhash_bands1')$$);
SELECT try($$SELECT * FROM minhash_index_check('questions_minhash_bands')$$);
SELECT try($$SELECT minhash_index_rebuild('questions_minhash_bands1')$$);
SELECT try($$SELECT minhash_index_drop('questions_minhash_bands1')$$);
SELECT try($$SELECT * FROM questions_minhash_bands LIMIT 1$$);
RESET ROLE;
DROP ROLE band_stranger;
SELECT count(*) AS indexes FROM minhash_indexes WHERE tbl = 'questions'::regclass;

-- A duplicate trigger names its index by its band table (fourth argument); one that does not
-- checks against the default index, and depends on it as a trigger naming it would.
CREATE TRIGGER flag_any BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_chars');
INSERT INTO questions (id, body) VALUES (102, 'how do I sort a list of 4 items in python 4?')
RETURNING dup_chars;
SELECT try($$SELECT minhash_index_drop('questions_minhash_bands')$$);
DROP TRIGGER flag_any ON questions;
CREATE TRIGGER flag_chars BEFORE INSERT OR UPDATE ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_chars', '', 'flag', 'questions_minhash_bands');
CREATE TRIGGER flag_words BEFORE INSERT OR UPDATE ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_words', '', 'flag', 'questions_minhash_bands1');
INSERT INTO questions (id, body) VALUES (103, 'how do I sort a list of 4 items in python 4?')
RETURNING dup_chars, dup_words;
-- words only: a reordered question
INSERT INTO questions (id, body) VALUES (104, 'in python 4 how do I sort a list of 4 items')
RETURNING dup_chars, dup_words;
SELECT try($$CREATE TRIGGER flag_nowhere BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_chars', '', 'flag', 'no_such_bands')$$);
-- (refused as it is made; made with event triggers off, as in replica mode, its first row
-- gets the same error)
SET session_replication_role = replica;
CREATE TRIGGER flag_nowhere BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_chars', '', 'flag', 'no_such_bands');
RESET session_replication_role;
SELECT try($$INSERT INTO questions (id, body) VALUES (105, 'something else')$$);
DROP TRIGGER flag_nowhere ON questions;

-- Dropping one index refuses while its trigger uses it, takes that trigger with cascade, and
-- leaves the other index, its trigger and the sync triggers.
SELECT try($$SELECT minhash_index_drop('questions_minhash_bands1')$$);
SELECT minhash_index_drop('questions_minhash_bands1', cascade => true);
SELECT tgname FROM pg_trigger WHERE tgrelid = 'questions'::regclass ORDER BY 1;
-- the table's one index again answers to the table's name
SELECT * FROM minhash_index_check('questions');
INSERT INTO questions (id, body) VALUES (106, 'how do I sort a list of 5 items in python 5?')
RETURNING dup_chars;
SELECT * FROM minhash_index_check('questions');
SELECT minhash_index_drop('questions', cascade => true);
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgrelid = 'questions'::regclass;
DROP TABLE questions;

-- Several indexes on a partitioned table follow its partitions together.
CREATE TABLE posts (id int, day date, title text, body text, PRIMARY KEY (id, day))
    PARTITION BY RANGE (day);
CREATE TABLE posts_a PARTITION OF posts FOR VALUES FROM ('2025-01-01') TO ('2025-07-01');
INSERT INTO posts VALUES (1, '2025-02-01', 'Sorting', 'how do I sort a list in python');
SELECT minhash_index_create('posts', 'id', 'body') AS on_body;
SELECT minhash_index_create('posts', 'id', text_expression => $$title || ' ' || body$$) AS on_both;
CREATE TABLE posts_b (LIKE posts);
INSERT INTO posts_b VALUES (2, '2025-08-01', 'Sorting', 'how do I sort a list in python?');
ALTER TABLE posts ATTACH PARTITION posts_b FOR VALUES FROM ('2025-07-01') TO ('2026-01-01');
SELECT * FROM minhash_index_check('posts_minhash_bands');
SELECT * FROM minhash_index_check('posts_minhash_bands1');
ALTER TABLE posts DETACH PARTITION posts_a;
SELECT * FROM minhash_index_check('posts_minhash_bands');
SELECT * FROM minhash_index_check('posts_minhash_bands1');
SELECT count(*) AS detached_triggers FROM pg_trigger WHERE tgrelid = 'posts_a'::regclass;
DROP TABLE posts, posts_a;
SELECT count(*) AS indexes_left FROM minhash_indexes;

-- A table renamed keeps its band table's name; one created under its old name gets the next.
CREATE TABLE drafts (id int PRIMARY KEY, body text);
SELECT minhash_index_create('drafts', 'id', 'body');
ALTER TABLE drafts RENAME TO drafts_2025;
CREATE TABLE drafts (id int PRIMARY KEY, body text);
SELECT minhash_index_create('drafts', 'id', 'body');
SELECT tbl, band_table FROM minhash_indexes ORDER BY tbl::text;
DROP TABLE drafts, drafts_2025;
SELECT count(*) AS indexes_left FROM minhash_indexes;
