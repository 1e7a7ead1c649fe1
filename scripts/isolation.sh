#!/usr/bin/env bash
# Replays the interleavings in tests/isolation/specs with PostgreSQL's isolation tester against
# a throwaway cluster (PG_MAJOR as in scripts/cluster.sh): each spec fixes the order in which
# its sessions' steps run, including which step waits for which lock, and expected/NAME.out is
# the output. pg_isolation_regress and isolationtester come with Debian's
# postgresql-server-dev-15 (scripts/setup.sh installs it) and drive any server version.
#   --accept   copy the actual output over expected/ (review the diff before committing)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

accept=false
[ "${1:-}" = "--accept" ] && accept=true
driver=/usr/lib/postgresql/15/lib/pgxs/src/test/isolation/pg_isolation_regress
[ -x "$driver" ] || { echo "isolation: $driver not found (install postgresql-server-dev-15)" >&2; exit 1; }

install_extension
out=$(mktemp -d /tmp/pg_minhash-isolation-out.XXXXXX)
chmod 777 "$out"
trap 'cluster_stop; rm -rf "$out"' EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-isolation.XXXXXX)"

specs=()
for f in tests/isolation/specs/*.spec; do
    specs+=("$(basename "$f" .spec)")
done

status=0
"$driver" --inputdir=tests/isolation --outputdir="$out" --bindir="$PG_BIN" \
    --host="$PGHOST" --port="$PGPORT" --user=postgres --dbname=pg_minhash_isolation \
    --load-extension=pg_minhash "${specs[@]}" || status=$?

if $accept; then
    cp "$out"/results/*.out tests/isolation/expected/
    echo "expected output updated from this run"
elif [ "$status" -ne 0 ]; then
    cat "$out/regression.diffs" 2>/dev/null || true
fi
exit "$status"
