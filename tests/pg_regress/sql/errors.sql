-- Bad input gets a clear error (the SQLSTATE of each is tested in the #[pg_test]s).
SELECT minhash('x', 0);
SELECT minhash('x', 1025);
SELECT minhash('x', ngram => 0);
SELECT minhash('x', ngram => 65);
SELECT minhash('x', ngram => 17, unit => 'word');
SELECT minhash('x', unit => 'sentence');
SELECT lsh_bands(minhash('x'), 0);
SELECT lsh_bands(minhash('x'), 20);
SELECT lsh_bands(minhash('x'), 20, 7);
SELECT lsh_bands(minhash('x'), 4, 0);
SELECT lsh_bands('{1,NULL}'::int4[], 1);
SELECT lsh_bands('{{1,2},{3,4}}'::int4[], 2);
SELECT lsh_bands('{}'::int4[], 1);
SELECT minhash_similarity(minhash('a', 64), minhash('a', 128));
SELECT minhash_similarity('{1,NULL}'::int4[], '{1,2}'::int4[]);
SELECT lsh_probability(1.5, 4, 4);
SELECT lsh_probability(0.5, 0, 4);
SELECT * FROM lsh_params(0);
SELECT * FROM lsh_params(0.8, 2000);
SELECT jaccard('a', 'b', unit => 'line');
-- NULL documents give NULL, not an error.
SELECT minhash(NULL) IS NULL, jaccard(NULL, 'x') IS NULL, shingles(NULL) IS NULL;
-- A long computation can be cancelled.
SET statement_timeout = '200ms';
SELECT minhash(repeat('abcdefghij', 5000000), 1024);
RESET statement_timeout;
