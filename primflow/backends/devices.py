"""Devices, Paddle style: ``"cpu"``, ``"gpu"`` / ``"gpu:N"`` (also ``"cuda:N"``).

A device is served by a backend: the CPU by the NumPy backend (or an array-API backend over
a CPU namespace), an NVIDIA GPU by the array-API backend over CuPy (``pip install
'primflow[gpu]'``). ``place_of`` reads where an array lives; ``move`` copies an array to a
device (through the host: no peer-to-peer copies).
"""

from __future__ import annotations

import numpy as np

GPU_EXTRA = "pip install 'primflow[gpu]' (CuPy for CUDA 12)"


class Place:
    """Where a tensor's array lives (Paddle's ``Place``): ``Place(cpu)`` or ``Place(gpu:0)``.
    Compares equal to its device string.

    Example:
        >>> p = Place("cpu")
        >>> p, p == "cpu", p.is_cpu_place(), p.is_gpu_place()
        (Place(cpu), True, True, False)
    """

    __slots__ = ("kind", "index")

    def __init__(self, device="cpu"):
        self.kind, self.index = parse(device)

    def __str__(self):
        return "cpu" if self.kind == "cpu" else f"gpu:{self.index}"

    def __repr__(self):
        return f"Place({self})"

    def __eq__(self, other):
        if isinstance(other, (Place, str)):
            try:
                return parse(other) == (self.kind, self.index)
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self):
        return hash((self.kind, self.index))

    def is_cpu_place(self) -> bool:
        return self.kind == "cpu"

    def is_gpu_place(self) -> bool:
        return self.kind == "gpu"

    def gpu_device_id(self) -> int:
        return self.index if self.kind == "gpu" else -1


def parse(device):
    """``(kind, index)`` of a device string or Place: ``"gpu:1"`` -> ``("gpu", 1)``.

    Example:
        >>> parse("cpu"), parse("gpu"), parse("cuda:1"), parse("GPU:0")
        (('cpu', 0), ('gpu', 0), ('gpu', 1), ('gpu', 0))
    """
    if isinstance(device, Place):
        return device.kind, device.index
    text = str(device).strip().lower()
    name, _, index = text.partition(":")
    if name == "cuda":
        name = "gpu"
    if name not in ("cpu", "gpu") or (index and not index.isdigit()):
        raise ValueError(f"unknown device {device!r}; use 'cpu', 'gpu' or 'gpu:N' (N the GPU's "
                         f"number, e.g. 'gpu:1')")
    return name, int(index or 0)


def _cupy():
    try:
        import cupy  # noqa: PLC0415 - optional dependency
    except ImportError:
        return None
    return cupy


def gpu_count() -> int:
    """How many CUDA GPUs CuPy sees (0 without CuPy or without a GPU).

    Example:
        >>> gpu_count() >= 0
        True
    """
    cupy = _cupy()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - no driver, no device: CuPy raises its own errors
        return 0


def is_compiled_with_cuda() -> bool:
    """Whether primflow can run on a CUDA GPU here: CuPy is installed and sees a GPU.

    Example:
        >>> isinstance(is_compiled_with_cuda(), bool)
        True
    """
    return gpu_count() > 0


def require_gpu(index):
    """CuPy's module, after checking that GPU ``index`` exists (a clear error naming the
    extra to install otherwise)."""
    cupy = _cupy()
    if cupy is None:
        raise RuntimeError(f"device 'gpu:{index}' needs CuPy, which is not installed: "
                           f"{GPU_EXTRA}")
    count = gpu_count()
    if index >= count:
        raise RuntimeError(f"device 'gpu:{index}' does not exist: CuPy sees {count} GPU(s)"
                           + ("; is the NVIDIA driver installed?" if not count else ""))
    return cupy


def place_of(array) -> Place:
    """Where a native array lives.

    Example:
        >>> place_of(np.zeros(2))
        Place(cpu)
    """
    if isinstance(array, (np.ndarray, np.generic)):
        return Place("cpu")
    device = getattr(array, "device", None)
    if hasattr(device, "id") and type(array).__module__.startswith("cupy"):  # CuPy
        return Place(f"gpu:{device.id}")
    if getattr(device, "type", None) == "cuda":  # PyTorch
        return Place(f"gpu:{device.index or 0}")
    return Place("cpu")


def to_host(array):
    """A NumPy array with the values of any backend's array.

    Example:
        >>> to_host(np.ones(2)).tolist()
        [1.0, 1.0]
    """
    if isinstance(array, (np.ndarray, np.generic)):
        return np.asarray(array)
    if type(array).__module__.startswith("cupy"):
        return array.get()
    if hasattr(array, "detach"):  # PyTorch
        return array.detach().cpu().numpy()
    return np.asarray(array)
