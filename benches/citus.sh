#!/usr/bin/env bash
# The Citus phase of the benchmarks (benches/run.sh --only citus): the Debian package
# descriptions in a table distributed over two workers (32 shards, a coordinator and two
# workers on this machine, scripts/citus.sh) against the same rows in a plain table on the
# coordinator, in the same run: index build, minhash_duplicates, minhash_clusters,
# minhash_similar, minhash_matches and flagged inserts, and the index build, lookups and flagged
# inserts within a tenant of the same rows distributed by a tenant; then minhash_duplicates of 842,000
# generated questions, and a shard move by logical replication during writes. All three nodes share this machine's cores, so this measures what
# distribution costs (network round trips, 2PC), not a speed-up.
#
#   bash benches/citus.sh [CORPUS.csv]    (CITUS_BENCH_FORMAT=2: indexes of band table format 2)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh
source scripts/citus.sh

csv="${1:-.demo-data/debian-descriptions.csv}"
if [ ! -s "$csv" ]; then
    mkdir -p "$(dirname "$csv")"
    bash scripts/fetch-debian-descriptions.sh "$csv"
fi
citus_install
install_extension --release
trap citus_stop EXIT
citus_start "$(mktemp -d /tmp/pg_minhash-citus-bench.XXXXXX)" "${CITUS_BENCH_PORT:-5521}"
for n in 0 1 2; do
    citus_psql "$n" -qc "ALTER SYSTEM SET shared_buffers = '1GB'" -c "ALTER SYSTEM SET work_mem = '64MB'" \
        -c "ALTER SYSTEM SET synchronous_commit = off"
    citus_as_postgres "$CITUS_BIN/pg_ctl" -D "$CITUS_DIR/node$n" -w restart >/dev/null
done
q() { citus_psql 0 -qAt "$@"; }
q -c "CREATE EXTENSION pg_minhash"
# (every index of the run, plain and distributed, of band table format CITUS_BENCH_FORMAT: 1 or 2)
q -c "ALTER DATABASE postgres SET pg_minhash.default_format = ${CITUS_BENCH_FORMAT:-1}"

# seconds of wall time of one psql run
timed() {
    local start end
    start=$(date +%s.%N)
    q "$@" >/dev/null
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}

q <<EOF
CREATE TABLE staging (id bigint GENERATED ALWAYS AS IDENTITY, name text, body text);
\copy staging (name, body) FROM '$csv' WITH (FORMAT csv)
CREATE TABLE docs (id bigint PRIMARY KEY, body text, dup_of bigint);
SELECT create_distributed_table('docs', 'id');
INSERT INTO docs (id, body) SELECT id, body FROM staging;
CREATE TABLE docs_local (id bigint PRIMARY KEY, body text, dup_of bigint);
INSERT INTO docs_local (id, body) SELECT id, body FROM staging;
-- probes: 200 descriptions with a word changed; inserts: 500 more of them
CREATE TABLE probes AS
    SELECT row_number() OVER (ORDER BY id) AS n, id AS src, regexp_replace(body, '(\S+)\$', 'changed') AS body
    FROM (SELECT id, body FROM staging WHERE length(body) > 200 ORDER BY id LIMIT 700) s;
VACUUM ANALYZE docs_local;
EOF
rows=$(q -c "SELECT count(*) FROM docs_local")
echo "== Citus: $rows Debian descriptions, distributed (32 shards on 2 workers) vs a plain table, band table format ${CITUS_BENCH_FORMAT:-1}"
echo "   (coordinator and workers share 2 cores: this is the overhead of distribution, not a speed-up)"

declare -A fig
for t in docs_local docs; do
    fig[$t,create]=$(timed -c "SELECT minhash_index_create('$t', 'id', 'body')")
    fig[$t,dups]=$(timed -c "SELECT count(*) FROM minhash_duplicates('$t')")
    fig[$t,clusters]=$(timed -c "SELECT count(*) FROM minhash_clusters('$t')")
    fig[$t,similar]=$(timed -c "SELECT count(*) FROM probes p, minhash_similar('$t', p.body) WHERE p.n <= 200")
    fig[$t,matches]=$(timed -c "SELECT count(*) FROM minhash_matches('$t', (SELECT array_agg(body ORDER BY n) FROM probes WHERE n <= 200))")
    q -c "SET citus.enable_unsafe_triggers = on" \
      -c "CREATE TRIGGER flag BEFORE INSERT ON $t FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_of')"
    inserts=$(q -c "SELECT format('INSERT INTO $t (id, body) VALUES (%s, %L);', 1000000 + n, body)
                    FROM probes WHERE n > 200")
    fig[$t,insert]=$(timed <<<"$inserts")
    fig[$t,pairs]=$(q -c "SELECT count(*) FROM minhash_duplicates('$t')")
    fig[$t,flagged]=$(q -c "SELECT count(*) FROM $t WHERE dup_of IS NOT NULL")
done
[ "${fig[docs,pairs]}" = "${fig[docs_local,pairs]}" ] && [ "${fig[docs,flagged]}" = "${fig[docs_local,flagged]}" ] \
    || { echo "results differ: pairs ${fig[docs,pairs]} / ${fig[docs_local,pairs]}, flagged ${fig[docs,flagged]} / ${fig[docs_local,flagged]}" >&2; exit 1; }

# The same rows in a table distributed by a tenant (100 tenants: tenant = id % 100; key
# (tenant, id), 32 shards): lookups and flagged inserts within the row's tenant, each query of
# one shard (docs/citus.md). Its lookups return the plain table's rows of the tenant.
q <<EOF
CREATE TABLE tdocs (tenant int, id bigint, body text, dup_of bigint, PRIMARY KEY (tenant, id));
SELECT create_distributed_table('tdocs', 'tenant');
INSERT INTO tdocs (tenant, id, body) SELECT id % 100, id, body FROM staging;
EOF
fig[tdocs,create]=$(timed -c "SELECT minhash_index_create('tdocs', 'id', 'body')")
fig[tdocs,similar]=$(timed -c "SELECT count(*) FROM probes p, minhash_similar('tdocs', p.body, tenant => (p.src % 100)::text) WHERE p.n <= 200")
same=$(q -c "SELECT (SELECT count(*) || ' ' || round(sum(s.similarity)::numeric, 6) FROM probes p,
                     minhash_similar('tdocs', p.body, tenant => (p.src % 100)::text) s WHERE p.n <= 200)
                    = (SELECT count(*) || ' ' || round(sum(s.similarity)::numeric, 6) FROM probes p,
                     minhash_similar('docs_local', p.body) s WHERE p.n <= 200 AND s.id % 100 = p.src % 100)")
[ "$same" = t ] || { echo "lookups within a tenant differ from the plain table's rows of the tenant" >&2; exit 1; }
q -c "SET citus.enable_unsafe_triggers = on" \
  -c "CREATE TRIGGER flag BEFORE INSERT ON tdocs FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('dup_of')"
inserts=$(q -c "SELECT format('INSERT INTO tdocs (tenant, id, body) VALUES (%s, %s, %L);', src % 100, 1000000 + n, body)
                FROM probes WHERE n > 200")
fig[tdocs,insert]=$(timed <<<"$inserts")
fig[tdocs,flagged]=$(q -c "SELECT count(*) FROM tdocs WHERE dup_of IS NOT NULL")

calc() { awk "BEGIN { printf \"$1\", $2 }"; }
row() { # row LABEL KEY UNIT (s, lookup: ms per lookup, insert: rows/s) [TABLE], TABLE (docs) / plain
    local l d t="${4:-docs}"
    case "$3" in
        s) l=$(printf '%.2f s' "${fig[docs_local,$2]}"); d=$(printf '%.2f s' "${fig[$t,$2]}") ;;
        lookup) l=$(calc "%.2f ms" "${fig[docs_local,$2]} * 1000 / 200")
                d=$(calc "%.2f ms" "${fig[$t,$2]} * 1000 / 200") ;;
        insert) l=$(calc "%.0f/s" "500 / ${fig[docs_local,$2]}")
                d=$(calc "%.0f/s" "500 / ${fig[$t,$2]}") ;;
    esac
    printf '| %-44s | %12s | %12s | %6s |\n' "$1" "$l" "$d" "$(calc "%.1fx" "${fig[$t,$2]} / ${fig[docs_local,$2]}")"
}
echo
printf '| %-44s | %12s | %12s | %6s |\n' "" "plain table" "distributed" "time"
printf '|%s|%s|%s|%s|\n' "----------------------------------------------" "--------------" "--------------" "--------"
row "minhash_index_create" create s
row "minhash_duplicates (${fig[docs,pairs]} pairs, equal)" dups s
row "minhash_clusters" clusters s
row "minhash_similar, mean of 200 lookups" similar lookup
row "minhash_matches of the same 200 texts" matches s
row "flagged inserts, 1 session (${fig[docs,flagged]} flagged, equal)" insert insert
row "by tenant: minhash_index_create" create s tdocs
row "by tenant: minhash_similar within the tenant" similar lookup tdocs
row "by tenant: flagged inserts (${fig[tdocs,flagged]} flagged)" insert insert tdocs

# Whole-table searches at scale: CITUS_BENCH_SCALE_ROWS (842,000) generated questions
# (benches/run.py's), distributed and plain, same run: minhash_duplicates must give the same
# pairs, and both times are printed.
scale_rows="${CITUS_BENCH_SCALE_ROWS:-842000}"
if [ "$scale_rows" -gt 0 ]; then
    # (the questions' SQL, as benches/run.py defines it)
    python3 -c 'import re; print(re.search(r"QUESTIONS_SQL = \"\"\"(.*?)\"\"\"", open("benches/run.py").read(), re.S)[1])' \
        | q >/dev/null
    q <<EOF
ALTER TABLE questions ALTER COLUMN id DROP IDENTITY;
CREATE TABLE questions_local (LIKE questions INCLUDING ALL);
SELECT create_distributed_table('questions', 'id');
INSERT INTO questions (id, body) SELECT g, bench_question(g) FROM generate_series(1, $scale_rows) g;
INSERT INTO questions_local SELECT * FROM questions;
VACUUM ANALYZE questions_local;
SELECT minhash_index_create('questions_local', 'id', 'body');
SELECT minhash_index_create('questions', 'id', 'body');
EOF
    for t in questions_local questions; do
        fig[$t,dups]=$(timed -c "SELECT count(*) FROM minhash_duplicates('$t')")
        # (count, and sums of ids and similarities: a checksum of the pairs)
        fig[$t,sums]=$(q -c "SELECT count(*) || ' ' || sum(id_a) || ' ' || sum(id_b) || ' ' ||
                                    round(sum(similarity)::numeric, 6) FROM minhash_duplicates('$t')")
        fig[$t,pairs]=${fig[$t,sums]%% *}
    done
    [ "${fig[questions,sums]}" = "${fig[questions_local,sums]}" ] \
        || { echo "results differ: ${fig[questions,sums]} / ${fig[questions_local,sums]}" >&2; exit 1; }
    printf '| %-44s | %12s | %12s | %6s |\n' "minhash_duplicates, $scale_rows questions (${fig[questions,pairs]} pairs, equal)" \
        "$(printf '%.2f s' "${fig[questions_local,dups]}")" "$(printf '%.2f s' "${fig[questions,dups]}")" \
        "$(calc "%.1fx" "${fig[questions,dups]} / ${fig[questions_local,dups]}")"
fi

# A shard move by logical replication while a writer updates 500 rows of that shard, one
# statement each: the band rows the new shard receives meanwhile are replayed through its
# unique (key, id) B-tree, the band table's replica identity (docs/citus.md); a scan of the band
# shard per replayed row would show as sequential scans on the target.
read -r shard src <<<"$(q -F' ' -c "SELECT s.shardid, p.nodeport FROM pg_dist_shard s
    JOIN pg_dist_shard_placement p USING (shardid) WHERE s.logicalrelid = 'docs'::regclass
    ORDER BY s.shardid LIMIT 1")"
dst=$(( src == CITUS_PORT + 1 ? CITUS_PORT + 2 : CITUS_PORT + 1 ))
band_shard=$(q -c "SELECT 'docs_minhash_bands_' || shardid FROM pg_dist_shard
    WHERE logicalrelid = 'docs_minhash_bands'::regclass ORDER BY shardid LIMIT 1")
q -c "SELECT format('UPDATE docs SET body = body || %L WHERE id = %s;', ' moved', id) FROM docs
      WHERE get_shard_id_for_distribution_column('docs', id) = $shard ORDER BY hashint8(id) LIMIT 500" \
    | q >/dev/null &
writer=$!
sleep 0.3
fig[move]=$(timed -c "SELECT citus_move_shard_placement($shard, '127.0.0.1', $src, '127.0.0.1', $dst,
                                                     shard_transfer_mode => 'force_logical')")
wait "$writer"
sleep 1  # (the statistics the apply worker left when it exited)
scans=$(citus_psql $((dst - CITUS_PORT)) -qAt -c "SET citus.show_shards_for_app_name_prefixes = '*'" \
    -c "SELECT seq_scan || ' scans reading ' || seq_tup_read || ' rows, ' || n_tup_del || ' band rows deleted'
        FROM pg_stat_user_tables WHERE relname = '$band_shard'")
printf '| %-44s | %12s | %12s | %6s |\n' "shard move during 500 updates ($scans)" "" \
    "$(printf '%.2f s' "${fig[move]}")" ""

# The plan of a lookup's two queries (minhash_internal._minhash_lookup_sql('docs')), for the
# keys of one row and three candidates.
# (of format 2, one condition per band's key column)
if [ "${CITUS_BENCH_FORMAT:-1}" = 1 ]; then
    condition="b.key = ANY ('$(q -c "SELECT array_agg(key)::text FROM docs_minhash_bands WHERE id = 1")'::int8[])"
else
    condition=$(q -c "SELECT string_agg(format('b.%I = %s', e.key, e.value), ' OR ')
                      FROM docs_minhash_bands b CROSS JOIN LATERAL jsonb_each_text(to_jsonb(b)) e
                      WHERE b.id = 1 AND e.key ~ '^key[0-9]+$'")
fi
echo
echo "A lookup of the band keys of row 1:"
q -c "SET citus.explain_all_tasks = off" -c "EXPLAIN (COSTS OFF)
    SELECT b.id, b.sketch1, b.sketch2 FROM public.docs_minhash_bands b WHERE $condition"
echo "Its verification of three candidates:"
q -c "EXPLAIN (COSTS OFF)
    SELECT t.id::int8, public.jaccard(t.body::text, 'a probe text', 5, 'char') FROM public.docs t
    WHERE t.id = ANY ('{1,2,3}'::int8[]) AND t.body IS NOT NULL"
