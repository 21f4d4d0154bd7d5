"""The slot holding the backend that core computes with.

Core imports nothing else from primflow, and backends sit above it (they use its dtypes),
so core cannot import a backend: ``primflow.backends`` installs one here
(``install_backend``) when primflow is imported, before any primitive is declared. Core
reads it through ``active.backend``; modules whose hot paths use it keep it in a module
global instead (``on_install``), so an eager op reads one global, as before the slot.
"""

from __future__ import annotations


class _Active:
    __slots__ = ("backend",)

    def __init__(self):
        self.backend = None


active = _Active()
_listeners = []


def on_install(callback) -> None:
    """Calls ``callback(backend)`` now (if one is installed) and at every install. For core
    modules that keep the backend in a module global."""
    _listeners.append(callback)
    if active.backend is not None:
        callback(active.backend)


def install_backend(backend) -> None:
    """Makes ``backend`` the one primitives run on and tensors are stored in."""
    active.backend = backend
    for callback in _listeners:
        callback(backend)


def get_backend():
    """The installed backend (``primflow.backends`` installs NumPy's at import).

    Example:
        >>> import primflow as pf
        >>> from primflow.core.backend import get_backend
        >>> get_backend().name
        'numpy'
    """
    if active.backend is None:
        raise RuntimeError("no backend is installed; import primflow (which installs the "
                           "NumPy backend) before using primflow.core directly")
    return active.backend
