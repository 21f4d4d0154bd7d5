"""Random draws: determinism given the key or seed, and moments."""

from __future__ import annotations

import math

import numpy as np

import primflow as pf
from primflow import prims

from .base import OpInfo, _s, fixed, with_params

F = pf.nn.functional

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


ENTRIES = [
    # ---- random: determinism given the key/seed and moments ----
    OpInfo("random_uniform", lambda key, **p: prims.random_uniform(key=key, **p), None,
           fixed(_s(lambda i, r: (), {"shape": (20000,), "dtype": pf.float64})),
           kind="random", prims=("random_uniform",), covers=(),
           stats=lambda out, **kw: _moments(0.5, math.sqrt(1 / 12), 0.0, 1.0)(out)),
    OpInfo("random_normal", lambda key, **p: prims.random_normal(key=key, **p), None,
           fixed(_s(lambda i, r: (), {"shape": (20000,), "dtype": pf.float64})),
           kind="random", prims=("random_normal",), covers=(),
           stats=lambda out, **kw: _moments(0.0, 1.0)(out)),
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
           prims=("select",), covers=(),
           # the matrix (opinfo/matrix.py): the mask is drawn in the input's dtype, not the
           # float64 draw rounded, so only cells of one dtype agree with each other
           tol={f"{what}_{dtype}": math.inf for what in ("value", "grad")
                for dtype in ("float32", "float16", "bfloat16")}),

]
