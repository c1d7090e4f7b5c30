#!/usr/bin/env python3
"""tests/seeds/planted.py DIR [--one-seed] — a planted result set for `khost report`'s section on seeds: task
"planted" (val_acc, target 0.9 at least), device cpu, 12 epochs of 2.0 s, seeds 7, 8 and 9 as repetitions 1-3,
each record's val_acc 0.5 until the epoch that reaches the target and its final value from then on (or the final
value throughout, below 0.9, when it never does), its epochs and time to target as khost writes them.

    backend   finals (7, 8, 9)     epochs to target   what the report must say
    alpha     0.90, 0.92, 0.97     3, 4, 5            mean 0.93, sd 0.0361, t-interval [0.8404, 1.0196]
    beta      0.91, 0.93, 0.95     3, 4, 4
    fast      0.95, 0.96, 0.97     1, 2, 2            median 2 below every other row's 3-10: faster than all
    flaky     0.93, 0.88, crashed  3, never, -        2 of 3 seeds; median never: slower than all
    oldie     0.90, 0.90, 0.90     (a record from before epochs_to_target: unknown, not "never")
    refnet    0.94, 0.94, 0.95     4, 4, 5            a reference row
    slow      0.93, 0.92, 0.89     9, 10, never       median 10 above every other row's 1-5: slower than all
    unseeded  (records without a "seed": no row in the section, nothing compared with them)

--one-seed writes seed 7 alone (repetition 1 of 1, a classic <plugin>__cpu.json): one seed per cell, whose report
must be what it was before the section existed (expected-one-seed.md). --same-seed writes the three repetitions
all from seed 7 (matrix --repeat 3): one seed per cell too."""
import json
import os
import sys

NEVER = None
SETS = {
    "alpha": [(0.90, 3), (0.92, 4), (0.97, 5)],
    "beta": [(0.91, 3), (0.93, 4), (0.95, 4)],
    "fast": [(0.95, 1), (0.96, 2), (0.97, 2)],
    "flaky": [(0.93, 3), (0.88, NEVER), "crashed"],
    "oldie": [(0.90, 2), (0.90, 2), (0.90, 2)],
    "refnet": [(0.94, 4), (0.94, 4), (0.95, 5)],
    "slow": [(0.93, 9), (0.92, 10), (0.89, NEVER)],
    "unseeded": [(0.90, 2), (0.90, 2), (0.90, 2)],
}
EPOCHS, EPOCH_S, TARGET = 12, 2.0, 0.9


def record(plugin, k, n, run, same_seed):
    seed = 7 if same_seed else 6 + k
    rec = {"khost_record": 2, "plugin": plugin, "task": "planted", "device": "cpu", "epochs_requested": EPOCHS,
           "batch_size": 64, "seed": seed, "train_samples": 1000, "val_samples": 500, "metric": "val_acc"}
    if plugin == "unseeded":
        del rec["seed"]
    rows = []
    if run == "crashed":
        rec.update(status="crashed", reason="signal 11 (Segmentation fault)", metric_value=None, mean_epoch_s=None,
                   median_epoch_s=None, time_to_target_s=None)
    else:
        final, ett = run
        for e in range(1, EPOCHS + 1):
            acc = final if ett is NEVER or e >= ett else 0.5
            rows.append({"epoch": e, "elapsed": EPOCH_S * e, "loss": 1.0, "acc": acc, "val_loss": 1.0, "val_acc": acc,
                         "train_s": EPOCH_S, "val_s": 0.0, "epoch_s": EPOCH_S})
        rec.update(status="ok", reason="", metric_value=final, mean_epoch_s=EPOCH_S, median_epoch_s=EPOCH_S,
                   time_to_target_s=None if ett is NEVER else EPOCH_S * ett)
        if plugin != "oldie":  # oldie: written before records had a target
            rec["target"] = {"value": TARGET, "reach": "at_least"}
            rec["epochs_to_target"] = ett
            if ett is NEVER:
                rec["target_note"] = "val_acc never reached its target 0.9 (at least) in 12 epochs; best %g" % final
    rec["epochs"] = rows
    rec["repeat"] = {"index": k, "of": n, "round": k, "position": 0, "order_seed": 5}
    env = {"cpu_model": "Planted CPU", "device_name": "Planted CPU"}
    if plugin == "refnet":
        env["reference"] = "refnet (planted)"
    rec["environment"] = env
    return rec


def main():
    out, one, same = sys.argv[1], "--one-seed" in sys.argv[2:], "--same-seed" in sys.argv[2:]
    d = os.path.join(out, "planted")
    os.makedirs(d, exist_ok=True)
    for plugin, runs in SETS.items():
        n = 1 if one else len(runs)
        for k in range(1, n + 1):
            name = "%s__cpu.json" % plugin if one else "%s__cpu.rep%d.json" % (plugin, k)
            with open(os.path.join(d, name), "w") as f:
                json.dump(record(plugin, k, n, runs[k - 1], same), f, indent=1)
                f.write("\n")


main()
