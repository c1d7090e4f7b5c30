#!/usr/bin/env python3
"""tests/docs/check_doc_paths.py SOURCE_DIR — every source path the docs name exists.

Reads README.md, docs/*.md and the READMEs one or two folders down (plugins/cntk/README.md, tests/sdk/...),
finds each path under a source folder of the tree (core/, kit/, plugins/, tasks/, tests/, tools/, include/,
conf/, cmake/, examples/, docs/, and bench/: the results the docs cite) that names a source file (by its extension), a tool (tools/...) or a folder
(a trailing /), expands {a,b} alternatives and * globs, and prints FILE:LINE: PATH for each one missing.
Placeholders (<plugin>) and build outputs (.so, test executables) are not source paths. Exit 1 when any is
missing."""
import glob
import itertools
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "."
TOPS = "core|kit|plugins|tasks|tests|tools|include|conf|cmake|examples|docs|bench"
EXTS = (".c", ".h", ".cu", ".cmake", ".sh", ".py", ".md", ".in", ".txt", ".ini", ".json")
PATH = re.compile(r"(?<![\w./<>-])((?:%s)/[A-Za-z0-9_.*{},/+-]*[A-Za-z0-9_*}/])" % TOPS)


def expand(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    return list(itertools.chain.from_iterable(expand(p[:m.start()] + alt + p[m.end():])
                                              for alt in m.group(1).split(",")))


def is_source_path(p):
    if p.endswith("/"):
        return True
    if p.startswith("tools/"):
        return True
    return p.endswith(EXTS)


def docs():
    names = ["README.md"] + glob.glob("docs/*.md") + glob.glob("*/README.md") + glob.glob("*/*/README.md")
    return sorted(n for n in set(names) if not n.startswith(("build", "bench/")))


def main():
    os.chdir(ROOT)
    missing = 0
    for d in docs():
        with open(d, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in PATH.finditer(line):
                    if line[m.end():m.end() + 1] == "<":  # a placeholder follows: tests/<plugin>/...
                        continue
                    for p in expand(m.group(1).rstrip(".,")):
                        if not is_source_path(p):
                            continue
                        if not (glob.glob(p) if "*" in p else os.path.exists(p)):
                            missing += 1
                            print("%s:%d: %s does not exist" % (d, n, p))
    print("check_doc_paths: %d missing" % missing)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
