"""khref.torchkit — PyTorch (CPU) with Keras 2 semantics: initialisers, losses with Keras's probability
clipping, the RMSprop / Adam / Adadelta update rules exactly as Keras 2 wrote them (epsilon placement,
bias correction, `decay`), and the Runner the shared loop drives. Import only after cli.setup()."""
import os
import sys
import platform

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from . import cli
from . import torchkit_env
from . import loop

EPS = 1e-7  # K.epsilon()
BIG = 1 << 20  # tensors of at least this many elements get the preallocated per-tensor optimizer path


# --- initialisers (Keras 2 defaults) -------------------------------------------------------------------------
def glorot_uniform_(w, fan_in, fan_out):
    lim = (6.0 / (fan_in + fan_out)) ** 0.5
    with torch.no_grad():
        return w.uniform_(-lim, lim)


def init_dense(lin):
    """Dense: kernel [in, out] glorot_uniform (torch keeps it as [out, in]: same fans), bias zeros."""
    glorot_uniform_(lin.weight, lin.in_features, lin.out_features)
    if lin.bias is not None:
        nn.init.zeros_(lin.bias)


def init_conv(conv):
    """Conv2D: kernel [kh, kw, cin, cout], fans kh*kw*cin and kh*kw*cout; bias zeros."""
    kh, kw = conv.kernel_size
    glorot_uniform_(conv.weight, kh * kw * conv.in_channels, kh * kw * conv.out_channels)
    nn.init.zeros_(conv.bias)


def keras_orthogonal(rows, cols, gen=None):
    """keras.initializers.Orthogonal(gain=1) for a (rows, cols) matrix: SVD of a standard normal sample,
    keeping u or v, whichever has the shape (no sign correction, as Keras 2)."""
    a = torch.randn(rows, cols, dtype=torch.float64, generator=gen)
    u, _, vh = torch.linalg.svd(a, full_matrices=False)
    q = u if u.shape == (rows, cols) else vh
    return q.to(torch.float32)


def init_lstm(lstm):
    """Keras 2 LSTM per direction: kernel [in, 4u] glorot_uniform, recurrent kernel [u, 4u] orthogonal,
    bias [4u] zeros with the forget gate's slice 1 (unit_forget_bias). Gate order i, f, c(g), o is the same in
    torch. torch's second bias (bias_hh) is held at zero and frozen, so the model has Keras's single bias."""
    u = lstm.hidden_size
    for sfx in [""] + (["_reverse"] if lstm.bidirectional else []):
        w_ih = getattr(lstm, "weight_ih_l0" + sfx)
        w_hh = getattr(lstm, "weight_hh_l0" + sfx)
        b_ih = getattr(lstm, "bias_ih_l0" + sfx)
        b_hh = getattr(lstm, "bias_hh_l0" + sfx)
        glorot_uniform_(w_ih, lstm.input_size, 4 * u)
        with torch.no_grad():
            w_hh.copy_(keras_orthogonal(u, 4 * u).t())  # torch stores [4u, u] = Keras's [u, 4u] transposed
            b_ih.zero_()
            b_ih[u:2 * u] = 1.0
            b_hh.zero_()
        b_hh.requires_grad_(False)


def init_embedding(emb):
    with torch.no_grad():
        emb.weight.uniform_(-0.05, 0.05)


# --- losses and accuracy (Keras 2, TensorFlow backend) ----------------------------------------------------------
def cce_from_logits(z, y):
    """categorical_crossentropy on softmax(z): p /= sum(p); clip to [eps, 1-eps]; -log p[true]. Returns the
    summed loss (mean for the gradient) and the number of first-argmax hits."""
    p = torch.softmax(z, dim=1)
    p = p / p.sum(dim=1, keepdim=True)
    pt = p.gather(1, y.view(-1, 1)).clamp(EPS, 1 - EPS)
    loss = -torch.log(pt).mean()
    correct = (z.argmax(dim=1) == y).sum()
    return loss, correct


def bce_from_logits(z, y):
    """binary_crossentropy on sigmoid(z): clip to [eps, 1-eps]; -(y log q + (1-y) log(1-q)); accuracy
    round(p) == y (p > 0.5)."""
    p = torch.sigmoid(z.view(-1))
    q = p.clamp(EPS, 1 - EPS)
    yf = y.to(q.dtype)
    loss = -(yf * torch.log(q) + (1 - yf) * torch.log(1 - q)).mean()
    correct = ((p > 0.5) == (y == 1)).sum()
    return loss, correct


# --- optimizers with Keras 2's update rules -----------------------------------------------------------------
class KerasOptimizer:
    """Keras 2 RMSprop / Adam / Adadelta. lr_t = lr / (1 + decay * iterations) (iterations = updates done).
      RMSprop:  a = rho a + (1-rho) g^2;  w -= lr g / (sqrt(a) + eps)
      Adam:     t = iterations + 1; lr_t = lr sqrt(1-b2^t) / (1-b1^t); m = b1 m + (1-b1) g;
                v = b2 v + (1-b2) g^2;  w -= lr_t m / (sqrt(v) + eps)
      Adadelta: a = rho a + (1-rho) g^2; u = g sqrt(d + eps) / sqrt(a + eps); w -= lr u; d = rho d + (1-rho) u^2
    Small tensors are updated together with torch._foreach_* kernels (no per-tensor Python overhead); tensors
    of BIG elements or more get the per-tensor path with a preallocated scratch buffer, so no step allocates
    (and page-faults) a table-sized temporary. A sparse gradient (nn.Embedding(sparse=True)) is applied
    exactly as Keras's dense update: moments decay everywhere, the touched rows get g added; the result is
    identical to materialising the dense gradient, without writing 240 MB of zeros every step."""

    def __init__(self, params, spec):
        self.spec = dict(spec)
        self.kind = spec["kind"]
        self.params = [p for p in params if p.requires_grad]
        self.iterations = 0
        z = torch.zeros_like
        self.s1 = [z(p) for p in self.params]  # RMSprop a / Adam m / Adadelta a
        self.s2 = [z(p) for p in self.params] if self.kind in ("adam", "adadelta") else [None] * len(self.params)
        self.scratch = [z(p) if p.numel() >= BIG else None for p in self.params]
        self.block_rows = int(os.environ.get("KHREF_BLOCK_ROWS", "0"))  # sparse Adam cache blocking (0: off)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def lr(self):
        lr = self.spec["lr"]
        if self.spec.get("decay", 0.0) > 0:
            lr = lr / (1.0 + self.spec["decay"] * self.iterations)
        return lr

    @torch.no_grad()
    def step(self):
        lr = self.lr()
        s = self.spec
        eps = s["eps"]
        for i, p in enumerate(self.params):  # a sparse gradient always takes the per-tensor path
            if p.grad is not None and p.grad.is_sparse and self.scratch[i] is None:
                self.scratch[i] = torch.zeros_like(p)
        small = [i for i, p in enumerate(self.params) if p.grad is not None and self.scratch[i] is None]
        big = [i for i, p in enumerate(self.params) if p.grad is not None and self.scratch[i] is not None]
        P = [self.params[i] for i in small]
        G = [self.params[i].grad for i in small]
        A = [self.s1[i] for i in small]
        if self.kind == "rmsprop":
            rho = s["rho"]
            if small:
                torch._foreach_mul_(A, rho)
                torch._foreach_addcmul_(A, G, G, 1 - rho)
                d = torch._foreach_sqrt(A)
                torch._foreach_add_(d, eps)
                torch._foreach_addcdiv_(P, G, d, -lr)
            for i in big:
                p, g, a, buf = self.params[i], self.params[i].grad, self.s1[i], self.scratch[i]
                self._need_dense(g)
                a.mul_(rho).addcmul_(g, g, value=1 - rho)
                torch.sqrt(a, out=buf)
                buf.add_(eps)
                p.addcdiv_(g, buf, value=-lr)
        elif self.kind == "adam":
            b1, b2 = s["beta_1"], s["beta_2"]
            t = self.iterations + 1
            lr_t = lr * (1.0 - b2 ** t) ** 0.5 / (1.0 - b1 ** t)
            V = [self.s2[i] for i in small]
            if small:
                torch._foreach_mul_(A, b1)
                torch._foreach_add_(A, G, alpha=1 - b1)
                torch._foreach_mul_(V, b2)
                torch._foreach_addcmul_(V, G, G, 1 - b2)
                d = torch._foreach_sqrt(V)
                torch._foreach_add_(d, eps)
                torch._foreach_addcdiv_(P, A, d, -lr_t)
            for i in big:
                p, g, m, v, buf = self.params[i], self.params[i].grad, self.s1[i], self.s2[i], self.scratch[i]
                if g.is_sparse and self.block_rows:
                    self._adam_sparse_blocked(p, g, m, v, buf, b1, b2, eps, lr_t)
                    continue
                if g.is_sparse:
                    g = g.coalesce()
                    rows, vals = g.indices()[0], g.values()
                    m.mul_(b1).index_add_(0, rows, vals, alpha=1 - b1)
                    v.mul_(b2).index_add_(0, rows, vals * vals, alpha=1 - b2)
                else:
                    m.mul_(b1).add_(g, alpha=1 - b1)
                    v.mul_(b2).addcmul_(g, g, value=1 - b2)
                torch.sqrt(v, out=buf)
                buf.add_(eps)
                p.addcdiv_(m, buf, value=-lr_t)
        elif self.kind == "adadelta":
            rho = s["rho"]
            D = [self.s2[i] for i in small]
            if small:
                torch._foreach_mul_(A, rho)
                torch._foreach_addcmul_(A, G, G, 1 - rho)
                u = torch._foreach_add(D, eps)
                torch._foreach_sqrt_(u)
                den = torch._foreach_add(A, eps)
                torch._foreach_sqrt_(den)
                torch._foreach_div_(u, den)
                torch._foreach_mul_(u, G)
                torch._foreach_add_(P, u, alpha=-lr)
                torch._foreach_mul_(D, rho)
                torch._foreach_addcmul_(D, u, u, 1 - rho)
            for i in big:
                p, g, a, dd, buf = self.params[i], self.params[i].grad, self.s1[i], self.s2[i], self.scratch[i]
                self._need_dense(g)
                a.mul_(rho).addcmul_(g, g, value=1 - rho)
                torch.add(dd, eps, out=buf)
                buf.sqrt_().mul_(g).div_(torch.sqrt(a + eps))  # one temporary: only mid-sized Dense kernels here
                p.add_(buf, alpha=-lr)
                dd.mul_(rho).addcmul_(buf, buf, value=1 - rho)
        else:
            raise ValueError(self.kind)
        self.iterations += 1

    def _adam_sparse_blocked(self, p, g, m, v, buf, b1, b2, eps, lr_t):
        """The same update, in the same order per element, done block of rows by block of rows so that m, v,
        p and the scratch of one block stay in cache across the five operations: each of m, v, p crosses
        the memory bus once per step instead of two to four times."""
        g = g.coalesce()
        rows, vals = g.indices()[0], g.values()
        vals2 = vals * vals
        R = self.block_rows
        n = p.shape[0]
        starts = torch.arange(0, n + R, R, dtype=rows.dtype, device=rows.device).clamp_(max=n)
        cut = torch.searchsorted(rows, starts).tolist()  # coalesced indices are sorted
        for k in range(len(starts) - 1):
            a, b = k * R, min((k + 1) * R, n)
            if a >= b:
                break
            mc, vc, pc, bc = m[a:b], v[a:b], p[a:b], buf[a:b]
            mc.mul_(b1)
            vc.mul_(b2)
            lo, hi = cut[k], cut[k + 1]
            if hi > lo:
                r = rows[lo:hi] - a
                mc.index_add_(0, r, vals[lo:hi], alpha=1 - b1)
                vc.index_add_(0, r, vals2[lo:hi], alpha=1 - b2)
            torch.sqrt(vc, out=bc)
            bc.add_(eps)
            pc.addcdiv_(mc, bc, value=-lr_t)

    @staticmethod
    def _need_dense(g):
        if g.is_sparse:
            raise NotImplementedError("sparse gradients are only supported with Adam")


# --- input conversion ------------------------------------------------------------------------------------------
U8_TO_F32 = np.arange(256, dtype=np.float32) / np.float32(255)  # x.astype('float32') / 255, correctly rounded


def images_prepare(flat=False, augment=None, channels_last=False):
    """uint8 NHWC batch -> float32 /255 tensor: (N, H*W*C) when flat (Keras's reshape(-1, 784)), else NCHW
    (torch's convolution layout; the Keras model is NHWC, which only permutes Flatten's order)."""
    from . import data as D

    def prep(x, train, rng):
        if augment and train:
            x = D.augment_shift_flip(x, rng, **augment)
        f = U8_TO_F32[x]
        if flat:
            return torch.from_numpy(f.reshape(len(f), -1))
        t = torch.from_numpy(np.ascontiguousarray(f.transpose(0, 3, 1, 2)))
        return t.contiguous(memory_format=torch.channels_last) if channels_last else t
    return prep


def tokens_prepare(x, train, rng):
    return torch.from_numpy(x.astype(np.int64))


# --- the runner -------------------------------------------------------------------------------------------------
class Runner:
    def __init__(self, model, loss, opt, device=None):
        self.model, self.loss, self.opt = model, loss, opt
        self.sums = {"train": [0.0, 0, 0], "eval": [0.0, 0, 0]}
        self.mode = None
        self.device = device  # None: cpu, inputs used as they come

    def _to(self, x, y):
        y = torch.from_numpy(y)
        if self.device is None:
            return x, y
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def _mode(self, train):
        if self.mode != train:
            self.model.train(train)
            self.mode = train

    def train_batch(self, x, y):
        self._mode(True)
        x, y = self._to(x, y)
        out = self.model(x)
        loss, correct = self.loss(out, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        s = self.sums["train"]
        s[0] += loss.item() * len(y)
        s[1] += int(correct)
        s[2] += len(y)

    @torch.no_grad()
    def eval_batch(self, x, y):
        self._mode(False)
        x, y = self._to(x, y)
        loss, correct = self.loss(self.model(x), y)
        s = self.sums["eval"]
        s[0] += loss.item() * len(y)
        s[1] += int(correct)
        s[2] += len(y)

    def take_metrics(self, phase):
        s = self.sums[phase]
        self.sums[phase] = [0.0, 0, 0]
        return tuple(s)

    def sync(self):
        if self.device is not None:
            torch.cuda.synchronize(self.device)


def environment(args, extra=None):
    e = {"framework_version": "torch %s" % torch.__version__,
         "torch_threads": "intra-op %d, inter-op %d" % (torch.get_num_threads(), torch.get_num_interop_threads()),
         "parallel_backend": "OpenMP (libgomp)" if "OpenMP" in torch.__config__.parallel_info() else "native",
         "blas": torchkit_env.libraries(torch),
         "numpy": np.__version__,
         "backend_env": "torch %s; mkldnn %s; %s" % (torch.__version__, torch.backends.mkldnn.is_available(),
                                                     platform.machine())}
    e.update(extra or {})
    return e


def main(args, build, loss, prepare, extra_env=None):
    """Load the data, build the model (build(data) -> (module, parameter list)), train, write the record."""
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.manual_seed(args.seed)
    device, extra = None, dict(extra_env or {})
    if args.device != "cpu":
        if not torch.cuda.is_available():
            print("error: --device %s: torch %s sees no CUDA device" % (args.device, torch.__version__), file=sys.stderr)
            return 5
        device = torch.device(args.device)
        # the FP32 math of khost's --math: fp32 is strict like khost's GPU paths (cuBLAS default math, cuDNN FMA
        # math; PyTorch's own default allows TF32 in cuDNN convolutions, so both flags are set either way)
        tf32 = getattr(args, "math", "fp32") == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        extra["device_name"] = torch.cuda.get_device_name(device)
        extra["backend_env"] = "torch %s; CUDA %s; cuDNN %s; TF32 %s" % (
            torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), "on" if tf32 else "off")

    def go():
        data = loop.load_task_data(args)
        model, params = build(data)
        if device is not None:
            model.to(device)  # moves the parameters in place: `params` stays valid
        opt = KerasOptimizer(params, cli.TASKS[args.task]["opt"])
        r = Runner(model, loss, opt, device)
        return loop.run(args, data, r, prepare, environment(args, extra))
    return loop.main_guard(go)
