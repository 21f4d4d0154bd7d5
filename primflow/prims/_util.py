"""Small helpers shared by the primitive rule files (all built from primitives)."""

from __future__ import annotations

from ..core.primitive import Aval, PrimitiveError
from . import creation


def full_like(x, value):
    """A tensor shaped like ``x`` filled with ``value`` (the ``full`` primitive)."""
    return creation.full(shape=tuple(x._shape), value=value, dtype=x.dtype)


def zeros_like(x):
    return full_like(x, 0)


def same_aval(x):
    """Infer rule of unary elementwise primitives: output shaped and typed like the input."""
    return Aval(x.shape, x.dtype)


def float_unary_infer(name):
    def infer(x):
        if not x.dtype.is_floating:
            raise TypeError(f"{name} expects a floating tensor, got {x.dtype.name}; cast first "
                            f"with x.astype('float32')")
        return Aval(x.shape, x.dtype)

    return infer


def binary_infer(name, out_dtype=None):
    """Infer rule of binary elementwise primitives: equal shapes and dtypes (ops/ broadcasts
    and promotes before calling a primitive)."""

    def infer(x, y):
        if x.shape != y.shape:
            raise PrimitiveError(f"{name}: shapes {list(x.shape)} and {list(y.shape)} differ; "
                                 f"primitives do not broadcast (use primflow.ops)")
        if x.dtype is not y.dtype:
            raise PrimitiveError(f"{name}: dtypes {x.dtype.name} and {y.dtype.name} differ")
        return Aval(x.shape, out_dtype or x.dtype)

    return infer
