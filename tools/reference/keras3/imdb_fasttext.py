#!/usr/bin/env python3
"""Keras 3 reference of khost's imdb_fasttext (see ../pytorch/). Run with .venv-ref/bin/python."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("imdb_fasttext", "keras")
from khref import keraskit as kk  # noqa: E402
from keras import layers, Sequential, Input  # noqa: E402


def build(data):
    return Sequential([Input((400,), dtype="int32"), layers.Embedding(data.info["max_features"], 50),
                       layers.GlobalAveragePooling1D(), layers.Dense(1, activation="sigmoid")])


sys.exit(kk.main(args, build, "binary_crossentropy", kk.tokens_prepare))
