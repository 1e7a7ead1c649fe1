#!/usr/bin/env bash
# Reproduces the figures of docs/parameters.md: near-duplicate pairs and their precision
# for unit/ngram in {char 3, 5, 7; word 1, 2, 3} and thresholds 0.5/0.7/0.8/0.9, on
#   (a) Debian package long descriptions (scripts/fetch-debian-descriptions.sh), and
#   (b) the /usr/share/doc/*/copyright files of this machine (distinct files, symlinks resolved).
#
# Needs a running PostgreSQL with pg_minhash installed (CREATE EXTENSION privilege), reached
# through PGHOST/PGPORT/PGUSER/PGDATABASE; psql, python3, lz4, dpkg-query on this machine, and
# the system apt lists (/var/lib/apt/lists/*_Packages.lz4) for the Package -> Source map.
# Everything goes in schema minhash_params (dropped and made again). Usage:
#   PGHOST=/tmp/sock PGPORT=5432 bash benches/parameters.sh [workdir]   (~15 min on 2 cores)
#
# Pairs: an index per setting at threshold 0.5 (minhash_index_create), then
# minhash_duplicates(band_table, 0.5), which verifies every candidate with exact Jaccard; the
# higher thresholds filter those pairs. Recall is >= 0.99 at 0.5 and ~1 from 0.6 up.
# Ground truth ("true" pair): the two packages' Debian source packages are of one family
# (function fam below: version numbers and -cross/-ports/-signed... tails cut, so gcc-12-cross
# ~ gcc-defaults-ports, libsdl1.2 ~ libsdl2); for copyright files also: the same Upstream-Name,
# or the same package-name prefix before the first '-' or digit (except "python").
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d /tmp/pg_minhash-params.XXXXXX)}
mkdir -p "$work"

[ -s "$work/desc.csv" ] || bash "$here/scripts/fetch-debian-descriptions.sh" "$work/desc.csv"
for f in /var/lib/apt/lists/*_Packages.lz4; do lz4 -dc "$f"; echo; done |
    awk '/^Package: /{p=$2; s=$2} /^Source: /{s=$2} /^$/{if (p != "") print p "\t" s; p=""}' |
    sort -u > "$work/pkgsrc.tsv"
dpkg-query -W -f='${Package}\t${source:Package}\n' | sed 's/:[a-z0-9]*\t/\t/' | sort -u \
    > "$work/dpkgsrc.tsv"
python3 - "$work/copyright.csv" <<'PY'
import csv, glob, os, re, sys
seen = {}
for f in sorted(glob.glob('/usr/share/doc/*/copyright')):
    real = os.path.realpath(f)
    if real in seen or not os.path.isfile(real):
        continue
    seen[real] = os.path.basename(os.path.dirname(real))
with open(sys.argv[1], 'w', newline='') as out:
    w = csv.writer(out)
    for real, name in seen.items():
        body = open(real, 'rb').read().decode('utf-8', 'replace').replace('\0', '')
        m = re.search(r'^Upstream-Name:\s*(.*?)\s*$', body, re.M)
        w.writerow([name, m.group(1) if m else '', body])
PY

PGOPTIONS=-cclient_min_messages=warning psql -X -q -v ON_ERROR_STOP=1 \
    -c 'CREATE EXTENSION IF NOT EXISTS pg_minhash' \
    -c 'DROP SCHEMA IF EXISTS minhash_params CASCADE' -c 'CREATE SCHEMA minhash_params' \
    -c 'CREATE TABLE minhash_params.pkgsrc (pkg text, src text)' \
    -c 'CREATE TABLE minhash_params.dpkgsrc (pkg text, src text)' \
    -c 'CREATE TABLE minhash_params.desc_raw (name text, body text)' \
    -c 'CREATE TABLE minhash_params.cr_raw (name text, upstream text, body text)' \
    -c "\\copy minhash_params.pkgsrc FROM '$work/pkgsrc.tsv'" \
    -c "\\copy minhash_params.dpkgsrc FROM '$work/dpkgsrc.tsv'" \
    -c "\\copy minhash_params.desc_raw FROM '$work/desc.csv' (FORMAT csv)" \
    -c "\\copy minhash_params.cr_raw FROM '$work/copyright.csv' (FORMAT csv)"

psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
SET search_path = minhash_params, public;
-- source family: the source package's name without version numbers and without the tails
-- of Debian's toolchain/kernel variants (gcc-12-cross-mipsen, gcc-defaults-ports ~ gcc)
CREATE FUNCTION fam(s text) RETURNS text IMMUTABLE LANGUAGE sql RETURN
    regexp_replace(regexp_replace(s, '[0-9]+(\.[0-9]+)*', '', 'g'),
                   '(-+(cross|signed|ports|mipsen|defaults).*|-+)$', '');
CREATE TABLE descs (id int PRIMARY KEY, name text, fam text, body text);
INSERT INTO descs SELECT row_number() OVER (ORDER BY d.name), d.name,
    fam(coalesce(p.src, d.name)), d.body
    FROM (SELECT DISTINCT ON (name) * FROM desc_raw ORDER BY name) d
    LEFT JOIN (SELECT pkg, min(src) src FROM pkgsrc GROUP BY pkg) p ON p.pkg = d.name;
CREATE TABLE cr (id int PRIMARY KEY, name text, pfx text, fam text, upstream text, body text);
INSERT INTO cr SELECT row_number() OVER (ORDER BY c.name), c.name,
    nullif(substring(c.name FROM '^[^-0-9]+'), 'python'),
    fam(coalesce(p.src, c.name)), nullif(lower(c.upstream), ''), c.body
    FROM cr_raw c LEFT JOIN (SELECT pkg, min(src) src FROM dpkgsrc GROUP BY pkg) p ON p.pkg = c.name;
ANALYZE descs; ANALYZE cr;
SELECT 'corpus' AS what, (SELECT count(*) FROM descs) AS descriptions,
    (SELECT pg_size_pretty(sum(octet_length(body))) FROM descs) AS desc_size,
    (SELECT count(*) FROM cr) AS copyright_files,
    (SELECT pg_size_pretty(sum(octet_length(body))) FROM cr) AS cr_size \gx

-- Copyright header lines only: Upstream-Name/Source/Files/Copyright fields, their indented
-- continuation lines that start with a year, and free-form lines with (c), © or
-- "Copyright <year>"; every other line (license texts) is blanked.
CREATE TABLE recipes (name text PRIMARY KEY, pattern text,
    expr text GENERATED ALWAYS AS ('regexp_replace(body, ' || quote_literal(pattern)
                                   || ', '''', ''gni'')') STORED);
INSERT INTO recipes VALUES ('headers',
  '^(?!(Upstream-Name|Source|Files|Copyright):|[ \t]+[0-9]{4}|.*(\(c\)|©|copyright:? *[0-9])).*$');

CREATE TABLE pairs (corpus text, setting text, id_a int, id_b int, j float8);
CREATE TABLE timings (corpus text, setting text, seconds numeric);
CREATE PROCEDURE run(corpus text, unit text, ngram int, recipe text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE bt regclass; t0 timestamptz := clock_timestamp();
        setting text := concat_ws(' ', unit, ngram, recipe);
        expr text := (SELECT r.expr FROM recipes r WHERE r.name = recipe);
BEGIN
  IF expr IS NULL THEN
    bt := minhash_index_create(format('minhash_params.%I', corpus)::regclass, 'id', 'body',
                               ngram => ngram, unit => unit, threshold => 0.5);
  ELSE
    bt := minhash_index_create(format('minhash_params.%I', corpus)::regclass, 'id',
                               ngram => ngram, unit => unit, threshold => 0.5,
                               text_expression => expr);
  END IF;
  INSERT INTO pairs SELECT corpus, setting, d.id_a, d.id_b, d.similarity
    FROM minhash_duplicates(bt, threshold => 0.5) d;
  PERFORM minhash_index_drop(bt);
  INSERT INTO timings VALUES (corpus, setting,
    round(extract(epoch FROM clock_timestamp() - t0)::numeric, 1));
  COMMIT;
END $$;
SET client_min_messages = warning;
CALL run('cr', 'char', 3); CALL run('cr', 'char', 5); CALL run('cr', 'char', 7);
CALL run('cr', 'word', 1); CALL run('cr', 'word', 2); CALL run('cr', 'word', 3);
CALL run('cr', 'char', 5, 'headers'); CALL run('cr', 'word', 3, 'headers');
CALL run('descs', 'char', 3); CALL run('descs', 'char', 5); CALL run('descs', 'char', 7);
CALL run('descs', 'word', 1); CALL run('descs', 'word', 2); CALL run('descs', 'word', 3);

CREATE VIEW judged AS
SELECT p.*, a.fam = b.fam OR coalesce(a.up = b.up OR a.pfx = b.pfx, false) AS ok,
       a.name AS name_a, b.name AS name_b
FROM pairs p
JOIN (SELECT 'descs' c, id, name, fam, NULL up, NULL pfx FROM descs
      UNION ALL SELECT 'cr', id, name, fam, upstream, pfx FROM cr) a ON a.c = p.corpus AND a.id = p.id_a
JOIN (SELECT 'descs' c, id, name, fam, NULL up, NULL pfx FROM descs
      UNION ALL SELECT 'cr', id, name, fam, upstream, pfx FROM cr) b ON b.c = p.corpus AND b.id = p.id_b;

\echo '== pairs (precision) by corpus, setting and threshold; seconds = index + search at 0.5'
SELECT j.corpus, j.setting, max(t.seconds) AS seconds,
  format('%s (%s)', count(*) FILTER (WHERE j >= 0.5),
         round(avg(ok::int) FILTER (WHERE j >= 0.5), 2)) AS "0.5",
  format('%s (%s)', count(*) FILTER (WHERE j >= 0.7),
         round(avg(ok::int) FILTER (WHERE j >= 0.7), 2)) AS "0.7",
  format('%s (%s)', count(*) FILTER (WHERE j >= 0.8),
         round(avg(ok::int) FILTER (WHERE j >= 0.8), 2)) AS "0.8",
  format('%s (%s)', count(*) FILTER (WHERE j >= 0.9),
         round(avg(ok::int) FILTER (WHERE j >= 0.9), 2)) AS "0.9"
FROM judged j JOIN timings t USING (corpus, setting)
GROUP BY 1, 2 ORDER BY 1, 2;

\echo '== copyright: index pairs vs brute force (jaccard() on all 237,705 pairs), >= 0.5'
CREATE TABLE bf AS SELECT s.setting, a.id AS id_a, b.id AS id_b,
    jaccard(a.body, b.body, s.ngram, s.unit) AS j
  FROM (VALUES ('char 5', 5, 'char'), ('word 3', 3, 'word')) s(setting, ngram, unit),
       cr a JOIN cr b ON a.id < b.id;
SELECT setting, count(*) FILTER (WHERE bf.j >= 0.5) AS brute_force,
       count(p.j) FILTER (WHERE bf.j >= 0.5) AS index_found
FROM bf LEFT JOIN (SELECT * FROM pairs WHERE corpus = 'cr') p USING (setting, id_a, id_b)
GROUP BY 1 ORDER BY 1;
SELECT r.expr AS headers_expression, count(*) FILTER (WHERE regexp_replace(body, r.pattern,
  '', 'gni') !~ '\w') AS files_left_empty FROM cr, recipes r GROUP BY 1 \gx

\echo '== false matches at 0.8: the most similar, per setting (3 each)'
SELECT corpus, setting, name_a, name_b, round(j::numeric, 3) AS j FROM (
  SELECT *, row_number() OVER (PARTITION BY corpus, setting ORDER BY j DESC, id_a, id_b) n
  FROM judged WHERE NOT ok AND j >= 0.8) x WHERE n <= 3 ORDER BY 1, 2, 5 DESC;

\echo '== spot check: 20 random judged pairs per corpus (char 5, >= 0.8), seed fixed'
SELECT setseed(0.42);
SELECT corpus, name_a, name_b, ok, round(j::numeric, 3) AS j FROM judged
WHERE corpus = 'descs' AND setting = 'char 5' AND j >= 0.8 ORDER BY random() LIMIT 20;
SELECT corpus, name_a, name_b, ok, round(j::numeric, 3) AS j FROM judged
WHERE corpus = 'cr' AND setting = 'char 5' AND j >= 0.8 ORDER BY random() LIMIT 20;
\echo '== descriptions, char 5 >= 0.8: false pairs with identical normalized text'
SELECT count(*) FILTER (WHERE NOT ok) AS false_pairs,
       count(*) FILTER (WHERE NOT ok AND j = 1) AS identical FROM judged
WHERE corpus = 'descs' AND setting = 'char 5' AND j >= 0.8;
SQL
