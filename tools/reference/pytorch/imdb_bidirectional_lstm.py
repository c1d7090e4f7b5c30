#!/usr/bin/python3
"""PyTorch reference of khost's imdb_bidirectional_lstm (Keras 2 examples/imdb_bidirectional_lstm.py):
Embedding(20000, 128) -> Bidirectional(LSTM(64)) (last states, concatenated forward then backward) ->
Dropout(0.5) -> Dense(1, sigmoid); Adam (lr 0.001, eps 1e-7); binary cross-entropy; batch 32; 4 epochs;
sequences cut/padded to 100 ('pre'). LSTM: recurrent activation sigmoid, as khost."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("imdb_bidirectional_lstm", "pytorch")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from khref import torchkit as tk  # noqa: E402

SPARSE = args.variant != "dense-embedding"


class BiLSTM(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.emb = nn.Embedding(vocab, 128, sparse=SPARSE)
        self.lstm = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(128, 1)
        tk.init_embedding(self.emb)
        tk.init_lstm(self.lstm)
        tk.init_dense(self.out)

    def forward(self, x):
        _, (h, _) = self.lstm(self.emb(x))
        h = torch.cat([h[0], h[1]], dim=1)  # forward's last state, then backward's (at t = 0)
        return self.out(self.drop(h))


def build(data):
    m = BiLSTM(20000)
    return m, [p for p in m.parameters() if p.requires_grad]


sys.exit(tk.main(args, build, tk.bce_from_logits, tk.tokens_prepare))
