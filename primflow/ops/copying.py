"""Copies and conversions that always give a new tensor: ``assign``, ``cast``, ``clone``
(Paddle's names). They stay in the graph: gradients flow back to the source tensor."""

from __future__ import annotations

from .. import prims
from ..core import dtypes
from ..core.tensor import Tensor
from .creation import to_tensor
from .math import warn_if_discarding_imaginary
from .tensor_methods import _inplace


def cast(x, dtype) -> Tensor:
    """``x`` converted to ``dtype``; always a new tensor, also when the dtype is the same
    (Paddle's ``paddle.cast``). Differentiable between floating dtypes.

    Example:
        >>> import primflow as pf
        >>> pf.cast(pf.to_tensor([1.7, -2.2]), "int32").numpy()
        array([ 1, -2], dtype=int32)
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"cast expects a Tensor, got {type(x).__name__}; use "
                        f"pf.to_tensor(data, dtype=...) for other data")
    dtype = dtypes.as_dtype(dtype)
    warn_if_discarding_imaginary(x, dtype, "cast")
    return prims.convert_element_type(x, dtype=dtype)


def clone(x) -> Tensor:
    """A copy of ``x`` that stays in the graph (``x.clone()``).

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0, 2.0])
        >>> y = pf.clone(x); y[0] = 5.0; x.numpy()
        array([1., 2.], dtype=float32)
    """
    return cast(x, x.dtype)


def assign(x, output=None) -> Tensor:
    """Copies ``x`` (a Tensor, NumPy array, list or number) into a new tensor, or into
    ``output`` (in place, same shape) when given, and returns it (Paddle's
    ``paddle.assign``). A Tensor source stays in the graph.

    Example:
        >>> import primflow as pf
        >>> pf.assign([[1.0, 2.0]]).shape
        [1, 2]
        >>> out = pf.zeros([2]); _ = pf.assign(pf.ones([2]), out); out.numpy()
        array([1., 1.], dtype=float32)
    """
    src = clone(x) if isinstance(x, Tensor) else to_tensor(x)
    if output is None:
        return src
    if not isinstance(output, Tensor):
        raise TypeError(f"assign: output must be a Tensor, got {type(output).__name__}")
    if src.shape != output.shape:
        raise ValueError(f"assign: cannot copy a tensor of shape {src.shape} into output of "
                         f"shape {output.shape}")
    return _inplace(output, src, "assign()")  # casts to output's dtype, bumps its version
