"""Gradient clipping objects for an optimizer's ``grad_clip`` argument (Paddle's API).

Each is called with a list of ``(parameter, gradient)`` pairs and returns the clipped
list; parameters with ``need_clip=False`` pass through unchanged. They run inside the
optimizer's ``no_grad`` step and never modify a gradient tensor in place.
"""

from __future__ import annotations

import math

from ..core.state import no_grad
from ..ops import math as _math
from ..ops import reduction as _red

__all__ = ["ClipGradByGlobalNorm", "ClipGradByNorm", "ClipGradByValue"]


def _needs_clip(p):
    return getattr(p, "need_clip", True)


def _sum_squares(g):
    return float(_red.sum(_math.square(g.detach().astype("float64"))))


class ClipGradByGlobalNorm:
    """Scales all gradients by ``clip_norm / max(global_norm, clip_norm)``, where
    ``global_norm = sqrt(sum_i ||g_i||^2)`` over the parameters that need clipping.

    Example:
        >>> import primflow as pf
        >>> net = pf.nn.Linear(2, 2)
        >>> opt = pf.optimizer.SGD(0.1, parameters=net.parameters(),
        ...                        grad_clip=pf.nn.ClipGradByGlobalNorm(1.0))
    """

    def __init__(self, clip_norm, group_name="default_group", auto_skip_clip=False):
        del group_name, auto_skip_clip
        if not clip_norm > 0:
            raise ValueError(f"ClipGradByGlobalNorm: clip_norm must be > 0, got {clip_norm}")
        self.clip_norm = float(clip_norm)

    def global_norm(self, params_grads):
        """The global 2-norm of the gradients that need clipping (a Python float)."""
        total = sum(_sum_squares(g) for p, g in params_grads if g is not None and _needs_clip(p))
        return math.sqrt(total)

    def __call__(self, params_grads):
        norm = self.global_norm(params_grads)
        scale = self.clip_norm / max(norm, self.clip_norm)
        if scale == 1.0:
            return list(params_grads)
        with no_grad():
            return [(p, g if g is None or not _needs_clip(p) else _math.multiply(g, scale))
                    for p, g in params_grads]

    def __repr__(self):
        return f"ClipGradByGlobalNorm(clip_norm={self.clip_norm})"


class ClipGradByNorm:
    """Scales each gradient separately to 2-norm at most ``clip_norm``.

    Example:
        >>> import primflow as pf
        >>> p = pf.create_parameter([2], 'float32'); p.grad = pf.to_tensor([3.0, 4.0])
        >>> [(q, g)] = pf.nn.ClipGradByNorm(1.0)([(p, p.grad)])
        >>> g.numpy()
        array([0.6, 0.8], dtype=float32)
    """

    def __init__(self, clip_norm):
        if not clip_norm > 0:
            raise ValueError(f"ClipGradByNorm: clip_norm must be > 0, got {clip_norm}")
        self.clip_norm = float(clip_norm)

    def __call__(self, params_grads):
        out = []
        with no_grad():
            for p, g in params_grads:
                if g is not None and _needs_clip(p):
                    norm = math.sqrt(_sum_squares(g))
                    if norm > self.clip_norm:
                        g = _math.multiply(g, self.clip_norm / norm)
                out.append((p, g))
        return out

    def __repr__(self):
        return f"ClipGradByNorm(clip_norm={self.clip_norm})"


class ClipGradByValue:
    """Clips every gradient element to ``[min, max]`` (``min`` defaults to ``-max``).

    Example:
        >>> import primflow as pf
        >>> p = pf.create_parameter([2], 'float32')
        >>> [(q, g)] = pf.nn.ClipGradByValue(0.5)([(p, pf.to_tensor([-2.0, 0.25]))])
        >>> g.numpy()
        array([-0.5 ,  0.25], dtype=float32)
    """

    def __init__(self, max, min=None):  # noqa: A002 - Paddle's names
        max = float(max)
        min = -max if min is None else float(min)
        if not min <= max:
            raise ValueError(f"ClipGradByValue: min ({min}) must be <= max ({max})")
        self.min, self.max = min, max

    def __call__(self, params_grads):
        with no_grad():
            return [(p, g if g is None or not _needs_clip(p) else _math.clip(g, self.min,
                                                                             self.max))
                    for p, g in params_grads]

    def __repr__(self):
        return f"ClipGradByValue(min={self.min}, max={self.max})"
