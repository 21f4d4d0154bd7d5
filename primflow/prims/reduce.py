"""Reductions over static axes: sum, max, min, argmax, argmin and cumulative sum.

``axes`` is a sorted tuple of dims that disappear (no keepdims: ops/ reshapes for that).
"""

from __future__ import annotations

from ..core.lowering import Lowering
from ..core.primitive import Aval, Primitive, RuleTemplate
from . import compare, elementwise as ew, shape as sh
from . import sharding as sr
from .families import AXIS, REDUCE


def _reduce_infer(x, *, axes):
    for a in axes:
        if not 0 <= a < len(x.shape):
            raise ValueError(f"reduction axis {a} is out of range for shape {list(x.shape)}")
    return Aval(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _expand_back(g, x_shape, axes):
    """Broadcasts a reduced tensor back to the input's shape."""
    kept = tuple(i for i in range(len(x_shape)) if i not in axes)
    return sh.broadcast_in_dim(g, shape=tuple(x_shape), broadcast_dimensions=kept)


def _reduce_sum_transpose(g, out, x, *, axes):
    return _expand_back(g, x._shape, axes)


_REAL_ONLY = Lowering(real_only=True)  # max and min of complex numbers are not defined
_IN_FLOAT32 = Lowering(float32_compute=True)  # sums of bfloat16 accumulate in float32

reduce_sum = Primitive("reduce_sum", family=REDUCE, lowering=_IN_FLOAT32,
                       shard=sr.REDUCE_SUM, infer=_reduce_infer, linear=True,
                       transpose=(_reduce_sum_transpose,), doc="sum over `axes`")


# reduce_max and reduce_min: the gradient goes to the positions that attain the extremum,
# split evenly on ties.
def _extremum_location(x, out, axes):
    hit = compare.convert_element_type(
        compare.eq(x, _expand_back(out, x._shape, axes)), dtype=x.dtype)
    return hit, reduce_sum(hit, axes=axes)


def _extremum_jvp(g, out, x, *, axes):
    hit, count = _extremum_location(x, out, axes)
    return ew.div(reduce_sum(ew.mul(g, hit), axes=axes), count)


def _extremum_vjp(g, out, x, *, axes):
    hit, count = _extremum_location(x, out, axes)
    return ew.mul(_expand_back(ew.div(g, count), x._shape, axes), hit)


def _make_extremum_taylor(prim):
    # the coefficients at the positions attaining the extremum (averaged over ties)
    def rule(primals, series, out=None, *, axes):
        (x0,), (xs,) = primals, series
        out = prim.bind(x0, axes=axes) if out is None else out
        hit, count = _extremum_location(x0, out, axes)
        return out, [out] + [None if c is None else ew.div(reduce_sum(ew.mul(c, hit), axes=axes),
                                                           count) for c in xs[1:]]

    return rule


reduce_max = Primitive("reduce_max", family=REDUCE, shard=sr.REDUCE_MAX,
                       infer=_reduce_infer, lowering=_REAL_ONLY, jvp=(_extremum_jvp,),
                       vjp=(_extremum_vjp,), saves_out=True,
                       taylor=RuleTemplate(_make_extremum_taylor), doc="maximum over `axes`")
reduce_min = Primitive("reduce_min", family=REDUCE, shard=sr.REDUCE_MIN,
                       infer=_reduce_infer, lowering=_REAL_ONLY, jvp=(_extremum_jvp,),
                       vjp=(_extremum_vjp,), saves_out=True,
                       taylor=RuleTemplate(_make_extremum_taylor), doc="minimum over `axes`")


def _arg_infer(x, *, axis, index_dtype):
    if not 0 <= axis < len(x.shape):
        raise ValueError(f"axis {axis} is out of range for shape {list(x.shape)}")
    return Aval(tuple(d for i, d in enumerate(x.shape) if i != axis), index_dtype)


argmax = Primitive("argmax", family=AXIS, shard=sr.ARG_AXIS, infer=_arg_infer, lowering=_REAL_ONLY,
                   differentiable=False, doc="index of the maximum along `axis` (integer result)")
argmin = Primitive("argmin", family=AXIS, shard=sr.ARG_AXIS, infer=_arg_infer, lowering=_REAL_ONLY,
                   differentiable=False, doc="index of the minimum along `axis` (integer result)")


def _cumsum_infer(x, *, axis, reverse):
    if not 0 <= axis < len(x.shape):
        raise ValueError(f"axis {axis} is out of range for shape {list(x.shape)}")
    return Aval(x.shape, x.dtype)


def _cumsum_transpose(g, out, x, *, axis, reverse):
    # the transpose of a running sum is the running sum in the other direction
    return cumsum(g, axis=axis, reverse=not reverse)


cumsum = Primitive("cumsum", family=AXIS, lowering=_IN_FLOAT32, shard=sr.CUMSUM,
                   infer=_cumsum_infer, linear=True, transpose=(_cumsum_transpose,),
                   doc="running sum along `axis` (from the end if `reverse`)")
