"""Taylor-mode rule builders, written in primitives.

A truncated Taylor series of a value along a path is a list ``xs = [x0, x1, ..., xK]`` of
*normalised* coefficients, ``x(t) = sum_k xs[k] t^k`` (``xs[k] = x_k / k!`` in the
derivative form that ``pf.jet`` takes and returns). ``xs[0]`` is the primal; higher
entries may be ``None`` for an exact zero, which the rules skip (directional derivatives
start with ``[x, v, None, ..., None]``). A whole series is ``None`` for a constant input.

A primitive's Taylor rule is ``rule(primals, series, out, **params) -> (out, out_series)``
(``out``: the primal output when the caller already has it, else None);
``out_series`` is a full list (``out_series[0] is out``) or ``None`` when the output does
not depend on the varying inputs. The recurrences (see shared/notes/taylor-and-problems.md)
cost O(K^2) per element; every one is linear in the top input coefficient, which is what
the collapsed Taylor mode in ``autodiff/taylor.py`` relies on.

In eager mode the backend may also offer a fused kernel for a unary rule
(``Backend.fast_paths["taylor"]``, see ``backends/numpy_taylor.py``): the same recurrence
in cache-sized blocks with preallocated buffers, several times faster at high orders.
``backends/fast_paths.py: taylor_series`` decides when it may run; the rule written in
primitives defines the semantics and runs whenever something would see its primitives.
"""

from __future__ import annotations

import math

from ..backends import fast_paths
from ..core.primitive import RuleTemplate


# ---- zero-aware arithmetic on coefficients -------------------------------------------------

def add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return ew.add(a, b)


def sub(a, b):
    if b is None:
        return a
    if a is None:
        return ew.neg(b)
    return ew.sub(a, b)


def mul(a, b):
    if a is None or b is None:
        return None
    return ew.mul(a, b)


def scale(a, c):
    """``c * a`` for a Python number ``c``."""
    if a is None or c == 0:
        return None
    if c == 1:
        return a
    return ew.mul(a, full_like(a, c))


def divide(a, b):
    return None if a is None else ew.div(a, b)


def dense(c, like):
    """``c``, or zeros shaped like ``like`` for an exact zero (None)."""
    return zeros_like(like) if c is None else c


def order_of(series):
    for s in series:
        if s is not None:
            return len(s) - 1
    raise ValueError("no input carries a series")


def convolution(xs, ys, k, lo=1, hi=None, weighted=False, product=None):
    """``sum_{j=lo..hi} [j *] product(xs[j], ys[k-j])`` (``hi``: k; ``product``: the
    elementwise one), skipping terms with a zero (None) factor; None when all are zero.
    The sums of the recurrences below and of the matrix rules (``product=mm``)."""
    total = None
    for j in range(lo, k + 1 if hi is None else hi + 1):
        if xs[j] is not None and ys[k - j] is not None:
            term = (product or ew.mul)(xs[j], ys[k - j])
            total = add(total, scale(term, j) if weighted else term)
    return total


def all_series(primals, series):
    """Every input's series, a constant's as ``[primal, None, ...]``."""
    order = order_of(series)
    return [s if s is not None else [p] + [None] * order for p, s in zip(primals, series)]


# ---- generic rules (templates: each is specialised to the primitive declaring it) ---------

def sum_rule(combine):
    """Taylor rule of add or sub (``combine`` is ``add`` or ``sub`` above): coefficient-wise,
    where a missing side is an exact zero, so ``x + c`` for a constant ``c`` passes x's
    coefficients through instead of adding zeros to them."""

    def make(prim):
        def rule(primals, series, out=None, **params):
            out = prim.bind(*primals, **params) if out is None else out
            xs, ys = all_series(primals, series)
            return out, [out] + [combine(a, b) for a, b in zip(xs[1:], ys[1:])]

        return rule

    return RuleTemplate(make)


def _make_bilinear(prim):
    def rule(primals, series, out=None, **params):
        xs, ys = all_series(primals, series)
        out = prim.bind(primals[0], primals[1], **params) if out is None else out
        return out, [out] + [convolution(xs, ys, k, lo=0, product=lambda a, b: prim.bind(
            a, b, **params)) for k in range(1, len(xs))]

    return rule


# Taylor rule of a bilinear primitive (mul, dot_general): the Cauchy product
# ``z[k] = sum_j prim(x[j], y[k-j])``
bilinear_rule = RuleTemplate(_make_bilinear)


def unary_rule(recurrence):
    """Taylor rule of a unary primitive from ``recurrence(xs, z0, x0, **params) -> zs`` (a
    list from index 0); the primitive computes the primal. The backend's fused kernel for
    the primitive replaces the recurrence where ``fast_paths.taylor_series`` allows it."""

    def make(prim):
        def rule(primals, series, out=None, **params):
            (x0,), (xs,) = primals, series
            z0 = prim.bind(x0, **params) if out is None else out
            fast = fast_paths.taylor_series(prim.name, x0, z0, xs, params)
            return z0, fast if fast is not None else recurrence(xs, z0, x0, **params)

        return rule

    return RuleTemplate(make)


# ---- recurrences (each returns the full normalised series, zs[0] = z0) ---------------------

def exp_series(xs, z0):
    """z = exp(x): z[k] = (1/k) sum_{j=1..k} j x[j] z[k-j]."""
    zs = [z0]
    for k in range(1, len(xs)):
        zs.append(scale(convolution(xs, zs, k, weighted=True), 1.0 / k))
    return zs


def log_series(xs, z0):
    """z = log(x): z[k] = (x[k] - (1/k) sum_{j=1..k-1} j z[j] x[k-j]) / x[0]."""
    zs = [z0]
    for k in range(1, len(xs)):
        total = convolution(zs, xs, k, hi=k - 1, weighted=True)
        zs.append(divide(sub(xs[k], scale(total, 1.0 / k)), xs[0]))
    return zs


def sincos_series(xs, s0, c0):
    """s = sin(x), c = cos(x) together: s[k] = (1/k) sum j x[j] c[k-j],
    c[k] = -(1/k) sum j x[j] s[k-j]."""
    ss, cs = [s0], [c0]
    for k in range(1, len(xs)):
        ss.append(scale(convolution(xs, cs, k, weighted=True), 1.0 / k))
        cs.append(scale(convolution(xs, ss, k, weighted=True), -1.0 / k))
    return ss, cs


def derivative_product_series(xs, z0, w_of):
    """z' = w x' where w is a known function of the z series (tanh: 1 - z^2, logistic:
    z - z^2): z[k] = (1/k) sum_{j=1..k} j x[j] w[k-j], with w[m] = w_of(zs, m)."""
    zs, ws = [z0], [w_of([z0], 0)]
    for k in range(1, len(xs)):
        zs.append(scale(convolution(xs, ws, k, weighted=True), 1.0 / k))
        if k < len(xs) - 1:
            ws.append(w_of(zs, k))
    return zs


def square_coefficient(zs, m):
    """The m-th coefficient of z^2: sum_{i=0..m} z[i] z[m-i], summing each symmetric pair
    once (2 z[i] z[m-i] for i < m - i), which halves the multiplications."""
    total = None
    for i in range((m + 1) // 2):
        total = add(total, mul(zs[i], zs[m - i]))
    total = scale(total, 2.0)
    if m % 2 == 0:
        total = add(total, mul(zs[m // 2], zs[m // 2]))
    return total


def power_series(xs, z0, r):
    """z = x^r for a constant exponent r (number or tensor):
    z[k] = (1 / (k x[0])) sum_{j=1..k} ((r+1) j - k) x[j] z[k-j]."""
    zs = [z0]
    for k in range(1, len(xs)):
        total = None
        for j in range(1, k + 1):
            term = mul(xs[j], zs[k - j])
            if term is None:
                continue
            if isinstance(r, (int, float)):
                term = scale(term, (r + 1) * j - k)
            else:  # ((r + 1) j - k) = r j + (j - k), elementwise
                term = ew.mul(term, ew.add(ew.mul(r, full_like(r, j)), full_like(r, j - k)))
            total = add(total, term)
        zs.append(None if total is None else ew.div(total, scale(xs[0], k)))
    return zs


def cauchy_series(xs, ys):
    """Coefficients of the product of two series."""
    return [convolution(xs, ys, k, lo=0) for k in range(len(xs))]


def quotient_series(us, ys, z0):
    """z = u / y: z[k] = (u[k] - sum_{j=1..k} y[j] z[k-j]) / y[0]."""
    zs = [z0]
    for k in range(1, len(us)):
        zs.append(divide(sub(us[k], convolution(ys, zs, k)), ys[0]))
    return zs


def select_series(pred, a_series, b_series):
    """Coefficients of the branch each element takes (piecewise functions)."""
    return [None if a is None and b is None else compare.select(pred, dense(a, b), dense(b, a))
            for a, b in zip(a_series, b_series)]


TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# Imported last: the primitive files import this module to build their rules, and nothing
# above calls into them at import time.
from . import compare, elementwise as ew  # noqa: E402
from ._util import full_like, zeros_like  # noqa: E402
