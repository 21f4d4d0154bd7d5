"""Training Fourier neural operators the way the paper does: Adam with weight decay, the
learning rate halved every ``step_epochs`` (StepLR), mini-batches, the relative-L2 loss.

``train_operator(model, data, settings)`` returns an :class:`OperatorResult` with the test
relative L2 error (the mean over test samples of ``||u - u_ref|| / ||u_ref||``, the
paper's metric), the loss history and timings. The 2-D problem normalises inputs and
outputs pointwise (the paper's ``UnitGaussianNormalizer``); the model's output is decoded
before the loss, so the loss is always on the physical solution.

Example:
    >>> import primflow as pf
    >>> from primflow.science.neural_operators import FNO1D, OperatorSettings, train_operator
    >>> x = pf.randn([8, 16]); y = 2 * x
    >>> s = OperatorSettings(epochs=2, batch_size=4)
    >>> r = train_operator(FNO1D(modes=4, width=4), (x, y, x[:2], y[:2]), s, progress=False)
    >>> len(r.history["train"]), r.test_error > 0
    (2, True)
"""

from __future__ import annotations

import dataclasses
import math
import random as _random
import time

import primflow as pf
from primflow.core.dtypes import as_dtype

from ..threads import blas_threads
from .models import relative_l2_loss

__all__ = ["OperatorResult", "OperatorSettings", "UnitGaussianNormalizer", "train_operator"]


@dataclasses.dataclass
class OperatorSettings:
    """Training settings (the paper's: 500 epochs, batch 20, lr 1e-3 halved every 100
    epochs, weight decay 1e-4)."""

    epochs: int = 500
    batch_size: int = 20
    lr: float = 1e-3
    step_epochs: int = 100
    gamma: float = 0.5
    weight_decay: float = 1e-4
    normalize: bool = False
    seed: int = 0

    def replace(self, **changes):
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclasses.dataclass
class OperatorResult:
    """What :func:`train_operator` returns: ``test_error`` (mean relative L2 on the test
    set), ``history`` (``train``: per-epoch training loss, ``test``: per-epoch test error
    when evaluated), ``times`` (seconds), ``model`` and ``predictions`` (test, NumPy)."""

    test_error: float
    history: dict
    times: dict
    model: object
    predictions: object


class UnitGaussianNormalizer:
    """Pointwise ``(x - mean) / (std + eps)`` with the statistics of the training set
    (tensors ``[n, ...]``; the population standard deviation, as the FNO code's).

    Example:
        >>> import primflow as pf
        >>> from primflow.science.neural_operators import UnitGaussianNormalizer
        >>> n = UnitGaussianNormalizer(pf.to_tensor([[1.0, 2.0], [3.0, 6.0]], dtype="float64"))
        >>> [round(v, 3) for v in n.encode(pf.to_tensor([[3.0, 6.0]], dtype="float64")).tolist()[0]]
        [1.0, 1.0]
    """

    def __init__(self, x, eps=1e-5):
        self.mean = x.mean(axis=0)
        self.std = pf.std(x, axis=0, unbiased=False)
        self.eps = eps

    def encode(self, x):
        return (x - self.mean) / (self.std + self.eps)

    def decode_tensor(self, x):
        return x * (self.std + self.eps).astype(x.dtype) + self.mean.astype(x.dtype)


def _check_data(data):
    if len(data) != 4:
        raise ValueError("data must be (x_train, y_train, x_test, y_test)")
    arrays = [pf.to_tensor(a, dtype="float64") for a in data]
    for name, (x, y) in (("train", arrays[:2]), ("test", arrays[2:])):
        if x.shape != y.shape or x.shape[0] == 0:
            raise ValueError(f"{name} inputs {x.shape} and targets {y.shape} must be equal, "
                             f"non-empty shapes")
    return arrays


def train_operator(model, data, settings=None, *, progress=True, log=None, evaluate_every=0,
                   dtype="float32", threads=None):
    """Trains ``model`` on ``data = (x_train, y_train, x_test, y_test)`` (arrays or tensors
    ``[n, ...]``) and returns an :class:`OperatorResult` (its ``predictions``: NumPy).

    Args:
        settings: :class:`OperatorSettings` (default: the paper's).
        progress: print a line per epoch (through ``log``, default stderr) - or False.
        evaluate_every: epochs between test evaluations in the history (0: only at the end).
        dtype: the training dtype (``"float32"``, the paper's, or ``"float64"``).
        threads: BLAS threads while training (None: leave BLAS alone).
    """
    import sys

    settings = settings or OperatorSettings()
    if settings.epochs < 0 or settings.batch_size < 1 or not settings.lr > 0:
        raise ValueError(f"bad settings: epochs {settings.epochs}, batch size "
                         f"{settings.batch_size}, lr {settings.lr}")
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    x_train, y_train, x_test, y_test = _check_data(data)
    x_norm = UnitGaussianNormalizer(x_train) if settings.normalize else None
    y_norm = UnitGaussianNormalizer(y_train) if settings.normalize else None
    if x_norm is not None:
        x_train, x_test = x_norm.encode(x_train), x_norm.encode(x_test)
    model_dtype = model.parameters()[0].dtype
    dtype = as_dtype(dtype)
    if model_dtype != dtype:
        model.to(dtype=dtype)
    params = model.parameters()
    opt = pf.optimizer.Adam(learning_rate=settings.lr, parameters=params,
                            weight_decay=settings.weight_decay or None)

    def predict(xb):
        out = model(xb)
        return y_norm.decode_tensor(out) if y_norm is not None else out

    def loss_fn(xb, yb):
        return relative_l2_loss(predict(xb), yb)

    step = pf.jit(pf.value_and_grad(loss_fn, None, params))
    n = x_train.shape[0]
    x_train, y_train = x_train.astype(dtype), y_train.astype(dtype)
    history = {"train": [], "test": []}
    t0 = time.perf_counter()
    with blas_threads(threads):
        for epoch in range(settings.epochs):
            opt.set_lr(settings.lr * settings.gamma ** (epoch // settings.step_epochs))
            order = _permutation(n, settings.seed, epoch)
            total, count = 0.0, 0
            for start in range(0, n - settings.batch_size + 1, settings.batch_size):
                idx = order[start:start + settings.batch_size]
                xb = pf.index_select(x_train, idx, axis=0)
                yb = pf.index_select(y_train, idx, axis=0)
                loss, grads = step(xb, yb)
                for p, g in zip(params, grads):
                    p.grad = g
                opt.step()
                opt.clear_grad()
                value = float(loss)
                if not math.isfinite(value):
                    raise FloatingPointError(f"the training loss became {value} at epoch "
                                             f"{epoch + 1}; try a smaller lr")
                total += value * settings.batch_size
                count += settings.batch_size
            history["train"].append(total / max(count, 1))
            line = f"epoch {epoch + 1}/{settings.epochs} train rel. L2 {history['train'][-1]:.4f}"
            if evaluate_every and (epoch + 1) % evaluate_every == 0:
                err, _ = _evaluate(predict, x_test, y_test, dtype, settings.batch_size)
                history["test"].append([epoch + 1, err])
                line += f" test {err:.4f}"
            if progress:
                log(line + f" ({time.perf_counter() - t0:.0f} s)")
        train_time = time.perf_counter() - t0
        error, predictions = _evaluate(predict, x_test, y_test, dtype, settings.batch_size)
    return OperatorResult(test_error=error, history=history,
                          times={"train": train_time, "total": time.perf_counter() - t0},
                          model=model, predictions=predictions)


def _permutation(n, seed, epoch):
    """The order of the training samples in ``epoch`` (reproducible, global stream
    untouched)."""
    order = list(range(n))
    _random.Random(seed * 1000003 + epoch).shuffle(order)
    return pf.to_tensor(order, dtype="int64")


def _evaluate(predict, x, y, dtype, batch):
    errors, outs = [], []
    with pf.no_grad():
        for start in range(0, x.shape[0], batch):
            out = predict(x[start:start + batch].astype(dtype)).astype("float64")
            ref = y[start:start + batch]
            m = ref.shape[0]
            diff = pf.reshape(out - ref, [m, -1])
            refs = pf.reshape(ref, [m, -1])
            errors += (pf.sqrt((diff * diff).sum(axis=1)) /
                       pf.sqrt((refs * refs).sum(axis=1))).tolist()
            outs.append(out)
    return sum(errors) / len(errors), pf.concat(outs, axis=0).numpy()
