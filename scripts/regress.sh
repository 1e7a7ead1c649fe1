#!/usr/bin/env bash
# Runs the pg_regress suite in tests/pg_regress against a throwaway cluster (PG_MAJOR as in
# scripts/cluster.sh). expected/NAME.out is PostgreSQL 15's output; NAME_1.out (18),
# NAME_2.out (16) and NAME_3.out (17) are another version's where the server's own text
# differs (pg_regress accepts any of them).
#   --accept   copy the actual output over expected/ (review the diff before committing): on 15
#              to NAME.out; on another version to its variant where the output differs from
#              every other variant, removing one no longer needed (accept 15 first)
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
    # each version's own variant: NAME.out (15), NAME_1.out (18), NAME_2.out (16), NAME_3.out
    # (17); a variant is kept only where the output differs from every other version's
    variant=$(case "$(pg_major)" in 15) ;; 18) echo _1 ;; 16) echo _2 ;; 17) echo _3 ;; esac)
    for result in "$out"/results/*.out; do
        name=$(basename "$result" .out)
        expected=tests/pg_regress/expected/$name
        if [ -z "$variant" ]; then
            cp "$result" "$expected.out"
            continue
        fi
        rm -f "$expected$variant.out"
        same=false
        for other in "$expected".out "$expected"_[0-9].out; do
            [ -f "$other" ] && cmp -s "$result" "$other" && same=true
        done
        $same || cp "$result" "$expected$variant.out"
    done
    echo "expected output updated from this run"
elif [ "$status" -ne 0 ]; then
    cat "$out/regression.diffs" 2>/dev/null || true
fi
exit "$status"
