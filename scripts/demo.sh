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
        # groups of three: a text of random words, the same with one word changed, and with an
        # exclamation mark; texts of different groups share little
        awk 'BEGIN {
            srand(42)
            n = split("data file disk log user server client cache index query table row column " \
                      "report error update request reply thread process memory network packet " \
                      "image audio video font window screen keyboard mouse printer driver kernel " \
                      "module library package archive backup mirror release source binary", word, " ")
            for (i = 0; i < 1500; i++) {
                if (i % 3 == 0) {
                    base = ""
                    for (w = 0; w < 14; w++) base = base (w ? " " : "") word[int(rand() * n) + 1]
                }
                text = base
                if (i % 3 == 1) text = word[int(rand() * n) + 1] " " substr(base, index(base, " ") + 1)
                if (i % 3 == 2) text = base "!"
                printf "\"gen-%d\",\"%s.\"\n", i, text
            }
        }' > "$csv"
    fi
fi

trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-demo.XXXXXX)"
psql -X -q -d postgres -v threshold="$threshold" -f scripts/demo.sql < "$csv"
