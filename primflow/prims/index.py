"""Indexing primitives: gather (read elements at integer indices) and scatter_add (its
adjoint: add values at integer indices). Advanced indexing in ops/ is built on them.

``indices`` is an integer tensor of shape ``batch + (k,)``; its last axis addresses the
first ``k`` dims of the operand (gather_nd). ``gather(x, idx)`` has shape
``batch + x.shape[k:]``.
"""

from __future__ import annotations

from ..core.primitive import Aval, Primitive, PrimitiveError
from . import creation

_F = "index"


def _check_indices(name, x, indices):
    if not indices.dtype.is_integer:
        raise TypeError(f"{name}: indices must be an integer tensor, got {indices.dtype.name}")
    if len(indices.shape) < 1 or indices.shape[-1] > len(x.shape):
        raise PrimitiveError(f"{name}: indices of shape {list(indices.shape)} cannot address "
                             f"a tensor of shape {list(x.shape)}")
    return indices.shape[-1]


def _gather_infer(x, indices):
    k = _check_indices("gather", x, indices)
    return Aval(indices.shape[:-1] + x.shape[k:], x.dtype)


def _gather_vjp(g, out, x, indices):
    zeros = creation.full(shape=tuple(x._shape), value=0, dtype=g.dtype)
    return scatter_add(zeros, indices, g)


gather = Primitive("gather", family=_F, infer=_gather_infer,
                   jvp=(lambda g, out, x, indices: gather(g, indices), None),
                   vjp=(_gather_vjp, None), doc="x[indices[..., 0], ..., indices[..., k-1]]")


def _scatter_add_infer(operand, indices, updates):
    k = _check_indices("scatter_add", operand, indices)
    expected = indices.shape[:-1] + operand.shape[k:]
    if updates.shape != expected:
        raise PrimitiveError(f"scatter_add: updates of shape {list(updates.shape)} do not match "
                             f"the indexed shape {list(expected)}")
    if updates.dtype is not operand.dtype:
        raise PrimitiveError("scatter_add: operand and updates dtypes differ")
    return Aval(operand.shape, operand.dtype)


def _scatter_updates_jvp(g, out, operand, indices, updates):
    zeros = creation.full(shape=tuple(operand._shape), value=0, dtype=g.dtype)
    return scatter_add(zeros, indices, g)


scatter_add = Primitive(
    "scatter_add", family=_F, infer=_scatter_add_infer,
    jvp=(lambda g, out, operand, indices, updates: g, None, _scatter_updates_jvp),
    vjp=(lambda g, out, operand, indices, updates: g, None,
         lambda g, out, operand, indices, updates: gather(g, indices)),
    doc="a copy of operand with updates added at indices (repeats accumulate)")
