"""Matrix products: Intel MKL's GEMM when the optional ``mkl`` package is installed, else
NumPy's ``matmul`` (the OpenBLAS NumPy ships with).

On the AVX-512 machines we measure on, OpenBLAS's double-precision GEMM runs at 35-40
GFLOP/s on one thread for the tall-skinny products of derivative programs
([8192, 128] x [128, 128]); MKL runs the same product at about 75 GFLOP/s, as fast as
XLA's. ``pip install "primflow[mkl]"`` (or ``pip install mkl``) turns it on; primflow
calls ``cblas_?gemm`` of ``libmkl_rt`` through ctypes for 2-d float32 and float64 products,
and ``cblas_?gemm_batch_strided`` for stacks of them (3-d, same batch size), whose matrices
are C- or Fortran-contiguous (a transposed matrix is read in place) and which have at least
``MKL_MIN_WORK`` multiply-adds; everything else, and every product without MKL, goes to
``np.matmul``. ``pf.config.blas = "numpy"`` keeps NumPy's BLAS even when MKL is installed
(read at every product large enough for MKL; MKL is loaded at the first such product). MKL
follows its own thread settings (``MKL_NUM_THREADS``) and ``limit_threads``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import numpy as np

from ..core.config import config

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
# below about a million multiply-adds MKL's call overhead (~10 us) outweighs its speed
MKL_MIN_WORK = 1 << 20
_MKL_THREADING_SEQUENTIAL = 1
_state = {"gemm": None, "batched": {}, "checked": False, "name": "numpy", "lib": None,
          "default_threads": None, "thread_limit": None}
_lock = threading.Lock()


def _find_mkl():
    """The path of ``libmkl_rt`` from the installed ``mkl`` distribution, or None."""
    try:
        from importlib import metadata

        dist = metadata.distribution("mkl")
    except Exception:  # noqa: BLE001 - not installed (or unreadable metadata): no MKL
        return None
    for f in dist.files or ():
        if os.path.basename(str(f)).startswith("libmkl_rt.so"):
            path = os.path.realpath(dist.locate_file(f))
            if os.path.exists(path):
                return path
    return None


def _one_thread():
    for var in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(var)
        if value is not None:
            return value.strip() == "1"
    return False


def _load():
    with _lock:
        if _state["checked"]:
            return _state["gemm"]
        _state["checked"] = True
        path = _find_mkl()
        if path is None:
            return None
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            return None
        if _one_thread() and not os.environ.get("MKL_THREADING_LAYER"):
            # one thread asked for: MKL's sequential layer, without loading an OpenMP
            # runtime (5 MB less resident memory); must precede any other MKL call
            lib.MKL_Set_Threading_Layer(ctypes.c_int(_MKL_THREADING_SEQUENTIAL))
        gemm, batched = {}, {}
        for dtype, name, real in ((np.float32, "sgemm", ctypes.c_float),
                                  (np.float64, "dgemm", ctypes.c_double)):
            f = getattr(lib, "cblas_" + name)
            f.restype = None
            f.argtypes = ([ctypes.c_int] * 6 + [real, ctypes.c_void_p, ctypes.c_int,
                                                ctypes.c_void_p, ctypes.c_int, real,
                                                ctypes.c_void_p, ctypes.c_int])
            gemm[np.dtype(dtype)] = f
            f = getattr(lib, f"cblas_{name}_batch_strided", None)  # MKL 2020 and later
            if f is not None:
                f.restype = None
                stride = ctypes.c_longlong
                f.argtypes = ([ctypes.c_int] * 6 + [real, ctypes.c_void_p, ctypes.c_int, stride,
                                                    ctypes.c_void_p, ctypes.c_int, stride, real,
                                                    ctypes.c_void_p, ctypes.c_int, stride,
                                                    ctypes.c_int])
                batched[np.dtype(dtype)] = f
        lib.MKL_Get_Max_Threads.restype = ctypes.c_int
        lib.MKL_Set_Num_Threads.argtypes = [ctypes.c_int]
        _state.update(gemm=gemm, batched=batched, name="mkl", lib=lib,
                      default_threads=lib.MKL_Get_Max_Threads())
        _apply_thread_limit()
        return gemm


def _apply_thread_limit():
    lib = _state["lib"]
    if lib is not None:
        limit = _state["thread_limit"]
        lib.MKL_Set_Num_Threads(_state["default_threads"] if limit is None else limit)


@contextlib.contextmanager
def limit_threads(n):
    """Runs the block with MKL's products on at most ``n`` threads (``None``: its default),
    also when MKL is first loaded inside the block; restores the previous limit after.

    Example:
        >>> with limit_threads(1):
        ...     pass
    """
    previous = _state["thread_limit"]
    _state["thread_limit"] = n
    _apply_thread_limit()
    try:
        yield
    finally:
        _state["thread_limit"] = previous
        _apply_thread_limit()


def describe() -> str:
    """How matrix products are computed, for reports (``primflow info``, the benchmarks).

    Example:
        >>> describe().startswith(("MKL", "NumPy"))
        True
    """
    if backend_name() == "mkl":
        from importlib import metadata

        return (f"MKL {metadata.version('mkl')} (the optional mkl package; "
                f"pf.config.blas = 'numpy' for NumPy's)")
    return "NumPy's BLAS (pip install mkl for MKL's GEMM)"


def backend_name() -> str:
    """``"mkl"`` when products go to MKL, else ``"numpy"``.

    Example:
        >>> backend_name() in ("mkl", "numpy")
        True
    """
    if config.blas == "numpy":
        return "numpy"
    _load()
    return _state["name"]


def _operand(a):
    """(transpose flag, leading dimension) for reading ``a`` in place, or None."""
    if a.flags.c_contiguous and a.strides[1] == a.itemsize:
        return _NO_TRANS, max(a.shape[1], 1)
    if a.flags.f_contiguous and a.strides[0] == a.itemsize:
        return _TRANS, max(a.shape[0], 1)
    return None


def _batched_operand(a):
    """(transpose flag, leading dimension, batch stride) for reading the stack of matrices
    ``a`` (3-d) in place, or None."""
    item = a.itemsize
    s0, s1, s2 = a.strides
    if s0 % item or s1 % item or s2 % item or s0 < a.shape[1] * a.shape[2] * item:
        return None
    if s2 == item and s1 >= a.shape[2] * item:
        return _NO_TRANS, max(s1 // item, 1), s0 // item
    if s1 == item and s2 >= a.shape[1] * item:
        return _TRANS, max(s2 // item, 1), s0 // item
    return None


def _gemm(a, b, out):
    """MKL's GEMM for matrices ``a`` [m, k] and ``b`` [k, n] into ``out``: True when it
    computed it, False when the operands do not suit it."""
    f = _state["gemm"].get(a.dtype)
    (m, k), n = a.shape, b.shape[1]
    if f is None:
        return False
    ta, tb = _operand(a), _operand(b)
    if ta is None or tb is None:
        return False
    f(_ROW_MAJOR, ta[0], tb[0], m, n, k, 1.0, a.ctypes.data, ta[1], b.ctypes.data, tb[1],
      0.0, out.ctypes.data, max(n, 1))
    return True


def _batched_matmul(a, b, out):
    """MKL's strided batch GEMM for stacks ``a`` [B, m, k] and ``b`` [B, k, n] into
    ``out``: True when it computed it, False when the operands do not suit it."""
    f = _state["batched"].get(a.dtype)
    batch, m, k = a.shape
    n = b.shape[2]
    if f is None:
        return False
    ta, tb = _batched_operand(a), _batched_operand(b)
    if ta is None or tb is None:
        return False
    f(_ROW_MAJOR, ta[0], tb[0], m, n, k, 1.0, a.ctypes.data, ta[1], ta[2], b.ctypes.data,
      tb[1], tb[2], 0.0, out.ctypes.data, max(n, 1), m * n, batch)
    return True


def matmul(a, b, out=None):
    """``np.matmul(a, b, out=out)``, computed by MKL for 2-d float32/float64 operands, and
    for stacks of them (3-d, same batch size) through its strided batch GEMM, when it is
    installed (see the module docstring).

    Example:
        >>> import numpy as np
        >>> matmul(np.eye(2), np.arange(4.0).reshape(2, 2).T).tolist()
        [[0.0, 2.0], [1.0, 3.0]]
    """
    # cheapest tests first: most products in eager code are small, and NumPy is quicker there
    if (2 <= a.ndim == b.ndim <= 3 and a.size * b.shape[-1] >= MKL_MIN_WORK
            and config.blas == "auto"
            and (_state["gemm"] if _state["checked"] else _load()) is not None
            and a.dtype == b.dtype
            and a.shape[:-2] == b.shape[:-2] and a.shape[-1] == b.shape[-2]):
        shape = a.shape[:-1] + b.shape[-1:]
        if out is None:
            out = np.empty(shape, dtype=a.dtype)  # np.matmul below writes it if MKL does not
        if (out.dtype == a.dtype and out.shape == shape and out.flags.c_contiguous
                and not np.may_share_memory(out, a) and not np.may_share_memory(out, b)
                and (_gemm if a.ndim == 2 else _batched_matmul)(a, b, out)):
            return out
    return np.matmul(a, b, out=out)
