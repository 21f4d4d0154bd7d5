"""Default kernels: what a backend may leave out because it follows from its other kernels.

A backend must implement the required kernels (``docs/backend-contract.md`` counts them);
each kernel listed here is optional: when a backend's table lacks it (and the backend
derives none, ``Backend.derive_kernel``), ``Backend.kernel_for`` builds it from this
module, once, composed of the backend's other kernels (constants from its ``full``
method). Backends with a faster kernel keep theirs (the NumPy backend has all of them:
``np.subtract``, ``np.not_equal``, ...).

The compositions are exact where the primitive's definition allows: ``sub(x, y)`` is
``add(x, neg(y))`` (negation is exact), ``gt(x, y)`` is ``lt(y, x)``, ``ceil(x)`` is
``-floor(-x)``; ``minimum`` and ``reduce_min``/``argmin`` keep NaN propagation and first
occurrences. ``random_*`` and the LU helpers, which have no counterpart in the array API
standard, run on the host (NumPy's generator from the same key, so every backend draws the
same numbers; LAPACK's LU) and are copied in.

Example:
    >>> from primflow.backends import get_backend
    >>> DEFAULTS["sub"].composed_from
    ('add', 'neg')
    >>> sub = DEFAULTS["sub"].build(get_backend())
    >>> sub(get_backend().asarray([3.0], None), get_backend().asarray([1.0], None)).tolist()
    [2.0]
"""

from __future__ import annotations

import numpy as np

from ..core import dtypes


class Default:
    """A default kernel: ``build(backend) -> kernel`` and the kernels it is composed of
    (``composed_from``; the contract page lists them) or, for a host computation, ``how``."""

    __slots__ = ("build", "composed_from", "how")

    def __init__(self, build, composed_from=(), how=""):
        self.build, self.composed_from, self.how = build, tuple(composed_from), how

    def describe(self) -> str:
        """How the default computes, for the contract page."""
        if self.composed_from:
            return "composed from " + ", ".join(f"`{k}`" for k in self.composed_from)
        return self.how


DEFAULTS = {}


def _default(name, composed_from=(), how=""):
    def register(build):
        DEFAULTS[name] = Default(build, composed_from, how)
        return build
    return register


def _like(backend, x, value):
    """A 0-d array of ``x``'s dtype holding ``value`` (broadcasts against ``x``)."""
    return backend.full((), value, backend.dtype_of(x))


# ---- arithmetic ------------------------------------------------------------------------------

@_default("sub", ("add", "neg"))
def _sub(b):
    add, neg = b.kernel_for("add"), b.kernel_for("neg")
    return lambda x, y: add(x, neg(y))


@_default("rsqrt", ("div", "sqrt"))
def _rsqrt(b):
    div, sqrt = b.kernel_for("div"), b.kernel_for("sqrt")
    return lambda x: div(_like(b, x, 1), sqrt(x))


@_default("integer_pow", ("mul", "div"))
def _integer_pow(b):
    mul, div = b.kernel_for("mul"), b.kernel_for("div")

    def integer_pow(x, *, y):
        if y == 0:
            return b.full(tuple(x.shape), 1, b.dtype_of(x))
        power, result, n = x, None, abs(y)
        while n:  # binary exponentiation: ceil(log2 |y|) + popcount(|y|) products
            if n & 1:
                result = power if result is None else mul(result, power)
            n >>= 1
            if n:
                power = mul(power, power)
        return div(_like(b, x, 1), result) if y < 0 else result
    return integer_pow


@_default("logistic", ("exp", "neg", "abs", "add", "div", "ge", "select"))
def _logistic(b):
    exp, neg, abs_, add = b.kernel_for("exp"), b.kernel_for("neg"), b.kernel_for("abs"), \
        b.kernel_for("add")
    div, ge, select = b.kernel_for("div"), b.kernel_for("ge"), b.kernel_for("select")

    def logistic(x):
        # 1 / (1 + exp(-x)) without overflow: exp(-|x|) <= 1 on both branches
        one = _like(b, x, 1)
        e = exp(neg(abs_(x)))
        positive = ge(x, _like(b, x, 0))
        return select(positive, div(one, add(one, e)), div(e, add(one, e)))
    return logistic


@_default("ceil", ("floor", "neg"))
def _ceil(b):
    floor, neg = b.kernel_for("floor"), b.kernel_for("neg")
    return lambda x: neg(floor(neg(x)))


@_default("sign", ("lt", "sub", "convert_element_type", "ne", "select"))
def _sign(b):
    lt, sub = b.kernel_for("lt"), b.kernel_for("sub")
    convert, ne, select = (b.kernel_for("convert_element_type"), b.kernel_for("ne"),
                           b.kernel_for("select"))

    def sign(x):
        dtype = b.dtype_of(x)
        zero = _like(b, x, 0)
        signs = sub(convert(lt(zero, x), dtype=dtype), convert(lt(x, zero), dtype=dtype))
        return select(ne(x, x), x, signs)  # NaN stays NaN
    return sign


@_default("minimum", ("lt", "ne", "logical_or", "select"))
def _minimum(b):
    lt, ne, logical_or, select = (b.kernel_for("lt"), b.kernel_for("ne"),
                                  b.kernel_for("logical_or"), b.kernel_for("select"))
    # y where y < x or y is NaN, else x (a NaN x stays): NaN propagates like maximum's
    return lambda x, y: select(logical_or(lt(y, x), ne(y, y)), y, x)


# ---- comparisons and logic -------------------------------------------------------------------

@_default("ne", ("eq", "logical_not"))
def _ne(b):
    eq, logical_not = b.kernel_for("eq"), b.kernel_for("logical_not")
    return lambda x, y: logical_not(eq(x, y))


@_default("gt", ("lt",))
def _gt(b):
    lt = b.kernel_for("lt")
    return lambda x, y: lt(y, x)


@_default("ge", ("le",))
def _ge(b):
    le = b.kernel_for("le")
    return lambda x, y: le(y, x)


@_default("logical_or", ("logical_and", "logical_not"))
def _logical_or(b):
    logical_and, logical_not = b.kernel_for("logical_and"), b.kernel_for("logical_not")
    return lambda x, y: logical_not(logical_and(logical_not(x), logical_not(y)))


# ---- reductions: the minimum is the negated maximum of the negation --------------------------

def _negation(b):
    """``(flip, unflip)``: an order-reversing map for ``x``'s dtype and its inverse (bools
    negate logically; unsigned integers widen to int64 first, where ``-x`` cannot wrap)."""
    neg, logical_not = b.kernel_for("neg"), b.kernel_for("logical_not")
    convert = b.kernel_for("convert_element_type")

    def flip(x):
        dtype = b.dtype_of(x)
        if dtype.is_bool:
            return logical_not(x), logical_not
        if dtype.name.startswith("uint"):
            return neg(convert(x, dtype=dtypes.int64)), lambda r: convert(neg(r), dtype=dtype)
        return neg(x), neg
    return flip


@_default("reduce_min", ("reduce_max", "neg", "logical_not", "convert_element_type"))
def _reduce_min(b):
    reduce_max, flip = b.kernel_for("reduce_max"), _negation(b)

    def reduce_min(x, *, axes):
        flipped, unflip = flip(x)
        return unflip(reduce_max(flipped, axes=axes))
    return reduce_min


@_default("argmin", ("argmax", "neg", "logical_not", "convert_element_type"))
def _argmin(b):
    argmax, flip = b.kernel_for("argmax"), _negation(b)

    def argmin(x, *, axis, index_dtype):
        return argmax(flip(x)[0], axis=axis, index_dtype=index_dtype)
    return argmin


# ---- creation --------------------------------------------------------------------------------

@_default("full", how="the backend's `full(shape, value, dtype)` method")
def _full(b):
    return lambda *, shape, value, dtype: b.full(tuple(shape), value, dtype)


@_default("iota", ("cumsum", "sub", "broadcast_in_dim"))
def _iota(b):
    cumsum, sub = b.kernel_for("cumsum"), b.kernel_for("sub")
    broadcast = b.kernel_for("broadcast_in_dim")

    def iota(*, shape, dtype, dimension):
        ones = b.full((shape[dimension],), 1, dtype)
        line = sub(cumsum(ones, axis=0, reverse=False), b.full((), 1, dtype))
        return broadcast(line, shape=tuple(shape), broadcast_dimensions=(dimension,))
    return iota


@_default("conj", ("complex", "real", "imag", "neg"))
def _conj(b):
    complex_, real, imag, neg = (b.kernel_for("complex"), b.kernel_for("real"),
                                 b.kernel_for("imag"), b.kernel_for("neg"))

    def conj(z):
        if not b.dtype_of(z).is_complex:
            return z
        return complex_(real(z), neg(imag(z)))
    return conj


# ---- on the host: no counterpart in the array API standard -----------------------------------

def _host_dtype(dtype):
    from .numpy_backend import NumpyBackend  # noqa: PLC0415 - the host's dtype map

    return NumpyBackend().native_dtype(dtype)


@_default("random_uniform", how="drawn on the host by NumPy's generator from the key "
                                 "(every backend draws the same numbers), copied in")
def _random_uniform(b):
    def random_uniform(*, shape, dtype, key):
        host = np.random.default_rng(key).random(shape, dtype=_host_dtype(dtype))
        return b.asarray(host, dtype)
    return random_uniform


@_default("random_normal", how="drawn on the host by NumPy's generator from the key "
                                "(every backend draws the same numbers), copied in")
def _random_normal(b):
    def random_normal(*, shape, dtype, key):
        host = np.random.default_rng(key).standard_normal(shape, dtype=_host_dtype(dtype))
        return b.asarray(host, dtype)
    return random_normal


def _on_host(name):
    def build(b):
        from .numpy_numerics import KERNELS  # noqa: PLC0415 - LAPACK on the host

        kernel = KERNELS[name]

        def run(*arrays, **params):
            return b.asarray(kernel(*[b.to_numpy(a) for a in arrays], **params), None)
        return run
    return build


for _name in ("lu", "lu_pivots", "lu_permutation"):
    _default(_name, how="the NumPy backend's LAPACK kernel on the host, copied in")(
        _on_host(_name))
