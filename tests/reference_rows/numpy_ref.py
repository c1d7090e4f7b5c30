#!/usr/bin/env python3
"""tests/reference_rows/numpy_ref.py FRAMEWORK TASK [ARGS...] — a stand-in reference framework for the
matrix tests: the real command line, data readers, training loop, timing and record writer of
tools/reference (khref), around a numpy softmax regression instead of PyTorch / Keras, so CI exercises
everything of a reference cell but the framework (which needs tools/reference/setup and the network)."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "tools", "reference", "lib"))
framework, task = sys.argv[1], sys.argv[2]
del sys.argv[1:3]
from khref import cli  # noqa: E402

args = cli.setup(task, framework)
import numpy as np  # noqa: E402
from khref import loop  # noqa: E402


class SoftmaxRunner:
    """One dense layer trained by plain SGD: enough to make the loss fall and the timing real."""

    def __init__(self, features, classes):
        self.w = np.zeros((features, classes), np.float32)
        self.sums = {"train": [0.0, 0, 0], "eval": [0.0, 0, 0]}

    def _step(self, x, y, phase, lr):
        x = x.reshape(len(x), -1)
        z = x @ self.w
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        s = self.sums[phase]
        s[0] += float(-np.log(np.clip(p[np.arange(len(y)), y], 1e-7, 1)).sum())
        s[1] += int((p.argmax(axis=1) == y).sum())
        s[2] += len(y)
        if lr:
            p[np.arange(len(y)), y] -= 1
            self.w -= lr * (x.T @ p) / len(y)

    def train_batch(self, x, y):
        self._step(x, y, "train", 0.5)

    def eval_batch(self, x, y):
        self._step(x, y, "eval", 0.0)

    def take_metrics(self, phase):
        s = self.sums[phase]
        self.sums[phase] = [0.0, 0, 0]
        return tuple(s)

    def sync(self):
        pass


def prepare(x, train, rng):
    return x.astype(np.float32) / np.float32(255)


def go():
    data = loop.load_task_data(args)
    return loop.run(args, data, SoftmaxRunner(28 * 28, 10), prepare,
                    {"framework_version": "numpy %s (test stand-in)" % np.__version__})


if task != "mnist_mlp":
    print("numpy_ref: only mnist_mlp", file=sys.stderr)
    sys.exit(6)
sys.exit(loop.main_guard(go))
