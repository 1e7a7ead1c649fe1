#!/usr/bin/env bash
# Runs every benchmark and prints the figures side by side with the peers of the same run:
# the signature kernel (criterion) against rensa, minhash() against md5() in PostgreSQL, the
# end-to-end deduplication of the Debian package descriptions against exact truth, datasketch
# and pg_trgm, the insert path and scale on a generated corpus of 1,000,000 questions, and
# minhash_clusters on 100,000 distinct near-identical rows (one crowded bucket).
#
#   bash benches/run.sh                  everything (about 10 minutes on 2 cores once built)
#   bash benches/run.sh --quick          seconds-long smoke version: small corpora, no peers
#   bash benches/run.sh --only crowded   one phase (kernel, debian, scale, crowded, citus;
#                                        repeatable)
#   bash benches/run.sh --only scale --scale-rows 4000000   the scale phase at another size
#   bash benches/run.sh --only scale --scale-rows 1000000,4000000,10000000
#                                        issue 46's scale phase: at each size (in the order given)
#                                        load, minhash_index_create, and minhash_duplicates and
#                                        minhash_clusters with 1 and 2 workers (seconds, peak
#                                        backend memory); the insert path at the first size only;
#                                        then the growth from size to size (about 1.5 hours).
#                                        The issue measured band table format 2: run it as
#                                        PGOPTIONS='-c pg_minhash.default_format=2' bash benches/run.sh ...
#                                        (~15 GB of disk at 10,000,000 rows, WAL included; ~27 GB
#                                        in format 1)
# --quick runs the scale phase on 20,000 questions unless --scale-rows gives sizes.
# PG_MAJOR picks the PostgreSQL version (scripts/cluster.sh; 15 by default).
# The citus phase (benches/citus.sh) runs the Debian descriptions on a 3-node Citus cluster
# against a plain table, after the others.
set -euo pipefail
cd "$(dirname "$0")/.."
# (--only citus is benches/citus.sh's; the other phases are run.py's)
args=() only=0 citus=0 others=0 expect_phase=0
for a in "$@"; do
    if [ "$expect_phase" = 1 ]; then
        expect_phase=0
        if [ "$a" = citus ]; then citus=1; else others=1; args+=(--only "$a"); fi
    elif [ "$a" = --only ]; then
        only=1 expect_phase=1
    else
        args+=("$a")
    fi
done
[ "$only" = 1 ] || citus=1 others=1
case " ${args[*]} " in *" --quick "*) [ "$only" = 1 ] || citus=0 ;; esac
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
mkdir -p .bench
if [ ! -x .bench/venv/bin/python ]; then
    python3 -m venv .bench/venv
fi
.bench/venv/bin/pip install -q --disable-pip-version-check rensa datasketch numpy scipy

csv=.demo-data/debian-descriptions.csv
if [ ! -s "$csv" ]; then
    mkdir -p .demo-data
    bash scripts/fetch-debian-descriptions.sh "$csv"
fi

echo "==> building and installing pg_minhash (release)"
install_extension --release
huge_pages_before=$(cat /proc/sys/vm/nr_hugepages)
restore_huge_pages() {
    [ "$(cat /proc/sys/vm/nr_hugepages)" = "$huge_pages_before" ] ||
        as_root sysctl -q -w vm.nr_hugepages="$huge_pages_before" || true
}
trap 'cluster_stop; restore_huge_pages' EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-bench.XXXXXX)"
# benchmarks want more than the defaults of a throwaway cluster; no checkpoint is due during
# the insert phases, which start right after one
psql -X -q -d postgres -c "ALTER SYSTEM SET shared_buffers = '4GB'" \
    -c "ALTER SYSTEM SET work_mem = '64MB'" -c "ALTER SYSTEM SET maintenance_work_mem = '1GB'" \
    -c "ALTER SYSTEM SET max_wal_size = '8GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '30min'" \
    -c "ALTER SYSTEM SET synchronous_commit = off"
as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -w restart >/dev/null
# Huge pages for the shared buffers, as docs/indexing.md's Troubleshooting advises for large
# band indexes: reserved for the run (PostgreSQL's default huge_pages = try takes them) and
# given back at the end. Without them (no root, or the kernel cannot find the memory) the run
# goes on with 4 KiB pages; run.py prints which it got.
if [ "${PG_MINHASH_BENCH_HUGE_PAGES:-1}" = 1 ]; then
    needed=$(psql -X -A -t -d postgres -c "SHOW shared_memory_size_in_huge_pages")
    as_root sysctl -q -w vm.nr_hugepages=$((huge_pages_before + needed)) || true
    as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -w restart >/dev/null
fi

if [ "$others" = 1 ]; then
    .bench/venv/bin/python benches/run.py --corpus "$csv" --pgbench "$PG_BIN/pgbench" "${args[@]}"
fi
if [ "$citus" = 1 ]; then
    cluster_stop
    bash benches/citus.sh "$csv"
fi
