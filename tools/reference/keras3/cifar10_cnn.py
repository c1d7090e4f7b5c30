#!/usr/bin/env python3
"""Keras 3 reference of khost's cifar10_cnn (see ../pytorch/cifar10_cnn.py). Run with .venv-ref/bin/python."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("cifar10_cnn", "keras")
from khref import keraskit as kk  # noqa: E402
from keras import layers, Sequential, Input  # noqa: E402


def build(data):
    L = layers
    return Sequential([Input((32, 32, 3)),
                       L.Conv2D(32, 3, padding="same"), L.Activation("relu"), L.Conv2D(32, 3), L.Activation("relu"),
                       L.MaxPooling2D(2), L.Dropout(0.25),
                       L.Conv2D(64, 3, padding="same"), L.Activation("relu"), L.Conv2D(64, 3), L.Activation("relu"),
                       L.MaxPooling2D(2), L.Dropout(0.25),
                       L.Flatten(), L.Dense(512), L.Activation("relu"), L.Dropout(0.5),
                       L.Dense(10), L.Activation("softmax")])


AUG = dict(width_shift=0.1, height_shift=0.1, flip=True)
sys.exit(kk.main(args, build, "sparse_categorical_crossentropy", kk.images_prepare(augment=AUG)))
