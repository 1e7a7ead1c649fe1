#!/usr/bin/env python3
"""Checks the module structure of src/ (docs/internals.md, "Source map"):

- no module uses another in a cycle (from the `use` lines, child-module references and paths
  through `crate::`, `super::` and `self::`);
- in src/index/, whose mod.rs lists its modules in numbered layers (`// 1. entry points`, ...),
  a module uses only modules of its own layer or the layers below it, never one above;
- `index` and `sql` do not use each other.

Prints the module use graph with --graph. Exits 1 on a violation."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


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


def index_layers(mods):
    """The layer of each module of src/index/, from the numbered comments of mod.rs."""
    layers, layer = {}, None
    for line in mods["index"].splitlines():
        heading = re.match(r"//\s*(\d+)\.", line)
        if heading:
            layer = int(heading.group(1))
        declared = re.match(r"(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+);", line)
        if declared and layer is not None:
            layers["index::" + declared.group(1)] = layer
    return layers


def main():
    mods = modules()
    graph = edges(mods)
    problems = [f"cycle: {' -> '.join(c)}" for c in cycles(graph)]
    layers = index_layers(mods)
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            if m in layers and t in layers:
                if layers[t] < layers[m]:
                    problems.append(f"layer: {m} (layer {layers[m]}) uses {t} (layer {layers[t]}), above it")
            top_m, top_t = m.split("::")[0], t.split("::")[0]
            if {top_m, top_t} == {"index", "sql"}:
                problems.append(f"{m} uses {t}: index and sql must not use each other")
    if "--graph" in sys.argv:
        for m in sorted(graph):
            print(f"{m} -> {', '.join(sorted(graph[m])) or '(nothing)'}")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"module structure: {len(mods)} modules, {len(layers)} in the layers of src/index, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
