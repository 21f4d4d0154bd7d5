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
  (``backends/numpy_taylor.py``; dispatched by ``taylor_series`` below).
* ``"jet"``: ``is_zero`` and ``rescale`` on concrete coefficients for ``pf.jet``
  (``backends/numpy_taylor.py``; used by ``autodiff/taylor.py``).

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
from ..core.tensor import Tensor
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


def taylor_series(name, x0, z0, xs, params, top_weights=None):
    """The series ``[z0, z1, ..., zK]`` of the unary primitive ``name`` computed by the
    backend's fused Taylor kernel, or None where the rule in primitives must run instead.

    The kernel computes the same values, but no primitive sees them, so it runs only where
    the one fast-path predicate allows (``backends/fast_paths.py``: nothing records, traces
    or decomposes) on floating tensors of one dtype. Coefficients of shape ``(*lead, *x0.shape)``
    (several series at once, as collapsed Taylor mode passes them) are allowed here,
    where the rule in primitives needs them vmapped; with ``top_weights`` (a tensor of
    the lead dims' size) the top coefficient comes back summed over them with these
    weights, ``sum_r w[r] zK[r]`` of x0's shape.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([0.5], dtype="float64")
        >>> zs = taylor_series("tanh", x, pf.tanh(x), [x, pf.ones_like(x), None], {})
        >>> [round(float(z[0]), 6) for z in zs[1:]]  # tanh', tanh''/2
        [0.786448, -0.363431]
    """
    present = [c for c in xs[1:] if c is not None]
    if not present:
        return None
    extra = () if top_weights is None else (top_weights,)
    kernel = lookup("taylor", name, (x0, z0, *present, *extra))
    if kernel is None:
        return None
    dtype, shape = x0.dtype, present[0]._shape
    if dtype.kind != "f" or not x0.size or z0.dtype is not dtype:  # real floats only
        return None
    if tuple(shape[len(shape) - x0.ndim:]) != tuple(x0._shape):
        return None
    for c in present:
        if c._shape != shape or c.dtype is not dtype:
            return None
    if top_weights is not None and (top_weights.size * x0.size != present[0].size
                                    or top_weights.dtype is not dtype):
        return None
    values = kernel(x0._value, z0._value, [None if c is None else c._value for c in xs[1:]],
                    None if top_weights is None else top_weights._value, **params)
    return [z0] + [None if v is None else Tensor._wrap(v) for v in values]
