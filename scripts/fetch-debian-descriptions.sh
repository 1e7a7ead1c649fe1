#!/usr/bin/env bash
# Writes the Debian package long descriptions as CSV (name, description) to $1.
#
# The text comes from this machine's own package mirror: `apt-get update` with private lists
# and cache directories and English translations switched on, so the system's apt state is not
# touched (a plain `apt-get update` on a machine set to Acquire::Languages "none" would even
# delete such files). Exits non-zero when the download fails.
set -euo pipefail
out="$1"
dir=$(mktemp -d /tmp/pg_minhash-apt.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# apt downloads as the unprivileged _apt user where it can
chmod 755 "$dir"
as_root chown -R _apt "$dir/lists/partial" "$dir/cache/archives/partial" 2>/dev/null || true

as_root apt-get update -qq -o Acquire::Languages=en \
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" >/dev/null
file=$(ls -S "$dir"/lists/*_main_i18n_Translation-en* 2>/dev/null | head -n 1)
[ -n "$file" ] || { echo "no Translation-en file was fetched" >&2; exit 1; }

case "$file" in
    *.lz4) decompress=(lz4 -dc) ;;
    *.gz) decompress=(gzip -dc) ;;
    *.xz) decompress=(xz -dc) ;;
    *) decompress=(cat) ;;
esac

# One stanza per package: "Description-en:" holds the synopsis, indented lines the long text,
# and " ." an empty line. Fields are CSV-quoted, so backslashes and odd whitespace load as is.
"${decompress[@]}" "$file" | awk '
    function flush() {
        if (name != "") { gsub(/"/, "\"\"", text); printf "\"%s\",\"%s\"\n", name, text }
        name = ""; text = ""
    }
    /^Package: /        { flush(); name = substr($0, 10); next }
    /^Description-en: / { text = substr($0, 17); next }
    /^ \.$/             { text = text "\n"; next }
    /^ /                { text = text "\n" substr($0, 2); next }
    /^$/                { flush() }
    END                 { flush() }
' > "$out.tmp"
mv "$out.tmp" "$out"
