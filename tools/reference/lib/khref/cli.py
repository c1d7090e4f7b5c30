"""khref.cli — the reference scripts' command line, the process settings that must be in place before a
framework is imported (threads, OpenMP wait policy, allocator), the task table, and khost's record format.

Every reference script starts with
    from khref import cli
    args = cli.setup("mnist_mlp", "pytorch")     # parses argv, sets the environment, may re-exec once
and only then imports its framework.
"""
import argparse
import ctypes
import json
import math
import os
import platform
import signal
import socket
import subprocess
import sys
import time

# --- the six tasks (../shared/reference/keras-backend-benchmark.md; khost's tasks/*.c) ---------------------------
TASKS = {
    "mnist_mlp": dict(dataset="mnist", epochs=20, batch=128, metric="val_acc", target=0.98, has_val=True,
                      opt=dict(kind="rmsprop", lr=0.001, rho=0.9, eps=1e-7, decay=0.0)),
    "mnist_cnn": dict(dataset="mnist", epochs=12, batch=128, metric="val_acc", target=0.988, has_val=True,
                      opt=dict(kind="adadelta", lr=1.0, rho=0.95, eps=1e-7, decay=0.0)),
    "cifar10_cnn": dict(dataset="cifar10", epochs=20, batch=32, metric="val_acc", target=0.70, has_val=True,
                        per_epoch=(50000 // 32) * 32, augment=True,
                        opt=dict(kind="rmsprop", lr=1e-4, rho=0.9, eps=1e-7, decay=1e-6)),
    "imdb_bidirectional_lstm": dict(dataset="imdb", epochs=4, batch=32, metric="val_acc", target=0.82, has_val=True,
                                    opt=dict(kind="adam", lr=0.001, beta_1=0.9, beta_2=0.999, eps=1e-7, decay=0.0)),
    "imdb_fasttext": dict(dataset="imdb", epochs=5, batch=32, metric="val_acc", target=0.88, has_val=True,
                          opt=dict(kind="adam", lr=0.001, beta_1=0.9, beta_2=0.999, eps=1e-7, decay=0.0)),
    "lstm_text_generation": dict(dataset="nietzsche", epochs=10, batch=128, metric="loss", target=1.45,
                                 target_is_max=True, has_val=False,
                                 opt=dict(kind="rmsprop", lr=0.01, rho=0.9, eps=1e-7, decay=0.0)),
}

# Best settings on this kind of machine (2 cores), measured: docs/REFERENCES.md.
DEFAULT_WAIT_POLICY = "PASSIVE"


def _parser(task, framework):
    t = TASKS[task]
    ap = argparse.ArgumentParser(prog="%s/%s" % (framework, task),
                                 description="%s reference of khost's task %s (Keras 2 semantics)" % (framework, task))
    ap.add_argument("--epochs", type=int, default=t["epochs"])
    ap.add_argument("--batch-size", type=int, default=t["batch"])
    ap.add_argument("--limit-train", type=int, default=0, help="first N training samples (khost's sample order)")
    ap.add_argument("--limit-val", type=int, default=0, help="first N validation samples")
    ap.add_argument("--steps", type=int, default=0,
                    help="train only N steps per epoch (from the shuffled full training set)")
    ap.add_argument("--warmup-steps", type=int, default=0,
                    help="N untimed training steps before epoch 1 (warm-up; not recorded)")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (default: online CPUs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="results", help="results folder: <out>/<task>/%s__<device>.json" % framework)
    ap.add_argument("--device", default="cpu",
                    help="cpu, or cuda:N (PyTorch only: the FP32 math of --math, as khost's GPU paths)")
    ap.add_argument("--math", default="fp32", choices=["fp32", "tf32"],
                    help="FP32 math on cuda, as khost's --math: fp32 (default, strict: TF32 off for matmuls and "
                         "cuDNN) or tf32 (torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 "
                         "on); a cpu run records fp32")
    ap.add_argument("--data", default=None, help="data folder (default $KHOST_DATA, else <repo>/data)")
    ap.add_argument("--json", action="store_true", help="print the record as one JSON line on stdout")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--wait-policy", default=DEFAULT_WAIT_POLICY, choices=["PASSIVE", "ACTIVE", "default"],
                    help="OMP_WAIT_POLICY for the framework's OpenMP threads (default PASSIVE)")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="OPENBLAS_NUM_THREADS (default: the same as --threads)")
    ap.add_argument("--allocator", default="default", choices=["default", "glibc", "jemalloc"],
                    help="'jemalloc' preloads libjemalloc.so.2 (re-exec); default: glibc malloc")
    ap.add_argument("--variant", default="", help="framework-specific implementation variant (measurements)")
    ap.add_argument("--no-write", action="store_true", help="do not write the record files")
    ap.add_argument("--repetition", default="", metavar="K/N/ROUND/POS/SEED",
                    help="this run is repetition K of N (khost matrix --repeat: round, position in the round's "
                         "order, order seed); written as <task>/<framework>__<device>.repK.json")
    return ap


def parse_repetition(text):
    """khost's --repetition k/N/round/position/seed (core/cell/cell.c) -> dict, or None when not given."""
    if not text:
        return None
    parts = text.split("/")
    try:
        k, n, rnd, pos, seed = (int(v) for v in parts)
    except ValueError:
        raise SystemExit("--repetition expects K/N/ROUND/POS/SEED (integers), got '%s'" % text)
    if not (1 <= k <= n) or rnd < 1 or pos < 0 or seed < 0:
        raise SystemExit("--repetition %s: need 1 <= K <= N, ROUND >= 1, POS >= 0, SEED >= 0" % text)
    return dict(index=k, of=n, round=rnd, position=pos, order_seed=seed)


JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"


def guard_parent():
    """khost's rule for the processes it starts (core/base/procguard.h), kept by a runner too: when khost
    started this one (KHOST_PARENT_PID), it ends when khost ends, and takes its process group (it leads one:
    khost spawns every cell so) with it, whatever the framework started. A parent already gone ends it now."""
    want = os.environ.get("KHOST_PARENT_PID", "")
    if not want.isdigit() or os.getpgrp() != os.getpid():  # a group of its own, or nothing to end
        return

    def end_group(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, end_group)
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
        sys.exit("reference: prctl(PR_SET_PDEATHSIG): %s" % os.strerror(ctypes.get_errno()))
    if os.getppid() != int(want):  # khost died before the prctl: nobody would ever signal this process
        end_group(signal.SIGTERM, None)


def setup(task, framework):
    """Parse argv and fix the process environment before the framework loads (OpenMP and OpenBLAS read
    theirs when their libraries are loaded)."""
    guard_parent()
    args = _parser(task, framework).parse_args()
    args.task, args.framework = task, framework
    args.repeat = parse_repetition(args.repetition)
    if args.device != "cpu" and (framework != "pytorch" or not args.device.startswith("cuda:")):
        print("%s: --device %s: only the PyTorch reference runs on cuda:N" % (task, args.device), file=sys.stderr)
        sys.exit(6)  # khost's KH_EXIT_UNSUPPORTED: a final answer for this cell
    if args.threads <= 0:
        args.threads = os.cpu_count() or 1
    env = os.environ
    if args.allocator == "jemalloc" and JEMALLOC not in env.get("LD_PRELOAD", ""):
        if not os.path.exists(JEMALLOC):
            sys.exit("%s: --allocator jemalloc needs %s (apt-get install libjemalloc2)" % (task, JEMALLOC))
        env["LD_PRELOAD"] = (JEMALLOC + " " + env.get("LD_PRELOAD", "")).strip()
        os.execv(sys.executable, [sys.executable] + sys.argv)
    env["OMP_NUM_THREADS"] = str(args.threads)
    env["OPENBLAS_NUM_THREADS"] = str(args.blas_threads or args.threads)
    env["MKL_NUM_THREADS"] = str(args.threads)
    if args.wait_policy == "default":
        env.pop("OMP_WAIT_POLICY", None)
    else:
        env["OMP_WAIT_POLICY"] = args.wait_policy
    return args


# --- khost's record (core/results/results.h) ------------------------------------------------------------------------------
def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_isa():
    """The widest x86 vector extension set, named as khost's records name it (core/cell/env.c)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    fl = set(line.split(":", 1)[1].split())
                    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= fl:
                        return "avx512"
                    if {"avx2", "fma"} <= fl:
                        return "avx2"
                    return "avx" if "avx" in fl else "sse"
    except OSError:
        pass
    return "unknown"


def git_rev():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip() or "unknown"
    except Exception:
        return "unknown"


def now_iso():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _num(v):
    return v if v is not None and isinstance(v, (int, float)) and math.isfinite(v) else None


def _sample(v):
    """Six significant digits, as khost writes samples (core/results/results.c)."""
    v = _num(v)
    return None if v is None else float("%.6g" % v)


def peak_rss_bytes():
    """This process's peak resident set so far (getrusage; kilobytes on Linux), as `khost run` records it."""
    try:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    except Exception:
        return None


def summarise(rows, metric, target, target_is_max):
    """kh_record_summarise: mean over all epochs, median excluding the first (when more than one), the
    metric at the last epoch, the elapsed time when the target was first met."""
    if not rows:
        return None, None, None, None
    mean = sum(r["epoch_s"] for r in rows) / len(rows)
    t = sorted(r["epoch_s"] for r in (rows[1:] if len(rows) > 1 else rows))
    n = len(t)
    median = t[n // 2] if n % 2 else 0.5 * (t[n // 2 - 1] + t[n // 2])
    key = "loss" if metric == "loss" else "val_acc"
    value = rows[-1].get(key)
    ttt = None
    if target:
        for r in rows:
            m = r.get(key)
            if m is None or (isinstance(m, float) and math.isnan(m)):
                continue
            if (m <= target) if target_is_max else (m >= target):
                ttt = r["elapsed"]
                break
    return mean, median, value, ttt


def target_fields(rows, metric, target, target_is_max):
    """The record's "target", "epochs_to_target" and, when that is null, "target_note", as kh_record_summarise
    writes them: the first epoch whose metric reached the target, or why none did."""
    if not target:
        return {"target": None, "epochs_to_target": None, "target_note": "the task sets no target"}
    out = {"target": {"value": target, "reach": "at_most" if target_is_max else "at_least"}}
    if not rows:
        out.update(epochs_to_target=None, target_note="no epoch finished")
        return out
    key = "loss" if metric == "loss" else "val_acc"
    best = None
    for r in rows:
        m = r.get(key)
        if m is None or (isinstance(m, float) and math.isnan(m)):
            continue
        if best is None or (m < best if target_is_max else m > best):
            best = m
        if (m <= target) if target_is_max else (m >= target):
            out["epochs_to_target"] = r["epoch"]
            return out
    n = len(rows)
    if best is None:
        note = "%s has no value in any of %d epoch%s" % (key, n, "" if n == 1 else "s")
    else:
        note = "%s never reached its target %.6g (%s) in %d epoch%s; best %.6g" % (
            key, target, "at most" if target_is_max else "at least", n, "" if n == 1 else "s", best)
    out.update(epochs_to_target=None, target_note=note)
    return out


class Record:
    def __init__(self, args, train_samples, val_samples, data_info):
        t = TASKS[args.task]
        self.args = args
        self.rows = []
        self.step_s = []          # every timed training step's wall time (warm-up excluded)
        self.step_sync = "none"   # how a step's end was taken: "device" (synchronised) or "host-loss" (see loop.py)
        self.steps_per_epoch = 0
        self.repeat = getattr(args, "repeat", None) or dict(index=1, of=1, round=1, position=0, order_seed=0)
        self.env = {}
        self.status, self.reason = "error", ""
        self.head = {"khost_record": 2, "plugin": args.framework, "task": args.task, "device": getattr(args, "device", "cpu"),
                     "epochs_requested": args.epochs, "batch_size": args.batch_size, "seed": args.seed,
                     "train_samples": train_samples, "val_samples": val_samples, "metric": t["metric"]}
        self.target, self.target_is_max = t.get("target", 0), t.get("target_is_max", False)
        # the FP32 math, as khost records it: the cpu has no TF32
        asked, device = getattr(args, "math", "fp32"), self.head["device"]
        self.math = asked if device != "cpu" else "fp32"
        self.math_note = "" if self.math == asked else "%s ignored on %s: the cpu has no TF32, strict fp32" % (asked, device)
        e = self.env
        e["reference"] = "%s (tools/reference/%s/%s.py)" % (args.framework, "pytorch" if args.framework == "pytorch"
                                                           else "keras3", args.task)
        e["git_rev"] = git_rev()
        e["device_name"] = cpu_model()
        e["cpu_model"] = e["device_name"]
        e["cpu_isa"] = cpu_isa()
        e["cpu_threads"] = str(os.cpu_count())
        e["hostname"] = socket.gethostname()
        e["python"] = "%s %s" % (sys.executable, platform.python_version())
        e["dataset"] = data_info.get("dataset", "")
        e["data_dir"] = os.path.dirname(data_info.get("path", "")) if data_info.get("dataset") != "imdb" else \
            os.path.dirname(os.path.dirname(data_info.get("path", "")))
        e["dataset_bytes"] = str(data_info.get("dataset_bytes", ""))
        e["threads"] = str(args.threads)
        for k in ("limit_train", "limit_val"):  # as khost's cell records them: --resume compares them
            if getattr(args, k, 0):
                e[k] = str(getattr(args, k))
        for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS", "LD_PRELOAD", "GOMP_SPINCOUNT"):
            e[k] = os.environ.get(k, "(unset)")
        e["allocator"] = "jemalloc (LD_PRELOAD)" if "jemalloc" in os.environ.get("LD_PRELOAD", "") else "glibc malloc"
        e["run"] = "epochs %d, limit_train %d, limit_val %d, steps %s, warmup_steps %d%s" % (
            args.epochs, args.limit_train, args.limit_val, args.steps or "all", args.warmup_steps,
            ", variant " + args.variant if args.variant else "")
        e["started_at"] = now_iso()

    def set_env(self, k, v):
        if len(self.env) < 32 or k in self.env:  # khost's reader keeps at most 32 (KH_ENV_MAX)
            self.env[k[:31]] = str(v)[:255]

    def add_row(self, row):
        self.rows.append(row)

    def to_dict(self):
        mean, median, value, ttt = summarise(self.rows, self.head["metric"], self.target, self.target_is_max)
        d = dict(self.head)
        d.update(status=self.status, reason=self.reason)
        # khost's key order: identity, status, sizes, summary, epochs, environment
        out = {k: d[k] for k in ("khost_record", "plugin", "task", "device", "status", "reason", "epochs_requested",
                                 "batch_size", "seed", "train_samples", "val_samples", "metric")}
        out.update(metric_value=_num(value), mean_epoch_s=_num(mean), median_epoch_s=_num(median),
                   time_to_target_s=_num(ttt))
        out.update(target_fields(self.rows, self.head["metric"], self.target, self.target_is_max))
        out["math"] = self.math
        if self.math_note:
            out["math_note"] = self.math_note
        out["epochs"] = [{k: (r["epoch"] if k == "epoch" else _num(r.get(k))) for k in
                          ("epoch", "elapsed", "loss", "acc", "val_loss", "val_acc", "train_s", "val_s", "epoch_s")}
                         for r in self.rows]
        out["repeat"] = dict(self.repeat)
        out["samples"] = {"step_s": [_sample(v) for v in self.step_s],
                          "epoch_s": [_sample(r.get("epoch_s")) for r in self.rows],
                          "step_sync": self.step_sync, "warmup_steps": self.args.warmup_steps,
                          "steps_per_epoch": self.steps_per_epoch}
        out["peak_rss_bytes"] = peak_rss_bytes()
        out["environment"] = dict(self.env)
        return out

    def write(self, out_dir):
        """<out>/<task>/<plugin>__<device>.json and .csv, each atomically (temp file, fsync, rename)."""
        d = os.path.join(out_dir, self.head["task"])
        os.makedirs(d, exist_ok=True)
        base = os.path.join(d, "%s__%s" % (self.head["plugin"], self.head["device"]))
        if self.repeat["of"] > 1:  # khost's kh_record_rep_path
            base += ".rep%d" % self.repeat["index"]
        rec = self.to_dict()
        lines = ["epoch,elapsed,loss,acc,val_loss,val_acc,train_s,val_s"]
        for r in rec["epochs"]:
            lines.append(",".join([str(r["epoch"] - 1)] + ["" if r[k] is None else "%.6g" % r[k] for k in
                                                           ("elapsed", "loss", "acc", "val_loss", "val_acc", "train_s",
                                                            "val_s")]))
        for path, text in ((base + ".csv", "\n".join(lines) + "\n"), (base + ".json", json.dumps(rec, indent=2) + "\n")):
            tmp = "%s.tmp.%d" % (path, os.getpid())
            with open(tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        return base + ".json"


def log(args, *a):
    if not args.quiet:
        print(*a, file=sys.stderr if args.json else sys.stdout, flush=True)
