"""Backends: the hardware adaptation layer. ``get_backend()`` returns the active one."""

import contextlib
import sys

from ..core.backend import install_backend
from ..core.primitive import bind_kernels
from . import devices
from .base import Backend
from .numpy_backend import NumpyBackend

_active = NumpyBackend()
install_backend(_active)  # core holds the active backend too (it cannot import this package)


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
        ...     kernels = {k: v for k, v in NumpyBackend.kernels.items() if k != "gather"}
        >>> try:
        ...     install(Partial())
        ... except ValueError as e:
        ...     print(str(e)[:61])
        backend 'partial' has no kernel for the primitive(s) 'gather'
        >>> get_backend().name
        'numpy'
    """
    global _active
    bind_kernels(backend)
    previous, _active = _active, backend
    # modules keep the backend in a global ``_backend`` for speed: point them at the new one
    for name, module in list(sys.modules.items()):
        if name.startswith("primflow.") and getattr(module, "_backend", None) is previous:
            module._backend = backend
    install_backend(backend)
    for cache in _caches:
        cache.clear()


_caches = []


def register_cache(cache: dict) -> dict:
    """Registers a dict holding native arrays, emptied whenever another backend is installed
    (its arrays would reach the new backend's kernels otherwise); returns it.

    Example:
        >>> constants = register_cache({})
    """
    _caches.append(cache)
    return cache


# ---- selecting a backend by name --------------------------------------------------
_NUMPY = _active
_by_namespace = {}  # one backend per namespace and device: compiled programs are per backend


def make_backend(name, namespace=None, device=None) -> Backend:
    """The backend called ``name`` (``"numpy"``, or ``"array_api"`` over ``namespace``, a
    module following the Python array API standard such as ``array_api_strict``, ``torch``
    or ``cupy``), without installing it. The same arguments give the same object.

    Example:
        >>> make_backend("numpy").name
        'numpy'
    """
    if name == "numpy" and namespace is None:
        return _NUMPY
    if name in ("array_api", "numpy"):
        if namespace is None:
            raise ValueError("set_backend('array_api') needs namespace=, a module following "
                             "the Python array API standard, e.g. array_api_strict or torch")
        key = (id(namespace), device)
        if key not in _by_namespace:
            from .array_api import ArrayAPIBackend  # noqa: PLC0415 - optional dependency

            _by_namespace[key] = ArrayAPIBackend(namespace, device=device)
        return _by_namespace[key]
    raise ValueError(f"unknown backend {name!r}; choose 'numpy' or 'array_api' (with "
                     f"namespace=)")


def set_backend(name, namespace=None):
    """Makes the backend ``name`` the active one (see ``make_backend``) and returns it.
    Tensors hold the arrays of the backend they were made under; mixing backends in one
    operation is an error, so create tensors after selecting.

    Example:
        >>> import array_api_strict
        >>> set_backend("array_api", namespace=array_api_strict).name
        'array_api:array_api_strict'
        >>> set_backend("numpy").name
        'numpy'
    """
    backend = name if isinstance(name, Backend) else make_backend(name, namespace)
    if backend is not _active:
        install(backend)
    return backend


@contextlib.contextmanager
def backend(name, namespace=None):
    """``with backend("array_api", namespace=m):`` runs the block on that backend and
    restores the previous one after it.

    Example:
        >>> import array_api_strict
        >>> with backend("array_api", namespace=array_api_strict) as b:
        ...     get_backend() is b
        True
        >>> get_backend().name
        'numpy'
    """
    previous = _active
    chosen = set_backend(name, namespace)
    try:
        yield chosen
    finally:
        set_backend(previous)


def backend_for_device(device) -> Backend:
    """The backend serving ``device`` (``"cpu"``, ``"gpu"``, ``"gpu:N"``): the active one if
    it is on that device, else NumPy for the CPU or the array-API backend over CuPy for a
    GPU (a clear error when CuPy or the GPU is missing).

    Example:
        >>> backend_for_device("cpu").place
        'cpu'
    """
    kind, index = devices.parse(device)
    if devices.parse(_active.place) == (kind, index):
        return _active
    if kind == "cpu":
        return _NUMPY
    cupy = devices.require_gpu(index)
    return make_backend("array_api", namespace=cupy, device=index)


__all__ = ["Backend", "NumpyBackend", "backend", "get_backend", "install", "make_backend",
           "register_cache", "set_backend"]
