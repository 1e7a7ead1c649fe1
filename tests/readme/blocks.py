#!/usr/bin/env python3
"""Extracts the ```sql blocks of a Markdown file as one psql script, in order.

Each block is preceded by an \\echo line naming it and its line in the file, so that a failing
run shows which block failed. A block preceded (blank lines aside) by an HTML comment
`<!-- not run: REASON -->` is left out. Prints the script to stdout and, last, to stderr, one
line: `RAN SKIPPED`. A `not run` comment that is not followed by a ```sql block is an error:
the block it meant would otherwise run unnoticed, or the comment guard nothing. So is a block
whose last statement has no closing semicolon: pasted into psql, it would wait for more input
(here it would run joined to the next block).

Usage: blocks.py README.md > script.sql
"""
import re
import sys

NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->$")


def code_of(line):
    """The line without its `--` comment (one outside single quotes) and surrounding blanks."""
    quoted = False
    for i, c in enumerate(line):
        if c == "'":
            quoted = not quoted
        elif not quoted and line.startswith("--", i):
            return line[:i].strip()
    return line.strip()


def complete(text):
    """Whether the last line of the block with code on it ends a statement."""
    code = [c for c in map(code_of, text.splitlines()) if c]
    return not code or code[-1].endswith(";") or code[-1].startswith("\\")


def blocks(lines):
    """Yields (line number of the opening fence, text, skip reason or None) for each ```sql block."""
    pending = None  # (line number, reason) of a `not run` comment waiting for its block
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        stripped = line.strip()
        fence = re.match(r"^(\s*)(`{3,}|~{3,})\s*(\S*)", line)
        if fence:
            indent, marker, lang = fence.groups()
            start = i + 1
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            if i == len(lines):
                sys.exit(f"line {start}: a code block that is never closed")
            i += 1
            if lang == "sql":
                text = "".join(body)
                if not pending and not complete(text):
                    sys.exit(f"line {start}: the block's last statement has no closing semicolon")
                yield start, text, pending[1] if pending else None
            elif pending:
                sys.exit(f"line {pending[0]}: 'not run' comment before a block that is not ```sql")
            pending = None
            continue
        match = NOT_RUN.match(stripped)
        if match:
            pending = (i + 1, match.group(1))
        elif stripped and pending:
            sys.exit(f"line {pending[0]}: 'not run' comment not directly before a ```sql block")
        i += 1
    if pending:
        sys.exit(f"line {pending[0]}: 'not run' comment at the end of the file")


def main():
    path = sys.argv[1]
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    ran = skipped = 0
    out = sys.stdout
    for start, text, reason in blocks(lines):
        if reason is not None:
            skipped += 1
            print(f"readme: skipped the block at {path}:{start} (not run: {reason})", file=sys.stderr)
            continue
        ran += 1
        out.write(f"\\echo 'readme-block {ran} at {path}:{start}'\n")
        out.write(text)
        if not text.endswith("\n"):
            out.write("\n")
    print(f"{ran} {skipped}", file=sys.stderr)


if __name__ == "__main__":
    main()
