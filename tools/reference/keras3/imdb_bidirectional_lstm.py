#!/usr/bin/env python3
"""Keras 3 reference of khost's imdb_bidirectional_lstm (see ../pytorch/). Run with .venv-ref/bin/python."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("imdb_bidirectional_lstm", "keras")
from khref import keraskit as kk  # noqa: E402
from keras import layers, Sequential, Input  # noqa: E402


def build(data):
    return Sequential([Input((100,), dtype="int32"), layers.Embedding(20000, 128),
                       layers.Bidirectional(layers.LSTM(64)), layers.Dropout(0.5), layers.Dense(1, activation="sigmoid")])


sys.exit(kk.main(args, build, "binary_crossentropy", kk.tokens_prepare))
