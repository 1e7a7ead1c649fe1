#!/usr/bin/env bash
# The demo: installs what is needed, builds and installs pg_minhash into the system PostgreSQL,
# starts a throwaway cluster, loads the Debian package descriptions (~64,000 real texts) and
# prints the near-duplicate clusters it finds, a similarity lookup and a flagged insert.
# THRESHOLD=0.7 bash scripts/demo.sh to try another threshold.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh
threshold="${THRESHOLD:-0.8}"

echo "==> building and installing pg_minhash (release build; the first one takes a few minutes)"
install_extension --release

data=.demo-data
mkdir -p "$data"
csv="$data/debian-descriptions.csv"
if [ ! -s "$csv" ]; then
    echo "==> fetching the Debian package descriptions from this machine's package mirror"
    if ! bash scripts/fetch-debian-descriptions.sh "$csv"; then
        echo "==> FETCH FAILED: falling back to a small generated corpus (not real text)"
        csv="$data/generated.csv"
        awk 'BEGIN {
            split("fast small simple secure portable modern minimal free", adj, " ")
            split("library tool server client editor viewer parser daemon", noun, " ")
            for (i = 0; i < 3000; i++) {
                a = adj[i % 8 + 1]; n = noun[int(i / 8) % 8 + 1]
                text = sprintf("A %s %s for task %d. It reads input %d and writes report %d.", a, n, i % 500, i % 97, i % 89)
                if (i % 10 == 0) text = text " Also " a "."
                printf "\"gen-%d\",\"%s\"\n", i, text
            }
        }' > "$csv"
    fi
fi

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-demo.XXXXXX)"
psql -X -q -d postgres -v threshold="$threshold" -f scripts/demo.sql < "$csv"
