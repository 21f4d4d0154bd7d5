"""Primitives that create tensors from parameters alone: full, iota and random draws.

They have no tensor inputs, hence no derivative rules to give (empty rule tuples).
"""

from __future__ import annotations

from ..core.primitive import Aval, Primitive

_F = "creation"


def _full_infer(*, shape, value, dtype):
    return Aval(shape, dtype)


full = Primitive("full", family=_F, infer=_full_infer, jvp=(), vjp=(),
                 doc="a tensor of `shape` filled with `value`")


def _iota_infer(*, shape, dtype, dimension):
    return Aval(shape, dtype)


iota = Primitive("iota", family=_F, infer=_iota_infer, jvp=(), vjp=(),
                 doc="0, 1, 2, ... along `dimension`, broadcast to `shape`")


def _random_infer(*, shape, dtype, key):
    if not dtype.is_floating:
        raise TypeError(f"random draws need a floating dtype, got {dtype.name}")
    return Aval(shape, dtype)


random_uniform = Primitive("random_uniform", family=_F, infer=_random_infer, jvp=(), vjp=(),
                           doc="uniform draws in [0, 1), a pure function of `key`")
random_normal = Primitive("random_normal", family=_F, infer=_random_infer, jvp=(), vjp=(),
                          doc="standard normal draws, a pure function of `key`")



def _constant_taylor(prim):
    # no tensor inputs: the output is a constant along any path (no series)
    def rule(primals, series, out=None, **params):
        return (prim.bind(**params) if out is None else out), None

    return rule


for _prim in (full, iota, random_uniform, random_normal):
    _prim.taylor = _constant_taylor(_prim)
