#!/usr/bin/env bash
# Huge inputs under an address-space limit, as containers and `ulimit` run PostgreSQL: 100 MB
# texts through every function, a flagged insert of a 100 MB near-duplicate of a 100 MB row,
# and 200,000 identical rows through minhash_duplicates and minhash_clusters. Each statement
# must finish or fail with a clean SQLSTATE; no backend may abort (which would restart the
# whole cluster), and a duplicates search cut off by statement_timeout must stop promptly with
# its memory bounded.
# Usage: tests/limits/run.sh (the extension must be installed). LIMITS_PG_BIN runs another
# PostgreSQL installation's binaries (one with a build of the extension in its lib/ and share/).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/cluster.sh
PG_BIN="${LIMITS_PG_BIN:-$PG_BIN}"
export PATH="$PG_BIN:$PATH"

# Address space of the postmaster and each backend, in KiB.
LIMIT_KB=3000000
# Port of the throwaway cluster (its socket is in its own directory).
PORT="${LIMITS_PORT:-5432}"
# statement_timeout of the duplicates search, and how late after it the search may stop.
TIMEOUT_MS=3000
LATE_MS=1000
# Peak resident memory the duplicates search may reach, in KiB.
MAX_RSS_KB=1000000

dir=$(mktemp -d /tmp/pg_minhash-limits.XXXXXX)
trap cluster_stop EXIT
CLUSTER_DIR="$dir"
chmod 755 "$dir"
as_root chown postgres: "$dir"
as_postgres "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
    >/dev/null
# The limit is set in the shell that starts the postmaster: its backends inherit it.
as_postgres bash -c "ulimit -v $LIMIT_KB && exec '$PG_BIN/pg_ctl' -D '$dir/data' \
    -l '$dir/server.log' -w -o \"-c listen_addresses='' -k $dir -p $PORT\" start" >/dev/null
export PGHOST="$dir" PGPORT=$PORT PGUSER=postgres

postmaster=$(head -1 "$dir/data/postmaster.pid")
limit=$(awk '/Max address space/ {print $4}' "/proc/$postmaster/limits")
if [ "$limit" != "$((LIMIT_KB * 1024))" ]; then
    echo "the postmaster's address space is not limited (limit: $limit)" >&2
    exit 1
fi

sql() { psql -X -q -At -v ON_ERROR_STOP=1 "$@"; }

sql <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION pg_minhash;
-- two 99 MB texts of md5 hex words, the second with one word in a thousand changed
CREATE TABLE big (name text PRIMARY KEY, body text);
ALTER TABLE big ALTER body SET STORAGE EXTERNAL;
INSERT INTO big SELECT 'a', string_agg(md5(i::text), ' ') FROM generate_series(1, 3000000) i;
INSERT INTO big SELECT 'b', string_agg(md5(CASE WHEN i % 1000 = 0 THEN -i ELSE i END::text), ' ')
    FROM generate_series(1, 3000000) i;
-- the same text in Greek capitals: every word goes through the full Unicode lowercasing
INSERT INTO big SELECT 'greek', upper(translate(body, 'abcdef', 'αβγδεσ')) FROM big
    WHERE name = 'a';
-- an indexed table holding the first text, flagging near-duplicates of new rows
CREATE TABLE docs (id bigint PRIMARY KEY, body text, duplicate_of bigint);
ALTER TABLE docs ALTER body SET STORAGE EXTERNAL;
INSERT INTO docs SELECT 1, body FROM big WHERE name = 'a';
SELECT minhash_index_create('docs', 'id', 'body') \g /dev/null
CREATE TRIGGER docs_flag BEFORE INSERT ON docs
    FOR EACH ROW EXECUTE FUNCTION minhash_flag_duplicate('duplicate_of');
-- 200,000 copies of one text
CREATE TABLE copies (id bigint PRIMARY KEY, body text);
INSERT INTO copies SELECT i, 'how do I sort a list in place?' FROM generate_series(1, 200000) i;
SELECT minhash_index_create('copies', 'id', 'body') \g /dev/null
SQL

failures=0

# run_case NAME ALLOWED SQL: runs SQL (statement_timeout 60 s) and prints its outcome, "ok"
# and the result or the SQLSTATE and message of its error; ALLOWED lists the acceptable ones.
run_case() {
    local name=$1 allowed=$2 query=$3 out start elapsed outcome
    start=$(date +%s%N)
    if out=$(PGOPTIONS="-c statement_timeout=60s" sql -c '\set VERBOSITY verbose' \
            -c "$query" 2>&1); then
        outcome=ok
    else
        outcome=$(grep -oE '^ERROR: +[0-9A-Z]{5}' <<<"$out" | awk '{print $2}' | head -1)
        outcome=${outcome:-none}
        out=$(grep -m1 '^ERROR' <<<"$out" || echo "$out")
    fi
    elapsed=$((($(date +%s%N) - start) / 1000000))
    printf '%-44s %-6s %6d ms  %s\n' "$name" "$outcome" "$elapsed" "$(head -c 120 <<<"$out")"
    if ! grep -qw -- "$outcome" <<<"${allowed//|/ }"; then
        echo "  expected one of: $allowed" >&2
        failures=$((failures + 1))
    fi
}

run_case "minhash, 99 MB" "ok|53200" \
    "SELECT cardinality(minhash(body)) FROM big WHERE name = 'a'"
run_case "minhash, 99 MB of Greek capitals" "ok|53200" \
    "SELECT cardinality(minhash(body)) FROM big WHERE name = 'greek'"
run_case "minhash, 99 MB, word 3-grams" "ok|53200" \
    "SELECT cardinality(minhash(body, 128, 3, 'word')) FROM big WHERE name = 'a'"
run_case "shingles, 99 MB, ngram 16" "54000|53200" \
    "SELECT cardinality(shingles(body, 16)) FROM big WHERE name = 'a'"
run_case "shingles, 99 MB of Greek, ngram 16" "54000|53200" \
    "SELECT cardinality(shingles(body, 16)) FROM big WHERE name = 'greek'"
run_case "shingles, 10 MB, ngram 5" "ok|53200" \
    "SELECT cardinality(shingles(left(body, 10000000), 5)) FROM big WHERE name = 'a'"
run_case "jaccard, 99 MB and 99 MB" "ok|53200" \
    "SELECT round(jaccard(a.body, b.body)::numeric, 4) FROM big a, big b
     WHERE a.name = 'a' AND b.name = 'b'"
run_case "minhash_similarity, 99 MB texts" "ok|53200" \
    "SELECT minhash_similarity(minhash(a.body), minhash(b.body)) FROM big a, big b
     WHERE a.name = 'a' AND b.name = 'b'"
run_case "minhash_similarity, 100 MB int4[]" "ok|53200" \
    "SELECT minhash_similarity(x, x) FROM (SELECT array_agg(i) x
     FROM generate_series(1, 25000000) i) s"
run_case "lsh_bands(minhash()), 99 MB" "ok|53200" \
    "SELECT cardinality(lsh_bands(minhash(body), 16)) FROM big WHERE name = 'a'"
run_case "lsh_bands, 100 MB int4[]" "ok|53200" \
    "SELECT cardinality(lsh_bands(x, 1000)) FROM (SELECT array_agg(i) x
     FROM generate_series(1, 25000000) i) s"
run_case "minhash_components, 2,000,000 edges" "ok|53200" \
    "SELECT count(*), count(DISTINCT cluster_id) FROM minhash_components(
     array(SELECT generate_series(1, 2000000)::bigint),
     array(SELECT generate_series(2, 2000001)::bigint))"
run_case "flagged insert, 99 MB near-duplicate" "ok|53200" \
    "INSERT INTO docs (id, body) SELECT 2, body FROM big WHERE name = 'b'
     RETURNING duplicate_of"
run_case "minhash_similar, 99 MB" "ok|53200" \
    "SELECT count(*) FROM minhash_similar('docs', (SELECT body FROM big WHERE name = 'b'))"
# the near-duplicate goes in unflagged (if the flagged insert failed), for the searches below
sql -c "ALTER TABLE docs DISABLE TRIGGER docs_flag" \
    -c "INSERT INTO docs (id, body) SELECT 2, body FROM big WHERE name = 'b'
        ON CONFLICT DO NOTHING"
run_case "minhash_duplicates, two 99 MB rows" "ok|53200" \
    "SELECT count(*) FROM minhash_duplicates('docs')"
run_case "minhash_clusters, two 99 MB rows" "ok|53200" \
    "SELECT count(*) FROM minhash_clusters('docs')"
run_case "minhash_clusters, 200,000 copies" "ok" \
    "SELECT count(*), count(DISTINCT cluster_id) FROM minhash_clusters('copies')"

# 200,000 copies make 19,999,900,000 pairs: the search runs until statement_timeout stops it,
# which must happen promptly and without the pairs piling up in memory.
out=$(sql 2>&1 <<SQL || true
\set VERBOSITY sqlstate
\set ON_ERROR_STOP 0
SET work_mem = '4MB';
SET statement_timeout = $TIMEOUT_MS;
SELECT extract(epoch FROM clock_timestamp()) AS started \gset
SELECT count(*) FROM minhash_duplicates('copies');
\set ON_ERROR_STOP 1
RESET statement_timeout;
SELECT round(1000 * (extract(epoch FROM clock_timestamp()) - :started))::int,
       substring(pg_read_file('/proc/self/status') FROM 'VmHWM:\s*(\d+)');
SQL
)
state=$(grep -oE 'ERROR: +[0-9A-Z]{5}' <<<"$out" | awk '{print $2}' | head -1)
read -r elapsed rss < <(tail -1 <<<"$out" | tr '|' ' ')
printf '%-44s %-6s %6d ms  peak RSS %d kB\n' "minhash_duplicates, 200,000 copies" \
    "${state:-ok}" "${elapsed:-0}" "${rss:-0}"
if [ "$state" != 57014 ] || [ "${elapsed:-0}" -gt $((TIMEOUT_MS + LATE_MS)) ] \
        || [ "${rss:-0}" -gt "$MAX_RSS_KB" ]; then
    echo "  expected 57014 within $LATE_MS ms of the timeout, peak RSS under $MAX_RSS_KB kB" >&2
    echo "$out" >&2
    failures=$((failures + 1))
fi

if grep -E 'terminated by signal|server process .* was terminated|all server processes terminated' \
        "$dir/server.log" >&2; then
    echo "a backend aborted" >&2
    failures=$((failures + 1))
fi
if [ "$(head -1 "$dir/data/postmaster.pid")" != "$postmaster" ]; then
    echo "the postmaster restarted" >&2
    failures=$((failures + 1))
fi
if [ "$failures" -gt 0 ]; then
    echo "limits: $failures failed" >&2
    exit 1
fi
echo "limits: no backend aborted, every statement finished or failed cleanly"
