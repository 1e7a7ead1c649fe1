#!/usr/bin/env bash
# Runs the whole test suite: the format 1 reference vectors against an independent
# implementation (tests/format, once), then on each PostgreSQL version in PG_MAJORS (default
# "15 16 17 18"): core unit, property and statistical tests plus the in-database #[pg_test]s
# (one `cargo pgrx test` run), the pg_regress suite in tests/pg_regress, the interleavings
# replayed by PostgreSQL's isolation tester in tests/isolation, the pg_dump and pg_restore
# paths in tests/dump, ALTER EXTENSION UPDATE from the previous releases in tests/upgrade, and
# installs and updates by a hostile role into a schema of planted shadows in tests/hostile_install,
# and every ```sql block of README.md run as pasted in tests/readme;
# on the oldest and the newest version also the long multi-session runs: tests/concurrency
# (writers of every kind), tests/constraint (the duplicate trigger's guarantees at each
# isolation level), tests/ddl_race (writers racing rebuild, drop and create), logical
# replication in tests/replication, the huge-input run under an address-space limit in
# tests/limits, an immediate shutdown in tests/crash and progress and cancel of the long
# maintenance calls in tests/progress; on PostgreSQL 15 also a coordinator
# and two workers of Citus in tests/citus (an installed Citus, or one built from the source
# tarball CITUS_SOURCE names or from ../shared/citus; without any, skipped, as the closing
# line says); last, the packages of scripts/package.sh installed on every version in
# tests/package.
# Prints one closing line counting every version's tests.
# PostgreSQL refuses to run as root, so the test clusters run as the `postgres` user in
# throwaway directories.
set -euo pipefail
cd "$(dirname "$0")/.."
PG_MAJORS="${PG_MAJORS:-15 16 17 18}"
PG_MAJORS="$PG_MAJORS" bash scripts/setup.sh
read -r -a majors <<<"$(tr ' ' '\n' <<<"$PG_MAJORS" | sort -n | tr '\n' ' ')"
export PATH="$HOME/.cargo/bin:$PATH"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

work=$(mktemp -d /tmp/pg_minhash-test.XXXXXX)
as_root chown postgres: "$work"
trap 'as_root rm -rf "$work"' EXIT

bash tests/format/run.sh
total=1 citus_skipped=""
summaries=("format reference;")
for major in $PG_MAJORS; do
    # each version's own installation (scripts/cluster.sh), whatever PG_BIN says
    export PG_MAJOR="$major"
    unset PG_BIN
    echo "==> PostgreSQL $major"
    start=$SECONDS
    log="$work/cargo-test-$major.log"
    cargo pgrx test "pg$major" --runas postgres --pgdata "$work/pgtest-$major" 2>&1 | tee "$log"
    bash scripts/regress.sh
    bash scripts/isolation.sh
    bash tests/dump/run.sh
    bash tests/upgrade/run.sh
    bash tests/hostile_install/run.sh
    bash tests/readme/run.sh
    # the long multi-session runs on the oldest and the newest version
    long=0 long_runs=""
    if [ "$major" = "${majors[0]}" ] || [ "$major" = "${majors[-1]}" ]; then
        bash tests/concurrency/run.sh 10
        bash tests/constraint/run.sh 15
        bash tests/ddl_race/run.sh 10
        bash tests/replication/run.sh
        bash tests/limits/run.sh
        bash tests/crash/run.sh
        bash tests/progress/run.sh
        long=7 long_runs=", concurrency, constraint, DDL race, replication, limits, crash and progress runs"
    fi
    # (Citus runs on the system PostgreSQL 15; CITUS_REQUIRED=1 fails where it would be skipped)
    citus=0 citus_run=""
    if [ "$major" = 15 ]; then
        # (once per band table format)
        status=0
        bash tests/citus/run.sh || status=$?
        [ "$status" = 0 ] && { CITUS_TEST_FORMAT=2 bash tests/citus/run.sh || status=$?; }
        if [ "$status" = 0 ]; then
            citus=2 citus_run=" and two 3-node Citus runs (band table formats 1 and 2)"
        elif [ "$status" = 77 ] && [ "${CITUS_REQUIRED:-0}" != 1 ]; then
            citus_skipped="Citus: skipped (not installed)"
            echo "Citus: skipped (not installed; CITUS_SOURCE=path/to/citus-13.2.2.tar.gz builds it)"
        else
            exit "$status"
        fi
    fi

    unit=$(grep -oE 'test result: ok\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
    regress=$(find tests/pg_regress/sql -name '*.sql' ! -name setup.sql | wc -l)
    isolation=$(find tests/isolation/specs -name '*.spec' | wc -l)
    total=$((total + unit + regress + isolation + 4 + long + citus))
    summaries+=("PostgreSQL $major: $unit cargo tests, $regress pg_regress files, $isolation isolation specs,"
                "dump, upgrade, hostile-install and README runs$long_runs$citus_run in $((SECONDS - start)) s;")
done

# the packages, built and installed for every version
PG_MAJORS="$PG_MAJORS" bash tests/package/run.sh
total=$((total + 1))
summaries+=("packages installed and updated on PostgreSQL ${PG_MAJORS// /, };")

summary="${summaries[*]}"
echo
echo "pg_minhash: $total passed, 0 failed (${summary%;})${citus_skipped:+. $citus_skipped}"
