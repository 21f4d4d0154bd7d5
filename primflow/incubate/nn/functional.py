"""``pf.incubate.nn.functional``: Paddle's fused functions, with Paddle's signatures.

``fused_rms_norm`` is one fused kernel in Paddle; here it is ``pf.nn.functional.rms_norm``
(a composite with a fused eager kernel and a primitive decomposition, so every derivative
order works) plus the additions Paddle fuses around it.
"""

from __future__ import annotations

import math

from ...core.tensor import Tensor
from ...ops.activation import rms_norm
from ...ops.creation import zeros
from ...ops.helpers import as_tensor
from ...ops.manipulation import reshape
from ...ops.math import add


def fused_rms_norm(x, norm_weight, norm_bias, epsilon, begin_norm_axis=1, bias=None,
                   residual=None, quant_scale=-1, quant_round_type=0, quant_max_bound=0,
                   quant_min_bound=0) -> tuple:
    """RMS normalisation over the axes from ``begin_norm_axis`` on (Paddle's
    ``paddle.incubate.nn.functional.fused_rms_norm``).

    With ``h = x + bias + residual`` (``h = x`` without a residual):
    ``out = h / sqrt(mean(h^2) + epsilon) * norm_weight + norm_bias``, the mean over the
    normalised axes. ``norm_weight`` (and ``norm_bias``) hold one value per normalised
    element (a vector of size ``prod(x.shape[begin_norm_axis:])``, as in Paddle).

    Returns ``(out, residual_out)`` as Paddle does: ``residual_out`` is ``h`` when a
    ``residual`` is given, else an empty tensor. Paddle fuses ``bias`` only together with
    ``residual`` (its kernel ignores a bias alone), so a bias without a residual is an error
    here. Quantised output (``quant_scale > 0``) is not supported.

    Example:
        >>> import primflow as pf
        >>> fused_rms_norm = pf.incubate.nn.functional.fused_rms_norm
        >>> out, _ = fused_rms_norm(pf.to_tensor([[3.0, 4.0]]), pf.ones([2]), None, 0.0, 1)
        >>> out.numpy().round(3)
        array([[0.849, 1.131]], dtype=float32)
    """
    x = as_tensor(x)
    rank = x.ndim
    axis = begin_norm_axis + rank if begin_norm_axis < 0 else begin_norm_axis
    if not 0 <= axis < rank:
        raise ValueError(f"fused_rms_norm: begin_norm_axis must be in [-{rank}, {rank}) for "
                         f"an input of rank {rank}, got {begin_norm_axis}")
    if quant_scale > 0:
        raise ValueError(f"fused_rms_norm: quantised output (quant_scale={quant_scale}) is not "
                         f"supported; leave quant_scale at -1 for a floating output")
    if bias is not None and residual is None:
        raise ValueError("fused_rms_norm: bias is fused only together with residual (Paddle "
                         "ignores a bias without one); add it to x yourself, or pass "
                         "residual=")
    normalized = list(x.shape[axis:])
    size = math.prod(normalized)
    weight = _per_element("norm_weight", norm_weight, normalized, size)
    h = x
    if residual is not None:
        h = add(add(h, bias), residual) if bias is not None else add(h, residual)
    out = rms_norm(h, normalized, weight, epsilon)
    if norm_bias is not None:
        out = add(out, _per_element("norm_bias", norm_bias, normalized, size))
    residual_out = h if residual is not None else zeros([0], dtype=x.dtype)
    return out, residual_out


def _per_element(name, value, normalized, size) -> Tensor:
    """A weight or bias vector of ``size`` values, in the normalised axes' shape."""
    value = as_tensor(value)
    if value.size != size or value.ndim != 1:
        raise ValueError(f"fused_rms_norm: {name} must be a vector of {size} values (one per "
                         f"element of the normalised shape {normalized}), got shape "
                         f"{value.shape}")
    return reshape(value, normalized)


__all__ = ["fused_rms_norm"]
