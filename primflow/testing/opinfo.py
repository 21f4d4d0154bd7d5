"""The OpInfo table: one entry per primitive and per public op, driving the generic tests.

Each ``OpInfo`` says how to call an op, what NumPy computes for it (float64), which
sample inputs to use (shapes with scalars, broadcasting pairs, several reduction axes,
params), where inputs must stay (``domain``; ``singularities`` are points samples are
pushed away from: kinks, ties, jumps, poles), how far to differentiate (``max_order``),
the tolerances, and the expected failures, kept in the entry with their reasons.

``kind`` says what the generic tests check:

* ``"diff"``: forward vs the reference, jvp vs finite differences, the dot-product test
  (vjp vs jvp), derivatives of orders 1..max_order (reverse over reverse, forward over
  reverse, forward over forward, reverse over forward) against one central difference, and
  vmap against a loop.
* ``"nondiff"``: step-like ops (floor, sign...): forward only, and the negative claim that
  asking for a derivative raises ``pf.NonDifferentiableError`` (tape and forward mode).
* ``"nograd"``: integer/bool results (comparisons, argmax, logic): forward only, and the
  result never requires grad even when the inputs do; its forward-mode tangent is zero.
* ``"creation"``: tensors made from params (full, iota, arange...): forward only, no graph.
* ``"random"``: random draws: determinism given the key/seed, a new key gives new draws,
  and basic moments/support (``stats``).

Sample inputs are float64 NumPy arrays. Float arrays are differentiated unless
``SampleInput.diff`` lists the differentiated positions; integer and bool arrays become
constant tensors; anything else (keys for indexing, axis lists...) goes through unchanged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import primflow as pf
from primflow import prims

F = pf.nn.functional


# ---- the entry types ------------------------------------------------------------------------

@dataclass(frozen=True)
class SampleInput:
    """One call: ``op(*args, **kwargs)``; ``diff`` = positions of args to differentiate."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    diff: tuple | None = None
    desc: str = ""

    def diff_indices(self) -> tuple:
        if self.diff is not None:
            return tuple(self.diff)
        return tuple(i for i, a in enumerate(self.args)
                     if isinstance(a, np.ndarray) and a.dtype.kind == "f")

    def bind(self, op):
        """``(fn, primals)``: ``fn(*tensors)`` calls ``op`` with the differentiated args
        replaced by ``tensors`` and the others as constant tensors (or as given)."""
        idx = self.diff_indices()
        consts = {i: _constant(a) for i, a in enumerate(self.args) if i not in idx}
        kwargs = self.kwargs

        def fn(*xs):
            it = iter(xs)
            args = [next(it) if i in idx else consts[i] for i in range(len(self.args))]
            return op(*args, **kwargs)

        return fn, [np.asarray(self.args[i], dtype=np.float64) for i in idx]

    def __repr__(self):
        shapes = ", ".join(str(np.shape(a)) if isinstance(a, np.ndarray) else repr(a)
                           for a in self.args)
        return f"SampleInput({self.desc or shapes}; {self.kwargs})"


def _constant(a):
    if isinstance(a, np.ndarray):
        return pf.to_tensor(a, dtype=str(a.dtype) if a.dtype.kind != "b" else "bool")
    return a


@dataclass(frozen=True)
class XFail:
    """An expected failure of one generic test (``orders`` restricts it to some orders)."""

    # "forward", "jvp", "vjp", "rev", "fwd_over_rev", "fwd", "rev_over_fwd", "vmap",
    # "claims" (negative claims of nondiff/nograd entries), "random"
    test: str
    reason: str
    orders: tuple = ()


@dataclass
class OpInfo:
    """Everything the generic tests need to know about one op. See the module docstring."""

    name: str
    op: Callable
    ref: Callable | None
    sample_inputs: Callable  # (info, rng) -> list[SampleInput]
    kind: str = "diff"
    domain: tuple = (-2.0, 2.0)
    singularities: tuple = ()
    margin: float = 0.2
    max_order: int = 4
    order_samples: int | None = None  # how many samples orders >= 2 use (None: all)
    tol: dict = field(default_factory=dict)  # overrides of check_grads.DEFAULT_TOL
    fd_eps: float = 1e-5
    xfails: tuple = ()
    prims: tuple = ()  # primitives this entry exercises (the coverage test checks they bind)
    covers: tuple = ()  # public op names this entry stands for
    stats: Callable | None = None  # kind == "random": (out, **kwargs) -> None or raise
    notes: str = ""
    jet_order: int | None = None  # caps the Taylor tests' orders (costly: decompositions)
    extras: tuple = ()  # optional extras the op itself needs (its tests skip without them)

    def samples(self, rng=None):
        rng = np.random.default_rng(_seed_of(self.name)) if rng is None else rng
        return self.sample_inputs(self, rng)

    def make(self, rng, shape, domain=None, singularities=None):
        """Uniform draws in ``domain`` at least ``margin`` away from ``singularities``."""
        lo, hi = self.domain if domain is None else domain
        x = np.asarray(rng.uniform(lo, hi, size=shape), dtype=np.float64)
        points = self.singularities if singularities is None else singularities
        return _push_away(x, points, self.margin, lo, hi)

    def xfail(self, test, order=None):
        for xf in self.xfails:
            if xf.test == test and (not xf.orders or order in xf.orders):
                return xf
        return None

    def runs_here(self):
        """Whether this install has the extras the op needs (``extras``)."""
        from .extras import has_extra

        return all(has_extra(extra) for extra in self.extras)

    def tolerance(self, key):
        from .check_grads import DEFAULT_TOL

        return self.tol.get(key, DEFAULT_TOL[key])


def _seed_of(name):
    return sum((i + 1) * ord(c) for i, c in enumerate(name)) % (2 ** 31)


def _push_away(x, points, margin, lo, hi):
    x = np.array(x, dtype=np.float64)
    for p in points:
        close = np.abs(x - p) < margin
        if np.any(close):
            up = p + margin + 0.5 * margin * (np.abs(x - p) / margin)
            down = p - margin - 0.5 * margin * (np.abs(x - p) / margin)
            pick_up = (x >= p) & (up <= hi) | (down < lo)
            x = np.where(close, np.where(pick_up, up, down), x)
    return x


def distinct(rng, shape, lo=-2.0, hi=2.0):
    """Values in [lo, hi] with pairwise gaps of at least (hi - lo) / (2 n): no ties."""
    n = int(np.prod(shape, dtype=np.int64))
    slots = (rng.permutation(n) + 0.5 + rng.uniform(-0.25, 0.25, size=n)) / n
    return np.asarray(lo + (hi - lo) * slots, dtype=np.float64).reshape(shape)


def _ints(rng, shape, lo, hi):
    return np.asarray(rng.integers(lo, hi, size=shape), dtype=np.int64)


# ---- sample generators ----------------------------------------------------------------------

def unary(*shapes, **kwargs):
    """One sample per shape, drawn in the entry's domain. Default: (2,3), 0-d, (4,), a
    0-size (0,2), and a non-contiguous (2,3) (the transpose of a (3,2) array)."""
    default = not shapes
    shapes = shapes or ((2, 3), (), (4,), (0, 2))

    def gen(info, rng):
        out = [SampleInput((info.make(rng, s),), dict(kwargs), desc=str(s)) for s in shapes]
        if default:
            out.append(SampleInput((info.make(rng, (3, 2)).T,), dict(kwargs),
                                   desc="(2, 3) non-contiguous"))
        return out

    return gen


def with_params(shape_params):
    """Samples of one input with per-sample kwargs: ``[(shape, kwargs), ...]``."""

    def gen(info, rng):
        return [SampleInput((info.make(rng, s),), dict(kw), desc=f"{s} {kw}")
                for s, kw in shape_params]

    return gen


BINARY_SHAPES = (((2, 3), (2, 3)), ((3, 1), (4,)), ((), (2, 3)), ((2, 3), ()),
                 ((0, 3), (1, 3)))


def binary(shapes=BINARY_SHAPES, y_domain=None, y_singularities=None):
    """Pairs (same shape, broadcasting (3,1)x(4,), scalar with array)."""

    def gen(info, rng):
        return [SampleInput((info.make(rng, a), info.make(rng, b, y_domain, y_singularities)),
                            desc=f"{a} x {b}") for a, b in shapes]

    return gen


def untied(shapes=BINARY_SHAPES):
    """Pairs for max/min-like ops: all values of x and y are distinct (no ties under any
    broadcast pairing), drawn in the entry's domain."""

    def gen(info, rng):
        out = []
        for a, b in shapes:
            na, nb = int(np.prod(a, dtype=np.int64)), int(np.prod(b, dtype=np.int64))
            vals = distinct(rng, (na + nb,), *info.domain)
            out.append(SampleInput((vals[:na].reshape(a), vals[na:].reshape(b)),
                                   desc=f"{a} x {b}"))
        return out

    return gen


def fixed(*samples):
    """Samples built by ``samples[i](info, rng) -> SampleInput``."""

    def gen(info, rng):
        return [s(info, rng) for s in samples]

    return gen


# ---- reference helpers ----------------------------------------------------------------------

def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % ndim for a in axes)) if ndim else ()


def _np_norm(x, p=2, axis=None, keepdim=False):
    axes = _axes(axis, x.ndim)
    a = np.abs(x)
    if p in ("fro", 2):
        out = np.sqrt(np.sum(a ** 2, axis=axes, keepdims=keepdim))
    elif p == 1:
        out = np.sum(a, axis=axes, keepdims=keepdim)
    elif p == np.inf:
        out = np.max(a, axis=axes, keepdims=keepdim)
    elif p == -np.inf:
        out = np.min(a, axis=axes, keepdims=keepdim)
    else:
        out = np.sum(a ** p, axis=axes, keepdims=keepdim) ** (1.0 / p)
    return out


# The references use NumPy and the standard library only, so the table runs on a bare install
# (NumPy is primflow's one hard dependency); tests/test_opinfo.py checks them against SciPy
# where it is installed.
_np_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np_expit(x):
    e = np.exp(-np.abs(x))  # never overflows
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _np_logsumexp(x, axis=None, keepdims=False):
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis)


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


def _np_dot_general(x, y, contracting, batch):
    (lc, rc), (lb, rb) = contracting, batch
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    xs = [next(letters) for _ in range(x.ndim)]
    ys = [next(letters) for _ in range(y.ndim)]
    for a, b in zip(lc + lb, rc + rb):
        ys[b] = xs[a]
    out = [xs[d] for d in lb]
    out += [xs[d] for d in range(x.ndim) if d not in lc and d not in lb]
    out += [ys[d] for d in range(y.ndim) if d not in rc and d not in rb]
    return np.einsum(f"{''.join(xs)},{''.join(ys)}->{''.join(out)}", x, y)


def _np_pad(x, value, config):
    shape, index = [], []
    for n, (lo, hi, interior) in zip(x.shape, config):
        shape.append(lo + hi + n + max(n - 1, 0) * interior)
        index.append(lo + np.arange(n) * (interior + 1))
    out = np.full(shape, float(value))
    out[np.ix_(*index)] = x
    return out


def _np_scatter_add(operand, indices, updates):
    out = np.array(operand, dtype=np.float64)
    k = indices.shape[-1]
    flat_idx = indices.reshape(-1, k)
    flat_upd = updates.reshape((flat_idx.shape[0],) + operand.shape[k:])
    for row, upd in zip(flat_idx, flat_upd):
        out[tuple(row)] += upd
    return out


def _np_setitem(x, value, key):
    out = np.array(x, dtype=np.float64)
    out[key] = value
    return out


def _pf_setitem(x, value, key):
    y = pf.multiply(x, 1.0)  # a non-leaf copy: leaves that need grad refuse in-place writes
    y[key] = value
    return y


def _seeded(fn, seed=1234):
    def op(*args, **kwargs):
        pf.seed(seed)
        return fn(*args, **kwargs)

    return op


# ---- random checks --------------------------------------------------------------------------

def _moments(mean, std, lo=-np.inf, hi=np.inf, n_sigma=5.0):
    def check(out, **kwargs):
        n = out.size
        assert out.min() >= lo and out.max() < hi, f"draws outside [{lo}, {hi})"
        m, s = float(out.mean()), float(out.std())
        assert abs(m - mean) < n_sigma * std / math.sqrt(n), f"mean {m}, expected {mean}"
        assert abs(s - std) < n_sigma * std / math.sqrt(n) * 2, f"std {s}, expected {std}"

    return check


def _randint_stats(out, low, high, shape, dtype="int64"):
    assert out.dtype == np.int64
    assert out.min() >= low and out.max() < high
    assert set(np.unique(out)) == set(range(low, high)), "some values never drawn"
    _moments((low + high - 1) / 2, math.sqrt(((high - low) ** 2 - 1) / 12))(out)


def _randperm_stats(out, n, dtype="int64"):
    assert sorted(out.tolist()) == list(range(n)), "not a permutation"
    assert out.tolist() != list(range(n)), "identity permutation (astronomically unlikely)"


def _dropout_stats(out, x, p, training=True):
    kept = out != 0
    frac = 1.0 - kept.mean()
    assert abs(frac - p) < 5 * math.sqrt(p * (1 - p) / out.size), f"dropped {frac}, p={p}"
    np.testing.assert_allclose(out[kept], (x / (1 - p))[kept], rtol=1e-12)


def _seeded_key(fn):
    """A random op as a function of an integer key: ``pf.seed(key)`` then ``fn``."""

    def op(key, **kwargs):
        pf.seed(key)
        return fn(**kwargs)

    return op


# ---- the table ------------------------------------------------------------------------------

def _unary_entry(name, op, ref, prim=None, covers=None, **kw):
    return OpInfo(name, op, ref, kw.pop("sample_inputs", unary()),
                  prims=(prim,) if prim else (), covers=covers if covers is not None else (
                      (name,)), **kw)


_STEPS = tuple(float(k) for k in range(-3, 4))
_HALVES = tuple(k + 0.5 for k in range(-3, 3))


def _s(args, kwargs=None, diff=None, desc=""):
    """A sample from a builder ``args(info, rng) -> tuple``."""

    def build(info, rng):
        return SampleInput(tuple(args(info, rng)), dict(kwargs or {}), diff, desc)

    return build


OP_DB: list = [
    # ---- elementwise unary primitives (through the public ops) ----
    _unary_entry("neg", pf.neg, np.negative, "neg", covers=("neg", "negative")),
    _unary_entry("exp", pf.exp, np.exp, "exp"),
    _unary_entry("log", pf.log, np.log, "log", domain=(0.3, 3.0)),
    _unary_entry("log1p", pf.log1p, np.log1p, "log1p", domain=(-0.6, 2.0)),
    _unary_entry("expm1", pf.expm1, np.expm1, "expm1"),
    _unary_entry("sin", pf.sin, np.sin, "sin", domain=(-3.0, 3.0)),
    _unary_entry("cos", pf.cos, np.cos, "cos", domain=(-3.0, 3.0)),
    _unary_entry("tanh", pf.tanh, np.tanh, "tanh"),
    _unary_entry("sqrt", pf.sqrt, np.sqrt, "sqrt", domain=(0.3, 3.0)),
    _unary_entry("rsqrt", pf.rsqrt, lambda x: 1 / np.sqrt(x), "rsqrt", domain=(0.3, 3.0)),
    _unary_entry("abs", pf.abs, np.abs, "abs", singularities=(0.0,)),
    _unary_entry("erf", pf.erf, _np_erf, "erf"),
    _unary_entry("erfc", pf.erfc, np.vectorize(math.erfc, otypes=[np.float64]), "erfc"),
    _unary_entry("logistic", pf.sigmoid, _np_expit, "logistic",
                 covers=("sigmoid",), domain=(-4.0, 4.0),
                 sample_inputs=lambda info, rng: unary()(info, rng) + [SampleInput(
                     (np.array([-800.0, -30.0, 30.0, 800.0]),), desc="saturated")]),
    OpInfo("integer_pow", lambda x, y: pf.pow(x, y), lambda x, y: np.power(x, float(y)),
           with_params([((2, 3), {"y": 3}), ((), {"y": 2}), ((4,), {"y": 0}),
                        ((3,), {"y": 1}), ((2, 2), {"y": 5})]),
           prims=("integer_pow",), covers=()),
    OpInfo("integer_pow_negative", lambda x, y: pf.pow(x, y),
           lambda x, y: np.power(x, float(y)),
           with_params([((2, 3), {"y": -2}), ((), {"y": -1}), ((3,), {"y": -3})]),
           domain=(-2.0, 2.0), singularities=(0.0,), margin=0.5, prims=("integer_pow",)),
    _unary_entry("square", pf.square, np.square, "integer_pow"),
    # step functions: not differentiable, asking for a derivative raises
    _unary_entry("sign", pf.sign, np.sign, "sign", kind="nondiff", singularities=(0.0,)),
    _unary_entry("floor", pf.floor, np.floor, "floor", kind="nondiff", domain=(-2.5, 2.5),
                 singularities=_STEPS, margin=0.05),
    _unary_entry("ceil", pf.ceil, np.ceil, "ceil", kind="nondiff", domain=(-2.5, 2.5),
                 singularities=_STEPS, margin=0.05),
    _unary_entry("round", pf.round, np.round, "round", kind="nondiff", domain=(-2.5, 2.5),
                 singularities=_HALVES, margin=0.05),

    # ---- elementwise binary primitives (with broadcasting through the public ops) ----
    OpInfo("add", pf.add, np.add, binary(), prims=("add",), covers=("add",)),
    OpInfo("sub", pf.subtract, np.subtract, binary(), prims=("sub",), covers=("subtract",)),
    OpInfo("mul", pf.multiply, np.multiply, binary(), prims=("mul",), covers=("multiply",)),
    OpInfo("div", pf.divide, np.divide,
           binary(y_domain=(-2.0, 2.0), y_singularities=(0.0,)), margin=0.5,
           prims=("div",), covers=("divide",)),
    OpInfo("pow", lambda x, y: pf.pow(x, y), lambda x, y: np.power(x, y),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (2, 3), (-2.0, 2.0))),
                    desc="same shape"),
                 _s(lambda i, r: (i.make(r, (3, 1)), i.make(r, (4,), (-2.0, 2.0))),
                    desc="(3,1) x (4,)"),
                 _s(lambda i, r: (i.make(r, (2, 3)),), {"y": 1.5}, desc="float exponent"),
                 _s(lambda i, r: (i.make(r, ()), i.make(r, (), (-2.0, 2.0))), desc="0-d")),
           domain=(0.5, 2.0), prims=("pow",), covers=("pow",)),
    OpInfo("maximum", pf.maximum, np.maximum, untied(), prims=("maximum",),
           covers=("maximum",)),
    OpInfo("minimum", pf.minimum, np.minimum, untied(), prims=("minimum",),
           covers=("minimum",)),
    OpInfo("atan2", pf.atan2, np.arctan2,
           # the branch cut is x = 0 with y < 0 and the pole is the origin: keep x off 0
           binary(y_domain=(-2.0, 2.0)), singularities=(0.0,), margin=0.3,
           prims=("atan2",), covers=("atan2",)),

    # ---- comparisons and logic: bool results, no gradient ----
    *[OpInfo(prim, op, ref, fixed(
        _s(lambda i, r: (r.integers(-1, 2, (2, 3)).astype(float),
                         r.integers(-1, 2, (2, 3)).astype(float)), desc="ties"),
        _s(lambda i, r: (r.integers(-1, 2, (3, 1)).astype(float),
                         r.integers(-1, 2, (4,)).astype(float)), desc="broadcast"),
        _s(lambda i, r: (i.make(r, ()), i.make(r, (3,))), desc="0-d")),
        kind="nograd", prims=(prim,), covers=(public,))
      for prim, public, op, ref in [
          ("eq", "equal", pf.equal, np.equal), ("ne", "not_equal", pf.not_equal, np.not_equal),
          ("lt", "less_than", pf.less_than, np.less),
          ("le", "less_equal", pf.less_equal, np.less_equal),
          ("gt", "greater_than", pf.greater_than, np.greater),
          ("ge", "greater_equal", pf.greater_equal, np.greater_equal)]],
    *[OpInfo(prim, op, ref, fixed(
        _s(lambda i, r: (r.random((2, 3)) < 0.5, r.random((2, 3)) < 0.5), desc="bool"),
        _s(lambda i, r: (r.random((3, 1)) < 0.5, r.random((4,)) < 0.5), desc="broadcast"),
        _s(lambda i, r: (r.integers(-1, 2, (2, 3)).astype(float),
                         r.integers(-1, 2, (2, 3)).astype(float)), desc="floats")),
        kind="nograd", prims=(prim,), covers=(prim,))
      for prim, op, ref in [("logical_and", pf.logical_and, np.logical_and),
                            ("logical_or", pf.logical_or, np.logical_or)]],
    OpInfo("logical_not", pf.logical_not, np.logical_not, fixed(
        _s(lambda i, r: (r.random((2, 3)) < 0.5,), desc="bool"),
        _s(lambda i, r: (r.integers(-1, 2, (4,)).astype(float),), desc="floats")),
        kind="nograd", prims=("logical_not",), covers=("logical_not",)),
    OpInfo("isnan", pf.isnan, np.isnan,
           fixed(_s(lambda i, r: (np.array([0.5, np.nan, np.inf, -np.inf, -1.0]),))),
           kind="nograd", prims=("ne",), covers=("isnan",)),
    OpInfo("isinf", pf.isinf, np.isinf,
           fixed(_s(lambda i, r: (np.array([0.5, np.nan, np.inf, -np.inf, -1.0]),))),
           kind="nograd", prims=("abs", "eq"), covers=("isinf",)),
    OpInfo("isfinite", pf.isfinite, np.isfinite,
           fixed(_s(lambda i, r: (np.array([0.5, np.nan, np.inf, -np.inf, -1.0]),))),
           kind="nograd", prims=("logical_and",), covers=("isfinite",)),
    OpInfo("where", lambda c, x, y: pf.where(c, x, y), np.where, fixed(
        _s(lambda i, r: (r.random((2, 3)) < 0.5, i.make(r, (2, 3)), i.make(r, (2, 3))),
           desc="same shape"),
        _s(lambda i, r: (r.random((3, 1)) < 0.5, i.make(r, (4,)), i.make(r, ())),
           desc="cond (3,1), x (4,), y ()"),
        _s(lambda i, r: (r.integers(0, 2, (3,)).astype(float), i.make(r, (3,)),
                         i.make(r, (3,))), diff=(1, 2), desc="float condition")),
           prims=("select",), covers=("where",)),
    OpInfo("convert_element_type",
           lambda x: prims.convert_element_type(x, dtype=pf.float64), lambda x: x,
           unary(), prims=("convert_element_type",), covers=()),
    OpInfo("astype", lambda x, dtype: pf.astype(x, dtype),
           lambda x, dtype: x.astype(dtype),
           with_params([((2, 3), {"dtype": "int64"}), ((4,), {"dtype": "bool"}),
                        ((), {"dtype": "int32"})]),
           domain=(-3.0, 3.0), kind="nograd", prims=("convert_element_type",),
           covers=("astype",)),

    # ---- reductions ----
    OpInfo("reduce_sum", lambda x, **kw: pf.sum(x, **kw), lambda x, axis=None, keepdim=False:
           np.sum(x, axis=_axes(axis, x.ndim), keepdims=keepdim),
           with_params([((2, 3, 2), {"axis": (0, 2)}), ((2, 3), {}),
                        ((2, 3), {"axis": -1, "keepdim": True}), ((), {}),
                        ((2, 3, 2), {"axis": [1], "keepdim": True})]),
           prims=("reduce_sum",), covers=("sum",)),
    OpInfo("reduce_max", lambda x, **kw: pf.max(x, **kw), lambda x, axis=None, keepdim=False:
           np.max(x, axis=_axes(axis, x.ndim), keepdims=keepdim),
           fixed(*[_s(lambda i, r, s=s: (distinct(r, s),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3, 2), {"axis": (0, 2)}), ((2, 3), {}),
                                 ((2, 3), {"axis": 1, "keepdim": True}), ((), {})]]),
           prims=("reduce_max",), covers=("max", "amax")),
    OpInfo("reduce_min", lambda x, **kw: pf.min(x, **kw), lambda x, axis=None, keepdim=False:
           np.min(x, axis=_axes(axis, x.ndim), keepdims=keepdim),
           fixed(*[_s(lambda i, r, s=s: (distinct(r, s),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3, 2), {"axis": (0, 2)}), ((2, 3), {}),
                                 ((2, 3), {"axis": 0, "keepdim": True})]]),
           prims=("reduce_min",), covers=("min", "amin")),
    OpInfo("argmax", lambda x, **kw: pf.argmax(x, **kw),
           lambda x, axis=None, keepdim=False: np.argmax(x, axis=axis, keepdims=keepdim),
           fixed(*[_s(lambda i, r, s=s: (distinct(r, s),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3), {"axis": 1}), ((2, 3), {}),
                                 ((2, 3, 2), {"axis": 0, "keepdim": True})]]),
           kind="nograd", prims=("argmax",), covers=("argmax",)),
    OpInfo("argmin", lambda x, **kw: pf.argmin(x, **kw),
           lambda x, axis=None, keepdim=False: np.argmin(x, axis=axis, keepdims=keepdim),
           fixed(*[_s(lambda i, r, s=s: (distinct(r, s),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3), {"axis": 0}), ((4,), {})]]),
           kind="nograd", prims=("argmin",), covers=("argmin",)),
    OpInfo("all", lambda x, **kw: pf.all(x, **kw),
           lambda x, axis=None, keepdim=False: np.all(x, axis=axis, keepdims=keepdim),
           fixed(_s(lambda i, r: (r.random((3, 4)) < 0.8,), {"axis": 1}),
                 _s(lambda i, r: (r.integers(0, 2, (2, 3)).astype(float),), {}),
                 _s(lambda i, r: (r.random((2, 3)) < 0.9,), {"axis": 0, "keepdim": True})),
           kind="nograd", prims=("reduce_min",), covers=("all",)),
    OpInfo("any", lambda x, **kw: pf.any(x, **kw),
           lambda x, axis=None, keepdim=False: np.any(x, axis=axis, keepdims=keepdim),
           fixed(_s(lambda i, r: (r.random((3, 4)) < 0.2,), {"axis": 1}),
                 _s(lambda i, r: (r.integers(0, 2, (2, 3)).astype(float),), {})),
           kind="nograd", prims=("reduce_max",), covers=("any",)),
    OpInfo("cumsum", lambda x, **kw: pf.cumsum(x, **kw),
           lambda x, axis=None: np.cumsum(x, axis=axis),
           with_params([((2, 3), {"axis": 1}), ((2, 3), {}), ((3, 2), {"axis": 0}),
                        ((4,), {"axis": -1})]),
           prims=("cumsum",), covers=("cumsum",)),
    OpInfo("cumsum_reverse", lambda x, axis: prims.cumsum(x, axis=axis, reverse=True),
           lambda x, axis: np.flip(np.cumsum(np.flip(x, axis), axis=axis), axis),
           with_params([((2, 3), {"axis": 1}), ((3, 2), {"axis": 0})]), prims=("cumsum",)),

    # ---- shape primitives ----
    OpInfo("reshape", lambda x, shape: pf.reshape(x, shape),
           lambda x, shape: np.reshape(x, [x.shape[i] if s == 0 else s
                                           for i, s in enumerate(shape)]),
           with_params([((2, 3), {"shape": [3, 2]}), ((2, 3, 2), {"shape": [0, -1]}),
                        ((), {"shape": [1, 1]}), ((6,), {"shape": [2, 1, 3]})]),
           prims=("reshape",), covers=("reshape", "view")),
    OpInfo("broadcast_in_dim",
           lambda x, **p: prims.broadcast_in_dim(x, **p),
           lambda x, shape, broadcast_dimensions: np.broadcast_to(
               x.reshape([x.shape[broadcast_dimensions.index(d)] if d in broadcast_dimensions
                          else 1 for d in range(len(shape))]), shape),
           with_params([((3,), {"shape": (2, 3), "broadcast_dimensions": (1,)}),
                        ((3, 1), {"shape": (3, 2, 4), "broadcast_dimensions": (0, 2)}),
                        ((), {"shape": (2, 2), "broadcast_dimensions": ()}),
                        ((2,), {"shape": (2, 3), "broadcast_dimensions": (0,)})]),
           prims=("broadcast_in_dim",), covers=()),
    OpInfo("expand", lambda x, shape: pf.expand(x, shape),
           lambda x, shape: np.broadcast_to(x, [x.shape[i - len(shape) + x.ndim] if s == -1
                                                else s for i, s in enumerate(shape)]),
           with_params([((3, 1), {"shape": [3, 4]}), ((3,), {"shape": [2, -1]}),
                        ((), {"shape": [2]})]),
           prims=("broadcast_in_dim",), covers=("expand",)),
    OpInfo("broadcast_tensors", lambda *xs: pf.broadcast_tensors(list(xs)),
           lambda *xs: list(np.broadcast_arrays(*xs)),
           binary(((((3, 1), (4,))), (((2, 3), ()))),),
           prims=("broadcast_in_dim",), covers=("broadcast_tensors",)),
    OpInfo("transpose", lambda x, perm: pf.transpose(x, perm),
           lambda x, perm: np.transpose(x, perm),
           with_params([((2, 3, 2), {"perm": [2, 0, 1]}), ((2, 3), {"perm": [1, 0]}),
                        ((2, 3, 2), {"perm": [0, 2, 1]})]),
           prims=("transpose",), covers=("transpose",)),
    OpInfo("t", pf.t, lambda x: x.T, unary((2, 3), (3,)), prims=("transpose",),
           covers=("t",)),
    OpInfo("moveaxis", lambda x, s, d: pf.moveaxis(x, s, d),
           lambda x, s, d: np.moveaxis(x, s, d),
           with_params([((2, 3, 2), {"s": 0, "d": -1}), ((2, 3, 2), {"s": [0, 1], "d": [2, 0]})]),
           prims=("transpose",), covers=("moveaxis",)),
    OpInfo("slice", lambda x, **p: prims.slice(x, **p),
           lambda x, start, limit, strides: x[tuple(
               slice(s, e, st) for s, e, st in zip(start, limit, strides))],
           with_params([((4, 5), {"start": (1, 0), "limit": (4, 5), "strides": (2, 2)}),
                        ((5,), {"start": (1,), "limit": (4,), "strides": (1,)}),
                        ((3, 4), {"start": (0, 1), "limit": (3, 4), "strides": (3, 2)})]),
           prims=("slice",), covers=()),
    OpInfo("pad", lambda x, v, config: prims.pad(x, v, config=config), _np_pad,
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, ())),
                    {"config": ((1, 0, 1), (0, 2, 0))}, desc="interior"),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, ())),
                    {"config": ((2, 1, 2),)}),
                 _s(lambda i, r: (i.make(r, (2, 2)), i.make(r, ())),
                    {"config": ((0, 0, 0), (1, 1, 0))})),
           prims=("pad",), covers=()),
    OpInfo("concatenate", lambda *xs, axis=0: pf.concat(list(xs), axis=axis),
           lambda *xs, axis=0: np.concatenate(xs, axis=axis),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (1, 3))), {"axis": 0}),
                 _s(lambda i, r: (i.make(r, (2, 1)), i.make(r, (2, 3)), i.make(r, (2, 2))),
                    {"axis": -1}),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, (2,))), {})),
           prims=("concatenate",), covers=("concat", "cat")),
    OpInfo("stack", lambda *xs, axis=0: pf.stack(list(xs), axis=axis),
           lambda *xs, axis=0: np.stack(xs, axis=axis),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (2, 3))), {"axis": 1}),
                 _s(lambda i, r: (i.make(r, ()), i.make(r, ()), i.make(r, ())), {}),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, (3,))), {"axis": -1})),
           prims=("concatenate",), covers=("stack",)),
    OpInfo("split", lambda x, sections, axis=0: pf.split(x, sections, axis),
           lambda x, sections, axis=0: np.split(
               x, sections if isinstance(sections, int) else np.cumsum(
                   [s if s != -1 else 0 for s in sections])[:-1], axis=axis),
           with_params([((4, 3), {"sections": 2}), ((2, 5), {"sections": [2, 3], "axis": 1})]),
           prims=("slice",), covers=("split",)),
    OpInfo("chunk", lambda x, chunks, axis=0: pf.chunk(x, chunks, axis),
           lambda x, chunks, axis=0: np.split(x, chunks, axis=axis),
           with_params([((2, 6), {"chunks": 3, "axis": 1})]), prims=("slice",),
           covers=("chunk",)),
    OpInfo("unbind", lambda x, axis=0: pf.unbind(x, axis),
           lambda x, axis=0: [np.take(x, i, axis=axis) for i in range(x.shape[axis])],
           with_params([((3, 2), {}), ((2, 3), {"axis": 1})]), prims=("slice",),
           covers=("unbind",)),
    OpInfo("squeeze", lambda x, **kw: pf.squeeze(x, **kw),
           lambda x, axis=None: np.squeeze(x, axis=axis),
           with_params([((1, 3, 1), {}), ((1, 3, 1), {"axis": 2}), ((1,), {})]),
           prims=("reshape",), covers=("squeeze",)),
    OpInfo("unsqueeze", lambda x, axis: pf.unsqueeze(x, axis),
           lambda x, axis: np.expand_dims(x, axis),
           with_params([((2, 3), {"axis": 1}), ((), {"axis": 0}),
                        ((3,), {"axis": [0, 2]})]),
           prims=("reshape",), covers=("unsqueeze",)),
    OpInfo("flatten", lambda x, **kw: pf.flatten(x, **kw),
           lambda x, start_axis=0, stop_axis=-1: x.reshape(
               x.shape[:start_axis] + (-1,) + x.shape[stop_axis % x.ndim + 1:]),
           with_params([((2, 3, 2), {}), ((2, 3, 2), {"start_axis": 1})]),
           prims=("reshape",), covers=("flatten",)),
    OpInfo("flip", lambda x, axis: pf.flip(x, axis), lambda x, axis: np.flip(x, axis),
           with_params([((2, 3), {"axis": 1}), ((2, 3), {"axis": [0, 1]}),
                        ((4,), {"axis": 0})]),
           prims=("gather",), covers=("flip",)),
    OpInfo("tile", lambda x, reps: pf.tile(x, reps), lambda x, reps: np.tile(x, reps),
           with_params([((2, 3), {"reps": [2, 1]}), ((3,), {"reps": [2, 2]}),
                        ((), {"reps": [3]})]),
           prims=("broadcast_in_dim",), covers=("tile",)),
    OpInfo("tril", lambda x, diagonal=0: pf.tril(x, diagonal),
           lambda x, diagonal=0: np.tril(x, diagonal),
           with_params([((3, 4), {}), ((3, 3), {"diagonal": -1}), ((2, 3, 3), {"diagonal": 1})]),
           prims=("select", "iota"), covers=("tril",)),
    OpInfo("triu", lambda x, diagonal=0: pf.triu(x, diagonal),
           lambda x, diagonal=0: np.triu(x, diagonal),
           with_params([((3, 4), {}), ((2, 3, 3), {"diagonal": -1})]),
           prims=("select",), covers=("triu",)),

    # ---- indexing ----
    OpInfo("gather", lambda x, idx: prims.gather(x, idx),
           lambda x, idx: x[tuple(idx[..., k] for k in range(idx.shape[-1]))],
           fixed(_s(lambda i, r: (i.make(r, (4, 3)), np.array([[2], [0], [2], [3], [2]])),
                    desc="repeated rows"),
                 _s(lambda i, r: (i.make(r, (3, 4, 2)), _ints(r, (2, 3, 2), 0, 3)),
                    desc="k=2 with batch (2,3)")),
           prims=("gather",), covers=()),
    OpInfo("scatter_add", lambda x, idx, upd: prims.scatter_add(x, idx, upd),
           _np_scatter_add,
           fixed(_s(lambda i, r: (i.make(r, (4, 3)), np.array([[2], [0], [2], [3], [2]]),
                                  i.make(r, (5, 3))), desc="repeated rows"),
                 _s(lambda i, r: (i.make(r, (3, 4)), np.array([[[0, 1], [2, 3]], [[0, 1],
                                                                                [1, 1]]]),
                                  i.make(r, (2, 2))), desc="k=2 with repeats")),
           prims=("scatter_add",), covers=()),
    OpInfo("index_select", lambda x, index, axis=0: pf.index_select(x, index, axis),
           lambda x, index, axis=0: np.take(x, index, axis=axis),
           fixed(_s(lambda i, r: (i.make(r, (4, 3)), np.array([3, 0, 3])), {"axis": 0}),
                 _s(lambda i, r: (i.make(r, (2, 3)), np.array([2, 1])), {"axis": 1})),
           prims=("gather",), covers=("index_select", "gather")),
    OpInfo("getitem", lambda x, key: x[key], lambda x, key: x[key],
           fixed(*[_s(lambda i, r, s=s: (i.make(r, s),), {"key": k}, desc=d) for s, k, d in [
               ((3, 4), (slice(1, None), slice(None, None, 2)), "basic slices"),
               ((3, 4), (slice(None, None, -1), 1), "negative step"),
               ((3, 4), np.array([2, 0, 2]), "int array with repeats"),
               ((3, 4), (slice(None), np.array([3, 1])), "slice and int array"),
               ((3, 4), np.array([[True, False, True, True], [False] * 4,
                                  [True, False, False, True]]), "bool mask"),
               ((2, 3, 4), (Ellipsis, None, slice(3, 0, -2)), "ellipsis, None, -step"),
               ((3, 4), (np.array([0, 2]), np.array([1, 3])), "two int arrays"),
               ((3, 4), -1, "negative int"),
               ((3, 4), np.array([True, False, True]), "bool on dim 0"),
               ((2, 3, 4), (1, slice(None), np.array([0, 0, 3])), "int then array")]]),
           prims=("slice", "gather"), covers=("getitem",)),
    OpInfo("setitem", _pf_setitem, _np_setitem,
           fixed(_s(lambda i, r: (i.make(r, (3, 4)), i.make(r, (4,))), {"key": 1}),
                 _s(lambda i, r: (i.make(r, (3, 4)), i.make(r, ())),
                    {"key": (slice(None), 2)}),
                 _s(lambda i, r: (i.make(r, (3, 4)), i.make(r, (2, 4))),
                    {"key": np.array([2, 0])})),
           prims=("scatter_add", "select"), covers=("setitem",)),

    # ---- linear algebra ----
    OpInfo("dot_general", lambda x, y, **p: prims.dot_general(x, y, **p),
           lambda x, y, contracting, batch: _np_dot_general(x, y, contracting, batch),
           fixed(*[_s(lambda i, r, a=a, b=b: (i.make(r, a), i.make(r, b)),
                      {"contracting": c, "batch": bt}, desc=f"{a} x {b} {c} {bt}")
                   for a, b, c, bt in [
                       ((2, 3), (3, 2), ((1,), (0,)), ((), ())),
                       ((2, 3, 2), (2, 2, 3), ((1,), (2,)), ((0,), (0,))),
                       ((3, 2), (2, 3), ((0,), (1,)), ((), ())),
                       ((2, 3), (4,), ((), ()), ((), ())),
                       ((3, 2, 2), (2, 3, 2), ((0, 2), (1, 0)), ((), ())),
                       ((2, 2, 3), (3, 2), ((2,), (0,)), ((1,), (1,))),
                       ((3,), (3,), ((0,), (0,)), ((), ()))]]),
           prims=("dot_general",), covers=()),
    OpInfo("matmul", lambda x, y, **kw: pf.matmul(x, y, **kw),
           lambda x, y, transpose_x=False, transpose_y=False: np.matmul(
               np.swapaxes(x, -1, -2) if transpose_x and x.ndim > 1 else x,
               np.swapaxes(y, -1, -2) if transpose_y and y.ndim > 1 else y),
           fixed(*[_s(lambda i, r, a=a, b=b: (i.make(r, a), i.make(r, b)), kw,
                      desc=f"{a} @ {b} {kw}")
                   for a, b, kw in [
                       ((2, 3), (3, 2), {}), ((2, 1, 2, 3), (3, 3, 2), {}),
                       ((3,), (3, 2), {}), ((2, 3), (3,), {}), ((3,), (3,), {}),
                       ((2, 2, 3), (3, 2), {}), ((3, 2), (2, 3), {"transpose_x": True,
                                                                  "transpose_y": True})]]),
           prims=("dot_general",), covers=("matmul", "mm", "bmm")),
    OpInfo("dot", pf.dot, lambda x, y: np.sum(x * y, axis=-1),
           binary((((3,), (3,)), ((2, 3), (2, 3)))), prims=("dot_general",), covers=("dot",)),
    OpInfo("inner", pf.inner, np.inner, binary((((2, 3), (4, 3)), ((3,), (3,)))),
           prims=("dot_general",), covers=("inner",)),
    OpInfo("outer", pf.outer, np.outer, binary((((3,), (2,)), ((2, 2), (3,)))),
           prims=("dot_general",), covers=("outer",)),
    OpInfo("linear", lambda x, w, b=None: F.linear(x, w, b),
           lambda x, w, b=None: x @ w + (0 if b is None else b),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (3, 2)), i.make(r, (2,)))),
                 _s(lambda i, r: (i.make(r, (2, 2, 3)), i.make(r, (3, 2)))),
                 _s(lambda i, r: (i.make(r, (3,)), i.make(r, (3, 2)), i.make(r, (2,))))),
           prims=("dot_general", "add"), covers=("linear",)),

    # ---- creation ----
    OpInfo("full", lambda **p: prims.full(**p), lambda shape, value, dtype: np.full(
        shape, value, dtype=dtype.name), fixed(
        _s(lambda i, r: (), {"shape": (2, 3), "value": 1.5, "dtype": pf.float64}),
        _s(lambda i, r: (), {"shape": (), "value": 3, "dtype": pf.int64})),
        kind="creation", prims=("full",), covers=()),
    OpInfo("iota", lambda **p: prims.iota(**p), lambda shape, dtype, dimension: np.broadcast_to(
        np.arange(shape[dimension]).reshape([-1 if d == dimension else 1
                                            for d in range(len(shape))]), shape).astype(
        dtype.name), fixed(
        _s(lambda i, r: (), {"shape": (2, 3), "dtype": pf.int64, "dimension": 1}),
        _s(lambda i, r: (), {"shape": (4, 2), "dtype": pf.float64, "dimension": 0})),
        kind="creation", prims=("iota",), covers=()),
    OpInfo("pf.full", lambda **kw: pf.full(**kw),
           lambda shape, fill_value, dtype=None: np.full(shape, fill_value, dtype=dtype),
           fixed(_s(lambda i, r: (), {"shape": [2, 2], "fill_value": 2.5,
                                      "dtype": "float64"}),
                 _s(lambda i, r: (), {"shape": [3], "fill_value": 7})),
           kind="creation", prims=("full",), covers=("full",)),
    *[OpInfo(name, lambda name=name, **kw: getattr(pf, name)(**kw),
             lambda shape, dtype, name=name: getattr(np, name if name != "empty" else "zeros")(
                 shape, dtype=dtype),
             fixed(_s(lambda i, r: (), {"shape": [2, 3], "dtype": "float64"}),
                   _s(lambda i, r: (), {"shape": [], "dtype": "int64"})),
             kind="creation", prims=("full",), covers=(name,))
      for name in ("zeros", "ones", "empty")],
    *[OpInfo(name, lambda x, name=name, **kw: getattr(pf, name)(x, **kw), ref,
             fixed(_s(lambda i, r: (i.make(r, (2, 3)),), kw1),
                   _s(lambda i, r: (i.make(r, (3,)),), kw2)),
             kind="creation", prims=("full",), covers=(name,))
      for name, ref, kw1, kw2 in [
          ("zeros_like", lambda x, dtype=None: np.zeros_like(x, dtype=dtype), {},
           {"dtype": "int64"}),
          ("ones_like", lambda x, dtype=None: np.ones_like(x, dtype=dtype), {},
           {"dtype": "float64"}),
          ("full_like", lambda x, fill_value, dtype=None: np.full_like(
              x, fill_value, dtype=dtype), {"fill_value": 3}, {"fill_value": -2.0,
                                                               "dtype": "float64"})]],
    OpInfo("to_tensor", lambda x: pf.to_tensor(x), lambda x: x, unary((2, 3), ()),
           kind="creation", covers=("to_tensor", "tensor")),
    OpInfo("arange", lambda **kw: pf.arange(**kw),
           lambda start=0, end=None, step=1, dtype=None: np.arange(start, end, step,
                                                                   dtype=dtype),
           fixed(_s(lambda i, r: (), {"start": 5}),
                 _s(lambda i, r: (), {"start": 1.0, "end": 2.0, "step": 0.25,
                                      "dtype": "float64"}),
                 _s(lambda i, r: (), {"start": 5, "end": -1, "step": -2})),
           kind="creation", prims=("iota",), covers=("arange",)),
    OpInfo("linspace", lambda **kw: pf.linspace(**kw),
           lambda start, stop, num, dtype=None: np.linspace(start, stop, num),
           fixed(_s(lambda i, r: (), {"start": -1.0, "stop": 2.0, "num": 7, "dtype": "float64"}),
                 _s(lambda i, r: (), {"start": 0, "stop": 1, "num": 1, "dtype": "float64"})),
           kind="creation", prims=("iota",), covers=("linspace",)),
    OpInfo("eye", lambda **kw: pf.eye(**kw),
           lambda num_rows, num_columns=None, dtype=None: np.eye(num_rows, num_columns),
           fixed(_s(lambda i, r: (), {"num_rows": 3, "dtype": "float64"}),
                 _s(lambda i, r: (), {"num_rows": 2, "num_columns": 4, "dtype": "float64"})),
           kind="creation", prims=("iota",), covers=("eye",)),

    # ---- random: determinism given the key/seed and moments ----
    OpInfo("random_uniform", lambda key, **p: prims.random_uniform(key=key, **p), None,
           fixed(_s(lambda i, r: (), {"shape": (20000,), "dtype": pf.float64})),
           kind="random", prims=("random_uniform",), covers=(),
           stats=lambda out, **kw: _moments(0.5, math.sqrt(1 / 12), 0.0, 1.0)(out)),
    OpInfo("random_normal", lambda key, **p: prims.random_normal(key=key, **p), None,
           fixed(_s(lambda i, r: (), {"shape": (20000,), "dtype": pf.float64})),
           kind="random", prims=("random_normal",), covers=(),
           stats=lambda out, **kw: _moments(0.0, 1.0)(out)),
]

OP_DB += [
    # ---- public random ops: pf.seed(key) makes them deterministic ----
    OpInfo("rand", _seeded_key(lambda **kw: pf.rand(**kw)), None,
           fixed(_s(lambda i, r: (), {"shape": [20000], "dtype": "float64"})),
           kind="random", prims=("random_uniform",), covers=("rand",),
           stats=lambda out, **kw: _moments(0.5, math.sqrt(1 / 12), 0.0, 1.0)(out)),
    OpInfo("randn", _seeded_key(lambda **kw: pf.randn(**kw)), None,
           fixed(_s(lambda i, r: (), {"shape": [20000], "dtype": "float64"})),
           kind="random", prims=("random_normal",), covers=("randn",),
           stats=lambda out, **kw: _moments(0.0, 1.0)(out)),
    OpInfo("uniform", _seeded_key(lambda **kw: pf.uniform(**kw)), None,
           fixed(_s(lambda i, r: (), {"shape": [20000], "dtype": "float64", "min": -1.0,
                                      "max": 3.0})),
           kind="random", prims=("random_uniform",), covers=("uniform",),
           stats=lambda out, **kw: _moments(1.0, 4 / math.sqrt(12), -1.0, 3.0)(out)),
    OpInfo("normal", _seeded_key(lambda **kw: pf.normal(**kw)), None,
           fixed(_s(lambda i, r: (), {"mean": 1.5, "std": 2.0, "shape": [20000],
                                      "dtype": "float64"})),
           kind="random", prims=("random_normal",), covers=("normal",),
           stats=lambda out, **kw: _moments(1.5, 2.0)(out)),
    OpInfo("randint", _seeded_key(lambda **kw: pf.randint(**kw)), None,
           fixed(_s(lambda i, r: (), {"low": -2, "high": 5, "shape": [20000]})),
           kind="random", prims=("random_uniform",), covers=("randint",),
           stats=_randint_stats),
    OpInfo("randperm", _seeded_key(lambda **kw: pf.randperm(**kw)), None,
           fixed(_s(lambda i, r: (), {"n": 50})),
           kind="random", prims=("random_uniform",), covers=("randperm",),
           stats=_randperm_stats),
    OpInfo("dropout", _seeded_key(lambda x, **kw: F.dropout(pf.to_tensor(x), **kw)), None,
           fixed(_s(lambda i, r: (), {"x": np.linspace(0.5, 2.0, 20000), "p": 0.3})),
           kind="random", prims=("random_uniform",), covers=("dropout",),
           stats=_dropout_stats),
    # with a fixed seed the mask is fixed: the derivatives are those of x * mask / (1 - p)
    OpInfo("dropout_seeded", _seeded(lambda x, **kw: F.dropout(x, **kw)),
           lambda x, p=0.5, training=True: None if training and p > 0 else x,
           with_params([((4, 5), {"p": 0.4}), ((3,), {"p": 0.0}),
                        ((2, 3), {"p": 0.5, "training": False})]),
           prims=("select",), covers=()),

    # ---- elementwise composites ----
    OpInfo("reciprocal", pf.reciprocal, np.reciprocal, unary(), singularities=(0.0,),
           margin=0.5, prims=("div",), covers=("reciprocal",)),
    _unary_entry("tan", pf.tan, np.tan, "div", domain=(-1.2, 1.2)),
    _unary_entry("sinh", pf.sinh, np.sinh, "exp"),
    _unary_entry("cosh", pf.cosh, np.cosh, "exp"),
    _unary_entry("log2", pf.log2, np.log2, "log", domain=(0.3, 3.0)),
    _unary_entry("log10", pf.log10, np.log10, "log", domain=(0.3, 3.0)),
    OpInfo("clip", lambda x, **kw: pf.clip(x, **kw),
           lambda x, min=None, max=None: np.clip(x, min, max),
           with_params([((2, 3), {"min": -0.5, "max": 0.8}), ((4,), {"min": 0.3}),
                        ((), {"max": -0.1}), ((3, 2), {"min": -1.0, "max": 1.0})]),
           singularities=(-1.0, -0.5, -0.1, 0.3, 0.8, 1.0), margin=0.05,
           prims=("select",), covers=("clip", "clamp")),
    OpInfo("lerp", pf.lerp, lambda x, y, w: x + w * (y - x), fixed(
        _s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (2, 3)), i.make(r, (2, 3)))),
        _s(lambda i, r: (i.make(r, (3, 1)), i.make(r, (4,)), i.make(r, ()))),
        _s(lambda i, r: (i.make(r, (3,)), i.make(r, (3,)), np.float64(0.25)), diff=(0, 1))),
           prims=("mul",), covers=("lerp",)),
    OpInfo("scale", lambda x, **kw: pf.scale(x, **kw),
           lambda x, scale=1.0, bias=0.0, bias_after_scale=True:
           scale * x + bias if bias_after_scale else scale * (x + bias),
           with_params([((2, 3), {"scale": 2.0, "bias": 0.5}),
                        ((3,), {"scale": -1.5, "bias": 1.0, "bias_after_scale": False})]),
           prims=("mul", "add"), covers=("scale",)),
    OpInfo("floor_divide", pf.floor_divide, np.floor_divide, fixed(
        _s(lambda i, r: (np.array([3.5, -2.5, 7.25, -0.75]), np.array([2.0, 2.0, -3.0, 0.5]))),
        _s(lambda i, r: (np.array([[1.5], [4.5]]), np.array([2.0, -2.0, 4.0])))),
           kind="nondiff", prims=("floor",), covers=("floor_divide",)),
    OpInfo("remainder", pf.remainder, np.remainder, fixed(
        _s(lambda i, r: (np.array([3.5, -2.5, 7.25, -0.75]), np.array([2.0, 2.0, -3.0, 0.5]))),
        _s(lambda i, r: (np.array([[1.5], [4.5]]), np.array([2.0, -2.0, 4.0])))),
           kind="nondiff", prims=("floor",), covers=("remainder", "mod"),
           notes="x - floor(x / y) * y: the floor is on the path, so a derivative raises"),

    # ---- reduction composites ----
    OpInfo("mean", lambda x, **kw: pf.mean(x, **kw),
           lambda x, axis=None, keepdim=False: np.mean(x, axis=_axes(axis, x.ndim),
                                                       keepdims=keepdim),
           with_params([((2, 3, 2), {"axis": (0, 2)}), ((2, 3), {}),
                        ((2, 3), {"axis": -1, "keepdim": True}), ((), {})]),
           prims=("reduce_sum", "div"), covers=("mean",)),
    OpInfo("var", lambda x, **kw: pf.var(x, **kw),
           lambda x, axis=None, unbiased=True, keepdim=False: np.var(
               x, axis=_axes(axis, x.ndim), ddof=int(unbiased), keepdims=keepdim),
           with_params([((2, 3, 2), {"axis": (0, 2)}), ((2, 3), {"unbiased": False}),
                        ((3, 4), {"axis": 1, "keepdim": True})]),
           prims=("integer_pow",), covers=("var",)),
    OpInfo("std", lambda x, **kw: pf.std(x, **kw),
           lambda x, axis=None, unbiased=True, keepdim=False: np.std(
               x, axis=_axes(axis, x.ndim), ddof=int(unbiased), keepdims=keepdim),
           with_params([((2, 3), {}), ((2, 3, 2), {"axis": (1, 2), "unbiased": False}),
                        ((3, 4), {"axis": 0, "keepdim": True})]),
           prims=("sqrt",), covers=("std",)),
    OpInfo("logsumexp", lambda x, **kw: pf.logsumexp(x, **kw),
           lambda x, axis=None, keepdim=False: _np_logsumexp(
               x, axis=_axes(axis, x.ndim), keepdims=keepdim),
           fixed(*[_s(lambda i, r, s=s: (distinct(r, s, -3.0, 3.0),), kw, desc=f"{s} {kw}")
                   for s, kw in [((2, 3), {"axis": 1}), ((2, 3, 2), {"axis": (0, 2)}),
                                 ((2, 3), {"keepdim": True}), ((4,), {})]],
                 _s(lambda i, r: (1000.0 + distinct(r, (2, 3)),), {"axis": 1},
                    desc="near 1000")),
           prims=("reduce_max", "exp", "log"), covers=("logsumexp",)),
    OpInfo("prod", lambda x, **kw: pf.prod(x, **kw),
           lambda x, axis=None, keepdim=False: np.prod(x, axis=_axes(axis, x.ndim),
                                                       keepdims=keepdim),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)),), {"axis": 1}),
                 _s(lambda i, r: (i.make(r, (2, 3)),), {}),
                 _s(lambda i, r: (np.array([[0.0, 1.5], [-2.0, 0.5]]),), {"axis": 0,
                                                                          "keepdim": True},
                    desc="with a zero")),
           prims=("mul", "slice"), covers=("prod",)),
    OpInfo("norm", lambda x, **kw: pf.norm(x, **kw), _np_norm, fixed(
        _s(lambda i, r: (i.make(r, (2, 3)),), {"p": 2}, desc="p=2 all"),
        _s(lambda i, r: (i.make(r, (2, 3)),), {"p": "fro", "axis": (0, 1), "keepdim": True}),
        _s(lambda i, r: (i.make(r, (2, 3)),), {"p": 1, "axis": 1}),
        _s(lambda i, r: (distinct(r, (2, 3), 0.3, 2.0) * r.choice([-1, 1], (2, 3)),),
           {"p": np.inf, "axis": 0}, desc="p=inf distinct |x|"),
        _s(lambda i, r: (distinct(r, (2, 3), 0.3, 2.0) * r.choice([-1, 1], (2, 3)),),
           {"p": -np.inf}, desc="p=-inf"),
        _s(lambda i, r: (i.make(r, (2, 3)),), {"p": 3, "axis": -1}),
        _s(lambda i, r: (i.make(r, (4,)),), {"p": 2, "axis": 0})),
           singularities=(0.0,), prims=("sqrt", "abs", "reduce_max", "pow"),
           covers=("norm",)),

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

# Paddle compatibility (issue 20): copies and casts that always give a new tensor
OP_DB += [
    OpInfo("cast", lambda x, dtype: pf.cast(x, dtype), lambda x, dtype: x.astype(dtype),
           with_params([((2, 3), {"dtype": "int64"}), ((4,), {"dtype": "bool"}),
                        ((), {"dtype": "int32"})]),
           domain=(-3.0, 3.0), kind="nograd", prims=("convert_element_type",),
           covers=("cast",)),
    OpInfo("clone", lambda x: pf.clone(x), lambda x: x, unary(),
           prims=("convert_element_type",), covers=("clone",)),
    OpInfo("assign", lambda x: pf.assign(x), lambda x: x, unary(),
           prims=("convert_element_type",), covers=("assign",)),
]


# ---- control flow (issue 16): derivatives through cond/switch/while_loop/fori_loop/scan ----

def _rnn_scan(x, w, reverse=False):
    def step(c, xt):
        h = pf.tanh(c * w + xt)
        return h, h * xt
    return pf.scan(step, pf.zeros_like(w), x, reverse=reverse)


def _rnn_scan_ref(x, w, reverse=False):
    c, ys = np.zeros_like(w), [None] * len(x)
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        c = np.tanh(c * w + x[t])
        ys[t] = c * x[t]
    return c, np.stack(ys)


def _fori(x, w):
    return pf.fori_loop(0, 3, lambda i, c: pf.sin(c) * w + c * 0.5, x)


def _fori_ref(x, w):
    for _ in range(3):
        x = np.sin(x) * w + x * 0.5
    return x


def _cond_op(x):
    return pf.cond(x.sum() > 0, lambda v: v * pf.sin(v), lambda v: pf.exp(v) * 0.5, x)


def _cond_ref(x):
    return x * np.sin(x) if x.sum() > 0 else np.exp(x) * 0.5


_SWITCH_BRANCHES = (lambda v, w: v * w, lambda v, w: pf.sin(v) + w, lambda v, w: v * v * w)
_SWITCH_REFS = (lambda v, w: v * w, lambda v, w: np.sin(v) + w, lambda v, w: v * v * w)


def _bounded_while(x):
    def body(s):
        return s[0] + 1, s[1] * pf.cos(s[1]) + 0.5

    return pf.while_loop(lambda s: s[0] < 3, body, (pf.to_tensor(0), x), max_steps=5)[1]


def _bounded_while_ref(x):
    for _ in range(3):
        x = x * np.cos(x) + 0.5
    return x


OP_DB += [
    OpInfo("scan", _rnn_scan, _rnn_scan_ref,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3, 2)), r.uniform(-1, 1, (2,))),
                    desc="rnn"),
                 _s(lambda i, r: (r.uniform(-1, 1, (2, 3)), r.uniform(-1, 1, (3,))),
                    {"reverse": True}, desc="rnn reversed")),
           order_samples=1, prims=("tanh", "mul", "add")),
    OpInfo("fori_loop", _fori, _fori_ref,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3,)), r.uniform(-1, 1, (3,))))),
           order_samples=1, prims=("sin",)),
    OpInfo("cond", _cond_op, _cond_ref,
           fixed(_s(lambda i, r: (r.uniform(0.2, 1, (3,)),), desc="true branch"),
                 _s(lambda i, r: (r.uniform(-1, -0.2, (3,)),), desc="false branch")),
           order_samples=2, prims=("sin", "exp")),
    OpInfo("switch", lambda k, x, w: pf.switch(k, _SWITCH_BRANCHES, x, w),
           lambda k, x, w: _SWITCH_REFS[int(k)](x, w),
           fixed(*[_s(lambda i, r, k=k: (np.array(k), r.uniform(-1, 1, (2,)),
                                         r.uniform(-1, 1, (2,))), desc=f"branch {k}")
                   for k in range(3)]),
           order_samples=3, prims=("sin", "mul")),
    OpInfo("while_loop", _bounded_while, _bounded_while_ref,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3,)),))),
           order_samples=1, prims=("cos",),
           notes="bounded (max_steps): reverse-differentiable under pf.jit too"),
]


# ---- scientific numerics (issue 18): complex numbers and FFT ---------------------------------
# Complex ops are checked through a real embedding: the entry takes the real and imaginary
# parts as two float64 inputs and returns pf.as_real of the result (parts in a last dim of
# 2), so every finite difference moves along real and imaginary directions and the dot-
# product test uses the real inner product Re<u, v> under which the vjp rules are adjoints.

def _to_complex(re, im):
    return pf.complex(re, im)


def _np_parts(z):
    z = np.asarray(z)
    return np.stack([z.real, z.imag], axis=-1) if np.iscomplexobj(z) else z


def _parts(t):
    return pf.as_real(t) if t.dtype.is_complex else t


def _complex_in_out(op):
    return lambda re, im, **kw: _parts(op(_to_complex(re, im), **kw))


def _np_complex_in_out(ref):
    return lambda re, im, **kw: _np_parts(ref(re + 1j * im, **kw))


def _complex_pair(shape_params, lo=-1.5, hi=1.5, im_lo=None, im_hi=None):
    """Samples (re, im) of one complex input, with per-sample kwargs."""

    def gen(info, rng):
        return [SampleInput((rng.uniform(lo, hi, s), rng.uniform(
            lo if im_lo is None else im_lo, hi if im_hi is None else im_hi, s)), dict(kw),
            desc=f"{s} {kw}") for s, kw in shape_params]

    return gen


_C_SHAPES = [((2, 3), {}), ((), {})]


def _complex_unary_entry(name, op, ref, prims=(), covers=(), lo=-1.5, hi=1.5, **kw):
    return OpInfo(f"complex_{name}", _complex_in_out(op), _np_complex_in_out(ref),
                  _complex_pair(_C_SHAPES, lo, hi), prims=prims, covers=covers,
                  order_samples=1, **kw)


def _complex_binary(op):
    return lambda a, b, c, d: _parts(op(_to_complex(a, b), _to_complex(c, d)))


def _np_complex_binary(ref):
    return lambda a, b, c, d: _np_parts(ref(a + 1j * b, c + 1j * d))


def _complex_quad(shapes, lo=-1.5, hi=1.5):
    def gen(info, rng):
        return [SampleInput(tuple(rng.uniform(lo, hi, s) for s in (x, x, y, y)),
                            desc=f"{x} x {y}") for x, y in shapes]

    return gen


_FFT_SIZES = [((2, 5), {}), ((6,), {"norm": "ortho"}), ((3, 4), {"norm": "forward",
                                                                 "axis": 0})]
_FFT2_SIZES = [((2, 3, 4), {}), ((4, 3), {"norm": "ortho", "s": (3, 5)}),
               ((2, 3, 2), {"axes": (0, 2), "norm": "forward"})]

_SCIENCE_DB = [
    OpInfo("complex", lambda re, im: pf.as_real(pf.complex(re, im)),
           lambda re, im: _np_parts(re + 1j * im),
           fixed(_s(lambda i, r: (i.make(r, (2, 3)), i.make(r, (2, 3)))),
                 _s(lambda i, r: (i.make(r, (3, 1)), i.make(r, (4,))), desc="broadcast")),
           prims=("complex", "real", "imag"), covers=("complex", "as_real", "is_complex"),
           notes="is_complex is checked in tests/test_numerics.py"),
    OpInfo("as_complex", lambda x: pf.as_real(pf.as_complex(x)), lambda x: x,
           unary((2, 3, 2), (2,)), prims=("complex",), covers=("as_complex",)),
    _complex_unary_entry("real", pf.real, np.real, ("real",), ("real",)),
    _complex_unary_entry("imag", pf.imag, np.imag, ("imag",), ("imag",)),
    _complex_unary_entry("conj", pf.conj, np.conj, ("conj",), ("conj",)),
    _complex_unary_entry("abs", pf.abs, np.abs, ("real", "imag", "sqrt")),
    _complex_unary_entry("angle", pf.angle, np.angle, ("atan2",), ("angle",), lo=0.3, hi=1.5,
                         notes="kept off the branch cut (negative real axis)"),
    OpInfo("polar", lambda r, t: pf.as_real(pf.polar(r, t)),
           lambda r, t: _np_parts(r * np.exp(1j * t)),
           fixed(_s(lambda i, r: (r.uniform(0.5, 2, (2, 3)), r.uniform(-3, 3, (2, 3))))),
           prims=("complex", "sin", "cos"), covers=("polar",)),
    _complex_unary_entry("neg", pf.neg, np.negative, ("neg",)),
    _complex_unary_entry("exp", pf.exp, np.exp, ("exp",)),
    _complex_unary_entry("log", pf.log, np.log, ("log",), lo=0.3, hi=1.5),
    _complex_unary_entry("sqrt", pf.sqrt, np.sqrt, ("sqrt",), lo=0.3, hi=1.5),
    _complex_unary_entry("rsqrt", pf.rsqrt, lambda z: 1 / np.sqrt(z), ("rsqrt",), lo=0.3,
                         hi=1.5),
    _complex_unary_entry("sin", pf.sin, np.sin, ("sin",)),
    _complex_unary_entry("cos", pf.cos, np.cos, ("cos",)),
    _complex_unary_entry("tanh", pf.tanh, np.tanh, ("tanh",), lo=-0.7, hi=0.7),
    _complex_unary_entry("log1p", pf.log1p, np.log1p, ("log1p",), lo=0.1, hi=1.0),
    _complex_unary_entry("expm1", pf.expm1, np.expm1, ("expm1",)),
    _complex_unary_entry("square", pf.square, np.square, ("integer_pow",)),
    OpInfo("complex_integer_pow", _complex_in_out(lambda z: pf.pow(z, 3)),
           _np_complex_in_out(lambda z: z ** 3), _complex_pair(_C_SHAPES),
           prims=("integer_pow",), order_samples=1),
    OpInfo("complex_mul", _complex_binary(pf.multiply), _np_complex_binary(np.multiply),
           _complex_quad([((2, 3), (2, 3)), ((3, 1), (4,))]), prims=("mul",),
           order_samples=1),
    OpInfo("complex_add_sub", _complex_binary(lambda a, b: a + b - a * 0.5),
           _np_complex_binary(lambda a, b: a + b - a * 0.5),
           _complex_quad([((2, 3), (2, 3))]), prims=("add", "sub"), order_samples=1),
    OpInfo("complex_div", _complex_binary(pf.divide), _np_complex_binary(np.divide),
           _complex_quad([((2, 3), (2, 3))], lo=0.5, hi=1.5), prims=("div",),
           order_samples=1),
    OpInfo("complex_pow", _complex_binary(pf.pow), _np_complex_binary(np.power),
           _complex_quad([((2, 3), (2, 3))], lo=0.5, hi=1.5), prims=("pow",),
           order_samples=1),
    OpInfo("complex_matmul", _complex_binary(pf.matmul), _np_complex_binary(np.matmul),
           _complex_quad([((2, 3), (3, 2)), ((2, 2, 3), (3,))]), prims=("dot_general",),
           order_samples=1),
    OpInfo("complex_sum_reshape", _complex_in_out(lambda z: (z.reshape([-1]) * 2.0).sum()),
           _np_complex_in_out(lambda z: (z.reshape(-1) * 2.0).sum()),
           _complex_pair(_C_SHAPES), prims=("reduce_sum",), order_samples=1),
    OpInfo("complex_cast", lambda x: pf.as_real(x.astype("complex128") * (1 + 2j)),
           lambda x: _np_parts(x * (1 + 2j)), unary((2, 3)),
           prims=("convert_element_type",)),
    # ---- FFT: one primitive, all public transforms ----
    OpInfo("fft", _complex_in_out(pf.fft.fft), _np_complex_in_out(np.fft.fft),
           _complex_pair(_FFT_SIZES + [((5,), {"n": 7})]), prims=("fft",), order_samples=1),
    OpInfo("ifft", _complex_in_out(pf.fft.ifft), _np_complex_in_out(np.fft.ifft),
           _complex_pair(_FFT_SIZES + [((6,), {"n": 4})]), prims=("fft",), order_samples=1),
    OpInfo("rfft", lambda x, **kw: pf.as_real(pf.fft.rfft(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.rfft(x, **kw)),
           with_params(_FFT_SIZES + [((5,), {"n": 8}), ((7,), {})]), prims=("fft",),
           order_samples=1),
    OpInfo("irfft", _complex_in_out(pf.fft.irfft), _np_complex_in_out(np.fft.irfft),
           _complex_pair([((2, 4), {}), ((4,), {"n": 7, "norm": "ortho"}),
                          ((3, 4), {"axis": 0, "norm": "forward"}), ((3,), {"n": 8})]),
           prims=("fft",), order_samples=1),
    OpInfo("hfft", _complex_in_out(pf.fft.hfft), _np_complex_in_out(np.fft.hfft),
           _complex_pair([((2, 4), {}), ((4,), {"n": 7, "norm": "ortho"})]),
           prims=("fft", "conj"), order_samples=1),
    OpInfo("ihfft", lambda x, **kw: pf.as_real(pf.fft.ihfft(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.ihfft(x, **kw)),
           with_params([((2, 5), {}), ((6,), {"norm": "forward"})]), prims=("fft", "conj"),
           order_samples=1),
    OpInfo("fft2", _complex_in_out(pf.fft.fft2), _np_complex_in_out(np.fft.fft2),
           _complex_pair(_FFT2_SIZES), prims=("fft",), order_samples=1),
    OpInfo("ifft2", _complex_in_out(pf.fft.ifft2), _np_complex_in_out(np.fft.ifft2),
           _complex_pair(_FFT2_SIZES[:2]), prims=("fft",), order_samples=1),
    OpInfo("fftn", _complex_in_out(pf.fft.fftn), _np_complex_in_out(np.fft.fftn),
           _complex_pair([((2, 3, 2), {}), ((2, 3), {"axes": (1,), "s": (5,)})]),
           prims=("fft",), order_samples=1),
    OpInfo("ifftn", _complex_in_out(pf.fft.ifftn), _np_complex_in_out(np.fft.ifftn),
           _complex_pair([((2, 3, 2), {"norm": "ortho"})]), prims=("fft",), order_samples=1),
    OpInfo("rfft2", lambda x, **kw: pf.as_real(pf.fft.rfft2(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.rfft2(x, **kw)),
           with_params(_FFT2_SIZES), prims=("fft",), order_samples=1),
    OpInfo("rfftn", lambda x, **kw: pf.as_real(pf.fft.rfftn(x, **kw)),
           lambda x, **kw: _np_parts(np.fft.rfftn(x, **kw)),
           with_params([((2, 3, 4), {}), ((3, 5), {"axes": (0,)})]), prims=("fft",),
           order_samples=1),
    OpInfo("irfft2", _complex_in_out(pf.fft.irfft2), _np_complex_in_out(np.fft.irfft2),
           _complex_pair([((2, 3, 3), {}), ((3, 4), {"s": (3, 5), "norm": "ortho"})]),
           prims=("fft",), order_samples=1),
    OpInfo("irfftn", _complex_in_out(pf.fft.irfftn), _np_complex_in_out(np.fft.irfftn),
           _complex_pair([((2, 3, 3), {"norm": "forward"}), ((4, 2), {"axes": (0,)})]),
           prims=("fft",), order_samples=1),
    OpInfo("fftshift", lambda x, **kw: pf.fft.fftshift(x, **kw), np.fft.fftshift,
           with_params([((2, 5), {}), ((4, 3), {"axes": 0}), ((5,), {"axes": (-1,)})]),
           prims=("slice", "concatenate"), order_samples=1),
    OpInfo("ifftshift", lambda x, **kw: pf.fft.ifftshift(x, **kw), np.fft.ifftshift,
           with_params([((2, 5), {}), ((4, 3), {"axes": (1,)})]),
           prims=("slice", "concatenate"), order_samples=1),
    OpInfo("fftfreq", lambda n, d=1.0: pf.fft.fftfreq(n, d, dtype="float64"), np.fft.fftfreq,
           fixed(lambda i, r: SampleInput((5,), {"d": 0.3}), lambda i, r: SampleInput((4,))),
           kind="creation"),
    OpInfo("rfftfreq", lambda n, d=1.0: pf.fft.rfftfreq(n, d, dtype="float64"),
           np.fft.rfftfreq,
           fixed(lambda i, r: SampleInput((5,), {"d": 0.3}), lambda i, r: SampleInput((4,))),
           kind="creation"),
]
OP_DB.extend(_SCIENCE_DB)

# ---- linear algebra (issue 18) ----
# Symmetric positive-definite inputs are built inside the op (a a^T + n I), so finite
# differences move along symmetric directions; general matrices get + 3 I (well
# conditioned). Outputs that are unique only up to signs (SVD of wide matrices) are checked
# through sign-free combinations.
LA = pf.linalg


def _pf_spd(a):
    return a @ a.mT + 3.0 * pf.eye(a.shape[-1], dtype=a.dtype)


def _np_spd(a):
    return a @ np.swapaxes(a, -1, -2) + 3.0 * np.eye(a.shape[-1])


def _pf_shift(a):
    return a + 3.0 * pf.eye(a.shape[-1], dtype=a.dtype)


def _np_shift(a):
    return a + 3.0 * np.eye(a.shape[-1])


def _mats(*shapes, kw=None):
    """One sample per tuple of shapes (all inputs random in [-1, 1])."""

    def gen(info, rng):
        return [SampleInput(tuple(rng.uniform(-1.0, 1.0, s) for s in group), dict(kw or {}),
                            desc=str(group)) for group in shapes]

    return gen


def _mats_kw(*groups):
    def gen(info, rng):
        return [SampleInput(tuple(rng.uniform(-1.0, 1.0, s) for s in shapes), dict(kw),
                            desc=f"{shapes} {kw}") for shapes, kw in groups]

    return gen


def _np_tri(a, b, upper=True, transpose=False, unitriangular=False):
    a = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        a = a - np.diag(np.diag(a)) + np.eye(a.shape[-1])
    return np.linalg.solve(a.T if transpose else a, b)


def _np_lu_factor(a):
    """LAPACK getrf in NumPy: the packed factors (unit-lower L below the diagonal, U on and
    above it) and the 0-based row swapped with row i at step i (partial pivoting)."""
    lu = np.array(a, dtype=np.float64)
    n = lu.shape[-1]
    piv = np.zeros(n, dtype=np.int64)
    for k in range(n):
        p = k + int(np.argmax(np.abs(lu[k:, k])))
        piv[k] = p
        lu[[k, p]] = lu[[p, k]]
        lu[k + 1:, k] /= lu[k, k]
        lu[k + 1:, k + 1:] -= np.outer(lu[k + 1:, k], lu[k, k + 1:])
    return lu, piv


def _np_lu(a):
    factors, piv = _np_lu_factor(a)
    return factors, (piv + 1).astype(np.int32)


def _np_lu_unpack(a):
    """``(P, L, U)`` with ``a = P @ L @ U`` (scipy.linalg.lu's convention)."""
    factors, piv = _np_lu_factor(a)
    rows = np.arange(a.shape[-1])
    for k, p in enumerate(piv):
        rows[[k, p]] = rows[[p, k]]
    perm = np.eye(a.shape[-1])[rows].T  # row k of P^T a is row rows[k] of a
    return perm, np.tril(factors, -1) + np.eye(a.shape[-1]), np.triu(factors)


def _np_expm(a):
    """exp(a) for each matrix of a stack: the Taylor series of a / 2^s, squared s times."""
    out = []
    for m in a.reshape(-1, *a.shape[-2:]):
        s = max(0, int(np.ceil(np.log2(max(np.linalg.norm(m, 1), 1e-300)))) + 1)
        m = m / 2.0 ** s
        term, total = np.eye(m.shape[-1]), np.eye(m.shape[-1])
        for k in range(1, 30):  # ||m|| <= 1/2: the 30th term is below 1e-40
            term = term @ m / k
            total = total + term
        for _ in range(s):
            total = total @ total
        out.append(total)
    return np.stack(out).reshape(a.shape)


def _np_lstsq(a, b):
    sol, res, rank, sv = np.linalg.lstsq(a, b, rcond=None)
    return sol, res, np.int64(rank), sv


def _np_matrix_norm(a, p="fro"):
    return np.linalg.norm(a, ord=p, axis=(-2, -1))


def _svd_sign_free(a):
    u, s, vh = LA.svd(a)
    return u @ vh, s


def _np_svd_sign_free(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u @ vh, s


# decompositions: orders 1-4 on the primitives' own entries, 1-2 on composites; the jet test
# (nested jvp to order 6 by default) is capped at order 3: each order costs ~5x the last
_LA_CORE = dict(order_samples=1, max_order=4, jet_order=3)
_LA_MID = dict(order_samples=1, max_order=3, jet_order=2)
_LA_ORDER = dict(order_samples=1, max_order=2, jet_order=1)
_NEEDS_LU = ("fast",)  # pf.linalg.lu factors with SciPy's getrf (NumPy has no LU)

_LINALG_DB = [
    OpInfo("linalg.solve", lambda a, b, **kw: LA.solve(_pf_shift(a), b, **kw),
           lambda a, b, left=True: np.linalg.solve(_np_shift(a), b) if left else np.swapaxes(
               np.linalg.solve(np.swapaxes(_np_shift(a), -1, -2), np.swapaxes(b, -1, -2)),
               -1, -2),
           _mats_kw((((2, 2), (2, 2)), {}), (((2, 3, 3), (3, 1)), {}),
                    (((2, 2), (3, 2)), {"left": False})),
           prims=("solve",), **_LA_CORE),
    OpInfo("linalg.solve_vector", lambda a, b: LA.solve(_pf_shift(a), b),
           lambda a, b: np.linalg.solve(_np_shift(a), b[..., None])[..., 0] if a.ndim > 2
           else np.linalg.solve(_np_shift(a), b), _mats(((3, 3), (3,)), ((2, 3, 3), (3,))),
           prims=("solve",), **_LA_ORDER),
    OpInfo("linalg.inv", lambda a: LA.inv(_pf_shift(a)), lambda a: np.linalg.inv(_np_shift(a)),
           _mats(((3, 3),), ((2, 2, 2),)), prims=("solve",), **_LA_ORDER),
    OpInfo("linalg.det", lambda a: LA.det(a), np.linalg.det, _mats(((3, 3),), ((2, 2, 2),)),
           prims=("slogdet",), **_LA_ORDER),
    OpInfo("linalg.slogdet", lambda a: LA.slogdet(a),
           lambda a: np.stack(np.linalg.slogdet(a)), _mats(((2, 2),), ((2, 3, 3),)),
           prims=("slogdet",), **_LA_MID),
    OpInfo("linalg.cholesky", lambda a, **kw: LA.cholesky(_pf_spd(a), **kw),
           lambda a, upper=False: np.swapaxes(np.linalg.cholesky(_np_spd(a)), -1, -2) if upper
           else np.linalg.cholesky(_np_spd(a)),
           _mats_kw((((2, 2),), {}), (((2, 3, 3),), {"upper": True})),
           prims=("cholesky",), **_LA_CORE),
    OpInfo("linalg.cholesky_solve",
           lambda b, a, **kw: LA.cholesky_solve(b, LA.cholesky(_pf_spd(a), **kw), **kw),
           lambda b, a, upper=False: np.linalg.solve(_np_spd(a), b),
           _mats_kw((((3, 2), (3, 3)), {}), (((2, 3, 1), (3, 3)), {"upper": True})),
           prims=("cholesky", "triangular_solve"), **_LA_ORDER),
    OpInfo("linalg.triangular_solve",
           lambda a, b, **kw: LA.triangular_solve(_pf_shift(a), b, **kw),
           lambda a, b, **kw: _np_tri(_np_shift(a), b, **kw),
           _mats_kw((((2, 2), (2, 2)), {}), (((3, 3), (3, 1)), {"upper": False}),
                    (((3, 3), (3, 2)), {"transpose": True, "unitriangular": True})),
           prims=("triangular_solve",), **_LA_MID),
    OpInfo("linalg.eigh", lambda a: LA.eigh(a + a.mT),
           lambda a: np.linalg.eigh(a + np.swapaxes(a, -1, -2)),
           _mats(((2, 2),), ((2, 3, 3),)), prims=("eigh",), **_LA_CORE),
    OpInfo("linalg.eigvalsh", lambda a, **kw: LA.eigvalsh(a + a.mT, **kw),
           lambda a, UPLO="L": np.linalg.eigvalsh(a + np.swapaxes(a, -1, -2)),
           _mats_kw((((3, 3),), {}), (((3, 3),), {"UPLO": "U"})), prims=("eigh",),
           **_LA_ORDER),
    OpInfo("linalg.lu", lambda a: LA.lu(_pf_shift(a)), lambda a: _np_lu(_np_shift(a)),
           _mats(((2, 2),), ((4, 4),)), prims=("lu", "lu_pivots"), extras=_NEEDS_LU,
           **_LA_MID),
    OpInfo("linalg.lu_unpack", lambda a: LA.lu_unpack(*LA.lu(a)),
           _np_lu_unpack, _mats(((3, 3),)),
           prims=("lu", "lu_pivots", "lu_permutation"), extras=_NEEDS_LU, **_LA_ORDER),
    OpInfo("linalg.lu_solve", lambda a, b, **kw: LA.lu_solve(b, *LA.lu(_pf_shift(a)), **kw),
           lambda a, b, trans="N": np.linalg.solve(
               _np_shift(a) if trans == "N" else _np_shift(a).T, b),
           _mats_kw((((3, 3), (3, 2)), {}), (((3, 3), (3, 1)), {"trans": "T"})),
           prims=("lu", "lu_permutation", "triangular_solve"), extras=_NEEDS_LU,
           **_LA_ORDER),
    OpInfo("linalg.qr", lambda a, **kw: LA.qr(a, **kw),
           lambda a, mode="reduced": np.linalg.qr(a, mode=mode),
           _mats_kw((((3, 2),), {}), (((2, 3, 3),), {}), (((2, 4),), {}),
                    (((4, 2),), {"mode": "r"})), prims=("qr",), **_LA_MID),
    OpInfo("linalg.svd", lambda a: LA.svd(a), lambda a: np.linalg.svd(a, full_matrices=False),
           _mats(((3, 2),), ((2, 3, 3),)), prims=("svd",), **_LA_MID),
    OpInfo("linalg.svd_wide", _svd_sign_free, _np_svd_sign_free, _mats(((2, 4),)),
           prims=("svd",), **_LA_ORDER),
    OpInfo("linalg.svdvals", lambda a: LA.svdvals(a), lambda a: np.linalg.svd(a, compute_uv=False),
           _mats(((3, 2),), ((2, 3),)), prims=("svd",), **_LA_ORDER),
    OpInfo("linalg.pinv", lambda a: LA.pinv(a), np.linalg.pinv, _mats(((3, 2),), ((2, 3),)),
           prims=("svd",), **_LA_ORDER),
    OpInfo("linalg.lstsq", lambda a, b: LA.lstsq(a, b), _np_lstsq,
           _mats(((4, 2), (4, 2)), ((3, 3), (3, 1))), prims=("svd",), order_samples=1,
           max_order=2),
    OpInfo("linalg.matrix_power", lambda a, **kw: LA.matrix_power(_pf_shift(a), **kw),
           lambda a, n: np.linalg.matrix_power(_np_shift(a), n),
           _mats_kw((((3, 3),), {"n": 3}), (((2, 2, 2),), {"n": -2}), (((2, 2),), {"n": 0})),
           prims=("dot_general",), **_LA_ORDER),
    OpInfo("linalg.matrix_exp", lambda a: LA.matrix_exp(a),
           _np_expm,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3, 3)),)),
                 _s(lambda i, r: (r.uniform(-3, 3, (2, 2, 2)),), desc="squarings")),
           prims=("solve",), **_LA_ORDER),
    OpInfo("linalg.vector_norm", lambda x, **kw: LA.vector_norm(x, **kw),
           lambda x, p=2.0, axis=None, keepdim=False: np.linalg.norm(
               x.ravel() if axis is None else x, ord=p, axis=axis, keepdims=keepdim)
           if axis is not None or not keepdim else None,
           _mats_kw((((2, 3),), {}), (((2, 3),), {"p": 3, "axis": 1}),
                    (((2, 3),), {"p": float("inf"), "axis": 0}), (((4,),), {"p": -1})),
           **_LA_ORDER),
    OpInfo("linalg.matrix_norm", lambda a, **kw: LA.matrix_norm(a, **kw), _np_matrix_norm,
           _mats_kw((((2, 3),), {}), (((3, 2),), {"p": "nuc"}), (((2, 3, 3),), {"p": 1}),
                    (((3, 3),), {"p": float("inf")}), (((3, 2),), {"p": 2}),
                    (((3, 3),), {"p": -2})), **_LA_ORDER),
    OpInfo("linalg.norm", lambda a, **kw: LA.norm(a, **kw),
           lambda a, p=None, axis=None: np.linalg.norm(a, ord=p, axis=axis),
           _mats_kw((((2, 3),), {}), (((3, 2),), {"p": "nuc"}), (((3,),), {"p": 1})),
           **_LA_ORDER),
    OpInfo("linalg.cond", lambda a, **kw: LA.cond(_pf_shift(a), **kw),
           lambda a, p=None: np.linalg.cond(_np_shift(a), p=p),
           _mats_kw((((3, 3),), {}), (((3, 3),), {"p": "fro"}), (((2, 2, 2),), {"p": -2})),
           prims=("svd",), **_LA_ORDER),
]
OP_DB.extend(_LINALG_DB)


def _apart(info, rng, shape, gap=0.2):
    x = info.make(rng, shape)
    return x, x + rng.choice([-1.0, 1.0], size=shape) * rng.uniform(gap, 1.0, size=shape)


# ---- distributed (issue 15): the collective primitives in a world of one process, where
# each is the identity (their multi-process values and adjoints are tested under mpiexec:
# tests/distributed)
def _collective(prim, **fixed_params):
    def op(x, **kw):
        return getattr(prims, prim)(x, ranks=(0,), **fixed_params, **kw)

    return op


OP_DB += [
    OpInfo("all_reduce_sum", _collective("all_reduce", op="sum"), lambda x: x,
           with_params([((2, 3), {}), ((4,), {})]), prims=("all_reduce",)),
    OpInfo("all_reduce_avg", _collective("all_reduce", op="avg"), lambda x: x,
           with_params([((3,), {})]), prims=("all_reduce",)),
    OpInfo("all_reduce_max", _collective("all_reduce", op="max"), lambda x: x,
           with_params([((2, 3), {})]), prims=("all_reduce",)),
    # (its rules divide by x: out / x is 1 only to rounding, which the differences of the
    # third and fourth derivatives amplify; away from 0)
    OpInfo("all_reduce_prod", _collective("all_reduce", op="prod"), lambda x: x,
           with_params([((2, 3), {})]), prims=("all_reduce",), domain=(0.5, 2.0),
           tol={"order3": (1e-9, 1e-5), "order4": (1e-7, 1e-5)}),
    OpInfo("all_gather", _collective("all_gather"), lambda x, axis, sizes: x,
           with_params([((2, 3), {"axis": 1, "sizes": (3,)}),
                        ((4,), {"axis": 0, "sizes": (4,)})]), prims=("all_gather",)),
    OpInfo("reduce_scatter", _collective("reduce_scatter", op="sum"),
           lambda x, axis, sizes: x,
           with_params([((2, 3), {"axis": 0, "sizes": (2,)})]), prims=("reduce_scatter",)),
    OpInfo("all_to_all", _collective("all_to_all"),
           lambda x, split_axis, concat_axis, split_sizes, concat_sizes: x,
           with_params([((2, 3), {"split_axis": 0, "concat_axis": 1, "split_sizes": (2,),
                                  "concat_sizes": (3,)})]), prims=("all_to_all",)),
]

OPS_BY_NAME = {info.name: info for info in OP_DB}
if len(OPS_BY_NAME) != len(OP_DB):
    raise ValueError("OpInfo names must be unique")


def public_ops() -> dict:
    """The public op surface the table must cover: name -> function (primflow.ops and
    pf.nn.functional; aliases share one function object)."""
    from primflow import ops

    out = {}
    for name in ops.__all__:  # (ops' internal helpers are not in __all__)
        fn = getattr(ops, name)
        if not callable(fn) or isinstance(fn, type):
            continue
        if getattr(fn, "__module__", "").startswith("primflow.ops"):
            out[name] = fn
    for name in F.__all__:
        out.setdefault(name, getattr(F, name))
    return out
