"""khref.keraskit — Keras 3 (JAX, TensorFlow or PyTorch backend, CPU) with Keras 2 semantics where Keras 3 changed
them: RMSprop puts epsilon outside the square root again (Keras 3 moved it inside), `decay` becomes
InverseTimeDecay(lr, 1, decay) (lr / (1 + decay * iterations), Keras 2's rule). Adam and Adadelta are
Keras 2's update rules already; initialisers, clipping in the losses, inverted dropout and the LSTM's
sigmoid recurrent activation are Keras 3 defaults equal to what khost runs. Training uses Keras's own loop
(model.fit / model.evaluate over the epoch's batch stream), so Keras runs as its users run it.
Import only after cli.setup(); set KERAS_BACKEND before (the launcher does)."""
import os
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

from . import cli  # noqa: E402
from . import loop  # noqa: E402

EPS = 1e-7


class Keras2RMSprop(keras.optimizers.RMSprop):
    """Keras 2's RMSprop: a = rho a + (1-rho) g^2; w -= lr g / (sqrt(a) + eps)."""

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        g = ops.cast(gradient, variable.dtype)
        a = self._velocities[self._get_variable_index(variable)]
        self.assign(a, ops.add(ops.multiply(self.rho, a), ops.multiply(1 - self.rho, ops.square(g))))
        self.assign_sub(variable, ops.divide(ops.multiply(lr, g), ops.add(ops.sqrt(a), self.epsilon)))


def optimizer(spec):
    lr = spec["lr"]
    if spec.get("decay", 0.0) > 0:
        lr = keras.optimizers.schedules.InverseTimeDecay(lr, decay_steps=1, decay_rate=spec["decay"])
    if spec["kind"] == "rmsprop":
        return Keras2RMSprop(learning_rate=lr, rho=spec["rho"], epsilon=spec["eps"])
    if spec["kind"] == "adam":
        return keras.optimizers.Adam(learning_rate=lr, beta_1=spec["beta_1"], beta_2=spec["beta_2"],
                                     epsilon=spec["eps"])
    if spec["kind"] == "adadelta":
        return keras.optimizers.Adadelta(learning_rate=lr, rho=spec["rho"], epsilon=spec["eps"])
    raise ValueError(spec["kind"])


U8_TO_F32 = np.arange(256, dtype=np.float32) / np.float32(255)


def images_prepare(flat=False, augment=None):
    from . import data as D

    def prep(x, train, rng):
        if augment and train:
            x = D.augment_shift_flip(x, rng, **augment)
        f = U8_TO_F32[x]
        return f.reshape(len(f), -1) if flat else f  # NHWC, Keras's channels_last
    return prep


def tokens_prepare(x, train, rng):
    return x.astype(np.int32)


class StepEnds(keras.callbacks.Callback):
    """The end of every training step: the callback converts the step's loss to a Python float first, which
    waits until the backend has computed it (JAX and TensorFlow dispatch asynchronously)."""

    def __init__(self):
        super().__init__()
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs:
            float(logs["loss"])
        self.ends.append(time.perf_counter())


class Runner:
    """Drives Keras's own fit/evaluate loop with the shared loop's batch stream (one fit call per epoch)."""

    def __init__(self, model):
        self.model = model
        self.sums = {"train": (0.0, 0, 0), "eval": (0.0, 0, 0)}

    @staticmethod
    def _counted(stream, box):
        for x, y in stream:
            box[0] += len(y)
            yield x, y

    def train_epoch(self, stream, steps, timed=False):
        """One fit over the stream; with timed, returns each step's end (perf_counter) as StepEnds took it."""
        box = [0]
        cb = [StepEnds()] if timed else []
        h = self.model.fit(self._counted(stream, box), steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False,
                           callbacks=cb)
        n = box[0]
        self.sums["train"] = (h.history["loss"][-1] * n, round(h.history["accuracy"][-1] * n), n)
        return cb[0].ends if timed else None

    def eval_epoch(self, stream, steps):
        box = [0]
        r = self.model.evaluate(self._counted(stream, box), steps=steps, verbose=0, return_dict=True)
        n = box[0]
        self.sums["eval"] = (r["loss"] * n, round(r["accuracy"] * n), n)

    def take_metrics(self, phase):
        s = self.sums[phase]
        self.sums[phase] = (0.0, 0, 0)
        return s

    def sync(self):
        pass


def environment(args):
    b = keras.backend.backend()
    e = {"framework_version": "keras %s, %s backend" % (keras.__version__, b),
         "numpy": np.__version__}
    if b == "jax":
        import jax
        import jaxlib
        e["backend_env"] = "jax %s, jaxlib %s, devices %s" % (jax.__version__, jaxlib.__version__, jax.devices())
    elif b == "tensorflow":
        import tensorflow as tf
        e["backend_env"] = "tensorflow %s; intra-op %d, inter-op %d" % (
            tf.__version__, tf.config.threading.get_intra_op_parallelism_threads(),
            tf.config.threading.get_inter_op_parallelism_threads())
    elif b == "torch":
        import torch
        from . import torchkit_env
        e["backend_env"] = "torch %s; %s" % (torch.__version__, torchkit_env.libraries(torch))
    e["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "(unset)")
    if b == "tensorflow":
        e["TF_ENABLE_ONEDNN_OPTS"] = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "(unset: oneDNN on, TF's default on x86)")
    return e


def main(args, build, loss, prepare):
    """build(data) -> an uncompiled keras.Model; compiled here with the task's optimizer and loss."""
    args.framework = "keras3-" + keras.backend.backend()  # the record's plugin: keras3-jax
    keras.utils.set_random_seed(args.seed)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    elif keras.backend.backend() == "torch":
        import torch
        torch.set_num_threads(args.threads)

    def go():
        data = loop.load_task_data(args)
        model = build(data)
        model.compile(optimizer=optimizer(cli.TASKS[args.task]["opt"]), loss=loss, metrics=["accuracy"])
        return loop.run(args, data, Runner(model), prepare, environment(args))
    return loop.main_guard(go)
