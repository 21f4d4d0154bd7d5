"""Backends: the hardware adaptation layer. ``get_backend()`` returns the active one."""

from .base import Backend
from .numpy_backend import NumpyBackend

_active = NumpyBackend()


def get_backend() -> Backend:
    """The backend that primitives run on (NumPy unless another was installed).

    Example:
        >>> get_backend().name
        'numpy'
    """
    return _active


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
    global _active
    from ..core.primitive import bind_kernels  # noqa: PLC0415 - core imports this package

    bind_kernels(backend)
    _active = backend


__all__ = ["Backend", "NumpyBackend", "get_backend", "install"]
