"""Elementwise primitives: unary math and binary arithmetic.

Binary primitives take two tensors of the same shape and dtype; broadcasting and type
promotion happen in ``primflow.ops``. Each primitive's rules sit beside it:
``jvp``/``vjp`` are tuples with one rule per input, ``rule(g, out, *primals, **params)``.
"""

from __future__ import annotations

import math

from ..core.primitive import Primitive
from . import _taylor as tl, compare
from ._batching import elementwise_batch
from .complex import holomorphic_vjp, reject_complex
from ._util import binary_infer, float_unary_infer, full_like, same_aval, zeros_like

_F = "elementwise"

# defined on real numbers only: complex inputs get a clear error (prims/complex.py); every
# other primitive here is holomorphic, so its complex vjp conjugates its real rule
_REAL_ONLY = frozenset(("abs", "sign", "erf", "logistic", "floor", "ceil", "round",
                        "maximum", "minimum", "atan2"))


def _unary(name, jvp, vjp=None, saves_out=False, infer=None, doc="", saves_inputs=None):
    """A unary primitive whose vjp equals its jvp (true for every elementwise unary op:
    the Jacobian is diagonal, hence symmetric)."""
    infer = infer or float_unary_infer(name)
    prim = Primitive(name, family=_F,
                     infer=reject_complex(name, infer) if name in _REAL_ONLY else infer,
                     jvp=None if jvp is None else (jvp,),
                     vjp=None if jvp is None else (holomorphic_vjp(vjp or jvp),),
                     saves_out=saves_out, saves_inputs=saves_inputs, doc=doc)
    prim.batch = elementwise_batch(prim)
    return prim


# ---- unary ---------------------------------------------------------------------------------

neg = _unary("neg", lambda g, out, x: neg(g), infer=same_aval, doc="-x", saves_inputs=())

exp = _unary("exp", lambda g, out, x: mul(g, out), saves_out=True, doc="e**x")

log = _unary("log", lambda g, out, x: div(g, x), doc="natural logarithm")

log1p = _unary("log1p", lambda g, out, x: div(g, add(x, full_like(x, 1.0))), doc="log(1 + x)")

# d expm1 = exp(x) = out + 1
expm1 = _unary("expm1", lambda g, out, x: mul(g, add(out, full_like(out, 1.0))),
               saves_out=True, doc="exp(x) - 1")

sin = _unary("sin", lambda g, out, x: mul(g, cos(x)), doc="sine")

cos = _unary("cos", lambda g, out, x: neg(mul(g, sin(x))), doc="cosine")

# d tanh = 1 - tanh^2, reusing the saved output
# integer_pow (not mul(out, out)): its own rule multiplies by the small factor 2 out first, so
# differentiating this rule again (Hessians) makes fewer passes over large tangents.
tanh = _unary("tanh", lambda g, out, x: mul(g, sub(full_like(out, 1.0), integer_pow(out, y=2))),
              saves_out=True, doc="hyperbolic tangent")

# d sqrt(x) = 1 / (2 sqrt(x))
sqrt = _unary("sqrt", lambda g, out, x: div(g, mul(full_like(out, 2.0), out)),
              saves_out=True, doc="square root")

# d x^(-1/2) = -1/2 x^(-3/2) = -1/2 * out / x
rsqrt = _unary("rsqrt", lambda g, out, x: mul(g, mul(full_like(x, -0.5), div(out, x))),
               saves_out=True, doc="1 / sqrt(x)")


def _abs_rule(g, out, x):
    # sign(x) * g without the sign primitive (which is non-differentiable): 0 at x == 0.
    zero = zeros_like(x)
    return compare.select(compare.gt(x, zero), g,
                          compare.select(compare.lt(x, zero), neg(g), zeros_like(g)))


abs = _unary("abs", _abs_rule, infer=same_aval, doc="|x|")  # noqa: A001 - primitive name

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

# d erf = 2/sqrt(pi) exp(-x^2)
erf = _unary("erf", lambda g, out, x: mul(
    g, mul(full_like(x, _TWO_OVER_SQRT_PI), exp(neg(mul(x, x))))), doc="error function")

# d logistic = s (1 - s)
logistic = _unary("logistic", lambda g, out, x: mul(
    g, mul(out, sub(full_like(out, 1.0), out))), saves_out=True, doc="1 / (1 + exp(-x))")

# Step functions: the derivative is zero almost everywhere and undefined at the jumps. A
# silent zero gradient is a classic bug in training code, so asking for one raises
# NonDifferentiableError; detach the input to state that a zero gradient is intended.
sign = _unary("sign", None, infer=same_aval, doc="-1, 0 or 1 (not differentiable)")
floor = _unary("floor", None, doc="round down (not differentiable)")
ceil = _unary("ceil", None, doc="round up (not differentiable)")
round = _unary("round", None, doc="round half to even (not differentiable)")  # noqa: A001


def _integer_pow_infer(x, *, y):
    if not isinstance(y, int):
        raise TypeError(f"integer_pow needs an int exponent, got {y!r}")
    if y < 0 and not x.dtype.is_floating:
        raise TypeError("integer_pow: negative exponents need a floating tensor")
    return same_aval(x)


def _integer_pow_rule(g, out, x, *, y):
    if y == 0:
        return zeros_like(g)
    lower = x if y == 2 else (full_like(x, 1.0) if y == 1 else integer_pow(x, y=y - 1))
    return mul(g, mul(full_like(x, float(y)), lower))


integer_pow = Primitive("integer_pow", family=_F, infer=_integer_pow_infer,
                        jvp=(_integer_pow_rule,), vjp=(holomorphic_vjp(_integer_pow_rule),),
                        doc="x ** y for a static integer y")
integer_pow.batch = elementwise_batch(integer_pow)


# ---- binary --------------------------------------------------------------------------------

def _binary(name, jvp, vjp, saves_out=False, saves_inputs=None):
    infer = binary_infer(name)
    prim = Primitive(name, family=_F,
                     infer=reject_complex(name, infer) if name in _REAL_ONLY else infer,
                     jvp=jvp, vjp=tuple(holomorphic_vjp(rule) for rule in vjp),
                     saves_out=saves_out, saves_inputs=saves_inputs)
    prim.batch = elementwise_batch(prim)
    return prim


add = _binary("add",
              jvp=(lambda g, out, x, y: g, lambda g, out, x, y: g),
              vjp=(lambda g, out, x, y: g, lambda g, out, x, y: g), saves_inputs=())

sub = _binary("sub",
              jvp=(lambda g, out, x, y: g, lambda g, out, x, y: neg(g)),
              vjp=(lambda g, out, x, y: g, lambda g, out, x, y: neg(g)), saves_inputs=())

mul = _binary("mul",
              jvp=(lambda g, out, x, y: mul(g, y), lambda g, out, x, y: mul(x, g)),
              vjp=(lambda g, out, x, y: mul(g, y), lambda g, out, x, y: mul(x, g)))

# d(x/y)/dy = -x/y^2 = -out/y
div = _binary("div",
              jvp=(lambda g, out, x, y: div(g, y),
                   lambda g, out, x, y: neg(div(mul(g, out), y))),
              vjp=(lambda g, out, x, y: div(g, y),
                   lambda g, out, x, y: neg(div(mul(g, out), y))),
              saves_out=True)


def _pow_x_rule(g, out, x, y):
    # y * x^(y-1)
    return mul(g, mul(y, pow(x, sub(y, full_like(y, 1.0)))))


def _pow_y_rule(g, out, x, y):
    # x^y log(x); defined as 0 where x == 0 (the limit from the right for y > 0)
    zero = zeros_like(x)
    safe_log = compare.select(compare.eq(x, zero), zero, log(
        compare.select(compare.eq(x, zero), full_like(x, 1.0), x)))
    return mul(g, mul(out, safe_log))


pow = _binary("pow", jvp=(_pow_x_rule, _pow_y_rule), vjp=(_pow_x_rule, _pow_y_rule),  # noqa: A001
              saves_out=True)


def _minmax_rules(winner):
    # Gradient goes to the winning input; ties split it evenly (as JAX and PyTorch do).
    def x_rule(g, out, x, y):
        half = mul(g, full_like(g, 0.5))
        return compare.select(winner(x, y), g, compare.select(compare.eq(x, y), half,
                                                              zeros_like(g)))

    def y_rule(g, out, x, y):
        half = mul(g, full_like(g, 0.5))
        return compare.select(winner(y, x), g, compare.select(compare.eq(x, y), half,
                                                              zeros_like(g)))

    return (x_rule, y_rule)


maximum = _binary("maximum", jvp=_minmax_rules(compare.gt), vjp=_minmax_rules(compare.gt))
minimum = _binary("minimum", jvp=_minmax_rules(compare.lt), vjp=_minmax_rules(compare.lt))


# atan2(x, y) = angle of (y, x): d/dx = y / (x^2 + y^2), d/dy = -x / (x^2 + y^2)
def _atan2_x_rule(g, out, x, y):
    return div(mul(g, y), add(mul(x, x), mul(y, y)))


def _atan2_y_rule(g, out, x, y):
    return neg(div(mul(g, x), add(mul(x, x), mul(y, y))))


atan2 = _binary("atan2", jvp=(_atan2_x_rule, _atan2_y_rule), vjp=(_atan2_x_rule, _atan2_y_rule))


# ---- Taylor rules: truncated series through each primitive (builders in _taylor.py) --------

def _sqrt_series(xs, z0, x0):
    # z^2 = x: z[k] = (x[k] - sum_{j=1..k-1} z[j] z[k-j]) / (2 z[0])
    zs = [z0]
    two_z0 = tl.scale(z0, 2.0)
    for k in range(1, len(xs)):
        total = None
        for j in range(1, k):
            total = tl.add(total, tl.mul(zs[j], zs[k - j]))
        zs.append(tl.divide(tl.sub(xs[k], total), two_z0))
    return zs


def _tanh_w(zs, m):  # tanh' = 1 - tanh^2, as a series in the output's coefficients
    return sub(full_like(zs[0], 1.0), mul(zs[0], zs[0])) if m == 0 else tl.scale(
        tl.square_coefficient(zs, m), -1.0)


def _logistic_w(zs, m):  # logistic' = s - s^2
    return tl.sub(zs[m], tl.square_coefficient(zs, m))


def _erf_series(xs, z0, x0):
    # erf' = 2/sqrt(pi) exp(-x^2): series of e = exp(-x^2), then z' = c e x'
    q = [tl.scale(tl.square_coefficient(xs, m), -1.0) for m in range(len(xs))]
    e = tl.exp_series(q, exp(q[0]))
    zs = [z0]
    for k in range(1, len(xs)):
        total = None
        for j in range(1, k + 1):
            total = tl.add(total, tl.scale(tl.mul(xs[j], e[k - j]), j))
        zs.append(tl.scale(total, tl.TWO_OVER_SQRT_PI / k))
    return zs


def _abs_series(xs, z0, x0):
    negated = [None if c is None else neg(c) for c in xs]
    return [z0] + tl.select_series(compare.ge(x0, zeros_like(x0)), xs, negated)[1:]


neg.taylor = tl.linear_rule(neg)
exp.taylor = tl.unary_rule(lambda xs, z0, x0: tl.exp_series(xs, z0))(exp)
log.taylor = tl.unary_rule(lambda xs, z0, x0: tl.log_series(xs, z0))(log)
log1p.taylor = tl.unary_rule(lambda xs, z0, x0: tl.log_series(
    [add(x0, full_like(x0, 1.0))] + xs[1:], z0))(log1p)
expm1.taylor = tl.unary_rule(lambda xs, z0, x0: [z0] + tl.exp_series(
    xs, add(z0, full_like(z0, 1.0)))[1:])(expm1)
sin.taylor = tl.unary_rule(lambda xs, z0, x0: tl.sincos_series(xs, z0, cos(x0))[0])(sin)
cos.taylor = tl.unary_rule(lambda xs, z0, x0: tl.sincos_series(xs, sin(x0), z0)[1])(cos)
tanh.taylor = tl.unary_rule(lambda xs, z0, x0: tl.derivative_product_series(
    xs, z0, _tanh_w))(tanh)
logistic.taylor = tl.unary_rule(lambda xs, z0, x0: tl.derivative_product_series(
    xs, z0, _logistic_w))(logistic)
sqrt.taylor = tl.unary_rule(_sqrt_series)(sqrt)
rsqrt.taylor = tl.unary_rule(lambda xs, z0, x0: tl.power_series(xs, z0, -0.5))(rsqrt)
erf.taylor = tl.unary_rule(_erf_series)(erf)
abs.taylor = tl.unary_rule(_abs_series)(abs)
for _prim in (sign, floor, ceil, round):
    _prim.taylor = tl.nondifferentiable_rule(_prim)


def _integer_pow_series(xs, z0, x0, *, y):
    if y == 0:
        return [z0] + [None] * (len(xs) - 1)
    # x^|y| by repeated squaring of Cauchy products: exact, no division by x0 (x0 may be 0)
    result, base, n = None, xs, -y if y < 0 else y
    while n:
        if n & 1:
            result = base if result is None else tl.cauchy_series(result, base)
        n >>= 1
        if n:
            base = tl.cauchy_series(base, base)
    if y < 0:  # 1 / x^|y|
        one = [full_like(x0, 1.0)] + [None] * (len(xs) - 1)
        return tl.quotient_series(one, result, z0)
    return [z0] + result[1:]


integer_pow.taylor = tl.unary_rule(_integer_pow_series)(integer_pow)
add.taylor = tl.sum_rule(add, tl.add)
sub.taylor = tl.sum_rule(sub, tl.sub)
mul.taylor = tl.bilinear_rule(mul)
neg.linear = add.linear = sub.linear = True
mul.linear_in = frozenset((0, 1))


def _div_taylor(primals, series, out=None):
    order = tl.order_of(series)
    out = div(*primals) if out is None else out
    us = tl.full_series(series[0], primals[0], order)
    ys = tl.full_series(series[1], primals[1], order)
    return out, tl.quotient_series(us, ys, out)


def _pow_taylor(primals, series, out=None):
    order = tl.order_of(series)
    (x0, y0) = primals
    out = pow(x0, y0) if out is None else out
    xs = tl.full_series(series[0], x0, order)
    if series[1] is None:  # constant exponent: the power recurrence
        return out, tl.power_series(xs, out, y0)
    # x^y = exp(y log x)
    logs = tl.log_series(xs, log(x0))
    return out, tl.exp_series(tl.cauchy_series(series[1], logs), out)


def _minmax_taylor(prim, winner):
    def rule(primals, series, out=None):
        order = tl.order_of(series)
        x0, y0 = primals
        out = prim(x0, y0) if out is None else out
        xs = tl.full_series(series[0], x0, order)
        ys = tl.full_series(series[1], y0, order)
        # ties take the average, as the jvp rule does
        halves = [None if a is None and b is None else tl.scale(tl.add(a, b), 0.5)
                  for a, b in zip(xs, ys)]
        tie_or_other = tl.select_series(compare.eq(x0, y0), halves, ys)
        return out, [out] + tl.select_series(winner(x0, y0), xs, tie_or_other)[1:]

    return rule


def _atan2_taylor(primals, series, out=None):
    # z' = (y x' - x y') / (x^2 + y^2): build that series to order K-1, z[k] = h[k-1] / k
    order = tl.order_of(series)
    x0, y0 = primals
    out = atan2(x0, y0) if out is None else out
    xs = tl.full_series(series[0], x0, order)
    ys = tl.full_series(series[1], y0, order)

    def derivative(s):  # coefficients of s'(t)
        return [tl.scale(s[m + 1], m + 1) for m in range(order)]

    numerator = [tl.sub(a, b) for a, b in zip(tl.cauchy_series(ys[:order], derivative(xs)),
                                               tl.cauchy_series(xs[:order], derivative(ys)))]
    denominator = [tl.add(a, b) for a, b in zip(tl.cauchy_series(xs[:order], xs[:order]),
                                                 tl.cauchy_series(ys[:order], ys[:order]))]
    h0 = numerator[0] if numerator[0] is not None else zeros_like(out)
    h = tl.quotient_series(numerator, denominator, div(h0, denominator[0]))
    return out, [out] + [tl.scale(h[k - 1], 1.0 / k) for k in range(1, order + 1)]


div.taylor = _div_taylor
div.linear_in = frozenset((0,))  # x / y is linear in x
pow.taylor = _pow_taylor
maximum.taylor = _minmax_taylor(maximum, compare.gt)
minimum.taylor = _minmax_taylor(minimum, compare.lt)
atan2.taylor = _atan2_taylor
