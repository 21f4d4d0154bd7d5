"""Linear algebra: ``dot_general``, the one contraction primitive (matmul, batched matmul,
tensordot, inner and outer products are all instances of it).

``contracting = ((x dims), (y dims))`` are summed pairwise; ``batch = ((x dims), (y dims))``
are matched and kept. Output dims: batch, then x's remaining dims, then y's (JAX order).
"""

from __future__ import annotations

from ..core.lowering import Lowering
from ..core.primitive import Aval, Primitive, PrimitiveError
from . import _batching as bt, _taylor as tl, shape as sh
from .complex import holomorphic_vjp
from . import sharding as sr
from .families import DOT


def _free_dims(ndim, contract, batch):
    return tuple(d for d in range(ndim) if d not in contract and d not in batch)


def _dot_general_infer(x, y, *, contracting, batch):
    (lc, rc), (lb, rb) = contracting, batch
    if x.dtype is not y.dtype:
        raise PrimitiveError(f"dot_general: dtypes {x.dtype.name} and {y.dtype.name} differ")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise PrimitiveError("dot_general: unequal numbers of contracting or batch dims")
    for a, b in zip(lc + lb, rc + rb):
        if x.shape[a] != y.shape[b]:
            raise PrimitiveError(
                f"dot_general: dim {a} of x (shape {list(x.shape)}) and dim {b} of y "
                f"(shape {list(y.shape)}) must match, got {x.shape[a]} and {y.shape[b]}")
    x_free = _free_dims(len(x.shape), lc, lb)
    y_free = _free_dims(len(y.shape), rc, rb)
    shape = (tuple(x.shape[d] for d in lb) + tuple(x.shape[d] for d in x_free)
             + tuple(y.shape[d] for d in y_free))
    return Aval(shape, x.dtype)


def _cotangent(g, other, *, mine, theirs, my_ndim, my_first):
    """Cotangent of one operand: contract g with the other operand over the other's free
    dims, then permute the result into this operand's dim order.

    ``mine``/``theirs`` are (contracting, batch) dims of this operand and of the other one.
    """
    (my_c, my_b), (their_c, their_b) = mine, theirs
    nb = len(my_b)
    my_free = _free_dims(my_ndim, my_c, my_b)
    their_free = _free_dims(len(other._shape), their_c, their_b)
    # g's dims are: batch, x's free dims, y's free dims. Find the other operand's free dims.
    offset = nb + len(my_free) if my_first else nb
    g_their_free = tuple(range(offset, offset + len(their_free)))
    result = dot_general(g, other, contracting=(g_their_free, their_free),
                         batch=(tuple(range(nb)), their_b))
    # result dims: batch, my free (in order), then the other's contracting dims in ascending
    # order of the other operand, each paired with one of my contracting dims.
    pairs = sorted(zip(their_c, my_c))
    source = tuple(my_b) + my_free + tuple(mine_dim for _, mine_dim in pairs)
    perm = tuple(source.index(d) for d in range(my_ndim))
    if perm != tuple(range(my_ndim)):
        result = sh.transpose(result, perm=perm)
    return result


def _dot_general_x_vjp(g, out, x, y, *, contracting, batch):
    (lc, rc), (lb, rb) = contracting, batch
    return _cotangent(g, y, mine=(lc, lb), theirs=(rc, rb), my_ndim=len(x._shape), my_first=True)


def _dot_general_y_vjp(g, out, x, y, *, contracting, batch):
    (lc, rc), (lb, rb) = contracting, batch
    return _cotangent(g, x, mine=(rc, rb), theirs=(lc, lb), my_ndim=len(y._shape), my_first=False)


def _dot_general_batch(vals, bdims, *, contracting, batch):
    (x, y), (x_bdim, y_bdim) = vals, bdims
    (lc, rc), (lb, rb) = contracting, batch
    if x_bdim is not None and y_bdim is not None:
        # the vmapped dim becomes one more batch dim of the product
        x, y = bt.move_to_front(x, x_bdim), bt.move_to_front(y, y_bdim)
        return dot_general(x, y, contracting=(bt.shift_axes(lc), bt.shift_axes(rc)),
                           batch=((0,) + bt.shift_axes(lb), (0,) + bt.shift_axes(rb))), 0
    if x_bdim is not None:
        # a free dim of x: it comes right after the batch dims of the output
        x = bt.move_to_front(x, x_bdim)
        out = dot_general(x, y, contracting=(bt.shift_axes(lc), rc), batch=(bt.shift_axes(lb), rb))
        return out, len(lb)
    # a free dim of y: after the batch dims and x's free dims
    y = bt.move_to_front(y, y_bdim)
    out = dot_general(x, y, contracting=(lc, bt.shift_axes(rc)), batch=(lb, bt.shift_axes(rb)))
    return out, len(lb) + len(_free_dims(len(x._shape), lc, lb))


def _dot_general_x_jvp(g, out, x, y, **params):
    return dot_general(g, y, **params)


def _dot_general_y_jvp(g, out, x, y, **params):
    return dot_general(x, g, **params)


# bilinear: linear in each operand while the other stays fixed; its vjp contracts the
# cotangent with the other operand (not derivable from the jvp without a transpose pass)
dot_general = Primitive(
    "dot_general", family=DOT, lowering=Lowering(float32_compute=True), shard=sr.DOT_GENERAL,
    infer=_dot_general_infer, batch=_dot_general_batch,
    jvp=(_dot_general_x_jvp, _dot_general_y_jvp),
    vjp=(holomorphic_vjp(_dot_general_x_vjp), holomorphic_vjp(_dot_general_y_vjp)),
    linear_in=(0, 1), taylor=tl.bilinear_rule,  # Cauchy product of the coefficients
    doc="generalised matrix product with contracting and batch dims")
