#!/usr/bin/env python3
"""Keras 3 reference of khost's lstm_text_generation (see ../pytorch/). The input is the script's one-hot
(N, 40, n_chars) float tensor. Run with .venv-ref/bin/python."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("lstm_text_generation", "keras")
import numpy as np  # noqa: E402

from khref import keraskit as kk  # noqa: E402
from keras import layers, Sequential, Input  # noqa: E402

EYE = []


def build(data):
    n = data.info["n_distinct"]
    EYE.append(np.eye(n, dtype=np.float32))
    return Sequential([Input((40, n)), layers.LSTM(128), layers.Dense(n, activation="softmax")])


def prepare(x, train, rng):
    return EYE[0][x]


sys.exit(kk.main(args, build, "sparse_categorical_crossentropy", prepare))
