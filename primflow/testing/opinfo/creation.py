"""Creation ops: tensors made from params (full, iota, zeros, arange, ...)."""

from __future__ import annotations

import numpy as np

import primflow as pf
from primflow import prims

from .base import OpInfo, _s, fixed, unary

ENTRIES = [
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

]
