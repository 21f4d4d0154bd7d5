"""Global execution state: whether the tape records, and the stack of active transforms.

Kept in one tiny object so the eager hot path reads two attributes and nothing else.
"""

from __future__ import annotations

import contextlib
import functools
import threading


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True  # tape records ops whose inputs require grad
        self.trace_stack = []  # active transform traces, innermost last (see core/trace.py)
        self.decompose = False  # force composites with fused kernels to decompose (later)


state = _State()


class no_grad(contextlib.ContextDecorator):
    """Context manager / decorator that stops the tape from recording.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([1.0], stop_gradient=False)
        >>> with pf.no_grad():
        ...     y = x * 2
        >>> y.stop_gradient
        True
    """

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = False
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False


class enable_grad(contextlib.ContextDecorator):
    """Context manager / decorator that turns recording back on (inside ``no_grad``)."""

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = True
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False


class set_grad_enabled(contextlib.ContextDecorator):
    """Turns recording on or off for a ``with`` block, e.g. ``with pf.set_grad_enabled(False)``."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = state.grad_enabled
        state.grad_enabled = self.mode
        return self

    def __exit__(self, *exc):
        state.grad_enabled = self._prev
        return False


def is_grad_enabled() -> bool:
    """Whether the tape currently records operations."""
    return state.grad_enabled


def _with_grad_mode(fn, mode):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        prev = state.grad_enabled
        state.grad_enabled = mode
        try:
            return fn(*args, **kwargs)
        finally:
            state.grad_enabled = prev

    return wrapper
