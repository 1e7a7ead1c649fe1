#!/usr/bin/env bash
# Runs every ```sql block of README.md, in order and as pasted, in one psql session on a fresh
# database, as a role that is no superuser and owns that database (the extension is trusted:
# the README's CREATE EXTENSION runs as that role). Fails on the first error, naming the block
# and its line. A block preceded by `<!-- not run: REASON -->` is left out (tests/readme/blocks.py);
# the closing line counts the blocks run and left out. Also fails when README.md is over 12 KB.
# Usage: tests/readme/run.sh [FILE.md] (builds and installs the extension first unless SKIP_INSTALL=1;
# PG_MAJOR or PG_BIN as in scripts/cluster.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

readme="${1:-README.md}"   # (another Markdown file: to test this script)
max_bytes=12288
size=$(wc -c <"$readme")
if [ "$size" -gt "$max_bytes" ]; then
    echo "readme: FAILED: $readme is $size bytes, over $max_bytes: move detail into docs/" >&2
    exit 1
fi

tmp=$(mktemp -d /tmp/pg_minhash-readme.XXXXXX)
chmod 755 "$tmp"
trap 'cluster_stop; rm -rf "$tmp"' EXIT

python3 tests/readme/blocks.py "$readme" >"$tmp/readme.sql" 2>"$tmp/blocks.err" ||
    { cat "$tmp/blocks.err" >&2; echo "readme: FAILED: cannot extract the blocks of $readme" >&2; exit 1; }
read -r ran skipped < <(tail -n 1 "$tmp/blocks.err")
head -n -1 "$tmp/blocks.err"
[ "$ran" -gt 0 ] || { echo "readme: FAILED: no \`\`\`sql block to run in $readme" >&2; exit 1; }

[ "${SKIP_INSTALL:-0}" = 1 ] || install_extension
cluster_start "$tmp/cluster"
psql -X -q -v ON_ERROR_STOP=1 -d postgres \
    -c 'CREATE ROLE readme LOGIN' -c 'CREATE DATABASE readme OWNER readme' >/dev/null

status=0
psql -X -v ON_ERROR_STOP=1 -U readme -d readme -f "$tmp/readme.sql" >"$tmp/out.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    block=$(grep -E '^readme-block [0-9]+ at ' "$tmp/out.log" | tail -n 1)
    echo "readme: FAILED in ${block#readme-block }; psql's output of that block:" >&2
    sed -n "/^${block//\//\\/}\$/,\$p" "$tmp/out.log" >&2
    exit 1
fi
echo "readme: ok, $ran sql blocks of $readme run as pasted, $skipped not run"
