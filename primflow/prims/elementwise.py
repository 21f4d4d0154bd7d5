"""Elementwise primitives: unary math and binary arithmetic.

Binary primitives take two tensors of the same shape and dtype; broadcasting and type
promotion happen in ``primflow.ops``. Each primitive is one declaration (see
``core/primitive.py``): its Jacobian is diagonal, so its ``jvp`` rules (one per input,
``rule(t, out, *primals, **params)``) are also its vjp rules; the Taylor recurrences are
built from ``_taylor.py``.
"""

from __future__ import annotations

import math

from ..core.lowering import Lowering, PublicOp
from ..core.primitive import Primitive, RuleTemplate
from . import _taylor as tl, compare
from ._util import binary_infer, float_unary_infer, full_like, same_aval, zeros_like
from .families import ELEMENTWISE_BINARY, ELEMENTWISE_TRANSCENDENTAL, ELEMENTWISE_UNARY


# ---- unary ---------------------------------------------------------------------------------

def _neg_transpose(g, out, *primals):  # also sub's transpose in y
    return neg(g)


neg = Primitive("neg", family=ELEMENTWISE_UNARY,
                lowering=Lowering(numpy="negative", array_api="negative", c="-{0}", numba="(-{0})"),
                infer=same_aval, linear=True, transpose=(_neg_transpose,), doc="-x")


def _exp_jvp(g, out, x):
    return mul(g, out)


exp = Primitive("exp", family=ELEMENTWISE_TRANSCENDENTAL,
                lowering=Lowering(c="exp({0})", numba="np.exp({0})"),
                infer=float_unary_infer("exp"), jvp=(_exp_jvp,), saves_out=True,
                taylor=tl.unary_rule(lambda xs, z0, x0: tl.exp_series(xs, z0)), doc="e**x",
                public=PublicOp("Elementwise e**x.", "pf.exp(pf.to_tensor([0.0, 1.0])).numpy()",
                                "array([1.      , 2.718282], dtype=float32)"))


def _log_jvp(g, out, x):
    return div(g, x)


log = Primitive("log", family=ELEMENTWISE_TRANSCENDENTAL,
                lowering=Lowering(c="log({0})", numba="np.log({0})"),
                infer=float_unary_infer("log"), jvp=(_log_jvp,),
                taylor=tl.unary_rule(lambda xs, z0, x0: tl.log_series(xs, z0)),
                doc="natural logarithm",
                public=PublicOp("Natural logarithm.", "pf.log(pf.to_tensor([1.0, 2.0])).numpy()",
                                "array([0.       , 0.6931472], dtype=float32)"))


def _log1p_jvp(g, out, x):
    return div(g, add(x, full_like(x, 1.0)))


def _log1p_series(xs, z0, x0):
    return tl.log_series([add(x0, full_like(x0, 1.0))] + xs[1:], z0)


log1p = Primitive("log1p", family=ELEMENTWISE_TRANSCENDENTAL,
                  lowering=Lowering(c="log1p({0})", numba="np.log1p({0})"),
                  infer=float_unary_infer("log1p"),
                  jvp=(_log1p_jvp,), taylor=tl.unary_rule(_log1p_series), doc="log(1 + x)",
                  public=PublicOp('log(1 + x), accurate near 0.',
                                  'pf.log1p(pf.to_tensor([0.0, 1e-8], "float64")).numpy()',
                                  'array([0.00000000e+00, 9.99999995e-09])'))


def _expm1_jvp(g, out, x):  # d expm1 = exp(x) = out + 1
    return mul(g, add(out, full_like(out, 1.0)))


def _expm1_series(xs, z0, x0):
    return [z0] + tl.exp_series(xs, add(z0, full_like(z0, 1.0)))[1:]


expm1 = Primitive("expm1", family=ELEMENTWISE_TRANSCENDENTAL,
                  lowering=Lowering(c="expm1({0})", numba="np.expm1({0})"),
                  infer=float_unary_infer("expm1"), jvp=(_expm1_jvp,), saves_out=True,
                  taylor=tl.unary_rule(_expm1_series), doc="exp(x) - 1",
                  public=PublicOp('exp(x) - 1, accurate near 0.',
                                  'pf.expm1(pf.to_tensor([0.0, 1e-8], "float64")).numpy()',
                                  'array([0.00000000e+00, 1.00000001e-08])'))


def _sin_jvp(g, out, x):
    return mul(g, cos(x))


sin = Primitive("sin", family=ELEMENTWISE_TRANSCENDENTAL,
                lowering=Lowering(c="sin({0})", numba="np.sin({0})"),
                infer=float_unary_infer("sin"), jvp=(_sin_jvp,),
                taylor=tl.unary_rule(lambda xs, z0, x0: tl.sincos_series(xs, z0, cos(x0))[0]),
                doc="sine",
                public=PublicOp("Sine.", "pf.sin(pf.to_tensor([0.0, 1.0])).numpy()",
                                "array([0.      , 0.841471], dtype=float32)"))


def _cos_jvp(g, out, x):
    return neg(mul(g, sin(x)))


cos = Primitive("cos", family=ELEMENTWISE_TRANSCENDENTAL,
                lowering=Lowering(c="cos({0})", numba="np.cos({0})"),
                infer=float_unary_infer("cos"), jvp=(_cos_jvp,),
                taylor=tl.unary_rule(lambda xs, z0, x0: tl.sincos_series(xs, sin(x0), z0)[1]),
                doc="cosine",
                public=PublicOp("Cosine.", "pf.cos(pf.to_tensor([0.0, 1.0])).numpy()",
                                "array([1.       , 0.5403023], dtype=float32)"))


# d tanh = 1 - tanh^2, reusing the saved output
# integer_pow (not mul(out, out)): its own rule multiplies by the small factor 2 out first, so
# differentiating this rule again (Hessians) makes fewer passes over large tangents.
def _tanh_jvp(g, out, x):
    return mul(g, sub(full_like(out, 1.0), integer_pow(out, y=2)))


def _tanh_w(zs, m):  # tanh' = 1 - tanh^2, as a series in the output's coefficients
    return sub(full_like(zs[0], 1.0), mul(zs[0], zs[0])) if m == 0 else tl.scale(
        tl.square_coefficient(zs, m), -1.0)


tanh = Primitive("tanh", family=ELEMENTWISE_TRANSCENDENTAL, infer=float_unary_infer("tanh"),
                 lowering=Lowering(c="tanh({0})", numba="tanh_({0})"),
                 jvp=(_tanh_jvp,), saves_out=True, taylor=tl.unary_rule(
                     lambda xs, z0, x0: tl.derivative_product_series(xs, z0, _tanh_w)),
                 doc="hyperbolic tangent",
                 public=PublicOp("Hyperbolic tangent.", "pf.tanh(pf.to_tensor([0.0, 1.0])).numpy()",
                                 "array([0.       , 0.7615942], dtype=float32)"))


def _sqrt_jvp(g, out, x):  # d sqrt(x) = 1 / (2 sqrt(x))
    return div(g, mul(full_like(out, 2.0), out))


def _sqrt_series(xs, z0, x0):
    # z^2 = x: z[k] = (x[k] - sum_{j=1..k-1} z[j] z[k-j]) / (2 z[0])
    zs = [z0]
    two_z0 = tl.scale(z0, 2.0)
    for k in range(1, len(xs)):
        zs.append(tl.divide(tl.sub(xs[k], tl.convolution(zs, zs, k, hi=k - 1)), two_z0))
    return zs


sqrt = Primitive("sqrt", family=ELEMENTWISE_UNARY,
                 lowering=Lowering(c="sqrt({0})", numba="np.sqrt({0})"),
                 infer=float_unary_infer("sqrt"), jvp=(_sqrt_jvp,), saves_out=True,
                 taylor=tl.unary_rule(_sqrt_series), doc="square root",
                 public=PublicOp("Square root.", "pf.sqrt(pf.to_tensor([4.0, 2.0])).numpy()",
                                 "array([2.       , 1.4142135], dtype=float32)"))


def _rsqrt_jvp(g, out, x):  # d x^(-1/2) = -1/2 x^(-3/2) = -1/2 * out / x
    return mul(g, mul(full_like(x, -0.5), div(out, x)))


rsqrt = Primitive("rsqrt", family=ELEMENTWISE_UNARY,
                  lowering=Lowering(c="rsqrt({0})", numba="({one} / np.sqrt({0}))"),
                  infer=float_unary_infer("rsqrt"), jvp=(_rsqrt_jvp,), saves_out=True,
                  taylor=tl.unary_rule(lambda xs, z0, x0: tl.power_series(xs, z0, -0.5)),
                  doc="1 / sqrt(x)",
                  public=PublicOp("1 / sqrt(x).", "pf.rsqrt(pf.to_tensor([4.0])).numpy()",
                                  "array([0.5], dtype=float32)"))


def _abs_jvp(g, out, x):
    # sign(x) * g without the sign primitive (which is non-differentiable): 0 at x == 0.
    zero = zeros_like(x)
    return compare.select(compare.gt(x, zero), g,
                          compare.select(compare.lt(x, zero), neg(g), zeros_like(g)))


def _abs_series(xs, z0, x0):
    negated = [None if c is None else neg(c) for c in xs]
    return [z0] + tl.select_series(compare.ge(x0, zeros_like(x0)), xs, negated)[1:]


abs = Primitive("abs", family=ELEMENTWISE_UNARY, infer=same_aval,  # noqa: A001 - prim name
                lowering=Lowering(c="fabs({0})", numba="np.abs({0})", numba_fused="abs({0})",
                                  real_only=True),
                jvp=(_abs_jvp,), taylor=tl.unary_rule(_abs_series), doc="|x|")


def _erf_jvp(g, out, x):  # d erf = 2/sqrt(pi) exp(-x^2)
    return mul(g, mul(full_like(x, tl.TWO_OVER_SQRT_PI), exp(neg(mul(x, x)))))


def _erf_series(xs, z0, x0):
    # erf' = 2/sqrt(pi) exp(-x^2): series of e = exp(-x^2), then z' = c e x'
    q = [tl.scale(tl.square_coefficient(xs, m), -1.0) for m in range(len(xs))]
    e = tl.exp_series(q, exp(q[0]))
    return [z0] + [tl.scale(tl.convolution(xs, e, k, weighted=True), tl.TWO_OVER_SQRT_PI / k)
                   for k in range(1, len(xs))]


def _erfc_fraction(xp, a, terms):
    """erfc(a) for a >= 1 from its continued fraction (evaluated from its last term)."""
    frac = a
    for k in range(terms, 0, -1):
        frac = a + (k / 2.0) / frac
    return xp.exp(-a * a) / (math.sqrt(math.pi) * frac)


def _array_api_erf(xp):
    """erf from array-API functions only (the standard has none): the Maclaurin series for
    |x| < 3, 1 - erfc beyond (~1e-13 relative in float64)."""
    def erf_(x):
        a = xp.abs(x)
        small = xp.minimum(a, xp.asarray(3.0, dtype=x.dtype, device=getattr(x, "device", None)))
        s2 = small * small
        term = total = small
        for n in range(1, 64):
            term = term * (-s2) / n
            total = total + term / (2 * n + 1)
        big = xp.maximum(a, xp.asarray(3.0, dtype=x.dtype, device=getattr(x, "device", None)))
        tail = 1.0 - _erfc_fraction(xp, big, 60)
        return xp.sign(x) * xp.where(a < 3.0, total * tl.TWO_OVER_SQRT_PI, tail)

    return erf_


erf = Primitive("erf", family=ELEMENTWISE_TRANSCENDENTAL, reference="scipy.special:erf",
                lowering=Lowering(c="erf({0})", array_api=_array_api_erf, real_only=True,
                                  float32_compute=True),
                infer=float_unary_infer("erf"), jvp=(_erf_jvp,), taylor=tl.unary_rule(_erf_series),
                doc="error function",
                public=PublicOp("Error function.", "pf.erf(pf.to_tensor([0.0, 1.0])).numpy()",
                                "array([0.       , 0.8427008], dtype=float32)"))


def _erfc_jvp(g, out, x):  # d erfc = -2/sqrt(pi) exp(-x^2)
    return mul(g, mul(full_like(x, -tl.TWO_OVER_SQRT_PI), exp(neg(mul(x, x)))))


def _erfc_series(xs, z0, x0):  # erfc = 1 - erf: the erf series negated past the constant
    return [z0] + [tl.scale(c, -1.0) for c in _erf_series(xs, z0, x0)[1:]]


def _array_api_erfc(xp):
    """erfc from array-API functions only: 1 - erf for |x| < 1 (erfc >= 0.15 there, no
    cancellation), the continued fraction of erfc(|x|) beyond (1 - erf would round to
    negative float32 values on [2.3, 3]), and 2 - erfc(|x|) for negative x."""
    erf_ = _array_api_erf(xp)

    def erfc_(x):
        a = xp.abs(x)
        big = xp.maximum(a, xp.asarray(1.0, dtype=x.dtype, device=getattr(x, "device", None)))
        upper = xp.where(a < 1.0, 1.0 - erf_(a), _erfc_fraction(xp, big, 200))
        return xp.where(x < 0.0, 2.0 - upper, upper)

    return erfc_


erfc = Primitive("erfc", family=ELEMENTWISE_TRANSCENDENTAL, reference="scipy.special:erfc",
                 lowering=Lowering(c="erfc({0})", array_api=_array_api_erfc, real_only=True,
                                   float32_compute=True),
                 infer=float_unary_infer("erfc"), jvp=(_erfc_jvp,),
                 taylor=tl.unary_rule(_erfc_series), doc="complementary error function",
                 public=PublicOp("Complementary error function 1 - erf(x), accurate where "
                                 "erf(x) is near 1.",
                                 'pf.erfc(pf.to_tensor([0.0, 3.0], "float64")).numpy()',
                                 "array([1.0000000e+00, 2.2090497e-05])"))


def _logistic_jvp(g, out, x):  # d logistic = s (1 - s)
    return mul(g, mul(out, sub(full_like(out, 1.0), out)))


def _logistic_w(zs, m):  # logistic' = s - s^2
    return tl.sub(zs[m], tl.square_coefficient(zs, m))


logistic = Primitive("logistic", family=ELEMENTWISE_TRANSCENDENTAL,
                     lowering=Lowering(c="{one} / ({one} + exp(-{0}))",
                                       numba="({one} / ({one} + np.exp(-{0})))", real_only=True),
                     infer=float_unary_infer("logistic"), jvp=(_logistic_jvp,), saves_out=True,
                     taylor=tl.unary_rule(lambda xs, z0, x0: tl.derivative_product_series(
                         xs, z0, _logistic_w)), doc="1 / (1 + exp(-x))",
                     public=PublicOp("Logistic sigmoid 1 / (1 + exp(-x)).",
                                     "pf.sigmoid(pf.to_tensor([0.0])).numpy()",
                                     "array([0.5], dtype=float32)", name="sigmoid"))

# Step functions: the derivative is zero almost everywhere and undefined at the jumps. A
# silent zero gradient is a classic bug in training code, so asking for one raises
# NonDifferentiableError; detach the input to state that a zero gradient is intended.
sign = Primitive("sign", family=ELEMENTWISE_UNARY,
                 lowering=Lowering(c="({0} > 0 ? {one} : ({0} < 0 ? -{one} : {0}))",
                                   numba="np.sign({0})", real_only=True),
                 infer=same_aval, differentiable=False, doc="-1, 0 or 1 (not differentiable)")
floor = Primitive("floor", family=ELEMENTWISE_UNARY, infer=float_unary_infer("floor"),
                  lowering=Lowering(c="floor({0})", numba="np.floor({0})", real_only=True),
                  differentiable=False, doc="round down (not differentiable)",
                  public=PublicOp("Round down (not differentiable).",
                                  "pf.floor(pf.to_tensor([-1.5, 1.5])).numpy()",
                                  "array([-2.,  1.], dtype=float32)"))
ceil = Primitive("ceil", family=ELEMENTWISE_UNARY, infer=float_unary_infer("ceil"),
                 lowering=Lowering(c="ceil({0})", numba="np.ceil({0})", real_only=True),
                 differentiable=False, doc="round up (not differentiable)",
                 public=PublicOp("Round up (not differentiable).",
                                 "pf.ceil(pf.to_tensor([-1.5, 1.5])).numpy()",
                                 "array([-1.,  2.], dtype=float32)"))
round = Primitive("round", family=ELEMENTWISE_UNARY,  # noqa: A001 - primitive name
                  lowering=Lowering(numpy="rint", c="rint({0})", numba="np.rint({0})",
                                    real_only=True),
                  infer=float_unary_infer("round"), differentiable=False,
                  doc="round half to even (not differentiable)",
                  public=PublicOp("Round half to even (not differentiable).",
                                  "pf.round(pf.to_tensor([0.5, 1.5, 2.6])).numpy()",
                                  "array([0., 2., 3.], dtype=float32)"))


def _integer_pow_infer(x, *, y):
    if not isinstance(y, int):
        raise TypeError(f"integer_pow needs an int exponent, got {y!r}")
    if y < 0 and not x.dtype.is_floating:
        raise TypeError("integer_pow: negative exponents need a floating tensor")
    return same_aval(x)


def _integer_pow_jvp(g, out, x, *, y):
    if y == 0:
        return zeros_like(g)
    lower = x if y == 2 else (full_like(x, 1.0) if y == 1 else integer_pow(x, y=y - 1))
    return mul(g, mul(full_like(x, float(y)), lower))


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


integer_pow = Primitive("integer_pow", family=ELEMENTWISE_UNARY, infer=_integer_pow_infer,
                        jvp=(_integer_pow_jvp,), taylor=tl.unary_rule(_integer_pow_series),
                        doc="x ** y for a static integer y")


# ---- binary --------------------------------------------------------------------------------

def _add_transpose(g, out, x, y):
    return g


add = Primitive("add", family=ELEMENTWISE_BINARY,
                lowering=Lowering(c="{0} + {1}", numba="({0} + {1})"), infer=binary_infer("add"),
                linear=True, transpose=(_add_transpose, _add_transpose), taylor=tl.sum_rule(tl.add),
                doc="x + y")


sub = Primitive("sub", family=ELEMENTWISE_BINARY,
                lowering=Lowering(numpy="subtract", array_api="subtract", c="{0} - {1}",
                                  numba="({0} - {1})"),
                infer=binary_infer("sub"), linear=True, transpose=(_add_transpose, _neg_transpose),
                taylor=tl.sum_rule(tl.sub), doc="x - y")


def _mul_x_jvp(g, out, x, y):
    return mul(g, y)


def _mul_y_jvp(g, out, x, y):
    return mul(x, g)


mul = Primitive("mul", family=ELEMENTWISE_BINARY,
                lowering=Lowering(numpy="multiply", array_api="multiply", c="{0} * {1}",
                                  numba="({0} * {1})"), infer=binary_infer("mul"),
                jvp=(_mul_x_jvp, _mul_y_jvp), linear_in=(0, 1), taylor=tl.bilinear_rule,
                doc="x * y")


def _div_x_jvp(g, out, x, y):
    return div(g, y)


def _div_y_jvp(g, out, x, y):  # d(x/y)/dy = -x/y^2 = -out/y
    return neg(div(mul(g, out), y))


def _div_taylor(primals, series, out=None):
    out = div(*primals) if out is None else out
    return out, tl.quotient_series(*tl.all_series(primals, series), out)


div = Primitive("div", family=ELEMENTWISE_BINARY,
                lowering=Lowering(array_api="divide", c="{0} / {1}", numba="({0} / {1})",
                                  integers=False), infer=binary_infer("div"),
                jvp=(_div_x_jvp, _div_y_jvp), saves_out=True, taylor=_div_taylor, linear_in=(0,),
                doc="x / y (on integers floor division; a zero integer divisor raises "
                    "ZeroDivisionError)")


def _pow_x_jvp(g, out, x, y):  # y * x^(y-1)
    return mul(g, mul(y, pow(x, sub(y, full_like(y, 1.0)))))


def _pow_y_jvp(g, out, x, y):
    # x^y log(x); defined as 0 where x == 0 (the limit from the right for y > 0)
    zero = zeros_like(x)
    safe_log = compare.select(compare.eq(x, zero), zero, log(
        compare.select(compare.eq(x, zero), full_like(x, 1.0), x)))
    return mul(g, mul(out, safe_log))


def _pow_taylor(primals, series, out=None):
    x0, y0 = primals
    out = pow(x0, y0) if out is None else out
    xs = tl.all_series(primals, series)[0]
    if series[1] is None:  # constant exponent: the power recurrence
        return out, tl.power_series(xs, out, y0)
    # x^y = exp(y log x)
    logs = tl.log_series(xs, log(x0))
    return out, tl.exp_series(tl.cauchy_series(series[1], logs), out)


pow = Primitive("pow", family=ELEMENTWISE_TRANSCENDENTAL,  # noqa: A001 - primitive name
                lowering=Lowering(numpy="power", c="pow({0}, {1})", numba="np.power({0}, {1})",
                                  integers=False),
                infer=binary_infer("pow"), jvp=(_pow_x_jvp, _pow_y_jvp), saves_out=True,
                taylor=_pow_taylor, doc="x ** y")


# maximum and minimum: the gradient goes to the winning input; ties split it evenly (as JAX
# and PyTorch do). ``winner(a, b)``: where a wins.
def _extremum_jvp(winner, mine, other, g):
    half = mul(g, full_like(g, 0.5))
    return compare.select(winner(mine, other), g,
                          compare.select(compare.eq(mine, other), half, zeros_like(g)))


def _extremum_jvps(winner):
    """The jvp rules (in x, in y) of the extremum that ``winner`` picks."""

    def x_jvp(g, out, x, y):
        return _extremum_jvp(winner, x, y, g)

    def y_jvp(g, out, x, y):
        return _extremum_jvp(winner, y, x, g)

    return x_jvp, y_jvp


def _extremum_taylor(winner):
    def make(prim):
        def rule(primals, series, out=None):
            x0, y0 = primals
            out = prim.bind(x0, y0) if out is None else out
            xs, ys = tl.all_series(primals, series)
            # ties take the average, as the jvp rule does
            halves = [None if a is None and b is None else tl.scale(tl.add(a, b), 0.5)
                      for a, b in zip(xs, ys)]
            tie_or_other = tl.select_series(compare.eq(x0, y0), halves, ys)
            return out, [out] + tl.select_series(winner(x0, y0), xs, tie_or_other)[1:]

        return rule

    return RuleTemplate(make)


maximum = Primitive("maximum", family=ELEMENTWISE_BINARY,
                    # NumPy's maximum: NaN in either operand gives NaN (C's fmax ignores it)
                    lowering=Lowering(c="({0} > {1} || isnan({0})) ? {0} : {1}",
                                      numba="np.maximum({0}, {1})", numba_fused="max({0}, {1})",
                                      real_only=True),
                    infer=binary_infer("maximum"), jvp=_extremum_jvps(compare.gt),
                    taylor=_extremum_taylor(compare.gt), doc="elementwise maximum")
minimum = Primitive("minimum", family=ELEMENTWISE_BINARY,
                    lowering=Lowering(c="({0} < {1} || isnan({0})) ? {0} : {1}",
                                      numba="np.minimum({0}, {1})", numba_fused="min({0}, {1})",
                                      real_only=True),
                    infer=binary_infer("minimum"), jvp=_extremum_jvps(compare.lt),
                    taylor=_extremum_taylor(compare.lt), doc="elementwise minimum")


# atan2(x, y) = angle of (y, x): d/dx = y / (x^2 + y^2), d/dy = -x / (x^2 + y^2)
def _atan2_x_jvp(g, out, x, y):
    return div(mul(g, y), add(mul(x, x), mul(y, y)))


def _atan2_y_jvp(g, out, x, y):
    return neg(div(mul(g, x), add(mul(x, x), mul(y, y))))


def _atan2_taylor(primals, series, out=None):
    # z' = (y x' - x y') / (x^2 + y^2): build that series to order K-1, z[k] = h[k-1] / k
    out = atan2(*primals) if out is None else out
    xs, ys = tl.all_series(primals, series)
    order = len(xs) - 1

    def derivative(s):  # coefficients of s'(t)
        return [tl.scale(s[m + 1], m + 1) for m in range(order)]

    numerator = [tl.sub(a, b) for a, b in zip(tl.cauchy_series(ys[:order], derivative(xs)),
                                               tl.cauchy_series(xs[:order], derivative(ys)))]
    denominator = [tl.add(a, b) for a, b in zip(tl.cauchy_series(xs[:order], xs[:order]),
                                                 tl.cauchy_series(ys[:order], ys[:order]))]
    h = tl.quotient_series(numerator, denominator, div(tl.dense(numerator[0], out), denominator[0]))
    return out, [out] + [tl.scale(h[k - 1], 1.0 / k) for k in range(1, order + 1)]


atan2 = Primitive("atan2", family=ELEMENTWISE_TRANSCENDENTAL,
                  lowering=Lowering(numpy="arctan2", c="atan2({0}, {1})",
                                    numba="np.arctan2({0}, {1})", real_only=True, integers=False),
                  infer=binary_infer("atan2"), jvp=(_atan2_x_jvp, _atan2_y_jvp),
                  taylor=_atan2_taylor, doc="the angle of the point (y, x)")
