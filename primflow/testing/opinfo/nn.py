"""pf.nn.functional: activations, normalisation and losses."""

from __future__ import annotations

import warnings

import numpy as np

import primflow as pf

from .base import OpInfo, _s, _unary_entry, distinct, fixed, with_params
from .references import _np_erf, _np_expit, _np_norm

F = pf.nn.functional

def _np_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _np_log_softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)  # exact: no cancellation near |x| >> 1
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _np_gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _np_erf(x / np.sqrt(2)))


def _np_softplus(x, beta=1.0):
    return np.logaddexp(0.0, beta * x) / beta


def _np_layer_norm(x, normalized_shape=None, weight=None, bias=None, epsilon=1e-5):
    k = 1 if normalized_shape is None or isinstance(normalized_shape, int) else len(
        normalized_shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mu) / np.sqrt(var + epsilon)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _np_rms_norm(x, normalized_shape=None, weight=None, epsilon=1e-6):
    k = 1 if normalized_shape is None or isinstance(normalized_shape, int) else len(
        normalized_shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    y = x / np.sqrt((x ** 2).mean(axis=axes, keepdims=True) + epsilon)
    return y if weight is None else y * weight


def _reduce(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction](loss)


def _np_cross_entropy(logits, label, weight=None, ignore_index=-100, reduction="mean",
                      soft_label=False, axis=-1, label_smoothing=0.0):
    logp = _np_log_softmax(logits, axis=axis)
    if soft_label:
        return _reduce(-np.sum(label * logp, axis=axis), reduction)
    axis = axis % logits.ndim
    lp = np.moveaxis(logp, axis, -1)
    label = label.reshape(lp.shape[:-1])
    valid = label != ignore_index
    safe = np.where(valid, label, 0)
    picked = np.take_along_axis(lp, safe[..., None], axis=-1)[..., 0]
    if label_smoothing:
        picked = (1 - label_smoothing) * picked + label_smoothing * lp.mean(axis=-1)
    w = valid.astype(np.float64)
    if weight is not None:
        w = w * weight[safe]
    loss = -picked * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def _np_nll_loss(logp, label, weight=None, ignore_index=-100, reduction="mean"):
    lp = np.moveaxis(logp, 1, -1)  # classes last
    valid = label != ignore_index
    safe = np.where(valid, label, 0)
    w = valid.astype(np.float64) * (1.0 if weight is None else weight[safe])
    loss = -np.take_along_axis(lp, safe[..., None], axis=-1)[..., 0] * w
    return loss.sum() / w.sum() if reduction == "mean" else _reduce(loss, reduction)


def _np_smooth_l1(x, y, reduction="mean", delta=1.0):
    d = np.abs(x - y)
    return _reduce(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def _without_warnings(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with its warnings silenced (an entry that tests a case the
    op warns about on purpose)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def _off_the_kinks(info, rng, shape, delta=1.0):
    """x and y whose differences stay away from the smooth L1 loss's kinks (0 and +-delta
    for the second derivative): half of them inside (-delta, delta), half outside."""
    x = info.make(rng, shape)
    size = rng.uniform(0.1, 0.7, size=shape) * delta
    size = np.where(rng.random(shape) < 0.5, size, size + 0.6 * delta + 0.3)
    return x, x + rng.choice([-1.0, 1.0], size=shape) * size



def _apart(info, rng, shape, gap=0.2):
    x = info.make(rng, shape)
    return x, x + rng.choice([-1.0, 1.0], size=shape) * rng.uniform(gap, 1.0, size=shape)


ENTRIES = [
    # ---- activations (pf.nn.functional) ----
    _unary_entry("relu", F.relu, lambda x: np.maximum(x, 0), "select", singularities=(0.0,)),
    _unary_entry("relu6", F.relu6, lambda x: np.clip(x, 0, 6), "select", domain=(-2.0, 8.0),
                 singularities=(0.0, 6.0)),
    OpInfo("leaky_relu", lambda x, **kw: F.leaky_relu(x, **kw),
           lambda x, negative_slope=0.01: np.where(x > 0, x, negative_slope * x),
           with_params([((2, 3), {}), ((4,), {"negative_slope": 0.2}), ((), {})]),
           singularities=(0.0,), prims=("select",), covers=("leaky_relu",)),
    OpInfo("elu", lambda x, **kw: F.elu(x, **kw),
           lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0))),
           with_params([((2, 3), {}), ((4,), {"alpha": 1.5}), ((), {})]),
           singularities=(0.0,), prims=("expm1",), covers=("elu",)),
    OpInfo("softplus", lambda x, **kw: F.softplus(x, **kw), _np_softplus,
           fixed(*[_s(lambda i, r, s=s: (i.make(r, s),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3), {}), ((4,), {"beta": 2.0}), ((), {})]],
                 _s(lambda i, r: (np.array([-800.0, -30.0, 30.0, 800.0]),), {},
                    desc="saturated, exp would overflow")),
           domain=(-4.0, 4.0), singularities=(0.0,), prims=("log1p",), covers=("softplus",),
           notes="max(z, 0) + log1p(exp(-|z|)) is smooth but built from kinks at 0"),
    _unary_entry("silu", F.silu, lambda x: x * _np_expit(x), "logistic",
                 covers=("silu", "swish")),
    OpInfo("gelu", lambda x, **kw: F.gelu(x, **kw), _np_gelu,
           with_params([((2, 3), {}), ((2, 3), {"approximate": True}), ((), {}),
                        ((4,), {"approximate": True})]),
           domain=(-3.0, 3.0), prims=("erf", "tanh"), covers=("gelu",)),
    _unary_entry("mish", F.mish, lambda x: x * np.tanh(_np_softplus(x)), "tanh",
                 singularities=(0.0,)),
    _unary_entry("softsign", F.softsign, lambda x: x / (1 + np.abs(x)), "abs",
                 singularities=(0.0,)),
    _unary_entry("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x), "tanh"),
    OpInfo("softmax", lambda x, **kw: F.softmax(x, **kw),
           lambda x, axis=-1: _np_softmax(x, axis=axis),
           fixed(*[_s(lambda i, r, s=s: (distinct(r, s, -3.0, 3.0),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3), {}), ((2, 3, 2), {"axis": 1}), ((4,), {"axis": 0}),
                                 ((2, 3), {"axis": 0})]],
                 _s(lambda i, r: (1000.0 + distinct(r, (2, 3)),), {}, desc="near 1000")),
           prims=("reduce_max", "exp", "reduce_sum", "div"), covers=("softmax",)),
    OpInfo("log_softmax", lambda x, **kw: F.log_softmax(x, **kw),
           lambda x, axis=-1: _np_log_softmax(x, axis=axis),
           fixed(*[_s(lambda i, r, s=s: (distinct(r, s, -3.0, 3.0),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3), {}), ((2, 3, 2), {"axis": 1}), ((4,), {"axis": 0})]],
                 _s(lambda i, r: (-1000.0 + distinct(r, (2, 3)),), {}, desc="near -1000")),
           prims=("reduce_max", "exp", "log", "sub"), covers=("log_softmax",)),

    # ---- normalisation ----
    OpInfo("layer_norm", lambda x, *wb, **kw: F.layer_norm(x, kw.pop("normalized_shape"),
                                                           *wb, **kw),
           lambda x, *wb, normalized_shape=None, **kw: _np_layer_norm(x, normalized_shape,
                                                                      *wb, **kw),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (3,)), i.make(r, (3,))),
                    {"normalized_shape": 3}, desc="weight and bias"),
                 _s(lambda i, r: (i.make(r, (2, 2, 3)), i.make(r, (2, 3))),
                    {"normalized_shape": [2, 3]}, desc="2-d normalized_shape, weight"),
                 _s(lambda i, r: (i.make(r, (3, 4)),), {"normalized_shape": 4})),
           prims=("rsqrt", "reduce_sum"), covers=("layer_norm",)),
    OpInfo("rms_norm", lambda x, *w, **kw: F.rms_norm(x, kw.pop("normalized_shape"), *w, **kw),
           lambda x, *w, normalized_shape=None, **kw: _np_rms_norm(x, normalized_shape, *w,
                                                                   **kw),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (3,))),
                    {"normalized_shape": 3}, desc="weight"),
                 _s(lambda i, r: (i.make(r, (2, 2, 3)),), {"normalized_shape": [2, 3]}),
                 _s(lambda i, r: (i.make(r, (4,)),), {"normalized_shape": 4,
                                                       "epsilon": 1e-3})),
           prims=("rsqrt",), covers=("rms_norm",)),
    OpInfo("normalize", lambda x, **kw: F.normalize(x, **kw),
           lambda x, p=2, axis=1, epsilon=1e-12: x / np.maximum(
               _np_norm(x, p, axis, keepdim=True), epsilon),
           with_params([((2, 3), {}), ((2, 3), {"p": 1, "axis": -1}),
                        ((3, 2), {"axis": 0})]),
           singularities=(0.0,), prims=("maximum", "div"), covers=("normalize",)),

    # ---- losses ----
    OpInfo("mse_loss", lambda x, y, **kw: F.mse_loss(x, y, **kw),
           lambda x, y, reduction="mean": _reduce((x - y) ** 2, reduction),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (2, 3))), {}),
                 _s(lambda i, r: (i.make(r, (4,)), i.make(r, (4,))), {"reduction": "sum"}),
                 _s(lambda i, r: (i.make(r, (2, 2)), i.make(r, (2, 2))),
                    {"reduction": "none"})),
           prims=("integer_pow",), covers=("mse_loss",)),
    OpInfo("l1_loss", lambda x, y, **kw: F.l1_loss(x, y, **kw),
           lambda x, y, reduction="mean": _reduce(np.abs(x - y), reduction),
           fixed(*[_s(lambda i, r, s=s: _apart(i, r, s), kw)
                   for s, kw in [((2, 3), {}), ((4,), {"reduction": "sum"}),
                                 ((2, 2), {"reduction": "none"})]]),
           prims=("abs",), covers=("l1_loss",)),
    OpInfo("mse_loss broadcast", lambda x, y, **kw: _without_warnings(F.mse_loss, x, y, **kw),
           lambda x, y, reduction="mean": _reduce((x - y) ** 2, reduction),
           fixed(_s(lambda i, r: (i.make(r, (3, 1)), i.make(r, (4,))), {"reduction": "none"}),
                 _s(lambda i, r: (i.make(r, (1,)), i.make(r, (1, 1))), {"reduction": "sum"})),
           prims=("integer_pow", "broadcast_in_dim"), covers=("mse_loss",)),
    OpInfo("smooth_l1_loss", lambda x, y, **kw: F.smooth_l1_loss(x, y, **kw), _np_smooth_l1,
           fixed(*[_s(lambda i, r, s=s: _off_the_kinks(i, r, s), kw)
                   for s, kw in [((2, 3), {}), ((4,), {"reduction": "sum"}),
                                 ((2, 2), {"reduction": "none", "delta": 0.5})]]),
           prims=("abs", "select"), covers=("smooth_l1_loss",)),
    OpInfo("binary_cross_entropy_with_logits",
           lambda x, y, **kw: F.binary_cross_entropy_with_logits(x, y, **kw),
           lambda x, y, reduction="mean": _reduce(np.logaddexp(0, x) - y * x, reduction),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), r.uniform(0.05, 0.95, (2, 3))), {}),
                 _s(lambda i, r: (i.make(r, (4,)), r.uniform(0, 1, (4,))),
                    {"reduction": "sum"}),
                 _s(lambda i, r: (i.make(r, (3,)), (r.random(3) < 0.5).astype(float)),
                    {"reduction": "none"}, diff=(0,)),
                 _s(lambda i, r: (np.array([-800.0, -40.0, 40.0, 800.0]),
                                  np.array([0.2, 1.0, 0.0, 0.7])), {"reduction": "none"},
                    desc="saturated logits")),
           singularities=(0.0,), domain=(-3.0, 3.0), prims=("log1p",),
           covers=("binary_cross_entropy_with_logits",)),
    OpInfo("cross_entropy", lambda x, *rest, **kw: F.cross_entropy(x, *rest, **kw),
           _np_cross_entropy,
           fixed(_s(lambda i, r: (distinct(r, (4, 3)), np.array([0, 2, 1, 2])), {},
                    desc="int labels, mean"),
                 _s(lambda i, r: (distinct(r, (3, 4)), np.array([[1], [3], [0]])),
                    {"reduction": "sum"}, desc="labels [N, 1], sum"),
                 _s(lambda i, r: (distinct(r, (3, 4)), _np_softmax(r.normal(size=(3, 4)),
                                                                       axis=1)),
                    {"soft_label": True}, desc="soft labels"),
                 _s(lambda i, r: (distinct(r, (4, 3)), np.array([0, 2, 1, 1]),
                                  r.uniform(0.5, 2.0, (3,))), {}, desc="class weights"),
                 _s(lambda i, r: (distinct(r, (4, 3)), np.array([0, -100, 1, 2])),
                    {"reduction": "none"}, desc="ignore_index"),
                 _s(lambda i, r: (distinct(r, (4, 3)), np.array([0, 2, 1, 2])),
                    {"label_smoothing": 0.1}, desc="label smoothing"),
                 _s(lambda i, r: (distinct(r, (2, 3, 2)), np.array([[0, 2], [1, 1]])),
                    {"axis": 1}, desc="axis=1"),
                 _s(lambda i, r: (1000.0 + distinct(r, (2, 3)), np.array([1, 0])), {},
                    desc="logits near 1000")),
           prims=("reduce_max", "exp", "log", "select", "iota"),
           covers=("cross_entropy",)),
    OpInfo("nll_loss", lambda x, *rest, **kw: F.nll_loss(x, *rest, **kw), _np_nll_loss,
           fixed(_s(lambda i, r: (i.make(r, (4, 3)), np.array([0, 2, 1, 2])), {}, diff=(0,),
                    desc="mean"),
                 _s(lambda i, r: (i.make(r, (4, 3)), np.array([0, 2, -100, 1]),
                                  r.uniform(0.5, 2.0, (3,))), {}, diff=(0, 2),
                    desc="class weights, ignore_index"),
                 _s(lambda i, r: (i.make(r, (2, 3, 2)), np.array([[0, 2], [1, 1]])),
                    {"reduction": "none"}, diff=(0,), desc="[N, C, d]"),
                 _s(lambda i, r: (i.make(r, (3, 4)), np.array([1, 3, 0])),
                    {"reduction": "sum", "ignore_index": 3}, diff=(0,), desc="sum")),
           prims=("select", "iota"), covers=("nll_loss",)),
]
