"""Comparison, logic, selection and dtype conversion primitives.

Comparisons and logic produce bool tensors, which never carry gradients (the tape does not
record integer or bool results), so their rules are ``None``. ``select`` routes gradients
to the branch each element took; ``convert_element_type`` casts them back.
"""

from __future__ import annotations

from ..core import dtypes
from ..core.primitive import Aval, Primitive, PrimitiveError
from . import _taylor as tl
from ._batching import elementwise_batch
from ._util import binary_infer, zeros_like
from .complex import reject_complex

_F = "compare"


def _compare(name):
    infer = binary_infer(name, out_dtype=dtypes.bool_)
    if name not in ("eq", "ne"):  # complex numbers are not ordered
        infer = reject_complex(name, infer)
    return Primitive(name, family=_F, infer=infer,
                     jvp=None, vjp=None, doc=f"elementwise {name} -> bool")


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


logical_and = Primitive("logical_and", family=_F, infer=_logical_infer("logical_and"),
                        jvp=None, vjp=None)
logical_or = Primitive("logical_or", family=_F, infer=_logical_infer("logical_or"),
                       jvp=None, vjp=None)
logical_not = Primitive("logical_not", family=_F, infer=_logical_infer("logical_not"),
                        jvp=None, vjp=None)


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


def _select_true_rule(g, out, pred, on_true, on_false):
    return select(pred, g, zeros_like(g))


def _select_false_rule(g, out, pred, on_true, on_false):
    return select(pred, zeros_like(g), g)


select = Primitive("select", family=_F, infer=_select_infer,
                   jvp=(None, _select_true_rule, _select_false_rule),
                   vjp=(None, _select_true_rule, _select_false_rule),
                   saves_inputs=(0,),  # the branches' values are never read
                   doc="where(pred, on_true, on_false), elementwise")


def _convert_infer(x, *, dtype):
    return Aval(x.shape, dtype)


def _convert_jvp(g, out, x, *, dtype):
    return convert_element_type(g, dtype=dtype)


def _convert_vjp(g, out, x, *, dtype):
    return convert_element_type(g, dtype=x.dtype)


convert_element_type = Primitive(
    "convert_element_type", family=_F, infer=_convert_infer,
    jvp=(_convert_jvp,), vjp=(_convert_vjp,), saves_inputs=(), doc="cast to another dtype")

# every primitive in this file is elementwise: one generic batching rule
for _prim in (eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_not, select,
              convert_element_type):
    _prim.batch = elementwise_batch(_prim)

# Taylor rules: bool results carry no series; select and casts are linear in the values
for _prim in (eq, ne, lt, le, gt, ge, logical_and, logical_or, logical_not):
    _prim.taylor = tl.no_series_rule(_prim)
select.taylor = tl.linear_rule(select, static_inputs=(0,))
convert_element_type.taylor = tl.linear_rule(convert_element_type)
select.linear = convert_element_type.linear = True  # select: in the two branches
