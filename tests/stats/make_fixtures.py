#!/usr/bin/python3
"""tests/stats/make_fixtures.py — the reference values the statistics unit test compares khost's C with.

Computed independently with numpy / scipy (pip install numpy scipy), written once to fixtures.json and
committed: CI never runs this script. Rerun it only when a case is added:

    python3 tests/stats/make_fixtures.py > tests/stats/fixtures.json

Definitions (core/results/stats.h): sd with ddof=1; quantiles np.percentile(method="linear"); MAD
scipy.stats.median_abs_deviation(scale=1.0); CV sd/mean; the modified Z-score 0.6745 (x - median) / MAD
(Iglewicz & Hoaglin), with 1.253314 * mean absolute deviation as the scale when MAD is 0.
"""
import json

import numpy as np
import scipy.stats


def modified_z(x):
    med = np.median(x)
    mad = scipy.stats.median_abs_deviation(x, scale=1.0)
    if mad > 0:
        return 0.6745 * (x - med) / mad
    mean_ad = np.mean(np.abs(x - med))
    if mean_ad > 0:
        return (x - med) / (1.253314 * mean_ad)
    return np.zeros_like(x)


def case(name, x):
    x = np.asarray(x, dtype=np.float64)
    q1, med, q3 = np.percentile(x, [25, 50, 75], method="linear")
    sd = float(np.std(x, ddof=1)) if len(x) > 1 else 0.0
    z = modified_z(x)
    return {
        "name": name, "x": x.tolist(), "n": len(x),
        "mean": float(np.mean(x)), "sd": sd, "median": float(med), "q1": float(q1), "q3": float(q3),
        "iqr": float(scipy.stats.iqr(x)), "mad": float(scipy.stats.median_abs_deviation(x, scale=1.0)),
        "min": float(np.min(x)), "max": float(np.max(x)), "cv": sd / float(np.mean(x)),
        "p10": float(np.percentile(x, 10, method="linear")), "p90": float(np.percentile(x, 90, method="linear")),
        "modified_z": z.tolist(), "outlier": [bool(abs(v) > 3.5) for v in z],
    }


rng = np.random.default_rng(20)
cases = [
    case("five_reps", [1.92, 2.05, 1.98, 2.11, 2.01]),
    case("four_reps_even", [0.512, 0.498, 0.530, 0.505]),
    case("first_rep_outlier", [3.9, 2.51, 2.49, 2.50, 2.52, 2.48]),
    case("skewed_lognormal_25", rng.lognormal(mean=-3.0, sigma=0.4, size=25)),
    case("normal_101", rng.normal(loc=12.0, scale=0.7, size=101)),
    case("two_values", [7.0, 9.0]),
    case("mad_zero", [5.0, 5.0, 5.0, 5.0, 6.0, 9.0, 5.0]),
    case("single", [0.25]),
]
pairs = []
for name, a, b in [("paired_five", [2.0, 2.2, 1.9, 2.4, 2.1], [1.0, 1.05, 0.98, 1.2, 1.01]),
                   ("paired_even", [3.0, 3.3, 3.1, 2.9], [2.5, 2.6, 2.4, 2.7])]:
    pairs.append({"name": name, "a": a, "b": b, "ratio": float(np.median(a) / np.median(b))})
print(json.dumps({"generator": "tests/stats/make_fixtures.py", "numpy": np.__version__,
                  "scipy": scipy.__version__, "cases": cases, "ratios": pairs}, indent=1))
