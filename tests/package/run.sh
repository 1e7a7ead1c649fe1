#!/usr/bin/env bash
# The packages of scripts/package.sh, installed as a user would, for each version in PG_MAJORS
# (default "15 16 17 18"): the build's own files are removed from that version's installation,
# then PostgreSQL 15 gets its Debian package with dpkg -i (into Debian's PostgreSQL 15) and every
# other version its tarball, copied into its tree. On each: CREATE EXTENSION of the previous
# release, a managed index, ALTER EXTENSION ... UPDATE to this version, the index still exact
# and finding a near-duplicate, a fresh CREATE EXTENSION and a signature. Then the Debian
# package is removed again (dpkg -r leaves none of its files). Also checks that META.json is
# valid PGXN metadata (pgxn_meta, the validator of PGXN's own specification crate) and names
# this version.
set -euo pipefail
cd "$(dirname "$0")/../.."
PG_MAJORS="${PG_MAJORS:-15 16 17 18}"
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
previous=0.2.0
arch=$(dpkg --print-architecture)
packages=target/packages

# META.json
tools="${CARGO_TARGET_DIR:-target}/tools"
if [ ! -x "$tools/bin/pgxn_meta" ]; then
    echo "package: installing the PGXN metadata validator (pgxn_meta 0.7.0, once)"
    cargo install --quiet --locked pgxn_meta@0.7.0 --root "$tools"
fi
"$tools/bin/pgxn_meta" META.json
meta_version=$(python3 -c 'import json; m = json.load(open("META.json")); print(m["version"], m["provides"]["pg_minhash"]["version"])')
[ "$meta_version" = "$version $version" ] ||
    { echo "package: META.json says version $meta_version, Cargo.toml $version"; exit 1; }

PG_MAJORS="$PG_MAJORS" bash scripts/package.sh

psql() { PGOPTIONS="-c client_min_messages=warning" command psql -X -q -v ON_ERROR_STOP=1 -d postgres "$@"; }

# smoke: the checks above on the running cluster
smoke() {
    psql >/dev/null <<SQL
CREATE EXTENSION pg_minhash VERSION '$previous';
CREATE TABLE docs (id bigint PRIMARY KEY, body text);
INSERT INTO docs SELECT i, 'document ' || i || ' about ' || md5(i::text) FROM generate_series(1, 500) i;
SELECT minhash_index_create('docs', 'id', 'body');
ALTER EXTENSION pg_minhash UPDATE;
INSERT INTO docs SELECT 1000, body || '!' FROM docs WHERE id = 42;
SQL
    local got
    got=$(psql -Atc "SELECT extversion FROM pg_extension WHERE extname = 'pg_minhash'")
    [ "$got" = "$version" ] || { echo "package: extension version $got after the update"; return 1; }
    got=$(psql -Atc "SELECT missing || '/' || orphaned FROM minhash_index_check('docs')")
    [ "$got" = 0/0 ] || { echo "package: index check $got"; return 1; }
    got=$(psql -Atc "SELECT string_agg(id::text, ',' ORDER BY id)
                     FROM minhash_similar('docs', (SELECT body FROM docs WHERE id = 42))")
    [ "$got" = 42,1000 ] || { echo "package: minhash_similar found '$got'"; return 1; }
    got=$(psql -Atc "DROP EXTENSION pg_minhash CASCADE; CREATE EXTENSION pg_minhash;
                     SELECT extversion || ' ' || cardinality(minhash('hello world', 128, 5))
                     FROM pg_extension WHERE extname = 'pg_minhash'")
    [ "$got" = "$version 128" ] || { echo "package: fresh install gave '$got'"; return 1; }
}

# remove_build MAJOR: the extension's files from that version's installation
remove_build() {
    local pg_config=$1
    as_root rm -f "$("$pg_config" --pkglibdir)/pg_minhash.so" \
        "$("$pg_config" --sharedir)"/extension/pg_minhash.control \
        "$("$pg_config" --sharedir)"/extension/pg_minhash--*.sql
}

for major in $PG_MAJORS; do
    export PG_MAJOR=$major
    unset PG_BIN
    PG_BIN=$(pg_bin_dir "$major") PG_CONFIG=$(pg_bin_dir "$major")/pg_config
    remove_build "$PG_CONFIG"
    if [ "$major" = 15 ] && [ "$PG_CONFIG" = /usr/lib/postgresql/15/bin/pg_config ]; then
        how="dpkg -i"
        deb="$packages/postgresql-15-pg-minhash_${version}_$arch.deb"
        as_root dpkg -i "$deb" >/dev/null
        [ "$(dpkg-query -W -f='${Version}' postgresql-15-pg-minhash)" = "$version" ]
    else
        how="tarball"
        tarball="$packages/pg_minhash-$version-pg$major-linux-$arch.tar.gz"
        tmp=$(mktemp -d /tmp/pg_minhash-tarball.XXXXXX)
        tar -xzf "$tarball" -C "$tmp"
        as_root cp "$tmp"/pg_minhash-*/lib/* "$("$PG_CONFIG" --pkglibdir)/"
        as_root cp "$tmp"/pg_minhash-*/extension/* "$("$PG_CONFIG" --sharedir)/extension/"
        rm -rf "$tmp"
    fi
    cluster_start "$(mktemp -d /tmp/pg_minhash-package.XXXXXX)"
    status=0
    smoke || status=$?
    cluster_stop
    [ "$status" = 0 ] || exit "$status"
    if [ "$how" = "dpkg -i" ]; then
        as_root dpkg -r postgresql-15-pg-minhash >/dev/null
        left=$(ls /usr/lib/postgresql/15/lib/pg_minhash.so /usr/share/postgresql/15/extension/pg_minhash* 2>/dev/null || true)
        [ -z "$left" ] || { echo "package: dpkg -r left $left"; exit 1; }
    fi
    echo "package: PostgreSQL $major ($how): CREATE EXTENSION $previous, index, UPDATE to $version, lookups, fresh install"
done
echo "package: META.json valid (pgxn_meta), version $version"
