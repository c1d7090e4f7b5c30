#!/usr/bin/python3
"""PyTorch reference of khost's mnist_cnn (Keras 2 examples/mnist_cnn.py): Conv2D(32, 3x3, relu, valid) ->
Conv2D(64, 3x3, relu) -> MaxPooling2D(2x2) -> Dropout(0.25) -> Flatten -> Dense(128, relu) -> Dropout(0.5) ->
Dense(10, softmax); Adadelta(lr 1.0, rho 0.95, eps 1e-7); batch 128; 12 epochs. NCHW inside torch."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("mnist_cnn", "pytorch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from khref import torchkit as tk  # noqa: E402

CHANNELS_LAST = args.variant == "channels_last"


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3)
        self.d1, self.d2 = nn.Linear(64 * 12 * 12, 128), nn.Linear(128, 10)
        self.drop1, self.drop2 = nn.Dropout(0.25), nn.Dropout(0.5)
        for c in (self.c1, self.c2):
            tk.init_conv(c)
        for d in (self.d1, self.d2):
            tk.init_dense(d)

    def forward(self, x):
        x = self.c1(x).relu_()
        x = self.c2(x).relu_()
        x = self.drop1(F.max_pool2d(x, 2))
        x = self.drop2(self.d1(x.flatten(1)).relu_())
        return self.d2(x)


def build(data):
    m = CNN()
    if CHANNELS_LAST:
        import torch
        m = m.to(memory_format=torch.channels_last)
    return m, list(m.parameters())


sys.exit(tk.main(args, build, tk.cce_from_logits, tk.images_prepare(channels_last=CHANNELS_LAST)))
