#!/usr/bin/python3
"""PyTorch reference of khost's mnist_mlp (Keras 2 examples/mnist_mlp.py): 784 -> Dense(512, relu) ->
Dropout(0.2) -> Dense(512, relu) -> Dropout(0.2) -> Dense(10, softmax); RMSprop(lr 0.001, rho 0.9, eps 1e-7);
categorical cross-entropy; batch 128; 20 epochs. Run with Debian's /usr/bin/python3 (python3-torch)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("mnist_mlp", "pytorch")
import torch.nn as nn  # noqa: E402

from khref import torchkit as tk  # noqa: E402


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1, self.d2, self.d3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)
        self.drop = nn.Dropout(0.2)
        for d in (self.d1, self.d2, self.d3):
            tk.init_dense(d)

    def forward(self, x):
        x = self.drop(self.d1(x).relu_())
        x = self.drop(self.d2(x).relu_())
        return self.d3(x)  # logits; the loss applies Keras's softmax + clipped cross-entropy


def build(data):
    m = MLP()
    return m, list(m.parameters())


sys.exit(tk.main(args, build, tk.cce_from_logits, tk.images_prepare(flat=True)))
