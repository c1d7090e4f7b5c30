#!/usr/bin/env python3
"""tests/layers/check_layers.py SOURCE_DIR — the structure docs/ARCHITECTURE.md promises.

1. Layers. docs/ARCHITECTURE.md holds one line per layered part of the tree,
       "<part>/ layers, from the bottom: a → b → ... → (root)"
   for core/, kit/ and every folder of plugins/. A file of a part may depend only on files of its own folder or
   of a folder below it: through an #include "..." and through a call (any use) of a function that one file
   alone defines. "(root)" is the part's own top folder (a plugin's entry and ABI glue). A dependency that
   points up prints FILE:LINE: what it uses and the layer it breaks. The orders are read from the doc, so the
   picture and the check cannot drift apart; a folder missing from its part's line is an error too.
2. No circles, anywhere in core/, kit/, plugins/, tasks/ or include/: no two files include each other, and the
   files linked by calls of single-definition functions form no cycle (a cycle means the shared piece belongs
   a layer down, or in a struct the two sides exchange).
Includes resolve as the build resolves them: the including file's folder, then its plugin's or module's root,
core/, kit/, include/.
Exit 1 on any violation."""
import collections
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
TOPS = ("core", "kit", "plugins", "tasks", "include")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
# A function definition at the start of a line, not static (a static one cannot be called from another file).
DEFINITION = re.compile(r"^(?!static\b)(?!typedef\b)(?!extern\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*"
                        r"\(([^;{}()]|\([^()]*\))*\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?\{", re.M)
IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
# A prototype on one line ("void f(int);"): a declaration, not a use.
PROTOTYPE = re.compile(r"^[A-Za-z_][\w \t*]*\b[A-Za-z_]\w*\s*\([^;{}]*\)\s*;\s*$")
ROOT_FOLDER = "(root)"
problems = []


def rel(path):
    return os.path.relpath(path, ROOT)


def read_orders():
    """{part: (order, where)} from the doc's "<part>/ layers, from the bottom:" lines."""
    doc = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
    orders = {}
    with open(doc, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"([\w/]+)/ layers, from the bottom: (.*)$", line)
            if m:
                order = [x.strip(" `.") for x in m.group(2).split("→")]
                orders[m.group(1)] = (order, "docs/ARCHITECTURE.md:%d" % n)
    parts = ["core", "kit"] + ["plugins/" + d for d in sorted(os.listdir(os.path.join(ROOT, "plugins")))
                               if os.path.isdir(os.path.join(ROOT, "plugins", d))]
    for part in parts:
        if part not in orders:
            problems.append("docs/ARCHITECTURE.md: no line '%s/ layers, from the bottom: a → b → ...'" % part)
    return orders


def sources(top, suffixes=(".c", ".h", ".cu")):
    for r, dirs, files in os.walk(os.path.join(ROOT, top)):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("build", ".")))
        for f in sorted(files):
            if f.endswith(suffixes):
                yield os.path.join(r, f)


def search_path(path):
    parts = rel(path).split(os.sep)
    dirs = [os.path.dirname(path)]
    if parts[0] in ("plugins", "tasks") and len(parts) > 2:
        dirs.append(os.path.join(ROOT, parts[0], parts[1]))
    if parts[0] == "kit":
        dirs.append(os.path.join(ROOT, "kit"))
    return dirs + [os.path.join(ROOT, "core"), os.path.join(ROOT, "include")]


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


def code_only(text):
    """The text with comments, strings, character literals and preprocessor lines blanked (lines kept)."""
    keep_lines = lambda m: "\n" * m.group(0).count("\n")
    text = re.sub(r"/\*.*?\*/", keep_lines, text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(\\.|[^'\\\n])*'", "''", text)
    return re.sub(r"^[ \t]*#[^\n]*(\\\n[^\n]*)*", keep_lines, text, flags=re.M)


def call_edges():
    """{file: {file it uses: (line, name)}} for functions defined in one .c/.cu file alone."""
    files = [p for top in TOPS for p in sources(top, (".c", ".cu"))]
    text = {}
    for p in files:
        with open(p, encoding="utf-8", errors="replace") as f:
            text[p] = code_only(f.read())
    defined = collections.defaultdict(set)
    for p, t in text.items():
        for m in DEFINITION.finditer(t):
            defined[m.group(1)].add(p)
    single = {name: next(iter(ps)) for name, ps in defined.items() if len(ps) == 1 and name != "main"}
    edges = collections.defaultdict(dict)
    for p, t in text.items():
        for n, line in enumerate(t.split("\n"), 1):
            if PROTOTYPE.match(line):
                continue
            for name in IDENT.findall(line):
                target = single.get(name)
                if target and target != p and target not in edges[p]:
                    edges[p][target] = (n, name)
    return edges


def part_of(path, orders):
    """(part, folder within it) of a file under a layered part, else (None, None)."""
    r = rel(path)
    for part in orders:
        if r.startswith(part + "/"):
            folder = os.path.dirname(r[len(part) + 1:])
            return part, folder or ROOT_FOLDER
    return None, None


def check_layers(orders, inc, calls):
    ranks = {part: {d: i for i, d in enumerate(order)} for part, (order, _) in orders.items()}
    for part, (order, where) in orders.items():
        for path in sources(part):
            _, folder = part_of(path, orders)
            if folder not in ranks[part]:
                problems.append("%s: folder %s of %s/ is not in the layer order of %s" % (rel(path), folder, part,
                                                                                      where))
    for kind, graph in (("includes", inc), ("calls", calls)):
        for a, outs in sorted(graph.items()):
            pa, fa = part_of(a, orders)
            if pa is None or fa not in ranks[pa]:
                continue
            for b, (n, name) in sorted(outs.items()):
                pb, fb = part_of(b, orders)
                if pb != pa or fb not in ranks[pa]:
                    continue
                if ranks[pa][fb] > ranks[pa][fa]:
                    problems.append("%s:%d: %s %s (%s), a layer above %s/%s (%s)" % (
                        rel(a), n, kind, name, rel(b), pa, fa, orders[pa][1]))


def check_include_pairs(inc):
    for a, outs in inc.items():
        for b, (n, _) in outs.items():
            if a < b and a in inc.get(b, {}):
                problems.append("%s:%d and %s:%d include each other" % (rel(a), n, rel(b), inc[b][a][0]))


def check_call_cycles(calls):
    """Tarjan's strongly connected components over the call graph; each with two or more files is a cycle."""
    index, low, stack, on_stack, counter = {}, {}, [], set(), [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in calls.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                report_cycle(sorted(component), calls)

    for v in sorted(calls):
        if v not in index:
            visit(v)


def report_cycle(component, calls):
    members = set(component)
    links = ["%s:%d uses %s (%s)" % (rel(a), n, name, rel(b))
             for a in component for b, (n, name) in sorted(calls.get(a, {}).items()) if b in members]
    problems.append("call cycle through %d files: %s" % (len(component), "; ".join(links)))


def main():
    orders = read_orders()
    inc = {}
    for top in TOPS:
        for path in sources(top):
            inc[path] = {t: (n, name) for n, name, t in includes(path)}
    calls = call_edges()
    check_layers(orders, inc, calls)
    check_include_pairs(inc)
    check_call_cycles(calls)
    for p in problems:
        print(p)
    print("check_layers: %d problem(s); %s" % (len(problems), "; ".join(
        "%s/: %s" % (part, " → ".join(order)) for part, (order, _) in sorted(orders.items()))))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
