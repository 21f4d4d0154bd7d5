"""Backends: the hardware adaptation layer. ``get_backend()`` returns the active one."""

from ..core.backend import get_backend, install_backend
from ..core.primitive import bind_kernels
from .base import Backend
from .numpy_backend import NumpyBackend

# core holds the active backend (it cannot import this package); NumPy's is the default
install_backend(NumpyBackend())


def install(backend: Backend) -> None:
    """Makes ``backend`` the one primitives run on, after checking that it has a kernel for
    every registered primitive (a ``ValueError`` names the ones it lacks). Install it before
    computing: modules look the backend up when they are imported.

    Example:
        >>> class Partial(NumpyBackend):
        ...     name = "partial"
        ...     kernels = {k: v for k, v in NumpyBackend.kernels.items() if k != "erf"}
        >>> try:
        ...     install(Partial())
        ... except ValueError as e:
        ...     print(str(e)[:58])
        backend 'partial' has no kernel for the primitive(s) 'erf'
        >>> get_backend().name
        'numpy'
    """
    bind_kernels(backend)
    install_backend(backend)


__all__ = ["Backend", "NumpyBackend", "get_backend", "install"]
