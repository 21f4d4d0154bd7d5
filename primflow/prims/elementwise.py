"""Elementwise primitives: unary math and binary arithmetic.

Binary primitives take two tensors of the same shape and dtype; broadcasting and type
promotion happen in ``primflow.ops``. Each primitive's rules sit beside it:
``jvp``/``vjp`` are tuples with one rule per input, ``rule(g, out, *primals, **params)``.
"""

from __future__ import annotations

import math

from ..core.primitive import Primitive
from . import compare
from ._batching import elementwise_batch
from ._util import binary_infer, float_unary_infer, full_like, same_aval, zeros_like

_F = "elementwise"


def _unary(name, jvp, vjp=None, saves_out=False, infer=None, doc="", saves_inputs=None):
    """A unary primitive whose vjp equals its jvp (true for every elementwise unary op:
    the Jacobian is diagonal, hence symmetric)."""
    prim = Primitive(name, family=_F, infer=infer or float_unary_infer(name),
                     jvp=None if jvp is None else (jvp,),
                     vjp=None if jvp is None else ((vjp or jvp),),
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
tanh = _unary("tanh", lambda g, out, x: mul(g, sub(full_like(out, 1.0), mul(out, out))),
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
                        jvp=(_integer_pow_rule,), vjp=(_integer_pow_rule,),
                        doc="x ** y for a static integer y")
integer_pow.batch = elementwise_batch(integer_pow)


# ---- binary --------------------------------------------------------------------------------

def _binary(name, jvp, vjp, saves_out=False, saves_inputs=None):
    prim = Primitive(name, family=_F, infer=binary_infer(name), jvp=jvp, vjp=vjp,
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
