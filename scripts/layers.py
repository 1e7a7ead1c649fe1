#!/usr/bin/env python3
"""Checks the module structure of src/ (docs/internals.md, "Source map"):

- no module uses another in a cycle (from the `use` lines, child-module references and paths
  through `crate::`, `super::` and `self::`);
- src/index/ is kept in rooms, one folder each, in the order of ROOMS below (top first): a
  module of a room uses only modules of its own room or of the rooms below it, never one
  above; every file of src/index/ but mod.rs and tests.rs is in a room, and every folder is one;
- `index` and `sql` do not use each other.

Prints the module use graph with --graph. Exits 1 on a violation."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# The rooms of src/index/, top first (src/index/mod.rs says what each owns): a room may use the
# rooms after it in this list, never one before it.
ROOMS = ["manage", "write", "read", "def", "run"]
# The modules of src/index/ outside the rooms: the root (it wires the rooms together) and the
# recall tests, which use only core.
OUTSIDE_ROOMS = {"index", "index::tests"}


def modules():
    found = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
            if parts[-1] in ("mod", "lib"):
                parts = parts[:-1]
            with open(path, encoding="utf-8") as fh:
                found["::".join(parts) or "crate"] = fh.read()
    return found


def resolve(mods, current, path):
    segs = path.split("::")
    base = current.split("::") if current != "crate" else []
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] == "super":
        base, segs = base[:-1], segs[1:]
        while segs and segs[0] == "super":
            base, segs = base[:-1], segs[1:]
    elif segs[0] == "self":
        segs = segs[1:]
    else:
        return None
    for i in range(len(segs), -1, -1):
        name = "::".join(base + segs[:i]) or "crate"
        if name in mods:
            return name
    return None


def edges(mods):
    graph = {m: set() for m in mods}
    for m, src in mods.items():
        code = re.sub(r"//[^\n]*", "", src)
        code = re.sub(r"\bpub\(in [^)]*\)", "pub", code)  # a visibility, not a use
        for hit in re.finditer(
            r"\b((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{([^;]*?)\})?", code
        ):
            targets = []
            if hit.group(3):
                for item in hit.group(3).split(","):
                    item = item.strip().split(" as ")[0].strip().split("::{")[0]
                    if item:
                        targets.append(hit.group(1) if item == "self" else hit.group(1) + "::" + item)
            else:
                targets.append(hit.group(1))
            for t in targets:
                r = resolve(mods, m, t)
                if r and r not in (m, "crate"):
                    graph[m].add(r)
        prefix = m + "::" if m != "crate" else ""
        kids = {k[len(prefix):] for k in mods if k.startswith(prefix) and k != m and "::" not in k[len(prefix):]}
        for hit in re.finditer(r"(?<![:\w])([a-z_][a-z0-9_]*)::", code):
            if hit.group(1) in kids:
                graph[m].add(prefix + hit.group(1))
    return graph


def cycles(graph):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def index_rooms(mods):
    """The room of each module of src/index/ (its rank in ROOMS), and the problems of the
    layout: a module outside the rooms, a folder that is not a room."""
    rooms, problems = {}, []
    for m in sorted(mods):
        parts = m.split("::")
        if parts[0] != "index" or m in OUTSIDE_ROOMS:
            continue
        if parts[1] in ROOMS:
            rooms[m] = ROOMS.index(parts[1])
        else:
            problems.append(f"room: {m} is in no room of src/index/ (rooms: {', '.join(ROOMS)})")
    return rooms, problems


def main():
    mods = modules()
    graph = edges(mods)
    problems = [f"cycle: {' -> '.join(c)}" for c in cycles(graph)]
    rooms, misplaced = index_rooms(mods)
    problems += misplaced
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            if m in rooms and t in rooms and rooms[t] < rooms[m]:
                problems.append(f"room: {m} (room {ROOMS[rooms[m]]}) uses {t} "
                                f"(room {ROOMS[rooms[t]]}), above it")
            if m in rooms and t in OUTSIDE_ROOMS:
                problems.append(f"room: {m} uses {t}, which is outside the rooms")
            top_m, top_t = m.split("::")[0], t.split("::")[0]
            if {top_m, top_t} == {"index", "sql"}:
                problems.append(f"{m} uses {t}: index and sql must not use each other")
    if "--graph" in sys.argv:
        for m in sorted(graph):
            print(f"{m} -> {', '.join(sorted(graph[m])) or '(nothing)'}")
    for p in problems:
        print(p, file=sys.stderr)
    counts = ", ".join(f"{r} {sum(1 for v in rooms.values() if v == i)}" for i, r in enumerate(ROOMS))
    print(f"module structure: {len(mods)} modules, {len(rooms)} in the rooms of src/index "
          f"({counts}), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
