#!/usr/bin/env python3
"""tests/layers/check_layers.py SOURCE_DIR — the include structure the docs promise.

1. core/'s folders are layered: docs/ARCHITECTURE.md holds one line "core/ layers, from the bottom: a → b → ..."
   and every #include "folder/name.h" in core/ names a header of its own folder or of a folder below it. An
   include that points up prints FILE:LINE: the folder it breaks. The order is read from the doc, so the picture
   and the check cannot drift apart; a core/ folder missing from the line is an error too.
2. No two files include each other, anywhere in core/, kit/, plugins/, tasks/ or include/ (a circle means the
   shared piece belongs a layer down). Includes resolve as the build resolves them: the including file's folder,
   then its plugin's or module's root, core/, include/.
Exit 1 on any violation."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
problems = []


def read_order():
    doc = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
    with open(doc, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"core/ layers, from the bottom: (.*)$", line)
            if m:
                order = [x.strip(" `.") for x in m.group(1).split("→")]
                return order, "docs/ARCHITECTURE.md:%d" % n
    problems.append("docs/ARCHITECTURE.md: no line 'core/ layers, from the bottom: a → b → ...'")
    return [], "docs/ARCHITECTURE.md"


def sources(top):
    for r, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        for f in sorted(files):
            if f.endswith((".c", ".h", ".cu")):
                yield os.path.join(r, f)


def search_path(path):
    rel = os.path.relpath(path, ROOT).split(os.sep)
    dirs = [os.path.dirname(path)]
    if rel[0] in ("plugins", "tasks") and len(rel) > 2:
        dirs.append(os.path.join(ROOT, rel[0], rel[1]))
    dirs += [os.path.join(ROOT, "core"), os.path.join(ROOT, "include")]
    return dirs


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            for d in search_path(path):
                c = os.path.normpath(os.path.join(d, m.group(1)))
                if os.path.isfile(c):
                    yield n, m.group(1), c
                    break


def check_core(order, where):
    rank = {d: i for i, d in enumerate(order)}
    core = os.path.join(ROOT, "core")
    for path in sources("core"):
        folder = os.path.relpath(os.path.dirname(path), core)
        rel = os.path.relpath(path, ROOT)
        if folder not in rank:
            problems.append("%s: folder core/%s is not in the layer order of %s" % (rel, folder, where))
            continue
        for n, name, target in includes(path):
            if not target.startswith(core + os.sep):
                continue
            tfolder = os.path.relpath(os.path.dirname(target), core)
            if tfolder in rank and rank[tfolder] > rank[folder]:
                problems.append("%s:%d: includes %s, a layer above core/%s (%s)" % (rel, n, name, folder, where))


def check_circles():
    graph = {}
    for top in ("core", "kit", "plugins", "tasks", "include"):
        for path in sources(top):
            graph[path] = {t: (n, name) for n, name, t in includes(path)}
    for a, outs in graph.items():
        for b, (n, name) in outs.items():
            if a < b and a in graph.get(b, {}):
                problems.append("%s:%d and %s:%d include each other" % (
                    os.path.relpath(a, ROOT), n, os.path.relpath(b, ROOT), graph[b][a][0]))


def main():
    order, where = read_order()
    if order:
        check_core(order, where)
    check_circles()
    for p in problems:
        print(p)
    print("check_layers: %d problem(s); core/ layers: %s" % (len(problems), " → ".join(order)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
