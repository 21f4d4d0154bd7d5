"""Comparison, logic, selection and dtype conversion primitives.

Comparisons and logic produce bool tensors, which never carry gradients (the tape does not
record integer or bool results), so their rules are ``None``. ``select`` routes gradients
to the branch each element took; ``convert_element_type`` casts them back.
"""

from __future__ import annotations

from ..core import dtypes
from ..core.primitive import Aval, Primitive, PrimitiveError
from ._util import binary_infer, zeros_like
from .complex import reject_complex
from . import sharding as sr
from .families import COMPARE


def _compare(name):
    infer = binary_infer(name, out_dtype=dtypes.bool_)
    if name not in ("eq", "ne"):  # complex numbers are not ordered
        infer = reject_complex(name, infer)
    return Primitive(name, family=COMPARE, shard=sr.NONLINEAR, infer=infer,
                     differentiable=False, doc=f"elementwise {name} -> bool")


eq = _compare("eq")
ne = _compare("ne")
lt = _compare("lt")
le = _compare("le")
gt = _compare("gt")
ge = _compare("ge")


def _logical_infer(name):
    def infer(*xs):
        for x in xs:
            if not x.dtype.is_bool:
                raise TypeError(f"{name} expects bool tensors, got {x.dtype.name}")
        if len(xs) == 2 and xs[0].shape != xs[1].shape:
            raise PrimitiveError(f"{name}: shapes {list(xs[0].shape)} and "
                                 f"{list(xs[1].shape)} differ")
        return Aval(xs[0].shape, dtypes.bool_)

    return infer


logical_and = Primitive("logical_and", family=COMPARE,
                        shard=sr.NONLINEAR, infer=_logical_infer("logical_and"),
                        differentiable=False, doc="x and y, elementwise")
logical_or = Primitive("logical_or", family=COMPARE,
                       shard=sr.NONLINEAR, infer=_logical_infer("logical_or"),
                       differentiable=False, doc="x or y, elementwise")
logical_not = Primitive("logical_not", family=COMPARE,
                        shard=sr.NONLINEAR, infer=_logical_infer("logical_not"),
                        differentiable=False, doc="not x, elementwise")


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
select = Primitive("select", family=COMPARE, shard=sr.SELECT, infer=_select_infer, linear=True,
                   transpose=(None, _select_true_transpose, _select_false_transpose),
                   doc="where(pred, on_true, on_false), elementwise")


def _convert_infer(x, *, dtype):
    return Aval(x.shape, dtype)


def _convert_transpose(g, out, x, *, dtype):
    return convert_element_type(g, dtype=x.dtype)


convert_element_type = Primitive(
    "convert_element_type", family=COMPARE, shard=sr.SINGLE, infer=_convert_infer, linear=True,
    transpose=(_convert_transpose,), doc="cast to another dtype")
