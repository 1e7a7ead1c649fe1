#!/usr/bin/env bash
# Builds the packages of pg_minhash for each PostgreSQL version in PG_MAJORS (default "15 16 17
# 18", set up by scripts/setup.sh) into target/packages, VERSION from Cargo.toml:
#   postgresql-MAJOR-pg-minhash_VERSION_ARCH.deb  laid out as Debian's PostgreSQL packages are
#       (/usr/lib/postgresql/MAJOR/lib, /usr/share/postgresql/MAJOR/extension): dpkg -i it
#   pg_minhash-VERSION-pgMAJOR-linux-ARCH.tar.gz  the same files as lib/ and extension/ for any
#       other installation of that version: copy lib/* into `pg_config --pkglibdir` and
#       extension/* into `pg_config --sharedir`/extension
# Each holds the library (a release build), the control file, the install scripts of this
# version and of the earlier releases, and every update script (ALTER EXTENSION ... UPDATE).
set -euo pipefail
cd "$(dirname "$0")/.."
PG_MAJORS="${PG_MAJORS:-15 16 17 18}"
PG_MAJORS="$PG_MAJORS" bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
source scripts/cluster.sh

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
out=target/packages
mkdir -p "$out"
stage=$(mktemp -d /tmp/pg_minhash-package.XXXXXX)
trap 'rm -rf "$stage"' EXIT

for major in $PG_MAJORS; do
    pg_config="$(pg_bin_dir "$major")/pg_config"
    echo "==> packaging pg_minhash $version for PostgreSQL $major"
    rm -rf "${stage:?}"/*
    mkdir -p "$stage/build"
    cargo pgrx package --pg-config "$pg_config" --no-default-features --features "pg$major" \
        --out-dir "$stage/build" >"$stage/build.log" 2>&1 || { cat "$stage/build.log"; exit 1; }
    library=$(find "$stage/build" -name pg_minhash.so)
    extension=$(dirname "$(find "$stage/build" -name pg_minhash.control)")

    # the files, in a tree of lib/ and extension/
    files="$stage/pg_minhash-$version-pg$major-linux-$arch"
    install -D -m 644 "$library" "$files/lib/pg_minhash.so"
    install -D -m 644 -t "$files/extension" "$extension/pg_minhash.control" \
        "$extension"/pg_minhash--*.sql
    # (the earlier releases' install scripts, which cargo pgrx does not copy)
    for script in sql/pg_minhash--*.sql; do
        [ -e "$files/extension/$(basename "$script")" ] || install -m 644 -t "$files/extension" "$script"
    done
    install -m 644 -t "$files" README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE
    tar -C "$stage" --owner=0 --group=0 -czf "$out/$(basename "$files").tar.gz" "$(basename "$files")"

    # the Debian package
    name=postgresql-$major-pg-minhash
    deb="$stage/deb"
    install -D -m 644 "$files/lib/pg_minhash.so" "$deb/usr/lib/postgresql/$major/lib/pg_minhash.so"
    install -D -m 644 -t "$deb/usr/share/postgresql/$major/extension" "$files"/extension/*
    install -D -m 644 -t "$deb/usr/share/doc/$name" README.md
    gzip -9n -c CHANGELOG.md > "$stage/changelog.gz"
    install -m 644 "$stage/changelog.gz" "$deb/usr/share/doc/$name/changelog.gz"
    { printf 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n'
      printf 'Upstream-Name: pg_minhash\n\nFiles: *\nCopyright: 2026 The pg_minhash developers\n'
      printf 'License: MIT or Apache-2.0\n\nLicense: MIT\n'
      sed 's/^$/./; s/^/ /' LICENSE-MIT
      printf '\nLicense: Apache-2.0\n On Debian systems, the full text of the Apache License 2.0 is in\n'
      printf ' /usr/share/common-licenses/Apache-2.0.\n'
    } > "$deb/usr/share/doc/$name/copyright"
    mkdir -p "$deb/DEBIAN"
    cat > "$deb/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: $arch
Maintainer: The pg_minhash developers <maintainers@users.noreply.a-seed-26fdc21b.example>
Depends: postgresql-$major, libc6 (>= 2.36)
Section: database
Priority: optional
Installed-Size: $(du -sk "$deb/usr" | cut -f1)
Description: near-duplicate text detection for PostgreSQL $major
 pg_minhash finds rows whose texts are almost the same (typos, rewordings,
 re-posts) inside PostgreSQL, with MinHash signatures and LSH banding: a
 managed index kept exact by triggers, similarity lookups, whole-table
 deduplication and a duplicate check on insert.
EOF
    dpkg-deb --root-owner-group -Zxz --build "$deb" "$out/${name}_${version}_$arch.deb" >/dev/null
    echo "    $out/${name}_${version}_$arch.deb, $out/$(basename "$files").tar.gz"
done
