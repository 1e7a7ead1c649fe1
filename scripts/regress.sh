#!/usr/bin/env bash
# Runs the pg_regress suite in tests/pg_regress against a throwaway cluster (PG_MAJOR as in
# scripts/cluster.sh). expected/NAME.out is PostgreSQL 15's output; NAME_1.out is PostgreSQL
# 18's where the server's own text differs (pg_regress accepts either).
#   --accept   copy the actual output over expected/ (review the diff before committing): on 15
#              to NAME.out; on 18 to NAME_1.out where it differs from NAME.out, removing a
#              NAME_1.out no longer needed
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

accept=false
[ "${1:-}" = "--accept" ] && accept=true

install_extension
out=$(mktemp -d /tmp/pg_minhash-regress-out.XXXXXX)
trap 'cluster_stop; rm -rf "$out"' EXIT
# errors must not carry Rust backtraces whatever the server's environment (security.sql)
CLUSTER_ENV="RUST_BACKTRACE=full" cluster_start "$(mktemp -d /tmp/pg_minhash-regress.XXXXXX)"

tests=(setup)
for f in tests/pg_regress/sql/*.sql; do
    name=$(basename "$f" .sql)
    [ "$name" = setup ] || tests+=("$name")
done

status=0
"$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress" \
    --inputdir=tests/pg_regress --outputdir="$out" --bindir="$PG_BIN" \
    --host="$PGHOST" --port="$PGPORT" --user=postgres --dbname=pg_minhash_regress \
    "${tests[@]}" || status=$?

if $accept; then
    for result in "$out"/results/*.out; do
        name=$(basename "$result" .out)
        if [ "$(pg_major)" = 15 ]; then
            cp "$result" "tests/pg_regress/expected/$name.out"
        elif cmp -s "$result" "tests/pg_regress/expected/$name.out"; then
            rm -f "tests/pg_regress/expected/${name}_1.out"
        else
            cp "$result" "tests/pg_regress/expected/${name}_1.out"
        fi
    done
    echo "expected output updated from this run"
elif [ "$status" -ne 0 ]; then
    cat "$out/regression.diffs" 2>/dev/null || true
fi
exit "$status"
