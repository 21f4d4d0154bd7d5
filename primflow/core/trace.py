"""Transform traces: the hook that lets one rule set serve eager mode and every transform.

A transform (forward mode, vmap, jit) pushes a ``Trace`` on ``state.trace_stack`` and wraps
its inputs in that trace's ``Tracer`` subclass. ``Primitive.bind`` hands any call that has a
tracer among its inputs to the innermost such trace (highest level), which computes with
the tracer's payload by binding primitives again: one level further down, until plain
tensors run eagerly. Nesting transforms nests traces; nothing else is needed.
"""

from __future__ import annotations

import abc
import contextlib

from .state import pop_trace, push_trace, state
from .tensor import Tensor


class Trace(abc.ABC):
    """One active transform. ``level`` orders nested transforms (innermost is highest)."""

    # whether this trace also records primitives that have none of its tracers among their
    # inputs: creation primitives (full, iota, random) and operations on tensors requiring
    # grad. True for staging traces (jit), which must see constants and parameters.
    stages_creation = False

    def __init__(self, level: int):
        self.level = level

    @abc.abstractmethod
    def process_primitive(self, prim, args, params):
        """Applies ``prim`` to ``args`` (tracers of this trace or plain values)."""

    def __repr__(self):
        return f"{type(self).__name__}(level={self.level})"


class Tracer(Tensor):
    """A tensor-like value owned by a trace. Subclasses set ``_trace`` and ``aval``."""

    __slots__ = ("_trace", "aval")

    def _init_tracer(self, trace, aval):
        """Sets the fields every tracer has: its trace and abstract value, and the tape
        fields a fresh value starts with (no graph, no gradient)."""
        self._trace = trace
        self.aval = aval
        self.stop_gradient = True
        self._node = None
        self.grad = None
        self._version = 0
        self.name = None

    @property
    def _shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    def numpy(self):
        raise TypeError(
            f"cannot convert a traced value ({self.aval}) of {self._trace} to NumPy inside a "
            f"transformed function; return it from the function instead")

    def __repr__(self):
        return f"{type(self).__name__}({self.aval})"


@contextlib.contextmanager
def new_trace(trace_cls, *args, **kwargs):
    """Pushes a new trace one level above the current innermost one; pops it on exit."""
    level = len(state.trace_stack) + 1
    trace = trace_cls(level, *args, **kwargs)
    push_trace(trace)
    try:
        yield trace
    finally:
        pop_trace()
