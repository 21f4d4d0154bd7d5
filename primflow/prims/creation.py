"""Primitives that create tensors from parameters alone: full, iota and random draws.

They have no tensor inputs, hence no derivative rules to give (their families are nullary:
the rules are empty and the Taylor rule is a constant).
"""

from __future__ import annotations

from ..core.primitive import Aval, Primitive
from . import sharding as sr
from .families import CREATION, RANDOM


def _full_infer(*, shape, value, dtype):
    return Aval(shape, dtype)


full = Primitive("full", family=CREATION, shard=sr.CREATION, infer=_full_infer,
                 doc="a tensor of `shape` filled with `value`")


def _iota_infer(*, shape, dtype, dimension):
    return Aval(shape, dtype)


iota = Primitive("iota", family=CREATION, shard=sr.CREATION, infer=_iota_infer,
                 doc="0, 1, 2, ... along `dimension`, broadcast to `shape`")


def _random_infer(*, shape, dtype, key):
    if not dtype.is_floating:
        raise TypeError(f"random draws need a floating dtype, got {dtype.name}")
    return Aval(shape, dtype)


random_uniform = Primitive("random_uniform", family=RANDOM, shard=sr.CREATION, infer=_random_infer,
                           doc="uniform draws in [0, 1), a pure function of `key`")
random_normal = Primitive("random_normal", family=RANDOM, shard=sr.CREATION, infer=_random_infer,
                          doc="standard normal draws, a pure function of `key`")

