"""Global execution state: whether the tape records, and the stack of active transforms.

Kept in one tiny object so the eager hot path reads two attributes and nothing else.
"""

from __future__ import annotations

import contextlib
import threading


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True  # tape records ops whose inputs require grad
        self.trace_stack = []  # active transform traces, innermost last (see core/trace.py)
        self.decompose = False  # no fused composite / Taylor kernels (pf.decompose)
        # pf.amp.auto_cast while on: (low-precision dtype, white list, black list); pf.jit
        # keys its cache on it, since the casts it inserts are traced into the program
        self.amp = None


state = _State()


class _Departures:
    """How many departures from the default state exist in any thread: threads with
    recording off plus active transform traces. While it is 0, ``bind`` skips reading the
    thread-local state (the common eager case), which is measurably cheaper per op."""

    __slots__ = ("count", "ambient")

    def __init__(self):
        self.count = 0
        # True once tracers that live outside any transform exist (distributed tensors):
        # then ``bind`` looks for tracers among its inputs even with no trace pushed
        self.ambient = False


departures = _Departures()
_lock = threading.Lock()


def set_grad_mode(mode: bool) -> bool:
    """Sets this thread's recording flag; returns the previous one. All changes go here."""
    prev = state.grad_enabled
    if mode != prev:
        with _lock:
            departures.count += -1 if mode else 1
        state.grad_enabled = mode
    return prev


def enable_ambient_tracers() -> None:
    """Makes ``bind`` dispatch tracers whose trace is not on the trace stack (a trace at
    level 0 that lives for the whole program, like primflow.distributed's). Costs eager
    ops one thread-local read from then on."""
    if not departures.ambient:
        with _lock:
            departures.count += 1
            departures.ambient = True


def push_trace(trace) -> None:
    with _lock:
        departures.count += 1
    state.trace_stack.append(trace)


def pop_trace() -> None:
    state.trace_stack.pop()
    with _lock:
        departures.count -= 1


def note_constant_reads(tensors) -> None:
    """Tells the active traces that these concrete tensors were read while tracing (an
    operation on them ran eagerly, or their value was taken as a Python number): what is
    traced holds their current values, so ``pf.jit`` checks at each call that they have
    not changed in place since (``Trace.read_constants``)."""
    for trace in state.trace_stack:
        trace.read_constants(tensors)


class set_grad_enabled(contextlib.ContextDecorator):
    """Turns recording on or off for a ``with`` block, e.g. ``with pf.set_grad_enabled(False)``.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0], stop_gradient=False)
        >>> with pf.set_grad_enabled(False):
        ...     y = x * 2
        >>> y.stop_gradient
        True
    """

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = set_grad_mode(self.mode)
        return self

    def __exit__(self, *exc):
        set_grad_mode(self._prev)
        return False


class no_grad(set_grad_enabled):
    """Context manager / decorator that stops the tape from recording.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0], stop_gradient=False)
        >>> with pf.no_grad():
        ...     y = x * 2
        >>> y.stop_gradient
        True
    """

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    """Context manager / decorator that turns recording back on (inside ``no_grad``).

    Example:
        >>> import primflow as pf
        >>> with pf.no_grad():
        ...     with pf.enable_grad():
        ...         print(pf.is_grad_enabled())
        True
    """

    def __init__(self):
        super().__init__(True)


def is_grad_enabled() -> bool:
    """Whether the tape currently records operations.

    Example:
        >>> import primflow as pf
        >>> with pf.no_grad():
        ...     print(pf.is_grad_enabled())
        False
        >>> pf.is_grad_enabled()
        True
    """
    return state.grad_enabled


class decompose(contextlib.ContextDecorator):
    """Forces composites with fused kernels (softmax, layer_norm, ...) to run as their
    primitive decomposition, like Paddle's prim flags, and Taylor mode to run every
    primitive's Taylor rule in primitives (no fused Taylor kernels), inside a ``with``
    block or a decorated function. Creating it changes nothing until it is entered;
    ``pf.set_decompose(True)`` switches the mode on until switched off.

    Example:
        >>> import primflow as pf
        >>> mode = pf.decompose()  # nothing changes yet
        >>> pf.is_decomposing()
        False
        >>> with mode:
        ...     y = pf.nn.functional.softmax(pf.ones([2])); pf.is_decomposing()
        True
    """

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)
        self._prev = []  # a stack: one instance may be entered again (a decorated recursion)

    def __enter__(self):
        self._prev.append(set_decompose(self.mode))
        return self

    def __exit__(self, *exc):
        set_decompose(self._prev.pop())
        return False


def set_decompose(mode: bool) -> bool:
    """Switches decomposition (see ``decompose``) on or off in this thread until switched
    again; returns the previous mode.

    Example:
        >>> import primflow as pf
        >>> before = pf.set_decompose(True); pf.is_decomposing()
        True
        >>> pf.set_decompose(before)
        True
    """
    prev = state.decompose
    state.decompose = bool(mode)
    return prev


def is_decomposing() -> bool:
    """Whether composites are forced to decompose into primitives (``pf.decompose``).

    Example:
        >>> import primflow as pf
        >>> pf.is_decomposing()
        False
    """
    return state.decompose
