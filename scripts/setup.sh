#!/usr/bin/env bash
# Installs what pg_minhash needs on Debian/Ubuntu: PostgreSQL and its server headers, sudo, lz4
# and python3 (system packages; python3 runs the format reference check), cargo-pgrx at the
# pinned version, and pgrx pointed at the system PostgreSQL. Safe to run again: each step is
# skipped when already done.
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
PGRX_VERSION=0.18.1
PG_CONFIG="/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
say() { printf '==> %s\n' "$*"; }

packages=("postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" "postgresql-contrib" sudo lz4 ca-certificates
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
if ! grep -qs "^pg$PG_MAJOR = \"$PG_CONFIG\"" "$pgrx_config"; then
    say "pointing pgrx at $PG_CONFIG"
    cargo pgrx init "--pg$PG_MAJOR" "$PG_CONFIG" >/dev/null
fi
