"""``pf.nn.utils``: functional gradient clipping and parameter/vector conversion
(Paddle's ``paddle.nn.utils``, which follows PyTorch's signatures)."""

from __future__ import annotations

import math

from ..core.state import no_grad
from ..core.tensor import Tensor
from ..ops import math as _math
from ..ops import reduction as _red
from ..ops.creation import to_tensor
from ..ops.manipulation import concat, reshape

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters"]


def _as_params(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients in place (rebinding ``p.grad``) so that their total norm is at
    most ``max_norm``; returns the total norm before clipping as a float64 tensor.

    Args:
        parameters: a tensor or an iterable of tensors with ``.grad``.
        max_norm: the largest allowed total norm.
        norm_type: p of the p-norm (``float('inf')`` for the max norm).
        error_if_nonfinite: raise if the total norm is nan or inf.

    Example:
        >>> import primflow as pf
        >>> w = pf.to_tensor([3.0, 4.0], stop_gradient=False)
        >>> (w * w).sum().backward()          # grad [6, 8], norm 10
        >>> float(pf.nn.utils.clip_grad_norm_([w], 1.0))
        10.0
        >>> [round(v, 4) for v in w.grad.numpy().tolist()]
        [0.6, 0.8]
    """
    params = [p for p in _as_params(parameters) if p.grad is not None]
    norm_type = float(norm_type)
    max_norm = float(max_norm)
    if not params:
        return to_tensor(0.0, dtype="float64")
    with no_grad():
        grads = [p.grad.detach().astype("float64") for p in params]
        if math.isinf(norm_type):
            total = max(float(_red.max(_math.abs(g))) if g.size else 0.0 for g in grads)
        else:
            total = sum(float(_red.sum(_math.pow(_math.abs(g), norm_type))) for g in grads)
            total = total ** (1.0 / norm_type)
        if error_if_nonfinite and not math.isfinite(total):
            raise RuntimeError(f"the total norm of order {norm_type} of the gradients is "
                               f"{total}; pass error_if_nonfinite=False to clip anyway")
        coef = max_norm / (total + 1e-6)
        if coef < 1.0:
            for p in params:
                p.grad = _math.multiply(p.grad.detach(), coef)
    return to_tensor(total, dtype="float64")


def clip_grad_value_(parameters, clip_value):
    """Clips every gradient element to ``[-clip_value, clip_value]`` (rebinding ``p.grad``).

    Example:
        >>> import primflow as pf
        >>> w = pf.to_tensor([3.0], stop_gradient=False)
        >>> (w * w).sum().backward()
        >>> pf.nn.utils.clip_grad_value_([w], 1.0); w.grad.numpy()
        array([1.], dtype=float32)
    """
    clip_value = abs(float(clip_value))
    with no_grad():
        for p in _as_params(parameters):
            if p.grad is not None:
                p.grad = _math.clip(p.grad.detach(), -clip_value, clip_value)


def parameters_to_vector(parameters, name=None):
    """All parameters flattened and joined into one 1-d tensor (not recorded).

    Example:
        >>> import primflow as pf
        >>> pf.nn.utils.parameters_to_vector(pf.nn.Linear(2, 3).parameters()).shape
        [9]
    """
    del name
    with no_grad():
        return concat([reshape(p.detach(), [-1]) for p in _as_params(parameters)])


def vector_to_parameters(vec, parameters, name=None):
    """Copies consecutive slices of the 1-d ``vec`` into the parameters (in place, bumping
    their version counters).

    Example:
        >>> import primflow as pf
        >>> lin = pf.nn.Linear(2, 3)
        >>> pf.nn.utils.vector_to_parameters(pf.zeros([9]), lin.parameters())
        >>> float(lin.weight.abs().sum())
        0.0
    """
    del name
    params = _as_params(parameters)
    total = sum(p.size for p in params)
    if vec.ndim != 1 or vec.shape[0] != total:
        raise ValueError(f"vector_to_parameters: vec must be 1-d with {total} elements (the "
                         f"parameters' total size), got shape {vec.shape}")
    offset = 0
    with no_grad():
        for p in params:
            piece = reshape(vec[offset:offset + p.size], p.shape).astype(p.dtype)
            p._set_value(piece._value)
            offset += p.size
