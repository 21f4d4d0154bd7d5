"""Backends: the hardware adaptation layer. ``get_backend()`` returns the active one."""

from ..core.backend import get_backend, install_backend
from .base import Backend
from .numpy_backend import NumpyBackend

# core holds the active backend (it cannot import this package); NumPy's is the default
install_backend(NumpyBackend())


__all__ = ["Backend", "NumpyBackend", "get_backend"]
