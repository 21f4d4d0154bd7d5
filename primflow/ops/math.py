"""Elementwise math: the NumPy-like public surface over the elementwise primitives, plus
composites (tan, sinh, cosh, square, ...) written only in primitives.
"""

from __future__ import annotations

import math as _math

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from ._helpers import (as_tensor, binary_operands, broadcast_shapes, broadcast_to, cast,
                       float_operand, full)


# ---- binary arithmetic ---------------------------------------------------------------------

def add(x, y) -> Tensor:
    """Elementwise ``x + y`` with broadcasting.

    Example:
        >>> import primflow as pf
        >>> pf.add(pf.to_tensor([1.0, 2.0]), 1.0).numpy()
        array([2., 3.], dtype=float32)
    """
    return prims.add(*binary_operands(x, y))


def subtract(x, y) -> Tensor:
    """Elementwise ``x - y`` with broadcasting. Example: ``pf.subtract(x, 1.0)``."""
    return prims.sub(*binary_operands(x, y))


def multiply(x, y) -> Tensor:
    """Elementwise ``x * y`` with broadcasting. Example: ``pf.multiply(x, x)``."""
    return prims.mul(*binary_operands(x, y))


def divide(x, y) -> Tensor:
    """True division ``x / y``; integer inputs give the default float dtype.

    Example:
        >>> import primflow as pf
        >>> pf.divide(pf.to_tensor([1, 2]), 2).numpy()
        array([0.5, 1. ], dtype=float32)
    """
    x, y = binary_operands(x, y)
    if not x.dtype.is_floating:
        x, y = cast(x, dtypes.default_float()), cast(y, dtypes.default_float())
    return prims.div(x, y)


def floor_divide(x, y) -> Tensor:
    """``floor(x / y)`` (not differentiable). Example: ``pf.floor_divide(x, 2)``."""
    x, y = binary_operands(x, y)
    if x.dtype.is_floating:
        return prims.floor(prims.div(x, y))
    f = dtypes.float64
    return cast(prims.floor(prims.div(cast(x, f), cast(y, f))), x.dtype)


def remainder(x, y) -> Tensor:
    """``x - floor(x / y) * y`` (sign of y, as NumPy's ``mod``). Example: ``pf.remainder(x, 3)``."""
    x, y = binary_operands(x, y)
    return prims.sub(x, prims.mul(floor_divide(x, y), y))



def pow(x, y) -> Tensor:  # noqa: A001 - public name
    """``x ** y``. Integer Python exponents use ``integer_pow`` (exact at negative x).

    Example:
        >>> import primflow as pf
        >>> pf.pow(pf.to_tensor([-2.0, 3.0]), 2).numpy()
        array([4., 9.], dtype=float32)
    """
    if isinstance(x, Tensor) and isinstance(y, int) and not isinstance(y, bool):
        if y >= 0 or x.dtype.is_floating:
            return prims.integer_pow(x, y=y)
    x, y = binary_operands(x, y)
    return prims.pow(x, y)


def maximum(x, y) -> Tensor:
    """Elementwise maximum (ties split the gradient evenly). Example: ``pf.maximum(x, 0.0)``."""
    return prims.maximum(*binary_operands(x, y))


def minimum(x, y) -> Tensor:
    """Elementwise minimum. Example: ``pf.minimum(x, 1.0)``."""
    return prims.minimum(*binary_operands(x, y))


def atan2(x, y) -> Tensor:
    """Angle of the point (y, x), i.e. ``arctan(x / y)`` with the right quadrant.

    Example: ``pf.atan2(pf.to_tensor([1.0]), pf.to_tensor([1.0]))`` is pi/4.
    """
    x, y = binary_operands(float_operand(x), float_operand(y))
    return prims.atan2(x, y)


# ---- unary primitives ----------------------------------------------------------------------

def _float_unary(prim, doc):
    def op(x) -> Tensor:
        return prim(float_operand(x))

    op.__name__ = prim.name
    op.__doc__ = doc
    return op


exp = _float_unary(prims.exp, "Elementwise e**x. Example: ``pf.exp(pf.zeros([2]))`` is ones.")
log = _float_unary(prims.log, "Natural logarithm. Example: ``pf.log(pf.ones([2]))`` is zeros.")
log1p = _float_unary(prims.log1p, "log(1 + x), accurate near 0. Example: ``pf.log1p(x)``.")
expm1 = _float_unary(prims.expm1, "exp(x) - 1, accurate near 0. Example: ``pf.expm1(x)``.")
sin = _float_unary(prims.sin, "Sine. Example: ``pf.sin(pf.zeros([1]))`` is 0.")
cos = _float_unary(prims.cos, "Cosine. Example: ``pf.cos(pf.zeros([1]))`` is 1.")
tanh = _float_unary(prims.tanh, "Hyperbolic tangent. Example: ``pf.tanh(x)``.")
sqrt = _float_unary(prims.sqrt, "Square root. Example: ``pf.sqrt(pf.to_tensor([4.0]))`` is 2.")
rsqrt = _float_unary(prims.rsqrt, "1 / sqrt(x). Example: ``pf.rsqrt(pf.to_tensor([4.0]))``.")
erf = _float_unary(prims.erf, "Error function. Example: ``pf.erf(pf.zeros([1]))`` is 0.")
sigmoid = _float_unary(prims.logistic, "Logistic sigmoid 1 / (1 + exp(-x)). Example: "
                                       "``pf.sigmoid(pf.zeros([1]))`` is 0.5.")
floor = _float_unary(prims.floor, "Round down (not differentiable). Example: ``pf.floor(x)``.")
ceil = _float_unary(prims.ceil, "Round up (not differentiable). Example: ``pf.ceil(x)``.")
round = _float_unary(prims.round, "Round half to even (not differentiable).")  # noqa: A001


def neg(x) -> Tensor:
    """``-x``. Example: ``pf.neg(pf.ones([2]))``."""
    return prims.neg(as_tensor(x))



def abs(x) -> Tensor:  # noqa: A001 - public name
    """``|x|`` (gradient 0 at 0). Example: ``pf.abs(pf.to_tensor([-1.0]))`` is 1."""
    return prims.abs(as_tensor(x))


def sign(x) -> Tensor:
    """-1, 0 or 1 by the sign of x (not differentiable). Example: ``pf.sign(x)``."""
    return prims.sign(as_tensor(x))


# ---- composites ----------------------------------------------------------------------------

def square(x) -> Tensor:
    """``x * x``. Example: ``pf.square(pf.to_tensor([3.0]))`` is 9."""
    return prims.integer_pow(as_tensor(x), y=2)


def reciprocal(x) -> Tensor:
    """``1 / x``. Example: ``pf.reciprocal(pf.to_tensor([4.0]))`` is 0.25."""
    return divide(1.0, float_operand(x))


def tan(x) -> Tensor:
    """Tangent as sin / cos. Example: ``pf.tan(pf.zeros([1]))`` is 0."""
    x = float_operand(x)
    return prims.div(prims.sin(x), prims.cos(x))


def sinh(x) -> Tensor:
    """Hyperbolic sine (e^x - e^-x) / 2. Example: ``pf.sinh(pf.zeros([1]))`` is 0."""
    x = float_operand(x)
    half = full(x._shape, 0.5, x.dtype)
    return prims.mul(half, prims.sub(prims.exp(x), prims.exp(prims.neg(x))))


def cosh(x) -> Tensor:
    """Hyperbolic cosine (e^x + e^-x) / 2. Example: ``pf.cosh(pf.zeros([1]))`` is 1."""
    x = float_operand(x)
    half = full(x._shape, 0.5, x.dtype)
    return prims.mul(half, prims.add(prims.exp(x), prims.exp(prims.neg(x))))


def log2(x) -> Tensor:
    """Base-2 logarithm. Example: ``pf.log2(pf.to_tensor([8.0]))`` is 3."""
    x = float_operand(x)
    return prims.div(prims.log(x), full(x._shape, _math.log(2.0), x.dtype))


def log10(x) -> Tensor:
    """Base-10 logarithm. Example: ``pf.log10(pf.to_tensor([100.0]))`` is 2."""
    x = float_operand(x)
    return prims.div(prims.log(x), full(x._shape, _math.log(10.0), x.dtype))


def clip(x, min=None, max=None) -> Tensor:  # noqa: A002 - Paddle's argument names
    """Limits values to [min, max] (either may be None). Gradient 1 inside, 0 outside.

    Example:
        >>> import primflow as pf
        >>> pf.clip(pf.to_tensor([-2.0, 0.5, 3.0]), 0.0, 1.0).numpy()
        array([0. , 0.5, 1. ], dtype=float32)
    """
    x = as_tensor(x)
    if min is not None:
        lo, x_b = binary_operands(min, x)
        x = prims.select(prims.lt(x_b, lo), lo, x_b)
    if max is not None:
        hi, x_b = binary_operands(max, x)
        x = prims.select(prims.gt(x_b, hi), hi, x_b)
    return x



def where(condition, x=None, y=None) -> Tensor:
    """Elementwise ``x if condition else y`` with broadcasting.

    Example:
        >>> import primflow as pf
        >>> c = pf.to_tensor([True, False])
        >>> pf.where(c, 1.0, pf.to_tensor([5.0, 6.0])).numpy()
        array([1., 6.], dtype=float32)
    """
    if x is None and y is None:
        raise TypeError("where(condition) with one argument is not supported; use "
                        "pf.nonzero(condition)")
    cond = as_tensor(condition)
    if not cond.dtype.is_bool:
        cond = prims.ne(cond, full(cond._shape, 0, cond.dtype))
    x, y = binary_operands(x, y)
    shape = broadcast_shapes(cond._shape, x._shape)
    return prims.select(broadcast_to(cond, shape), broadcast_to(x, shape),
                        broadcast_to(y, shape))


def lerp(x, y, weight) -> Tensor:
    """``x + weight * (y - x)``. Example: ``pf.lerp(a, b, 0.5)``."""
    return add(x, multiply(weight, subtract(y, x)))


# ---- comparisons and logic -----------------------------------------------------------------

def _compare(prim, doc):
    def op(x, y) -> Tensor:
        return prim(*binary_operands(x, y))

    op.__name__ = prim.name
    op.__doc__ = doc
    return op


equal = _compare(prims.eq, "Elementwise ``x == y`` (bool). Example: ``pf.equal(x, 0.0)``.")
not_equal = _compare(prims.ne, "Elementwise ``x != y`` (bool).")
less_than = _compare(prims.lt, "Elementwise ``x < y`` (bool).")
less_equal = _compare(prims.le, "Elementwise ``x <= y`` (bool).")
greater_than = _compare(prims.gt, "Elementwise ``x > y`` (bool).")
greater_equal = _compare(prims.ge, "Elementwise ``x >= y`` (bool).")


def _as_bool(x):
    x = as_tensor(x)
    return x if x.dtype.is_bool else prims.ne(x, full(x._shape, 0, x.dtype))


def logical_and(x, y) -> Tensor:
    """Elementwise and of truth values. Example: ``pf.logical_and(x > 0, x < 1)``."""
    return prims.logical_and(*binary_operands(_as_bool(x), _as_bool(y)))


def logical_or(x, y) -> Tensor:
    """Elementwise or of truth values. Example: ``pf.logical_or(x < 0, x > 1)``."""
    return prims.logical_or(*binary_operands(_as_bool(x), _as_bool(y)))


def logical_not(x) -> Tensor:
    """Elementwise not. Example: ``pf.logical_not(x > 0)``."""
    return prims.logical_not(_as_bool(x))


def isnan(x) -> Tensor:
    """True where x is NaN (NaN is the only value unequal to itself)."""
    x = as_tensor(x)
    return prims.ne(x, x)


def isfinite(x) -> Tensor:
    """True where x is neither NaN nor infinite."""
    x = as_tensor(x)
    if not x.dtype.is_floating:
        return full(x._shape, True, dtypes.bool_)
    big = full(x._shape, float("inf"), x.dtype)
    return prims.logical_and(prims.eq(x, x), prims.lt(prims.abs(x), big))


def isinf(x) -> Tensor:
    """True where x is +inf or -inf."""
    x = as_tensor(x)
    if not x.dtype.is_floating:
        return full(x._shape, False, dtypes.bool_)
    return prims.eq(prims.abs(x), full(x._shape, float("inf"), x.dtype))


def astype(x, dtype) -> Tensor:
    """``x`` converted to ``dtype``. Example: ``pf.astype(x, "float64")``."""
    return cast(as_tensor(x), dtype)


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True) -> Tensor:
    """Paddle's ``scale``: ``scale * x + bias`` (or ``scale * (x + bias)``)."""
    x = as_tensor(x)
    if bias_after_scale:
        return add(multiply(x, scale), bias)
    return multiply(add(x, bias), scale)
