#!/usr/bin/env python3
"""Keras 3 reference of khost's mnist_mlp (see ../pytorch/mnist_mlp.py). Run with .venv-ref/bin/python."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("mnist_mlp", "keras")
from khref import keraskit as kk  # noqa: E402
from keras import layers, Sequential, Input  # noqa: E402


def build(data):
    return Sequential([Input((784,)), layers.Dense(512, activation="relu"), layers.Dropout(0.2),
                       layers.Dense(512, activation="relu"), layers.Dropout(0.2), layers.Dense(10, activation="softmax")])


sys.exit(kk.main(args, build, "sparse_categorical_crossentropy", kk.images_prepare(flat=True)))
