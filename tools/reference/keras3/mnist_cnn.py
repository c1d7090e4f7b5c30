#!/usr/bin/env python3
"""Keras 3 reference of khost's mnist_cnn (see ../pytorch/mnist_cnn.py). Run with .venv-ref/bin/python."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("mnist_cnn", "keras")
from khref import keraskit as kk  # noqa: E402
from keras import layers, Sequential, Input  # noqa: E402


def build(data):
    return Sequential([Input((28, 28, 1)), layers.Conv2D(32, 3, activation="relu"),
                       layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(2), layers.Dropout(0.25),
                       layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dropout(0.5),
                       layers.Dense(10, activation="softmax")])


sys.exit(kk.main(args, build, "sparse_categorical_crossentropy", kk.images_prepare()))
