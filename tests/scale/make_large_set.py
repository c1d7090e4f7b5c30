#!/usr/bin/env python3
"""make_large_set.py OUT SEED REPS — a results folder of one task (mnist_mlp) with cntk and theano on cpu, REPS
repetition records each (times drawn from SEED), written from a template: the scale test's input."""
import os
import random
import sys

out, seed, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
task = os.path.join(out, "mnist_mlp")
os.makedirs(task, exist_ok=True)
TEMPLATE = ('{{"khost_record": 2, "plugin": "{p}", "task": "mnist_mlp", "device": "cpu", "status": "ok", "reason": "", '
            '"epochs_requested": 1, "batch_size": 128, "seed": 1, "train_samples": 60000, "val_samples": 10000, '
            '"metric": "val_acc", "metric_value": 0.97, "mean_epoch_s": {t}, "median_epoch_s": {t}, '
            '"epochs": [{{"epoch": 1, "elapsed": {t}, "val_acc": 0.97, "epoch_s": {t}}}], '
            '"samples": {{"step_s": [{s}, {s}, {s}], "step_sync": "device", "warmup_steps": 5, "steps_per_epoch": 3}}, '
            '"repeat": {{"index": {k}, "of": {n}, "round": {k}, "position": {pos}, "order_seed": 7}}, '
            '"environment": {{"cpu_model": "Test CPU", "cpu_threads": "2"}}}}\n')
for k in range(1, reps + 1):
    for pos, (p, base) in enumerate((("cntk", 2.0), ("theano", 3.0))):
        t = base * rnd.uniform(0.95, 1.05)
        with open(os.path.join(task, f"{p}__cpu.rep{k}.json"), "w") as f:
            f.write(TEMPLATE.format(p=p, t=t, s=t / 3, k=k, n=reps, pos=pos))
