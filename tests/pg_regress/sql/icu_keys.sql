-- A key under a nondeterministic collation is refused: ids are compared byte for byte
-- (src/index/def/row_id.rs). Nondeterministic collations need ICU; a server built without it says so
-- (icu_keys_1.out).
SET client_min_messages = warning;
CREATE COLLATION nd_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE ci_keys (id text COLLATE nd_ci PRIMARY KEY, body text);
SELECT try($$SELECT minhash_index_create('ci_keys', 'id', 'body')$$);
DROP TABLE ci_keys;
DROP COLLATION nd_ci;
