"""khref.loop — the training loop every reference shares, shaped as khost's core/cell/cell.c runs a cell:
per epoch a seeded shuffle, batches in that order (the last partial batch included, as Keras), the task's
augmentation, training; then the validation split in order, in batches. Time per epoch is wall time from the
epoch's start to the end of its validation pass; train_s and val_s are kept apart.

The framework supplies a `Runner` with
    train_batch(x, y) -> None          (one optimizer step; metrics accumulate inside)
    eval_batch(x, y) -> None
    take_metrics(phase) -> (loss_sum, correct, samples)   and resets that phase's sums
    sync() -> None                     (wait for queued work; a no-op for eager CPU frameworks)
"""
import json
import sys
import time

import numpy as np

from . import cli
from . import data as D


def load_task_data(args):
    t = cli.TASKS[args.task]
    root = D.data_dir(args.data)
    ds = t["dataset"]
    if ds == "mnist":
        return D.load_mnist(root, args.limit_train, args.limit_val)
    if ds == "cifar10":
        return D.load_cifar10(root, args.limit_train, args.limit_val)
    if ds == "imdb":
        ft = args.task == "imdb_fasttext"
        return D.load_imdb(root, args.limit_train, args.limit_val, maxlen=400 if ft else 100, bigrams=ft)
    if ds == "nietzsche":
        return D.load_nietzsche(root, args.limit_train)
    raise ValueError(ds)


class Batches:
    """Turns sample indices into the numpy batch a model consumes (x as stored, labels int64)."""

    def __init__(self, args, data, prepare):
        self.d = data
        self.prepare = prepare  # (x_numpy, train: bool, rng) -> framework input
        self.windows = isinstance(data.x_train, D.CharWindows)

    def n_train(self):
        return len(self.d.x_train)

    def n_val(self):
        return 0 if self.d.x_val is None else len(self.d.x_val)

    def train(self, idx, rng):
        if self.windows:
            x, y = self.d.x_train.batch(idx)
        else:
            x, y = self.d.x_train[idx], self.d.y_train[idx]
        return self.prepare(x, True, rng), y

    def val(self, a, b):
        return self.prepare(self.d.x_val[a:b], False, None), self.d.y_val[a:b]


def run(args, data, runner, prepare, extra_env=None):
    t = cli.TASKS[args.task]
    B = args.batch_size
    bt = Batches(args, data, prepare)
    n_train = bt.n_train()
    n_val = bt.n_val() if t["has_val"] else 0
    rec = cli.Record(args, n_train, n_val, data.info)
    for k, v in (extra_env or {}).items():
        rec.set_env(k, v)
    per_epoch = min(t.get("per_epoch") or n_train, n_train)
    steps = (per_epoch + B - 1) // B
    if args.steps:
        steps = min(args.steps, steps)
        per_epoch = min(per_epoch, steps * B)
    rec.set_env("steps_per_epoch", steps)
    rec.steps_per_epoch = steps
    # Per-step samples, the way core/cell/cell.c takes them: from the previous step's end to this one's, after
    # the runner's sync. Eager runners (PyTorch) are synchronised per step ("device"); a framework whose own
    # loop drives the epoch (Keras's fit) reports each step's end from its batch callback once the step's loss
    # has reached the host ("host-loss": the step's whole computation has run, its dispatch overlap is not cut).
    whole_epochs = hasattr(runner, "train_epoch")  # frameworks whose own loop (fit) takes a batch stream
    rec.step_sync = "host-loss" if whole_epochs else "device"
    facts = ["%s %s" % (k, data.info[k]) for k in ("max_features", "n_bigrams", "vocab_size", "n_distinct", "n_windows")
             if k in data.info]
    if facts:
        rec.set_env("data_facts", ", ".join(facts))
    rng = np.random.default_rng(args.seed)
    cli.log(args, "%s x %s: %d train / %d validation samples, %d steps of %d per epoch" % (
        args.framework, args.task, n_train, n_val, steps, B))

    def train_stream(order, total):
        done = 0
        while done < total:
            n = min(B, total - done)
            yield bt.train(order[done:done + n], rng)
            done += n

    if args.warmup_steps:  # untimed, outside every epoch (the model then starts epoch 1 already trained a bit)
        order = np.concatenate([rng.permutation(n_train) for _ in range(-(-args.warmup_steps * B // n_train))])
        total = args.warmup_steps * B
        if whole_epochs:
            runner.train_epoch(train_stream(order, total), args.warmup_steps)
        else:
            for x, y in train_stream(order, total):
                runner.train_batch(x, y)
        runner.sync()
        runner.take_metrics("train")

    t_start = time.perf_counter()
    status = "ok"
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(n_train)
        t0 = time.perf_counter()
        if whole_epochs:
            ends = runner.train_epoch(train_stream(order, per_epoch), steps, timed=True)
            prev = t0
            for e in ends:
                rec.step_s.append(e - prev)
                prev = e
        else:
            prev = t0
            for x, y in train_stream(order, per_epoch):
                runner.train_batch(x, y)
                runner.sync()
                now = time.perf_counter()
                rec.step_s.append(now - prev)
                prev = now
        runner.sync()
        t1 = time.perf_counter()
        ls, cor, ns = runner.take_metrics("train")
        row = {"epoch": epoch, "loss": ls / ns if ns else float("nan"), "acc": cor / ns if ns else float("nan"),
               "val_loss": float("nan"), "val_acc": float("nan")}
        if not np.isfinite(row["loss"]):
            row.update(train_s=t1 - t0, val_s=0.0, epoch_s=t1 - t0, elapsed=time.perf_counter() - t_start)
            rec.add_row(row)
            status = "diverged"
            rec.reason = "training loss became %s in epoch %d" % ("NaN" if np.isnan(row["loss"]) else "Inf", epoch)
            break
        if n_val:
            stream = (bt.val(a, min(a + B, n_val)) for a in range(0, n_val, B))
            if whole_epochs:
                runner.eval_epoch(stream, (n_val + B - 1) // B)
            else:
                for x, y in stream:
                    runner.eval_batch(x, y)
            runner.sync()
            ls, cor, ns = runner.take_metrics("eval")
            row["val_loss"], row["val_acc"] = ls / ns, cor / ns
        t2 = time.perf_counter()
        row.update(train_s=t1 - t0, val_s=t2 - t1, epoch_s=t2 - t0, elapsed=t2 - t_start)
        rec.add_row(row)
        msg = "Epoch %d/%d - %.2fs (train %.2fs, %.2f ms/step) - loss: %.4f - acc: %.4f" % (
            epoch, args.epochs, row["epoch_s"], row["train_s"], 1000 * row["train_s"] / steps, row["loss"], row["acc"])
        if n_val:
            msg += " - val_loss: %.4f - val_acc: %.4f" % (row["val_loss"], row["val_acc"])
        cli.log(args, msg)
    rec.status = status
    rec.set_env("finished_at", cli.now_iso())
    if not args.no_write:
        path = rec.write(args.out)
        if not args.json:
            cli.log(args, "results in %s" % path)
    if args.json:
        print(json.dumps(rec.to_dict()), flush=True)
    return 0 if status == "ok" else 1


def main_guard(fn):
    try:
        return fn()
    except D.DataError as e:
        print("error: %s" % e, file=sys.stderr)
        return 4
