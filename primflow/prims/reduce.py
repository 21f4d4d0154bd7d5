"""Reductions over static axes: sum, max, min, argmax, argmin and cumulative sum.

``axes`` is a sorted tuple of dims that disappear (no keepdims: ops/ reshapes for that).
"""

from __future__ import annotations

from ..core import dtypes
from ..core.primitive import Aval, Primitive
from . import compare, elementwise as ew, shape as sh
from . import _batching as bt, _taylor as tl
from .complex import reject_complex

_F = "reduce"


def _reduce_infer(x, *, axes):
    for a in axes:
        if not 0 <= a < len(x.shape):
            raise ValueError(f"reduction axis {a} is out of range for shape {list(x.shape)}")
    return Aval(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _expand_back(g, x_shape, axes):
    """Broadcasts a reduced tensor back to the input's shape."""
    kept = tuple(i for i in range(len(x_shape)) if i not in axes)
    return sh.broadcast_in_dim(g, shape=tuple(x_shape), broadcast_dimensions=kept)


def _axes_batch(prim):
    # batch to the front, reduced axes shift by one
    def rule(vals, bdims, *, axes):
        return prim.bind(bt.move_to_front(vals[0], bdims[0]), axes=bt.shift_axes(axes)), 0

    return rule


def _axis_batch(prim):
    def rule(vals, bdims, *, axis, **params):
        return prim.bind(bt.move_to_front(vals[0], bdims[0]), axis=axis + 1, **params), 0

    return rule


reduce_sum = Primitive(
    "reduce_sum", family=_F, infer=_reduce_infer,
    jvp=(lambda g, out, x, *, axes: reduce_sum(g, axes=axes),),
    vjp=(lambda g, out, x, *, axes: _expand_back(g, x._shape, axes),), saves_inputs=(),
    doc="sum over `axes`")


def _extremum_rules():
    # The gradient goes to the positions that attain the extremum, split evenly on ties.
    def location(x, out, axes):
        hit = compare.convert_element_type(
            compare.eq(x, _expand_back(out, x._shape, axes)), dtype=x.dtype)
        count = reduce_sum(hit, axes=axes)
        return hit, count

    def jvp(g, out, x, *, axes):
        hit, count = location(x, out, axes)
        return ew.div(reduce_sum(ew.mul(g, hit), axes=axes), count)

    def vjp(g, out, x, *, axes):
        hit, count = location(x, out, axes)
        return ew.mul(_expand_back(ew.div(g, count), x._shape, axes), hit)

    return (jvp,), (vjp,)


_max_jvp, _max_vjp = _extremum_rules()
reduce_max = Primitive("reduce_max", family=_F,
                       infer=reject_complex("reduce_max", _reduce_infer), jvp=_max_jvp,
                       vjp=_max_vjp, saves_out=True, doc="maximum over `axes`")
reduce_min = Primitive("reduce_min", family=_F,
                       infer=reject_complex("reduce_min", _reduce_infer), jvp=_max_jvp,
                       vjp=_max_vjp, saves_out=True, doc="minimum over `axes`")


def _arg_infer(x, *, axis, index_dtype):
    if not 0 <= axis < len(x.shape):
        raise ValueError(f"axis {axis} is out of range for shape {list(x.shape)}")
    return Aval(tuple(d for i, d in enumerate(x.shape) if i != axis), index_dtype)


argmax = Primitive("argmax", family=_F, infer=reject_complex("argmax", _arg_infer),
                   jvp=None, vjp=None,
                   doc="index of the maximum along `axis` (integer result)")
argmin = Primitive("argmin", family=_F, infer=reject_complex("argmin", _arg_infer),
                   jvp=None, vjp=None,
                   doc="index of the minimum along `axis` (integer result)")


def _cumsum_infer(x, *, axis, reverse):
    if not 0 <= axis < len(x.shape):
        raise ValueError(f"axis {axis} is out of range for shape {list(x.shape)}")
    return Aval(x.shape, x.dtype)


cumsum = Primitive(
    "cumsum", family=_F, infer=_cumsum_infer,
    jvp=(lambda g, out, x, *, axis, reverse: cumsum(g, axis=axis, reverse=reverse),),
    # the transpose of a running sum is the running sum in the other direction
    vjp=(lambda g, out, x, *, axis, reverse: cumsum(g, axis=axis, reverse=not reverse),),
    saves_inputs=(), doc="running sum along `axis` (from the end if `reverse`)")

for _prim in (reduce_sum, reduce_max, reduce_min):
    _prim.batch = _axes_batch(_prim)
for _prim in (argmax, argmin, cumsum):
    _prim.batch = _axis_batch(_prim)

INDEX_DTYPE = dtypes.int64


# ---- Taylor rules --------------------------------------------------------------------------

def _extremum_taylor(prim):
    # the coefficients at the positions attaining the extremum (averaged over ties)
    def rule(primals, series, out=None, *, axes):
        (x0,), (xs,) = primals, series
        out = prim(x0, axes=axes) if out is None else out
        hit = compare.convert_element_type(
            compare.eq(x0, _expand_back(out, x0._shape, axes)), dtype=x0.dtype)
        count = reduce_sum(hit, axes=axes)
        return out, [out] + [None if c is None else ew.div(reduce_sum(ew.mul(c, hit), axes=axes),
                                                           count) for c in xs[1:]]

    return rule


reduce_sum.taylor = tl.linear_rule(reduce_sum)
cumsum.taylor = tl.linear_rule(cumsum)
reduce_sum.linear = cumsum.linear = True
reduce_max.taylor = _extremum_taylor(reduce_max)
reduce_min.taylor = _extremum_taylor(reduce_min)
argmax.taylor = tl.no_series_rule(argmax)
argmin.taylor = tl.no_series_rule(argmin)
