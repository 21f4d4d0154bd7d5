"""Elementwise ops: unary and binary primitives, comparisons and logic, casts, and
the elementwise composites."""

from __future__ import annotations

import math

import numpy as np

import primflow as pf
from primflow import prims

from .base import OpInfo, SampleInput, _s, _unary_entry, binary, fixed, unary, untied, with_params
from .references import _np_erf, _np_expit

_STEPS = tuple(float(k) for k in range(-3, 4))
_HALVES = tuple(k + 0.5 for k in range(-3, 3))


ENTRIES = [
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

    # copies and casts that always give a new tensor (the Paddle-compatible names)
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
