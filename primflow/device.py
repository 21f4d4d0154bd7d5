"""``pf.device``: Paddle's device functions. primflow runs on the CPU (NumPy), so ``"cpu"``
is the only device; asking for another is a clear error, not a silent fallback."""

from __future__ import annotations

_DEVICE = "cpu"


def set_device(device: str) -> str:
    """Selects the device; only ``"cpu"`` exists (Paddle's ``paddle.set_device``).

    Example:
        >>> import primflow as pf
        >>> pf.set_device("cpu")
        'cpu'
    """
    name = str(device).lower()
    if name != "cpu" and not name.startswith("cpu:"):
        raise ValueError(f"set_device: primflow runs on the CPU only, got {device!r}; use "
                         f"'cpu' (pf.is_compiled_with_cuda() is False)")
    return _DEVICE


def get_device() -> str:
    """The current device, always ``"cpu"``. Example: ``pf.get_device()`` gives 'cpu'.

    Example:
        >>> import primflow as pf
        >>> pf.get_device()
        'cpu'
    """
    return _DEVICE


def is_compiled_with_cuda() -> bool:
    """False: primflow has no CUDA build (Paddle's ``paddle.is_compiled_with_cuda``).

    Example:
        >>> import primflow as pf
        >>> pf.is_compiled_with_cuda()
        False
    """
    return False
