#!/usr/bin/env bash
# Runs benches/write_path.py (direct against SPI band-row writes) on a throwaway cluster of the
# PostgreSQL in PG_BIN, with the benchmark settings of benches/run.sh. The extension must be
# installed there (cargo pgrx install --release --pg-config "$PG_BIN/pg_config").
#   PG_BIN=... bash benches/write_path.sh [--rounds N] [--base-rows N] [--only bulk] ...
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh
trap cluster_stop EXIT
cluster_start "$(mktemp -d /tmp/pg_minhash-write-bench.XXXXXX)"
psql -X -q -d postgres -c "ALTER SYSTEM SET shared_buffers = '${BENCH_SHARED_BUFFERS:-3GB}'" \
    -c "ALTER SYSTEM SET work_mem = '64MB'" -c "ALTER SYSTEM SET maintenance_work_mem = '1GB'" \
    -c "ALTER SYSTEM SET max_wal_size = '8GB'" -c "ALTER SYSTEM SET checkpoint_timeout = '30min'" \
    -c "ALTER SYSTEM SET synchronous_commit = off"
as_postgres "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -w restart >/dev/null
data="$CLUSTER_DIR/csv"
mkdir -p "$data"
python3 benches/write_path.py --pgbench "$PG_BIN/pgbench" --data "$data" "$@"
