#!/usr/bin/python3
"""tools/reference/selftest.py — checks of the PyTorch reference's Keras semantics (seconds, no data needed):
optimizer updates against Keras 2's formulas in float64 (with `decay`), the sparse-gradient Adam path
against the dense one, the clipped losses, the LSTM initialisation (Keras gate order, forget bias, frozen
second bias, orthogonal recurrent kernel), and the augmentation's shift/flip semantics.
Run: /usr/bin/python3 tools/reference/selftest.py    (prints 'N passed, M failed')"""
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import numpy as np  # noqa: E402
import torch  # noqa: E402

from khref import data as D  # noqa: E402
from khref import torchkit as tk  # noqa: E402

RESULTS = []


def check(name, ok, detail=""):
    RESULTS.append(ok)
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, (": " + detail) if detail else ""))


def keras2_reference(kind, w, grads, spec):
    """Keras 2's get_updates, literally, in float64."""
    w = w.astype(np.float64).copy()
    s1 = np.zeros_like(w)
    s2 = np.zeros_like(w)
    for it, g in enumerate(grads):
        g = g.astype(np.float64)
        lr = spec["lr"] * (1.0 / (1.0 + spec.get("decay", 0.0) * it))
        if kind == "rmsprop":
            s1 = spec["rho"] * s1 + (1 - spec["rho"]) * g * g
            w = w - lr * g / (np.sqrt(s1) + spec["eps"])
        elif kind == "adam":
            t = it + 1
            lr_t = lr * np.sqrt(1 - spec["beta_2"] ** t) / (1 - spec["beta_1"] ** t)
            s1 = spec["beta_1"] * s1 + (1 - spec["beta_1"]) * g
            s2 = spec["beta_2"] * s2 + (1 - spec["beta_2"]) * g * g
            w = w - lr_t * s1 / (np.sqrt(s2) + spec["eps"])
        elif kind == "adadelta":
            s1 = spec["rho"] * s1 + (1 - spec["rho"]) * g * g
            u = g * np.sqrt(s2 + spec["eps"]) / np.sqrt(s1 + spec["eps"])
            w = w - lr * u
            s2 = spec["rho"] * s2 + (1 - spec["rho"]) * u * u
    return w


def run_opt(spec, shapes, grads_per_step, sparse_rows=None):
    params = [torch.nn.Parameter(torch.from_numpy(np.ones(s, np.float32) * 0.5)) for s in shapes]
    opt = tk.KerasOptimizer(params, spec)
    for gs in grads_per_step:
        opt.zero_grad()
        for p, g in zip(params, gs):
            if sparse_rows is not None and p.dim() == 2:
                rows = torch.tensor(sparse_rows)
                vals = torch.from_numpy(g[sparse_rows])
                # duplicate rows as an Embedding backward produces them: halves that coalesce back
                p.grad = torch.sparse_coo_tensor(torch.cat([rows, rows]).view(1, -1), torch.cat([vals / 2, vals / 2]),
                                                 p.shape)
            else:
                p.grad = torch.from_numpy(g)
        opt.step()
    return [p.detach().numpy().astype(np.float64) for p in params]


def test_optimizers():
    rng = np.random.default_rng(0)
    specs = [dict(kind="rmsprop", lr=0.01, rho=0.9, eps=1e-7, decay=0.0),
             dict(kind="rmsprop", lr=1e-3, rho=0.9, eps=1e-7, decay=1e-2),
             dict(kind="adam", lr=1e-3, beta_1=0.9, beta_2=0.999, eps=1e-7, decay=0.0),
             dict(kind="adadelta", lr=1.0, rho=0.95, eps=1e-7, decay=0.0)]
    small, big = (7, 5), (tk.BIG // 64 + 3, 64)  # one tensor on the _foreach path, one on the per-tensor path
    for spec in specs:
        steps = [[rng.standard_normal(small).astype(np.float32), rng.standard_normal(big).astype(np.float32)]
                 for _ in range(4)]
        got = run_opt(spec, [small, big], steps)
        for k, shape in enumerate((small, big)):
            want = keras2_reference(spec["kind"], np.ones(shape) * 0.5, [s[k] for s in steps], spec)
            err = np.max(np.abs(got[k] - want) / (np.abs(want) + 1e-3))
            check("%s decay=%g %s tensor matches Keras 2's update" % (spec["kind"], spec["decay"],
                                                                       "small" if k == 0 else "large"),
                  err < 1e-5, "max rel err %.2e" % err)


def test_sparse_adam():
    rng = np.random.default_rng(1)
    spec = dict(kind="adam", lr=1e-3, beta_1=0.9, beta_2=0.999, eps=1e-7, decay=0.0)
    shape = (50000, 8)
    rows = sorted(rng.choice(shape[0], 300, replace=False).tolist())
    steps = []
    for _ in range(3):
        g = np.zeros(shape, np.float32)
        g[rows] = rng.standard_normal((len(rows), shape[1])).astype(np.float32)
        steps.append([g])
    dense = run_opt(spec, [shape], steps)[0]
    sparse = run_opt(spec, [shape], steps, sparse_rows=rows)[0]
    err = np.max(np.abs(dense - sparse))
    check("Adam on a row-sparse gradient == Adam on its dense form (untouched rows move too)", err < 1e-7,
          "max abs diff %.2e" % err)
    old = os.environ.get("KHREF_BLOCK_ROWS")
    os.environ["KHREF_BLOCK_ROWS"] = "4096"
    blocked = run_opt(spec, [shape], steps, sparse_rows=rows)[0]
    os.environ.pop("KHREF_BLOCK_ROWS") if old is None else os.environ.__setitem__("KHREF_BLOCK_ROWS", old)
    err = np.max(np.abs(dense - blocked))
    check("cache-blocked sparse Adam == dense Adam", err < 1e-7, "max abs diff %.2e" % err)


def test_losses():
    z = torch.tensor([[30.0, 0.0, -30.0], [0.1, 0.2, 0.3]], requires_grad=True)
    y = torch.tensor([0, 2])
    loss, correct = tk.cce_from_logits(z, y)
    p = torch.softmax(z.detach().double(), 1)
    want = -(np.log(np.clip(p[0, 0].item(), 1e-7, 1 - 1e-7)) + np.log(p[1, 2].item())) / 2
    check("categorical cross-entropy clips p to [1e-7, 1-1e-7]", abs(loss.item() - want) < 1e-6,
          "%.7f vs %.7f" % (loss.item(), want))
    loss.backward()
    check("no gradient through a clipped probability (sample 0)", float(z.grad[0].abs().max()) == 0.0)
    check("accuracy counts first argmax hits", int(correct) == 2)
    zb = torch.tensor([[40.0], [0.0], [-2.0]])
    lb, cb = tk.bce_from_logits(zb, torch.tensor([1, 1, 0]))
    q = np.clip(1 / (1 + np.exp(-np.array([40.0, 0.0, -2.0]))), 1e-7, 1 - 1e-7)
    want = -np.mean([np.log(q[0]), np.log(q[1]), np.log(1 - q[2])])
    check("binary cross-entropy with clipping", abs(lb.item() - want) < 1e-6, "%.7f vs %.7f" % (lb.item(), want))
    check("binary accuracy: p > 0.5 (p = 0.5 counts as 0)", int(cb) == 2)


def test_lstm_init():
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(10, 6, batch_first=True, bidirectional=True)
    tk.init_lstm(lstm)
    for sfx in ("", "_reverse"):
        b = getattr(lstm, "bias_ih_l0" + sfx).detach().numpy()
        check("forget-gate bias 1, others 0 (%s)" % (sfx or "forward"),
              np.all(b[6:12] == 1) and np.all(b[:6] == 0) and np.all(b[12:] == 0))
        bh = getattr(lstm, "bias_hh_l0" + sfx)
        check("second bias zero and frozen (%s)" % (sfx or "forward"),
              not bh.requires_grad and float(bh.abs().max()) == 0.0)
        u = getattr(lstm, "weight_hh_l0" + sfx).detach().double().numpy().T  # Keras's [u, 4u]
        check("recurrent kernel [u, 4u] has orthonormal rows (%s)" % (sfx or "forward"),
              np.allclose(u @ u.T, np.eye(6), atol=1e-5))
        w = getattr(lstm, "weight_ih_l0" + sfx).detach().numpy()
        lim = (6 / (10 + 24)) ** 0.5
        check("kernel glorot_uniform limit sqrt(6/(in+4u)) (%s)" % (sfx or "forward"), np.abs(w).max() <= lim)


def test_augment():
    x = np.arange(2 * 5 * 5 * 1, dtype=np.float32).reshape(2, 5, 5, 1)

    class Fixed:  # row offset +1, col offset -1 for image 0; no shift and a flip for image 1
        def __init__(self):
            self.calls = 0

        def uniform(self, lo, hi, n):
            self.calls += 1
            if self.calls == 1:
                return np.array([0.2, 0.0]) * hi / 0.1 if hi else np.zeros(n)
            if self.calls == 2:
                return np.array([-0.2, 0.0]) * hi / 0.1 if hi else np.zeros(n)
            return np.array([0.9, 0.1])

    out = D.augment_shift_flip(x, Fixed(), width_shift=0.1, height_shift=0.1, flip=True)
    # image 0: row_off = floor(0.2*5+0.5) = 1, col_off = floor(-0.2*5+0.5) = -1: out(r,c) = x(clamp(r+1), clamp(c-1))
    r = np.clip(np.arange(5) + 1, 0, 4)
    c = np.clip(np.arange(5) - 1, 0, 4)
    check("shift = x(clamp(r+row_off), clamp(c+col_off)), nearest fill", np.array_equal(out[0, :, :, 0], x[0, r][:, c, 0]))
    check("horizontal flip = x(r, W-1-c)", np.array_equal(out[1, :, :, 0], x[1, :, ::-1, 0]))


if __name__ == "__main__":
    torch.set_num_threads(1)
    test_optimizers()
    test_sparse_adam()
    test_losses()
    test_lstm_init()
    test_augment()
    passed = sum(RESULTS)
    print("%d passed, %d failed" % (passed, len(RESULTS) - passed))
    sys.exit(0 if passed == len(RESULTS) else 1)
