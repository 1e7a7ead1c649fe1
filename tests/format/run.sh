#!/usr/bin/env bash
# Signature format 1: recomputes the reference vectors with the independent Python
# implementation of docs/contract.md (reference.py, PyPI mmh3) and checks they equal
# tests/format/vectors.tsv, which the Rust test src/core/format_vectors.rs checks the code
# against. Uses a throwaway virtual environment.
set -euo pipefail
cd "$(dirname "$0")"
MMH3_VERSION=5.3.1

venv=$(mktemp -d /tmp/pg_minhash-format.XXXXXX)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "mmh3==$MMH3_VERSION"
"$venv/bin/python" reference.py --check
