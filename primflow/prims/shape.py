"""Shape primitives: reshape, broadcast_in_dim, transpose, slice, pad, concatenate.

All are linear: each declares its transpose (reshape back, sum over broadcast dims, inverse
permutation, pad the slice, slice the pad, split the concatenation); the jvp (the primitive
applied to the tangent) and the Taylor rule follow from it.
"""

from __future__ import annotations

import math

from ..core.primitive import Aval, Primitive, PrimitiveError
from . import _batching as bt, creation, elementwise as ew, reduce as rd
from . import sharding as sr
from ._util import zeros_like
from .families import SHAPE, VIEW


# ---- reshape -------------------------------------------------------------------------------

def _reshape_infer(x, *, shape):
    if math.prod(shape) != math.prod(x.shape):
        raise PrimitiveError(f"cannot reshape a tensor of shape {list(x.shape)} "
                             f"({math.prod(x.shape)} elements) into {list(shape)}")
    return Aval(shape, x.dtype)


def _reshape_batch(vals, bdims, *, shape):
    x = bt.move_to_front(vals[0], bdims[0])
    return reshape(x, shape=(x._shape[0],) + tuple(shape)), 0


def _reshape_transpose(g, out, x, *, shape):
    return reshape(g, shape=tuple(x._shape))


reshape = Primitive("reshape", family=VIEW, shard=sr.RESHAPE, infer=_reshape_infer, linear=True,
                    transpose=(_reshape_transpose,), batch=_reshape_batch,
                    doc="same elements, new shape")


# ---- broadcast_in_dim ----------------------------------------------------------------------

def _broadcast_infer(x, *, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != len(x.shape):
        raise PrimitiveError(f"broadcast_in_dim: {len(x.shape)} dims but "
                             f"broadcast_dimensions={broadcast_dimensions}")
    for src, dst in enumerate(broadcast_dimensions):
        if x.shape[src] not in (1, shape[dst]):
            raise PrimitiveError(f"cannot broadcast shape {list(x.shape)} to {list(shape)}")
    return Aval(shape, x.dtype)


def _broadcast_transpose(g, out, x, *, shape, broadcast_dimensions):
    x_shape = tuple(x._shape)
    summed = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions) + tuple(
        dst for src, dst in enumerate(broadcast_dimensions)
        if x_shape[src] == 1 and shape[dst] != 1)
    if summed:
        g = rd.reduce_sum(g, axes=tuple(sorted(summed)))
    if tuple(g._shape) != x_shape:
        g = reshape(g, shape=x_shape)
    return g


def _broadcast_batch(vals, bdims, *, shape, broadcast_dimensions):
    x = bt.move_to_front(vals[0], bdims[0])
    return broadcast_in_dim(x, shape=(x._shape[0],) + tuple(shape),
                            broadcast_dimensions=(0,) + bt.shift_axes(broadcast_dimensions)), 0


broadcast_in_dim = Primitive(
    "broadcast_in_dim", family=VIEW, shard=sr.BROADCAST, infer=_broadcast_infer, linear=True,
    transpose=(_broadcast_transpose,), batch=_broadcast_batch,
    doc="place x's dims at `broadcast_dimensions` of `shape` and repeat along the others")


# ---- transpose -----------------------------------------------------------------------------

def _transpose_infer(x, *, perm):
    if sorted(perm) != list(range(len(x.shape))):
        raise PrimitiveError(f"transpose: perm {list(perm)} is not a permutation of the "
                             f"{len(x.shape)} dims of shape {list(x.shape)}")
    return Aval(tuple(x.shape[p] for p in perm), x.dtype)


def _inverse_perm(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _transpose_batch(vals, bdims, *, perm):
    x = bt.move_to_front(vals[0], bdims[0])
    return transpose(x, perm=(0,) + bt.shift_axes(perm)), 0


def _transpose_transpose(g, out, x, *, perm):
    return transpose(g, perm=_inverse_perm(perm))


transpose = Primitive("transpose", family=VIEW, shard=sr.TRANSPOSE, infer=_transpose_infer,
                      batch=_transpose_batch, linear=True, transpose=(_transpose_transpose,),
                      doc="permute dims: out.shape[i] = x.shape[perm[i]]")


# ---- slice and pad (each other's adjoint) --------------------------------------------------

def _slice_infer(x, *, start, limit, strides):
    if not len(start) == len(limit) == len(strides) == len(x.shape):
        raise PrimitiveError(f"slice: start/limit/strides need {len(x.shape)} entries")
    out = []
    for n, s, e, st in zip(x.shape, start, limit, strides):
        if not (0 <= s <= e <= n and st >= 1):
            raise PrimitiveError(f"slice: bad range {s}:{e}:{st} for a dim of size {n}")
        out.append(max(0, -(-(e - s) // st)))
    return Aval(tuple(out), x.dtype)


def _slice_transpose(g, out, x, *, start, limit, strides):
    config = []
    for n, s, st, m in zip(x._shape, start, strides, g._shape):
        used_end = s + (m - 1) * st + 1
        config.append((s, n - used_end, st - 1) if m else (n, 0, 0))
    return pad(g, creation.full(shape=(), value=0, dtype=g.dtype), config=tuple(config))


def _slice_batch(vals, bdims, *, start, limit, strides):
    x = bt.move_to_front(vals[0], bdims[0])
    return slice(x, start=(0,) + tuple(start), limit=(x._shape[0],) + tuple(limit),
                 strides=(1,) + tuple(strides)), 0


slice = Primitive(  # noqa: A001 - primitive name
    "slice", family=VIEW, shard=sr.SLICE, infer=_slice_infer, batch=_slice_batch, linear=True,
    transpose=(_slice_transpose,), doc="x[start:limit:strides] per dim (static, non-negative)")


def _pad_infer(x, padding_value, *, config):
    if len(config) != len(x.shape):
        raise PrimitiveError(f"pad: config needs {len(x.shape)} entries, got {len(config)}")
    if padding_value.shape != ():
        raise PrimitiveError("pad: the padding value must be a 0-d tensor")
    out = []
    for n, (lo, hi, interior) in zip(x.shape, config):
        if lo < 0 or hi < 0 or interior < 0:
            raise PrimitiveError(f"pad: negative padding {config} is not supported")
        out.append(lo + hi + n + max(n - 1, 0) * interior)
    return Aval(tuple(out), x.dtype)


def _pad_x_transpose(g, out, x, padding_value, *, config):
    start, limit, strides = [], [], []
    for n, (lo, hi, interior) in zip(x._shape, config):
        start.append(lo)
        limit.append(lo + (n - 1) * (interior + 1) + 1 if n else lo)
        strides.append(interior + 1)
    return slice(g, start=tuple(start), limit=tuple(limit), strides=tuple(strides))


def _pad_value_transpose(g, out, x, padding_value, *, config):
    # every padded position received the padding value: total minus the interior part
    everything = tuple(range(len(g._shape)))
    inner = _pad_x_transpose(g, out, x, padding_value, config=config)
    return ew.sub(rd.reduce_sum(g, axes=everything), rd.reduce_sum(inner, axes=everything))


def _pad_batch(vals, bdims, *, config):
    (x, value), (x_bdim, value_bdim) = vals, bdims
    size = bt.batch_size(vals, bdims)
    x = bt.with_batch_front(x, x_bdim, size)
    config = ((0, 0, 0),) + tuple(config)
    if value_bdim is None:
        return pad(x, value, config=config), 0
    # one padding value per example: pad with zeros, then add value * (1 where padded)
    zero = creation.full(shape=(), value=0, dtype=x.dtype)
    one = creation.full(shape=(), value=1, dtype=x.dtype)
    padded = pad(x, zero, config=config)
    mask = pad(zeros_like(x), one, config=config)
    per_example = broadcast_in_dim(value, shape=tuple(padded._shape), broadcast_dimensions=(0,))
    return ew.add(padded, ew.mul(mask, per_example)), 0


pad = Primitive("pad", family=SHAPE, shard=sr.PAD, infer=_pad_infer, batch=_pad_batch, linear=True,
                transpose=(_pad_x_transpose, _pad_value_transpose),
                doc="add `lo`/`hi` elements at the ends and `interior` between elements")


# ---- concatenate ---------------------------------------------------------------------------

def _concatenate_infer(*xs, axis):
    if not xs:
        raise PrimitiveError("concatenate needs at least one tensor")
    first = xs[0]
    for x in xs[1:]:
        if x.dtype is not first.dtype:
            raise PrimitiveError(f"concatenate: dtypes {first.dtype.name} and "
                                 f"{x.dtype.name} differ")
        if len(x.shape) != len(first.shape) or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis):
            raise PrimitiveError(f"concatenate along axis {axis}: shapes {list(first.shape)} "
                                 f"and {list(x.shape)} differ outside that axis")
    size = sum(x.shape[axis] for x in xs)
    return Aval(first.shape[:axis] + (size,) + first.shape[axis + 1:], first.dtype)


def _concatenate_transpose(g, out, *xs, axis):
    parts, offset = [], 0
    shape = tuple(g._shape)
    for x in xs:
        n = x._shape[axis]
        start = tuple(offset if d == axis else 0 for d in range(len(shape)))
        limit = tuple(offset + n if d == axis else shape[d] for d in range(len(shape)))
        parts.append(slice(g, start=start, limit=limit, strides=(1,) * len(shape)))
        offset += n
    return tuple(parts)


def _concatenate_batch(vals, bdims, *, axis):
    return concatenate(*bt.all_front(vals, bdims), axis=axis + 1), 0


concatenate = Primitive("concatenate", family=SHAPE, shard=sr.CONCATENATE, infer=_concatenate_infer,
                        batch=_concatenate_batch, linear=True, transpose=_concatenate_transpose,
                        doc="join tensors along `axis`")
