"""Elementwise math: the NumPy-like public surface over the elementwise primitives, plus
composites (tan, sinh, cosh, square, ...) written only in primitives.
"""

from __future__ import annotations

import math as _math
import warnings

from .. import prims
from ..core import dtypes
from ..core.primitive import PrimitiveError, get_primitive, primitives
from ..core.tensor import Tensor
from ..core.trace import Tracer
from .helpers import (as_tensor, binary_operands, broadcast_shapes, broadcast_to, cast,
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
    """Elementwise ``x - y`` with broadcasting.

    Example:
        >>> import primflow as pf
        >>> pf.subtract(pf.to_tensor([3.0, 5.0]), 1.0).numpy()
        array([2., 4.], dtype=float32)
    """
    return prims.sub(*binary_operands(x, y))


def multiply(x, y) -> Tensor:
    """Elementwise ``x * y`` with broadcasting.

    Example:
        >>> import primflow as pf
        >>> pf.multiply(pf.to_tensor([2.0, 3.0]), pf.to_tensor([4.0, 5.0])).numpy()
        array([ 8., 15.], dtype=float32)
    """
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
    """``floor(x / y)`` (not differentiable). Integers divide exactly (no float rounding)
    and a zero integer divisor raises ZeroDivisionError, as in PyTorch (an integer has no
    inf or nan to give); floats give inf/nan as in NumPy.

    Example:
        >>> import primflow as pf
        >>> pf.floor_divide(pf.to_tensor([7, -7]), 2).numpy()
        array([ 3, -4])
    """
    x, y = binary_operands(x, y)
    if x.dtype.is_floating:
        return prims.floor(prims.div(x, y))
    return _integer_division(x, y, "floor_divide")


def remainder(x, y) -> Tensor:
    """``x - floor(x / y) * y`` (sign of y, as NumPy's ``mod``). A zero integer divisor
    raises ZeroDivisionError, as ``floor_divide``.

    Example:
        >>> import primflow as pf
        >>> pf.remainder(pf.to_tensor([7.0, -7.0]), 3.0).numpy()
        array([1., 2.], dtype=float32)
    """
    x, y = binary_operands(x, y)
    if x.dtype.is_floating:
        return prims.sub(x, prims.mul(floor_divide(x, y), y))
    return prims.sub(x, prims.mul(_integer_division(x, y, "remainder"), y))


def _integer_division(x, y, name):
    """``x // y`` of integer (or bool) tensors by the div primitive's integer kind; the
    kernel's ZeroDivisionError (also raised by compiled code) is re-raised naming ``name``."""
    if x.dtype.is_bool:
        x, y = cast(x, dtypes.int64), cast(y, dtypes.int64)
    try:
        return prims.div(x, y)
    except PrimitiveError as e:
        if isinstance(e.__cause__, ZeroDivisionError):
            raise ZeroDivisionError(f"{name}: {e.__cause__}") from None
        raise


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
    if x.dtype.is_integer and not isinstance(y, Tracer) and y.size and int(
            prims.reduce_min(y, axes=tuple(range(y.ndim))).item()) < 0:
        raise ValueError(f"pow: integers to negative integer powers are not allowed (the "
                         f"result is not an integer; NumPy and PyTorch refuse them too); cast "
                         f"the base to a float dtype first, e.g. x.astype('float32')")
    return prims.pow(x, y)


def maximum(x, y) -> Tensor:
    """Elementwise maximum (ties split the gradient evenly).

    Example:
        >>> import primflow as pf
        >>> pf.maximum(pf.to_tensor([-1.0, 2.0]), 0.0).numpy()
        array([0., 2.], dtype=float32)
    """
    return prims.maximum(*binary_operands(x, y))


def minimum(x, y) -> Tensor:
    """Elementwise minimum.

    Example:
        >>> import primflow as pf
        >>> pf.minimum(pf.to_tensor([-1.0, 2.0]), 1.0).numpy()
        array([-1.,  1.], dtype=float32)
    """
    return prims.minimum(*binary_operands(x, y))


def atan2(x, y) -> Tensor:
    """Angle of the point (y, x), i.e. ``arctan(x / y)`` with the right quadrant.

    Example:
        >>> import primflow as pf
        >>> one = pf.to_tensor([1.0], "float64")
        >>> pf.atan2(one, one).numpy()  # pi / 4
        array([0.78539816])
    """
    x, y = binary_operands(float_operand(x), float_operand(y))
    return prims.atan2(x, y)


# ---- unary primitives ----------------------------------------------------------------------

def _with_example(doc, call, result):
    """``doc`` followed by a doctest example: ``call`` (after ``import primflow as pf``)
    printing ``result``."""
    return (f"{doc}\n\n    Example:\n        >>> import primflow as pf\n        >>> {call}\n"
            f"        {result}\n    ")


def _public_unary(prim):
    """The public op of a primitive declared with ``public=PublicOp(...)`` (its input made a
    floating tensor first, unless the declaration says otherwise)."""
    public = prim.public
    if public.floating:
        def op(x) -> Tensor:
            return prim(float_operand(x))
    else:
        def op(x) -> Tensor:
            return prim(as_tensor(x))

    op.__name__ = op.__qualname__ = public.name or prim.name
    op.__doc__ = _with_example(public.doc, public.example, public.result)
    return op


_PUBLIC_OPS = {}  # public name -> op, made once per primitive


def public_op(name):
    """The public op ``name`` made from a primitive declared with ``public=`` (``pf.exp``,
    ``pf.sigmoid`` from ``logistic``, ...), or None when no primitive declares it. Primitives
    declared after primflow is imported get theirs on first use (``pf.<name>``).

    Example:
        >>> public_op("sigmoid").__name__, public_op("no_such_op")
        ('sigmoid', None)
    """
    op = _PUBLIC_OPS.get(name)
    if op is None:
        for prim_name in primitives():
            prim = get_primitive(prim_name)
            if prim.public is not None and (prim.public.name or prim_name) == name:
                op = _PUBLIC_OPS[name] = _public_unary(prim)
    return op


# pf.exp, pf.sin, pf.sigmoid, ...: one per declaration with public=, none written here
PUBLIC_OPS = {(p.public.name or p.name): public_op(p.public.name or p.name)
              for p in map(get_primitive, primitives()) if p.public is not None}
globals().update(PUBLIC_OPS)

def neg(x) -> Tensor:
    """``-x``.

    Example:
        >>> import primflow as pf
        >>> pf.neg(pf.to_tensor([1.0, -2.0])).numpy()
        array([-1.,  2.], dtype=float32)
    """
    return prims.neg(as_tensor(x))



def abs(x) -> Tensor:  # noqa: A001 - public name
    """``|x|`` (gradient 0 at 0; the modulus of complex x, with gradient ``g z / |z|``).

    Example:
        >>> import primflow as pf
        >>> pf.abs(pf.to_tensor([-1.0, 2.0])).numpy()
        array([1., 2.], dtype=float32)
    """
    x = as_tensor(x)
    if x.dtype.is_complex:
        return _complex_abs(x)
    return prims.abs(x)


def _complex_abs(z):
    # sqrt(re^2 + im^2) with a 0 gradient at z == 0 (where sqrt's derivative is infinite):
    # the zero entries take sqrt(1) in a branch that select then drops
    re, im = prims.real(z), prims.imag(z)
    squared = prims.add(prims.mul(re, re), prims.mul(im, im))
    zero = full(squared._shape, 0.0, squared.dtype)
    at_zero = prims.eq(squared, zero)
    safe = prims.select(at_zero, full(squared._shape, 1.0, squared.dtype), squared)
    return prims.select(at_zero, zero, prims.sqrt(safe))


def sign(x) -> Tensor:
    """-1, 0 or 1 by the sign of x (not differentiable).

    Example:
        >>> import primflow as pf
        >>> pf.sign(pf.to_tensor([-3.0, 0.0, 2.0])).numpy()
        array([-1.,  0.,  1.], dtype=float32)
    """
    return prims.sign(as_tensor(x))


# ---- composites ----------------------------------------------------------------------------

def square(x) -> Tensor:
    """``x * x``.

    Example:
        >>> import primflow as pf
        >>> pf.square(pf.to_tensor([3.0])).numpy()
        array([9.], dtype=float32)
    """
    return prims.integer_pow(as_tensor(x), y=2)


def reciprocal(x) -> Tensor:
    """``1 / x``.

    Example:
        >>> import primflow as pf
        >>> pf.reciprocal(pf.to_tensor([4.0])).numpy()
        array([0.25], dtype=float32)
    """
    return divide(1.0, float_operand(x))


def tan(x) -> Tensor:
    """Tangent as sin / cos.

    Example:
        >>> import primflow as pf
        >>> pf.tan(pf.zeros([1])).numpy()
        array([0.], dtype=float32)
    """
    x = float_operand(x)
    return prims.div(prims.sin(x), prims.cos(x))


def sinh(x) -> Tensor:
    """Hyperbolic sine (e^x - e^-x) / 2.

    Example:
        >>> import primflow as pf
        >>> pf.sinh(pf.zeros([1])).numpy()
        array([0.], dtype=float32)
    """
    x = float_operand(x)
    half = full(x._shape, 0.5, x.dtype)
    return prims.mul(half, prims.sub(prims.exp(x), prims.exp(prims.neg(x))))


def cosh(x) -> Tensor:
    """Hyperbolic cosine (e^x + e^-x) / 2.

    Example:
        >>> import primflow as pf
        >>> pf.cosh(pf.zeros([1])).numpy()
        array([1.], dtype=float32)
    """
    x = float_operand(x)
    half = full(x._shape, 0.5, x.dtype)
    return prims.mul(half, prims.add(prims.exp(x), prims.exp(prims.neg(x))))


def log2(x) -> Tensor:
    """Base-2 logarithm.

    Example:
        >>> import primflow as pf
        >>> pf.log2(pf.to_tensor([8.0])).numpy()
        array([3.], dtype=float32)
    """
    x = float_operand(x)
    return prims.div(prims.log(x), full(x._shape, _math.log(2.0), x.dtype))


def log10(x) -> Tensor:
    """Base-10 logarithm.

    Example:
        >>> import primflow as pf
        >>> pf.log10(pf.to_tensor([100.0])).numpy()
        array([2.], dtype=float32)
    """
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
    """``x + weight * (y - x)``.

    Example:
        >>> import primflow as pf
        >>> pf.lerp(pf.zeros([2]), pf.to_tensor([2.0, 4.0]), 0.5).numpy()
        array([1., 2.], dtype=float32)
    """
    return add(x, multiply(weight, subtract(y, x)))


# ---- comparisons and logic -----------------------------------------------------------------

def _compare(prim, doc, call, result):
    def op(x, y) -> Tensor:
        return prim(*binary_operands(x, y))

    op.__name__ = prim.name
    op.__doc__ = _with_example(doc, call, result)
    return op


_PAIR = "pf.to_tensor([1.0, 2.0])"
equal = _compare(prims.eq, "Elementwise ``x == y`` (bool).", f"pf.equal({_PAIR}, 2.0).numpy()",
                 "array([False,  True])")
not_equal = _compare(prims.ne, "Elementwise ``x != y`` (bool).",
                     f"pf.not_equal({_PAIR}, 2.0).numpy()", "array([ True, False])")
less_than = _compare(prims.lt, "Elementwise ``x < y`` (bool).",
                     f"pf.less_than({_PAIR}, 2.0).numpy()", "array([ True, False])")
less_equal = _compare(prims.le, "Elementwise ``x <= y`` (bool).",
                      f"pf.less_equal({_PAIR}, 2.0).numpy()", "array([ True,  True])")
greater_than = _compare(prims.gt, "Elementwise ``x > y`` (bool).",
                        f"pf.greater_than({_PAIR}, 1.0).numpy()", "array([False,  True])")
greater_equal = _compare(prims.ge, "Elementwise ``x >= y`` (bool).",
                         f"pf.greater_equal({_PAIR}, 2.0).numpy()", "array([False,  True])")


def _as_bool(x):
    x = as_tensor(x)
    return x if x.dtype.is_bool else prims.ne(x, full(x._shape, 0, x.dtype))


def logical_and(x, y) -> Tensor:
    """Elementwise and of truth values.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([-1.0, 0.5, 2.0])
        >>> pf.logical_and(x > 0, x < 1).numpy()
        array([False,  True, False])
    """
    return prims.logical_and(*binary_operands(_as_bool(x), _as_bool(y)))


def logical_or(x, y) -> Tensor:
    """Elementwise or of truth values.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([-1.0, 0.5, 2.0])
        >>> pf.logical_or(x < 0, x > 1).numpy()
        array([ True, False,  True])
    """
    return prims.logical_or(*binary_operands(_as_bool(x), _as_bool(y)))


def logical_not(x) -> Tensor:
    """Elementwise not.

    Example:
        >>> import primflow as pf
        >>> pf.logical_not(pf.to_tensor([True, False])).numpy()
        array([False,  True])
    """
    return prims.logical_not(_as_bool(x))


def isnan(x) -> Tensor:
    """True where x is NaN (NaN is the only value unequal to itself).

    Example:
        >>> import primflow as pf
        >>> pf.isnan(pf.to_tensor([1.0, float('nan')])).numpy()
        array([False,  True])
    """
    x = as_tensor(x)
    return prims.ne(x, x)


def isfinite(x) -> Tensor:
    """True where x is neither NaN nor infinite.

    Example:
        >>> import primflow as pf
        >>> pf.isfinite(pf.to_tensor([1.0, float('inf'), float('nan')])).numpy()
        array([ True, False, False])
    """
    x = as_tensor(x)
    if not x.dtype.is_floating:
        return full(x._shape, True, dtypes.bool_)
    if x.dtype.is_complex:
        return prims.logical_and(isfinite(prims.real(x)), isfinite(prims.imag(x)))
    big = full(x._shape, float("inf"), x.dtype)
    return prims.logical_and(prims.eq(x, x), prims.lt(prims.abs(x), big))


def isinf(x) -> Tensor:
    """True where x is +inf or -inf.

    Example:
        >>> import primflow as pf
        >>> pf.isinf(pf.to_tensor([1.0, -float('inf')])).numpy()
        array([False,  True])
    """
    x = as_tensor(x)
    if not x.dtype.is_floating:
        return full(x._shape, False, dtypes.bool_)
    if x.dtype.is_complex:
        return prims.logical_or(isinf(prims.real(x)), isinf(prims.imag(x)))
    return prims.eq(prims.abs(x), full(x._shape, float("inf"), x.dtype))


class ComplexWarning(RuntimeWarning):
    """Casting a complex tensor to a real dtype keeps only the real part (NumPy's
    ``ComplexWarning``; take ``pf.real(x)`` first to say that is meant).

    Example:
        >>> import warnings, primflow as pf
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     pf.to_tensor([1 + 2j]).astype("float32").numpy()
        array([1.], dtype=float32)
        >>> caught[0].category.__name__
        'ComplexWarning'
    """


def warn_if_discarding_imaginary(x, dtype, name, stacklevel=3):
    """``ComplexWarning`` when the public cast ``name`` turns complex ``x`` into the real
    ``dtype`` (internal casts, such as a gradient rule's, take the real part on purpose)."""
    if x.dtype.is_complex and not dtype.is_complex:
        warnings.warn(f"{name}: casting a complex tensor ({x.dtype.name}{x.shape}) to "
                      f"{dtype.name} discards the imaginary part; use pf.real(x) (or "
                      f"pf.abs(x)) to say which real value you want", ComplexWarning,
                      stacklevel=stacklevel)


def astype(x, dtype) -> Tensor:
    """``x`` converted to ``dtype``; a new tensor even when the dtype is the same (the
    aliasing rule of ops/manipulation.py). Complex to real keeps the real part and warns
    (``ComplexWarning``), as NumPy and PyTorch do.

    Example:
        >>> import primflow as pf
        >>> pf.astype(pf.to_tensor([1.5, 2.5]), 'int64').numpy()
        array([1, 2])
    """
    x, dtype = as_tensor(x), dtypes.as_dtype(dtype)
    warn_if_discarding_imaginary(x, dtype, "astype")
    return prims.convert_element_type(x, dtype=dtype)


def scale(x, scale=1.0, bias=0.0, bias_after_scale=True) -> Tensor:
    """Paddle's ``scale``: ``scale * x + bias`` (or ``scale * (x + bias)``).

    Example:
        >>> import primflow as pf
        >>> pf.scale(pf.to_tensor([1.0, 2.0]), scale=2.0, bias=1.0).numpy()
        array([3., 5.], dtype=float32)
    """
    x = as_tensor(x)
    if bias_after_scale:
        return add(multiply(x, scale), bias)
    return multiply(add(x, bias), scale)
