#!/usr/bin/python3
"""PyTorch reference of khost's imdb_fasttext (Keras 2 examples/imdb_fasttext.py, ngram_range 2):
Embedding(max_features = 1210948, 50) -> GlobalAveragePooling1D -> Dense(1, sigmoid); Adam (lr 0.001,
eps 1e-7) updating the whole table densely every step, as Keras did; binary cross-entropy; batch 32; 5
epochs; sequences (words + appended bigram ids) cut/padded to 400 ('pre').
--variant: sparse (default: row-sparse gradient, dense Keras Adam over the table without materialising a
dense gradient), dense (nn.Embedding's dense gradient, a fresh 240 MB tensor each step), dense-keep (dense
gradient kept allocated between steps: zero_grad(set_to_none=False)), sparse-blocked (sparse, with the
Adam pass over the table done in cache-sized blocks of 4096 rows)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("imdb_fasttext", "pytorch")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from khref import torchkit as tk  # noqa: E402

VARIANT = args.variant or "sparse"
if VARIANT == "sparse-blocked":
    os.environ["KHREF_BLOCK_ROWS"] = "4096"
if VARIANT not in ("sparse", "dense", "dense-keep", "sparse-blocked"):
    sys.exit("imdb_fasttext: unknown --variant %s" % VARIANT)


class FastText(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, 50, sparse=VARIANT.startswith("sparse"))
        self.out = nn.Linear(50, 1)
        tk.init_embedding(self.emb)
        tk.init_dense(self.out)

    def forward(self, x):
        return self.out(self.emb(x).mean(dim=1))


class KeepGrad(tk.KerasOptimizer):
    def zero_grad(self):  # zero_grad(set_to_none=False): gradients stay allocated, backward accumulates into them
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()


if VARIANT == "dense-keep":
    tk.KerasOptimizer = KeepGrad


def build(data):
    m = FastText(data.info["max_features"])
    return m, list(m.parameters())


sys.exit(tk.main(args, build, tk.bce_from_logits, tk.tokens_prepare,
                 {"embedding_gradient": VARIANT}))
