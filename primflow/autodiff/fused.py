"""Reverse mode for fused composites: the hook ``primflow.ops._fused.decomposed_vjp``.

``ops`` sits below ``autodiff`` and may not import it, yet a fused composite's node needs the
tape to differentiate its decomposition when the backward pass is itself recorded
(``create_graph=True``) or runs under a transform. ``primflow/autodiff/__init__.py``
installs ``decomposed_vjp`` below into ``primflow.ops._fused`` when autodiff is imported
(``import primflow`` always does).
"""

from __future__ import annotations

from ..core.state import enable_grad, state
from .functional import grad_handle
from .tape import _run_backward


def decomposed_vjp(fn, inputs, needs, g):
    """Cotangents of ``fn(*inputs)`` (a composite's primitive decomposition; ``None`` for
    absent inputs) for the output cotangent ``g``: one per input with ``needs[i]`` True,
    ``None`` elsewhere. Like checkpoint's backward: the decomposition is recomputed on
    handles of the inputs and differentiated on the tape, recorded when the caller records,
    so derivatives of every order come from the primitives' rules."""
    create_graph = state.grad_enabled
    with enable_grad():
        args = [grad_handle(x) if need else x for x, need in zip(inputs, needs)]
        out = fn(*args)
    targets = [a for a, need in zip(args, needs) if need]
    if out.stop_gradient:  # nothing on the path needs the gradient
        return [None] * len(inputs)
    grads = iter(_run_backward([(out, g)], targets, create_graph=create_graph,
                               retain_graph=create_graph))
    return [next(grads) if need else None for need in needs]
