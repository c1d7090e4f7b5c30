#!/usr/bin/env python3
"""tests/history/make_asv_fixtures.py OUT.json — the reference outputs tests/history checks khost's step detection
against: asv's own detect_steps and detect_regressions (asv 0.6.4 from PyPI, with its compiled RangeMedian) on
fixed series (flat noise, steps up and down, two steps, a one-point blip, spikes, ties, constant, 1 to 3 points).
Run with asv importable: pip install --target DIR asv==0.6.4 --no-deps; PYTHONPATH=DIR python3 ..."""
import importlib.util
import json
import os
import random
import sys
import types

# asv's package __init__ pulls in its whole runner; step_detect and its compiled RangeMedian need none of it
_asv_dir = os.path.dirname(importlib.util.find_spec("asv").origin)
sys.modules["asv"] = types.ModuleType("asv")
sys.modules["asv"].__path__ = [_asv_dir]
from asv import step_detect  # noqa: E402

assert step_detect._rangemedian is not None, "asv's compiled RangeMedian is what asv runs: install the wheel"

rng = random.Random(20261207)


def noisy(levels, cv):
    return [v * (1 + rng.gauss(0, cv)) for v in levels]


series = {
    "flat_cv2": noisy([10.0] * 40, 0.02),
    "flat_cv8": noisy([10.0] * 40, 0.08),
    "step_up_10pct": noisy([10.0] * 20 + [11.0] * 20, 0.02),
    "step_down_20pct": noisy([10.0] * 15 + [8.0] * 25, 0.03),
    "two_steps": noisy([5.0] * 12 + [6.0] * 12 + [5.5] * 16, 0.01),
    "blip": noisy([3.0] * 10 + [4.5] + [3.0] * 10, 0.01),
    "spikes": [2.0 + (5.0 if i in (7, 19) else 0.0) + 0.01 * (i % 3) for i in range(30)],
    "ties": [1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0],
    "constant": [4.2] * 9,
    "one": [7.0],
    "two": [7.0, 9.0],
    "three": [1.0, 1.0, 5.0],
    "long_regress": noisy([1.0] * 60 + [1.3] * 60 + [1.25] * 30, 0.04),
}
out = []
for name, y in series.items():
    steps = step_detect.detect_steps(y)
    entry = {"name": name, "y": y, "steps": [list(s) for s in steps]}
    for thr in (0.0, 0.05):
        latest, best, pos = step_detect.detect_regressions(steps, threshold=thr)
        entry["regressions_%g" % thr] = {"latest": latest, "best": best, "pos": [list(p) for p in (pos or [])]}
    out.append(entry)
with open(sys.argv[1], "w") as f:
    json.dump({"asv": "0.6.4", "series": out}, f, indent=1)
