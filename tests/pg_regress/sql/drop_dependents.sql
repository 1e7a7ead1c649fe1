-- A minhash_flag_duplicate trigger looks rows up in its table's index. minhash_index_drop
-- refuses while one is on the table (2BP01, naming the triggers), as DROP INDEX refuses
-- while a constraint uses the index; with cascade => true it drops them too.
CREATE TABLE questions (id int PRIMARY KEY, body text, dup int);
CREATE TABLE answers (id int PRIMARY KEY, body text, dup int);
INSERT INTO questions VALUES (1, 'How do I reverse a string in Python?');
INSERT INTO answers VALUES (1, 'Use slicing: s[::-1] reverses a string.');
SET client_min_messages = warning;
SELECT count(*) FROM (SELECT minhash_index_create('questions', 'id', 'body')
                      UNION ALL SELECT minhash_index_create('answers', 'id', 'body')) s;
RESET client_min_messages;
CREATE TRIGGER questions_flag BEFORE INSERT OR UPDATE ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');
CREATE TRIGGER questions_reject BEFORE INSERT ON questions
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate(NULL, NULL, 'reject');
CREATE TRIGGER answers_flag BEFORE INSERT ON answers
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup');

\set VERBOSITY verbose
\set SHOW_CONTEXT never
SELECT minhash_index_drop('questions');
\set VERBOSITY terse
SELECT tbl FROM minhash_indexes ORDER BY 1;
-- refused means nothing changed: the index and its triggers still work
SELECT try($$INSERT INTO questions VALUES (2, 'How do I reverse a string in Python ?')$$);

-- cascade => true drops the flag triggers of this table, and only those
SELECT minhash_index_drop('questions', cascade => true);
SELECT tgrelid::regclass AS tbl, tgname FROM pg_trigger
WHERE tgrelid IN ('questions'::regclass, 'answers'::regclass) AND NOT tgisinternal ORDER BY 1, 2;
INSERT INTO questions VALUES (2, 'How do I reverse a string in Python ?', NULL);
SELECT id, dup FROM questions ORDER BY id;

-- without flag triggers, no cascade is needed; DROP TABLE takes everything along
DROP TRIGGER answers_flag ON answers;
SELECT minhash_index_drop('answers');
SELECT count(*) AS indexes_left FROM minhash_indexes;
DROP TABLE questions, answers;
