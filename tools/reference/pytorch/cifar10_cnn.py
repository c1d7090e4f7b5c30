#!/usr/bin/python3
"""PyTorch reference of khost's cifar10_cnn (Keras 2 examples/cifar10_cnn.py, data_augmentation=True):
Conv2D(32, same)+relu -> Conv2D(32, valid)+relu -> MaxPooling2D(2) -> Dropout(0.25) -> Conv2D(64, same)+relu ->
Conv2D(64, valid)+relu -> MaxPooling2D(2) -> Dropout(0.25) -> Flatten -> Dense(512)+relu -> Dropout(0.5) ->
Dense(10)+softmax; RMSprop(lr 1e-4, rho 0.9, eps 1e-7, decay 1e-6); batch 32; 1562 steps (49984 samples) per
epoch; augmentation: shifts up to 10% (nearest fill), horizontal flips. NCHW inside torch."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("cifar10_cnn", "pytorch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from khref import torchkit as tk  # noqa: E402

CHANNELS_LAST = args.variant == "channels_last"


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 32, 3, padding=1), nn.Conv2d(32, 32, 3)
        self.c3, self.c4 = nn.Conv2d(32, 64, 3, padding=1), nn.Conv2d(64, 64, 3)
        self.d1, self.d2 = nn.Linear(64 * 6 * 6, 512), nn.Linear(512, 10)
        self.drop1, self.drop2, self.drop3 = nn.Dropout(0.25), nn.Dropout(0.25), nn.Dropout(0.5)
        for c in (self.c1, self.c2, self.c3, self.c4):
            tk.init_conv(c)
        for d in (self.d1, self.d2):
            tk.init_dense(d)

    def forward(self, x):
        x = self.c2(self.c1(x).relu_()).relu_()
        x = self.drop1(F.max_pool2d(x, 2))
        x = self.c4(self.c3(x).relu_()).relu_()
        x = self.drop2(F.max_pool2d(x, 2))
        x = self.drop3(self.d1(x.flatten(1)).relu_())
        return self.d2(x)


def build(data):
    m = CNN()
    if CHANNELS_LAST:
        import torch
        m = m.to(memory_format=torch.channels_last)
    return m, list(m.parameters())


AUG = dict(width_shift=0.1, height_shift=0.1, flip=True)
sys.exit(tk.main(args, build, tk.cce_from_logits, tk.images_prepare(augment=AUG, channels_last=CHANNELS_LAST)))
