#!/usr/bin/env bash
# The long maintenance calls on a large table (300,000 rows, 4.8 million band rows):
# minhash_index_check and minhash_index_stats report progress in NOTICEs once they have run for
# two seconds (rows done, percentage, rate), give the right answer, and a statement_timeout
# (a cancel) stops each of them with 57014, leaving the index as it was.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

install_extension
trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-progress.XXXXXX)"
psql() { command psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }

psql -c "CREATE EXTENSION pg_minhash" -c "CREATE TABLE docs (id bigint PRIMARY KEY, body text)" \
     -c "INSERT INTO docs SELECT i, 'question ' || (i % 50000) || ' about ' || md5((i % 50000)::text)
                                   || ' and ' || md5(i::text) FROM generate_series(1, 300000) i" \
     -c "SELECT minhash_index_create('docs', 'id', 'body')" >/dev/null 2>&1

# expect_progress CALL PATTERN: CALL prints at least one progress NOTICE and its result
expect_progress() {
    local out
    out=$(psql -At -c "$1" 2>&1)
    grep -qE "^NOTICE:  $2: [0-9]+ of [0-9]+ .* \([0-9]+%\), [0-9]+ .*/s$" <<<"$out" ||
        { echo "progress: no progress NOTICE from $1:"; echo "$out"; exit 1; }
    tail -n 1 <<<"$out"
}
check=$(expect_progress "SELECT missing || '/' || orphaned FROM minhash_index_check('docs')" \
        "minhash_index_check on public.docs")
[ "$check" = 0/0 ] || { echo "progress: check said $check"; exit 1; }
stats=$(expect_progress "SELECT rows_indexed || '/' || keys FROM minhash_index_stats('docs')" \
        "minhash_index_stats on public.docs")
[ "$stats" = 300000/4800000 ] || { echo "progress: stats said $stats"; exit 1; }

for call in "SELECT * FROM minhash_index_check('docs')" "SELECT * FROM minhash_index_stats('docs')"; do
    out=$(psql -v VERBOSITY=verbose -c "SET statement_timeout = '300ms'" -c "$call" 2>&1 || true)
    grep -q "57014" <<<"$out" || { echo "progress: $call was not cancelled: $out"; exit 1; }
done
[ "$(psql -At -c "SELECT missing || '/' || orphaned FROM minhash_index_check('docs')" 2>/dev/null)" = 0/0 ]
echo "progress: minhash_index_check and minhash_index_stats report progress on 300,000 rows, are right, and stop on a cancel (57014)"
