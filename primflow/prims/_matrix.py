"""Matrix helpers for the decomposition rules, built from primitives only.

Every function takes tensors whose last two dims are the matrix dims and whose leading
dims are batch dims (equal between operands: the public ops broadcast first).
"""

from __future__ import annotations

from ..core import dtypes
from . import compare as cmp, creation, elementwise as ew, linalg, reduce as rd, shape as sh


def mm(a, b):
    """Batched matrix product ``a @ b`` (same leading dims)."""
    nd = len(a._shape)
    batch = tuple(range(nd - 2))
    return linalg.dot_general(a, b, contracting=((nd - 1,), (nd - 2,)), batch=(batch, batch))


def mT(a):  # noqa: N802 - NumPy's name
    nd = len(a._shape)
    return sh.transpose(a, perm=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def scale(a, c):
    return ew.mul(a, creation.full(shape=tuple(a._shape), value=c, dtype=a.dtype))


def _index_grid(shape, dimension):
    return creation.iota(shape=tuple(shape), dtype=dtypes.int64, dimension=dimension)


def per_matrix(c, shape):
    """``c`` ([...], one value per matrix) broadcast to the matrices of ``shape``."""
    return sh.broadcast_in_dim(c, shape=tuple(shape),
                               broadcast_dimensions=tuple(range(len(shape) - 2)))


def along(v, shape, dim):
    """The vectors ``v`` ([..., n]) broadcast to the matrices of ``shape``, running along
    matrix dim ``dim`` (-2: ``out[i, j] = v[i]``; -1: ``out[i, j] = v[j]``)."""
    nd = len(shape)
    return sh.broadcast_in_dim(v, shape=tuple(shape),
                               broadcast_dimensions=tuple(range(nd - 2)) + (nd + dim,))


def band_mask(shape, lo, hi):
    """bool mask of entries with ``lo <= col - row <= hi`` over the last two dims (built
    for one matrix, then broadcast over the batch dims)."""
    shape = tuple(shape)
    square = shape[-2:]
    diff = ew.sub(_index_grid(square, 1), _index_grid(square, 0))
    keep = None
    if lo is not None:
        keep = cmp.ge(diff, creation.full(shape=square, value=lo, dtype=dtypes.int64))
    if hi is not None:
        upper = cmp.le(diff, creation.full(shape=square, value=hi, dtype=dtypes.int64))
        keep = upper if keep is None else cmp.logical_and(keep, upper)
    if len(shape) == 2:
        return keep
    return sh.broadcast_in_dim(keep, shape=shape,
                               broadcast_dimensions=(len(shape) - 2, len(shape) - 1))


def masked(a, keep):
    return cmp.select(keep, a, creation.full(shape=tuple(a._shape), value=0, dtype=a.dtype))


def diag_only(a):
    """``a`` with the entries off the diagonal zeroed."""
    return masked(a, band_mask(a._shape, 0, 0))


def tril(a, k=0):
    return masked(a, band_mask(a._shape, None, k))


def triu(a, k=0):
    return masked(a, band_mask(a._shape, k, None))


def eye_like(a):
    """The identity broadcast to ``a``'s shape (square last dims), in a's dtype."""
    return cmp.convert_element_type(band_mask(a._shape, 0, 0), dtype=a.dtype)


def diagonal(a):
    """``[..., n]``: the diagonal of each matrix."""
    return rd.reduce_sum(diag_only(a), axes=(len(a._shape) - 1,))


def diag_embed(v):
    """``[..., n, n]`` with ``v`` on the diagonal."""
    shape = tuple(v._shape) + (v._shape[-1],)
    return masked(along(v, shape, -2), band_mask(shape, 0, 0))


def sym(a):
    """``(a + a^T) / 2``."""
    return scale(ew.add(a, mT(a)), 0.5)


def phi(a):
    """The lower triangle with the diagonal halved (the Cholesky rules' projection)."""
    return ew.add(tril(a, -1), scale(diag_only(a), 0.5))


def column(v):
    """``[..., n] -> [..., n, 1]``."""
    return sh.reshape(v, shape=tuple(v._shape) + (1,))


def row(v):
    return sh.reshape(v, shape=tuple(v._shape[:-1]) + (1, v._shape[-1]))


def col(a, j):
    """``a[..., j]``: entry ``j`` of the last dim, that dim dropped."""
    return sh.reshape(cols(a, j, j + 1), shape=tuple(a._shape[:-1]))


def join_rows(*parts):
    """The matrices ``parts`` stacked along the row dim (``[..., m1 + m2 + ..., n]``)."""
    return sh.concatenate(*parts, axis=len(parts[0]._shape) - 2)


def join_cols(*parts):
    return sh.concatenate(*parts, axis=len(parts[0]._shape) - 1)


def cols(a, start, stop):
    """Columns ``start:stop`` of the last dim."""
    nd = len(a._shape)
    limit = tuple(a._shape[:-1]) + (stop,)
    return sh.slice(a, start=(0,) * (nd - 1) + (start,), limit=limit, strides=(1,) * nd)


def rows(a, start, stop):
    nd = len(a._shape)
    limit = tuple(a._shape[:-2]) + (stop, a._shape[-1])
    return sh.slice(a, start=(0,) * (nd - 2) + (start, 0), limit=limit, strides=(1,) * nd)
