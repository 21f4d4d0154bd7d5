"""Matrix products over the ``dot_general`` primitive: matmul (NumPy semantics), dot,
outer, linear (Paddle's [in, out] weight layout) and einsum-free helpers."""

from __future__ import annotations

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from .helpers import as_tensor, broadcast_shapes, broadcast_to, cast
from .manipulation import reshape, transpose
from .math import add


def _promote_pair(x, y):
    x, y = as_tensor(x), as_tensor(y)
    if x.dtype is not y.dtype:
        d = dtypes.promote_types(x.dtype, y.dtype)
        x, y = cast(x, d), cast(y, d)
    return x, y


def _swap_last(x):
    perm = list(range(x.ndim))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return transpose(x, perm)


def matmul(x, y, transpose_x=False, transpose_y=False) -> Tensor:
    """Matrix product with NumPy's rules: 1-d operands are vectors, leading dims broadcast.

    Example:
        >>> import primflow as pf
        >>> pf.matmul(pf.ones([4, 2, 3]), pf.ones([3, 5])).shape
        [4, 2, 5]
    """
    x, y = _promote_pair(x, y)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError(f"matmul needs at least 1-d operands, got shapes {x.shape} and "
                         f"{y.shape}; use multiply for scalars")
    x_shape, y_shape = x.shape, y.shape  # as the caller passed them, for error messages
    if transpose_x and x.ndim >= 2:
        x = _swap_last(x)
    if transpose_y and y.ndim >= 2:
        y = _swap_last(y)
    x_vec, y_vec = x.ndim == 1, y.ndim == 1
    if x_vec:
        x = reshape(x, [1, x._shape[0]])
    if y_vec:
        y = reshape(y, [y._shape[0], 1])
    if x._shape[-1] != y._shape[-2]:
        raise ValueError(
            f"matmul: shapes {x_shape} and {y_shape} are not aligned: the last dim of x "
            f"({x._shape[-1]}) must equal the {'' if y_vec else 'second-to-last '}dim of y "
            f"({y._shape[-2]})")
    if y.ndim == 2:
        # contract x's last dim with y's first: no need to broadcast y over x's batch dims
        out = prims.dot_general(x, y, contracting=((x.ndim - 1,), (0,)), batch=((), ()))
    else:
        try:
            batch = broadcast_shapes(x._shape[:-2], y._shape[:-2])
        except ValueError:
            raise ValueError(f"matmul: the batch dims of shapes {x_shape} and {y_shape} "
                             f"({x.shape[:-2]} and {y.shape[:-2]}) cannot be broadcast "
                             f"together") from None
        x = broadcast_to(x, batch + tuple(x._shape[-2:]))
        y = broadcast_to(y, batch + tuple(y._shape[-2:]))
        nb = len(batch)
        out = prims.dot_general(x, y, contracting=((nb + 1,), (nb,)),
                                batch=(tuple(range(nb)), tuple(range(nb))))
    if x_vec:
        out = reshape(out, out.shape[:-2] + out.shape[-1:])
    if y_vec:
        out = reshape(out, out.shape[:-1])
    return out


def mm(x, y) -> Tensor:
    """Product of two matrices.

    Example:
        >>> import primflow as pf
        >>> pf.mm(pf.eye(2), pf.to_tensor([[1.0, 2.0], [3.0, 4.0]])).numpy()
        array([[1., 2.],
               [3., 4.]], dtype=float32)
    """
    return matmul(x, y)



def dot(x, y) -> Tensor:
    """Inner product of 1-d tensors; for 2-d, row-wise inner products (Paddle).

    Example:
        >>> import primflow as pf
        >>> float(pf.dot(pf.to_tensor([1.0, 2.0]), pf.to_tensor([3.0, 4.0])))
        11.0
    """
    x, y = _promote_pair(x, y)
    if x._shape != y._shape or x.ndim not in (1, 2):
        raise ValueError(f"dot needs two 1-d or 2-d tensors of the same shape, got {x.shape} "
                         f"and {y.shape}")
    if x.ndim == 1:
        return prims.dot_general(x, y, contracting=((0,), (0,)), batch=((), ()))
    return prims.dot_general(x, y, contracting=((1,), (1,)), batch=((0,), (0,)))


def outer(x, y) -> Tensor:
    """Outer product of two vectors (flattened first).

    Example:
        >>> import primflow as pf
        >>> pf.outer(pf.to_tensor([1.0, 2.0]), pf.to_tensor([1.0, 10.0])).numpy()
        array([[ 1., 10.],
               [ 2., 20.]], dtype=float32)
    """
    x, y = _promote_pair(x, y)
    x, y = reshape(x, [-1]), reshape(y, [-1])
    return prims.dot_general(x, y, contracting=((), ()), batch=((), ()))


def inner(x, y) -> Tensor:
    """Sum product over the last dims.

    Example:
        >>> import primflow as pf
        >>> pf.inner(pf.to_tensor([1.0, 2.0]), pf.to_tensor([3.0, 4.0])).numpy()
        array(11., dtype=float32)
    """
    x, y = _promote_pair(x, y)
    if x._shape[-1] != y._shape[-1]:
        raise ValueError(f"inner: last dims differ in shapes {x.shape} and {y.shape}")
    return prims.dot_general(x, y, contracting=((x.ndim - 1,), (y.ndim - 1,)),
                             batch=((), ()))


def linear(x, weight, bias=None) -> Tensor:
    """``x @ weight + bias`` with Paddle's weight layout ``[in_features, out_features]``.

    Example:
        >>> import primflow as pf
        >>> pf.nn.functional.linear(pf.ones([4, 3]), pf.ones([3, 2]), pf.zeros([2])).shape
        [4, 2]
    """
    x, weight = _promote_pair(x, weight)
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-d [in_features, out_features], got "
                         f"{weight.shape}")
    if x._shape[-1] != weight._shape[0]:
        raise ValueError(f"linear: input has {x._shape[-1]} features (shape {x.shape}) but "
                         f"weight expects {weight._shape[0]} (shape {weight.shape})")
    out = matmul(x, weight)
    if bias is not None:
        out = add(out, bias)
    return out


# ---- solves, decompositions, norms: pf.linalg is this module ----------------------
from .decompositions import (cholesky, cholesky_solve, cond, det, eigh, eigvalsh,  # noqa: E402
                             inv, lstsq, lu, lu_solve, lu_unpack, matrix_exp, matrix_norm,
                             matrix_power, norm, pinv, qr, slogdet, solve, svd, svdvals,
                             triangular_solve, vector_norm)
