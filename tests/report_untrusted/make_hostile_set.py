#!/usr/bin/env python3
"""make_hostile_set.py OUT — a results folder whose records hold hostile text in every free-text field (markup
that would run a script, quotes, Markdown structure, line breaks, control characters, a terminal escape,
bytes that are not UTF-8), plus records and files whose *names* are hostile (which khost must refuse).
The payload marks the page if any of its script ever runs: <body data-pwned=...>."""
import json
import os
import sys

out = sys.argv[1]
RAW = "\x00RAW\x00"  # replaced by bytes that are not UTF-8 after json.dumps
PAYLOAD = ("<script>document.body.setAttribute('data-pwned','script')</script>"
           "<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">"
           "<svg onload=\"document.body.setAttribute('data-pwned','svg')\"></svg>"
           "\"quoted\" 'single' &amp; | cell | [link](javascript:alert(1)) `code` <!-- "
           "line\nbreak\r\ttab \x01\x1b[31mred\x7f \u0085 end" + RAW)


def record(plugin, status, reps_k=None, t=2.0):
    r = {"khost_record": 2, "plugin": plugin, "task": "mnist_mlp", "device": "cpu", "status": status,
         "reason": PAYLOAD if status != "ok" else "", "epochs_requested": 1, "batch_size": 128, "seed": 1,
         "train_samples": 60000, "val_samples": 10000, "metric": "val_acc",
         "metric_value": 0.97, "mean_epoch_s": t, "median_epoch_s": t, "peak_source": PAYLOAD,
         "math": "fp32", "math_note": PAYLOAD, "compile_s": 0.5, "compile_cache": PAYLOAD,
         "gflops": 10.0, "roofline_fraction": 0.5, "peak_rss_bytes": 123456789,
         "device_mem": {"source": "backend", "peak_bytes": 1000, "reason": PAYLOAD},
         "epochs": [{"epoch": 1, "elapsed": t, "loss": 0.3, "acc": 0.9, "val_loss": 0.2, "val_acc": 0.97,
                     "train_s": t, "val_s": 0.1, "epoch_s": t}],
         "samples": {"step_s": [t / 4] * 4, "epoch_s": [t], "step_sync": PAYLOAD, "warmup_steps": 1,
                     "steps_per_epoch": 4},
         "environment": {"cpu_model": PAYLOAD, "cpu_isa": PAYLOAD, "cpu_threads": PAYLOAD,
                         "slurm_array_job_id": PAYLOAD, "slurm_array_task_id": PAYLOAD, "slurm_node": PAYLOAD,
                         PAYLOAD: PAYLOAD}}
    if status != "ok":
        for k in ("metric_value", "mean_epoch_s", "median_epoch_s", "gflops", "roofline_fraction"):
            r.pop(k)
        r["epochs"] = []
        r["samples"]["step_s"] = []
    if reps_k is not None:
        r["repeat"] = {"index": reps_k, "of": 3, "round": reps_k, "position": 0, "order_seed": 7}
    return r


def write(path, r):
    text = json.dumps(r).encode().replace(b"\\u0000RAW\\u0000", b"\xff\xfe\xc0\xaf")
    with open(path, "wb") as f:
        f.write(text)


task = os.path.join(out, "mnist_mlp")
os.makedirs(task, exist_ok=True)
for k in (1, 2, 3):
    write(os.path.join(task, f"cntk__cpu.rep{k}.json"), record("cntk", "ok", k, 2.0 + 0.01 * k))
    write(os.path.join(task, f"theano__cpu.rep{k}.json"), record("theano", "ok", k, 3.0 + 0.01 * k))
write(os.path.join(task, "tensorflow__cpu.json"), record("tensorflow", "crashed"))
# a record from a newer khost: read as far as it is understood, with a warning naming it
future = record("future", "ok")
future["khost_record"] = 99
write(os.path.join(task, "future__cpu.json"), future)
# names that are not names: refused with a message, never shown as a row
bad = record("cntk", "ok")
bad["plugin"] = "<img src=x onerror=alert(1)>|x"
write(os.path.join(task, "evil__cpu.json"), bad)
bad = record("cntk", "ok")
bad["status"] = "ok<script>"
write(os.path.join(task, "evil2__cpu.json"), bad)
with open(os.path.join(task, "<b>x|y\n\x1b[2J__cpu.json"), "w") as f:
    json.dump(record("cntk", "ok"), f)
