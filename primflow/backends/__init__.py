"""Backends: the hardware adaptation layer. ``get_backend()`` returns the active one."""

from .base import Backend
from .numpy_backend import NumpyBackend

_active = NumpyBackend()


def get_backend() -> Backend:
    """The backend that primitives run on (NumPy unless another was installed)."""
    return _active


__all__ = ["Backend", "NumpyBackend", "get_backend"]
