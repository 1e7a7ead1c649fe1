-- The contract of signature format 1: normalization, shingles, signatures, band keys.

-- Normalization: Unicode lowercase, whitespace runs become one space, trimmed.
SELECT shingles(E'  Hello,\u00a0\u00a0WORLD\t', 20);
SELECT shingles('ΟΔΟΣ', 20);

-- Character shingles are windows of code points, not bytes.
SELECT shingles('Crème brûlée', 4);
SELECT shingles('東京タワー', 2);

-- Word shingles are windows of normalized words.
SELECT shingles('the cat sat on the mat', 2, 'word');
SELECT shingles('The the THE', 1, 'word');

-- Shorter than one window: the whole text; empty: no shingles.
SELECT shingles('hi', 5), shingles('', 5), shingles('   ', 5);

-- Signatures: k slots; an empty document has every slot 0xFFFFFFFF (int4 -1).
SELECT array_length(minhash('some text'), 1) AS default_k,
       array_length(minhash('some text', 16), 1) AS k16;
SELECT minhash('', 4), minhash(E' \n ', 4);

-- Slot i does not depend on k, so a short signature is a prefix of a longer one.
SELECT (minhash('prefix property', 256))[1:32] = minhash('prefix property', 32) AS is_prefix;

-- Format 1 is fixed forever: these values never change.
SELECT minhash_format_version();
SELECT minhash('hello world', 4) AS hello_world;
SELECT minhash('Who was the first king of Poland', 4, 1, 'word') AS words;

-- Exact Jaccard of the shingle sets, and the signature's estimate of it.
SELECT jaccard('Who was the first king of Poland',
               'Who was the first ruler of Poland', unit => 'word', ngram => 1);
SELECT jaccard('', ''), jaccard('', 'x'), jaccard('same', 'SAME');
SELECT minhash_similarity(minhash('a document'), minhash('a document'));
SELECT round(minhash_similarity(minhash(a, 1024), minhash(b, 1024))::numeric, 2) AS estimate,
       round(jaccard(a, b)::numeric, 2) AS exact
FROM (VALUES ('The quick brown fox jumps over the lazy dog',
              'The quick brown fox jumped over the lazy dog')) v(a, b);

-- Band keys: the band index sits in the top 10 bits; equal bands give equal keys.
SELECT ord - 1 AS band, key >> 54 AS index_bits
FROM unnest(lsh_bands(minhash('banding'), 4)) WITH ORDINALITY u(key, ord);
SELECT lsh_bands(minhash('Same Text'), 8) = lsh_bands(minhash('same text'), 8) AS equal_keys;
-- r given: only the first b * r slots are used.
SELECT lsh_bands(minhash('abc'), 10, 12) = lsh_bands((minhash('abc'))[1:120], 10) AS prefix_keys;
-- NULL signature or b: NULL (r NULL means len / b).
SELECT lsh_bands(NULL, 4) IS NULL AS null_sig, lsh_bands(minhash('x'), NULL) IS NULL AS null_b;

-- The S-curve: chance that a pair of similarity s shares a band.
SELECT s, round(lsh_probability(s, 32, 4)::numeric, 4) AS p
FROM unnest(ARRAY[0, 0.2, 0.4, 0.6, 0.8, 1]::float8[]) s;

-- Choosing b and r: best first (fewest false positives among those with recall >= 0.99).
SELECT bands, rows_per_band, round(recall_at_threshold::numeric, 4) AS recall,
       round(false_positive_area::numeric, 4) AS fp_area,
       round(false_negative_area::numeric, 4) AS fn_area
FROM lsh_params(0.8) LIMIT 5;
SELECT count(*) AS admissible FROM lsh_params(0.8, 128, 0.99);
