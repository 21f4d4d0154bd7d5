"""Reductions: the reduce primitives, arg-reductions, cumulative sums and the
reduction composites."""

from __future__ import annotations

import numpy as np

import primflow as pf
from primflow import prims

from .base import OpInfo, _s, distinct, fixed, with_params
from .references import _axes, _np_norm


def _np_logsumexp(x, axis=None, keepdims=False):
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis)



ENTRIES = [
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

]
