#!/usr/bin/python3
"""PyTorch reference of khost's lstm_text_generation (Keras 2 examples/lstm_text_generation.py): the
Nietzsche text lower-cased, 40-character windows every 3 characters, one-hot (57 characters) -> LSTM(128) ->
Dense(57, softmax); RMSprop(lr 0.01, rho 0.9, eps 1e-7); categorical cross-entropy; batch 128; 10 epochs, no
validation. The one-hot input is a row lookup of an identity matrix (the same (N, 40, 57) float tensor).
After training, 400 characters are sampled at diversity 0.5 as the script did (not timed)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from khref import cli  # noqa: E402

args = cli.setup("lstm_text_generation", "pytorch")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from khref import torchkit as tk  # noqa: E402


class CharLSTM(nn.Module):
    def __init__(self, n_chars):
        super().__init__()
        self.register_buffer("eye", torch.eye(n_chars))
        self.lstm = nn.LSTM(n_chars, 128, batch_first=True)
        self.out = nn.Linear(128, n_chars)
        tk.init_lstm(self.lstm)
        tk.init_dense(self.out)

    def forward(self, x):
        _, (h, _) = self.lstm(self.eye[x])  # one_hot(x): (N, 40, n_chars)
        return self.out(h[0])


MODEL = []


def build(data):
    m = CharLSTM(data.info["n_distinct"])
    MODEL.append((m, data))
    return m, [p for p in m.parameters() if p.requires_grad]


def prepare(x, train, rng):
    return torch.from_numpy(x.astype(np.int64))


rc = tk.main(args, build, tk.cce_from_logits, prepare)
if rc == 0 and MODEL and not args.quiet and not args.json:
    m, data = MODEL[0]
    m.eval()
    text, alphabet = data.x_train.text, data.info["alphabet"]
    rng = np.random.default_rng(args.seed)
    start = int(rng.integers(0, len(text) - 40))
    window = [int(c) for c in text[start:start + 40]]
    out = "".join(alphabet[i] for i in window)
    print("\n----- diversity: 0.5\n----- Generating with seed: \"%s\"" % out)
    dev = next(m.parameters()).device
    with torch.no_grad():
        for _ in range(400):
            p = torch.softmax(m(torch.tensor([window], dtype=torch.long, device=dev)), dim=1)[0].double().cpu().numpy()
            w = np.log(np.maximum(p, 1e-300)) / 0.5
            w = np.exp(w - w.max())
            nxt = int(rng.choice(len(w), p=w / w.sum()))
            out += alphabet[nxt]
            window = window[1:] + [nxt]
    print(out)
sys.exit(rc)
