"""Indexing primitives: gather (read elements at integer indices) and scatter_add (its
adjoint: add values at integer indices). Advanced indexing in ops/ is built on them.

``indices`` is an integer tensor of shape ``batch + (k,)``; its last axis addresses the
first ``k`` dims of the operand (gather_nd). ``gather(x, idx)`` has shape
``batch + x.shape[k:]``.
"""

from __future__ import annotations

from ..core.lowering import Lowering
from ..core.primitive import Aval, Primitive, PrimitiveError
from . import _batching as bt, creation, shape as sh
from . import sharding as sr
from .families import INDEX


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


def _gather_transpose(g, out, x, indices):
    zeros = creation.full(shape=tuple(x._shape), value=0, dtype=g.dtype)
    return scatter_add(zeros, indices, g)


def _with_batch_coordinate(indices, size):
    """Indices [B, ..., k] -> [B, ..., k + 1] whose first coordinate is the example number."""
    head = tuple(indices._shape[:-1])
    example = creation.iota(shape=head + (1,), dtype=indices.dtype, dimension=0)
    return sh.concatenate(example, indices, axis=len(head))


def _gather_batch(vals, bdims):
    (x, indices), (x_bdim, i_bdim) = vals, bdims
    if i_bdim is None:
        # batch dim right after the k indexed dims: it lands after the index batch dims
        k = indices._shape[-1]
        return gather(bt.move_axis(x, x_bdim, k), indices), len(indices._shape) - 1
    indices = bt.move_to_front(indices, i_bdim)
    if x_bdim is None:
        return gather(x, indices), 0
    x = bt.move_to_front(x, x_bdim)
    return gather(x, _with_batch_coordinate(indices, x._shape[0])), 0


# linear in the values; the indices are static (integers)
gather = Primitive("gather", family=INDEX, shard=sr.GATHER, infer=_gather_infer,
                   batch=_gather_batch, linear=True, transpose=(_gather_transpose, None),
                   doc="x[indices[..., 0], ..., indices[..., k-1]]")


def _scatter_add_infer(operand, indices, updates):
    k = _check_indices("scatter_add", operand, indices)
    expected = indices.shape[:-1] + operand.shape[k:]
    if updates.shape != expected:
        raise PrimitiveError(f"scatter_add: updates of shape {list(updates.shape)} do not match "
                             f"the indexed shape {list(expected)}")
    if updates.dtype is not operand.dtype:
        raise PrimitiveError("scatter_add: operand and updates dtypes differ")
    return Aval(operand.shape, operand.dtype)


def _scatter_add_batch(vals, bdims):
    size = bt.batch_size(vals, bdims)
    operand, indices, updates = (bt.with_batch_front(v, b, size) for v, b in zip(vals, bdims))
    return scatter_add(operand, _with_batch_coordinate(indices, size), updates), 0


def _scatter_operand_transpose(g, out, operand, indices, updates):
    return g


def _scatter_updates_transpose(g, out, operand, indices, updates):
    return gather(g, indices)


scatter_add = Primitive(
    "scatter_add", family=INDEX, lowering=Lowering(float32_compute=True),
    shard=sr.SCATTER_ADD, infer=_scatter_add_infer, batch=_scatter_add_batch,
    linear=True, transpose=(_scatter_operand_transpose, None, _scatter_updates_transpose),
    doc="a copy of operand with updates added at indices (repeats accumulate)")
