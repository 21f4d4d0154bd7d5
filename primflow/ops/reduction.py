"""Reductions with Paddle's ``axis=`` / ``keepdim=`` conventions, and composites built on
them (mean, var, std, norm, logsumexp)."""

from __future__ import annotations

import builtins
import math as _math
import warnings

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from . import _fused
from .helpers import as_tensor, cast, float_operand, full, normalize_axis, single_axis
from .math import isfinite


def _keep(out, x_shape, axes, keepdim):
    if not keepdim:
        return out
    shape = tuple(1 if i in axes else d for i, d in enumerate(x_shape))
    return prims.reshape(out, shape=shape)


def sum(x, axis=None, dtype=None, keepdim=False) -> Tensor:  # noqa: A001 - public name
    """Sum over ``axis`` (all axes when None). Bool and int32 sums give int64.

    Example:
        >>> import primflow as pf
        >>> pf.sum(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1).numpy()
        array([3., 7.], dtype=float32)
    """
    x = as_tensor(x)
    if dtype is not None:
        x = cast(x, dtype)
    elif x.dtype.is_bool or x.dtype is dtypes.int32:
        x = cast(x, dtypes.int64)
    axes = normalize_axis(axis, x.ndim)
    return _keep(prims.reduce_sum(x, axes=axes), x._shape, axes, keepdim)


def _count(x_shape, axes):
    return _math.prod(x_shape[a] for a in axes)


def mean(x, axis=None, keepdim=False) -> Tensor:
    """Arithmetic mean over ``axis``.

    Example:
        >>> import primflow as pf
        >>> float(pf.mean(pf.to_tensor([1.0, 2.0, 6.0])))
        3.0
    """
    x = float_operand(x)
    axes = normalize_axis(axis, x.ndim)
    total = prims.reduce_sum(x, axes=axes)
    n = _count(x._shape, axes)
    if n == 0:  # NumPy: nan and "Mean of empty slice"; 0 / 0 would warn about a division
        _warn_nan("mean", f"over {n} elements (shape {x.shape}, axis {axis!r})")
        return _keep(_nan_like(total), x._shape, axes, keepdim)
    out = prims.div(total, full(total._shape, float(n), x.dtype))
    return _keep(out, x._shape, axes, keepdim)


def _warn_nan(name, why):
    # stacklevel 3: the line that called the public op
    warnings.warn(f"{name} {why} is nan", RuntimeWarning, stacklevel=3)


def _nan_like(total):
    """nan of ``total``'s shape, still a function of it (a gradient flows, and is nan)."""
    return prims.mul(total, full(total._shape, float("nan"), total.dtype))


def max(x, axis=None, keepdim=False) -> Tensor:  # noqa: A001 - public name
    """Maximum over ``axis``; ties share the gradient evenly.

    Example:
        >>> import primflow as pf
        >>> float(pf.max(pf.to_tensor([1.0, 5.0, 2.0])))
        5.0
    """
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim)
    _check_nonempty(x, axes, "max")
    return _keep(prims.reduce_max(x, axes=axes), x._shape, axes, keepdim)


def min(x, axis=None, keepdim=False) -> Tensor:  # noqa: A001 - public name
    """Minimum over ``axis``.

    Example:
        >>> import primflow as pf
        >>> pf.min(pf.to_tensor([[3.0, 1.0], [0.0, 2.0]]), axis=0).numpy()
        array([0., 1.], dtype=float32)
    """
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim)
    _check_nonempty(x, axes, "min")
    return _keep(prims.reduce_min(x, axes=axes), x._shape, axes, keepdim)


def _check_nonempty(x, axes, name):
    if builtins.any(x._shape[a] == 0 for a in axes):
        raise ValueError(f"{name} of an empty tensor (shape {x.shape}, reduced axes "
                         f"{list(axes)}) has no identity; check the input shape")


def _arg(prim, x, axis, keepdim, dtype, name):
    x = as_tensor(x)
    if axis is None:
        x = prims.reshape(x, shape=(x.size,))
        axis = 0
    axis = single_axis(axis, x.ndim, f"{name}: axis")
    _check_nonempty(x, (axis,), name)
    index_dtype = dtypes.as_dtype(dtype)
    if not index_dtype.is_integer:
        raise TypeError(f"{name}: dtype must be an integer dtype (int32 or int64), got "
                        f"{index_dtype.name}")
    out = prim(x, axis=axis, index_dtype=index_dtype)
    return _keep(out, x._shape, (axis,), keepdim)


def argmax(x, axis=None, keepdim=False, dtype="int64") -> Tensor:
    """Index of the maximum (over the flattened tensor when ``axis`` is None).

    Example:
        >>> import primflow as pf
        >>> int(pf.argmax(pf.to_tensor([1.0, 5.0, 2.0])))
        1
    """
    return _arg(prims.argmax, x, axis, keepdim, dtype, "argmax")


def argmin(x, axis=None, keepdim=False, dtype="int64") -> Tensor:
    """Index of the minimum.

    Example:
        >>> import primflow as pf
        >>> pf.argmin(pf.to_tensor([[3.0, 1.0], [0.0, 2.0]]), axis=1).numpy()
        array([1, 0])
    """
    return _arg(prims.argmin, x, axis, keepdim, dtype, "argmin")


def all(x, axis=None, keepdim=False) -> Tensor:  # noqa: A001 - public name
    """True where every element along ``axis`` is true.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([[1.0, -1.0], [2.0, 3.0]])
        >>> pf.all(x > 0, axis=1).numpy()
        array([False,  True])
    """
    x = as_tensor(x)
    if not x.dtype.is_bool:
        x = prims.ne(x, full(x._shape, 0, x.dtype))
    axes = normalize_axis(axis, x.ndim)
    if builtins.any(x._shape[a] == 0 for a in axes):
        return full([d for i, d in enumerate(x._shape) if i not in axes], True, dtypes.bool_)
    return _keep(prims.reduce_min(x, axes=axes), x._shape, axes, keepdim)


def any(x, axis=None, keepdim=False) -> Tensor:  # noqa: A001 - public name
    """True where some element along ``axis`` is true.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([[1.0, -1.0], [2.0, 3.0]])
        >>> pf.any(x < 0, axis=1).numpy()
        array([ True, False])
    """
    x = as_tensor(x)
    if not x.dtype.is_bool:
        x = prims.ne(x, full(x._shape, 0, x.dtype))
    axes = normalize_axis(axis, x.ndim)
    if builtins.any(x._shape[a] == 0 for a in axes):
        return full([d for i, d in enumerate(x._shape) if i not in axes], False, dtypes.bool_)
    return _keep(prims.reduce_max(x, axes=axes), x._shape, axes, keepdim)


def var(x, axis=None, unbiased=True, keepdim=False) -> Tensor:
    """Variance over ``axis`` (divides by n - 1 when ``unbiased``, as Paddle does). With no
    degrees of freedom (an empty axis, or one element and ``unbiased``) the result is nan
    and a RuntimeWarning says why, as in NumPy and PyTorch.

    Example:
        >>> import primflow as pf
        >>> float(pf.var(pf.to_tensor([1.0, 2.0, 3.0])))
        1.0
    """
    x = float_operand(x)
    axes = normalize_axis(axis, x.ndim)
    n = _count(x._shape, axes)
    ddof = 1 if unbiased else 0
    if n - ddof <= 0:  # no degrees of freedom left: nan with a warning (NumPy, PyTorch)
        _warn_nan("var/std", f"with {n} elements and unbiased={bool(unbiased)} (shape "
                             f"{x.shape}, axis {axis!r}: degrees of freedom <= 0)")
        return _keep(_nan_like(prims.reduce_sum(x, axes=axes)), x._shape, axes, keepdim)
    centered = prims.sub(x, _broadcast_back(mean(x, axes), x._shape, axes))
    total = prims.reduce_sum(prims.integer_pow(centered, y=2), axes=axes)
    out = prims.div(total, full(total._shape, float(n - ddof), x.dtype))
    return _keep(out, x._shape, axes, keepdim)


def std(x, axis=None, unbiased=True, keepdim=False) -> Tensor:
    """Standard deviation, ``sqrt(var)``.

    Example:
        >>> import primflow as pf
        >>> pf.std(pf.to_tensor([1.0, 3.0]), unbiased=False).numpy()
        array(1., dtype=float32)
    """
    return prims.sqrt(var(x, axis, unbiased, keepdim))


def _broadcast_back(reduced, x_shape, axes):
    kept = tuple(i for i in range(len(x_shape)) if i not in axes)
    return prims.broadcast_in_dim(reduced, shape=tuple(x_shape), broadcast_dimensions=kept)


def logsumexp(x, axis=None, keepdim=False) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis``, computed stably by shifting with the maximum.

    The shift's own derivative cancels exactly, so every order of derivative is right.
    Infinite inputs give what SciPy, PyTorch and JAX give: all ``-inf`` (or an empty axis)
    gives ``-inf``, any ``+inf`` gives ``inf``; the gradient (softmax) is 0 at ``-inf``
    entries of a row that has a finite one, and nan where the row has no finite maximum
    (as PyTorch's and JAX's).
    Eager calls may run the backend's fused kernel instead (see ``ops/_fused.py``).

    Example:
        >>> import primflow as pf
        >>> round(float(pf.logsumexp(pf.to_tensor([0.0, 0.0]))), 6)
        0.693147
    """
    x = float_operand(x)
    axes = normalize_axis(axis, x.ndim)
    if builtins.any(x._shape[a] == 0 for a in axes):  # log of an empty sum: log(0)
        total = prims.reduce_sum(x, axes=axes)
        out = prims.add(total, full(total._shape, float("-inf"), x.dtype))
        return _keep(out, x._shape, axes, keepdim)
    return _fused.call("logsumexp", _logsumexp, (x,), axes=axes, keepdim=bool(keepdim))


def _logsumexp(x, *, axes, keepdim):
    m = prims.reduce_max(x, axes=axes)
    # an infinite maximum cannot shift (x - m would be inf - inf = nan): shift by 0 there,
    # so all -inf gives log(0) = -inf and a +inf gives inf
    m = prims.select(isfinite(m), m, full(m._shape, 0.0, m.dtype))
    shifted = prims.exp(prims.sub(x, _broadcast_back(m, x._shape, axes)))
    out = prims.add(m, prims.log(prims.reduce_sum(shifted, axes=axes)))
    return _keep(out, x._shape, axes, keepdim)


def norm(x, p=2, axis=None, keepdim=False) -> Tensor:
    """Vector norm over ``axis`` (all elements when None; Paddle convention, not spectral).

    ``p`` may be 'fro', 1, 2, inf, -inf or any other positive float.

    Example:
        >>> import primflow as pf
        >>> float(pf.norm(pf.to_tensor([3.0, 4.0])))
        5.0
    """
    x = float_operand(x)
    axes = normalize_axis(axis, x.ndim)
    if p in ("fro", 2, 2.0):
        out = prims.sqrt(prims.reduce_sum(prims.integer_pow(x, y=2), axes=axes))
    elif p in (1, 1.0):
        out = prims.reduce_sum(prims.abs(x), axes=axes)
    elif p in (float("inf"), float("-inf")):
        _check_nonempty(x, axes, f"norm with p={p}")
        out = (prims.reduce_max if p > 0 else prims.reduce_min)(prims.abs(x), axes=axes)
    elif isinstance(p, (int, float)) and p > 0:
        powered = prims.pow(prims.abs(x), full(x._shape, float(p), x.dtype))
        total = prims.reduce_sum(powered, axes=axes)
        out = prims.pow(total, full(total._shape, 1.0 / p, x.dtype))
    else:
        raise ValueError(f"norm: unsupported p={p!r}; use 'fro', 1, 2, inf, -inf or p > 0")
    return _keep(out, x._shape, axes, keepdim)


def cumsum(x, axis=None, dtype=None) -> Tensor:
    """Running sum along ``axis`` (over the flattened tensor when None).

    Example:
        >>> import primflow as pf
        >>> pf.cumsum(pf.to_tensor([1.0, 2.0, 3.0])).numpy()
        array([1., 3., 6.], dtype=float32)
    """
    x = as_tensor(x)
    if dtype is not None:
        x = cast(x, dtype)
    if axis is None:
        x = prims.reshape(x, shape=(x.size,))
        axis = 0
    axis = single_axis(axis, x.ndim, "cumsum: axis")
    return prims.cumsum(x, axis=axis, reverse=False)


def prod(x, axis=None, keepdim=False) -> Tensor:
    """Product over ``axis``, as a running product via repeated multiplication.

    Built by splitting the reduced axis into slices and multiplying them, so it is exact and
    differentiable everywhere (zeros included).

    Example:
        >>> import primflow as pf
        >>> pf.prod(pf.to_tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0).numpy()
        array([3., 8.], dtype=float32)
    """
    x = as_tensor(x)
    axes = normalize_axis(axis, x.ndim)
    # move reduced axes to the front, flatten them, multiply slice by slice
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = prims.transpose(x, perm=tuple(axes) + tuple(kept))
    n = _count(x._shape, axes)
    rest = tuple(x._shape[i] for i in kept)
    flat = prims.reshape(moved, shape=(n,) + rest)
    out = full(rest, 1, x.dtype)
    if n == 0:  # the empty product is 1, still a function of x (its gradient is empty)
        out = prims.add(out, prims.reduce_sum(flat, axes=(0,)))
    for i in range(n):
        row = prims.slice(flat, start=(i,) + (0,) * len(rest), limit=(i + 1,) + rest,
                          strides=(1,) * (len(rest) + 1))
        out = prims.mul(out, prims.reshape(row, shape=rest))
    return _keep(out, x._shape, axes, keepdim)
