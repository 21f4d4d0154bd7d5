"""Fast paths: backend kernels that compute, in eager mode, what a rule written in primitives
defines. One registry, one predicate.

The rule in primitives is the definition: it is what transforms trace, what higher
derivatives differentiate and what ``pf.decompose()`` forces. A fast path computes the same
values with fewer, larger kernels, but no primitive sees them, so it may only run where
nothing could have recorded those primitives. The registry is ``Backend.fast_paths[kind]
[name]``, by kind:

* ``"composite"``: a composite op's fused forward and first-order backward
  (``backends/numpy_fused.py``; dispatched by ``ops/_fused.py``). It records its own tape
  node, whose backward falls back to the decomposition when it is itself recorded.
* ``"taylor"``: a unary primitive's Taylor rule in cache-sized blocks
  (``backends/numpy_taylor.py``; dispatched by ``prims/_taylor.py: kernel_series``).

Each is kept only while it wins (``bench`` W7 and W1: >= 1.3x over its rule in eager mode),
and tests compare each with its rule (tests/test_fused.py, tests/test_taylor_kernels.py).
The second-order special cases of ``pf.hessian`` are not kernels: they follow from the
primitives' declared facts (``linear``, ``linear_in``, the elementwise family).

Example:
    >>> import primflow as pf
    >>> x = pf.to_tensor([1.0, 2.0])
    >>> lookup("taylor", "tanh", (x,)) is not None
    True
    >>> with pf.decompose():
    ...     lookup("taylor", "tanh", (x,)) is None
    True
"""

from __future__ import annotations

from ..core.state import state
from ..core.trace import Tracer
from . import get_backend


def allowed(tensors, *, records_itself=False) -> bool:
    """THE predicate: whether a fast path may replace the rule for ``tensors`` (the inputs,
    ``None`` for absent ones) now. False when ``pf.decompose()`` is on, inside ``pf.jit``
    tracing (its staging trace records even primitives on plain tensors), when an input is
    a transform's tracer, and, unless the fast path ``records_itself`` (composites), when
    the tape would record an input.

    Example:
        >>> import primflow as pf
        >>> allowed((pf.to_tensor(1.0, stop_gradient=False),))
        False
    """
    if state.decompose:
        return False
    for trace in state.trace_stack:
        if getattr(trace, "stages_creation", False):
            return False
    recording = state.grad_enabled and not records_itself
    for t in tensors:
        if t is None:
            continue
        if isinstance(t, Tracer) or (recording and not t.stop_gradient):
            return False
    return True


def lookup(kind, name, tensors, *, records_itself=False):
    """The active backend's fast path ``kind``/``name`` if ``allowed(tensors)``, else None.

    Example:
        >>> lookup("composite", "no_such_op", ()) is None
        True
    """
    kernel = get_backend().fast_paths.get(kind, {}).get(name)
    if kernel is None or not allowed(tensors, records_itself=records_itself):
        return None
    return kernel
