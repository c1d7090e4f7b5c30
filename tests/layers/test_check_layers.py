#!/usr/bin/env python3
"""tests/layers/test_check_layers.py — the layering check can fail: run on tests/layers/fixture, a tree with one
planted violation of each kind, it must exit 1 and name each one (file and line)."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
run = subprocess.run([sys.executable, os.path.join(here, "check_layers.py"), os.path.join(here, "fixture")],
                     capture_output=True, text=True)
out = run.stdout + run.stderr
expected = [
    "core/low/low.h:2: includes high/high.h (core/high/high.h), a layer above core/low",
    "core/low/low.c:4: calls high_fn (core/high/high.c), a layer above core/low",
    "core/other/other.c: folder other of core/ is not in the layer order",
    "plugins/p/sub/s.h:2: includes p.h (plugins/p/p.h), a layer above plugins/p/sub",
    "kit/base/x.h:2 and kit/base/y.h:1 include each other",
    "call cycle through 2 files: kit/base/a.c:3 uses b_fn (kit/base/b.c); kit/base/b.c:2 uses a_fn (kit/base/a.c)",
    "docs/ARCHITECTURE.md: no line 'plugins/q/ layers, from the bottom: a → b → ...'",
    "check_layers: 7 problem(s)",
]
missing = [e for e in expected if e not in out]
if run.returncode != 1 or missing:
    print(out)
    print("exit %d (expected 1); not reported: %s" % (run.returncode, missing))
    sys.exit(1)
print("test_check_layers: every planted violation reported (%d)" % len(expected))
