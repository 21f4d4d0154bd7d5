"""``pf.device``: Paddle's device functions. ``"cpu"`` runs on NumPy (or the array-API
backend selected with ``pf.set_backend``); ``"gpu"`` / ``"gpu:N"`` on an NVIDIA GPU through
CuPy (``pip install 'primflow[gpu]'``). Asking for a device that is not there is a clear
error, never a silent fallback. Tensors hold the arrays of the device they were made on:
move them with ``x.to(device)``, ``x.cpu()``, ``x.cuda()`` or ``layer.to(device)``."""

from __future__ import annotations

from .backends import backend_for_device, devices, get_backend, set_backend
from .backends.devices import Place  # noqa: F401 - pf.device.Place

__all__ = ["Place", "get_device", "gpu_count", "is_compiled_with_cuda", "set_device"]


def set_device(device: str) -> str:
    """Selects the device new tensors are made and computed on (Paddle's
    ``paddle.set_device``): ``"cpu"``, ``"gpu"`` or ``"gpu:N"``. Returns its name.

    Example:
        >>> import primflow as pf
        >>> pf.set_device("cpu")
        'cpu'
        >>> try:
        ...     pf.set_device("tpu")
        ... except ValueError as e:
        ...     print(str(e)[:24])
        unknown device 'tpu'; us
    """
    name = str(device).strip().lower()
    if name.startswith("cpu:"):  # Paddle accepts a CPU index; there is one CPU
        name = "cpu"
    target = backend_for_device(name)  # raises for unknown devices, missing CuPy or GPU
    kind, index = devices.parse(name)
    if kind == "gpu":
        target.namespace.cuda.Device(index).use()  # CuPy allocates on the current device
    set_backend(target)
    return get_device()


def get_device() -> str:
    """The current device: ``"cpu"`` or ``"gpu:N"``.

    Example:
        >>> import primflow as pf
        >>> pf.get_device()
        'cpu'
    """
    return str(Place(get_backend().place))


def is_compiled_with_cuda() -> bool:
    """Whether primflow can run on a CUDA GPU here (CuPy is installed and sees a GPU;
    Paddle's ``paddle.is_compiled_with_cuda``).

    Example:
        >>> import primflow as pf
        >>> pf.device.is_compiled_with_cuda() in (True, False)
        True
    """
    return devices.is_compiled_with_cuda()


def gpu_count() -> int:
    """How many CUDA GPUs primflow can use (0 without CuPy or a GPU).

    Example:
        >>> gpu_count() >= 0
        True
    """
    return devices.gpu_count()
