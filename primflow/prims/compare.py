"""Comparison, logic, selection and dtype conversion primitives.

Comparisons and logic produce bool tensors, which never carry gradients (the tape does not
record integer or bool results), so their rules are ``None``. ``select`` routes gradients
to the branch each element took; ``convert_element_type`` casts them back.
"""

from __future__ import annotations

from ..core import dtypes
from ..core.lowering import Lowering
from ..core.primitive import Aval, Primitive, PrimitiveError
from ._util import binary_infer, zeros_like
from . import sharding as sr
from .families import COMPARE


def _compare(name, standard, operator):
    # complex numbers are not ordered: only eq and ne take them. ml_dtypes's ordered
    # bfloat16 comparisons warn "invalid value" at a NaN (float32 ones do not, as IEEE's
    # quiet comparisons): computed in float32, exactly
    ordered = name not in ("eq", "ne")
    lowering = Lowering(numpy=standard, array_api=standard, c=f"{{0}} {operator} {{1}}",
                        numba=f"({{0}} {operator} {{1}})", real_only=ordered,
                        float32_compute=ordered)
    return Primitive(name, family=COMPARE, shard=sr.NONLINEAR, lowering=lowering,
                     infer=binary_infer(name, out_dtype=dtypes.bool_),
                     differentiable=False, doc=f"elementwise {name} -> bool")


eq = _compare("eq", "equal", "==")
ne = _compare("ne", "not_equal", "!=")
lt = _compare("lt", "less", "<")
le = _compare("le", "less_equal", "<=")
gt = _compare("gt", "greater", ">")
ge = _compare("ge", "greater_equal", ">=")


def _logical(name, doc, **lowering):
    def infer(*xs):
        for x in xs:
            if not x.dtype.is_bool:
                raise TypeError(f"{name} expects bool tensors, got {x.dtype.name}")
        if len(xs) == 2 and xs[0].shape != xs[1].shape:
            raise PrimitiveError(f"{name}: shapes {list(xs[0].shape)} and "
                                 f"{list(xs[1].shape)} differ")
        return Aval(xs[0].shape, dtypes.bool_)

    return Primitive(name, family=COMPARE, lowering=Lowering(**lowering), shard=sr.NONLINEAR,
                     infer=infer, differentiable=False, doc=doc)


logical_and = _logical("logical_and", "x and y, elementwise", c="{0} && {1}",
                       numba="np.logical_and({0}, {1})", numba_fused="{0} and {1}")
logical_or = _logical("logical_or", "x or y, elementwise", c="{0} || {1}",
                      numba="np.logical_or({0}, {1})", numba_fused="{0} or {1}")
logical_not = _logical("logical_not", "not x, elementwise", c="!{0}",
                       numba="np.logical_not({0})", numba_fused="not {0}")


def _select_infer(pred, on_true, on_false):
    if not pred.dtype.is_bool:
        raise TypeError(f"select: the predicate must be bool, got {pred.dtype.name}")
    if not pred.shape == on_true.shape == on_false.shape:
        raise PrimitiveError(f"select: shapes {list(pred.shape)}, {list(on_true.shape)} and "
                             f"{list(on_false.shape)} differ")
    if on_true.dtype is not on_false.dtype:
        raise PrimitiveError(f"select: branch dtypes {on_true.dtype.name} and "
                             f"{on_false.dtype.name} differ")
    return Aval(on_true.shape, on_true.dtype)


def _select_true_transpose(g, out, pred, on_true, on_false):
    return select(pred, g, zeros_like(g))


def _select_false_transpose(g, out, pred, on_true, on_false):
    return select(pred, zeros_like(g), g)


# linear in the two branches (the predicate is static: its transpose entry is None)
select = Primitive("select", family=COMPARE, shard=sr.SELECT, lowering=Lowering(array_api="where"),
                   infer=_select_infer, linear=True,
                   transpose=(None, _select_true_transpose, _select_false_transpose),
                   doc="where(pred, on_true, on_false), elementwise")


def _convert_infer(x, *, dtype):
    return Aval(x.shape, dtype)


def _convert_transpose(g, out, x, *, dtype):
    return convert_element_type(g, dtype=x.dtype)


convert_element_type = Primitive(
    "convert_element_type", family=COMPARE, shard=sr.SINGLE, infer=_convert_infer, linear=True,
    transpose=(_convert_transpose,), doc="cast to another dtype")
